//! The `pilotage` command: the server, the tools for language authors and
//! operators, and the reference client.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser, Subcommand};
use pilotage_platform::catalog::CatalogSnapshot;
use pilotage_platform::engine::{Bounds, Engine};
use pilotage_platform::language::description::ProgramKind;
use pilotage_platform::language::execution::{self, ExecutionRequest, Invoker};
use pilotage_platform::language::lint::{has_errors, lint};
use pilotage_platform::language::validation::{self, Program};
use pilotage_platform::protocol::catalog::CatalogEntry;
use pilotage_platform::protocol::requests::ExecuteResponse;
use pilotage_platform::protocol::trace::TraceLevel;
use serde_json::Value;

/// The process's allocator: mimalloc rather than glibc's malloc. Every
/// Language call lifts and drops many small strings and records; with it
/// the 10-step validate benchmark runs about 5% faster (docs/architecture.md,
/// "Allocation"). The benchmarks install the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `println!` that ends the process quietly when stdout is closed (`| head`)
/// instead of panicking.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(error) = writeln!(std::io::stdout().lock(), $($arg)*) {
            if error.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
    }};
}

#[derive(Parser)]
#[command(
    name = "pilotage",
    version,
    about = "Pilotage Platform: programs that agents can check before they run and prove after."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main job: start the platform on the embedded default and drive
    /// the reference client through the spec's scenarios, step by step.
    Demo(ServeArgs),
    /// Run the MCP server (Streamable HTTP at /mcp, or stdio).
    Serve(ServeArgs),
    /// Apply database migrations and exit.
    Migrate(ServeArgs),
    /// Run only the demo capability service (profiles, orders, outbox).
    DemoWorld {
        /// Where to listen.
        #[arg(long, default_value = "127.0.0.1:8481")]
        listen: std::net::SocketAddr,
    },
    /// Tools for Language authors.
    #[command(subcommand)]
    Language(LanguageCommand),
    /// The reference Pilotage client: drive any Pilotage server.
    Client(ClientArgs),
    /// Run the specification's conformance vectors against any Pilotage
    /// server, for one Language, through a binding file.
    Conformance(ConformanceArgs),
    /// Development tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage tenants through the admin API.
    Tenant(AdminArgs<TenantCommand>),
    /// Manage a tenant's catalog through the admin API.
    Catalog(AdminArgs<CatalogCommand>),
    /// Manage a tenant's data sources through the admin API.
    Datasource(AdminArgs<DatasourceCommand>),
    /// Watch, disable, enable and remove a tenant's deployed programs
    /// through the admin API.
    Deployment(AdminArgs<DeploymentCommand>),
    /// Manage a tenant's secrets (webhook keys `webhook:<source>`, MQTT
    /// brokers `mqtt:<broker>`, values referenced by catalog bindings)
    /// through the admin API.
    Secret(AdminArgs<SecretCommand>),
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Issue a development token (accepted by servers running --auth dev
    /// with the same data folder).
    Mint {
        /// The data folder holding the development secret.
        #[arg(long, env = "PILOTAGE_DATA_DIR", default_value = ".pilotage")]
        data_dir: PathBuf,
        /// The server's public URL (the token's audience is <url>/mcp).
        #[arg(long, env = "PILOTAGE_PUBLIC_URL", default_value = "http://127.0.0.1:8480")]
        public_url: String,
        /// The tenant.
        #[arg(long, default_value = "demo")]
        tenant: String,
        /// The subject.
        #[arg(long, default_value = "dev")]
        subject: String,
        /// Scopes (repeatable).
        #[arg(long = "scope")]
        scopes: Vec<String>,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
    },
}

#[derive(Args)]
struct AdminArgs<C: Subcommand> {
    /// The server's base URL.
    #[arg(long, env = "PILOTAGE_SERVER", default_value = "http://127.0.0.1:8480", global = true)]
    server: String,
    /// The operator token (or a bearer token with an admin scope).
    #[arg(long, env = "PILOTAGE_ADMIN_TOKEN", global = true)]
    admin_token: Option<String>,
    #[command(subcommand)]
    command: C,
}

#[derive(Subcommand)]
enum TenantCommand {
    /// Create a tenant.
    Create {
        /// The tenant id.
        id: String,
        /// A display name.
        #[arg(long)]
        name: Option<String>,
    },
    /// List tenants.
    List,
    /// Show a tenant.
    Get {
        /// The tenant id.
        id: String,
    },
    /// Disable a tenant (its agents are refused).
    Disable {
        /// The tenant id.
        id: String,
    },
    /// Enable a tenant.
    Enable {
        /// The tenant id.
        id: String,
    },
    /// Delete a tenant and everything it owns.
    Delete {
        /// The tenant id.
        id: String,
    },
    /// Upload a Language component for a tenant (alias of `language publish`).
    Publish {
        /// The tenant id.
        id: String,
        /// The component file.
        component: PathBuf,
    },
}

#[derive(Subcommand)]
enum CatalogCommand {
    /// Make a tenant's catalog exactly the entries of a JSON file
    /// (`{"entries": [...]}` or an array); reports added, modified, removed.
    Apply {
        /// The tenant.
        tenant: String,
        /// The file.
        file: PathBuf,
    },
    /// List a tenant's catalog entries.
    Ls {
        /// The tenant.
        tenant: String,
    },
}

#[derive(Subcommand)]
enum DatasourceCommand {
    /// Register (or replace) a PostgreSQL data source for a Language; the
    /// database is introspected into the tenant's catalog.
    Add {
        /// The tenant.
        tenant: String,
        /// The data source's name.
        name: String,
        /// postgres://user:password@host:port/database (sealed at rest).
        #[arg(long, env = "PILOTAGE_DATASOURCE_URL")]
        url: String,
        /// A schema to expose (repeatable; at least one).
        #[arg(long = "schema", required = true)]
        schemas: Vec<String>,
        /// The Language.
        #[arg(long, default_value = "sql/postgres-15")]
        language: String,
        /// SCOPE=schema[.relation]: only callers holding SCOPE see it
        /// (repeatable).
        #[arg(long = "visible-to")]
        visibility: Vec<String>,
    },
    /// List a tenant's data sources.
    Ls {
        /// The tenant.
        tenant: String,
    },
    /// Introspect a data source now and print the catalog change.
    Refresh {
        /// The tenant.
        tenant: String,
        /// The data source's name.
        name: String,
    },
    /// Detach a data source and remove its catalog entries.
    Rm {
        /// The tenant.
        tenant: String,
        /// The data source's name.
        name: String,
    },
}

#[derive(Subcommand)]
enum DeploymentCommand {
    /// List a tenant's deployments.
    Ls {
        /// The tenant.
        tenant: String,
    },
    /// Show one deployment, its body and its latest firings.
    Get {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
        /// How many firings to show.
        #[arg(long, default_value_t = 20)]
        firings: u32,
    },
    /// Stop a deployment's triggers.
    Disable {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
    },
    /// Resume a deployment's triggers (missed schedule ticks never fire).
    Enable {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
    },
    /// Remove a deployment.
    Rm {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
    },
}

#[derive(Subcommand)]
enum SecretCommand {
    /// Store a secret, sealed at rest.
    Set {
        /// The tenant.
        tenant: String,
        /// The secret's name (e.g. webhook:home, mqtt:house).
        name: String,
        /// The value (prefer the environment variable: it stays out of
        /// the shell's history).
        #[arg(long, env = "PILOTAGE_SECRET_VALUE", hide_env_values = true)]
        value: String,
    },
    /// List a tenant's secret names (never their values).
    Ls {
        /// The tenant.
        tenant: String,
    },
    /// Delete a secret.
    Rm {
        /// The tenant.
        tenant: String,
        /// The secret's name.
        name: String,
    },
}

#[derive(Args)]
struct ConformanceArgs {
    /// The server's MCP endpoint (an http URL, or stdio:<command>).
    #[arg(long)]
    endpoint: String,
    /// The Language to test.
    #[arg(long)]
    language: String,
    /// The binding file (see tests/conformance/workflow.json).
    #[arg(long)]
    binding: PathBuf,
    /// conformance-vectors.json (default: PILOTAGE_SPEC_DIR or ../shared/spec).
    #[arg(long)]
    vectors: Option<PathBuf>,
    /// pilotage.schema.json (default: beside the vectors).
    #[arg(long)]
    schema: Option<PathBuf>,
    /// A bearer token.
    #[arg(long, env = "PILOTAGE_TOKEN")]
    token: Option<String>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ClientArgs {
    /// An OAuth bearer token for the server.
    #[arg(long, env = "PILOTAGE_TOKEN", global = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: ClientCommand,
}

#[derive(Subcommand)]
enum ClientCommand {
    /// List the server's tools and its manifest.
    Tools {
        /// The server's MCP endpoint, e.g. http://127.0.0.1:8480/mcp, or
        /// a command to speak MCP with over stdio, e.g.
        /// "stdio:pilotage serve --stdio --demo".
        url: String,
    },
    /// Show a Language's guide index, or one guide.
    Guide {
        /// The server's MCP endpoint (an http URL, or stdio:<command>).
        url: String,
        /// The Language, e.g. workflow/v1.
        language: String,
        /// A guide id; omit for the index.
        id: Option<String>,
    },
    /// List (or search) a Language's catalog.
    Catalog {
        /// The server's MCP endpoint (an http URL, or stdio:<command>).
        url: String,
        /// The Language.
        language: String,
        /// Free-text search.
        query: Option<String>,
    },
    /// Validate a program file.
    Validate(ProgramArgs),
    /// Run a program file through the standard loop: validate, the Host
    /// risk gate, execute, print the trace.
    Run(ProgramArgs),
    /// Fetch a stored trace by run_id.
    Trace {
        /// The server's MCP endpoint (an http URL, or stdio:<command>).
        url: String,
        /// The run's id.
        run_id: String,
        /// The Language whose trace tool to use (default: each that has one,
        /// in turn, until one holds the run).
        #[arg(long)]
        language: Option<String>,
        /// summary or full.
        #[arg(long)]
        trace_level: Option<String>,
    },
}

#[derive(Args)]
struct ProgramArgs {
    /// The server's MCP endpoint (an http URL, or stdio:<command>).
    url: String,
    /// The Language.
    language: String,
    /// The program file: JSON for JSON Languages, text otherwise.
    program: PathBuf,
    /// The Run's input: a JSON file, or JSON text.
    #[arg(long)]
    input: Option<String>,
    /// Approvals the Host may grant without asking: none, all, or a comma
    /// list of destructive, open-world, unknown. Without it, an interactive
    /// terminal is asked and anything else is refused.
    #[arg(long)]
    approve: Option<String>,
    /// Keep the Run for the trace tool (store: true).
    #[arg(long)]
    store: bool,
    /// The trace level to ask for (default full).
    #[arg(long)]
    trace_level: Option<String>,
}

/// Server settings as flags and `PILOTAGE_*` variables; each overrides the
/// settings file, which overrides the defaults.
#[derive(Args, Clone, Debug, Default)]
struct ServeArgs {
    /// A TOML settings file.
    #[arg(long, env = "PILOTAGE_CONFIG")]
    config: Option<PathBuf>,
    /// Where /mcp listens, ADDR:PORT.
    #[arg(long, env = "PILOTAGE_LISTEN")]
    listen: Option<std::net::SocketAddr>,
    /// Folder for the SQLite file and the compiled-code cache.
    #[arg(long, env = "PILOTAGE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// sqlite:PATH or postgres://…
    #[arg(long, env = "PILOTAGE_DATABASE_URL")]
    database_url: Option<String>,
    /// Load the demo tenant, the bundled Languages and the demo capability
    /// service (the default; --demo=false to disable).
    #[arg(long, env = "PILOTAGE_DEMO", num_args = 0..=1, default_missing_value = "true")]
    demo: Option<bool>,
    /// Where the demo creates its sales database for sql/postgres-15
    /// (postgres://…), or "off".
    #[arg(long, env = "PILOTAGE_DEMO_POSTGRES")]
    demo_postgres: Option<String>,
    /// The externally visible base URL.
    #[arg(long, env = "PILOTAGE_PUBLIC_URL")]
    public_url: Option<String>,
    /// Accepted Host header values (repeatable).
    #[arg(long = "allowed-host", env = "PILOTAGE_ALLOWED_HOSTS", value_delimiter = ',')]
    allowed_hosts: Vec<String>,
    /// Accepted browser origins (repeatable).
    #[arg(long = "allowed-origin", env = "PILOTAGE_ALLOWED_ORIGINS", value_delimiter = ',')]
    allowed_origins: Vec<String>,
    /// Run retention: none, session, or an ISO 8601 duration.
    #[arg(long, env = "PILOTAGE_RETENTION")]
    retention: Option<String>,
    /// Largest request body, bytes.
    #[arg(long, env = "PILOTAGE_MAX_BODY_BYTES")]
    max_body_bytes: Option<usize>,
    /// Time allowed for one request, milliseconds.
    #[arg(long, env = "PILOTAGE_REQUEST_TIMEOUT_MS")]
    request_timeout_ms: Option<u64>,
    /// Time to send a request head (also the keep-alive idle time), milliseconds.
    #[arg(long, env = "PILOTAGE_HEADER_READ_TIMEOUT_MS")]
    header_read_timeout_ms: Option<u64>,
    /// Time for a request body to arrive after its head, milliseconds.
    #[arg(long, env = "PILOTAGE_BODY_READ_TIMEOUT_MS")]
    body_read_timeout_ms: Option<u64>,
    /// Most connections open at once.
    #[arg(long, env = "PILOTAGE_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Fuel per validation call.
    #[arg(long, env = "PILOTAGE_VALIDATE_FUEL")]
    validate_fuel: Option<u64>,
    /// Wall time per validation call, milliseconds.
    #[arg(long, env = "PILOTAGE_VALIDATE_TIMEOUT_MS")]
    validate_timeout_ms: Option<u64>,
    /// Fuel per execution.
    #[arg(long, env = "PILOTAGE_EXECUTE_FUEL")]
    execute_fuel: Option<u64>,
    /// Wall time per execution, milliseconds.
    #[arg(long, env = "PILOTAGE_EXECUTE_TIMEOUT_MS")]
    execute_timeout_ms: Option<u64>,
    /// Memory per component instance, bytes.
    #[arg(long, env = "PILOTAGE_MEMORY_BYTES")]
    memory_bytes: Option<u64>,
    /// Lease of an idempotency claim, milliseconds: a killed process's
    /// keys answer "interrupted" after this long.
    #[arg(long, env = "PILOTAGE_IDEMPOTENCY_LEASE_MS")]
    idempotency_lease_ms: Option<u64>,
    /// How often a live process renews its claims' leases, milliseconds.
    #[arg(long, env = "PILOTAGE_IDEMPOTENCY_RENEW_MS")]
    idempotency_renew_ms: Option<u64>,
    /// Serve MCP over stdin/stdout instead of HTTP.
    #[arg(long)]
    stdio: bool,
    /// Agent authentication: dev (loopback only; the default) or jwt.
    #[arg(long, env = "PILOTAGE_AUTH")]
    auth: Option<String>,
    /// A trusted token issuer (repeatable; pair each with --jwt-jwks-url).
    #[arg(long = "jwt-issuer", env = "PILOTAGE_JWT_ISSUERS", value_delimiter = ',')]
    jwt_issuers: Vec<String>,
    /// The JWKS URL of each --jwt-issuer, in the same order.
    #[arg(long = "jwt-jwks-url", env = "PILOTAGE_JWT_JWKS_URLS", value_delimiter = ',')]
    jwt_jwks_urls: Vec<String>,
    /// The token claim naming the caller's tenant.
    #[arg(long, env = "PILOTAGE_TENANT_CLAIM")]
    tenant_claim: Option<String>,
    /// The operator token of the admin API.
    #[arg(long, env = "PILOTAGE_ADMIN_TOKEN")]
    admin_token: Option<String>,
    /// A Language component (.wasm) to serve for the demo tenant,
    /// reloaded when the file changes (repeatable). It replaces a bundled
    /// Language of the same name.
    #[arg(long = "language", env = "PILOTAGE_LANGUAGES", value_delimiter = ',')]
    languages: Vec<PathBuf>,
    /// Serve `/metrics` on a listener of its own at this address.
    #[arg(long, env = "PILOTAGE_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Bearer token `/metrics` asks for (without --metrics-listen, it is
    /// served on the main listener).
    #[arg(long, env = "PILOTAGE_METRICS_TOKEN")]
    metrics_token: Option<String>,
    /// Export traces to this OTLP/HTTP receiver (base URL, e.g.
    /// http://127.0.0.1:4318); OTEL_EXPORTER_OTLP_ENDPOINT also turns
    /// export on.
    #[arg(long, env = "PILOTAGE_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    /// Log lines as text or json.
    #[arg(long, env = "PILOTAGE_LOG_FORMAT")]
    log_format: Option<String>,
}

impl ServeArgs {
    fn settings(&self) -> Result<pilotage_platform::config::Settings> {
        let mut settings = match &self.config {
            Some(path) => pilotage_platform::config::Settings::from_file(path)?,
            None => pilotage_platform::config::Settings::default(),
        };
        if let Some(listen) = self.listen {
            settings.listen = listen;
        }
        if let Some(dir) = &self.data_dir {
            settings.data_dir = dir.clone();
        }
        if let Some(url) = &self.database_url {
            settings.database_url = Some(url.clone());
        }
        if let Some(demo) = self.demo {
            settings.demo = demo;
        }
        if let Some(url) = &self.demo_postgres {
            settings.demo_postgres = url.clone();
        }
        if let Some(url) = &self.public_url {
            settings.public_url = Some(url.clone());
        }
        if !self.allowed_hosts.is_empty() {
            settings.allowed_hosts = self.allowed_hosts.clone();
        }
        if !self.allowed_origins.is_empty() {
            settings.allowed_origins = self.allowed_origins.clone();
        }
        if let Some(retention) = &self.retention {
            settings.retention = retention.clone();
        }
        if let Some(bytes) = self.max_body_bytes {
            settings.max_body_bytes = bytes;
        }
        if let Some(ms) = self.request_timeout_ms {
            settings.request_timeout_ms = ms;
        }
        if let Some(ms) = self.header_read_timeout_ms {
            settings.header_read_timeout_ms = ms;
        }
        if let Some(ms) = self.body_read_timeout_ms {
            settings.body_read_timeout_ms = ms;
        }
        if let Some(connections) = self.max_connections {
            settings.max_connections = connections;
        }
        if let Some(fuel) = self.validate_fuel {
            settings.bounds.validation.fuel = fuel;
        }
        if let Some(ms) = self.validate_timeout_ms {
            settings.bounds.validation.wall_time_ms = ms;
        }
        if let Some(fuel) = self.execute_fuel {
            settings.bounds.execution.fuel = fuel;
        }
        if let Some(ms) = self.execute_timeout_ms {
            settings.bounds.execution.wall_time_ms = ms;
        }
        if let Some(bytes) = self.memory_bytes {
            settings.bounds.memory_bytes = bytes;
        }
        if let Some(ms) = self.idempotency_lease_ms {
            settings.idempotency.lease_ms = ms;
        }
        if let Some(ms) = self.idempotency_renew_ms {
            settings.idempotency.renew_ms = ms;
        }
        match self.auth.as_deref() {
            None => {}
            Some("dev") => settings.auth.mode = pilotage_platform::auth::AuthMode::Dev,
            Some("jwt") => settings.auth.mode = pilotage_platform::auth::AuthMode::Jwt,
            Some(other) => bail!("--auth {other}: use dev or jwt"),
        }
        if self.jwt_issuers.len() != self.jwt_jwks_urls.len() {
            bail!(
                "give one --jwt-jwks-url for each --jwt-issuer ({} issuers, {} URLs)",
                self.jwt_issuers.len(),
                self.jwt_jwks_urls.len()
            );
        }
        if !self.jwt_issuers.is_empty() {
            settings.auth.issuers = self
                .jwt_issuers
                .iter()
                .zip(&self.jwt_jwks_urls)
                .map(|(issuer, jwks_url)| pilotage_platform::auth::IssuerConfig {
                    issuer: issuer.clone(),
                    jwks_url: jwks_url.clone(),
                    algorithms: vec!["RS256".into(), "ES256".into()],
                })
                .collect();
        }
        if let Some(claim) = &self.tenant_claim {
            settings.auth.tenant_claim = claim.clone();
        }
        if let Some(token) = &self.admin_token {
            settings.admin_token = Some(token.clone());
        }
        if !self.languages.is_empty() {
            settings.languages = self.languages.clone();
        }
        if let Some(address) = self.metrics_listen {
            settings.metrics_listen = Some(address);
        }
        if let Some(token) = &self.metrics_token {
            settings.metrics_token = Some(token.clone());
        }
        if let Some(endpoint) = &self.otlp_endpoint {
            settings.otlp_endpoint = Some(endpoint.clone());
        }
        if let Some(format) = &self.log_format {
            settings.log_format =
                pilotage_platform::telemetry::logs::LogFormat::parse(format).map_err(|message| anyhow!(message))?;
        }
        settings.check()?;
        Ok(settings)
    }
}

#[derive(Subcommand)]
enum LanguageCommand {
    /// Create the crate of a new Language NAME/v1 from the example recipe/v1
    /// (docs/writing-a-language.md): it builds for wasm32-wasip2, passes
    /// `language check`, and carries its tests and conformance binding.
    New {
        /// The Language family: lowercase letters, digits, '-' or '_'.
        name: String,
        /// The folder to create (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The guest-sdk folder of a Pilotage Platform checkout (default:
        /// the one this binary was built from).
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
    /// Load a Language component, lint its self-description against the
    /// Pilotage spec, and optionally validate (and execute) a program.
    Check(CheckArgs),
    /// Upload a Language component for a tenant through the admin API.
    Publish {
        /// The tenant.
        tenant: String,
        /// The component file.
        component: PathBuf,
        /// The server's base URL.
        #[arg(long, env = "PILOTAGE_SERVER", default_value = "http://127.0.0.1:8480")]
        server: String,
        /// The operator token.
        #[arg(long, env = "PILOTAGE_ADMIN_TOKEN")]
        admin_token: Option<String>,
    },
}

#[derive(Args)]
struct CheckArgs {
    /// The component (a wasm32-wasip2 `.wasm` file).
    component: PathBuf,
    /// Catalog entries: a JSON array, or an object with `entries`. An
    /// entry's `example_output` answers invocations under `--execute`.
    #[arg(long)]
    catalog: Option<PathBuf>,
    /// A program to validate: JSON for JSON Languages, text otherwise.
    #[arg(long)]
    program: Option<PathBuf>,
    /// The Run's input (a JSON file).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Execute the program when it is valid.
    #[arg(long, requires = "program")]
    execute: bool,
}

/// The log filter unless `PILOTAGE_LOG` says otherwise: warnings, and a
/// Language author's reloads (`serve --language`), worth their one info
/// line each.
const DEFAULT_LOG_FILTER: &str = "warn,pilotage_platform::language_watch=info";

/// The log filter: `PILOTAGE_LOG`, else [`DEFAULT_LOG_FILTER`].
fn log_filter() -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_env("PILOTAGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `serve` sets up logging itself, once its settings (log format, OTLP
    // export) are known.
    if !matches!(cli.command, Command::Serve(_)) {
        let _ = pilotage_platform::telemetry::logs::init(
            log_filter(),
            pilotage_platform::telemetry::logs::LogFormat::Text,
            None,
        );
    }
    let result = match cli.command {
        Command::Demo(args) => runtime().and_then(|rt| rt.block_on(demo(args))),
        Command::Serve(args) => runtime().and_then(|rt| rt.block_on(serve(args))),
        Command::Migrate(args) => runtime().and_then(|rt| rt.block_on(migrate(args))),
        Command::DemoWorld { listen } => runtime().and_then(|rt| rt.block_on(demo_world(listen))),
        Command::Language(LanguageCommand::New { name, dir, sdk }) => language_new(&name, dir, sdk),
        Command::Language(LanguageCommand::Check(args)) => language_check(args),
        Command::Language(LanguageCommand::Publish { tenant, component, server, admin_token }) => {
            runtime().and_then(|rt| rt.block_on(publish(&server, admin_token.as_deref(), &tenant, &component)))
        }
        Command::Token(TokenCommand::Mint { data_dir, public_url, tenant, subject, scopes, ttl }) => {
            token_mint(&data_dir, &public_url, &tenant, &subject, &scopes, ttl)
        }
        Command::Tenant(args) => runtime().and_then(|rt| rt.block_on(tenant_command(args))),
        Command::Catalog(args) => runtime().and_then(|rt| rt.block_on(catalog_command(args))),
        Command::Datasource(args) => runtime().and_then(|rt| rt.block_on(datasource_command(args))),
        Command::Deployment(args) => runtime().and_then(|rt| rt.block_on(deployment_command(args))),
        Command::Secret(args) => runtime().and_then(|rt| rt.block_on(secret_command(args))),
        Command::Client(args) => runtime().and_then(|rt| rt.block_on(client(args))),
        Command::Conformance(args) => runtime().and_then(|rt| rt.block_on(conformance(args))),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(_) => return interrupt.await.unwrap_or(()),
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await.unwrap_or(());
}

/// Installs the log subscriber of `serve`, with the OTLP pipeline when
/// export is configured (`otlp_endpoint` or the `OTEL_EXPORTER_OTLP_*`
/// variables). Call inside the runtime that will send the exports.
fn serve_telemetry(
    settings: &pilotage_platform::config::Settings,
) -> Result<Option<pilotage_platform::telemetry::otlp::OtlpPipeline>> {
    use pilotage_platform::telemetry::{logs, otlp};
    let target = otlp::ExportTarget::resolve(settings.otlp_endpoint.as_deref(), |name| std::env::var(name).ok())?;
    let pipeline =
        target.map(|target| otlp::OtlpPipeline::start(&target, tokio::runtime::Handle::current())).transpose()?;
    logs::init(log_filter(), settings.log_format, pipeline.as_ref()).map_err(|message| anyhow!(message))?;
    Ok(pipeline)
}

async fn serve(args: ServeArgs) -> Result<ExitCode> {
    let settings = args.settings()?;
    let pipeline = serve_telemetry(&settings)?;
    let code = serve_with(args.stdio, settings).await;
    // Spans still queued are exported before the process ends.
    if let Some(pipeline) = pipeline {
        pipeline.shutdown().await;
    }
    code
}

async fn serve_with(stdio: bool, settings: pilotage_platform::config::Settings) -> Result<ExitCode> {
    if stdio {
        return serve_stdio(settings).await;
    }
    let server = pilotage_platform::server::start(settings).await?;
    eprintln!("Pilotage Platform: MCP at {}", server.mcp_url());
    if let Some((addr, _)) = &server.demo_world {
        eprintln!("demo capability service at http://{addr}");
    }
    let token = server.shutdown_token();
    tokio::spawn(async move {
        shutdown_signal().await;
        eprintln!("shutting down");
        token.cancel();
    });
    server.wait().await;
    Ok(ExitCode::SUCCESS)
}

async fn serve_stdio(mut settings: pilotage_platform::config::Settings) -> Result<ExitCode> {
    use rmcp::ServiceExt;
    // Nothing listens over HTTP; the demo capability service still runs.
    settings.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let server = pilotage_platform::server::start(settings).await?;
    let session = format!("stdio-{}", std::process::id());
    let handler = pilotage_platform::mcp::observed::ObservedServer::stdio(
        pilotage_platform::mcp::PilotageServer::stdio(server.platform.clone(), session.clone()),
    );
    let running = handler.serve(rmcp::transport::stdio()).await.map_err(|e| anyhow::anyhow!("stdio: {e}"))?;
    let _ = running.waiting().await;
    let _ = server.platform.store().runs_delete_session(&session).await;
    server.stop().await;
    Ok(ExitCode::SUCCESS)
}

async fn demo(args: ServeArgs) -> Result<ExitCode> {
    let mut settings = args.settings()?;
    if args.listen.is_none() {
        // Any free loopback port: the demo never collides with a server.
        settings.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    }
    let mut out = std::io::stdout();
    let report = pilotage_platform::demo::run(settings, &mut out).await?;
    Ok(if report.succeeded() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

async fn migrate(args: ServeArgs) -> Result<ExitCode> {
    let settings = args.settings()?;
    let store = pilotage_platform::store::Store::connect(&settings.database_url()).await?;
    store.migrate().await?;
    eprintln!("migrations applied to {}", settings.database_url());
    Ok(ExitCode::SUCCESS)
}

async fn demo_world(listen: std::net::SocketAddr) -> Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    eprintln!("demo capability service at http://{}", listener.local_addr()?);
    pilotage_platform::demo_world::serve(listener, Default::default(), shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}

fn token_mint(
    data_dir: &std::path::Path,
    public_url: &str,
    tenant: &str,
    subject: &str,
    scopes: &[String],
    ttl: u64,
) -> Result<ExitCode> {
    let audience = format!("{}/mcp", public_url.trim_end_matches('/'));
    let tokens = pilotage_platform::auth::dev::DevTokens::load(data_dir, audience).map_err(anyhow::Error::msg)?;
    say!("{}", tokens.mint(tenant, subject, scopes, ttl).map_err(anyhow::Error::msg)?);
    Ok(ExitCode::SUCCESS)
}

/// A small client of the admin API.
struct AdminClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl AdminClient {
    fn new(server: &str, token: Option<&str>) -> AdminClient {
        pilotage_platform::install_crypto_provider();
        AdminClient {
            http: reqwest::Client::new(),
            base: format!("{}/admin/v1", server.trim_end_matches('/')),
            token: token.map(str::to_owned),
        }
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: &str,
    ) -> Result<Value> {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.header("content-type", content_type).body(body);
        }
        let response = request.send().await.with_context(|| format!("cannot reach {}", self.base))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let value: Value =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        if !status.is_success() {
            // A refused upload: its lint findings as lines, not nested JSON.
            if let Some(findings) = refusal_findings(&value) {
                let message = value["error"]["message"].as_str().unwrap_or_default();
                bail!("{status}: {message}\n{findings}");
            }
            bail!("{status}: {}", serde_json::to_string_pretty(&value).unwrap_or_default());
        }
        Ok(value)
    }

    async fn json(&self, method: reqwest::Method, path: &str, body: &Value) -> Result<Value> {
        self.send(method, path, Some(serde_json::to_vec(body)?), "application/json").await
    }
}

async fn publish(server: &str, token: Option<&str>, tenant: &str, component: &std::path::Path) -> Result<ExitCode> {
    let bytes = std::fs::read(component).with_context(|| format!("cannot read {}", component.display()))?;
    let client = AdminClient::new(server, token);
    eprint!("uploading {} ({} KiB) to tenant {tenant}… ", component.display(), bytes.len() / 1024);
    let started = std::time::Instant::now();
    let result = client
        .send(reqwest::Method::POST, &format!("/tenants/{tenant}/languages"), Some(bytes), "application/wasm")
        .await;
    match result {
        Ok(value) => {
            eprintln!("done in {} ms (compiled, described, linted)", started.elapsed().as_millis());
            print_json(&value)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("refused");
            Err(error)
        }
    }
}

/// `pilotage language new`: writes the crate and says what to run next.
fn language_new(name: &str, dir: Option<PathBuf>, sdk: Option<PathBuf>) -> Result<ExitCode> {
    use pilotage_platform::language::template;
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    let sdk = sdk.unwrap_or_else(|| PathBuf::from(template::BUILT_SDK));
    let files = template::write(&dir, name, &sdk)?;
    println!("created {name}/v1 in {}: {}", dir.display(), files.join(", "));
    let file = name.replace('-', "_");
    println!("next, in {}:", dir.display());
    println!("  cargo test");
    println!("  cargo build --release --target wasm32-wasip2");
    println!("  pilotage language check target/wasm32-wasip2/release/{file}.wasm");
    println!("  pilotage serve --language target/wasm32-wasip2/release/{file}.wasm");
    Ok(ExitCode::SUCCESS)
}

/// The lint findings of a refused upload's body, one per line as
/// `pilotage language check` prints them, or `None` when the body has none.
fn refusal_findings(body: &Value) -> Option<String> {
    let findings = body["error"]["findings"].as_array().filter(|f| !f.is_empty())?;
    let lines: Vec<String> = findings
        .iter()
        .map(|f| {
            let text = |name: &str| f[name].as_str().unwrap_or_default().to_owned();
            format!("  {} [{}] {}\n    fix: {}", text("severity"), text("rule"), text("message"), text("fix"))
        })
        .collect();
    Some(lines.join("\n"))
}

async fn tenant_command(args: AdminArgs<TenantCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let value = match args.command {
        TenantCommand::Create { id, name } => {
            let mut body = serde_json::json!({"id": id});
            if let Some(name) = name {
                body["name"] = Value::String(name);
            }
            client.json(reqwest::Method::POST, "/tenants", &body).await?
        }
        TenantCommand::List => client.send(reqwest::Method::GET, "/tenants", None, "").await?,
        TenantCommand::Get { id } => client.send(reqwest::Method::GET, &format!("/tenants/{id}"), None, "").await?,
        TenantCommand::Disable { id } => {
            client
                .json(reqwest::Method::PATCH, &format!("/tenants/{id}"), &serde_json::json!({"disabled": true}))
                .await?
        }
        TenantCommand::Enable { id } => {
            client
                .json(reqwest::Method::PATCH, &format!("/tenants/{id}"), &serde_json::json!({"disabled": false}))
                .await?
        }
        TenantCommand::Delete { id } => {
            client.send(reqwest::Method::DELETE, &format!("/tenants/{id}"), None, "").await?
        }
        TenantCommand::Publish { id, component } => {
            return publish(&args.server, args.admin_token.as_deref(), &id, &component).await;
        }
    };
    if !value.is_null() {
        print_json(&value)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn datasource_command(args: AdminArgs<DatasourceCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let value = match args.command {
        DatasourceCommand::Add { tenant, name, url, schemas, language, visibility } => {
            let mut rules = serde_json::Map::new();
            for rule in visibility {
                let Some((scope, relation)) = rule.split_once('=') else {
                    bail!("--visible-to {rule}: use SCOPE=schema or SCOPE=schema.relation");
                };
                let scopes = rules.entry(relation.to_owned()).or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(scopes) = scopes {
                    scopes.push(Value::String(scope.to_owned()));
                }
            }
            let body = serde_json::json!({"url": url, "schemas": schemas, "language": language, "visibility": rules});
            client.json(reqwest::Method::PUT, &format!("/tenants/{tenant}/data-sources/{name}"), &body).await?
        }
        DatasourceCommand::Ls { tenant } => {
            client.send(reqwest::Method::GET, &format!("/tenants/{tenant}/data-sources"), None, "").await?
        }
        DatasourceCommand::Refresh { tenant, name } => {
            let path = format!("/tenants/{tenant}/data-sources/{name}/refresh");
            client.send(reqwest::Method::POST, &path, None, "").await?
        }
        DatasourceCommand::Rm { tenant, name } => {
            client.send(reqwest::Method::DELETE, &format!("/tenants/{tenant}/data-sources/{name}"), None, "").await?
        }
    };
    if !value.is_null() {
        print_json(&value)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn deployment_command(args: AdminArgs<DeploymentCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let (method, path) = match args.command {
        DeploymentCommand::Ls { tenant } => (reqwest::Method::GET, format!("/tenants/{tenant}/deployments")),
        DeploymentCommand::Get { tenant, name, firings } => {
            (reqwest::Method::GET, format!("/tenants/{tenant}/deployments/{name}?firings={firings}"))
        }
        DeploymentCommand::Disable { tenant, name } => {
            (reqwest::Method::POST, format!("/tenants/{tenant}/deployments/{name}/disable"))
        }
        DeploymentCommand::Enable { tenant, name } => {
            (reqwest::Method::POST, format!("/tenants/{tenant}/deployments/{name}/enable"))
        }
        DeploymentCommand::Rm { tenant, name } => {
            (reqwest::Method::DELETE, format!("/tenants/{tenant}/deployments/{name}"))
        }
    };
    let value = client.send(method, &path, None, "").await?;
    if !value.is_null() {
        print_json(&value)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn secret_command(args: AdminArgs<SecretCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let value = match args.command {
        SecretCommand::Set { tenant, name, value } => {
            let body = serde_json::json!({"value": value});
            client.json(reqwest::Method::PUT, &format!("/tenants/{tenant}/secrets/{name}"), &body).await?
        }
        SecretCommand::Ls { tenant } => {
            client.send(reqwest::Method::GET, &format!("/tenants/{tenant}/secrets"), None, "").await?
        }
        SecretCommand::Rm { tenant, name } => {
            client.send(reqwest::Method::DELETE, &format!("/tenants/{tenant}/secrets/{name}"), None, "").await?
        }
    };
    if !value.is_null() {
        print_json(&value)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn catalog_command(args: AdminArgs<CatalogCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    match args.command {
        CatalogCommand::Apply { tenant, file } => {
            let value = read_json(&file)?;
            let body = match value {
                Value::Array(entries) => serde_json::json!({"entries": entries}),
                other => other,
            };
            print_json(&client.json(reqwest::Method::POST, &format!("/tenants/{tenant}/catalog/apply"), &body).await?)?;
        }
        CatalogCommand::Ls { tenant } => {
            let mut after: Option<String> = None;
            loop {
                let path = match &after {
                    Some(after) => format!("/tenants/{tenant}/catalog/entries?after={after}"),
                    None => format!("/tenants/{tenant}/catalog/entries"),
                };
                let page = client.send(reqwest::Method::GET, &path, None, "").await?;
                for entry in page["entries"].as_array().cloned().unwrap_or_default() {
                    say!(
                        "{}\t{}\t{}\t{}",
                        entry["id"].as_str().unwrap_or(""),
                        entry["kind"].as_str().unwrap_or(""),
                        entry["risk"].as_str().unwrap_or(""),
                        entry["name"].as_str().unwrap_or("")
                    );
                }
                match page["next_after"].as_str() {
                    Some(next) => after = Some(next.to_owned()),
                    None => break,
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn spec_file(explicit: Option<&PathBuf>, name: &str, beside: Option<&PathBuf>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.clone());
    }
    if let Some(dir) = beside.and_then(|path| path.parent()) {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    let dirs = [
        std::env::var("PILOTAGE_SPEC_DIR").ok().map(PathBuf::from),
        Some(PathBuf::from("../shared/spec")),
        Some(PathBuf::from("/work/shared/spec")),
    ];
    dirs.into_iter()
        .flatten()
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .with_context(|| format!("cannot find {name}; pass it explicitly"))
}

async fn conformance(args: ConformanceArgs) -> Result<ExitCode> {
    use pilotage_platform::conformance::{Runner, VectorFile, Verdict, binding::Binding, summary};
    let vectors_path = spec_file(args.vectors.as_ref(), "conformance-vectors.json", None)?;
    let schema_path = spec_file(args.schema.as_ref(), "pilotage.schema.json", Some(&vectors_path))?;
    let vectors: VectorFile = serde_json::from_str(&std::fs::read_to_string(&vectors_path)?)?;
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&schema_path)?)?;
    let mut binding = Binding::from_file(&args.binding).map_err(anyhow::Error::msg)?;
    binding.language = args.language.clone();
    let connection = pilotage_platform::client::Connection::open(&args.endpoint, args.token.as_deref()).await?;
    let runner = Runner::new(&connection, &binding, &schema, None).await.map_err(anyhow::Error::msg)?;
    let results = runner.run_all(&vectors).await;
    if args.json {
        print_json(&results)?;
    } else {
        for result in &results {
            match &result.verdict {
                Verdict::Passed => say!("pass  {}", result.id),
                Verdict::Skipped { reason } => say!("skip  {}: {reason}", result.id),
                Verdict::Failed { failures } => say!("FAIL  {}: {}", result.id, failures.join("; ")),
            }
        }
        say!("{}", summary(&results));
    }
    connection.close().await;
    let failed = results.iter().any(|r| matches!(r.verdict, Verdict::Failed { .. }));
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

fn print_json(value: &impl serde::Serialize) -> Result<()> {
    say!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

async fn connect(url: &str, token: Option<&str>) -> Result<pilotage_platform::client::PilotageClient> {
    let connection = pilotage_platform::client::Connection::open(url, token).await?;
    Ok(pilotage_platform::client::PilotageClient::discover(connection).await?)
}

fn read_program(path: &PathBuf) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn client(args: ClientArgs) -> Result<ExitCode> {
    use pilotage_platform::client::gate::{Approver, Interactive, Policy, Refuse};
    use std::io::IsTerminal;
    let token = args.token.as_deref();
    match args.command {
        ClientCommand::Tools { url } => {
            let client = connect(&url, token).await?;
            for tool in client.tools() {
                say!("{}: {}", tool.name, tool.description.as_deref().unwrap_or(""));
            }
            print_json(client.manifest())?;
            client.close().await;
        }
        ClientCommand::Guide { url, language, id } => {
            let mut client = connect(&url, token).await?;
            match id {
                Some(id) => {
                    let guide = client.guide(&language, &id).await?;
                    say!("{}", guide.body.unwrap_or_default());
                }
                None => print_json(&client.guide_index(&language).await?)?,
            }
            client.close().await;
        }
        ClientCommand::Catalog { url, language, query } => {
            let client = connect(&url, token).await?;
            let mut cursor: Option<String> = None;
            loop {
                let page = client.catalog_list(&language, query.as_deref(), cursor.as_deref()).await?;
                for entry in &page.items {
                    say!("{}\t{}\t{}\t{}", entry.id, entry.kind, entry.risk, entry.name);
                }
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => {
                        say!("catalog_version {}", page.catalog_version);
                        break;
                    }
                }
            }
            client.close().await;
        }
        ClientCommand::Validate(program_args) => {
            let client = connect(&program_args.url, token).await?;
            let program = read_program(&program_args.program)?;
            let response = client.validate(&program_args.language, &program, None).await?;
            print_json(&response)?;
            client.close().await;
            return Ok(if response.valid { ExitCode::SUCCESS } else { ExitCode::from(3) });
        }
        ClientCommand::Run(program_args) => {
            let mut client = connect(&program_args.url, token).await?;
            let program = read_program(&program_args.program)?;
            let input = match &program_args.input {
                Some(text) => Some(match std::fs::read_to_string(text) {
                    Ok(file) => serde_json::from_str(&file)?,
                    Err(_) => serde_json::from_str(text).context("--input is neither a JSON file nor JSON text")?,
                }),
                None => None,
            };
            let approver: Box<dyn Approver> = match &program_args.approve {
                Some(policy) => Box::new(Policy::parse(policy).map_err(anyhow::Error::msg)?),
                None if std::io::stdin().is_terminal() => Box::new(Interactive),
                None => Box::new(Refuse),
            };
            let options = pilotage_platform::client::RunOptions {
                trace_level: program_args.trace_level.clone(),
                store: program_args.store.then_some(true),
                fetch: false,
                drift_retries: 2,
                idempotency_key: None,
                ..Default::default()
            };
            let report = client.run(&program_args.language, program, input, &options, approver.as_ref()).await?;
            if let Some(validation) = report.validations.last().filter(|v| !v.valid) {
                eprintln!("The program is invalid:");
                print_json(validation)?;
                client.close().await;
                return Ok(ExitCode::from(3));
            }
            if !report.approved {
                eprintln!("Not executed: the Host gate did not get approval.");
                client.close().await;
                return Ok(ExitCode::from(4));
            }
            if let Some(execution) = &report.execution {
                print_json(execution)?;
                client.close().await;
                return Ok(if execution.outcome.ok { ExitCode::SUCCESS } else { ExitCode::from(5) });
            }
            client.close().await;
        }
        ClientCommand::Trace { url, run_id, language, trace_level } => {
            let client = connect(&url, token).await?;
            // A Run belongs to one Language's trace door; without --language,
            // each door is asked in turn until one holds the run.
            let languages: Vec<String> = match language {
                Some(language) => vec![language],
                None => client
                    .manifest()
                    .languages
                    .iter()
                    .filter(|l| l.loop_tools.trace.is_some())
                    .map(|l| l.name.clone())
                    .collect(),
            };
            let mut fetched = None;
            for language in &languages {
                match client.trace(language, &run_id, trace_level.as_deref()).await {
                    Ok(trace) => {
                        fetched = Some(Ok(trace));
                        break;
                    }
                    Err(error) => fetched = Some(Err(error)),
                }
            }
            let trace = fetched.context("no Language of this server declares trace_fetch")??;
            print_json(&trace)?;
            client.close().await;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An invoker that answers from the catalog file's `example_output`s.
struct ExampleInvoker {
    examples: std::collections::BTreeMap<String, Value>,
}

impl Invoker for ExampleInvoker {
    fn invoke(&self, entry: &CatalogEntry, _input: &Value) -> Result<Value, String> {
        self.examples
            .get(&entry.id)
            .cloned()
            .ok_or_else(|| format!("the catalog file gives no example_output for '{}'", entry.id))
    }
}

fn read_json(path: &PathBuf) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

fn language_check(args: CheckArgs) -> Result<ExitCode> {
    let engine = Engine::new(Bounds::default(), None)?;
    let component = engine.load_file(&args.component)?;
    let description = component.description();
    say!("Language {} ({})", description.name, description.title);
    say!("  component sha256 {}", component.sha256());
    say!(
        "  programs: {:?}, argument '{}', locator {:?}, execution {:?}, trace ceiling {}",
        description.program_kind,
        description.program_argument,
        description.locator,
        description.execution,
        description.trace_ceiling.as_str()
    );
    say!(
        "  features: plan={} catalog={} execute={} test_run={} promotion={}",
        description.features.plan,
        description.features.catalog,
        description.features.execute,
        description.features.test_run,
        description.features.promotion
    );
    say!(
        "  {} diagnostic codes, {} run statuses, {} guides:",
        description.diagnostic_codes.len(),
        description.run_statuses.len(),
        description.guides.len()
    );
    for guide in &description.guides {
        say!(
            "    {} ({:?}, {} bytes, topics {:?})",
            guide.guide.id,
            guide.guide.level,
            guide.guide.size_bytes,
            guide.guide.topics
        );
    }
    let findings = lint(description);
    if findings.is_empty() {
        say!("Lint: no findings.");
    } else {
        say!("Lint:");
        for finding in &findings {
            say!("  {finding}");
        }
    }
    let lint_failed = has_errors(&findings);

    if let Some(program_path) = &args.program {
        let (entries, examples) = match &args.catalog {
            Some(path) => catalog_file(&read_json(path)?, &description.name)?,
            None => (Vec::new(), Default::default()),
        };
        let catalog = CatalogSnapshot::hashed(entries);
        let program_value = match description.program_kind {
            ProgramKind::Json => read_json(program_path)?,
            ProgramKind::Text => Value::String(
                std::fs::read_to_string(program_path)
                    .with_context(|| format!("cannot read {}", program_path.display()))?,
            ),
        };
        let bounds = engine.bounds();
        let program = Program::from_argument(
            description.program_kind,
            &program_value,
            bounds.program_bytes,
            bounds.nesting_depth,
        )
        .map_err(|failure| anyhow::anyhow!("bounds_exceeded: {failure}"))?;
        let validated = validation::validate(&component, &program, None, &catalog)
            .map_err(|failure| anyhow::anyhow!("{failure}"))?;
        say!("ValidateResponse:");
        say!("{}", serde_json::to_string_pretty(&validated.response)?);
        if args.execute {
            if !validated.response.valid {
                say!("Not executed: the program is invalid.");
            } else {
                let input = args.input.as_ref().map(read_json).transpose()?;
                let findings =
                    validation::bind_input(&component, &program, input.as_ref()).map_err(|f| anyhow::anyhow!("{f}"))?;
                if !findings.is_empty() {
                    say!("Not executed: input_binding findings:");
                    say!("{}", serde_json::to_string_pretty(&findings)?);
                } else {
                    let run_id = "run_check".to_owned();
                    let execution = execution::execute(
                        &component,
                        ExecutionRequest {
                            program: &program,
                            input: input.as_ref(),
                            context: None,
                            plan: validated.plan.as_ref(),
                            references: &validated.references,
                            catalog,
                            invoker: Arc::new(ExampleInvoker { examples }),
                            statements: &validated.statements,
                            data_source: None,
                            test_run: false,
                            deploy: false,
                            clock_ms: None,
                            run_id: &run_id,
                        },
                    );
                    let trace = pilotage_platform::protocol::trace::at_level(
                        &execution.trace,
                        description.trace_ceiling.min(TraceLevel::Full),
                    );
                    let response = ExecuteResponse {
                        run_id,
                        outcome: execution.outcome,
                        output: execution.output,
                        diagnostics: None,
                        trace,
                    };
                    say!("ExecuteResponse:");
                    say!("{}", serde_json::to_string_pretty(&response)?);
                }
            }
        }
    }
    Ok(if lint_failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Entries usable by `language` from a catalog file, and their example
/// outputs.
fn catalog_file(
    value: &Value,
    language: &str,
) -> Result<(Vec<CatalogEntry>, std::collections::BTreeMap<String, Value>)> {
    let items = match value {
        Value::Array(items) => items.clone(),
        Value::Object(map) => match map.get("entries") {
            Some(Value::Array(items)) => items.clone(),
            _ => bail!("a catalog file is a JSON array of entries or an object with 'entries'"),
        },
        _ => bail!("a catalog file is a JSON array of entries or an object with 'entries'"),
    };
    let mut entries = Vec::new();
    let mut examples = std::collections::BTreeMap::new();
    for (index, item) in items.into_iter().enumerate() {
        let entry: CatalogEntry = serde_json::from_value(item.clone())
            .with_context(|| format!("catalog entry {index} is not a catalog entry"))?;
        if !entry.usable_by(language) {
            continue;
        }
        if let Some(example) = item.get("example_output") {
            examples.insert(entry.id.clone(), example.clone());
        }
        entries.push(entry);
    }
    Ok((entries, examples))
}
