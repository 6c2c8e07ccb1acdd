//! The platform's Prometheus metrics: one registry per engine (so one per
//! running server), its families, and handles resolved once per label
//! value so that a served request costs a map lookup under a read lock and
//! a few atomic adds, never an allocation.
//!
//! Every name starts with `pilotage_`, units are in the names, durations
//! are histograms in seconds. The exposition is the Prometheus text format
//! 0.0.4 (the `prometheus` crate), which every Prometheus scrapes and
//! `promtool check metrics` lints.
//! Labels are closed sets or bounded per deployment: MCP method names (a
//! fixed list, anything else is `other`), tool names and Language names
//! (what the deployment's tenants install), entry kinds (the Languages'
//! declared kinds), run statuses (each Language's closed set). Each of the
//! open-ended ones holds at most `MAX_LABEL_VALUES` distinct values per
//! process; later ones are counted under `OVERFLOW_LABEL`. No metric is
//! labelled by subject, session or run, and only two groups by tenant,
//! each over at most `MAX_LABEL_VALUES` tenants per process (the rest
//! under `OVERFLOW_LABEL`): the capacity gauges (`tenant_capacity_*`: who
//! holds the node's pools now) and the usage counters (`tenant_runs_total`
//! by kind, `tenant_invocations_total`, `tenant_fuel_total`,
//! `tenant_run_seconds_total`, `tenant_stored_run_bytes_total`: what each
//! tenant's Runs used on this replica since it started; the stored daily
//! figures are `GET /admin/v1/tenants/{t}/usage`).
//!
//! Capacity (`pilotage_engine::admission`): each pool's calls in use,
//! waiting and admitted together, waits and refusals by reason.
//!
//! Deployments (Part II §6.5.7, `deploy`): firings by trigger kind
//! (schedule, webhook, mqtt) and result, the delay from a trigger instance
//! (a tick's due time, an event's receipt) to its Run, webhook deliveries
//! by result, stored deployments and this replica's MQTT subscriptions.
//!
//! Tenant policy on risk (`pilotage_server::policy`): decisions and
//! approval events by `decision` (allow, approve, deny: a rule's decision
//! on an execute; approval_requested, approved, rejected, approval_used;
//! budget_exceeded).
//!
//! The closed label sets are in `labels`, the handles resolved per label
//! value in `handles`, and the families with their help texts in
//! `registry`; this module records.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

mod handles;
mod labels;
mod registry;

pub use labels::{
    BoundKind, CallLabel, CapacityPool, GuaranteeKind, McpOutcome, StoreOperation, USAGE_KINDS, ValidationResult,
};
pub use registry::MetricsError;

use handles::{EntryKindHandles, LanguageHandles, MAX_LABEL_VALUES, OVERFLOW_LABEL, TenantUsageHandles};
use labels::MCP_METHODS;
use registry::Inner;

/// The label value of a tool name the caller's tenant does not serve (a
/// `tools/call` refused as unknown): never the name itself, which the
/// client chose.
pub const UNKNOWN_TOOL_LABEL: &str = "_unknown";

/// One pool's use at one moment, as the capacity gauges show it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoolFigures {
    /// Calls holding a place.
    pub in_use: u64,
    /// Calls waiting for one.
    pub waiting: u64,
    /// Calls admission lets in together.
    pub limit: u64,
}

/// What one Run of a tenant used, for [`Metrics::tenant_usage`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RunUse {
    /// Its kind, an index into [`USAGE_KINDS`].
    pub kind: usize,
    /// Invocations it made.
    pub invocations: u64,
    /// Fuel it used.
    pub fuel: u64,
    /// Its wall time.
    pub wall_time: Duration,
    /// Bytes of its stored record (0 when not stored).
    pub stored_bytes: u64,
}

/// The platform's metrics. Cheap to clone (one shared registry); safe to
/// use from any thread. See the module docs for names and labels, and
/// `docs/architecture.md` ("Telemetry").
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry with every family registered and the closed label sets'
    /// handles resolved.
    ///
    /// # Errors
    /// [`MetricsError`] when a metric is refused (a defect of this module).
    pub fn new() -> Result<Metrics, MetricsError> {
        Ok(Metrics { inner: Arc::new(Inner::register()?) })
    }

    /// Turns recording on or off (on when made). The server turns it off
    /// when the metrics are not served.
    pub fn set_enabled(&self, enabled: bool) {
        self.inner.enabled.store(enabled, Ordering::Relaxed);
    }

    /// Whether events are recorded (the console says so when they are
    /// not, rather than draw zeros).
    pub fn is_enabled(&self) -> bool {
        self.inner.enabled.load(Ordering::Relaxed)
    }

    /// The method label of an MCP method name: itself when it is one of
    /// `MCP_METHODS`, else `other`.
    pub fn method_label(method: &str) -> &'static str {
        MCP_METHODS.iter().find(|&&known| known == method).copied().unwrap_or("other")
    }

    /// Counts one answered MCP request. `tool` is the tool's name for a
    /// `tools/call` whose tool the tenant serves, [`UNKNOWN_TOOL_LABEL`]
    /// for one it does not, `None` for other methods.
    pub fn mcp_request(&self, method: &'static str, tool: Option<&str>, outcome: McpOutcome, elapsed: Duration) {
        if !self.is_enabled() {
            return;
        }
        match tool {
            Some(tool) => {
                let families = &self.inner.families;
                self.inner.tools.get(tool, |label| families.request_handles(method, label)).observe(outcome, elapsed);
            }
            None => {
                if let Some(handles) = self.inner.methods.get(method) {
                    handles.observe(outcome, elapsed);
                }
            }
        }
    }

    fn language(&self, language: &str) -> Arc<LanguageHandles> {
        let families = &self.inner.families;
        self.inner.languages.get(language, |label| LanguageHandles {
            label: label.to_owned(),
            validations: ValidationResult::ALL
                .map(|result| families.validations.with_label_values(&[label, result.as_str()])),
        })
    }

    /// Counts one validation of `language` that ended with `result`.
    pub fn validation(&self, language: &str, result: ValidationResult) {
        if !self.is_enabled() {
            return;
        }
        self.language(language).validations[result as usize].inc();
    }

    /// Counts one lookup of the validation cache.
    pub fn validation_cache(&self, hit: bool) {
        if !self.is_enabled() {
            return;
        }
        if hit { &self.inner.components.cache_hits } else { &self.inner.components.cache_misses }.inc();
    }

    /// Counts one Run of `language` that ended with outcome `status`
    /// (refused Runs included; replays of an idempotency key are not new
    /// Runs).
    pub fn run(&self, language: &str, status: &str) {
        if !self.is_enabled() {
            return;
        }
        let language = self.language(language);
        self.inner.families.runs.with_label_values(&[language.label.as_str(), status]).inc();
    }

    /// Counts the verdicts of one Run's assertions (`x-assertions`).
    pub fn assertions(&self, language: &str, passed: usize, failed: usize) {
        if !self.is_enabled() {
            return;
        }
        let language = self.language(language);
        let family = &self.inner.families.assertions;
        family.with_label_values(&[language.label.as_str(), "passed"]).inc_by(passed as u64);
        family.with_label_values(&[language.label.as_str(), "failed"]).inc_by(failed as u64);
    }

    /// Counts what one Run of `tenant` used (the usage counters).
    pub fn tenant_usage(&self, tenant: &str, run: &RunUse) {
        if !self.is_enabled() {
            return;
        }
        let usage = &self.inner.usage;
        let handles = self.inner.tenant_usage.get(tenant, |label| TenantUsageHandles {
            runs: USAGE_KINDS.map(|kind| usage.runs.with_label_values(&[label, kind])),
            invocations: usage.invocations.with_label_values(&[label]),
            fuel: usage.fuel.with_label_values(&[label]),
            seconds: usage.seconds.with_label_values(&[label]),
            stored_bytes: usage.stored_bytes.with_label_values(&[label]),
        });
        if let Some(runs) = handles.runs.get(run.kind) {
            runs.inc();
        }
        handles.invocations.inc_by(run.invocations);
        handles.fuel.inc_by(run.fuel);
        handles.seconds.inc_by(run.wall_time.as_secs_f64());
        handles.stored_bytes.inc_by(run.stored_bytes);
    }

    /// Records one component call under `call`'s bounds: its fuel and its
    /// time.
    pub fn component_call(&self, call: CallLabel, fuel: u64, elapsed: Duration) {
        if !self.is_enabled() {
            return;
        }
        self.inner.components.fuel[call as usize].inc_by(fuel);
        self.inner.components.call_duration[call as usize].observe(elapsed.as_secs_f64());
    }

    /// Counts one trip of `bound` in a call of kind `call`.
    pub fn bound_trip(&self, call: CallLabel, bound: BoundKind) {
        if !self.is_enabled() {
            return;
        }
        self.inner.components.bound_trips[call as usize][bound as usize].inc();
    }

    /// Counts one breach of a host guarantee.
    pub fn guarantee_violation(&self, kind: GuaranteeKind) {
        if !self.is_enabled() {
            return;
        }
        self.inner.components.violations[kind as usize].inc();
    }

    /// Records one invocation of a catalog entry of kind `entry_kind`.
    pub fn invocation(&self, entry_kind: &str, ok: bool, elapsed: Duration) {
        if !self.is_enabled() {
            return;
        }
        let families = &self.inner.families;
        let handles = self.inner.entry_kinds.get(entry_kind, |label| EntryKindHandles {
            ok: families.invocation_duration.with_label_values(&[label, "ok"]),
            failed: families.invocation_duration.with_label_values(&[label, "failed"]),
        });
        let histogram = if ok { &handles.ok } else { &handles.failed };
        histogram.observe(elapsed.as_secs_f64());
    }

    /// Records one store operation's time.
    pub fn store_operation(&self, operation: StoreOperation, elapsed: Duration) {
        if !self.is_enabled() {
            return;
        }
        self.inner.store_duration[operation as usize].observe(elapsed.as_secs_f64());
    }

    /// Sets the gauges read at scrape time: open sessions, open
    /// subscriptions, tenants.
    pub fn set_gauges(&self, sessions_open: usize, subscriptions_open: usize, tenants: usize) {
        self.inner.server.sessions_open.set(sessions_open as i64);
        self.inner.server.subscriptions_open.set(subscriptions_open as i64);
        self.inner.server.tenants.set(tenants as i64);
    }

    /// Counts one policy decision or approval event (`decision` is one of
    /// the closed set the module docs list).
    pub fn policy_decision(&self, decision: &'static str) {
        if !self.is_enabled() {
            return;
        }
        self.inner.policy_decisions.with_label_values(&[decision]).inc();
    }

    /// Counts one firing of a deployment: `trigger` is `schedule`,
    /// `webhook` or `mqtt`; `result` one of `ok`, `failed`, `dropped`,
    /// `not_run` (see the family's help). `delay`, when the Run started,
    /// is the time since the trigger instance.
    pub fn firing(&self, trigger: &'static str, result: &'static str, delay: Option<Duration>) {
        if !self.is_enabled() {
            return;
        }
        self.inner.deployments.firings.with_label_values(&[trigger, result]).inc();
        if let Some(delay) = delay {
            self.inner.deployments.firing_delay.with_label_values(&[trigger]).observe(delay.as_secs_f64());
        }
    }

    /// Counts one webhook delivery by `result` (`accepted`,
    /// `unauthorized`, `stale`, `replayed`, `unknown_source`, `malformed`,
    /// `unavailable`).
    pub fn webhook_delivery(&self, result: &'static str) {
        if !self.is_enabled() {
            return;
        }
        self.inner.deployments.webhook_deliveries.with_label_values(&[result]).inc();
    }

    /// Sets the deployment gauges read at scrape time.
    pub fn set_deployment_gauges(&self, deployments: i64, mqtt_subscriptions: usize) {
        self.inner.deployments.deployments.set(deployments);
        self.inner.deployments.mqtt_subscriptions.set(mqtt_subscriptions as i64);
    }

    /// Counts one call refused for want of capacity in `pool` (`reason`:
    /// queue_full, tenant_queue_full, waited, no_room).
    pub fn capacity_refusal(&self, pool: CapacityPool, reason: &'static str) {
        if !self.is_enabled() {
            return;
        }
        self.inner.capacity.refusals.with_label_values(&[pool.as_str(), reason]).inc();
    }

    /// Records how long a call waited in `pool`'s queue before its place.
    pub fn capacity_wait(&self, pool: CapacityPool, waited: Duration) {
        if !self.is_enabled() {
            return;
        }
        self.inner.capacity.wait[pool as usize].observe(waited.as_secs_f64());
    }

    /// Sets the capacity gauges read at scrape time: each pool's figures,
    /// and `(tenant, pool, in_use, waiting)` of the tenants holding or
    /// waiting now (the first [`MAX_LABEL_VALUES`] by name; the others
    /// are summed under [`OVERFLOW_LABEL`]).
    pub fn set_capacity(&self, pools: [PoolFigures; 2], tenants: &[(&str, CapacityPool, u64, u64)]) {
        for (index, figures) in pools.iter().enumerate() {
            self.inner.capacity.in_use[index].set(figures.in_use as i64);
            self.inner.capacity.waiting[index].set(figures.waiting as i64);
            self.inner.capacity.limit[index].set(figures.limit as i64);
        }
        let (in_use, waiting) = (&self.inner.capacity.tenant_in_use, &self.inner.capacity.tenant_waiting);
        in_use.reset();
        waiting.reset();
        let mut named = std::collections::BTreeSet::new();
        for (tenant, pool, held, queued) in tenants {
            let label = if named.contains(tenant) || named.len() < MAX_LABEL_VALUES {
                named.insert(*tenant);
                *tenant
            } else {
                OVERFLOW_LABEL
            };
            in_use.with_label_values(&[label, pool.as_str()]).add(*held as i64);
            waiting.with_label_values(&[label, pool.as_str()]).add(*queued as i64);
        }
    }

    /// The counters of family `name` (without the `pilotage_` prefix, e.g.
    /// `runs_total`) summed by the value of their label `label`, in label
    /// order; empty when the family or the label is unknown. The console's
    /// live figures read these.
    pub fn totals_by(&self, name: &str, label: &str) -> Vec<(String, u64)> {
        let full = format!("pilotage_{name}");
        let mut totals = std::collections::BTreeMap::<String, u64>::new();
        for family in self.inner.registry.gather().iter().filter(|f| f.name() == full) {
            for metric in family.get_metric() {
                let Some(value) = metric.get_label().iter().find(|l| l.name() == label).map(|l| l.value()) else {
                    continue;
                };
                *totals.entry(value.to_owned()).or_default() += metric.get_counter().get_value() as u64;
            }
        }
        totals.into_iter().collect()
    }

    /// The exposition in the Prometheus text format 0.0.4 (media type
    /// [`TEXT_CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        // Encoding gathered families into a String cannot fail.
        prometheus::TextEncoder::new().encode_to_string(&self.inner.registry.gather()).unwrap_or_default()
    }
}

/// The media type of [`Metrics::encode`]'s text.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_prefix_units_and_counter_suffix() {
        let metrics = Metrics::new().unwrap();
        metrics.mcp_request("tools/call", Some("validate_workflow"), McpOutcome::ToolError, Duration::from_millis(2));
        metrics.validation("workflow/v1", ValidationResult::Valid);
        metrics.run("workflow/v1", "ok");
        metrics.invocation("capability", true, Duration::from_millis(1));
        let text = metrics.encode();
        assert!(text.contains(
            "pilotage_mcp_requests_total{method=\"tools/call\",outcome=\"tool_error\",tool=\"validate_workflow\"} 1"
        ));
        assert!(text.contains("# TYPE pilotage_mcp_request_duration_seconds histogram"));
        assert!(text.contains("# TYPE pilotage_mcp_requests_total counter"));
        assert!(text.contains("pilotage_validations_total{language=\"workflow/v1\",result=\"valid\"} 1"));
        assert!(text.contains("pilotage_runs_total{language=\"workflow/v1\",status=\"ok\"} 1"));
        assert!(text.contains("pilotage_bound_trips_total{bound=\"stack\",call=\"execution\"} 0"));
        assert!(
            text.contains("pilotage_invocation_duration_seconds_count{entry_kind=\"capability\",outcome=\"ok\"} 1")
        );
    }

    #[test]
    fn open_ended_labels_are_bounded() {
        let metrics = Metrics::new().unwrap();
        for n in 0..MAX_LABEL_VALUES + 10 {
            metrics.validation(&format!("lang{n}/v1"), ValidationResult::Invalid);
        }
        let text = metrics.encode();
        assert!(text.contains(&format!("language=\"{OVERFLOW_LABEL}\",result=\"invalid\"}} 10")), "{text}");
        assert!(!text.contains(&format!("lang{}/v1", MAX_LABEL_VALUES + 1)));
    }

    #[test]
    fn a_disabled_registry_records_nothing() {
        let metrics = Metrics::new().unwrap();
        metrics.set_enabled(false);
        metrics.validation("workflow/v1", ValidationResult::Valid);
        assert!(!metrics.encode().contains("workflow/v1"));
        metrics.set_enabled(true);
        metrics.validation("workflow/v1", ValidationResult::Valid);
        assert!(metrics.encode().contains("workflow/v1"));
    }

    #[test]
    fn unknown_methods_are_other() {
        assert_eq!(Metrics::method_label("tools/call"), "tools/call");
        assert_eq!(Metrics::method_label("x/anything"), "other");
    }
}
