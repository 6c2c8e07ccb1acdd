//! Starting and stopping the platform: engine, store and migrations, the
//! demo tenant and its capability service, a Language author's watched
//! files (`language_watch`), the HTTP listener, the expiry sweeper, and
//! graceful shutdown. Tests start the server exactly as
//! `pilotage serve` does (Part IV §4.1).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::catalog::StoredEntry;
use crate::config::{ConfigError, Settings};
use crate::demo_world::{self, DemoWorld};
use crate::engine::{Engine, EngineError};
use crate::http::{EdgeSettings, app};
use crate::operations::now_ms;
use crate::protocol::catalog::CatalogEntry;
use crate::run::invoker::HttpBinding;
use crate::service::{Platform, Principal};
use crate::store::{Store, StoreError};

/// The demo tenant's catalog, with `{demo}` standing for the demo
/// capability service's base URL.
pub const DEMO_CATALOG: &str = include_str!("../demo/catalog.json");

/// The demo home's device registry (automation/1's catalog), with `{demo}`
/// standing for the demo capability service's base URL.
pub const DEMO_HOME_CATALOG: &str = include_str!("../demo/home.json");

/// The Language the demo home's entries are offered to.
pub const DEMO_HOME_LANGUAGE: &str = "automation/1";

/// The webhook source the demo home's hub reports events as; its signing
/// key is the demo tenant's secret `webhook:home`, made at each start.
pub const DEMO_HOME_SOURCE: &str = "home";

/// How often expired runs and idempotency keys are deleted.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Occurs when the server cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Occurs when the settings are invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Occurs when the engine or a bundled Language fails.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Occurs when the database fails.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Occurs when a listener cannot bind or the data folder cannot be
    /// created.
    #[error("{0}")]
    Io(String),
    /// Occurs when the demo catalog is malformed.
    #[error("demo catalog: {0}")]
    Demo(String),
    /// Occurs when a file of `languages` cannot be served: unreadable,
    /// not loadable, failing the conformance lint (its findings are in the
    /// message), or declaring another file's Language.
    #[error(transparent)]
    LanguageFile(#[from] crate::language_watch::LanguageFileError),
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
    pub demo_sql: Option<Result<String, String>>,
    language_files: crate::language_watch::LanguageFilesStatus,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl Server {
    /// The base URL of `/mcp`.
    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// What each file of `languages` serves and how its reloads went, in
    /// the configured order; empty without such files.
    pub fn language_files(&self) -> Vec<crate::language_watch::LanguageFileStatus> {
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

/// The demo tenant's SQL: the sales database created (idempotently) on
/// `admin_url`, the bundled `sql/postgres-15` unless an uploaded version
/// serves, and the data source `sales` reading it as a read-only role.
/// Returns the database's `host:port/database`.
async fn demo_sql(
    platform: &Platform,
    tenant: &std::sync::Arc<crate::service::Tenant>,
    admin_url: &str,
) -> Result<String, String> {
    use crate::datasource::attached::{AttachedSource, DataSourceSpec};
    // A refused connection says so at once; the pool would only report a
    // timeout after its connect bound.
    let options: sqlx::postgres::PgConnectOptions =
        admin_url.parse().map_err(|e| format!("demo_postgres '{admin_url}' does not parse: {e}"))?;
    let address = format!("{}:{}", options.get_host(), options.get_port());
    if !options.get_host().starts_with('/') {
        let probe =
            tokio::time::timeout(std::time::Duration::from_secs(3), tokio::net::TcpStream::connect(&address)).await;
        match probe {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => return Err(format!("PostgreSQL is unreachable at {address}: {error}")),
            Err(_) => return Err(format!("PostgreSQL is unreachable at {address}: no answer within 3 s")),
        }
    }
    let config = crate::datasource::demo::ensure_demo_database(admin_url).await.map_err(|e| e.to_string())?;
    if tenant.language(crate::datasource::introspection::LANGUAGE).is_none() {
        let engine = platform.engine().clone();
        let component = tokio::task::spawn_blocking(move || engine.load(crate::bundled::SQL))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        tenant.install_language(crate::service::LanguageSlot::new(component, platform.retention().clone()));
    }
    if tenant.data_source("sales").is_none() {
        let spec: DataSourceSpec =
            serde_json::from_value(serde_json::json!({"schemas": config.schemas})).map_err(|e| e.to_string())?;
        let attached =
            AttachedSource::new("sales", spec, &config.url, platform.runtime().clone()).map_err(|e| e.to_string())?;
        let attached = std::sync::Arc::new(attached);
        tenant.attach_data_source(attached.clone());
        attached.refresh(tenant).await.map_err(|e| e.to_string())?;
    }
    Ok(tenant.data_source("sales").map(|s| s.source.target().to_owned()).unwrap_or_default())
}

/// How long a shutdown waits, after the last tool call answered, before it
/// closes the sessions (their streams still carry the last answers).
const ANSWER_LINGER: std::time::Duration = std::time::Duration::from_millis(300);

/// How often data sources are checked for a due catalog refresh.
const REFRESH_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Refreshes every data source whose `refresh_interval_s` has passed.
async fn refresh_due_data_sources(platform: &Platform) {
    for tenant in platform.tenants() {
        for source in tenant.data_sources() {
            if !source.refresh_due() {
                continue;
            }
            match source.refresh(&tenant).await {
                Ok(report) if report.added.is_empty() && report.modified.is_empty() && report.removed.is_empty() => {}
                Ok(report) => tracing::info!(tenant = %tenant.id, source = %source.name, ?report, "catalog refreshed"),
                Err(error) => {
                    tracing::warn!(tenant = %tenant.id, source = %source.name, %error, "catalog refresh failed")
                }
            }
        }
    }
}

/// The Language the demo catalog's capabilities are written for; the
/// demo tenant also offers them to every Language served from a file
/// (`Settings::languages`), never to sql/postgres-15, whose catalog is its
/// database.
pub const DEMO_CATALOG_LANGUAGE: &str = "workflow/v1";

/// Parses the demo catalog, binding callable entries to `base_url` and
/// offering each entry to `languages` (its `languages` member, Part II
/// §5.4), whatever the file says.
///
/// # Errors
/// A message when the file is malformed.
pub fn demo_entries(base_url: &str, languages: &[String]) -> Result<Vec<StoredEntry>, String> {
    catalog_file_entries(DEMO_CATALOG, base_url, languages)
}

/// The demo home's device registry, bound to `base_url` and offered to
/// automation/1 only (its kinds, `sensor` and `action`, are that
/// Language's).
///
/// # Errors
/// A message when the file is malformed.
pub fn demo_home_entries(base_url: &str) -> Result<Vec<StoredEntry>, String> {
    catalog_file_entries(DEMO_HOME_CATALOG, base_url, &[DEMO_HOME_LANGUAGE.to_owned()])
}

fn catalog_file_entries(text: &str, base_url: &str, languages: &[String]) -> Result<Vec<StoredEntry>, String> {
    let file: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let items = file.get("entries").and_then(Value::as_array).ok_or("no 'entries' array")?;
    items
        .iter()
        .map(|item| {
            let mut entry: CatalogEntry = serde_json::from_value(item.clone()).map_err(|e| e.to_string())?;
            entry.languages = Some(languages.to_vec());
            let binding = match item.get("binding") {
                Some(binding) => {
                    let mut binding: HttpBinding =
                        serde_json::from_value(binding.clone()).map_err(|e| e.to_string())?;
                    binding.url = binding.url.replace("{demo}", base_url);
                    Some(binding)
                }
                None => None,
            };
            let visibility = item
                .get("visibility")
                .and_then(Value::as_array)
                .map(|scopes| scopes.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            Ok(StoredEntry::new(entry, visibility, binding))
        })
        .collect()
}

/// Offers the demo catalog's entries to `language` too, when a Language
/// file is reloaded under a new name: each entry of the demo tenant whose
/// id is one of the demo file's and whose `languages` lacks it gains it.
/// Returns how many entries changed.
pub fn offer_demo_catalog(tenant: &crate::service::Tenant, language: &str) -> usize {
    let Ok(file) = demo_entries("", &[]) else { return 0 };
    let changed: Vec<StoredEntry> = tenant.with_catalog(|catalog| {
        file.iter()
            .filter_map(|demo| catalog.stored(&demo.entry.id))
            .filter(|stored| stored.entry.languages.as_ref().is_some_and(|names| !names.iter().any(|n| n == language)))
            .map(|stored| {
                let mut offered = stored.as_ref().clone();
                offered.entry.languages.get_or_insert_with(Vec::new).push(language.to_owned());
                offered
            })
            .collect()
    });
    let count = changed.len();
    if count > 0 {
        tenant.put_entries(changed);
    }
    count
}

/// The authentication layer for `settings`.
///
/// # Errors
/// [`StartError::Io`] when an issuer is misconfigured or the development
/// secret cannot be created.
pub fn authenticator(
    settings: &Settings,
    platform: &Platform,
) -> Result<std::sync::Arc<crate::auth::middleware::Authenticator>, StartError> {
    use crate::auth::AuthMode;
    let resource = settings.resource();
    let verifier = match settings.auth.mode {
        AuthMode::Jwt => Some(std::sync::Arc::new(
            crate::auth::jwt::JwtVerifier::new(
                &settings.auth.issuers,
                resource.clone(),
                settings.auth.leeway_secs,
                platform.http().clone(),
            )
            .map_err(StartError::Io)?,
        )),
        AuthMode::Dev => None,
    };
    let dev = match settings.auth.mode {
        AuthMode::Dev => {
            Some(crate::auth::dev::DevTokens::load(&settings.data_dir, resource.clone()).map_err(StartError::Io)?)
        }
        AuthMode::Jwt => None,
    };
    Ok(std::sync::Arc::new(crate::auth::middleware::Authenticator {
        platform: platform.clone(),
        settings: settings.auth.clone(),
        verifier,
        dev,
        metadata_url: format!("{}/.well-known/oauth-protected-resource", settings.public_url()),
        resource,
    }))
}

/// Starts the server as `settings` say: migrations, the demo tenant (when
/// `demo`) with the files of `languages` installed over its Languages and
/// watched, the listener and the sweeper.
///
/// # Errors
/// [`StartError`] naming what failed.
pub async fn start(settings: Settings) -> Result<Server, StartError> {
    settings.check()?;
    std::fs::create_dir_all(&settings.data_dir)
        .map_err(|e| StartError::Io(format!("cannot create {}: {e}", settings.data_dir.display())))?;
    let engine = Engine::new(settings.bounds.clone(), Some(settings.data_dir.join("compiled")))?;
    // Metrics are recorded only when something can read them.
    engine.metrics().set_enabled(settings.metrics_listen.is_some() || settings.metrics_token.is_some());
    let store = Store::connect(&settings.database_url()).await?.observed(engine.metrics().clone());
    store.migrate().await?;
    // On SQLite, sessions do not survive a restart; neither do their runs.
    // On PostgreSQL they are the fleet's (fleet::sessions): only those every
    // replica left idle end, with their runs.
    let session_idle_ms = (settings.session_idle_secs as i64).saturating_mul(1000);
    if store.is_shared() {
        let ended = store.sessions_sweep(now_ms() - session_idle_ms).await?;
        if ended > 0 {
            tracing::info!(ended, "ended sessions every replica left idle");
        }
    } else {
        let dropped = store.runs_delete_all_session_bound().await?;
        if dropped > 0 {
            tracing::info!(dropped, "deleted runs of sessions that ended with the last process");
        }
    }
    // Where this replica starts following the other replicas' changes:
    // read before the tenants are loaded, so none falls between the two.
    let changes_from = if store.is_shared() { store.changes_head().await? } else { 0 };
    let principal = Principal {
        tenant: settings.dev_tenant.clone(),
        subject: settings.dev_subject.clone(),
        scopes: BTreeSet::new(),
    };
    let secrets = crate::secrets::SecretBox::load(&settings.data_dir).map_err(|e| StartError::Io(e.to_string()))?;
    let platform =
        Platform::new(engine, store, settings.retention()?, principal, secrets, settings.idempotency.clone());
    tracing::info!(instance = platform.leases().instance_id(), "idempotency claims owned as this instance");
    // A Language author's files load and pass the lint before anything
    // listens: a failure stops the start with the findings.
    let mut language_files = crate::language_watch::LanguageFiles::load(
        platform.engine(),
        &settings.languages,
        &settings.dev_tenant,
        settings.max_component_bytes,
    )
    .await?;
    let shutdown = CancellationToken::new();
    let mut tasks = Vec::new();

    // Tenants created through the admin API, with their Languages, catalogs
    // and promoted programs.
    let loaded = crate::admin::load_tenants(&platform).await.map_err(StartError::Demo)?;
    if loaded > 0 {
        tracing::info!(tenants = loaded, "tenants loaded");
    }

    let mut demo_world_addr = None;
    let mut demo_hub_key = None;
    let mut demo_sql_outcome = None;
    if settings.demo {
        let listener =
            tokio::net::TcpListener::bind(settings.demo_world_listen.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0))))
                .await
                .map_err(|e| StartError::Io(format!("cannot bind the demo capability service: {e}")))?;
        let addr = listener.local_addr().map_err(|e| StartError::Io(e.to_string()))?;
        let world = DemoWorld::default();
        let token = shutdown.clone();
        let serving = world.clone();
        tasks.push(tokio::spawn(async move {
            if let Err(error) = demo_world::serve(listener, serving, async move { token.cancelled().await }).await {
                tracing::error!(%error, "the demo capability service stopped");
            }
        }));
        platform
            .store()
            .tenant_insert(&crate::store::TenantRow {
                id: settings.dev_tenant.clone(),
                name: "Demo tenant".to_owned(),
                disabled: false,
                quotas: serde_json::to_string(&crate::service::Quotas::default()).unwrap_or_default(),
                created_at: now_ms(),
            })
            .await?;
        let tenant = platform.add_tenant(&settings.dev_tenant);
        // The bundled workflow/v1 serves unless an uploaded version does.
        if tenant.language("workflow/v1").is_none() {
            let component = platform.engine().load(crate::bundled::WORKFLOW)?;
            tenant.install_language(crate::service::LanguageSlot::new(component, platform.retention().clone()));
        }
        // So does the bundled automation/1.
        if tenant.language(DEMO_HOME_LANGUAGE).is_none() {
            let component = platform.engine().load(crate::bundled::AUTOMATION)?;
            tenant.install_language(crate::service::LanguageSlot::new(component, platform.retention().clone()));
        }
        // The demo catalog and the home come from their files; entries an
        // operator stored for the demo tenant win over them.
        let offered: Vec<String> =
            std::iter::once(DEMO_CATALOG_LANGUAGE.to_owned()).chain(language_files.names()).collect();
        let mut entries = demo_entries(&format!("http://{addr}"), &offered).map_err(StartError::Demo)?;
        entries.extend(demo_home_entries(&format!("http://{addr}")).map_err(StartError::Demo)?);
        let stored: Vec<String> = tenant.with_catalog(|c| c.all().map(|s| s.entry.id.clone()).collect());
        entries.retain(|entry| !stored.contains(&entry.entry.id));
        tenant.put_entries(entries);
        // The home hub's signing key, fresh at each start: the webhook
        // source `home` is registered for the demo tenant, and the demo
        // world signs its deliveries with it once the listener is known.
        let key = hex::encode(rand::random::<[u8; 32]>());
        let name = format!("{}{DEMO_HOME_SOURCE}", crate::deploy::WEBHOOK_SECRET_PREFIX);
        let (nonce, sealed) = platform.secrets().seal(&settings.dev_tenant, &name, &key);
        platform.store().secret_put(&settings.dev_tenant, &name, &nonce, &sealed, now_ms()).await?;
        demo_hub_key = Some(key);
        demo_world_addr = Some((addr, world));
        if settings.demo_postgres != "off" {
            let outcome = demo_sql(&platform, &tenant, &settings.demo_postgres).await;
            if let Err(why) = &outcome {
                tracing::warn!(%why, "the demo tenant runs without sql/postgres-15");
            }
            demo_sql_outcome = Some(outcome);
        }
    } else if platform.tenant(&settings.dev_tenant).is_none() {
        platform.add_tenant(&settings.dev_tenant);
    }
    // The files' Languages serve over the bundled and uploaded ones of the
    // same name, and follow their files until shutdown.
    language_files.install(&platform).await;

    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .map_err(|e| StartError::Io(format!("cannot listen on {}: {e}", settings.listen)))?;
    let addr = listener.local_addr().map_err(|e| StartError::Io(e.to_string()))?;
    // The demo home's hub reports to this listener (over loopback when it
    // listens on every interface).
    if let (Some((_, world)), Some(key)) = (&demo_world_addr, demo_hub_key) {
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
    let auth = authenticator(&settings, &platform)?;
    let admin = crate::admin::AdminState {
        platform: platform.clone(),
        auth,
        operator_token: settings.admin_token.clone(),
        limits: crate::admin::AdminLimits {
            json_bytes: settings.admin_max_body_bytes,
            component_bytes: settings.max_component_bytes,
        },
    };
    // MCP sessions close only after the tool calls in flight have answered
    // (or the grace period is over): closing them at once would drop the
    // answers of Runs that are still executing.
    let sessions = CancellationToken::new();
    let router = app(platform.clone(), EdgeSettings::from_settings(&settings), sessions.clone(), admin);
    let draining = platform.clone();
    let token = shutdown.clone();
    let grace = std::time::Duration::from_millis(settings.request_timeout_ms);
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
    // Agents see their tenant's deployments as catalog entries: publish
    // the stored ones (every tenant is loaded by now, the dev tenant too).
    for tenant in platform.tenants() {
        crate::deploy::publish_all(&platform, &tenant).await.map_err(StartError::Demo)?;
    }
    let limits = crate::http::connections::ConnectionLimits::from_settings(&settings);
    let mut metrics_addr = None;
    if let Some(metrics_listen) = settings.metrics_listen {
        let listener = tokio::net::TcpListener::bind(metrics_listen)
            .await
            .map_err(|e| StartError::Io(format!("cannot listen for metrics on {metrics_listen}: {e}")))?;
        metrics_addr = Some(listener.local_addr().map_err(|e| StartError::Io(e.to_string()))?);
        let endpoint = crate::http::metrics::MetricsEndpoint::new(platform.clone(), settings.metrics_token.as_deref());
        let router = crate::http::metrics::router(endpoint);
        let token = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            let serving =
                crate::http::connections::serve(listener, router, limits, async move { token.cancelled().await });
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

    // Deployments: the scheduler, and MQTT subscriptions following the
    // store (changes made through other replicas included).
    tasks.push(tokio::spawn(crate::deploy::runtime::scheduler(platform.clone(), shutdown.clone())));
    tasks.push(tokio::spawn(crate::deploy::runtime::Deployments::follow_subscriptions(
        platform.clone(),
        shutdown.clone(),
    )));

    let sweeper = platform.clone();
    let token = shutdown.clone();
    tasks.push(tokio::spawn(async move {
        let mut interval = tokio::time::interval(SWEEP_EVERY);
        loop {
            tokio::select! {
                _ = token.cancelled() => break,
                _ = interval.tick() => {
                    match sweeper.store().sweep(now_ms()).await {
                        Ok(0) => {}
                        Ok(deleted) => tracing::info!(deleted, "expired runs and keys deleted"),
                        Err(error) => tracing::error!(%error, "the expiry sweep failed"),
                    }
                    let firings_before = now_ms() - crate::deploy::runtime::KEEP_FIRINGS_MS;
                    let deliveries_before = now_ms() - crate::deploy::webhook::REPLAY_WINDOW_MS;
                    if let Err(error) = sweeper.store().deployments_sweep(firings_before, deliveries_before).await {
                        tracing::error!(%error, "pruning firings and deliveries failed");
                    }
                    if sweeper.store().is_shared() {
                        let store = sweeper.store();
                        let keep = now_ms() - crate::fleet::changes::KEEP_CHANGES_MS;
                        if let Err(error) = store.changes_prune(keep).await {
                            tracing::error!(%error, "pruning the change log failed");
                        }
                        match store.sessions_sweep(now_ms() - session_idle_ms).await {
                            Ok(0) => {}
                            Ok(ended) => tracing::info!(ended, "ended sessions every replica left idle"),
                            Err(error) => tracing::error!(%error, "the session sweep failed"),
                        }
                    }
                }
            }
        }
    }));
    // Idempotency claims of Runs in flight stay this process's while it
    // lives; a killed process stops renewing them (Part II §6.5.6).
    tasks.push(tokio::spawn(crate::operations::idempotency::renew_while_running(
        platform.clone(),
        shutdown.clone(),
        std::time::Duration::from_millis(settings.request_timeout_ms),
    )));
    // Other replicas' changes to tenants are applied here (fleet::changes).
    if platform.store().is_shared() {
        tasks.push(tokio::spawn(crate::fleet::changes::follow(
            platform.clone(),
            settings.database_url(),
            changes_from,
            shutdown.clone(),
        )));
    }
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
        demo_world: demo_world_addr,
        demo_sql: demo_sql_outcome,
        language_files: language_status,
        shutdown,
        tasks,
    })
}
