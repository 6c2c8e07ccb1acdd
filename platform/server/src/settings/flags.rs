//! The settings a command-line flag and a `PILOTAGE_*` environment
//! variable set: one table ([`FLAGS`]) that `pilotage serve`, `demo` and
//! `migrate` turn into their flags and help, and the paired issuer flags.

/// One setting a command-line flag and an environment variable set
/// (`pilotage serve`, `demo` and `migrate` take them all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flag {
    /// The long flag, without `--`.
    pub name: &'static str,
    /// The environment variable.
    pub env: &'static str,
    /// The setting, as a dotted path into [`Settings`](super::Settings) (the TOML file's
    /// keys).
    pub path: &'static str,
    /// Whether the flag repeats (and the variable is comma-separated).
    pub many: bool,
    /// The value's placeholder in the help.
    pub value: &'static str,
    /// The help line.
    pub help: &'static str,
}

const fn flag(
    name: &'static str,
    env: &'static str,
    path: &'static str,
    value: &'static str,
    help: &'static str,
) -> Flag {
    Flag { name, env, path, many: false, value, help }
}

const fn flags(
    name: &'static str,
    env: &'static str,
    path: &'static str,
    value: &'static str,
    help: &'static str,
) -> Flag {
    Flag { name, env, path, many: true, value, help }
}

/// The settings flags and environment variables set, each over the TOML
/// file's value. `--jwt-issuer` and `--jwt-jwks-url` are paired into
/// `auth.issuers` by [`issuers_override`](super::issuers_override).
pub const FLAGS: &[Flag] = &[
    flag("listen", "PILOTAGE_LISTEN", "listen", "ADDR:PORT", "Where /mcp listens"),
    flag("data-dir", "PILOTAGE_DATA_DIR", "data_dir", "DIR", "Folder for the SQLite file and the compiled-code cache"),
    flag("database-url", "PILOTAGE_DATABASE_URL", "database_url", "URL", "sqlite:PATH or postgres://…"),
    flag(
        "demo",
        "PILOTAGE_DEMO",
        "demo",
        "BOOL",
        "Load the demo tenant, the bundled Languages and the demo capability service (the default; --demo=false to disable)",
    ),
    flag(
        "console",
        "PILOTAGE_CONSOLE",
        "console",
        "BOOL",
        "Serve the operator console at /console (--console=true; off by default)",
    ),
    flag(
        "demo-postgres",
        "PILOTAGE_DEMO_POSTGRES",
        "demo_postgres",
        "URL",
        "Where the demo creates its sales database for sql/postgres-15 (postgres://…), or \"off\"",
    ),
    flag("public-url", "PILOTAGE_PUBLIC_URL", "public_url", "URL", "The externally visible base URL"),
    flags(
        "allowed-host",
        "PILOTAGE_ALLOWED_HOSTS",
        "allowed_hosts",
        "HOST",
        "Accepted Host header values (repeatable)",
    ),
    flags(
        "allowed-origin",
        "PILOTAGE_ALLOWED_ORIGINS",
        "allowed_origins",
        "ORIGIN",
        "Accepted browser origins (repeatable)",
    ),
    flags(
        "trusted-proxy",
        "PILOTAGE_TRUSTED_PROXIES",
        "trusted_proxies",
        "IP",
        "A load balancer's address whose X-Forwarded-For names the client (repeatable)",
    ),
    flag(
        "retention",
        "PILOTAGE_RETENTION",
        "retention",
        "RETENTION",
        "Run retention: none, session, or an ISO 8601 duration",
    ),
    flag("max-body-bytes", "PILOTAGE_MAX_BODY_BYTES", "max_body_bytes", "BYTES", "Largest request body, bytes"),
    flag(
        "request-timeout-ms",
        "PILOTAGE_REQUEST_TIMEOUT_MS",
        "request_timeout_ms",
        "MS",
        "Time allowed for one request, milliseconds",
    ),
    flag(
        "approval-wait-ms",
        "PILOTAGE_APPROVAL_WAIT_MS",
        "approval_wait_ms",
        "MS",
        "How long an execute held for approval waits for a human, milliseconds",
    ),
    flag(
        "header-read-timeout-ms",
        "PILOTAGE_HEADER_READ_TIMEOUT_MS",
        "header_read_timeout_ms",
        "MS",
        "Time to send a request head (also the keep-alive idle time), milliseconds",
    ),
    flag(
        "body-read-timeout-ms",
        "PILOTAGE_BODY_READ_TIMEOUT_MS",
        "body_read_timeout_ms",
        "MS",
        "Time for a request body to arrive after its head, milliseconds",
    ),
    flag("max-connections", "PILOTAGE_MAX_CONNECTIONS", "max_connections", "N", "Most connections open at once"),
    flag("validate-fuel", "PILOTAGE_VALIDATE_FUEL", "bounds.validation.fuel", "FUEL", "Fuel per validation call"),
    flag(
        "validate-timeout-ms",
        "PILOTAGE_VALIDATE_TIMEOUT_MS",
        "bounds.validation.wall_time_ms",
        "MS",
        "Wall time per validation call, milliseconds",
    ),
    flag("execute-fuel", "PILOTAGE_EXECUTE_FUEL", "bounds.execution.fuel", "FUEL", "Fuel per execution"),
    flag(
        "execute-timeout-ms",
        "PILOTAGE_EXECUTE_TIMEOUT_MS",
        "bounds.execution.wall_time_ms",
        "MS",
        "Wall time per execution, milliseconds",
    ),
    flag(
        "memory-bytes",
        "PILOTAGE_MEMORY_BYTES",
        "bounds.memory_bytes",
        "BYTES",
        "Memory per component instance, bytes",
    ),
    flag(
        "core-instances-per-component",
        "PILOTAGE_CORE_INSTANCES_PER_COMPONENT",
        "bounds.core_instances_per_component",
        "N",
        "Core module instances one component may link, at most 1024 (componentize-py's CPython links 38)",
    ),
    flag(
        "run-instances",
        "PILOTAGE_RUN_INSTANCES",
        "capacity.run_instances",
        "N",
        "Runs in flight at once on this node, waiting ones included (0: one per 4 MiB of memory, 256 to 4096)",
    ),
    flag(
        "run-core-instances",
        "PILOTAGE_RUN_CORE_INSTANCES",
        "capacity.run_core_instances",
        "N",
        "Core module instances of the Runs' pool (0: four per Run instance; a CPython Language takes 38 a Run)",
    ),
    flag(
        "run-memories",
        "PILOTAGE_RUN_MEMORIES",
        "capacity.run_memories",
        "N",
        "Linear memories of the Runs' pool (0: one per Run instance)",
    ),
    flag(
        "validation-instances",
        "PILOTAGE_VALIDATION_INSTANCES",
        "capacity.validation_instances",
        "N",
        "Validation calls at once on this node (0: four per core, at least 8)",
    ),
    flag(
        "queue-length",
        "PILOTAGE_QUEUE_LENGTH",
        "capacity.queue_length",
        "N",
        "Component calls that may wait for capacity on this node; past it a call is refused (retryable)",
    ),
    flag(
        "queue-per-tenant",
        "PILOTAGE_QUEUE_PER_TENANT",
        "capacity.queue_per_tenant",
        "N",
        "Component calls one tenant may have waiting for capacity",
    ),
    flag(
        "run-wait-ms",
        "PILOTAGE_RUN_WAIT_MS",
        "capacity.run_wait_ms",
        "MS",
        "Longest wait for a Run's place before it is refused (resource_exhausted, retry_after_ms), milliseconds",
    ),
    flag(
        "validation-wait-ms",
        "PILOTAGE_VALIDATION_WAIT_MS",
        "capacity.validation_wait_ms",
        "MS",
        "Longest wait for a validation's place before it is refused (bounds_exceeded, retry_after_ms), milliseconds",
    ),
    flag(
        "idempotency-lease-ms",
        "PILOTAGE_IDEMPOTENCY_LEASE_MS",
        "idempotency.lease_ms",
        "MS",
        "Lease of an idempotency claim, milliseconds: a killed process's keys answer \"interrupted\" after this long",
    ),
    flag(
        "idempotency-renew-ms",
        "PILOTAGE_IDEMPOTENCY_RENEW_MS",
        "idempotency.renew_ms",
        "MS",
        "How often a live process renews its claims' leases, milliseconds",
    ),
    flag(
        "egress-allow-private",
        "PILOTAGE_EGRESS_ALLOW_PRIVATE",
        "egress.allow_private",
        "BOOL",
        "Whether tenants may reach loopback, private and link-local addresses without a CIDR for them (default: as --demo)",
    ),
    flag("auth", "PILOTAGE_AUTH", "auth.mode", "MODE", "Agent authentication: dev (loopback only; the default) or jwt"),
    flag(
        "tenant-claim",
        "PILOTAGE_TENANT_CLAIM",
        "auth.tenant_claim",
        "CLAIM",
        "The token claim naming the caller's tenant",
    ),
    flag("admin-token", "PILOTAGE_ADMIN_TOKEN", "admin_token", "TOKEN", "The operator token of the admin API"),
    flags(
        "language",
        "PILOTAGE_LANGUAGES",
        "languages",
        "FILE",
        "A Language component (.wasm) to serve for the demo tenant, reloaded when the file changes (repeatable); it replaces a bundled Language of the same name",
    ),
    flag(
        "metrics-listen",
        "PILOTAGE_METRICS_LISTEN",
        "metrics_listen",
        "ADDR:PORT",
        "Serve /metrics on a listener of its own at this address",
    ),
    flag(
        "metrics-token",
        "PILOTAGE_METRICS_TOKEN",
        "metrics_token",
        "TOKEN",
        "Bearer token /metrics asks for (without --metrics-listen, it is served on the main listener)",
    ),
    flag(
        "otlp-endpoint",
        "PILOTAGE_OTLP_ENDPOINT",
        "otlp_endpoint",
        "URL",
        "Export traces to this OTLP/HTTP receiver (base URL, e.g. http://127.0.0.1:4318); OTEL_EXPORTER_OTLP_ENDPOINT also turns export on",
    ),
    flag("log-format", "PILOTAGE_LOG_FORMAT", "log_format", "FORMAT", "Log lines as text or json"),
];

/// The issuer flags: each `--jwt-issuer` (`PILOTAGE_JWT_ISSUERS`) pairs with
/// the `--jwt-jwks-url` (`PILOTAGE_JWT_JWKS_URLS`) at the same place.
pub const ISSUER_FLAGS: [Flag; 2] = [
    flags(
        "jwt-issuer",
        "PILOTAGE_JWT_ISSUERS",
        "auth.issuers",
        "URL",
        "A trusted token issuer (repeatable; pair each with --jwt-jwks-url)",
    ),
    flags(
        "jwt-jwks-url",
        "PILOTAGE_JWT_JWKS_URLS",
        "auth.issuers",
        "URL",
        "The JWKS URL of each --jwt-issuer, in the same order",
    ),
];
