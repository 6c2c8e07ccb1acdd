//! `pilotage serve`, `demo`, `migrate` and `demo-world`: the server on its
//! settings, the main job, the migrations, the demo capability service
//! alone; and the settings flags all three read.
//!
//! The settings flags are the server's table ([`FLAGS`]): each becomes a
//! flag with its environment variable, and the values given are parsed
//! into the one settings type by the server's rules, over the `--config`
//! file's values.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use pilotage_server::settings::{ConfigError, FLAGS, Flag, ISSUER_FLAGS, Override, Settings, issuers_override};
use pilotage_server::telemetry::{logs, otlp};

/// The log filter unless `PILOTAGE_LOG` says otherwise: warnings, and a
/// Language author's reloads (`serve --language`), worth their one info
/// line each.
const DEFAULT_LOG_FILTER: &str = "warn,pilotage_server::language_watch=info";

/// The log filter: `PILOTAGE_LOG`, else [`DEFAULT_LOG_FILTER`].
/// The log filter of the commands other than `serve`: `PILOTAGE_LOG`,
/// else [`DEFAULT_LOG_FILTER`] without rmcp's transport worker, whose
/// ERROR on a refused handshake repeats, as Rust types, what the command
/// then says in a sentence.
pub(crate) fn tool_log_filter() -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_env("PILOTAGE_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{DEFAULT_LOG_FILTER},rmcp::transport::worker=off"))
    })
}

pub(crate) fn log_filter() -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_env("PILOTAGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER))
}

/// The settings of a server command: `--config FILE` (`PILOTAGE_CONFIG`) and
/// every flag of [`FLAGS`], each over the file's value, which is over the
/// default.
#[derive(Clone, Debug, Default)]
pub(crate) struct SettingsArgs {
    config: Option<PathBuf>,
    given: Vec<(&'static Flag, Override)>,
    issuers: Vec<String>,
    jwks_urls: Vec<String>,
}

impl SettingsArgs {
    /// The settings in effect, checked.
    ///
    /// # Errors
    /// [`ConfigError`] when the file does not read or parse, a value does
    /// not fit its setting, or the settings are inconsistent.
    pub(crate) fn settings(&self) -> Result<Settings, ConfigError> {
        let base = match &self.config {
            Some(path) => Settings::from_file(path)?,
            None => Settings::default(),
        };
        let mut overrides = self.given.clone();
        if let Some(issuers) = issuers_override(&self.issuers, &self.jwks_urls)? {
            overrides.push((&ISSUER_FLAGS[0], issuers));
        }
        let settings = base.with_overrides(&overrides)?;
        settings.check()?;
        Ok(settings)
    }

    /// Whether a flag (or its variable) gave `name`.
    pub(crate) fn gives(&self, name: &str) -> bool {
        self.given.iter().any(|(flag, _)| flag.name == name)
    }
}

impl FromArgMatches for SettingsArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let strings = |name: &str| -> Vec<String> {
            matches.get_many::<String>(name).map(|values| values.cloned().collect()).unwrap_or_default()
        };
        let mut given = Vec::new();
        for flag in FLAGS {
            if !matches.contains_id(flag.name) {
                continue;
            }
            let value = if flag.many {
                Override::Many(strings(flag.name))
            } else {
                match matches.get_one::<String>(flag.name) {
                    Some(value) => Override::One(value.clone()),
                    None => continue,
                }
            };
            given.push((flag, value));
        }
        Ok(SettingsArgs {
            config: matches.get_one::<PathBuf>("config").cloned(),
            given,
            issuers: strings(ISSUER_FLAGS[0].name),
            jwks_urls: strings(ISSUER_FLAGS[1].name),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = SettingsArgs::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for SettingsArgs {
    fn augment_args(command: Command) -> Command {
        let mut command = command.arg(
            Arg::new("config")
                .long("config")
                .env("PILOTAGE_CONFIG")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("A TOML settings file"),
        );
        for flag in FLAGS.iter().chain(&ISSUER_FLAGS) {
            let mut arg = Arg::new(flag.name).long(flag.name).env(flag.env).value_name(flag.value).help(flag.help);
            if flag.many {
                arg = arg.action(ArgAction::Append).value_delimiter(',');
            }
            if flag.name == "demo" {
                arg = arg.num_args(0..=1).default_missing_value("true");
            }
            command = command.arg(arg);
        }
        command
    }

    fn augment_args_for_update(command: Command) -> Command {
        SettingsArgs::augment_args(command)
    }
}

/// `pilotage serve`.
#[derive(Args, Clone, Debug)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    settings: SettingsArgs,
    /// Serve MCP over stdin/stdout instead of HTTP.
    #[arg(long)]
    stdio: bool,
}

/// Writes `line` and a newline to stderr, ignoring a failure: `eprintln!`
/// panics when stderr is a pipe whose reader is gone (a log shipper that
/// died, `serve 2>&1 | head`), and the task that stops the server on
/// SIGTERM says "shutting down" first, so the server ran on until SIGKILL.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Resolves on Ctrl-C or SIGTERM.
pub(crate) async fn shutdown_signal() {
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
fn serve_telemetry(settings: &Settings) -> Result<Option<otlp::OtlpPipeline>> {
    let target = otlp::ExportTarget::resolve(settings.otlp_endpoint.as_deref(), |name| std::env::var(name).ok())?;
    let pipeline =
        target.map(|target| otlp::OtlpPipeline::start(&target, tokio::runtime::Handle::current())).transpose()?;
    logs::init(log_filter(), settings.log_format, pipeline.as_ref())?;
    Ok(pipeline)
}

/// `pilotage serve`: until a signal, over HTTP or stdio.
pub(crate) async fn serve(args: ServeArgs) -> Result<ExitCode> {
    let settings = args.settings.settings()?;
    let pipeline = serve_telemetry(&settings)?;
    let code = if args.stdio { serve_stdio(settings).await } else { serve_http(settings).await };
    // Spans still queued are exported before the process ends.
    if let Some(pipeline) = pipeline {
        pipeline.shutdown().await;
    }
    code
}

async fn serve_http(settings: Settings) -> Result<ExitCode> {
    let server = pilotage_server::start::start(settings, &pilotage_bundled::ALL).await?;
    say(format_args!("Pilotage Platform: MCP at {}", server.mcp_url()));
    if let Some((addr, _)) = &server.demo_world {
        say(format_args!("demo capability service at http://{addr}"));
    }
    let token = server.shutdown_token();
    tokio::spawn(async move {
        shutdown_signal().await;
        say(format_args!("shutting down"));
        token.cancel();
    });
    server.wait().await;
    Ok(ExitCode::SUCCESS)
}

async fn serve_stdio(mut settings: Settings) -> Result<ExitCode> {
    use pilotage_server::mcp::PilotageServer;
    use pilotage_server::mcp::observed::ObservedServer;
    use rmcp::ServiceExt;
    // Nothing listens over HTTP; the demo capability service still runs.
    settings.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let server = pilotage_server::start::start(settings, &pilotage_bundled::ALL).await?;
    let session = format!("stdio-{}", std::process::id());
    let handler = ObservedServer::stdio(PilotageServer::stdio(
        server.platform.clone(),
        server.listeners().clone(),
        session.clone(),
    ));
    let running = handler.serve(rmcp::transport::stdio()).await.map_err(|e| anyhow!("stdio: {e}"))?;
    let _ = running.waiting().await;
    let _ = server.platform.store().runs_delete_session(&session).await;
    server.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// `pilotage demo`: the main job.
pub(crate) async fn demo(args: SettingsArgs) -> Result<ExitCode> {
    let mut settings = args.settings()?;
    if !args.gives("listen") {
        // Any free loopback port: the demo never collides with a server.
        settings.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    }
    if !args.gives("console") {
        // The demo shows the fired rule's Run page in the console.
        settings.console = true;
    }
    if !args.gives("retention") {
        // Its Runs outlive a day, so `serve` on the same data folder shows
        // them afterwards (README, "look around afterwards").
        settings.retention = "P7D".to_owned();
    }
    let mut out = std::io::stdout();
    let report = crate::demo::run(settings, &mut out).await?;
    Ok(if report.succeeded() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `pilotage migrate`.
pub(crate) async fn migrate(args: SettingsArgs) -> Result<ExitCode> {
    let settings = args.settings()?;
    let store = pilotage_store::Store::connect(&settings.database_url()).await?;
    store.migrate().await?;
    say(format_args!("migrations applied to {}", settings.database_url()));
    Ok(ExitCode::SUCCESS)
}

/// `pilotage demo-world`: the demo capability service alone.
pub(crate) async fn demo_world(listen: std::net::SocketAddr) -> Result<ExitCode> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    say(format_args!("demo capability service at http://{}", listener.local_addr()?));
    pilotage_server::demo::world::serve(listener, Default::default(), shutdown_signal()).await?;
    Ok(ExitCode::SUCCESS)
}
