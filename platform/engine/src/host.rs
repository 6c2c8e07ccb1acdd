//! The host side of a call: the store data, the Language imports
//! (`catalog`, `effects`), a WASI p2 that grants nothing, and the
//! conversions between WIT values and the platform's protocol types.

use std::collections::BTreeMap;

use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::catalog::CatalogSnapshot;
use crate::clock::Clock;
use crate::description::{
    CodeInfo, Features, GuideContent, KindInfo, LanguageDescription, ProgramKind, RiskInfo, StatusInfo,
};
use crate::wit::pilotage::language::{catalog, describe_types, effects, run_types, sql, types};

/// Why the host did not perform an invocation, as the component sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvokeRefusal {
    /// The host refused: outside the plan, not visible, or a bound.
    Refused(String),
    /// The entry was called and failed.
    Failed(String),
}

/// What execution may do to the world, supplied per call by the execute
/// pipeline. Implementations record every invocation they perform. The
/// methods that reach the world are async: they run while the guest's
/// fiber is suspended, on the runtime's workers.
#[async_trait::async_trait]
pub trait Effects: Send {
    /// Invokes `entry_id` for trace step `step_id` with `input` (JSON text);
    /// returns its output (JSON text).
    ///
    /// # Errors
    /// [`InvokeRefusal`] when the host refuses or the entry fails.
    async fn invoke(&mut self, step_id: &str, entry_id: &str, input: &str) -> Result<String, InvokeRefusal>;

    /// Runs a validated statement on the Run's data source.
    ///
    /// # Errors
    /// [`InvokeRefusal::Refused`] by default: the Language has no data
    /// source.
    async fn sql_query(&mut self, step_id: &str, statement: &str, params: &str) -> Result<SqlResult, InvokeRefusal> {
        let _ = (step_id, statement, params);
        Err(InvokeRefusal::Refused("no data source is configured for this Language".into()))
    }

    /// Ends the Run's effects once the host has decided its outcome:
    /// commits a data-source transaction when `succeeded`, else rolls it
    /// back.
    ///
    /// # Errors
    /// [`CommitError`] when the commit does not take effect, saying whether
    /// the transaction was rolled back or its outcome is unknown.
    async fn finish(&mut self, succeeded: bool) -> Result<(), CommitError> {
        let _ = succeeded;
        Ok(())
    }

    /// The instant `effects.now` answers, in ms since the Unix epoch, when
    /// this call has a clock of its own (a test run's simulated clock);
    /// `None`: the engine's [`Clock`].
    fn now_ms(&self) -> Option<u64> {
        None
    }
}

/// Why a Run's data-source transaction did not commit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// Occurs when the database refuses the COMMIT with an error (a
    /// deferred constraint, a serialization failure): it rolled the
    /// transaction back, so nothing the Run did persists.
    #[error("the database refused the commit and rolled the transaction back: {0}")]
    RolledBack(String),
    /// Occurs when the COMMIT's outcome cannot be known (the connection
    /// failed before the database answered): the Run's changes may or may
    /// not persist.
    #[error("the commit's outcome is unknown: {0}")]
    Unknown(String),
}

/// The result of one statement, as the `sql` import returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct SqlResult {
    /// (name, database type name) per column.
    pub columns: Vec<(String, String)>,
    /// A JSON array of row arrays.
    pub rows: serde_json::Value,
    /// Rows returned or changed, before the cap.
    pub rows_matched: u64,
    /// Whether the caps dropped rows.
    pub truncated: bool,
    /// Milliseconds the statement took.
    pub elapsed_ms: u64,
}

/// Lines a component may log per call; more are counted, not kept.
pub(crate) const LOG_LINES_KEPT: usize = 64;
/// Characters kept of one log line.
pub(crate) const LOG_LINE_CHARS: usize = 512;

/// The per-call context a store carries: the catalog snapshot the call
/// sees and, during execution only, its effects.
pub struct CallContext {
    /// The caller's visible catalog for this Language.
    pub catalog: CatalogSnapshot,
    /// Present during execution; `None` refuses every invocation
    /// (validation is side-effect free, Part II §6.4).
    pub effects: Option<Box<dyn Effects>>,
    /// Log lines the component wrote, truncated.
    pub logs: Vec<String>,
    /// Log lines dropped beyond `LOG_LINES_KEPT`.
    pub logs_dropped: u64,
}

impl CallContext {
    /// For `describe`: no catalog, no effects.
    pub fn describe() -> CallContext {
        CallContext::validation(CatalogSnapshot::default())
    }

    /// For `validate` and `bind-input`: a catalog, no effects.
    pub fn validation(catalog: CatalogSnapshot) -> CallContext {
        CallContext { catalog, effects: None, logs: Vec::new(), logs_dropped: 0 }
    }

    /// The effects of this call, if it may have any.
    pub(crate) fn call_effects(&mut self) -> Option<&mut (dyn Effects + 'static)> {
        self.effects.as_deref_mut()
    }

    /// For `execute`: a catalog and effects.
    pub fn execution(catalog: CatalogSnapshot, effects: Box<dyn Effects>) -> CallContext {
        CallContext { catalog, effects: Some(effects), logs: Vec::new(), logs_dropped: 0 }
    }
}

/// A memory limiter that remembers whether it denied a grow, so the host
/// can tell "out of memory" from other traps.
pub struct Limits {
    inner: StoreLimits,
    /// Whether a memory or table grow was denied during the call.
    pub denied: bool,
}

impl ResourceLimiter for Limits {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = self.inner.memory_growing(current, desired, maximum)?;
        self.denied |= !allowed;
        Ok(allowed)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.denied = true;
        self.inner.memory_grow_failed(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = self.inner.table_growing(current, desired, maximum)?;
        self.denied |= !allowed;
        Ok(allowed)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.denied = true;
        self.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

/// The data of one store: WASI state that grants nothing, the memory
/// limiter, and the call context.
pub struct HostState {
    /// Built on the first WASI call only: most calls make none, and
    /// building one seeds its random generators.
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    /// The memory limiter.
    pub limits: Limits,
    /// The call context.
    pub call: CallContext,
    /// What `effects.now` reads unless the call has a clock of its own.
    clock: Clock,
}

impl HostState {
    /// Store data for one call with a memory cap of `memory_bytes`, reading
    /// time from `clock`.
    pub fn new(memory_bytes: u64, call: CallContext, clock: Clock) -> HostState {
        let limits =
            StoreLimitsBuilder::new().memory_size(memory_bytes as usize).instances(64).tables(64).memories(16).build();
        HostState {
            wasi: None,
            table: ResourceTable::new(),
            limits: Limits { inner: limits, denied: false },
            call,
            clock,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        // No preopened directories, no environment, no arguments, no
        // sockets; stdin is empty and stdout/stderr are discarded; the
        // clocks are frozen at the Unix epoch (time comes from the `now`
        // import only).
        let wasi = self
            .wasi
            .get_or_insert_with(|| WasiCtx::builder().wall_clock(FrozenClock).monotonic_clock(FrozenClock).build());
        WasiCtxView { ctx: wasi, table: &mut self.table }
    }
}

/// A clock that never moves: Rust's standard library imports the WASI
/// clocks even when unused, and a Language must not read real time except
/// through the host's `now`.
struct FrozenClock;

impl wasmtime_wasi::HostWallClock for FrozenClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }
    fn now(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

impl wasmtime_wasi::HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

struct HasTable;

impl wasmtime::component::HasData for HasTable {
    type Data<'a> = &'a mut ResourceTable;
}

/// Links the parts of WASI p2 that Rust's `wasm32-wasip2` standard library
/// imports even for a pure library (io streams, cli, frozen clocks, random
/// seeds), backed by a context that grants nothing. Filesystem and sockets
/// are not linked at all: a component importing them is refused at load
/// time.
///
/// # Errors
/// When wasmtime rejects a definition.
pub(crate) fn add_wasi_without_grants(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, io, random};
    use wasmtime_wasi::random::{WasiRandom, WasiRandomView};
    // The async flavour of wasi:io: calls are made with `call_async`, and
    // the synchronous one would block on a runtime from inside it.
    io::error::add_to_linker::<HostState, HasTable>(linker, |state| &mut state.table)?;
    io::poll::add_to_linker::<HostState, HasTable>(linker, |state| &mut state.table)?;
    io::streams::add_to_linker::<HostState, HasTable>(linker, |state| &mut state.table)?;
    cli::exit::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    cli::environment::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    cli::stdin::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    cli::stdout::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    cli::stderr::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    cli::terminal_input::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    cli::terminal_output::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(linker, |state| state.cli())?;
    clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(linker, |state| state.clocks())?;
    clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(linker, |state| state.clocks())?;
    random::insecure_seed::add_to_linker::<HostState, WasiRandom>(linker, |state| state.random())?;
    random::insecure::add_to_linker::<HostState, WasiRandom>(linker, |state| state.random())?;
    random::random::add_to_linker::<HostState, WasiRandom>(linker, |state| state.random())?;
    Ok(())
}

impl types::Host for HostState {}
impl describe_types::Host for HostState {}
impl run_types::Host for HostState {}

impl catalog::Host for HostState {
    fn get(&mut self, id: String) -> Option<types::CatalogEntry> {
        self.call.catalog.get_stored(&id).map(|stored| entry_to_wit(stored))
    }

    fn ids(&mut self, kind: Option<String>) -> Vec<String> {
        self.call.catalog.ids(kind.as_deref())
    }
}

impl effects::Host for HostState {
    async fn invoke(&mut self, step_id: String, entry_id: String, input: String) -> Result<String, types::InvokeError> {
        let Some(effects) = self.call.effects.as_mut() else {
            return Err(types::InvokeError::Refused("invocations are not allowed during validation".into()));
        };
        effects.invoke(&step_id, &entry_id, &input).await.map_err(|refusal| match refusal {
            InvokeRefusal::Refused(message) => types::InvokeError::Refused(message),
            InvokeRefusal::Failed(message) => types::InvokeError::Failed(message),
        })
    }

    fn now(&mut self) -> u64 {
        match self.call.effects.as_ref().and_then(|effects| effects.now_ms()) {
            Some(simulated) => simulated,
            None => self.clock.now_ms().max(0) as u64,
        }
    }

    fn log(&mut self, message: String) {
        if self.call.logs.len() >= LOG_LINES_KEPT {
            self.call.logs_dropped += 1;
            return;
        }
        self.call.logs.push(message.chars().take(LOG_LINE_CHARS).collect());
    }
}

impl sql::Host for HostState {
    async fn query(
        &mut self,
        step_id: String,
        statement: String,
        params: String,
    ) -> Result<sql::QueryResult, sql::SqlError> {
        let Some(effects) = self.call.effects.as_mut() else {
            return Err(sql::SqlError::Refused("statements cannot run during validation".into()));
        };
        match effects.sql_query(&step_id, &statement, &params).await {
            Ok(result) => Ok(sql::QueryResult {
                columns: result.columns.into_iter().map(|(name, type_name)| sql::Column { name, type_name }).collect(),
                rows: result.rows.to_string(),
                rows_matched: result.rows_matched,
                truncated: result.truncated,
                elapsed_ms: result.elapsed_ms,
            }),
            Err(InvokeRefusal::Refused(message)) => Err(sql::SqlError::Refused(message)),
            Err(InvokeRefusal::Failed(message)) => Err(sql::SqlError::Failed(message)),
        }
    }
}

fn hints_to_wit(hints: pilotage_protocol::risk::RiskHints) -> types::RiskHints {
    types::RiskHints { read_only: hints.read_only, destructive: hints.destructive, open_world: hints.open_world }
}

/// Protocol risk hints from WIT ones.
pub(crate) fn hints_from_wit(hints: types::RiskHints) -> pilotage_protocol::risk::RiskHints {
    pilotage_protocol::risk::RiskHints {
        read_only: hints.read_only,
        destructive: hints.destructive,
        open_world: hints.open_world,
    }
}

fn entry_to_wit(stored: &crate::catalog::StoredEntry) -> types::CatalogEntry {
    let entry = &stored.entry;
    let (input_schema, output_schema) = stored.schema_text().clone();
    types::CatalogEntry {
        id: entry.id.clone(),
        kind: entry.kind.clone(),
        name: entry.name.clone(),
        description: entry.description.clone(),
        input_schema,
        output_schema,
        risk: entry.risk.clone(),
        risk_hints: hints_to_wit(entry.risk_hints),
        tags: entry.tags.clone(),
    }
}

/// A protocol diagnostic from a WIT one.
pub(crate) fn diagnostic_from_wit(diagnostic: types::Diagnostic) -> pilotage_protocol::diagnostic::Diagnostic {
    use pilotage_protocol::diagnostic::{Locator, Severity, TextPosition, TextRange};
    let range = |r: types::TextRange| TextRange {
        start: TextPosition { line: r.start.line, column: r.start.column },
        end: TextPosition { line: r.end.line, column: r.end.column },
    };
    pilotage_protocol::diagnostic::Diagnostic {
        severity: match diagnostic.severity {
            types::Severity::Error => Severity::Error,
            types::Severity::Warning => Severity::Warning,
        },
        code: diagnostic.code,
        path: match diagnostic.path {
            types::Locator::Pointer(pointer) => Locator::Pointer(pointer),
            types::Locator::Range(r) => Locator::Range(range(r)),
        },
        range: diagnostic.range.map(range),
        message: diagnostic.message,
        hint: diagnostic.hint,
    }
}

/// A protocol plan step from a WIT one (risk hints as declared; the host
/// recomputes the aggregate).
pub(crate) fn plan_step_from_wit(step: run_types::PlanStep) -> pilotage_protocol::plan::PlanStep {
    pilotage_protocol::plan::PlanStep {
        id: step.id,
        calls: step.calls,
        arm: step.arm.map(|arm| pilotage_protocol::plan::Arm { branch: arm.branch, label: arm.label }),
        loop_id: step.loop_,
        risk: step.risk,
        risk_hints: hints_from_wit(step.risk_hints),
    }
}

/// A protocol outcome from a WIT one.
pub(crate) fn outcome_from_wit(outcome: run_types::Outcome) -> pilotage_protocol::outcome::Outcome {
    pilotage_protocol::outcome::Outcome { ok: outcome.ok, status: outcome.status, error: outcome.error }
}

/// `declared` with the statuses of a tenant's policy on risk and of
/// assertions added where the Language does not list them (Part II §5.7:
/// every status a Run may end with is in the closed set; the platform
/// puts these on any Language's Runs).
fn with_policy_statuses(mut declared: Vec<StatusInfo>) -> Vec<StatusInfo> {
    let added = pilotage_protocol::outcome::POLICY_STATUSES.into_iter().chain([pilotage_protocol::assertions::STATUS]);
    for (status, ok, side_effects, meaning) in added {
        if !declared.iter().any(|s| s.status == status) {
            declared.push(StatusInfo { status: status.to_owned(), ok, side_effects, meaning: meaning.to_owned() });
        }
    }
    declared
}

/// The section the platform adds to every closed-sets guide: the policy
/// statuses, in the guide's own words for statuses (`ok`, side effects).
fn policy_statuses_section() -> String {
    let mut section = String::from(
        "\n\n## Statuses of the tenant's policy on risk\n\nThe platform may refuse any Run of this Language before it starts, by the tenant's policy (approvals, budgets). Each is `ok: false` and no side effects occurred.\n\n",
    );
    for (status, ok, side_effects, meaning) in pilotage_protocol::outcome::POLICY_STATUSES {
        section.push_str(&format!(
            "- `{status}` (ok: {ok}, side effects: {}): {meaning}\n",
            if side_effects { "possible" } else { "none" }
        ));
    }
    section
}

/// The platform's description of a Language from its `describe` result.
pub(crate) fn description_from_wit(info: describe_types::LanguageInfo) -> LanguageDescription {
    use describe_types::{ExecutionMode, GuideLevel, LocatorDialect, SubprogramTracing, TraceCeiling};
    let status = |s: describe_types::StatusInfo| StatusInfo {
        status: s.status,
        ok: s.ok,
        side_effects: s.side_effects,
        meaning: s.meaning,
    };
    let name = info.name.clone();
    LanguageDescription {
        name: info.name,
        title: info.title,
        program_kind: match info.program_kind {
            describe_types::ProgramKind::Json => ProgramKind::Json,
            describe_types::ProgramKind::Text => ProgramKind::Text,
        },
        program_argument: info.program_argument,
        locator: match info.locator {
            LocatorDialect::JsonPointer => pilotage_protocol::manifest::LocatorDialect::JsonPointer,
            LocatorDialect::TextRange => pilotage_protocol::manifest::LocatorDialect::TextRange,
        },
        execution: match info.execution {
            ExecutionMode::Immediate => pilotage_protocol::manifest::ExecutionMode::Immediate,
            ExecutionMode::Deploy => pilotage_protocol::manifest::ExecutionMode::Deploy,
            ExecutionMode::Both => pilotage_protocol::manifest::ExecutionMode::Both,
        },
        trace_ceiling: match info.trace {
            TraceCeiling::Summary => pilotage_protocol::trace::TraceLevel::Summary,
            TraceCeiling::Full => pilotage_protocol::trace::TraceLevel::Full,
        },
        trace_subprogram: match info.trace_subprogram {
            SubprogramTracing::Opaque => pilotage_protocol::manifest::TraceSubprogram::Opaque,
            SubprogramTracing::Expanded => pilotage_protocol::manifest::TraceSubprogram::Expanded,
        },
        // A context schema that is not JSON is kept as a string so the
        // lint reports it.
        context_schema: info
            .context_schema
            .map(|text| serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))),
        features: Features {
            plan: info.features.plan,
            catalog: info.features.catalog,
            execute: info.features.execute,
            test_run: info.features.test_run,
            promotion: info.features.promotion,
        },
        diagnostic_codes: info
            .diagnostic_codes
            .into_iter()
            .map(|c| CodeInfo { code: c.code, meaning: c.meaning })
            .collect(),
        run_statuses: with_policy_statuses(info.run_statuses.into_iter().map(status).collect()),
        step_statuses: info.step_statuses.into_iter().map(status).collect(),
        entry_kinds: info
            .entry_kinds
            .into_iter()
            .map(|k| KindInfo { kind: k.kind, callable: k.callable, meaning: k.meaning })
            .collect(),
        risk_levels: info
            .risk_levels
            .into_iter()
            .map(|r| RiskInfo { risk: r.risk, hints: hints_from_wit(r.hints), meaning: r.meaning })
            .collect(),
        guides: info
            .guides
            .into_iter()
            .map(|g| {
                let level = match g.level {
                    GuideLevel::Core => pilotage_protocol::guide::GuideLevel::Core,
                    GuideLevel::Reference => pilotage_protocol::guide::GuideLevel::Reference,
                    GuideLevel::Examples => pilotage_protocol::guide::GuideLevel::Examples,
                };
                let mut topic_bodies: BTreeMap<String, String> =
                    g.topic_bodies.into_iter().map(|t| (t.topic, t.body)).collect();
                let mut body = g.body;
                if g.topics.iter().any(|topic| topic == "closed-sets") {
                    let added = policy_statuses_section() + &pilotage_protocol::assertions::closed_sets_section();
                    body.push_str(&added);
                    if let Some(topic) = topic_bodies.get_mut("closed-sets") {
                        topic.push_str(&added);
                    }
                }
                GuideContent::new(&name, g.id, g.title, level, g.topics, g.version, g.format, body, topic_bodies)
            })
            .collect(),
    }
}
