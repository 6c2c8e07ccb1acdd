//! The server's settings, one type ([`Settings`]) filled in rising
//! precedence by its defaults, a TOML file, `PILOTAGE_*` environment
//! variables and command-line flags. [`FLAGS`] names the settings a flag
//! and a variable set; each value given there is parsed by the same serde
//! rules as the file ([`Settings::with_overrides`]), so a setting has one
//! name, one type and one check whichever way it arrives.
//!
//! This module holds the type, its defaults and the overrides; the flag
//! table is in `flags`, the cross-field checks in `check` and the server
//! card's members in `server_card`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use pilotage_engine::Bounds;
use pilotage_protocol::retention::Retention;

mod check;
mod flags;
mod server_card;

pub use flags::{FLAGS, Flag, ISSUER_FLAGS};
pub use server_card::{CardIcon, ServerCardSettings};

/// The largest `max_connections` accepted.
pub const MAX_CONNECTIONS_LIMIT: usize = 1 << 20;

/// Every server setting, with its default.
#[derive(Clone, Debug, Deserialize, Serialize)]
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
    /// Serve the operator console at `/console` (`crate::console`):
    /// server-rendered pages of each tenant's Languages, catalog, data
    /// sources, deployments, retained Runs and audit log, for the operator
    /// and for tenants' readers (`pilotage:console`). Default false: off,
    /// no console route exists.
    pub console: bool,
    /// Sign-in to the console with OpenID Connect (settings file
    /// `[console_sign_in]`); the pasted credential stays beside it.
    pub console_sign_in: Option<crate::auth::ConsoleSignIn>,
    /// The base URL clients use to reach this server (no trailing `/`).
    /// Default `http://<listen>`.
    pub public_url: Option<String>,
    /// Host header values accepted (DNS-rebinding protection). Default:
    /// loopback names plus the public URL's host.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted in an `Origin` header on `/mcp`,
    /// `/t/{tenant}/mcp` and `/admin/v1` (the MCP transport's Origin
    /// validation). Each entry is `scheme://host` (the scheme's default
    /// port only), `scheme://host:port`, `scheme://host:*` (any port),
    /// `null` (the opaque origin of sandboxed or `file:` pages) or `*` (no
    /// check at all). Scheme and host compare case-insensitively. Default
    /// (empty): the public URL's origin plus the loopback origins
    /// `http://localhost`, `http://127.0.0.1` and `http://[::1]` on any
    /// port. A request without `Origin` (a non-browser client) always
    /// passes; one whose `Origin` matches no entry gets 403 before it is
    /// authenticated or reaches a session (`http::origin`, the grammar in `origins`).
    pub allowed_origins: Vec<String>,
    /// Addresses of the load balancers or proxies in front of this server
    /// (IP addresses, v4 or v6). A request whose connection comes from one
    /// of them is attributed to the client its `X-Forwarded-For` names (the
    /// rightmost entry that is not itself a trusted proxy); any other
    /// request to its connection's address, whatever headers it sends.
    /// Sign-in throttling counts failures per client address
    /// (`admin::throttle`). Default empty: every request is its
    /// connection's.
    pub trusted_proxies: Vec<String>,
    /// Retention of run records (Part II §6.6): `none`, `session` or an
    /// ISO 8601 duration. Default `PT24H`.
    pub retention: String,
    /// Largest request body accepted on `/mcp`, in bytes. Default 4 MiB.
    pub max_body_bytes: usize,
    /// Time allowed for one POST on `/mcp`, in milliseconds. Default
    /// 60 000 (above the execution wall-time bound).
    pub request_timeout_ms: u64,
    /// How long an execute held for approval waits in the same call for a
    /// human's decision, in milliseconds, when the client can show the
    /// approval page (MCP URL-mode elicitation; `crate::policy`). Default
    /// 20 000, and never more than `request_timeout_ms` less the execution
    /// wall-time bound and a second (an approved Run runs in the call that
    /// waited). Failure mode: past it the call answers `approval_required`
    /// saying it waited, and the agent retries.
    pub approval_wait_ms: u64,
    /// Time a connection has to send a complete request head (request line
    /// and headers), in milliseconds; it also bounds how long an idle
    /// keep-alive connection waits for its next request. Default 10 000.
    /// Failure mode: the connection is closed without a response (hyper's
    /// `header_read_timeout`).
    pub header_read_timeout_ms: u64,
    /// Time a request's whole body has to arrive once its head has been
    /// read, in milliseconds, on `/mcp` and on the admin API (so a request
    /// is read within `header_read_timeout_ms + body_read_timeout_ms` of
    /// its first byte). Default 30 000 (a 32 MiB Language upload needs
    /// about 9 Mbit/s). Failure mode: 408 (a JSON-RPC error on `/mcp`, an
    /// `{"error"}` body on the admin API) with `Connection: close`.
    pub body_read_timeout_ms: u64,
    /// Most connections open at once on the listener (MCP, admin API and
    /// probes together). Default 1024. Failure mode: past it the server
    /// accepts nothing more until a connection closes; new connections
    /// wait in the kernel's listen backlog (their connect succeeds, their
    /// request is read only when a place frees), and a client's own
    /// connect or read timeout ends the wait. With `header_read_timeout_ms`
    /// an idle or trickling connection frees its place within that bound.
    pub max_connections: usize,
    /// An MCP session idle for this many seconds ends (and its
    /// session-retained runs are deleted). Default 1800. With replicas on
    /// PostgreSQL, idle means unused on every replica (`fleet::sessions`).
    pub session_idle_secs: u64,
    /// Most MCP sessions one principal (tenant and subject) may hold open
    /// at once. Default 64 (a busy agent host opening one session per
    /// conversation, with room to spare). At it, a new `initialize`
    /// closes the principal's least recently used idle session (no request
    /// in flight, no open stream), whose next use gets 404 and initializes
    /// again; only when every session of the principal is busy is the
    /// `initialize` refused with HTTP 429, `Retry-After` and a JSON-RPC
    /// error. Each idle session costs about 120 KB. Counted per replica
    /// (the sessions this process holds), so a fleet of N replicas holds at
    /// most N times it.
    pub max_sessions_per_principal: usize,
    /// Most MCP sessions one tenant may hold open at once, over all its
    /// principals. Default 1024 (about 120 MB of idle sessions). At it, the
    /// caller's own least recently used idle session is closed; a caller
    /// with none is refused (429) until another's session ends.
    pub max_sessions_per_tenant: usize,
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
    /// The node's capacity for component calls: the totals of the
    /// validation and execution pools (0: derived for the node when the
    /// server starts; `pilotage_engine::capacity`), and the admission
    /// queue's bounds (`pilotage_engine::admission`). docs/architecture.md
    /// ("Capacity") says how to size them.
    pub capacity: pilotage_engine::Capacity,
    /// Leases of idempotency claims (Part II §6.5.6).
    pub idempotency: crate::operations::leases::IdempotencySettings,
    /// Where tenants may make the platform connect (MQTT brokers, data
    /// sources, HTTP bindings): `allow_private` (default: the demo's
    /// value) and operator-wide CIDRs (`crate::egress`).
    pub egress: crate::egress::EgressSettings,
    /// Tenants' policies on risk set by this file (`[policies.<tenant>]`,
    /// each a `crate::policy::Policy`): at start each is stored on its
    /// tenant (when it differs, audited as set by `settings`), so a file the
    /// chart mounts decides them; a policy set later through the admin API
    /// holds until the next start. A tenant that does not exist is logged
    /// and skipped.
    pub policies: std::collections::BTreeMap<String, crate::policy::Policy>,
    /// What the MCP server card (`/mcp/server-card`) says of this server.
    pub server_card: ServerCardSettings,
    /// Agent authentication.
    pub auth: crate::auth::AuthSettings,
    /// The operator token of the admin API (`PILOTAGE_ADMIN_TOKEN`); none
    /// means only bearer tokens with an admin scope are accepted.
    pub admin_token: Option<String>,
    /// Largest JSON body of an admin API route, in bytes. Default 4 MiB.
    /// A larger body is refused with 413 (`body_too_large`), read no
    /// further; the credential is checked before any body is read.
    pub admin_max_body_bytes: usize,
    /// Largest Language component upload, in bytes. Default 32 MiB.
    /// Refused like `admin_max_body_bytes`; it bounds the files of
    /// `languages` too.
    pub max_component_bytes: usize,
    /// Language component files (`.wasm`) served for the demo tenant, the
    /// local loop of a Language author (`pilotage serve --language PATH`,
    /// repeatable; `PILOTAGE_LANGUAGES`, comma-separated; TOML
    /// `languages = ["…"]`). Default: none. Each file is loaded, described
    /// and linted as an upload is (Part II §5.1–§5.2, §10.1) and served in
    /// addition to the bundled Languages; one whose Language name equals a
    /// bundled or uploaded one replaces it for the demo tenant. Each file
    /// is watched and reloaded when it changes, and connected sessions get
    /// `notifications/tools/list_changed` (Part III §4.7). Failure mode: a
    /// file that cannot be read or loaded, or whose lint finds an error,
    /// stops the start with the findings; later, such a version is refused
    /// with a logged warning and the previous one keeps serving
    /// (`language_watch`). Needs `demo`.
    pub languages: Vec<PathBuf>,
    /// Where `/metrics` (the Prometheus exposition, `http::metrics`) is
    /// served on a listener of its own, which serves nothing else; it asks
    /// for `metrics_token` too when that is set. Default: none. Bind it
    /// where only the scraper reaches it. Failure mode: an address that
    /// cannot be bound stops the start.
    pub metrics_listen: Option<SocketAddr>,
    /// A bearer token for `/metrics` (`PILOTAGE_METRICS_TOKEN`, at least
    /// 16 characters). Without `metrics_listen`, `/metrics` is served on
    /// the main listener to requests with `Authorization: Bearer <token>`
    /// and answers 401 to any other. Default: none. With neither setting,
    /// metrics are neither recorded nor served (404). Labels hold no tenant, subject,
    /// session or run id; tool and Language names are bounded by what the
    /// deployment installs (at most 256 values each, then `_other`).
    pub metrics_token: Option<String>,
    /// The base URL of an OTLP/HTTP receiver (a collector), e.g.
    /// `http://127.0.0.1:4318`: spans are exported as protobuf to
    /// `<url>/v1/traces` (`telemetry::otlp`). Default: none; then the
    /// standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, when set, turn export on; with
    /// neither, nothing is exported and spans cost nothing. The other
    /// `OTEL_*` variables (headers, `OTEL_SERVICE_NAME`,
    /// `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`) apply. Failure mode: a
    /// receiver that does not answer loses the batches it was sent (each
    /// waits at most 10 s); serving goes on.
    pub otlp_endpoint: Option<String>,
    /// The format of log lines on stderr: `text` (default) or `json`. In
    /// an exported trace each line carries its `trace_id`.
    pub log_format: crate::telemetry::logs::LogFormat,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 8480)),
            data_dir: PathBuf::from(".pilotage"),
            database_url: None,
            demo: true,
            console: false,
            console_sign_in: None,
            public_url: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            trusted_proxies: Vec::new(),
            retention: "PT24H".to_owned(),
            max_body_bytes: 4 << 20,
            request_timeout_ms: 60_000,
            approval_wait_ms: 20_000,
            session_idle_secs: 1800,
            max_sessions_per_principal: 64,
            max_sessions_per_tenant: 1024,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            max_connections: 1024,
            demo_world_listen: None,
            demo_postgres: crate::datasource::demo::DEFAULT_ADMIN_URL.to_owned(),
            dev_tenant: "demo".to_owned(),
            dev_subject: "dev".to_owned(),
            bounds: Bounds::default(),
            capacity: pilotage_engine::Capacity::default(),
            idempotency: Default::default(),
            egress: Default::default(),
            policies: Default::default(),
            server_card: ServerCardSettings::default(),
            auth: crate::auth::AuthSettings::default(),
            admin_token: None,
            admin_max_body_bytes: 4 << 20,
            max_component_bytes: 32 << 20,
            languages: Vec::new(),
            metrics_listen: None,
            metrics_token: None,
            otlp_endpoint: None,
            log_format: crate::telemetry::logs::LogFormat::Text,
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
    /// Occurs when a flag's or an environment variable's value does not
    /// fit its setting.
    #[error("{flag}: {message}")]
    Flag {
        /// The flag (`--listen`), naming its variable too.
        flag: String,
        /// What is wrong.
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

    /// Whether tenants may reach non-public addresses without a CIDR for
    /// them: `egress.allow_private`, or the demo's value when unset.
    pub fn egress_allow_private(&self) -> bool {
        self.egress.allow_private.unwrap_or(self.demo)
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

    /// [`Settings::trusted_proxies`], parsed.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `trusted_proxies` when an entry is
    /// not an IP address.
    pub fn trusted_proxies(&self) -> Result<Vec<std::net::IpAddr>, ConfigError> {
        self.trusted_proxies
            .iter()
            .map(|text| {
                text.trim().parse().map_err(|_| ConfigError::Invalid {
                    field: "trusted_proxies",
                    message: format!("'{text}' is not an IP address"),
                })
            })
            .collect()
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
}

/// A value given to a setting by a flag or an environment variable.
#[derive(Clone, Debug, PartialEq)]
pub enum Override {
    /// One value, as typed.
    One(String),
    /// A repeated flag's values (or a comma-separated variable's).
    Many(Vec<String>),
    /// A value already shaped as the setting (the paired issuers).
    Json(Value),
}

/// `auth.issuers` from the paired issuer flags, `None` when neither is
/// given.
///
/// # Errors
/// [`ConfigError::Flag`] when the two lists differ in length.
pub fn issuers_override(issuers: &[String], jwks_urls: &[String]) -> Result<Option<Override>, ConfigError> {
    if issuers.len() != jwks_urls.len() {
        return Err(ConfigError::Flag {
            flag: "--jwt-issuer".into(),
            message: format!(
                "give one --jwt-jwks-url for each --jwt-issuer ({} issuers, {} URLs)",
                issuers.len(),
                jwks_urls.len()
            ),
        });
    }
    if issuers.is_empty() {
        return Ok(None);
    }
    let pairs: Vec<Value> = issuers
        .iter()
        .zip(jwks_urls)
        .map(|(issuer, jwks_url)| serde_json::json!({"issuer": issuer, "jwks_url": jwks_url}))
        .collect();
    Ok(Some(Override::Json(Value::Array(pairs))))
}

impl Settings {
    /// These settings with `overrides` applied, each `(path, value)` a
    /// setting of [`FLAGS`] (or `auth.issuers`) and what its flag or
    /// variable gave. A value is read as the setting's type: a number for a
    /// number, `true`/`false` for a flag, text otherwise; an optional
    /// setting left unset (null, so of no type yet) takes the text as text
    /// or, when the setting refuses text, as `true`/`false` or a number.
    /// Then the whole is parsed as the TOML file is, so the type and the
    /// domain are checked once, the same way.
    ///
    /// # Errors
    /// [`ConfigError::Flag`] naming the flag whose value does not fit.
    pub fn with_overrides(&self, overrides: &[(&Flag, Override)]) -> Result<Settings, ConfigError> {
        let mut tree = serde_json::to_value(self)
            .map_err(|error| ConfigError::Flag { flag: "settings".into(), message: error.to_string() })?;
        for (flag, value) in overrides {
            let named = || format!("--{} ({})", flag.name, flag.env);
            let no_setting = || ConfigError::Flag { flag: named(), message: format!("no setting {}", flag.path) };
            let current = flag.path.split('.').try_fold(&tree, |node, key| node.get(key)).ok_or_else(no_setting)?;
            let candidates = match value {
                Override::Json(value) => vec![value.clone()],
                Override::Many(values) => vec![Value::Array(values.iter().cloned().map(Value::String).collect())],
                Override::One(text) => match current {
                    Value::Number(_) => {
                        vec![serde_json::from_str::<serde_json::Number>(text.trim()).map(Value::Number).map_err(
                            |_| ConfigError::Flag { flag: named(), message: format!("'{text}' is not a number") },
                        )?]
                    }
                    Value::Bool(_) => match text.trim() {
                        "true" => vec![Value::Bool(true)],
                        "false" => vec![Value::Bool(false)],
                        _ => {
                            return Err(ConfigError::Flag {
                                flag: named(),
                                message: format!("'{text}' is neither true nor false"),
                            });
                        }
                    },
                    Value::Null => std::iter::once(Value::String(text.clone())).chain(scalar(text)).collect(),
                    _ => vec![Value::String(text.clone())],
                },
            };
            // Each flag's value is checked alone, so an error names it; the
            // first reading the settings accept is kept.
            let mut refusal = None;
            for candidate in candidates {
                let slot =
                    flag.path.split('.').try_fold(&mut tree, |node, key| node.get_mut(key)).ok_or_else(no_setting)?;
                *slot = candidate;
                match serde_json::from_value::<Settings>(tree.clone()) {
                    Ok(_) => {
                        refusal = None;
                        break;
                    }
                    Err(error) => {
                        refusal.get_or_insert(error);
                    }
                }
            }
            if let Some(error) = refusal {
                return Err(ConfigError::Flag { flag: named(), message: error.to_string() });
            }
        }
        serde_json::from_value(tree)
            .map_err(|error| ConfigError::Flag { flag: "settings".into(), message: error.to_string() })
    }
}

/// `text` read as JSON `true`, `false` or a number, if it is one of them.
fn scalar(text: &str) -> Option<Value> {
    match text.trim() {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        number => serde_json::from_str::<serde_json::Number>(number).ok().map(Value::Number),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilotage_engine::Capacity;

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
        for (per_principal, per_tenant) in [(0, 1024), (2048, 1024)] {
            let settings = Settings {
                max_sessions_per_principal: per_principal,
                max_sessions_per_tenant: per_tenant,
                ..Settings::default()
            };
            assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: "max_sessions_per_principal", .. })));
        }
        let settings =
            Settings { max_sessions_per_principal: 1024, max_sessions_per_tenant: 1024, ..Settings::default() };
        settings.check().unwrap();
        let settings = Settings { admin_max_body_bytes: 10, ..Settings::default() };
        assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: "admin_max_body_bytes", .. })));
        let settings = Settings { max_component_bytes: 10, ..Settings::default() };
        assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: "max_component_bytes", .. })));
        for (settings, field) in [
            (Settings { header_read_timeout_ms: 0, ..Settings::default() }, "header_read_timeout_ms"),
            (Settings { body_read_timeout_ms: 0, ..Settings::default() }, "body_read_timeout_ms"),
            (Settings { max_connections: 0, ..Settings::default() }, "max_connections"),
            (Settings { allowed_origins: vec!["localhost:3000".into()], ..Settings::default() }, "allowed_origins"),
            (Settings { trusted_proxies: vec!["balancer.internal".into()], ..Settings::default() }, "trusted_proxies"),
        ] {
            assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: f, .. }) if f == field), "{field}");
        }
        let good = Settings {
            allowed_origins: vec!["https://app.example".into(), "http://localhost:*".into(), "null".into()],
            max_connections: 1,
            ..Settings::default()
        };
        good.check().unwrap();
    }

    #[test]
    fn capacity_settings_are_read_from_file_and_flags_and_checked() {
        let file: Settings =
            toml::from_str("[capacity]\nrun_instances = 3000\nrun_wait_ms = 5000\nqueue_per_tenant = 8\n").unwrap();
        assert_eq!((file.capacity.run_instances, file.capacity.run_wait_ms), (3000, 5000));
        file.check().unwrap();
        let flag = |name: &str| FLAGS.iter().find(|flag| flag.name == name).unwrap();
        let flagged = Settings::default()
            .with_overrides(&[
                (flag("run-instances"), Override::One("2048".into())),
                (flag("validation-instances"), Override::One("12".into())),
                (flag("run-wait-ms"), Override::One("2500".into())),
            ])
            .unwrap();
        assert_eq!(flagged.capacity.run_instances, 2048);
        assert_eq!(flagged.capacity.validation_instances, 12);
        assert_eq!(flagged.capacity.run_wait_ms, 2500);
        assert!(toml::from_str::<Settings>("[capacity]\nruns = 1\n").is_err(), "unknown keys are refused");
        // A Run may wait for its place and then run its whole wall time
        // inside one request.
        let mut settings = Settings::default();
        settings.capacity.run_wait_ms = settings.request_timeout_ms;
        assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: "request_timeout_ms", .. })));
        for (capacity, field) in [
            (Capacity { queue_per_tenant: 0, ..Capacity::default() }, "capacity.queue_per_tenant"),
            (Capacity { validation_wait_ms: 0, ..Capacity::default() }, "capacity.validation_wait_ms"),
            (Capacity { nested_percent: 60, ..Capacity::default() }, "capacity.nested_percent"),
        ] {
            let settings = Settings { capacity, ..Settings::default() };
            assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: f, .. }) if f == field), "{field}");
        }
    }

    #[test]
    fn core_instances_per_component_is_checked_against_the_pool() {
        assert_eq!(Settings::default().bounds.core_instances_per_component, 32);
        let mut settings: Settings = toml::from_str("[bounds]\ncore_instances_per_component = 64\n").unwrap();
        assert_eq!(settings.bounds.core_instances_per_component, 64);
        assert!(settings.check().is_ok(), "an operator may raise it within the pool");
        for refused in [0, 1025] {
            settings.bounds.core_instances_per_component = refused;
            assert!(
                matches!(
                    settings.check(),
                    Err(ConfigError::Invalid { field: "bounds.core_instances_per_component", .. })
                ),
                "{refused} is refused"
            );
        }
    }

    #[test]
    fn telemetry_settings_are_checked() {
        let parsed: Settings = toml::from_str(
            "metrics_listen = \"127.0.0.1:9464\"\nmetrics_token = \"0123456789abcdef\"\notlp_endpoint = \"http://127.0.0.1:4318\"\nlog_format = \"json\"\n",
        )
        .unwrap();
        parsed.check().unwrap();
        assert_eq!(parsed.log_format, crate::telemetry::logs::LogFormat::Json);
        for (settings, field) in [
            (Settings { metrics_token: Some("short".into()), ..Settings::default() }, "metrics_token"),
            (Settings { metrics_listen: Some(Settings::default().listen), ..Settings::default() }, "metrics_listen"),
            (Settings { otlp_endpoint: Some("collector:4318".into()), ..Settings::default() }, "otlp_endpoint"),
        ] {
            assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: f, .. }) if f == field), "{field}");
        }
    }

    #[test]
    fn language_files_need_the_demo_tenant() {
        let parsed: Settings = toml::from_str("languages = [\"a.wasm\", \"b.wasm\"]\n").unwrap();
        assert_eq!(parsed.languages, [PathBuf::from("a.wasm"), PathBuf::from("b.wasm")]);
        parsed.check().unwrap();
        let settings = Settings { demo: false, ..parsed };
        assert!(matches!(settings.check(), Err(ConfigError::Invalid { field: "languages", .. })));
        Settings { demo: false, ..Settings::default() }.check().unwrap();
    }
}
