//! The running [`Platform`]: the engine, the store, the tenants, the
//! caches every request shares, and who hears that a tenant's tools
//! changed ([`ToolListeners`]).
//!
//! Invariant: every lookup goes through a [`Principal`]'s tenant; nothing
//! keyed by a Language name, entry id, idempotency key or program name is
//! ever shared between tenants.

use crate::egress::{Confinement, EgressSettings};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use pilotage_engine::effects::Cancellation;
use pilotage_engine::{Clock, Component, Engine};
use pilotage_protocol::retention::Retention;
use pilotage_store::sealing::SecretBox;
use pilotage_store::{Store, StoreError};

use super::deploy_state::Deployments;
use super::in_flight::InFlight;
use super::issuers::{IssuerConfig, StoredIssuers};
use super::leases::{IdempotencySettings, Leases};
use super::principal::Principal;
use super::tenant::{LanguageSlot, Tenant};
use super::validation_cache::ValidationCache;

/// Who hears that a tenant's tool list changed (Part III §4.7): the MCP
/// binding's sessions and subscriptions implement it, so the platform
/// tells them without knowing MCP.
pub trait ToolListeners: Send + Sync {
    /// Tells every listener of `tenant` that its tool list changed.
    fn tools_changed<'a>(&'a self, tenant: &'a str) -> futures::future::BoxFuture<'a, ()>;
}

/// No one listening (a platform without an MCP surface, as in tools that
/// only load state).
#[derive(Debug, Default)]
pub struct NoListeners;

impl ToolListeners for NoListeners {
    fn tools_changed<'a>(&'a self, _tenant: &'a str) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// Occurs when a tenant secret cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretValueError {
    /// Occurs when the tenant has no secret of that name.
    #[error("secret '{0}' does not exist")]
    Missing(String),
    /// Occurs when the store cannot be read.
    #[error(transparent)]
    Store(#[from] pilotage_store::StoreError),
    /// Occurs when the stored value does not open with this platform's
    /// key (another key, or a value sealed for another tenant or name).
    #[error(transparent)]
    Sealed(#[from] pilotage_store::sealing::SecretError),
}

/// What a [`Platform`] is assembled from.
pub struct PlatformParts {
    /// The wasm engine; its clock is the platform's.
    pub engine: Engine,
    /// The store.
    pub store: Store,
    /// The retention every Language declares (Part II §6.6).
    pub retention: Retention,
    /// The principal requests act as under development authentication.
    pub dev_principal: Principal,
    /// The box tenant secrets are sealed with.
    pub secrets: SecretBox,
    /// Leases of idempotency claims (Part II §6.5.6).
    pub idempotency: IdempotencySettings,
    /// Who hears that a tenant's tools changed.
    pub listeners: Arc<dyn ToolListeners>,
    /// Where tenants may make the platform connect, `allow_private`
    /// decided (unset: off).
    pub egress: EgressSettings,
}

/// The running platform. Cheap to clone.
#[derive(Clone)]
pub struct Platform {
    inner: Arc<PlatformInner>,
}

struct PlatformInner {
    engine: Engine,
    store: Store,
    tenants: RwLock<BTreeMap<String, Arc<Tenant>>>,
    validations: ValidationCache,
    listeners: Arc<dyn ToolListeners>,
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
    retention: Retention,
    dev_principal: Principal,
    secrets: SecretBox,
    in_flight: InFlight,
    leases: Arc<Leases>,
    deployments: Deployments,
    egress: EgressSettings,
    /// The externally visible base URL, known once the listener is bound.
    public_url: std::sync::OnceLock<String>,
    /// How long an execute held for approval waits for a decision, ms.
    approval_wait_ms: std::sync::atomic::AtomicU64,
    /// The MCP tasks whose Runs this replica runs, by task id.
    running_tasks: std::sync::Mutex<std::collections::HashMap<String, Cancellation>>,
    /// The issuers each tenant trusts (its stored `issuers`), and their
    /// index by `iss`, rebuilt on each change (rare: an operator's).
    issuers: RwLock<TenantIssuers>,
    /// What each tenant's Runs used, not yet in the store.
    usage: super::usage::Usage,
}

/// Each tenant's stored issuers, and their index by `iss`.
#[derive(Default)]
struct TenantIssuers {
    by_tenant: BTreeMap<String, Vec<IssuerConfig>>,
    index: Arc<StoredIssuers>,
}

impl std::fmt::Debug for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Platform").finish_non_exhaustive()
    }
}

impl Platform {
    /// Assembles a platform from its parts. Call inside a tokio runtime.
    pub fn new(parts: PlatformParts) -> Platform {
        crate::install_crypto_provider();
        let http = reqwest::Client::builder()
            .user_agent(concat!("pilotage/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        let PlatformParts { engine, store, retention, dev_principal, secrets, idempotency, listeners, egress } = parts;
        Platform {
            inner: Arc::new(PlatformInner {
                engine,
                store,
                tenants: RwLock::new(BTreeMap::new()),
                validations: ValidationCache::new(4096),
                listeners,
                http,
                runtime: tokio::runtime::Handle::current(),
                retention,
                dev_principal,
                secrets,
                in_flight: InFlight::default(),
                leases: Leases::new(idempotency),
                deployments: Deployments::default(),
                issuers: RwLock::new(TenantIssuers::default()),
                egress,
                public_url: std::sync::OnceLock::new(),
                approval_wait_ms: std::sync::atomic::AtomicU64::new(20_000),
                running_tasks: Default::default(),
                usage: super::usage::Usage::default(),
            }),
        }
    }

    /// The externally visible base URL, without a trailing slash (the
    /// approval page's links are below it); empty before the listener is
    /// bound.
    pub fn public_url(&self) -> &str {
        self.inner.public_url.get().map_or("", String::as_str)
    }

    /// How long an execute held for approval waits in the same call for a
    /// human's decision (setting `approval_wait_ms`).
    pub fn approval_wait(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.inner.approval_wait_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Sets [`Platform::approval_wait`].
    pub fn set_approval_wait(&self, wait: std::time::Duration) {
        self.inner.approval_wait_ms.store(wait.as_millis() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// Sets [`Platform::public_url`], once (start-up, after the bind).
    pub fn set_public_url(&self, url: &str) {
        let _ = self.inner.public_url.set(url.trim_end_matches('/').to_owned());
    }

    /// The platform's one clock (the engine's): every instant the server
    /// stores or compares is read from it, so a test that freezes it
    /// freezes them all.
    pub fn clock(&self) -> &Clock {
        self.inner.engine.clock()
    }

    /// This process's instance id and the idempotency claims it renews
    /// (Part II §6.5.6).
    pub fn leases(&self) -> &Arc<Leases> {
        &self.inner.leases
    }

    /// Records that this replica runs task `task_id`'s Run, stopped by
    /// `cancellation`.
    pub(crate) fn task_started(&self, task_id: &str, cancellation: Cancellation) {
        self.running_tasks().insert(task_id.to_owned(), cancellation);
    }

    /// Forgets task `task_id`'s Run (it ended).
    pub(crate) fn task_ended(&self, task_id: &str) {
        self.running_tasks().remove(task_id);
    }

    /// Stops task `task_id`'s Run at its next invocation boundary, when
    /// this replica runs it; `false` otherwise.
    pub(crate) fn task_cancel_here(&self, task_id: &str) -> bool {
        self.running_tasks().get(task_id).map(Cancellation::cancel).is_some()
    }

    fn running_tasks(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Cancellation>> {
        self.inner.running_tasks.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Tool calls being served, for a graceful shutdown.
    pub fn in_flight(&self) -> &InFlight {
        &self.inner.in_flight
    }

    /// Counts what one Run of `tenant` used, as of the platform's clock
    /// now ([`super::usage`]).
    pub fn count_usage(&self, tenant: &str, run: &super::usage::RunUsage<'_>) {
        self.inner.usage.record(self.inner.engine.metrics(), tenant, self.clock().now_ms(), run);
    }

    /// Writes the usage figures waiting in memory to the store.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails (the figures wait for the next
    /// flush).
    pub async fn flush_usage(&self) -> Result<usize, StoreError> {
        self.inner.usage.flush(&self.inner.store).await
    }

    /// The secret box.
    pub fn secrets(&self) -> &SecretBox {
        &self.inner.secrets
    }

    /// A tenant secret's value.
    ///
    /// # Errors
    /// [`SecretValueError`] when it does not exist, the store fails, or it
    /// does not open.
    pub async fn secret_value(&self, tenant: &str, name: &str) -> Result<String, SecretValueError> {
        let Some((nonce, ciphertext)) = self.store().secret_get(tenant, name).await? else {
            return Err(SecretValueError::Missing(name.to_owned()));
        };
        Ok(self.secrets().open(tenant, name, &nonce, &ciphertext)?)
    }

    /// The deployment runtime's state (its wake-ups, MQTT connections).
    pub fn deployments(&self) -> &Deployments {
        &self.inner.deployments
    }

    /// Every tenant.
    pub fn tenants(&self) -> Vec<Arc<Tenant>> {
        self.inner.tenants.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// Forgets a tenant (its stored data is deleted by the caller).
    pub fn remove_tenant(&self, id: &str) -> bool {
        self.set_tenant_issuers(id, Vec::new());
        self.inner.tenants.write().unwrap_or_else(|p| p.into_inner()).remove(id).is_some()
    }

    /// Sets the issuers `tenant` trusts (as stored with it), and re-indexes
    /// every tenant's by `iss`.
    pub fn set_tenant_issuers(&self, tenant: &str, issuers: Vec<IssuerConfig>) {
        let mut held = self.inner.issuers.write().unwrap_or_else(|p| p.into_inner());
        if issuers.is_empty() {
            if held.by_tenant.remove(tenant).is_none() {
                return;
            }
        } else {
            held.by_tenant.insert(tenant.to_owned(), issuers);
        }
        let index = StoredIssuers::build(held.by_tenant.iter().map(|(tenant, list)| (tenant.as_str(), list.clone())));
        held.index = Arc::new(index);
    }

    /// The issuers `tenant` trusts, as stored with it.
    pub fn tenant_issuers(&self, tenant: &str) -> Vec<IssuerConfig> {
        self.inner.issuers.read().unwrap_or_else(|p| p.into_inner()).by_tenant.get(tenant).cloned().unwrap_or_default()
    }

    /// Every tenant's issuers, by `iss`.
    pub fn stored_issuers(&self) -> Arc<StoredIssuers> {
        self.inner.issuers.read().unwrap_or_else(|p| p.into_inner()).index.clone()
    }

    /// The wasm engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The validation cache.
    pub fn validations(&self) -> &ValidationCache {
        &self.inner.validations
    }

    /// Tells every session and subscription of `tenant` that its tool list
    /// changed.
    pub async fn tools_changed(&self, tenant: &str) {
        self.inner.listeners.tools_changed(tenant).await;
    }

    /// The HTTP client for invocations.
    pub fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    /// The runtime blocking work drives async IO on.
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.runtime
    }

    /// The retention every Language declares.
    pub fn retention(&self) -> &Retention {
        &self.inner.retention
    }

    /// The principal requests act as when no credential is presented.
    pub fn dev_principal(&self) -> &Principal {
        &self.inner.dev_principal
    }

    /// Adds (or returns the existing) tenant.
    pub fn add_tenant(&self, id: &str) -> Arc<Tenant> {
        self.inner
            .tenants
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(Tenant::new(id, Confinement::new(&self.inner.egress))))
            .clone()
    }

    /// One tenant.
    pub fn tenant(&self, id: &str) -> Option<Arc<Tenant>> {
        self.inner.tenants.read().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    /// Installs a Language for a tenant and tells its sessions the tool
    /// list changed.
    pub async fn install_language(&self, tenant: &str, component: Component) -> Arc<Tenant> {
        let tenant = self.add_tenant(tenant);
        tenant.install_language(LanguageSlot::new(component, self.retention().clone()));
        self.tools_changed(&tenant.id).await;
        tenant
    }
}
