//! The `pilotage` command: the server and the main job (`serve`, `demo`,
//! `migrate`), the reference client and the conformance runner, and the
//! tools of operators (the admin API's commands, development tokens) and
//! of Language authors (`language new|check|publish`). Each command family
//! is a module of [`commands`]; this file is the command line and the
//! dispatch.

mod commands;
mod demo;
mod output;
mod template;

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use commands::admin::{
    AdminArgs, CatalogCommand, DatasourceCommand, DeploymentCommand, SecretCommand, TenantCommand, catalog_command,
    datasource_command, deployment_command, publish, secret_command, tenant_command,
};
use commands::approval::{ApprovalCommand, PolicyCommand, approval_command, policy_command};
use commands::client::{ClientArgs, client};
use commands::conformance::{ConformanceArgs, conformance};
use commands::language::{LanguageCommand, language_check, language_new};
use commands::serve::{ServeArgs, SettingsArgs, demo, demo_world, migrate, serve, tool_log_filter};
use commands::token::{TokenCommand, token_mint};

/// The process's allocator: mimalloc rather than glibc's malloc. Every
/// Language call lifts and drops many small strings and records; with it
/// the 10-step validate benchmark runs about 5% faster (docs/architecture.md,
/// "Allocation"). The benchmarks install the same allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Demo(SettingsArgs),
    /// Run the MCP server (Streamable HTTP at /mcp, or stdio).
    Serve(ServeArgs),
    /// Apply database migrations and exit.
    Migrate(SettingsArgs),
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
    /// Show or set a tenant's policy on risk (allow, approve, deny;
    /// budgets) through the admin API.
    Policy(AdminArgs<PolicyCommand>),
    /// List, read, approve and reject a tenant's approval requests through
    /// the admin API.
    Approval(AdminArgs<ApprovalCommand>),
}

/// The command line as parsed: [`Cli`] with no environment variable's value
/// shown in any help text. Variables hold tokens and database URLs with
/// their passwords, and `--help` output lands in terminals, logs and
/// support tickets, so help names each variable, never what it holds.
fn command_line() -> clap::Command {
    fn hidden(command: clap::Command) -> clap::Command {
        command.mut_args(|arg| arg.hide_env_values(true)).mut_subcommands(hidden)
    }
    hidden(Cli::command())
}

fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&command_line().get_matches()).unwrap_or_else(|error| error.exit());
    // `serve` sets up logging itself, once its settings (log format, OTLP
    // export) are known.
    if !matches!(cli.command, Command::Serve(_)) {
        let _ = pilotage_server::telemetry::logs::init(
            tool_log_filter(),
            pilotage_server::telemetry::logs::LogFormat::Text,
            None,
        );
    }
    let result = match cli.command {
        Command::Demo(args) => block_on(demo(args)),
        Command::Serve(args) => block_on(serve(args)),
        Command::Migrate(args) => block_on(migrate(args)),
        Command::DemoWorld { listen } => block_on(demo_world(listen)),
        Command::Language(LanguageCommand::New { name, lang, dir, sdk }) => language_new(&name, dir, sdk, lang),
        Command::Language(LanguageCommand::Check(args)) => language_check(args),
        Command::Language(LanguageCommand::Publish { tenant, component, server, admin_token }) => {
            block_on(publish(&server, admin_token.as_deref(), &tenant, &component, None))
        }
        Command::Token(TokenCommand::Mint { data_dir, public_url, tenant, subject, scopes, ttl }) => {
            token_mint(&data_dir, &public_url, &tenant, &subject, &scopes, ttl)
        }
        Command::Tenant(args) => block_on(tenant_command(args)),
        Command::Catalog(args) => block_on(catalog_command(args)),
        Command::Datasource(args) => block_on(datasource_command(args)),
        Command::Deployment(args) => block_on(deployment_command(args)),
        Command::Secret(args) => block_on(secret_command(args)),
        Command::Policy(args) => block_on(policy_command(args)),
        Command::Approval(args) => block_on(approval_command(args)),
        Command::Client(args) => block_on(client(args)),
        Command::Conformance(args) => block_on(conformance(args)),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs `future` to its end on a multi-threaded runtime whose workers,
/// once the process is quiet, hand the allocator's free pages back
/// (`idle::parking`, `idle::unparked`).
fn block_on(future: impl Future<Output = Result<ExitCode>>) -> Result<ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(idle::parking)
        .on_thread_unpark(idle::unparked)
        .build()?
        .block_on(future)
}

/// Giving a burst's memory back (issue: "Runs that wait cost nothing"). A
/// burst of waiting Runs allocates from every worker; mimalloc keeps the
/// pages a thread freed until that thread allocates again in the same size
/// classes, so after a burst they stay resident. A worker that finds the
/// process quiet (its last rest lasted `QUIET`) asks mimalloc, at most
/// every `EVERY`, to return them. Never while the process is busy: the
/// collection walks the thread's heap, which would delay the next request.
mod idle {
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    /// A rest at least this long means the process is quiet.
    const QUIET: Duration = Duration::from_millis(500);
    /// At most one collection per worker this often.
    const EVERY: Duration = Duration::from_secs(2);

    thread_local! {
        static PARKED_AT: Cell<Option<Instant>> = const { Cell::new(None) };
        static LAST_REST: Cell<Duration> = const { Cell::new(Duration::ZERO) };
        static COLLECTED_AT: Cell<Option<Instant>> = const { Cell::new(None) };
    }

    /// A worker is about to park: collect when its last rest was long.
    pub(crate) fn parking() {
        let now = Instant::now();
        PARKED_AT.set(Some(now));
        let due = COLLECTED_AT.get().is_none_or(|at| now.duration_since(at) >= EVERY);
        if LAST_REST.get() >= QUIET && due {
            COLLECTED_AT.set(Some(now));
            // SAFETY: `mi_collect` takes no pointer; it trims the calling
            // thread's own heap of mimalloc (the global allocator) and the
            // shared arenas, and may run at any time on such a thread.
            #[allow(unsafe_code)]
            unsafe {
                libmimalloc_sys::mi_collect(true);
            }
        }
    }

    /// A worker woke: remember how long it rested.
    pub(crate) fn unparked() {
        if let Some(at) = PARKED_AT.take() {
            LAST_REST.set(at.elapsed());
        }
    }
}
