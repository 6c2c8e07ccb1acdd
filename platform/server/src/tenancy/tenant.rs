//! One tenant as a running server holds it: its Languages (with the tool
//! names, retention and manifest entry each is exposed under), its
//! catalog, promoted programs, data sources, quotas and the per-replica
//! counters its quotas are checked against.

use super::policy::Policy;
use crate::egress::Confinement;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use pilotage_engine::Component;
use pilotage_engine::catalog::{CatalogSnapshot, SharedCatalog, StoredEntry, TenantCatalog};
use pilotage_engine::description::{Exposure, LanguageDescription};
use pilotage_engine::effects::DataSource;
use pilotage_protocol::PILOTAGE_VERSION;
use pilotage_protocol::capabilities::{EffectiveCapabilities, SubFeature};
use pilotage_protocol::manifest::{LanguageEntry, Manifest};
use pilotage_protocol::retention::Retention;

use super::principal::Principal;
use super::promotion::PromotedProgram;
use crate::datasource::attached::AttachedSource;

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

    /// Whether this Language declares `trace_fetch.narrate` in its manifest
    /// entry (Part II §4.1, §6.6 "Narration"): its trace fetch then
    /// accepts a `question` and answers with `narration`.
    pub(crate) fn narrates(&self) -> bool {
        EffectiveCapabilities::compute(None, self.entry.capabilities.as_ref())
            .is_some_and(|map| map.declares_sub(SubFeature::Narrate))
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
    /// Wall-time bound of a Run started as an MCP task, in milliseconds
    /// (instead of the engine's `bounds.execution.wall_time_ms`, which
    /// bounds a Run answered within its request). Overrun: `timeout`.
    pub task_wall_time_ms: u64,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_concurrent_runs: 16,
            requests_per_second: 200,
            max_stored_run_bytes: 1 << 30,
            max_deployments: 100,
            max_firings_per_minute: 60,
            task_wall_time_ms: 600_000,
        }
    }
}

/// The longest `task_wall_time_ms` a tenant's quotas may hold: one day.
const MAX_TASK_WALL_TIME_MS: u64 = 86_400_000;

impl Quotas {
    /// Checks the quotas' ranges: a task's wall time from 1 ms to one day
    /// (a longer task would hold a place of the execution pool for days).
    /// Zero stays valid elsewhere, where it means "none": no Runs at once
    /// pauses the tenant's Runs while validation goes on.
    ///
    /// # Errors
    /// [`QuotasRefused`] naming the member and its range.
    pub fn check(&self) -> Result<(), QuotasRefused> {
        if !(1..=MAX_TASK_WALL_TIME_MS).contains(&self.task_wall_time_ms) {
            return Err(QuotasRefused { member: "task_wall_time_ms", range: "from 1 to 86400000 (one day)" });
        }
        Ok(())
    }
}

/// Occurs when a tenant's quotas hold a value out of its range
/// ([`Quotas::check`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("quotas.{member} must be {range}")]
pub struct QuotasRefused {
    /// The member out of range.
    pub member: &'static str,
    /// Its range, in words.
    pub range: &'static str,
}

/// Occurs when a per-replica quota of a tenant refuses a request; the
/// message names the quota and says when to retry (Part III §7.2
/// `rate_limited`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuotaExceeded {
    /// Occurs when the tenant's tool calls in the last second reach
    /// `requests_per_second`.
    #[error("quota requests_per_second ({limit}) of tenant '{tenant}' is exceeded; retry shortly")]
    RequestsPerSecond {
        /// The tenant.
        tenant: String,
        /// The quota.
        limit: u32,
    },
    /// Occurs when `max_concurrent_runs` Runs of the tenant are executing.
    #[error("quota max_concurrent_runs ({limit}) of tenant '{tenant}' is reached; retry when a Run ends")]
    ConcurrentRuns {
        /// The tenant.
        tenant: String,
        /// The quota.
        limit: u32,
    },
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
    languages: RwLock<Languages>,
    catalog: SharedCatalog,
    promoted: RwLock<BTreeMap<String, Arc<PromotedProgram>>>,
    disabled: AtomicBool,
    quotas: RwLock<Quotas>,
    running: AtomicU32,
    bucket: Mutex<Bucket>,
    /// Data sources by name.
    data_sources: RwLock<BTreeMap<String, Arc<AttachedSource>>>,
    egress: Confinement,
    /// The policy on risk (`crate::policy`), replaced whole.
    policy: RwLock<Arc<Policy>>,
}

/// A tenant's Languages and what is derived from exactly them.
#[derive(Debug, Default)]
struct Languages {
    slots: BTreeMap<String, Arc<LanguageSlot>>,
    /// The manifest of `slots`, built on first use after each change and
    /// dropped by the change (never built for a tenant nobody asks, so an
    /// idle tenant costs nothing more).
    published: Option<Arc<PublishedManifest>>,
}

/// The manifest a tenant publishes (Part II §5.1), kept ready between
/// changes of its Languages: the manifest, its JSON value and that value's
/// text, which are the `pilotage_manifest` tool's `structuredContent` and
/// text block (Part III §3.1, §6) and the `pilotage://manifest` resource.
#[derive(Debug)]
pub struct PublishedManifest {
    /// The manifest.
    pub manifest: Manifest,
    /// Its JSON value.
    pub value: serde_json::Value,
    /// `value`'s JSON text.
    pub text: String,
}

impl PublishedManifest {
    fn of(slots: &BTreeMap<String, Arc<LanguageSlot>>) -> PublishedManifest {
        let manifest = Manifest {
            pilotage: PILOTAGE_VERSION.to_owned(),
            languages: slots.values().map(|slot| slot.entry.clone()).collect(),
            capabilities: None,
        };
        let value = serde_json::to_value(&manifest).unwrap_or(serde_json::Value::Null);
        let text = value.to_string();
        PublishedManifest { manifest, value, text }
    }
}

/// Holds one of a tenant's concurrent-run slots until dropped.
#[derive(Debug)]
pub struct RunSlot {
    tenant: Arc<Tenant>,
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        self.tenant.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Tenant {
    /// An empty tenant, confined by `egress` (its policy set later, from
    /// the tenant's record).
    pub fn new(id: &str, egress: Confinement) -> Tenant {
        Tenant {
            id: id.to_owned(),
            languages: RwLock::new(Languages::default()),
            catalog: SharedCatalog::default(),
            promoted: RwLock::new(BTreeMap::new()),
            disabled: AtomicBool::new(false),
            quotas: RwLock::new(Quotas::default()),
            running: AtomicU32::new(0),
            bucket: Mutex::new(Bucket {
                tokens: f64::from(Quotas::default().requests_per_second),
                last: std::time::Instant::now(),
            }),
            data_sources: RwLock::new(BTreeMap::new()),
            egress,
            policy: RwLock::new(Arc::new(Policy::default())),
        }
    }

    /// The tenant's policy on risk (`crate::policy`; the default allows
    /// everything).
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the tenant's policy on risk.
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
    }

    /// Where the tenant may make the platform connect, and the HTTP
    /// client its invocations use (`crate::egress`).
    pub fn egress(&self) -> &Confinement {
        &self.egress
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
        crate::datasource::attached::detach(&self.catalog, &removed);
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
    pub fn data_source_for(&self, language: &str) -> Option<Arc<dyn DataSource>> {
        self.data_sources
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .find(|attached| attached.spec.language == language)
            .map(|attached| attached.source.clone() as Arc<dyn DataSource>)
    }

    /// Whether catalog entry `id` belongs to a data source (and so is not
    /// the operator's to replace or delete).
    pub fn entry_from_data_source(&self, id: &str) -> bool {
        self.data_sources.read().unwrap_or_else(|p| p.into_inner()).values().any(|source| source.owns(id))
    }

    /// Whether the tenant is disabled (its agents are refused).
    pub fn is_disabled(&self) -> bool {
        self.disabled.load(Ordering::SeqCst)
    }

    /// Disables or enables the tenant.
    pub fn set_disabled(&self, disabled: bool) {
        self.disabled.store(disabled, Ordering::SeqCst);
    }

    /// How many of the tenant's Runs are running now (the
    /// `max_concurrent_runs` quota's use).
    pub fn running(&self) -> u32 {
        self.running.load(Ordering::SeqCst)
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
    /// [`QuotaExceeded::RequestsPerSecond`] when the budget is spent.
    pub fn admit_request(&self) -> Result<(), QuotaExceeded> {
        let limit = f64::from(self.quotas().requests_per_second.max(1));
        let mut bucket = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        bucket.tokens = (bucket.tokens + now.duration_since(bucket.last).as_secs_f64() * limit).min(limit);
        bucket.last = now;
        if bucket.tokens < 1.0 {
            return Err(QuotaExceeded::RequestsPerSecond { tenant: self.id.clone(), limit: limit as u32 });
        }
        bucket.tokens -= 1.0;
        Ok(())
    }

    /// Takes a concurrent-run slot.
    ///
    /// # Errors
    /// [`QuotaExceeded::ConcurrentRuns`] when every slot is taken.
    pub fn start_run(self: &Arc<Self>) -> Result<RunSlot, QuotaExceeded> {
        let limit = self.quotas().max_concurrent_runs;
        let taken = self.running.fetch_add(1, Ordering::SeqCst);
        if taken >= limit {
            self.running.fetch_sub(1, Ordering::SeqCst);
            return Err(QuotaExceeded::ConcurrentRuns { tenant: self.id.clone(), limit });
        }
        Ok(RunSlot { tenant: self.clone() })
    }

    /// Installs (or replaces) a Language.
    pub fn install_language(&self, slot: LanguageSlot) {
        let name = slot.entry.name.clone();
        let mut languages = self.languages.write().unwrap_or_else(|p| p.into_inner());
        languages.slots.insert(name, Arc::new(slot));
        languages.published = None;
    }

    /// Removes a Language.
    pub fn retire_language(&self, name: &str) -> bool {
        let mut languages = self.languages.write().unwrap_or_else(|p| p.into_inner());
        languages.published = None;
        languages.slots.remove(name).is_some()
    }

    /// Every Language, by name.
    pub fn languages(&self) -> Vec<Arc<LanguageSlot>> {
        self.languages.read().unwrap_or_else(|p| p.into_inner()).slots.values().cloned().collect()
    }

    /// One Language.
    pub fn language(&self, name: &str) -> Option<Arc<LanguageSlot>> {
        self.languages.read().unwrap_or_else(|p| p.into_inner()).slots.get(name).cloned()
    }

    /// Runs `f` on the catalog under its lock. Keep `f` short.
    pub fn with_catalog<R>(&self, f: impl FnOnce(&mut TenantCatalog) -> R) -> R {
        self.catalog.with(f)
    }

    /// The catalog itself, for what keeps entries in it (a data source's
    /// refresh).
    pub fn catalog(&self) -> &SharedCatalog {
        &self.catalog
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

    /// The manifest this tenant publishes (Part II §5.1), from memory
    /// while its Languages stay as they are.
    pub fn manifest(&self) -> Arc<PublishedManifest> {
        if let Some(published) = &self.languages.read().unwrap_or_else(|p| p.into_inner()).published {
            return published.clone();
        }
        // Built under the write lock, so a change cannot slip between the
        // slots read and the manifest kept.
        let mut languages = self.languages.write().unwrap_or_else(|p| p.into_inner());
        let published = Arc::new(PublishedManifest::of(&languages.slots));
        languages.published.get_or_insert(published).clone()
    }
}
