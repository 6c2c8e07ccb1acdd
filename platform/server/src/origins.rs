//! What an origin is and how `allowed_origins` entries are written: the
//! grammar shared by the settings' check (an entry that is no origin
//! pattern stops the start) and the HTTP edge's Origin validation
//! (`http::origin`). RFC 6454 comparison: scheme and host
//! case-insensitively, a missing port meaning the scheme's default.

/// Which ports an allowed origin covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ports {
    /// `scheme://host:*`
    Any,
    /// An explicit port, or the scheme's default when the entry has none
    /// (`None` for a scheme without a default and no port).
    Exact(Option<u16>),
}

/// One entry of `allowed_origins`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AllowedOrigin {
    /// `*`: every origin.
    Any,
    /// `null`: the opaque origin.
    Null,
    /// `scheme://host[:port|:*]`.
    Tuple {
        /// Lower-case scheme.
        scheme: String,
        /// Lower-case host (IPv6 in brackets).
        host: String,
        /// Ports covered.
        ports: Ports,
    },
}

/// Occurs when an entry of `allowed_origins` is not an origin pattern.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum OriginError {
    /// Occurs when the text is not `scheme://host[:port]`.
    #[error("'{0}' is not an origin (scheme://host[:port])")]
    NotAnOrigin(String),
    /// Occurs when the text has a path, a query or a user.
    #[error("'{0}' is not an origin: only scheme://host[:port], no path, query or user")]
    Extra(String),
    /// Occurs when the text names a port and `:*`.
    #[error("'{0}' names a port and ':*'")]
    PortAndWildcard(String),
}

/// The (scheme, host, port) of an origin, port defaulted by scheme.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tuple {
    scheme: String,
    host: String,
    port: Option<u16>,
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

/// Parses `scheme://host[:port]` with nothing after the authority (a `/`
/// alone is tolerated when `allow_slash`). Returns the tuple and whether a
/// port was written.
pub(crate) fn parse_tuple(text: &str, allow_slash: bool) -> Result<(Tuple, bool), OriginError> {
    let uri: axum::http::Uri = text.parse().map_err(|_| OriginError::NotAnOrigin(text.to_owned()))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(OriginError::NotAnOrigin(text.to_owned()));
    };
    // `http::Uri` may report an empty path as `/`: the text decides.
    let path_ok = matches!(uri.path(), "" | "/") && (allow_slash || !text.ends_with('/'));
    if !path_ok || uri.query().is_some() || authority.as_str().contains('@') || authority.host().is_empty() {
        return Err(OriginError::Extra(text.to_owned()));
    }
    // A port that is written must be one: `localhost:99999` or
    // `localhost:` is no origin (`http::Uri` reads a port it cannot parse
    // as none, which would stand for the scheme's default port).
    let written_port = authority.as_str().strip_prefix(authority.host()).and_then(|rest| rest.strip_prefix(':'));
    if written_port.is_some_and(|port| port.parse::<u16>().is_err() || port == "0" || port.starts_with('+')) {
        return Err(OriginError::NotAnOrigin(text.to_owned()));
    }
    let scheme = scheme.to_ascii_lowercase();
    let written = authority.port_u16();
    let port = written.or_else(|| default_port(&scheme));
    Ok((Tuple { scheme, host: authority.host().to_ascii_lowercase(), port }, written.is_some()))
}

impl AllowedOrigin {
    /// Parses one entry of `allowed_origins`.
    ///
    /// # Errors
    /// [`OriginError`] naming the entry when it is not `*`, `null` or
    /// `scheme://host[:port|:*]`.
    pub(crate) fn parse(text: &str) -> Result<AllowedOrigin, OriginError> {
        let text = text.trim();
        if text == "*" {
            return Ok(AllowedOrigin::Any);
        }
        if text.eq_ignore_ascii_case("null") {
            return Ok(AllowedOrigin::Null);
        }
        if let Some(base) = text.strip_suffix(":*") {
            let (tuple, written) = parse_tuple(base, false)?;
            if written {
                return Err(OriginError::PortAndWildcard(text.to_owned()));
            }
            return Ok(AllowedOrigin::Tuple { scheme: tuple.scheme, host: tuple.host, ports: Ports::Any });
        }
        let (tuple, _) = parse_tuple(text, true)?;
        Ok(AllowedOrigin::Tuple { scheme: tuple.scheme, host: tuple.host, ports: Ports::Exact(tuple.port) })
    }

    /// Whether this entry admits `origin` (`None`: the opaque origin).
    pub(crate) fn admits(&self, origin: &Option<Tuple>) -> bool {
        match (self, origin) {
            (AllowedOrigin::Any, _) => true,
            (AllowedOrigin::Null, None) => true,
            (AllowedOrigin::Tuple { scheme, host, ports }, Some(origin)) => {
                *scheme == origin.scheme
                    && *host == origin.host
                    && match ports {
                        Ports::Any => true,
                        Ports::Exact(port) => *port == origin.port,
                    }
            }
            _ => false,
        }
    }
}
