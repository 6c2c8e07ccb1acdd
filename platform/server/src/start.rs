//! Starting and stopping the server: engine, store and migrations, the
//! stored tenants, the demo tenant and its capability service (`demo`), a
//! Language author's watched files (`language_watch`), the listeners, the
//! background tasks (scheduler, MQTT subscriptions, sweeper, lease
//! renewal, change follower, data-source refresher), and graceful
//! shutdown. Tests start the server exactly as `pilotage serve` does
//! (Part IV §4.1).

use crate::egress::EgressSettings;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pilotage_engine::clock::system_now_ms;
use pilotage_engine::function_cache::FunctionCache;
use pilotage_engine::{Engine, EngineError};
use pilotage_store::sealing::{SecretBox, SecretError};
use pilotage_store::{Scope, Store, StoreError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::auth::AuthSetupError;
use crate::auth::middleware::Authenticator;
use crate::demo::tenant::{Bundled, DEMO_HOME_SOURCE, DemoError, DemoSqlError};
use crate::demo::world::DemoWorld;
use crate::http::app;
use crate::language_watch::{LanguageFileError, LanguageFileStatus, LanguageFiles, LanguageFilesStatus};
use crate::mcp::listeners::Listeners;
use crate::settings::{ConfigError, Settings};
use crate::tenancy::load::LoadError;
use crate::tenancy::{Platform, PlatformParts, Principal};

/// How often expired runs and idempotency keys are deleted.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The bound of the compiled functions a server with Language files keeps
/// for reuse across their rebuilds (bytes). Seen: 56 MB held after the
/// bundled Languages and two builds of the 12.8 MB componentize-js recipe.
pub const AUTHORING_FUNCTION_CACHE_BYTES: usize = 256 << 20;

/// How long a shutdown waits, after the last tool call answered, before it
/// closes the sessions (their streams still carry the last answers).
const ANSWER_LINGER: Duration = Duration::from_millis(300);

/// How often data sources are checked for a due catalog refresh.
const REFRESH_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Occurs when the server cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Occurs when the settings are invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Occurs when the engine cannot be created.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Occurs when the database fails.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Occurs when a listener cannot bind or the data folder cannot be
    /// created.
    #[error("{what}: {source}")]
    Io {
        /// What could not be done.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// Occurs when the secret box's key cannot be read or made.
    #[error(transparent)]
    Secrets(#[from] SecretError),
    /// Occurs when authentication cannot be set up (an issuer's
    /// algorithms, the development secret).
    #[error(transparent)]
    Auth(#[from] AuthSetupError),
    /// Occurs when stored tenant state cannot be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Occurs when a tenant's deployments cannot be published as catalog
    /// entries.
    #[error(transparent)]
    Publish(#[from] crate::deployments::publish::PublishError),
    /// Occurs when the demo tenant cannot be set up.
    #[error(transparent)]
    Demo(#[from] DemoError),
    /// Occurs when a file of `languages` cannot be served: unreadable,
    /// not loadable, failing the conformance lint (its findings are in the
    /// message), or declaring another file's Language.
    #[error(transparent)]
    LanguageFile(#[from] LanguageFileError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StartError {
    let what = what.into();
    move |source| StartError::Io { what, source }
}

/// A running server.
pub struct Server {
    /// Where `/mcp` listens.
    pub addr: SocketAddr,
    /// Where `/metrics` listens on a listener of its own
    /// (`metrics_listen`), if it does.
    pub metrics_addr: Option<SocketAddr>,
    /// The platform behind it.
    pub platform: Platform,
    /// The demo capability service, when started.
    pub demo_world: Option<(SocketAddr, DemoWorld)>,
    /// The demo's SQL set-up: `Some(Ok(target))` when the demo tenant has
    /// `sql/postgres-15` on the sales database at `target`,
    /// `Some(Err(why))` when PostgreSQL could not be used, `None` when the
    /// demo or its SQL part is off.
    pub demo_sql: Option<Result<String, DemoSqlError>>,
    listeners: Arc<Listeners>,
    language_files: LanguageFilesStatus,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Server {
    /// The base URL of `/mcp`.
    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The MCP sessions and subscriptions this server holds (a stdio
    /// session registers here too).
    pub fn listeners(&self) -> &Arc<Listeners> {
        &self.listeners
    }

    /// What each file of `languages` serves and how its reloads went, in
    /// the configured order; empty without such files.
    pub fn language_files(&self) -> Vec<LanguageFileStatus> {
        self.language_files.files()
    }

    /// A token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops accepting, ends sessions, and waits for the server to finish.
    pub async fn stop(self) {
        self.shutdown.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
    }

    /// Waits until the server stops (after its token is cancelled).
    pub async fn wait(self) {
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Refreshes every data source whose `refresh_interval_s` has passed.
async fn refresh_due_data_sources(platform: &Platform) {
    for tenant in platform.tenants() {
        for source in tenant.data_sources() {
            if !source.refresh_due() {
                continue;
            }
            match source.refresh(tenant.catalog()).await {
                Ok(report) if report.added.is_empty() && report.modified.is_empty() && report.removed.is_empty() => {}
                Ok(report) => tracing::info!(tenant = %tenant.id, source = %source.name, ?report, "catalog refreshed"),
                Err(error) => {
                    tracing::warn!(tenant = %tenant.id, source = %source.name, %error, "catalog refresh failed")
                }
            }
        }
    }
}

/// The authentication layer for `settings`.
///
/// # Errors
/// [`AuthSetupError`] when an issuer is misconfigured or the development
/// secret cannot be created.
pub fn authenticator(settings: &Settings, platform: &Platform) -> Result<Arc<Authenticator>, AuthSetupError> {
    use crate::auth::AuthMode;
    let resource = settings.resource();
    let verifier = match settings.auth.mode {
        AuthMode::Jwt => Some(Arc::new(
            crate::auth::jwt::JwtVerifier::new(
                &settings.auth.issuers,
                &settings.public_url(),
                settings.auth.leeway_secs,
                platform.http().clone(),
            )?
            .with_stored_issuers(platform.clone()),
        )),
        AuthMode::Dev => None,
    };
    let dev = match settings.auth.mode {
        AuthMode::Dev => Some(crate::auth::dev::DevTokens::load(&settings.data_dir, resource.clone())?),
        AuthMode::Jwt => None,
    };
    Ok(Arc::new(Authenticator {
        platform: platform.clone(),
        settings: settings.auth.clone(),
        verifier,
        dev,
        metadata_url: format!("{}/.well-known/oauth-protected-resource", settings.public_url()),
        resource,
        public_url: settings.public_url().trim_end_matches('/').to_owned(),
        proofs: Arc::default(),
    }))
}

/// Opens the store and brings it up to date: migrations, and what a
/// restart ends (on SQLite, sessions do not survive a restart and neither
/// do their runs; on PostgreSQL, only sessions every replica left idle
/// end). Returns the store and, when shared, where this replica starts
/// following the others' changes (read before the tenants are loaded, so
/// none falls between the two).
async fn open_store(settings: &Settings, engine: &Engine) -> Result<(Store, i64), StoreError> {
    let store = Store::connect(&settings.database_url()).await?.observed(engine.metrics().clone());
    store.migrate().await?;
    let session_idle_ms = (settings.session_idle_secs as i64).saturating_mul(1000);
    if store.is_shared() {
        let ended = store.sessions_sweep(system_now_ms() - session_idle_ms).await?;
        if ended > 0 {
            tracing::info!(ended, "ended sessions every replica left idle");
        }
    } else {
        let dropped = store.runs_delete_all_session_bound().await?;
        if dropped > 0 {
            tracing::info!(dropped, "deleted runs of sessions that ended with the last process");
        }
    }
    let changes_from = if store.is_shared() { store.changes_head().await? } else { 0 };
    Ok((store, changes_from))
}

/// Starts the server as `settings` say, installing `bundled` (the
/// Languages the binary ships) for the demo tenant: migrations, the
/// stored tenants, the demo tenant (when `demo`) with the files of
/// `languages` installed over its Languages and watched, the listeners and
/// the background tasks.
///
/// # Errors
/// [`StartError`] naming what failed.
pub async fn start(settings: Settings, bundled: Bundled) -> Result<Server, StartError> {
    settings.check()?;
    std::fs::create_dir_all(&settings.data_dir)
        .map_err(io(format!("cannot create {}", settings.data_dir.display())))?;
    // A Language author's loop reuses compiled functions across rebuilds:
    // builds that are not byte-reproducible (componentize-js) then
    // recompile only what changed. A hosted platform compiles each upload
    // once and keeps no such cache.
    let function_cache =
        (!settings.languages.is_empty()).then(|| Arc::new(FunctionCache::new(AUTHORING_FUNCTION_CACHE_BYTES)));
    let engine = Engine::with_capacity(
        settings.bounds.clone(),
        &settings.capacity,
        Some(settings.data_dir.join("compiled")),
        function_cache,
    )?;
    // Metrics are recorded only when something can read them.
    engine.metrics().set_enabled(settings.metrics_listen.is_some() || settings.metrics_token.is_some());
    let (store, changes_from) = open_store(&settings, &engine).await?;
    let listeners = Arc::new(Listeners::default());
    let platform = Platform::new(PlatformParts {
        engine,
        store,
        retention: settings.retention()?,
        dev_principal: Principal {
            tenant: settings.dev_tenant.clone(),
            issuer: crate::tenancy::DEV_ISSUER.to_owned(),
            subject: settings.dev_subject.clone(),
            scopes: BTreeSet::new(),
        },
        secrets: SecretBox::load(&settings.data_dir)?,
        idempotency: settings.idempotency.clone(),
        listeners: listeners.clone(),
        egress: EgressSettings { allow_private: Some(settings.egress_allow_private()), ..settings.egress.clone() },
    });
    tracing::info!(instance = platform.leases().instance_id(), "idempotency claims owned as this instance");
    // A Language author's files load and pass the lint before anything
    // listens: a failure stops the start with the findings.
    let mut language_files =
        LanguageFiles::load(platform.engine(), &settings.languages, &settings.dev_tenant, settings.max_component_bytes)
            .await?;
    let shutdown = CancellationToken::new();
    let mut tasks = Vec::new();

    // Tenants created through the admin API, with their Languages, catalogs
    // and promoted programs.
    let loaded = crate::tenancy::load::load(&platform, Scope::Every).await?;
    if loaded > 0 {
        tracing::info!(tenants = loaded, "tenants loaded");
    }

    let mut demo_world = None;
    let mut demo_hub_key = None;
    let mut demo_sql = None;
    if settings.demo {
        let (addr, world, task) = crate::demo::tenant::serve_world(&settings, shutdown.clone())
            .await
            .map_err(io("cannot bind the demo capability service"))?;
        tasks.push(task);
        demo_hub_key =
            Some(crate::demo::tenant::set_up(&platform, &settings, bundled, addr, &language_files.names()).await?);
        demo_world = Some((addr, world));
        if settings.demo_postgres != "off"
            && let Some(tenant) = platform.tenant(&settings.dev_tenant)
        {
            let outcome = crate::demo::tenant::sql(&platform, &tenant, bundled, &settings.demo_postgres).await;
            if let Err(why) = &outcome {
                tracing::warn!(%why, "the demo tenant runs without sql/postgres-15");
            }
            demo_sql = Some(outcome);
        }
    } else if platform.tenant(&settings.dev_tenant).is_none() {
        platform.add_tenant(&settings.dev_tenant);
    }
    // The files' Languages serve over the bundled and uploaded ones of the
    // same name, and follow their files until shutdown.
    language_files.install(&platform).await;
    crate::policy::settings_file::from_settings(&platform, &settings.policies).await;

    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .map_err(io(format!("cannot listen on {}", settings.listen)))?;
    let addr = listener.local_addr().map_err(io("the listener has no address"))?;
    // The demo home's hub reports to this listener (over loopback when it
    // listens on every interface).
    if let (Some((_, world)), Some(key)) = (&demo_world, demo_hub_key) {
        let mut events = addr;
        if events.ip().is_unspecified() {
            events.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        world.connect_hub(format!("http://{events}/events/{}/{DEMO_HOME_SOURCE}", settings.dev_tenant), key);
    }
    // Without a public URL, this resource is where it really listens (a
    // port of 0 is chosen only now): tokens' `aud` and the resource
    // metadata name that address.
    let mut settings = settings;
    if settings.public_url.is_none() {
        settings.public_url = Some(format!("http://{addr}"));
    }
    platform.set_public_url(&settings.public_url());
    // An approved Run runs in the call that waited: the wait leaves it its
    // wall time within the request's.
    let room = settings.request_timeout_ms.saturating_sub(settings.bounds.execution.wall_time_ms + 1000);
    platform.set_approval_wait(Duration::from_millis(settings.approval_wait_ms.min(room)));
    // Agents see their tenant's deployments as catalog entries: publish
    // the stored ones (every tenant is loaded by now, the dev tenant too).
    for tenant in platform.tenants() {
        crate::deploy::publish::publish_all(&platform, &tenant).await?;
    }
    let metrics_addr = serve(&settings, &platform, &listeners, listener, &shutdown, &mut tasks).await?;
    tasks.push(tokio::spawn(crate::mcp::listeners::watch_catalogs(
        listeners.clone(),
        platform.clone(),
        shutdown.clone(),
    )));
    spawn_background(&settings, &platform, changes_from, &shutdown, &mut tasks);
    // Each Language file is watched until shutdown (spawned last, so a
    // start that fails leaves no watcher behind).
    let language_status = language_files.status();
    if !language_files.is_empty() {
        tasks.push(tokio::spawn(language_files.watch(platform.clone(), shutdown.clone())));
    }
    tracing::info!(%addr, "Pilotage Platform listening");
    Ok(Server {
        addr,
        metrics_addr,
        platform,
        demo_world,
        demo_sql,
        listeners,
        language_files: language_status,
        shutdown,
        tasks,
    })
}

/// Serves the router on `listener`, and `/metrics` on a listener of its own
/// when `metrics_listen` says so (returning that listener's address), until
/// `shutdown`; a shutdown drains the tool calls in flight before the MCP
/// sessions close.
async fn serve(
    settings: &Settings,
    platform: &Platform,
    listeners: &Arc<Listeners>,
    listener: tokio::net::TcpListener,
    shutdown: &CancellationToken,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Result<Option<SocketAddr>, StartError> {
    let auth = authenticator(settings, platform)?;
    let admin = crate::admin::AdminState {
        platform: platform.clone(),
        auth,
        operator_token: settings.admin_token.clone(),
        limits: crate::admin::AdminLimits {
            json_bytes: settings.admin_max_body_bytes,
            component_bytes: settings.max_component_bytes,
        },
        throttle: Arc::new(crate::admin::SignInThrottle::new(settings.trusted_proxies()?)),
        // Its routes are the console's: without the console, no sign-in
        // through it is offered anywhere (the approval page included).
        console_sign_in: settings.console.then(|| settings.console_sign_in.clone()).flatten().map(Arc::new),
    };
    // MCP sessions close only after the tool calls in flight have answered
    // (or the grace period is over): closing them at once would drop the
    // answers of Runs that are still executing.
    let sessions = CancellationToken::new();
    let router = app(platform.clone(), listeners.clone(), settings, sessions.clone(), admin);
    let draining = platform.clone();
    let token = shutdown.clone();
    let grace = Duration::from_millis(settings.request_timeout_ms);
    tasks.push(tokio::spawn(async move {
        token.cancelled().await;
        draining.in_flight().start_draining();
        if tokio::time::timeout(grace, draining.in_flight().idle()).await.is_err() {
            tracing::warn!(
                left = draining.in_flight().count(),
                "tool calls still running at the end of the grace period"
            );
        }
        // The last answers are queued on their streams; let them reach the
        // wire before the sessions close.
        tokio::time::sleep(ANSWER_LINGER).await;
        sessions.cancel();
    }));
    let limits = crate::http::connections::ConnectionLimits::from_settings(settings);
    let mut metrics_addr = None;
    if let Some(metrics_listen) = settings.metrics_listen {
        let metrics_listener = tokio::net::TcpListener::bind(metrics_listen)
            .await
            .map_err(io(format!("cannot listen for metrics on {metrics_listen}")))?;
        metrics_addr = Some(metrics_listener.local_addr().map_err(io("the metrics listener has no address"))?);
        let endpoint = crate::http::metrics::MetricsEndpoint::new(
            platform.clone(),
            listeners.clone(),
            settings.metrics_token.as_deref(),
        );
        let router = crate::http::metrics::router(endpoint);
        let token = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            let serving =
                crate::http::connections::serve(
                    metrics_listener,
                    router,
                    limits,
                    async move { token.cancelled().await },
                );
            if let Err(error) = serving.await {
                tracing::error!(%error, "the metrics listener stopped");
            }
        }));
    }
    let token = shutdown.clone();
    tasks.push(tokio::spawn(async move {
        let serving = crate::http::connections::serve(listener, router, limits, async move { token.cancelled().await });
        if let Err(error) = serving.await {
            tracing::error!(%error, "the HTTP server stopped");
        }
    }));
    Ok(metrics_addr)
}

/// The background tasks, until `shutdown`: the deployments' scheduler and
/// MQTT subscriptions, the expiry sweeper, the renewal of idempotency
/// leases, the follower of other replicas' changes (on PostgreSQL), and
/// the data-source refresher.
fn spawn_background(
    settings: &Settings,
    platform: &Platform,
    changes_from: i64,
    shutdown: &CancellationToken,
    tasks: &mut Vec<JoinHandle<()>>,
) {
    // Deployments: the scheduler, and MQTT subscriptions following the
    // store (changes made through other replicas included).
    tasks.push(tokio::spawn(crate::deploy::runtime::scheduler(platform.clone(), shutdown.clone())));
    tasks.push(tokio::spawn(crate::deploy::mqtt::follow_subscriptions(platform.clone(), shutdown.clone())));
    let sweeper = platform.clone();
    let token = shutdown.clone();
    let session_idle_ms = (settings.session_idle_secs as i64).saturating_mul(1000);
    tasks.push(tokio::spawn(async move {
        let mut interval = tokio::time::interval(SWEEP_EVERY);
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                _ = interval.tick() => sweep(&sweeper, session_idle_ms).await,
            }
        }
    }));
    // Idempotency claims of Runs in flight stay this process's while it
    // lives; a killed process stops renewing them (Part II §6.5.6).
    tasks.push(tokio::spawn(crate::operations::idempotency::renew_while_running(
        platform.clone(),
        shutdown.clone(),
        Duration::from_millis(settings.request_timeout_ms),
    )));
    // Other replicas' changes to tenants are applied here (fleet::follow).
    if platform.store().is_shared() {
        tasks.push(tokio::spawn(crate::fleet::follow::follow(
            platform.clone(),
            settings.database_url(),
            changes_from,
            shutdown.clone(),
        )));
    }
    // Usage figures go to the store every FLUSH_EVERY, and once more when
    // the tool calls in flight have ended at shutdown.
    let usage = platform.clone();
    let token = shutdown.clone();
    let grace = Duration::from_millis(settings.request_timeout_ms);
    tasks.push(tokio::spawn(async move {
        let mut interval = tokio::time::interval(crate::tenancy::usage::FLUSH_EVERY);
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                _ = interval.tick() => flush_usage(&usage).await,
            }
        }
        let _ = tokio::time::timeout(grace, usage.in_flight().idle()).await;
        flush_usage(&usage).await;
    }));
    // Data sources' catalogs follow their databases.
    let refresher = platform.clone();
    let token = shutdown.clone();
    tasks.push(tokio::spawn(async move {
        let mut interval = tokio::time::interval(REFRESH_CHECK_EVERY);
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                _ = interval.tick() => refresh_due_data_sources(&refresher).await,
            }
        }
    }));
}

/// Writes the usage figures waiting in memory; a failure keeps them for
/// the next pass.
async fn flush_usage(platform: &Platform) {
    if let Err(error) = platform.flush_usage().await {
        tracing::warn!(%error, "usage figures could not be stored; they are kept for the next try");
    }
}

/// One pass of the sweeper: expired runs and idempotency keys (by the
/// platform's clock, which retention is measured on), firings kept past
/// their week, approvals and budget windows past `policy::KEEP_MS`, and on
/// PostgreSQL the change log and sessions every replica
/// left idle (by the system clock, which replicas share).
async fn sweep(platform: &Platform, session_idle_ms: i64) {
    let store = platform.store();
    let now = platform.clock().now_ms();
    match store.sweep(now).await {
        Ok(0) => {}
        Ok(deleted) => tracing::info!(deleted, "expired runs and keys deleted"),
        Err(error) => tracing::error!(%error, "the expiry sweep failed"),
    }
    let firings_before = now - crate::deploy::runtime::KEEP_FIRINGS_MS;
    let deliveries_before = system_now_ms() - crate::deploy::webhook::REPLAY_WINDOW_MS;
    if let Err(error) = store.deployments_sweep(firings_before, deliveries_before).await {
        tracing::error!(%error, "pruning firings and deliveries failed");
    }
    if let Err(error) = store.approvals_sweep(now - crate::policy::KEEP_MS).await {
        tracing::error!(%error, "pruning approvals and budget windows failed");
    }
    if store.is_shared() {
        let keep = system_now_ms() - crate::fleet::follow::KEEP_CHANGES_MS;
        if let Err(error) = store.changes_prune(keep).await {
            tracing::error!(%error, "pruning the change log failed");
        }
        match store.sessions_sweep(system_now_ms() - session_idle_ms).await {
            Ok(0) => {}
            Ok(ended) => tracing::info!(ended, "ended sessions every replica left idle"),
            Err(error) => tracing::error!(%error, "the session sweep failed"),
        }
    }
}
