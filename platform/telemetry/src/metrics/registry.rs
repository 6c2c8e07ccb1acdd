//! Building the registry: every family registered under the `pilotage_`
//! prefix with its help text and labels, grouped by what records it, and
//! the handles of the closed label sets resolved once. What each family
//! counts is its help text, which the exposition carries.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use prometheus::{
    CounterVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

use super::handles::{BoundedHandles, EntryKindHandles, LanguageHandles, RequestHandles, TenantUsageHandles};
use super::labels::{BoundKind, CallLabel, CapacityPool, GuaranteeKind, MCP_METHODS, McpOutcome, StoreOperation};

/// Upper bounds of every duration histogram, in seconds: 50 µs (a cached
/// validation) to a minute (the longest request timeout in use).
const SECONDS_BUCKETS: [f64; 19] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0, 60.0,
];

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

/// Everything one registry holds: the registry itself, the families, and
/// the handles resolved so far.
pub(super) struct Inner {
    /// Whether anything is recorded: off when nothing reads the metrics
    /// (neither `metrics_listen` nor `metrics_token`), so an unexposed
    /// registry costs one relaxed load per event.
    pub(super) enabled: AtomicBool,
    pub(super) registry: Registry,
    pub(super) families: Families,
    pub(super) methods: HashMap<&'static str, RequestHandles>,
    pub(super) tools: BoundedHandles<RequestHandles>,
    pub(super) languages: BoundedHandles<LanguageHandles>,
    pub(super) entry_kinds: BoundedHandles<EntryKindHandles>,
    pub(super) components: ComponentHandles,
    pub(super) store_duration: [Histogram; 14],
    pub(super) server: ServerGauges,
    pub(super) policy_decisions: IntCounterVec,
    pub(super) deployments: DeploymentFamilies,
    pub(super) capacity: CapacityHandles,
    pub(super) usage: UsageFamilies,
    pub(super) tenant_usage: BoundedHandles<TenantUsageHandles>,
}

impl Inner {
    /// A registry with every family registered and the closed label sets'
    /// handles resolved, recording on.
    ///
    /// # Errors
    /// [`MetricsError`] when a metric is refused (a defect of this module).
    pub(super) fn register() -> Result<Inner, MetricsError> {
        let registry = Registry::new_custom(Some("pilotage".to_owned()), None)
            .map_err(|source| MetricsError::Invalid { name: String::new(), source })?;
        let families = Families::register(&registry)?;
        let components = ComponentHandles::register(&registry)?;
        let store_duration = store_durations(&registry)?;
        let server = ServerGauges::register(&registry)?;
        let policy_decisions = counters(
            &registry,
            "policy_decisions_total",
            "Tenant policy on risk: decisions on executes (allow, approve, deny), approval events (approval_requested, approved, rejected, approval_used) and budget refusals (budget_exceeded).",
            &["decision"],
        )?;
        let deployments = DeploymentFamilies::register(&registry)?;
        let capacity = CapacityHandles::register(&registry)?;
        let usage = UsageFamilies::register(&registry)?;
        let methods = MCP_METHODS.iter().map(|&method| (method, families.request_handles(method, ""))).collect();
        Ok(Inner {
            enabled: AtomicBool::new(true),
            registry,
            families,
            methods,
            tools: BoundedHandles::default(),
            languages: BoundedHandles::default(),
            entry_kinds: BoundedHandles::default(),
            components,
            store_duration,
            server,
            policy_decisions,
            deployments,
            capacity,
            usage,
            tenant_usage: BoundedHandles::default(),
        })
    }
}

/// The families whose label values are open-ended: MCP requests by method
/// and tool, and what Languages and entry kinds do.
pub(super) struct Families {
    pub(super) mcp_requests: IntCounterVec,
    pub(super) mcp_duration: HistogramVec,
    pub(super) validations: IntCounterVec,
    pub(super) runs: IntCounterVec,
    pub(super) assertions: IntCounterVec,
    pub(super) invocation_duration: HistogramVec,
}

impl Families {
    fn register(registry: &Registry) -> Result<Families, MetricsError> {
        Ok(Families {
            mcp_requests: counters(
                registry,
                "mcp_requests_total",
                "MCP requests answered, by JSON-RPC method, tool (tools/call only) and outcome (ok; tool_error: isError true; rpc_error: a JSON-RPC error).",
                &["method", "tool", "outcome"],
            )?,
            mcp_duration: histograms(
                registry,
                "mcp_request_duration_seconds",
                "Time from an MCP request's dispatch to its answer, by method, tool and outcome.",
                &["method", "tool", "outcome"],
            )?,
            validations: counters(
                registry,
                "validations_total",
                "Validations by Language and result (valid, invalid, bounds_exceeded, failed), cached or not.",
                &["language", "result"],
            )?,
            runs: counters(
                registry,
                "runs_total",
                "Runs by Language and outcome status (Part II 5.7), refused Runs included.",
                &["language", "status"],
            )?,
            assertions: counters(
                registry,
                "assertions_total",
                "Assertions (x-assertions) evaluated after Runs, by Language and verdict (passed, failed); firings of deployments that keep assertions included.",
                &["language", "verdict"],
            )?,
            invocation_duration: histograms(
                registry,
                "invocation_duration_seconds",
                "Time of one invocation of a catalog entry by a Run, by entry kind and outcome (ok, failed).",
                &["entry_kind", "outcome"],
            )?,
        })
    }

    /// The request handles of `method` (and `tool`, empty for methods
    /// other than `tools/call`), one pair per outcome.
    pub(super) fn request_handles(&self, method: &'static str, tool: &str) -> RequestHandles {
        RequestHandles {
            by_outcome: McpOutcome::ALL.map(|outcome| {
                let labels = [method, tool, outcome.as_str()];
                (self.mcp_requests.with_label_values(&labels), self.mcp_duration.with_label_values(&labels))
            }),
        }
    }
}

/// What the engine records of Language component calls: the validation
/// cache, fuel and time by call kind, bound trips and guarantee breaches.
pub(super) struct ComponentHandles {
    pub(super) cache_hits: IntCounter,
    pub(super) cache_misses: IntCounter,
    pub(super) fuel: [IntCounter; 2],
    pub(super) call_duration: [Histogram; 2],
    pub(super) bound_trips: [[IntCounter; 6]; 2],
    pub(super) violations: [IntCounter; 6],
}

impl ComponentHandles {
    fn register(registry: &Registry) -> Result<ComponentHandles, MetricsError> {
        let cache_hits =
            counter(registry, "validation_cache_hits_total", "Validations answered from the validation cache.")?;
        let cache_misses = counter(
            registry,
            "validation_cache_misses_total",
            "Validations the validation cache could not answer (the component was called).",
        )?;
        let fuel_family = counters(
            registry,
            "wasm_fuel_used_total",
            "Wasm fuel (about one unit per instruction) burnt by Language components, by call kind.",
            &["call"],
        )?;
        let fuel = CallLabel::ALL.map(|call| fuel_family.with_label_values(&[call.as_str()]));
        let call_family = histograms(
            registry,
            "wasm_call_duration_seconds",
            "Time of one Language component call (fresh instance, the call, lifting the result), by call kind.",
            &["call"],
        )?;
        let call_duration = CallLabel::ALL.map(|call| call_family.with_label_values(&[call.as_str()]));
        let bound_family = counters(
            registry,
            "bound_trips_total",
            "Calls and Runs stopped by an evaluation bound (Part II 10.1), by call kind and bound.",
            &["call", "bound"],
        )?;
        let bound_trips = CallLabel::ALL
            .map(|call| BoundKind::ALL.map(|bound| bound_family.with_label_values(&[call.as_str(), bound.as_str()])));
        let violation_family = counters(
            registry,
            "host_guarantee_violations_total",
            "Breaches of the host's guarantees by a Language component (engine_fault Runs, corrected validation defects), by kind.",
            &["kind"],
        )?;
        let violations = GuaranteeKind::ALL.map(|kind| violation_family.with_label_values(&[kind.as_str()]));
        Ok(ComponentHandles { cache_hits, cache_misses, fuel, call_duration, bound_trips, violations })
    }
}

/// The store's operation latency, one histogram per operation.
fn store_durations(registry: &Registry) -> Result<[Histogram; 14], MetricsError> {
    let store_family = histograms(
        registry,
        "store_operation_duration_seconds",
        "Time of one operation on the platform's database, by operation.",
        &["operation"],
    )?;
    Ok(StoreOperation::ALL.map(|operation| store_family.with_label_values(&[operation.as_str()])))
}

/// The gauges of what this server holds open: MCP sessions, listening
/// streams without a session, tenants.
pub(super) struct ServerGauges {
    pub(super) sessions_open: IntGauge,
    pub(super) subscriptions_open: IntGauge,
    pub(super) tenants: IntGauge,
}

impl ServerGauges {
    fn register(registry: &Registry) -> Result<ServerGauges, MetricsError> {
        let sessions_open = gauge(registry, "mcp_sessions_open", "MCP sessions open (initialized, not yet ended).")?;
        let subscriptions_open = gauge(
            registry,
            "mcp_subscriptions_open",
            "Open subscriptions/listen streams of clients without a session (2026-07-28).",
        )?;
        let tenants = gauge(registry, "tenants", "Tenants this server serves.")?;
        Ok(ServerGauges { sessions_open, subscriptions_open, tenants })
    }
}

/// What deployments record (Part II §6.5.7): firings and their delay,
/// webhook deliveries, stored deployments and MQTT subscriptions.
pub(super) struct DeploymentFamilies {
    pub(super) firings: IntCounterVec,
    pub(super) firing_delay: HistogramVec,
    pub(super) webhook_deliveries: IntCounterVec,
    pub(super) deployments: IntGauge,
    pub(super) mqtt_subscriptions: IntGauge,
}

impl DeploymentFamilies {
    fn register(registry: &Registry) -> Result<DeploymentFamilies, MetricsError> {
        let firings = counters(
            registry,
            "firings_total",
            "Trigger instances of deployed programs this replica fired, by trigger (schedule, webhook, mqtt) and result (ok: the Run's outcome is ok; failed: it is not, catalog_drift included; dropped: the max_firings_per_minute quota; not_run: the tenant or Language is gone or the Run could not be made).",
            &["trigger", "result"],
        )?;
        let firing_delay = histograms(
            registry,
            "firing_delay_seconds",
            "Time from a trigger instance (a schedule tick's due time on the deployments' clock, an event's receipt) to the start of its Run, by trigger.",
            &["trigger"],
        )?;
        let webhook_deliveries = counters(
            registry,
            "webhook_deliveries_total",
            "Deliveries to /events/{tenant}/{source}, by result (accepted, unauthorized: unsigned or a signature that does not match, stale, replayed, unknown_source, malformed, unavailable).",
            &["result"],
        )?;
        let deployments = gauge(
            registry,
            "deployments",
            "Enabled deployments in the store (fleet-wide: every replica reports the same).",
        )?;
        let mqtt_subscriptions =
            gauge(registry, "mqtt_subscriptions", "MQTT topic filters this replica subscribes to for deployments.")?;
        Ok(DeploymentFamilies { firings, firing_delay, webhook_deliveries, deployments, mqtt_subscriptions })
    }
}

/// The capacity figures (`pilotage_engine::admission`): each pool's calls
/// in use, waiting and admitted together, waits, refusals, and the
/// per-tenant gauges of who holds and waits now.
pub(super) struct CapacityHandles {
    pub(super) in_use: [IntGauge; 2],
    pub(super) waiting: [IntGauge; 2],
    pub(super) limit: [IntGauge; 2],
    pub(super) wait: [Histogram; 2],
    pub(super) refusals: IntCounterVec,
    pub(super) tenant_in_use: IntGaugeVec,
    pub(super) tenant_waiting: IntGaugeVec,
}

impl CapacityHandles {
    fn register(registry: &Registry) -> Result<CapacityHandles, MetricsError> {
        let pools = |name: &str, help: &str| -> Result<[IntGauge; 2], MetricsError> {
            let family = registered(registry, name, IntGaugeVec::new(Opts::new(name, help), &["pool"]))?;
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
            registry,
            "capacity_wait_seconds",
            "Time a component call waited in the admission queue before it got a place, by pool.",
            &["pool"],
        )?;
        let capacity_wait = CapacityPool::ALL.map(|pool| wait_family.with_label_values(&[pool.as_str()]));
        let capacity_refusals = counters(
            registry,
            "capacity_refusals_total",
            "Component calls refused for want of capacity (a retryable answer), by pool and reason (queue_full, tenant_queue_full, waited, no_room).",
            &["pool", "reason"],
        )?;
        let tenant_capacity_in_use = registered(
            registry,
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
            registry,
            "tenant_capacity_waiting",
            IntGaugeVec::new(
                Opts::new(
                    "tenant_capacity_waiting",
                    "Component calls of one tenant waiting for a place in the pool (as tenant_capacity_in_use).",
                ),
                &["tenant", "pool"],
            ),
        )?;
        Ok(CapacityHandles {
            in_use: capacity_in_use,
            waiting: capacity_waiting,
            limit: capacity_limit,
            wait: capacity_wait,
            refusals: capacity_refusals,
            tenant_in_use: tenant_capacity_in_use,
            tenant_waiting: tenant_capacity_waiting,
        })
    }
}

/// The usage counters' families (labelled by tenant).
pub(super) struct UsageFamilies {
    pub(super) runs: IntCounterVec,
    pub(super) invocations: IntCounterVec,
    pub(super) fuel: IntCounterVec,
    pub(super) seconds: CounterVec,
    pub(super) stored_bytes: IntCounterVec,
}

impl UsageFamilies {
    fn register(registry: &Registry) -> Result<UsageFamilies, MetricsError> {
        Ok(UsageFamilies {
            runs: counters(
                registry,
                "tenant_runs_total",
                "Runs of one tenant on this replica, by kind (immediate, test, deploy, firing).",
                &["tenant", "kind"],
            )?,
            invocations: counters(
                registry,
                "tenant_invocations_total",
                "Invocations made by one tenant's Runs on this replica.",
                &["tenant"],
            )?,
            fuel: counters(
                registry,
                "tenant_fuel_total",
                "Fuel used by one tenant's Runs on this replica.",
                &["tenant"],
            )?,
            seconds: registered(
                registry,
                "tenant_run_seconds_total",
                CounterVec::new(
                    Opts::new("tenant_run_seconds_total", "Wall time of one tenant's Runs on this replica, seconds."),
                    &["tenant"],
                ),
            )?,
            stored_bytes: counters(
                registry,
                "tenant_stored_run_bytes_total",
                "Bytes of Run records one tenant's Runs stored through this replica.",
                &["tenant"],
            )?,
        })
    }
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
