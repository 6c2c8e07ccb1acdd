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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use prometheus::{
    Counter, CounterVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry,
};

/// Most distinct values one open-ended label (tool, Language, entry kind)
/// takes in one process; the values after it are counted under
/// [`OVERFLOW_LABEL`]. Rationale: a deployment's tools and Languages are
/// few, and a runaway set of names must not grow the exposition without
/// bound.
pub(crate) const MAX_LABEL_VALUES: usize = 256;

/// The label value of everything past [`MAX_LABEL_VALUES`].
pub(crate) const OVERFLOW_LABEL: &str = "_other";

/// The label value of a tool name the caller's tenant does not serve (a
/// `tools/call` refused as unknown): never the name itself, which the
/// client chose.
pub const UNKNOWN_TOOL_LABEL: &str = "_unknown";

/// The MCP methods counted under their own name (`method` label); any
/// other method is `other`.
pub(crate) const MCP_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
    "resources/directory/read",
    "other",
];

/// Upper bounds of every duration histogram, in seconds: 50 µs (a cached
/// validation) to a minute (the longest request timeout in use).
const SECONDS_BUCKETS: [f64; 19] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0, 60.0,
];

/// How an MCP request ended (`outcome` label of the request metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum McpOutcome {
    /// A result; for `tools/call`, one with `isError: false`.
    Ok,
    /// A `tools/call` result with `isError: true`: a Pilotage request
    /// error (Part III §7.2), OpenTelemetry's `tool_error`.
    ToolError,
    /// A JSON-RPC error response (a carrier error, Part III §7.1).
    RpcError,
}

impl McpOutcome {
    const ALL: [McpOutcome; 3] = [McpOutcome::Ok, McpOutcome::ToolError, McpOutcome::RpcError];

    /// The label value: `ok`, `tool_error` or `rpc_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            McpOutcome::Ok => "ok",
            McpOutcome::ToolError => "tool_error",
            McpOutcome::RpcError => "rpc_error",
        }
    }
}

/// How a validation ended (`result` label of `pilotage_validations_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValidationResult {
    /// `valid: true`.
    Valid,
    /// `valid: false` (diagnostics with an error).
    Invalid,
    /// A validation bound was exceeded (`bounds_exceeded`).
    BoundsExceeded,
    /// The validator failed (`internal`).
    Failed,
}

impl ValidationResult {
    const ALL: [ValidationResult; 4] = [
        ValidationResult::Valid,
        ValidationResult::Invalid,
        ValidationResult::BoundsExceeded,
        ValidationResult::Failed,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ValidationResult::Valid => "valid",
            ValidationResult::Invalid => "invalid",
            ValidationResult::BoundsExceeded => "bounds_exceeded",
            ValidationResult::Failed => "failed",
        }
    }
}

/// Which of the node's pools a capacity figure is about (`pool` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CapacityPool {
    /// `describe`, `validate`, `bind-input`.
    Validation,
    /// Runs.
    Execution,
}

impl CapacityPool {
    const ALL: [CapacityPool; 2] = [CapacityPool::Validation, CapacityPool::Execution];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityPool::Validation => "validation",
            CapacityPool::Execution => "execution",
        }
    }
}

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

/// Which bounds a component call ran under (`call` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallLabel {
    /// `describe`, `validate`, `bind-input`.
    Validation,
    /// `execute`.
    Execution,
}

impl CallLabel {
    const ALL: [CallLabel; 2] = [CallLabel::Validation, CallLabel::Execution];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CallLabel::Validation => "validation",
            CallLabel::Execution => "execution",
        }
    }
}

/// A bound that stopped a call or a Run (Part II §10.1; `bound` label of
/// `pilotage_bound_trips_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoundKind {
    /// Fuel ran out.
    Fuel,
    /// The memory limiter refused a growth.
    Memory,
    /// The wall-time deadline fired (epoch interruption, or a statement
    /// stopped at the Run's deadline).
    Deadline,
    /// The wasm stack bound.
    Stack,
    /// The result was larger than `result_bytes`.
    ResultBytes,
    /// The Run reached `invocations_per_run`.
    Invocations,
}

impl BoundKind {
    const ALL: [BoundKind; 6] = [
        BoundKind::Fuel,
        BoundKind::Memory,
        BoundKind::Deadline,
        BoundKind::Stack,
        BoundKind::ResultBytes,
        BoundKind::Invocations,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            BoundKind::Fuel => "fuel",
            BoundKind::Memory => "memory",
            BoundKind::Deadline => "deadline",
            BoundKind::Stack => "stack",
            BoundKind::ResultBytes => "result_bytes",
            BoundKind::Invocations => "invocations",
        }
    }
}

/// A guarantee of the host that a component broke (`kind` label of
/// `pilotage_host_guarantee_violations_total`): the `engine_fault` cases of
/// execution (Part II §6.5.4, §10.1) and the defects the host corrects in
/// a validation (Part II §5.5, §6.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GuaranteeKind {
    /// The component trapped (a panic, `unreachable`, a bad access).
    Trap,
    /// It tried to invoke an entry or run a statement outside its
    /// validated program, or an entry the caller cannot see.
    Containment,
    /// Its trace hid or invented an invocation or a statement.
    TraceMismatch,
    /// Its trace broke plan–trace correspondence.
    PlanCorrespondence,
    /// Its result broke the contract: an outcome inconsistent with `ok`, a
    /// status outside the Language's closed set, output that is not JSON,
    /// a malformed trace step.
    MalformedResult,
    /// A validation defect the host corrected (an undeclared diagnostic
    /// code, a reserved character in a step id, a plan calling an
    /// invisible entry).
    ValidationDefect,
}

impl GuaranteeKind {
    const ALL: [GuaranteeKind; 6] = [
        GuaranteeKind::Trap,
        GuaranteeKind::Containment,
        GuaranteeKind::TraceMismatch,
        GuaranteeKind::PlanCorrespondence,
        GuaranteeKind::MalformedResult,
        GuaranteeKind::ValidationDefect,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            GuaranteeKind::Trap => "trap",
            GuaranteeKind::Containment => "containment",
            GuaranteeKind::TraceMismatch => "trace_mismatch",
            GuaranteeKind::PlanCorrespondence => "plan_correspondence",
            GuaranteeKind::MalformedResult => "malformed_result",
            GuaranteeKind::ValidationDefect => "validation_defect",
        }
    }
}

/// A store operation whose latency is measured (`operation` label of
/// `pilotage_store_operation_duration_seconds`): the ones on a request's
/// path and the periodic ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreOperation {
    /// `Store::ping` (`/readyz`).
    Ping,
    /// Writing a retained Run.
    RunInsert,
    /// Reading a Run (trace fetch).
    RunGet,
    /// Deleting a session's Runs.
    RunsDeleteSession,
    /// The stored-bytes quota read.
    RunBytesOfTenant,
    /// The expiry sweep.
    Sweep,
    /// Claiming an idempotency key.
    IdempotencyClaim,
    /// Reading an idempotency key.
    IdempotencyGet,
    /// Renewing a claim's lease.
    IdempotencyRenew,
    /// Recording a claimed Run's response.
    IdempotencyComplete,
    /// Taking over a claim whose lease ran out.
    IdempotencyTakeOver,
    /// Releasing a refused Run's claim.
    IdempotencyRelease,
    /// Storing a promoted program.
    PromotedInsert,
    /// Writing an audit record.
    Audit,
}

impl StoreOperation {
    const ALL: [StoreOperation; 14] = [
        StoreOperation::Ping,
        StoreOperation::RunInsert,
        StoreOperation::RunGet,
        StoreOperation::RunsDeleteSession,
        StoreOperation::RunBytesOfTenant,
        StoreOperation::Sweep,
        StoreOperation::IdempotencyClaim,
        StoreOperation::IdempotencyGet,
        StoreOperation::IdempotencyRenew,
        StoreOperation::IdempotencyComplete,
        StoreOperation::IdempotencyTakeOver,
        StoreOperation::IdempotencyRelease,
        StoreOperation::PromotedInsert,
        StoreOperation::Audit,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreOperation::Ping => "ping",
            StoreOperation::RunInsert => "run_insert",
            StoreOperation::RunGet => "run_get",
            StoreOperation::RunsDeleteSession => "runs_delete_session",
            StoreOperation::RunBytesOfTenant => "run_bytes_of_tenant",
            StoreOperation::Sweep => "sweep",
            StoreOperation::IdempotencyClaim => "idempotency_claim",
            StoreOperation::IdempotencyGet => "idempotency_get",
            StoreOperation::IdempotencyRenew => "idempotency_renew",
            StoreOperation::IdempotencyComplete => "idempotency_complete",
            StoreOperation::IdempotencyTakeOver => "idempotency_take_over",
            StoreOperation::IdempotencyRelease => "idempotency_release",
            StoreOperation::PromotedInsert => "promoted_insert",
            StoreOperation::Audit => "audit",
        }
    }
}

/// Handles resolved once per value of an open-ended label, at most
/// [`MAX_LABEL_VALUES`] of them; later values share the overflow handles.
struct BoundedHandles<T> {
    by_value: RwLock<HashMap<String, Arc<T>>>,
    overflow: OnceLock<Arc<T>>,
}

impl<T> Default for BoundedHandles<T> {
    fn default() -> Self {
        BoundedHandles { by_value: RwLock::new(HashMap::new()), overflow: OnceLock::new() }
    }
}

impl<T> BoundedHandles<T> {
    /// The handles of `value`, made by `make` (given the label value to
    /// use) the first time it is seen.
    fn get(&self, value: &str, make: impl FnOnce(&str) -> T) -> Arc<T> {
        if let Some(found) = self.by_value.read().unwrap_or_else(|p| p.into_inner()).get(value) {
            return found.clone();
        }
        let mut by_value = self.by_value.write().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = by_value.get(value) {
            return found.clone();
        }
        if by_value.len() >= MAX_LABEL_VALUES {
            return self.overflow.get_or_init(|| Arc::new(make(OVERFLOW_LABEL))).clone();
        }
        let made = Arc::new(make(value));
        by_value.insert(value.to_owned(), made.clone());
        made
    }
}

/// A request counter and its latency histogram, one pair per outcome.
struct RequestHandles {
    by_outcome: [(IntCounter, Histogram); 3],
}

impl RequestHandles {
    fn observe(&self, outcome: McpOutcome, elapsed: Duration) {
        let (count, latency) = &self.by_outcome[outcome as usize];
        count.inc();
        latency.observe(elapsed.as_secs_f64());
    }
}

/// The per-Language handles: validations by result.
struct LanguageHandles {
    /// The label value this Language is counted under.
    label: String,
    validations: [IntCounter; 4],
}

/// The kinds of Run a tenant's usage counts, in `UsageKind` order.
pub const USAGE_KINDS: [&str; 4] = ["immediate", "test", "deploy", "firing"];

/// The per-tenant usage handles.
struct TenantUsageHandles {
    runs: [IntCounter; 4],
    invocations: IntCounter,
    fuel: IntCounter,
    seconds: Counter,
    stored_bytes: IntCounter,
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

/// The per-entry-kind handles: invocation latency, ok and failed.
struct EntryKindHandles {
    ok: Histogram,
    failed: Histogram,
}

/// The families whose label values are open-ended.
struct Families {
    mcp_requests: IntCounterVec,
    mcp_duration: HistogramVec,
    validations: IntCounterVec,
    runs: IntCounterVec,
    assertions: IntCounterVec,
    invocation_duration: HistogramVec,
}

struct Inner {
    /// Whether anything is recorded: off when nothing reads the metrics
    /// (neither `metrics_listen` nor `metrics_token`), so an unexposed
    /// registry costs one relaxed load per event.
    enabled: AtomicBool,
    registry: Registry,
    families: Families,
    methods: HashMap<&'static str, RequestHandles>,
    tools: BoundedHandles<RequestHandles>,
    languages: BoundedHandles<LanguageHandles>,
    entry_kinds: BoundedHandles<EntryKindHandles>,
    cache_hits: IntCounter,
    cache_misses: IntCounter,
    fuel: [IntCounter; 2],
    call_duration: [Histogram; 2],
    bound_trips: [[IntCounter; 6]; 2],
    violations: [IntCounter; 6],
    store_duration: [Histogram; 14],
    sessions_open: IntGauge,
    subscriptions_open: IntGauge,
    tenants: IntGauge,
    firings: IntCounterVec,
    policy_decisions: IntCounterVec,
    firing_delay: HistogramVec,
    webhook_deliveries: IntCounterVec,
    deployments: IntGauge,
    mqtt_subscriptions: IntGauge,
    capacity_in_use: [IntGauge; 2],
    capacity_waiting: [IntGauge; 2],
    capacity_limit: [IntGauge; 2],
    capacity_wait: [Histogram; 2],
    capacity_refusals: IntCounterVec,
    tenant_capacity_in_use: IntGaugeVec,
    tenant_capacity_waiting: IntGaugeVec,
    usage: UsageFamilies,
    tenant_usage: BoundedHandles<TenantUsageHandles>,
}

/// The usage counters' families (labelled by tenant).
struct UsageFamilies {
    runs: IntCounterVec,
    invocations: IntCounterVec,
    fuel: IntCounterVec,
    seconds: CounterVec,
    stored_bytes: IntCounterVec,
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

/// Occurs when the registry cannot be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// Occurs when a metric's name, help or labels are refused, or a name
    /// is registered twice (a defect of this module, which its unit tests
    /// catch).
    #[error("metric pilotage_{name}: {source}")]
    Invalid {
        /// The metric's name, without the prefix.
        name: String,
        /// Why.
        source: prometheus::Error,
    },
}

/// Registers a collector built from constant options.
fn registered<C: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    name: &str,
    collector: prometheus::Result<C>,
) -> Result<C, MetricsError> {
    collector
        .and_then(|collector| registry.register(Box::new(collector.clone())).map(|()| collector))
        .map_err(|source| MetricsError::Invalid { name: name.to_owned(), source })
}

fn counters(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec, MetricsError> {
    registered(registry, name, IntCounterVec::new(Opts::new(name, help), labels))
}

fn histograms(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> Result<HistogramVec, MetricsError> {
    let options = HistogramOpts::new(name, help).buckets(SECONDS_BUCKETS.to_vec());
    registered(registry, name, HistogramVec::new(options, labels))
}

fn counter(registry: &Registry, name: &str, help: &str) -> Result<IntCounter, MetricsError> {
    registered(registry, name, IntCounter::new(name, help))
}

fn gauge(registry: &Registry, name: &str, help: &str) -> Result<IntGauge, MetricsError> {
    registered(registry, name, IntGauge::new(name, help))
}

impl Metrics {
    /// A registry with every family registered and the closed label sets'
    /// handles resolved.
    ///
    /// # Errors
    /// [`MetricsError`] when a metric is refused (a defect of this module).
    pub fn new() -> Result<Metrics, MetricsError> {
        let registry = Registry::new_custom(Some("pilotage".to_owned()), None)
            .map_err(|source| MetricsError::Invalid { name: String::new(), source })?;
        let families = Families {
            mcp_requests: counters(
                &registry,
                "mcp_requests_total",
                "MCP requests answered, by JSON-RPC method, tool (tools/call only) and outcome (ok; tool_error: isError true; rpc_error: a JSON-RPC error).",
                &["method", "tool", "outcome"],
            )?,
            mcp_duration: histograms(
                &registry,
                "mcp_request_duration_seconds",
                "Time from an MCP request's dispatch to its answer, by method, tool and outcome.",
                &["method", "tool", "outcome"],
            )?,
            validations: counters(
                &registry,
                "validations_total",
                "Validations by Language and result (valid, invalid, bounds_exceeded, failed), cached or not.",
                &["language", "result"],
            )?,
            runs: counters(
                &registry,
                "runs_total",
                "Runs by Language and outcome status (Part II 5.7), refused Runs included.",
                &["language", "status"],
            )?,
            assertions: counters(
                &registry,
                "assertions_total",
                "Assertions (x-assertions) evaluated after Runs, by Language and verdict (passed, failed); firings of deployments that keep assertions included.",
                &["language", "verdict"],
            )?,
            invocation_duration: histograms(
                &registry,
                "invocation_duration_seconds",
                "Time of one invocation of a catalog entry by a Run, by entry kind and outcome (ok, failed).",
                &["entry_kind", "outcome"],
            )?,
        };
        let cache_hits =
            counter(&registry, "validation_cache_hits_total", "Validations answered from the validation cache.")?;
        let cache_misses = counter(
            &registry,
            "validation_cache_misses_total",
            "Validations the validation cache could not answer (the component was called).",
        )?;
        let fuel_family = counters(
            &registry,
            "wasm_fuel_used_total",
            "Wasm fuel (about one unit per instruction) burnt by Language components, by call kind.",
            &["call"],
        )?;
        let fuel = CallLabel::ALL.map(|call| fuel_family.with_label_values(&[call.as_str()]));
        let call_family = histograms(
            &registry,
            "wasm_call_duration_seconds",
            "Time of one Language component call (fresh instance, the call, lifting the result), by call kind.",
            &["call"],
        )?;
        let call_duration = CallLabel::ALL.map(|call| call_family.with_label_values(&[call.as_str()]));
        let bound_family = counters(
            &registry,
            "bound_trips_total",
            "Calls and Runs stopped by an evaluation bound (Part II 10.1), by call kind and bound.",
            &["call", "bound"],
        )?;
        let bound_trips = CallLabel::ALL
            .map(|call| BoundKind::ALL.map(|bound| bound_family.with_label_values(&[call.as_str(), bound.as_str()])));
        let violation_family = counters(
            &registry,
            "host_guarantee_violations_total",
            "Breaches of the host's guarantees by a Language component (engine_fault Runs, corrected validation defects), by kind.",
            &["kind"],
        )?;
        let violations = GuaranteeKind::ALL.map(|kind| violation_family.with_label_values(&[kind.as_str()]));
        let store_family = histograms(
            &registry,
            "store_operation_duration_seconds",
            "Time of one operation on the platform's database, by operation.",
            &["operation"],
        )?;
        let store_duration = StoreOperation::ALL.map(|operation| store_family.with_label_values(&[operation.as_str()]));
        let sessions_open = gauge(&registry, "mcp_sessions_open", "MCP sessions open (initialized, not yet ended).")?;
        let subscriptions_open = gauge(
            &registry,
            "mcp_subscriptions_open",
            "Open subscriptions/listen streams of clients without a session (2026-07-28).",
        )?;
        let tenants = gauge(&registry, "tenants", "Tenants this server serves.")?;
        let firings = counters(
            &registry,
            "firings_total",
            "Trigger instances of deployed programs this replica fired, by trigger (schedule, webhook, mqtt) and result (ok: the Run's outcome is ok; failed: it is not, catalog_drift included; dropped: the max_firings_per_minute quota; not_run: the tenant or Language is gone or the Run could not be made).",
            &["trigger", "result"],
        )?;
        let policy_decisions = counters(
            &registry,
            "policy_decisions_total",
            "Tenant policy on risk: decisions on executes (allow, approve, deny), approval events (approval_requested, approved, rejected, approval_used) and budget refusals (budget_exceeded).",
            &["decision"],
        )?;
        let firing_delay = histograms(
            &registry,
            "firing_delay_seconds",
            "Time from a trigger instance (a schedule tick's due time on the deployments' clock, an event's receipt) to the start of its Run, by trigger.",
            &["trigger"],
        )?;
        let webhook_deliveries = counters(
            &registry,
            "webhook_deliveries_total",
            "Deliveries to /events/{tenant}/{source}, by result (accepted, unauthorized: unsigned or a signature that does not match, stale, replayed, unknown_source, malformed, unavailable).",
            &["result"],
        )?;
        let deployments = gauge(
            &registry,
            "deployments",
            "Enabled deployments in the store (fleet-wide: every replica reports the same).",
        )?;
        let mqtt_subscriptions =
            gauge(&registry, "mqtt_subscriptions", "MQTT topic filters this replica subscribes to for deployments.")?;
        let pools = |name: &str, help: &str| -> Result<[IntGauge; 2], MetricsError> {
            let family = registered(&registry, name, IntGaugeVec::new(Opts::new(name, help), &["pool"]))?;
            Ok(CapacityPool::ALL.map(|pool| family.with_label_values(&[pool.as_str()])))
        };
        let capacity_in_use = pools(
            "capacity_in_use",
            "Component calls holding a place in the node's pool (validation: describe, validate, bind-input; execution: Runs, waiting ones included).",
        )?;
        let capacity_waiting =
            pools("capacity_waiting", "Component calls waiting in the admission queue for a place in the pool.")?;
        let capacity_limit = pools(
            "capacity_limit",
            "Component calls admission lets into the pool together (its instances less the share kept for sub-Runs).",
        )?;
        let wait_family = histograms(
            &registry,
            "capacity_wait_seconds",
            "Time a component call waited in the admission queue before it got a place, by pool.",
            &["pool"],
        )?;
        let capacity_wait = CapacityPool::ALL.map(|pool| wait_family.with_label_values(&[pool.as_str()]));
        let capacity_refusals = counters(
            &registry,
            "capacity_refusals_total",
            "Component calls refused for want of capacity (a retryable answer), by pool and reason (queue_full, tenant_queue_full, waited, no_room).",
            &["pool", "reason"],
        )?;
        let tenant_capacity_in_use = registered(
            &registry,
            "tenant_capacity_in_use",
            IntGaugeVec::new(
                Opts::new(
                    "tenant_capacity_in_use",
                    "Component calls of one tenant holding a place in the pool, for tenants holding or waiting now (the capacity exception to 'no tenant label': at most 256 tenants, the rest summed under _other).",
                ),
                &["tenant", "pool"],
            ),
        )?;
        let tenant_capacity_waiting = registered(
            &registry,
            "tenant_capacity_waiting",
            IntGaugeVec::new(
                Opts::new(
                    "tenant_capacity_waiting",
                    "Component calls of one tenant waiting for a place in the pool (as tenant_capacity_in_use).",
                ),
                &["tenant", "pool"],
            ),
        )?;
        let usage = UsageFamilies {
            runs: counters(
                &registry,
                "tenant_runs_total",
                "Runs of one tenant on this replica, by kind (immediate, test, deploy, firing).",
                &["tenant", "kind"],
            )?,
            invocations: counters(
                &registry,
                "tenant_invocations_total",
                "Invocations made by one tenant's Runs on this replica.",
                &["tenant"],
            )?,
            fuel: counters(
                &registry,
                "tenant_fuel_total",
                "Fuel used by one tenant's Runs on this replica.",
                &["tenant"],
            )?,
            seconds: registered(
                &registry,
                "tenant_run_seconds_total",
                CounterVec::new(
                    Opts::new("tenant_run_seconds_total", "Wall time of one tenant's Runs on this replica, seconds."),
                    &["tenant"],
                ),
            )?,
            stored_bytes: counters(
                &registry,
                "tenant_stored_run_bytes_total",
                "Bytes of Run records one tenant's Runs stored through this replica.",
                &["tenant"],
            )?,
        };
        let methods = MCP_METHODS.iter().map(|&method| (method, request_handles(&families, method, ""))).collect();
        Ok(Metrics {
            inner: Arc::new(Inner {
                enabled: AtomicBool::new(true),
                registry,
                families,
                methods,
                tools: BoundedHandles::default(),
                languages: BoundedHandles::default(),
                entry_kinds: BoundedHandles::default(),
                cache_hits,
                cache_misses,
                fuel,
                call_duration,
                bound_trips,
                violations,
                store_duration,
                sessions_open,
                subscriptions_open,
                tenants,
                firings,
                policy_decisions,
                firing_delay,
                webhook_deliveries,
                deployments,
                mqtt_subscriptions,
                capacity_in_use,
                capacity_waiting,
                capacity_limit,
                capacity_wait,
                capacity_refusals,
                tenant_capacity_in_use,
                tenant_capacity_waiting,
                usage,
                tenant_usage: BoundedHandles::default(),
            }),
        })
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
                self.inner.tools.get(tool, |label| request_handles(families, method, label)).observe(outcome, elapsed);
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
        if hit { &self.inner.cache_hits } else { &self.inner.cache_misses }.inc();
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
        self.inner.fuel[call as usize].inc_by(fuel);
        self.inner.call_duration[call as usize].observe(elapsed.as_secs_f64());
    }

    /// Counts one trip of `bound` in a call of kind `call`.
    pub fn bound_trip(&self, call: CallLabel, bound: BoundKind) {
        if !self.is_enabled() {
            return;
        }
        self.inner.bound_trips[call as usize][bound as usize].inc();
    }

    /// Counts one breach of a host guarantee.
    pub fn guarantee_violation(&self, kind: GuaranteeKind) {
        if !self.is_enabled() {
            return;
        }
        self.inner.violations[kind as usize].inc();
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
        self.inner.sessions_open.set(sessions_open as i64);
        self.inner.subscriptions_open.set(subscriptions_open as i64);
        self.inner.tenants.set(tenants as i64);
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
        self.inner.firings.with_label_values(&[trigger, result]).inc();
        if let Some(delay) = delay {
            self.inner.firing_delay.with_label_values(&[trigger]).observe(delay.as_secs_f64());
        }
    }

    /// Counts one webhook delivery by `result` (`accepted`,
    /// `unauthorized`, `stale`, `replayed`, `unknown_source`, `malformed`,
    /// `unavailable`).
    pub fn webhook_delivery(&self, result: &'static str) {
        if !self.is_enabled() {
            return;
        }
        self.inner.webhook_deliveries.with_label_values(&[result]).inc();
    }

    /// Sets the deployment gauges read at scrape time.
    pub fn set_deployment_gauges(&self, deployments: i64, mqtt_subscriptions: usize) {
        self.inner.deployments.set(deployments);
        self.inner.mqtt_subscriptions.set(mqtt_subscriptions as i64);
    }

    /// Counts one call refused for want of capacity in `pool` (`reason`:
    /// queue_full, tenant_queue_full, waited, no_room).
    pub fn capacity_refusal(&self, pool: CapacityPool, reason: &'static str) {
        if !self.is_enabled() {
            return;
        }
        self.inner.capacity_refusals.with_label_values(&[pool.as_str(), reason]).inc();
    }

    /// Records how long a call waited in `pool`'s queue before its place.
    pub fn capacity_wait(&self, pool: CapacityPool, waited: Duration) {
        if !self.is_enabled() {
            return;
        }
        self.inner.capacity_wait[pool as usize].observe(waited.as_secs_f64());
    }

    /// Sets the capacity gauges read at scrape time: each pool's figures,
    /// and `(tenant, pool, in_use, waiting)` of the tenants holding or
    /// waiting now (the first [`MAX_LABEL_VALUES`] by name; the others
    /// are summed under [`OVERFLOW_LABEL`]).
    pub fn set_capacity(&self, pools: [PoolFigures; 2], tenants: &[(&str, CapacityPool, u64, u64)]) {
        for (index, figures) in pools.iter().enumerate() {
            self.inner.capacity_in_use[index].set(figures.in_use as i64);
            self.inner.capacity_waiting[index].set(figures.waiting as i64);
            self.inner.capacity_limit[index].set(figures.limit as i64);
        }
        let (in_use, waiting) = (&self.inner.tenant_capacity_in_use, &self.inner.tenant_capacity_waiting);
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

fn request_handles(families: &Families, method: &'static str, tool: &str) -> RequestHandles {
    RequestHandles {
        by_outcome: McpOutcome::ALL.map(|outcome| {
            let labels = [method, tool, outcome.as_str()];
            (families.mcp_requests.with_label_values(&labels), families.mcp_duration.with_label_values(&labels))
        }),
    }
}

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
