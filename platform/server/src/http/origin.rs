//! Origin validation on `/mcp`, `/t/{tenant}/mcp` and `/admin/v1`.
//!
//! The MCP Streamable HTTP transport requires a server to validate the
//! `Origin` header of every request and refuse an unacceptable one with
//! 403, so that a web page the user happens to visit cannot drive a server
//! reachable from the browser (DNS rebinding, cross-site requests to a
//! local server). The admin API gets the same check: no browser page has
//! a reason to drive it.
//!
//! Rules (setting `allowed_origins`, `config.rs`):
//! - a request without `Origin` passes (a non-browser client; browsers
//!   send it on every cross-origin and every POST request);
//! - a present `Origin` must match an allowed origin by (scheme, host,
//!   port) as RFC 6454 compares them: scheme and host case-insensitively,
//!   a missing port meaning the scheme's default;
//! - `Origin: null` (sandboxed frames, `file:` pages) passes only when
//!   `null` is listed; several `Origin` headers, or one that is not an
//!   origin, never pass;
//! - by default the allowed origins are the server's public URL origin
//!   and the loopback origins `http://localhost`, `http://127.0.0.1` and
//!   `http://[::1]` on any port.
//!
//! The check runs before authentication and before rmcp sees the request,
//! so a refused request creates no session. rmcp's own Origin check
//! (`StreamableHttpServerConfig::with_allowed_origins`) is not used: an
//! empty list there means no check at all, an entry without a port
//! matches every port, and it does not cover the admin API.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::origins::{AllowedOrigin, parse_tuple};

/// Why a request's `Origin` is refused (403, before anything else).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum OriginRefused {
    /// Occurs when a request carries more than one `Origin` header.
    #[error("Forbidden: more than one Origin header")]
    Several,
    /// Occurs when the `Origin` header is not an origin.
    #[error("Forbidden: the Origin header '{0}' is not an origin")]
    NotAnOrigin(String),
    /// Occurs when the origin is not one of `allowed_origins`.
    #[error(
        "Forbidden: Origin '{0}' is not allowed on this server; requests from web pages must come from an origin listed in the server's allowed_origins setting"
    )]
    NotAllowed(String),
}

/// The origins a server accepts.
#[derive(Clone, Debug)]
pub(crate) struct OriginPolicy {
    allowed: Vec<AllowedOrigin>,
}

/// The loopback origins allowed by default, any port.
pub(crate) const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

impl OriginPolicy {
    /// The policy of `allowed_origins` (entries that do not parse are
    /// skipped; `Settings::check` refuses them at start), or the default
    /// for `public_url` when the list is empty.
    pub(crate) fn new(allowed_origins: &[String], public_url: &str) -> OriginPolicy {
        let entries: Vec<String> = if allowed_origins.is_empty() {
            let mut entries: Vec<String> = LOOPBACK_ORIGINS.iter().map(|origin| (*origin).to_owned()).collect();
            if let Ok(url) = reqwest::Url::parse(public_url) {
                entries.push(url.origin().ascii_serialization());
            }
            entries
        } else {
            allowed_origins.to_vec()
        };
        OriginPolicy { allowed: entries.iter().filter_map(|entry| AllowedOrigin::parse(entry).ok()).collect() }
    }

    /// Whether a request with these headers may proceed.
    ///
    /// # Errors
    /// [`OriginRefused`], the message of the 403, when its `Origin` is not
    /// allowed.
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), OriginRefused> {
        let mut values = headers.get_all(header::ORIGIN).iter();
        let Some(value) = values.next() else { return Ok(()) };
        if values.next().is_some() {
            return Err(OriginRefused::Several);
        }
        let Ok(text) = value.to_str() else {
            return Err(OriginRefused::NotAnOrigin(String::from_utf8_lossy(value.as_bytes()).into_owned()));
        };
        let text = text.trim();
        let origin = if text.eq_ignore_ascii_case("null") {
            None
        } else {
            match parse_tuple(text, false) {
                Ok((tuple, _)) => Some(tuple),
                Err(_) => return Err(OriginRefused::NotAnOrigin(text.to_owned())),
            }
        };
        if self.allowed.iter().any(|allowed| allowed.admits(&origin)) {
            Ok(())
        } else {
            Err(OriginRefused::NotAllowed(text.to_owned()))
        }
    }
}

fn forbidden(body: serde_json::Value) -> Response {
    let mut response = (StatusCode::FORBIDDEN, body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The middleware of the MCP endpoints: a refused Origin gets 403 with a
/// JSON-RPC error without `id` (as the MCP transport allows).
pub(crate) async fn mcp_origin(State(policy): State<Arc<OriginPolicy>>, request: Request, next: Next) -> Response {
    match policy.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refused) => {
            forbidden(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": refused.to_string()}}))
        }
    }
}

/// The middleware of the admin API: a refused Origin gets 403 with the
/// admin API's error body.
pub(crate) async fn admin_origin(State(policy): State<Arc<OriginPolicy>>, request: Request, next: Next) -> Response {
    match policy.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refused) => forbidden(json!({"error": {"code": "forbidden_origin", "message": refused.to_string()}})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(policy: &OriginPolicy, origin: Option<&str>) -> bool {
        let mut headers = HeaderMap::new();
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        policy.check(&headers).is_ok()
    }

    #[test]
    fn the_default_admits_loopback_and_the_public_origin_only() {
        let policy = OriginPolicy::new(&[], "https://mcp.example.com/base");
        for good in [
            None,
            Some("http://localhost"),
            Some("http://localhost:6274"),
            Some("HTTP://LOCALHOST:6274"),
            Some("http://127.0.0.1:8480"),
            Some("http://[::1]:3000"),
            Some("https://mcp.example.com"),
            Some("https://MCP.example.com:443"),
        ] {
            assert!(check(&policy, good), "{good:?} must pass");
        }
        for bad in [
            Some("https://evil.example"),
            Some("null"),
            Some("https://localhost:6274"),
            Some("http://mcp.example.com"),
            Some("https://mcp.example.com:8443"),
            Some("http://localhost.evil.example"),
            Some("http://127.0.0.1.evil.example:80"),
            Some("http://localhost:6274/path"),
            Some("not an origin"),
            Some("http://localhost:99999"),
            Some("http://localhost:0"),
            Some("http://localhost:"),
            Some("http://localhost:+80"),
            Some("http://[::1]:65536"),
        ] {
            assert!(!check(&policy, bad), "{bad:?} must be refused");
        }
    }

    #[test]
    fn configured_entries_follow_rfc_6454_ports() {
        let allowed: Vec<String> =
            ["https://app.example", "http://dev.example:*", "null"].iter().map(|s| (*s).to_owned()).collect();
        let policy = OriginPolicy::new(&allowed, "http://127.0.0.1:8480");
        assert!(check(&policy, Some("https://app.example")));
        assert!(check(&policy, Some("https://app.example:443")));
        assert!(!check(&policy, Some("https://app.example:444")), "a port-less entry is the default port only");
        assert!(check(&policy, Some("http://dev.example:1234")));
        assert!(check(&policy, Some("null")));
        assert!(!check(&policy, Some("http://localhost:3000")), "a configured list replaces the default");
        let any = OriginPolicy::new(&["*".to_owned()], "http://127.0.0.1:8480");
        assert!(check(&any, Some("https://anything.example")));
    }

    #[test]
    fn two_origin_headers_are_refused() {
        let policy = OriginPolicy::new(&[], "http://127.0.0.1:8480");
        let mut headers = HeaderMap::new();
        headers.append(header::ORIGIN, HeaderValue::from_static("http://localhost"));
        headers.append(header::ORIGIN, HeaderValue::from_static("http://localhost"));
        assert!(policy.check(&headers).is_err());
    }

    #[test]
    fn entries_that_are_not_origins_are_refused() {
        for bad in ["localhost:3000", "https://a.example/path", "https://user@a.example", "https://a.example:1:*"] {
            assert!(AllowedOrigin::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(AllowedOrigin::parse("*"), Ok(AllowedOrigin::Any));
    }
}
