//! The running platform: tenants, their Languages and catalogs, the store,
//! the engine, and the caches shared by every request.
//!
//! Invariant: every lookup goes through a [`Principal`]'s tenant; nothing
//! keyed by a Language name, entry id, idempotency key or program name is
//! ever shared between tenants.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock};

use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

use crate::catalog::{CatalogSnapshot, StoredEntry, TenantCatalog};
use crate::datasource::attached::AttachedSource;
use crate::engine::{Component, Engine};
use crate::language::description::{Exposure, LanguageDescription};
use crate::language::validation::Validated;
use crate::protocol::PILOTAGE_VERSION;
use crate::protocol::manifest::{LanguageEntry, Manifest};
use crate::protocol::retention::Retention;
use crate::run::promotion::PromotedProgram;
use crate::store::Store;

/// Who is calling: a tenant, a subject in it, and the scopes its
/// credential holds (Part III §8.4 authorization identity).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The tenant.
    pub tenant: String,
    /// The subject (user or client) within the tenant.
    pub subject: String,
    /// Scopes held.
    pub scopes: BTreeSet<String>,
}

/// One Language as a tenant exposes it.
#[derive(Clone, Debug)]
pub struct LanguageSlot {
    /// The loaded component.
    pub component: Component,
    /// Tool names, retention and idempotency.
    pub exposure: Exposure,
    /// Its manifest entry.
    pub entry: LanguageEntry,
}

impl LanguageSlot {
    /// A slot for `component` under `retention`, with the default tool
    /// names.
    pub fn new(component: Component, retention: Retention) -> LanguageSlot {
        let description = component.description();
        let exposure =
            Exposure { loop_tools: description.default_loop_tools(&retention), retention, idempotency: true };
        let entry = description.language_entry(&exposure);
        LanguageSlot { component, exposure, entry }
    }

    /// What the component declared.
    pub fn description(&self) -> &LanguageDescription {
        self.component.description()
    }

    /// The name of this Language's promote tool, when it supports
    /// promotion.
    pub fn promote_tool(&self) -> Option<String> {
        let description = self.description();
        (description.features.promotion && description.features.execute)
            .then(|| self.exposure.loop_tools.validate.replacen("validate_", "promote_", 1))
    }

    /// The catalog kind of this Language's promoted programs.
    pub fn promoted_kind(&self) -> String {
        format!("{}_program", self.description().family())
    }
}

/// Per-tenant limits. Exceeding one refuses the request before anything
/// runs, with a request error naming the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Quotas {
    /// Runs executing at once, per replica (each replica guards its own
    /// CPU and memory; see docs/architecture.md "Fleet").
    pub max_concurrent_runs: u32,
    /// Tool calls per second, averaged over one second, per replica.
    pub requests_per_second: u32,
    /// Bytes of stored run records (counted in the store: fleet-wide).
    pub max_stored_run_bytes: u64,
    /// Deployments installed at once (counted in the store: fleet-wide).
    pub max_deployments: u32,
    /// Firings of one deployment per minute (counted in the store:
    /// fleet-wide); a trigger beyond it is dropped and logged.
    pub max_firings_per_minute: u32,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_concurrent_runs: 16,
            requests_per_second: 200,
            max_stored_run_bytes: 1 << 30,
            max_deployments: 100,
            max_firings_per_minute: 60,
        }
    }
}

/// A simple token bucket for the requests-per-second quota.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: std::time::Instant,
}

/// One tenant: its Languages, catalog and promoted programs.
#[derive(Debug)]
pub struct Tenant {
    /// The tenant's id.
    pub id: String,
    languages: RwLock<BTreeMap<String, Arc<LanguageSlot>>>,
    catalog: Mutex<TenantCatalog>,
    promoted: RwLock<BTreeMap<String, Arc<PromotedProgram>>>,
    disabled: std::sync::atomic::AtomicBool,
    quotas: RwLock<Quotas>,
    running: std::sync::atomic::AtomicU32,
    bucket: Mutex<Bucket>,
    /// Data sources by name.
    data_sources: RwLock<BTreeMap<String, Arc<AttachedSource>>>,
}

/// Holds one of a tenant's concurrent-run slots until dropped.
#[derive(Debug)]
pub struct RunSlot {
    tenant: Arc<Tenant>,
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        self.tenant.running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Tenant {
    /// An empty tenant.
    pub fn new(id: &str) -> Tenant {
        Tenant {
            id: id.to_owned(),
            languages: RwLock::new(BTreeMap::new()),
            catalog: Mutex::new(TenantCatalog::new()),
            promoted: RwLock::new(BTreeMap::new()),
            disabled: std::sync::atomic::AtomicBool::new(false),
            quotas: RwLock::new(Quotas::default()),
            running: std::sync::atomic::AtomicU32::new(0),
            bucket: Mutex::new(Bucket {
                tokens: f64::from(Quotas::default().requests_per_second),
                last: std::time::Instant::now(),
            }),
            data_sources: RwLock::new(BTreeMap::new()),
        }
    }

    /// Attaches a data source, replacing one of the same name; returns the
    /// one replaced, whose catalog entries the caller removes or refreshes
    /// over.
    pub fn attach_data_source(&self, source: Arc<AttachedSource>) -> Option<Arc<AttachedSource>> {
        self.data_sources.write().unwrap_or_else(|p| p.into_inner()).insert(source.name.clone(), source)
    }

    /// Detaches a data source and removes its catalog entries.
    pub fn detach_data_source(&self, name: &str) -> Option<Arc<AttachedSource>> {
        let removed = self.data_sources.write().unwrap_or_else(|p| p.into_inner()).remove(name)?;
        crate::datasource::attached::detach(self, &removed);
        Some(removed)
    }

    /// Every data source, by name.
    pub fn data_sources(&self) -> Vec<Arc<AttachedSource>> {
        self.data_sources.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// One data source by name.
    pub fn data_source(&self, name: &str) -> Option<Arc<AttachedSource>> {
        self.data_sources.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Where `language`'s statements run, if it has a data source.
    pub fn data_source_for(&self, language: &str) -> Option<Arc<dyn crate::language::execution::DataSource>> {
        self.data_sources
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .find(|attached| attached.spec.language == language)
            .map(|attached| attached.source.clone() as Arc<dyn crate::language::execution::DataSource>)
    }

    /// Whether catalog entry `id` belongs to a data source (and so is not
    /// the operator's to replace or delete).
    pub fn entry_from_data_source(&self, id: &str) -> bool {
        self.data_sources.read().unwrap_or_else(|p| p.into_inner()).values().any(|source| source.owns(id))
    }

    /// Whether the tenant is disabled (its agents are refused).
    pub fn is_disabled(&self) -> bool {
        self.disabled.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Disables or enables the tenant.
    pub fn set_disabled(&self, disabled: bool) {
        self.disabled.store(disabled, std::sync::atomic::Ordering::SeqCst);
    }

    /// The tenant's quotas.
    pub fn quotas(&self) -> Quotas {
        *self.quotas.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the tenant's quotas.
    pub fn set_quotas(&self, quotas: Quotas) {
        *self.quotas.write().unwrap_or_else(|p| p.into_inner()) = quotas;
    }

    /// Takes one request from the per-second budget.
    ///
    /// # Errors
    /// A message naming the quota when the budget is spent.
    pub fn admit_request(&self) -> Result<(), String> {
        let limit = f64::from(self.quotas().requests_per_second.max(1));
        let mut bucket = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        bucket.tokens = (bucket.tokens + now.duration_since(bucket.last).as_secs_f64() * limit).min(limit);
        bucket.last = now;
        if bucket.tokens < 1.0 {
            return Err(format!(
                "quota requests_per_second ({}) of tenant '{}' is exceeded; retry shortly",
                limit as u32, self.id
            ));
        }
        bucket.tokens -= 1.0;
        Ok(())
    }

    /// Takes a concurrent-run slot.
    ///
    /// # Errors
    /// A message naming the quota when every slot is taken.
    pub fn start_run(self: &Arc<Self>) -> Result<RunSlot, String> {
        let limit = self.quotas().max_concurrent_runs;
        let taken = self.running.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if taken >= limit {
            self.running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            return Err(format!(
                "quota max_concurrent_runs ({limit}) of tenant '{}' is reached; retry when a Run ends",
                self.id
            ));
        }
        Ok(RunSlot { tenant: self.clone() })
    }

    /// Installs (or replaces) a Language.
    pub fn install_language(&self, slot: LanguageSlot) {
        let name = slot.entry.name.clone();
        self.languages.write().unwrap_or_else(|p| p.into_inner()).insert(name, Arc::new(slot));
    }

    /// Removes a Language.
    pub fn retire_language(&self, name: &str) -> bool {
        self.languages.write().unwrap_or_else(|p| p.into_inner()).remove(name).is_some()
    }

    /// Every Language, by name.
    pub fn languages(&self) -> Vec<Arc<LanguageSlot>> {
        self.languages.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// One Language.
    pub fn language(&self, name: &str) -> Option<Arc<LanguageSlot>> {
        self.languages.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Runs `f` on the catalog under its lock. Keep `f` short.
    pub fn with_catalog<R>(&self, f: impl FnOnce(&mut TenantCatalog) -> R) -> R {
        f(&mut self.catalog.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The caller's snapshot of the catalog for a Language.
    pub fn snapshot(&self, principal: &Principal, language: &str) -> CatalogSnapshot {
        self.with_catalog(|catalog| catalog.snapshot(&principal.scopes, language))
    }

    /// Adds catalog entries.
    pub fn put_entries(&self, entries: Vec<StoredEntry>) {
        self.with_catalog(|catalog| catalog.apply(entries, &[]));
    }

    /// Registers a promoted program (its catalog entry is added separately).
    pub fn add_promoted(&self, program: PromotedProgram) {
        self.promoted.write().unwrap_or_else(|p| p.into_inner()).insert(program.program_ref.clone(), Arc::new(program));
    }

    /// One promoted program by reference (visibility is checked through the
    /// catalog by the caller).
    pub fn promoted(&self, program_ref: &str) -> Option<Arc<PromotedProgram>> {
        self.promoted.read().unwrap_or_else(|p| p.into_inner()).get(program_ref).cloned()
    }

    /// The manifest this tenant publishes (Part II §5.1).
    pub fn manifest(&self) -> Manifest {
        Manifest {
            pilotage: PILOTAGE_VERSION.to_owned(),
            languages: self.languages().iter().map(|slot| slot.entry.clone()).collect(),
            capabilities: None,
        }
    }
}

/// Cached results by key, and keys in insertion order.
type CacheEntries = (HashMap<String, Arc<Validated>>, VecDeque<String>);

/// Validation results by (tenant, component, program, catalog_version,
/// context), so execute after validate does not validate twice (Part IV
/// §6). Bounded; least recently inserted entries go first.
#[derive(Debug)]
pub struct ValidationCache {
    /// Results by key, and keys in insertion order for eviction.
    entries: Mutex<CacheEntries>,
    capacity: usize,
}

impl ValidationCache {
    /// A cache holding at most `capacity` results.
    pub fn new(capacity: usize) -> ValidationCache {
        ValidationCache { entries: Mutex::new((HashMap::new(), VecDeque::new())), capacity }
    }

    /// The cache key.
    pub fn key(
        tenant: &str,
        component: &str,
        program: &str,
        catalog_version: &str,
        context: Option<&serde_json::Value>,
    ) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        for part in [tenant, component, program, catalog_version] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        let context = context.map(crate::catalog::version::canonical_json).unwrap_or_default();
        hasher.update(context.as_bytes());
        hex::encode(hasher.finalize())
    }

    /// A cached result.
    pub fn get(&self, key: &str) -> Option<Arc<Validated>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).0.get(key).cloned()
    }

    /// Caches a result.
    pub fn put(&self, key: String, value: Arc<Validated>) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(key.clone(), value).is_none() {
            order.push_back(key);
        }
        while order.len() > self.capacity {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }
}

/// Connected MCP sessions and open `subscriptions/listen` requests, for
/// `notifications/tools/list_changed` (Part III §4.7).
#[derive(Debug, Default)]
pub struct Sessions {
    /// Session id → (tenant, peer): clients with a session (up to
    /// 2025-11-25) receive notifications on the session's stream.
    peers: Mutex<BTreeMap<String, (String, Peer<RoleServer>)>>,
    /// Listener number → (tenant, sink): 2026-07-28 clients, which have no
    /// session.
    listeners: Mutex<BTreeMap<u64, (String, SubscriptionSink)>>,
    next_listener: std::sync::atomic::AtomicU64,
}

impl Sessions {
    /// Remembers a session's peer and tenant.
    pub fn add(&self, session_id: String, tenant: String, peer: Peer<RoleServer>) {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).insert(session_id, (tenant, peer));
    }

    /// Forgets a session.
    pub fn remove(&self, session_id: &str) {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).remove(session_id);
    }

    /// Registers an open `subscriptions/listen` of `tenant`; returns the
    /// number to [`Sessions::unlisten`] it with.
    pub fn listen(&self, tenant: String, sink: SubscriptionSink) -> u64 {
        let number = self.next_listener.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.listeners.lock().unwrap_or_else(|p| p.into_inner()).insert(number, (tenant, sink));
        number
    }

    /// How many sessions and how many session-less subscriptions are open
    /// (the `pilotage_mcp_sessions_open` and `_subscriptions_open` gauges).
    pub fn counts(&self) -> (usize, usize) {
        let sessions = self.peers.lock().unwrap_or_else(|p| p.into_inner()).len();
        let listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner()).len();
        (sessions, listeners)
    }

    /// Forgets a subscription that ended.
    pub fn unlisten(&self, number: u64) {
        self.listeners.lock().unwrap_or_else(|p| p.into_inner()).remove(&number);
    }

    /// Tells every session and every subscription of `tenant` that its tool
    /// list changed.
    pub async fn notify_tools_changed(&self, tenant: &str) {
        let sinks: Vec<SubscriptionSink> = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(owner, _)| owner == tenant)
            .map(|(_, sink)| sink.clone())
            .collect();
        for sink in sinks {
            if let Err(error) = sink.notify_tool_list_changed().await {
                tracing::debug!(%error, "a subscription did not take tools/list_changed");
            }
        }
        let peers: Vec<Peer<RoleServer>> = self
            .peers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(owner, _)| owner == tenant)
            .map(|(_, peer)| peer.clone())
            .collect();
        for peer in peers {
            if let Err(error) = peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "a session did not take tools/list_changed");
            }
        }
    }
}

/// Tool calls in progress, so a shutdown can let them finish before it
/// closes the sessions their answers travel on; and whether the platform is
/// draining (`/readyz` then says so, so balancers stop sending work).
#[derive(Debug, Default)]
pub struct InFlight {
    count: std::sync::atomic::AtomicUsize,
    draining: std::sync::atomic::AtomicBool,
    idle: tokio::sync::Notify,
}

/// Counts one tool call until dropped.
#[derive(Debug)]
pub struct InFlightGuard<'a> {
    owner: &'a InFlight,
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if self.owner.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            self.owner.idle.notify_waiters();
        }
    }
}

impl InFlight {
    /// Counts a tool call until the guard is dropped.
    pub fn enter(&self) -> InFlightGuard<'_> {
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlightGuard { owner: self }
    }

    /// Tool calls in progress.
    pub fn count(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Marks the platform as draining.
    pub fn start_draining(&self) {
        self.draining.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a shutdown is under way.
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves when no tool call is in progress.
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
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
    sessions: Sessions,
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
    retention: Retention,
    dev_principal: Principal,
    secrets: crate::secrets::SecretBox,
    in_flight: InFlight,
    leases: Arc<crate::operations::idempotency::Leases>,
    deployments: crate::deploy::runtime::Deployments,
}

impl std::fmt::Debug for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Platform").finish_non_exhaustive()
    }
}

impl Platform {
    /// Assembles a platform from its parts. Call inside a tokio runtime.
    pub fn new(
        engine: Engine,
        store: Store,
        retention: Retention,
        dev_principal: Principal,
        secrets: crate::secrets::SecretBox,
        idempotency: crate::operations::idempotency::IdempotencySettings,
    ) -> Platform {
        crate::install_crypto_provider();
        let http = reqwest::Client::builder()
            .user_agent(concat!("pilotage/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Platform {
            inner: Arc::new(PlatformInner {
                engine,
                store,
                tenants: RwLock::new(BTreeMap::new()),
                validations: ValidationCache::new(4096),
                sessions: Sessions::default(),
                http,
                runtime: tokio::runtime::Handle::current(),
                retention,
                dev_principal,
                secrets,
                in_flight: InFlight::default(),
                leases: crate::operations::idempotency::Leases::new(idempotency),
                deployments: crate::deploy::runtime::Deployments::default(),
            }),
        }
    }

    /// This process's instance id and the idempotency claims it renews
    /// (Part II §6.5.6).
    pub fn leases(&self) -> &Arc<crate::operations::idempotency::Leases> {
        &self.inner.leases
    }

    /// Tool calls being served, for a graceful shutdown.
    pub fn in_flight(&self) -> &InFlight {
        &self.inner.in_flight
    }

    /// The secret box.
    pub fn secrets(&self) -> &crate::secrets::SecretBox {
        &self.inner.secrets
    }

    /// A tenant secret's value.
    ///
    /// # Errors
    /// A message when it does not exist or does not decrypt.
    pub async fn secret_value(&self, tenant: &str, name: &str) -> Result<String, String> {
        let Some((nonce, ciphertext)) = self.store().secret_get(tenant, name).await.map_err(|e| e.to_string())? else {
            return Err(format!("secret '{name}' does not exist"));
        };
        self.secrets().open(tenant, name, &nonce, &ciphertext).map_err(|e| e.to_string())
    }

    /// The deployment runtime's state (its clock, MQTT subscriptions).
    pub fn deployments(&self) -> &crate::deploy::runtime::Deployments {
        &self.inner.deployments
    }

    /// Every tenant.
    pub fn tenants(&self) -> Vec<Arc<Tenant>> {
        self.inner.tenants.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// Forgets a tenant (its stored data is deleted by the caller).
    pub fn remove_tenant(&self, id: &str) -> bool {
        self.inner.tenants.write().unwrap_or_else(|p| p.into_inner()).remove(id).is_some()
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

    /// Connected sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
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
            .or_insert_with(|| Arc::new(Tenant::new(id)))
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
        self.sessions().notify_tools_changed(&tenant.id).await;
        tenant
    }
}
