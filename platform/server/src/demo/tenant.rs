//! The demo tenant (`Settings::demo`): the bundled Languages, the demo
//! catalog and the demo home's device registry bound to the demo capability
//! service, the webhook source `home` with a signing key made at each
//! start, and, when PostgreSQL answers, `sql/postgres-15` on a small sales
//! database. Entries an operator stored for the demo tenant win over the
//! files'.

use std::net::SocketAddr;
use std::sync::Arc;

use pilotage_engine::catalog::{HttpBinding, StoredEntry};
use pilotage_engine::{Component, EngineError};
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_store::TenantRow;
use serde_json::Value;

use super::world::DemoWorld;
use crate::datasource::DataSourceError;
use crate::datasource::attached::{AttachedSource, DataSourceSpec};
use crate::deploy::model::WEBHOOK_SECRET_PREFIX;
use crate::settings::Settings;
use crate::tenancy::{LanguageSlot, Platform, Quotas, Tenant};

/// The demo tenant's catalog, with `{demo}` standing for the demo
/// capability service's base URL.
pub const DEMO_CATALOG: &str = include_str!("../../demo/catalog.json");

/// The demo home's device registry (automation/1's catalog), with `{demo}`
/// standing for the demo capability service's base URL.
pub const DEMO_HOME_CATALOG: &str = include_str!("../../demo/home.json");

/// The Language the demo home's entries are offered to.
pub const DEMO_HOME_LANGUAGE: &str = "automation/1";

/// The webhook source the demo home's hub reports events as; its signing
/// key is the demo tenant's secret `webhook:home`, made at each start.
pub const DEMO_HOME_SOURCE: &str = "home";

/// The Language the demo catalog's capabilities are written for; the
/// demo tenant also offers them to every Language served from a file
/// (`Settings::languages`), never to sql/postgres-15, whose catalog is its
/// database.
pub const DEMO_CATALOG_LANGUAGE: &str = "workflow/v1";

/// The Language the demo's sales database is offered to.
pub const DEMO_SQL_LANGUAGE: &str = crate::datasource::introspection::LANGUAGE;

/// The components a server installs for the demo tenant: each Language's
/// name (`family/version`) with its component's bytes, as the binary
/// bundles them.
pub type Bundled = &'static [(&'static str, &'static [u8])];

/// Occurs when a demo catalog file is malformed.
#[derive(Debug, thiserror::Error)]
#[error("a demo catalog file: {0}")]
pub struct CatalogFileError(String);

/// Occurs when the demo tenant cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// Occurs when a bundled Language does not load.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Occurs when the store fails.
    #[error(transparent)]
    Store(#[from] pilotage_store::StoreError),
    /// Occurs when a demo catalog file is malformed.
    #[error(transparent)]
    Catalog(#[from] CatalogFileError),
}

/// Why the demo tenant runs without `sql/postgres-15` (the demo says so and
/// runs the rest).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoSqlError {
    /// Occurs when `demo_postgres` is not a PostgreSQL URL.
    #[error("demo_postgres '{url}' does not parse: {message}")]
    Url {
        /// The setting.
        url: String,
        /// Why.
        message: String,
    },
    /// Occurs when nothing answers at the URL's address.
    #[error("PostgreSQL is unreachable at {address}: {message}")]
    Unreachable {
        /// `host:port`.
        address: String,
        /// Why.
        message: String,
    },
    /// Occurs when the sales database cannot be made or read.
    #[error(transparent)]
    DataSource(#[from] DataSourceError),
    /// Occurs when the binary bundles no `sql/postgres-15`.
    #[error("this binary bundles no {DEMO_SQL_LANGUAGE}")]
    NotBundled,
    /// Occurs when the bundled `sql/postgres-15` does not load.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Parses the demo catalog, binding callable entries to `base_url` and
/// offering each entry to `languages` (its `languages` member, Part II
/// §5.4), whatever the file says.
///
/// # Errors
/// [`CatalogFileError`] when the file is malformed.
pub fn demo_entries(base_url: &str, languages: &[String]) -> Result<Vec<StoredEntry>, CatalogFileError> {
    catalog_file_entries(DEMO_CATALOG, base_url, languages)
}

/// The demo home's device registry, bound to `base_url` and offered to
/// automation/1 only (its kinds, `sensor` and `action`, are that
/// Language's).
///
/// # Errors
/// [`CatalogFileError`] when the file is malformed.
pub fn demo_home_entries(base_url: &str) -> Result<Vec<StoredEntry>, CatalogFileError> {
    catalog_file_entries(DEMO_HOME_CATALOG, base_url, &[DEMO_HOME_LANGUAGE.to_owned()])
}

fn catalog_file_entries(
    text: &str,
    base_url: &str,
    languages: &[String],
) -> Result<Vec<StoredEntry>, CatalogFileError> {
    let malformed = |error: serde_json::Error| CatalogFileError(error.to_string());
    let file: Value = serde_json::from_str(text).map_err(malformed)?;
    let items =
        file.get("entries").and_then(Value::as_array).ok_or_else(|| CatalogFileError("no 'entries' array".into()))?;
    items
        .iter()
        .map(|item| {
            let mut entry: CatalogEntry = serde_json::from_value(item.clone()).map_err(malformed)?;
            entry.languages = Some(languages.to_vec());
            let binding = match item.get("binding") {
                Some(binding) => {
                    let mut binding: HttpBinding = serde_json::from_value(binding.clone()).map_err(malformed)?;
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
pub fn offer_demo_catalog(tenant: &Tenant, language: &str) -> usize {
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

/// The bundled component of `language`, loaded (shared with any tenant
/// serving the same bytes); `None` when the binary bundles no such
/// Language.
fn bundled(platform: &Platform, bundled: Bundled, language: &str) -> Option<Result<Component, EngineError>> {
    let (_, bytes) = bundled.iter().find(|(name, _)| *name == language)?;
    Some(platform.engine().load(bytes))
}

/// Sets up the demo tenant on `platform`: its row, the bundled workflow/v1
/// and automation/1 (unless uploaded versions serve), the demo catalog and
/// home bound to the capability service at `world` and offered to
/// `offered` Languages besides workflow/v1, and the webhook source `home`.
/// Returns the home hub's signing key.
///
/// # Errors
/// [`DemoError`] when a bundled Language does not load, the store fails,
/// or a catalog file is malformed.
pub async fn set_up(
    platform: &Platform,
    settings: &Settings,
    components: Bundled,
    world: SocketAddr,
    offered: &[String],
) -> Result<String, DemoError> {
    platform
        .store()
        .tenant_insert(&TenantRow {
            id: settings.dev_tenant.clone(),
            name: "Demo tenant".to_owned(),
            disabled: false,
            quotas: serde_json::to_string(&Quotas::default()).unwrap_or_default(),
            egress: "{}".to_owned(),
            policy: "{}".to_owned(),
            issuers: "[]".to_owned(),
            created_at: platform.clock().now_ms(),
        })
        .await?;
    let tenant = platform.add_tenant(&settings.dev_tenant);
    // The bundled workflow/v1 and automation/1 serve unless uploaded
    // versions do.
    for language in [DEMO_CATALOG_LANGUAGE, DEMO_HOME_LANGUAGE] {
        if tenant.language(language).is_none()
            && let Some(component) = bundled(platform, components, language)
        {
            tenant.install_language(LanguageSlot::new(component?, platform.retention().clone()));
        }
    }
    // The demo catalog and the home come from their files; entries an
    // operator stored for the demo tenant win over them.
    let offered: Vec<String> =
        std::iter::once(DEMO_CATALOG_LANGUAGE.to_owned()).chain(offered.iter().cloned()).collect();
    let base_url = format!("http://{world}");
    let mut entries = demo_entries(&base_url, &offered)?;
    entries.extend(demo_home_entries(&base_url)?);
    let stored: Vec<String> = tenant.with_catalog(|c| c.all().map(|s| s.entry.id.clone()).collect());
    entries.retain(|entry| !stored.contains(&entry.entry.id));
    tenant.put_entries(entries);
    // The home hub's signing key, fresh at each start: the webhook source
    // `home` is registered for the demo tenant, and the demo world signs
    // its deliveries with it once the listener is known.
    let key = hex::encode(rand::random::<[u8; 32]>());
    let name = format!("{WEBHOOK_SECRET_PREFIX}{DEMO_HOME_SOURCE}");
    let (nonce, sealed) = platform.secrets().seal(&settings.dev_tenant, &name, &key);
    platform.store().secret_put(&settings.dev_tenant, &name, &nonce, &sealed, platform.clock().now_ms()).await?;
    Ok(key)
}

/// The demo tenant's SQL: the sales database created (idempotently) on
/// `admin_url`, the bundled `sql/postgres-15` unless an uploaded version
/// serves, and the data source `sales` reading it as a read-only role.
/// Returns the database's `host:port/database`.
///
/// # Errors
/// [`DemoSqlError`] saying why the demo runs without SQL.
pub async fn sql(
    platform: &Platform,
    tenant: &Arc<Tenant>,
    components: Bundled,
    admin_url: &str,
) -> Result<String, DemoSqlError> {
    // A refused connection says so at once; the pool would only report a
    // timeout after its connect bound.
    let options: sqlx::postgres::PgConnectOptions = admin_url
        .parse()
        .map_err(|e: sqlx::Error| DemoSqlError::Url { url: admin_url.to_owned(), message: e.to_string() })?;
    let address = format!("{}:{}", options.get_host(), options.get_port());
    if !options.get_host().starts_with('/') {
        let probe =
            tokio::time::timeout(std::time::Duration::from_secs(3), tokio::net::TcpStream::connect(&address)).await;
        let unreachable = |message: String| DemoSqlError::Unreachable { address: address.clone(), message };
        match probe {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => return Err(unreachable(error.to_string())),
            Err(_) => return Err(unreachable("no answer within 3 s".into())),
        }
    }
    let config = crate::datasource::demo::ensure_demo_database(admin_url).await?;
    if tenant.language(DEMO_SQL_LANGUAGE).is_none() {
        let (_, bytes) =
            components.iter().find(|(name, _)| *name == DEMO_SQL_LANGUAGE).ok_or(DemoSqlError::NotBundled)?;
        let engine = platform.engine().clone();
        let component = tokio::task::spawn_blocking(move || engine.load(bytes))
            .await
            .map_err(|e| DemoSqlError::DataSource(DataSourceError::Config(e.to_string())))??;
        tenant.install_language(LanguageSlot::new(component, platform.retention().clone()));
    }
    if tenant.data_source("sales").is_none() {
        let spec: DataSourceSpec = serde_json::from_value(serde_json::json!({"schemas": config.schemas}))
            .map_err(|e| DataSourceError::Config(e.to_string()))?;
        let attached = AttachedSource::new(
            "sales",
            spec,
            &config.url,
            platform.runtime().clone(),
            platform.clock().clone(),
            None,
        )?;
        let attached = Arc::new(attached);
        tenant.attach_data_source(attached.clone());
        attached.refresh(tenant.catalog()).await?;
    }
    Ok(tenant.data_source("sales").map(|s| s.source.target().to_owned()).unwrap_or_default())
}

/// The demo capability service's world, its listener's address, and the
/// task serving it until `shutdown`.
///
/// # Errors
/// The I/O error when the listener cannot be bound.
pub async fn serve_world(
    settings: &Settings,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<(SocketAddr, DemoWorld, tokio::task::JoinHandle<()>)> {
    let listener =
        tokio::net::TcpListener::bind(settings.demo_world_listen.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0))))
            .await?;
    let addr = listener.local_addr()?;
    let world = DemoWorld::default();
    let serving = world.clone();
    let task = tokio::spawn(async move {
        if let Err(error) = super::world::serve(listener, serving, async move { shutdown.cancelled().await }).await {
            tracing::error!(%error, "the demo capability service stopped");
        }
    });
    Ok((addr, world, task))
}
