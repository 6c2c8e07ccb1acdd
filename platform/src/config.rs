//! The server's settings: defaults, a TOML file, `PILOTAGE_*` environment
//! variables and command-line flags, in rising precedence.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::engine::Bounds;
use crate::protocol::retention::Retention;

/// Every server setting, with its default.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Where `/mcp` listens. Default `127.0.0.1:8480`.
    pub listen: SocketAddr,
    /// Where the SQLite file and the compiled-code cache live. Default
    /// `.pilotage` in the working directory.
    pub data_dir: PathBuf,
    /// `sqlite:PATH` or `postgres://…`. Default: `sqlite:` in `data_dir`.
    pub database_url: Option<String>,
    /// Load the demo tenant, the bundled Languages, the demo catalog and
    /// start the demo capability service. Default true.
    pub demo: bool,
    /// The base URL clients use to reach this server (no trailing `/`).
    /// Default `http://<listen>`.
    pub public_url: Option<String>,
    /// Host header values accepted (DNS-rebinding protection). Default:
    /// loopback names plus the public URL's host.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted; empty disables the Origin check.
    pub allowed_origins: Vec<String>,
    /// Retention of run records (Part II §6.6): `none`, `session` or an
    /// ISO 8601 duration. Default `PT24H`.
    pub retention: String,
    /// Largest request body accepted on `/mcp`, in bytes. Default 4 MiB.
    pub max_body_bytes: usize,
    /// Time allowed for one POST on `/mcp`, in milliseconds. Default
    /// 60 000 (above the execution wall-time bound).
    pub request_timeout_ms: u64,
    /// An MCP session idle for this many seconds ends (and its
    /// session-retained runs are deleted). Default 1800.
    pub session_idle_secs: u64,
    /// Where the demo capability service listens; default: a free
    /// loopback port.
    pub demo_world_listen: Option<SocketAddr>,
    /// The PostgreSQL server where the demo creates its sales database for
    /// `sql/postgres-15` (a role that may create schemas and roles).
    /// Default `postgres://postgres@127.0.0.1:5432/test`; `off` leaves the
    /// demo tenant without the SQL Language.
    pub demo_postgres: String,
    /// The tenant of the development principal every request acts as until
    /// authentication is configured. Default `demo`.
    pub dev_tenant: String,
    /// The development principal's subject. Default `dev`.
    pub dev_subject: String,
    /// Evaluation bounds.
    pub bounds: Bounds,
    /// Leases of idempotency claims (Part II §6.5.6).
    pub idempotency: crate::operations::idempotency::IdempotencySettings,
    /// Agent authentication.
    pub auth: crate::auth::AuthSettings,
    /// The operator token of the admin API (`PILOTAGE_ADMIN_TOKEN`); none
    /// means only bearer tokens with an admin scope are accepted.
    pub admin_token: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 8480)),
            data_dir: PathBuf::from(".pilotage"),
            database_url: None,
            demo: true,
            public_url: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            retention: "PT24H".to_owned(),
            max_body_bytes: 4 << 20,
            request_timeout_ms: 60_000,
            session_idle_secs: 1800,
            demo_world_listen: None,
            demo_postgres: crate::datasource::demo::DEFAULT_ADMIN_URL.to_owned(),
            dev_tenant: "demo".to_owned(),
            dev_subject: "dev".to_owned(),
            bounds: Bounds::default(),
            idempotency: Default::default(),
            auth: crate::auth::AuthSettings::default(),
            admin_token: None,
        }
    }
}

/// Occurs when settings cannot be read or are inconsistent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Occurs when the file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Occurs when the file is not valid TOML for [`Settings`].
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the field.
        message: String,
    },
    /// Occurs when a value is out of its domain.
    #[error("setting '{field}': {message}")]
    Invalid {
        /// The setting's name.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl Settings {
    /// Reads a TOML settings file.
    ///
    /// # Errors
    /// [`ConfigError`] when the file is unreadable or invalid.
    pub fn from_file(path: &Path) -> Result<Settings, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        toml::from_str(&text).map_err(|error| ConfigError::Parse { path: path.to_owned(), message: error.to_string() })
    }

    /// The database URL in effect.
    pub fn database_url(&self) -> String {
        self.database_url.clone().unwrap_or_else(|| format!("sqlite:{}", self.data_dir.join("pilotage.db").display()))
    }

    /// The public base URL in effect, without a trailing `/`.
    pub fn public_url(&self) -> String {
        self.public_url.clone().unwrap_or_else(|| format!("http://{}", self.listen)).trim_end_matches('/').to_owned()
    }

    /// This resource's identifier, which tokens must carry as `aud`:
    /// `<public url>/mcp`.
    pub fn resource(&self) -> String {
        format!("{}/mcp", self.public_url())
    }

    /// The retention in effect.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] when it is not a retention value.
    pub fn retention(&self) -> Result<Retention, ConfigError> {
        Retention::parse(&self.retention)
            .map_err(|error| ConfigError::Invalid { field: "retention", message: error.to_string() })
    }

    /// Host names accepted in the `Host` header.
    pub fn allowed_hosts(&self) -> Vec<String> {
        if !self.allowed_hosts.is_empty() {
            return self.allowed_hosts.clone();
        }
        let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
        if let Ok(url) = reqwest::Url::parse(&self.public_url())
            && let Some(host) = url.host_str()
        {
            let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
        hosts
    }

    /// Checks cross-field consistency.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the first inconsistent setting.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.retention()?;
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid { field: "max_body_bytes", message: "must be at least 1024".into() });
        }
        if self.request_timeout_ms <= self.bounds.execution.wall_time_ms {
            return Err(ConfigError::Invalid {
                field: "request_timeout_ms",
                message: format!(
                    "must exceed the execution wall-time bound ({} ms), or long Runs would be cut off mid-response",
                    self.bounds.execution.wall_time_ms
                ),
            });
        }
        self.idempotency.check().map_err(|(field, message)| ConfigError::Invalid { field, message })?;
        if let Some(url) = &self.public_url
            && reqwest::Url::parse(url).is_err()
        {
            return Err(ConfigError::Invalid { field: "public_url", message: format!("'{url}' is not a URL") });
        }
        match self.auth.mode {
            crate::auth::AuthMode::Dev if !self.listen.ip().is_loopback() => {
                return Err(ConfigError::Invalid {
                    field: "auth",
                    message: format!("dev authentication only runs on loopback, not {}; use --auth jwt", self.listen),
                });
            }
            crate::auth::AuthMode::Jwt if self.auth.issuers.is_empty() => {
                return Err(ConfigError::Invalid {
                    field: "auth",
                    message: "--auth jwt needs at least one --jwt-issuer with its --jwt-jwks-url".into(),
                });
            }
            _ => {}
        }
        if self.admin_token.as_ref().is_some_and(|token| token.len() < 16) {
            return Err(ConfigError::Invalid { field: "admin_token", message: "use at least 16 characters".into() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_consistent() {
        let settings = Settings::default();
        settings.check().unwrap();
        assert!(settings.database_url().starts_with("sqlite:"));
        assert_eq!(settings.public_url(), "http://127.0.0.1:8480");
        assert!(settings.allowed_hosts().contains(&"localhost".to_owned()));
    }

    #[test]
    fn a_file_overrides_defaults_and_rejects_unknown_keys() {
        let parsed: Settings =
            toml::from_str("retention = \"session\"\n[bounds.execution]\nfuel = 5\nwall_time_ms = 100\n").unwrap();
        assert_eq!(parsed.retention().unwrap(), Retention::Session);
        assert_eq!(parsed.bounds.execution.fuel, 5);
        assert!(toml::from_str::<Settings>("listn = \"x\"").is_err());
    }

    #[test]
    fn inconsistent_values_are_named() {
        let settings = Settings { retention: "forever".into(), ..Settings::default() };
        assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: "retention", .. })));
        let settings = Settings { request_timeout_ms: 10, ..Settings::default() };
        assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: "request_timeout_ms", .. })));
    }
}
