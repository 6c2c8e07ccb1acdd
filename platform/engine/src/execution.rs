//! Execution through a Language component, with containment and the
//! trace checks the host enforces (Part II §5.8.4, §6.5.4, §6.5.6, §10.1).
//!
//! Invariant: the component touches the world only through `invoke`; the
//! host performs, records and authorizes every invocation, and a Run whose
//! trace does not match what the host saw is never reported as a success.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use crate::catalog::CatalogSnapshot;
use crate::host::{CallContext, CommitError, Effects, InvokeRefusal, SqlResult, outcome_from_wit};
use crate::runtime::{CallError, CallKind, Component};
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_protocol::correspondence;
use pilotage_protocol::diagnostic::{CONSTRAINT, Diagnostic, is_valid};
use pilotage_protocol::outcome::{ENGINE_FAULT, ERROR, Outcome, RESOURCE_EXHAUSTED, TIMEOUT, VALIDATION_ERROR};
use pilotage_protocol::plan::Plan;
use pilotage_protocol::trace::{Decision, Trace, TraceLevel, TraceStep};

use super::validation::Program;
use pilotage_telemetry::metrics::{BoundKind, CallLabel, GuaranteeKind, Metrics};
use pilotage_telemetry::spans;

/// Performs invocations of callable catalog entries for a Run. Blocking;
/// called on the Run's own thread.
pub trait Invoker: Send + Sync {
    /// Invokes `entry` with `input`.
    ///
    /// # Errors
    /// A message when the entry fails (transport error, HTTP error status,
    /// timeout, output that is not JSON).
    fn invoke(&self, entry: &CatalogEntry, input: &Value) -> Result<Value, String>;
}

/// A data source a Run's statements execute on (Part II §6.5.4: only
/// validated statements ever reach it). One session is one transaction.
pub trait DataSource: Send + Sync {
    /// Opens a session for one Run: a transaction, read-only when
    /// `read_only` (the validated plan only reads). `deadline` is when the
    /// Run's execution wall time runs out (Part II §10.1): no statement of
    /// the session may run past it, whatever the data source's own
    /// statement timeout.
    ///
    /// # Errors
    /// A message when no connection can be had, or none before `deadline`.
    fn begin(&self, read_only: bool, deadline: Option<Instant>) -> Result<Box<dyn SqlSession>, String>;
}

/// One Run's transaction on a data source. Dropped without `commit`, it
/// rolls back.
pub trait SqlSession: Send {
    /// Runs one statement with positional parameters (a JSON array),
    /// stopping it at the session's deadline.
    ///
    /// # Errors
    /// The database's message; the session must then be rolled back.
    fn query(&mut self, statement: &str, params: &Value) -> Result<SqlResult, String>;
    /// Commits the transaction.
    ///
    /// # Errors
    /// [`CommitError`]: rolled back by the database, or an unknown outcome.
    fn commit(self: Box<Self>) -> Result<(), CommitError>;
    /// Rolls the transaction back.
    fn rollback(self: Box<Self>);
}

/// One statement the host ran for a Run, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct StatementRun {
    /// The trace step id the component gave.
    pub step_id: String,
    /// The statement text.
    pub statement: String,
    /// Its parameters (a JSON array).
    pub params: Value,
    /// Rows returned or changed, or the failure.
    pub result: Result<u64, String>,
    /// Duration in milliseconds.
    pub t_ms: u64,
    /// How many invocations the Run had made before it (places it in the
    /// host's trace).
    pub after_invocations: usize,
}

/// One invocation the host performed, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Invocation {
    /// The trace step id the component gave.
    pub step_id: String,
    /// The entry invoked.
    pub entry_id: String,
    /// The input sent.
    pub input: Value,
    /// The output, or the failure message.
    pub result: Result<Value, String>,
    /// Duration in milliseconds.
    pub t_ms: u64,
    /// Whether the host answered it itself without calling the entry (a
    /// test run's non-read-only invocation).
    pub simulated: bool,
}

/// Why the host refused an invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The entry is not in the validated plan or references (containment).
    OutsidePlan(String),
    /// The entry is not visible to the caller at execution time.
    NotVisible(String),
    /// The invocation bound was reached.
    TooManyInvocations(u32),
    /// A statement that was not validated (containment).
    UnvalidatedStatement(String),
}

/// What a Run records as it goes; shared between the effects handed to
/// the component and the pipeline.
#[derive(Debug, Default)]
pub struct RunRecord {
    /// Every invocation performed.
    pub invocations: Vec<Invocation>,
    /// Every statement run.
    pub statements: Vec<StatementRun>,
    /// Every refusal.
    pub violations: Vec<Violation>,
    /// The step whose statement failed once the Run's wall time was used
    /// up (the data source stopped it at the deadline), if any.
    pub stopped_at_deadline: Option<String>,
    /// The step whose invocation returned after the Run's wall time was
    /// used up, if any: the host's own clock check, which does not depend
    /// on the engine's epoch ticker getting CPU time (a starved ticker
    /// would let such a Run end as a success).
    pub invoked_past_deadline: Option<String>,
}

/// The effects of one Run: containment, authorization at execution time,
/// the invocation bound, and the record.
pub struct RunEffects {
    allowed: BTreeSet<String>,
    statements: Vec<String>,
    data_source: Option<Arc<dyn DataSource>>,
    read_only: bool,
    session: Option<Box<dyn SqlSession>>,
    session_failed: bool,
    /// When the Run's execution wall time runs out.
    deadline: Option<Instant>,
    catalog: CatalogSnapshot,
    invoker: Arc<dyn Invoker>,
    record: Arc<Mutex<RunRecord>>,
    max_invocations: u32,
    max_bytes: u64,
    metrics: Metrics,
    /// A test run: only read-only entries are called (Part II §6.5.7).
    test_run: bool,
    /// The clock the Run sees, when not the host's real one.
    clock_ms: Option<u64>,
}

/// What a test run's host answers for an invocation it does not perform.
pub fn simulated_output() -> Value {
    serde_json::json!({"simulated": true})
}

impl RunEffects {
    fn refuse<T>(&self, violation: Violation, message: String) -> Result<T, InvokeRefusal> {
        if let Ok(mut record) = self.record.lock() {
            record.violations.push(violation);
        }
        Err(InvokeRefusal::Refused(message))
    }
}

impl Effects for RunEffects {
    fn now_ms(&self) -> Option<u64> {
        self.clock_ms
    }

    fn invoke(&mut self, step_id: &str, entry_id: &str, input: &str) -> Result<String, InvokeRefusal> {
        if !self.allowed.contains(entry_id) {
            return self.refuse(
                Violation::OutsidePlan(entry_id.to_owned()),
                format!("'{entry_id}' is not part of the validated program"),
            );
        }
        let Some(entry) = self.catalog.get(entry_id).cloned() else {
            return self.refuse(Violation::NotVisible(entry_id.to_owned()), format!("'{entry_id}' does not exist"));
        };
        let count = self.record.lock().map(|r| r.invocations.len()).unwrap_or(0) as u32;
        if count >= self.max_invocations {
            return self.refuse(
                Violation::TooManyInvocations(self.max_invocations),
                format!("the Run reached its bound of {} invocations", self.max_invocations),
            );
        }
        // A test run never reaches an entry that is not read-only, whatever
        // the component does: the host answers in its place.
        if self.test_run && !entry.risk_hints.read_only {
            let parsed_input = serde_json::from_str(input).unwrap_or(Value::Null);
            if let Ok(mut record) = self.record.lock() {
                record.invocations.push(Invocation {
                    step_id: step_id.to_owned(),
                    entry_id: entry_id.to_owned(),
                    input: parsed_input,
                    result: Ok(simulated_output()),
                    t_ms: 0,
                    simulated: true,
                });
            }
            return Ok(simulated_output().to_string());
        }
        let span = spans::invocation_span(step_id, entry_id, &entry.kind);
        let _entered = span.enter();
        let started = Instant::now();
        let result = if input.len() as u64 > self.max_bytes {
            Err(format!("the input is {} bytes; the bound is {} bytes", input.len(), self.max_bytes))
        } else {
            match serde_json::from_str::<Value>(input) {
                Ok(input) => self.invoker.invoke(&entry, &input),
                Err(error) => Err(format!("the component sent input that is not JSON: {error}")),
            }
        };
        let result = result.and_then(|output| {
            let size = output.to_string().len() as u64;
            if size > self.max_bytes {
                Err(format!("the output is {size} bytes; the bound is {} bytes", self.max_bytes))
            } else {
                Ok(output)
            }
        });
        let elapsed = started.elapsed();
        self.metrics.invocation(&entry.kind, result.is_ok(), elapsed);
        if result.is_err() {
            spans::record_failure(&span, "invocation_failed");
        }
        let t_ms = elapsed.as_millis() as u64;
        let parsed_input = serde_json::from_str(input).unwrap_or(Value::Null);
        let past_deadline = self.deadline.is_some_and(|deadline| Instant::now() >= deadline);
        if let Ok(mut record) = self.record.lock() {
            if past_deadline && record.invoked_past_deadline.is_none() {
                record.invoked_past_deadline = Some(step_id.to_owned());
            }
            record.invocations.push(Invocation {
                step_id: step_id.to_owned(),
                entry_id: entry_id.to_owned(),
                input: parsed_input,
                result: result.clone(),
                t_ms,
                simulated: false,
            });
        }
        result.map(|output| output.to_string()).map_err(InvokeRefusal::Failed)
    }

    fn sql_query(&mut self, step_id: &str, statement: &str, params: &str) -> Result<SqlResult, InvokeRefusal> {
        if !self.statements.iter().any(|validated| validated == statement) {
            let shown: String = statement.chars().take(80).collect();
            return self.refuse(
                Violation::UnvalidatedStatement(shown.clone()),
                format!("the statement '{shown}' is not one the program was validated with"),
            );
        }
        let Some(data_source) = self.data_source.clone() else {
            return Err(InvokeRefusal::Refused("no data source is configured for this Language".into()));
        };
        if self.session_failed {
            return Err(InvokeRefusal::Refused("the Run's transaction already failed and was rolled back".into()));
        }
        let params: Value = serde_json::from_str(params)
            .map_err(|e| InvokeRefusal::Refused(format!("parameters are not JSON: {e}")))?;
        let span = spans::statement_span(step_id, statement);
        let _entered = span.enter();
        let started = Instant::now();
        let result = match self.session.as_mut() {
            Some(session) => session.query(statement, &params),
            None => data_source.begin(self.read_only, self.deadline).and_then(|mut session| {
                let result = session.query(statement, &params);
                self.session = Some(session);
                result
            }),
        };
        // A statement that fails once the Run's wall time is used up was
        // stopped by the Run's bound (its statement timeout was the time
        // the Run had left): the Run ends `timeout`, whatever the
        // component makes of the failure (Part II §10.1).
        let out_of_time = result.is_err() && self.deadline.is_some_and(|deadline| Instant::now() >= deadline);
        if let Ok(mut record) = self.record.lock() {
            let after_invocations = record.invocations.len();
            record.statements.push(StatementRun {
                step_id: step_id.to_owned(),
                statement: statement.to_owned(),
                params,
                result: result.as_ref().map(|r| r.rows_matched).map_err(Clone::clone),
                t_ms: started.elapsed().as_millis() as u64,
                after_invocations,
            });
            if out_of_time {
                record.stopped_at_deadline.get_or_insert_with(|| step_id.to_owned());
            }
        }
        if result.is_err() {
            spans::record_failure(&span, if out_of_time { "timeout" } else { "statement_failed" });
            self.session_failed = true;
            if let Some(session) = self.session.take() {
                session.rollback();
            }
        }
        result.map_err(InvokeRefusal::Failed)
    }

    fn finish(&mut self, succeeded: bool) -> Result<(), CommitError> {
        self.end_session(succeeded)
    }
}

impl RunEffects {
    /// Ends the Run's transaction: commits when the Run succeeded, else
    /// rolls back.
    fn end_session(&mut self, succeeded: bool) -> Result<(), CommitError> {
        match self.session.take() {
            Some(session) if succeeded => session.commit(),
            Some(session) => {
                session.rollback();
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// What an execution needs.
pub struct ExecutionRequest<'a> {
    /// The validated program.
    pub program: &'a Program,
    /// The Run's input.
    pub input: Option<&'a Value>,
    /// The validation context.
    pub context: Option<&'a Value>,
    /// The validated plan (for containment and correspondence).
    pub plan: Option<&'a Plan>,
    /// The validated references (containment when there is no plan).
    pub references: &'a [String],
    /// The caller's visible catalog at execution time.
    pub catalog: CatalogSnapshot,
    /// Who performs invocations.
    pub invoker: Arc<dyn Invoker>,
    /// The validated statements (data-source Languages).
    pub statements: &'a [String],
    /// Where statements run, for data-source Languages.
    pub data_source: Option<Arc<dyn DataSource>>,
    /// `test_run` requested.
    pub test_run: bool,
    /// Deploy mode requested: the component's `deploy` export installs the
    /// program (Part II §6.5.7).
    pub deploy: bool,
    /// The Run's id.
    pub run_id: &'a str,
    /// What `effects.now` answers, when not the host's clock: a test run's
    /// simulated instant, or the platform's clock for a firing (ms since
    /// the Unix epoch).
    pub clock_ms: Option<u64>,
}

/// The result of a started Run.
#[derive(Clone, Debug, PartialEq)]
pub struct Execution {
    /// The Run's outcome.
    pub outcome: Outcome,
    /// Its output, only when `outcome.ok`.
    pub output: Option<Value>,
    /// The full trace (the host derives lower levels).
    pub trace: Trace,
    /// Every invocation the host performed.
    pub invocations: Vec<Invocation>,
    /// Contract breaches found (empty for an honest engine).
    pub faults: Vec<String>,
    /// Fuel used.
    pub fuel: u64,
    /// What a successful deploy-mode Run installs, as the component
    /// declared it (the platform checks the triggers before storing it).
    pub installation: Option<crate::installation::Installation>,
    /// The diagnostics of an execution-time refusal: the component
    /// answered `validation_error` before invoking anything (guest SDK
    /// `diag::refusal`), so the Run is refused, not started (Part II
    /// §6.5.2, Part IV §9). `outcome` is then `validation_error`.
    pub refusal: Option<Vec<Diagnostic>>,
}

/// Executes a validated program. Never fails: every failure of a started
/// Run is an outcome with `ok: false` and the trace the host can stand
/// behind (Part II §6.5.6, Part IV §10).
pub fn execute(component: &Component, request: ExecutionRequest<'_>) -> Execution {
    let bounds = component.engine().bounds();
    let mut allowed: BTreeSet<String> = request.references.iter().cloned().collect();
    if let Some(plan) = request.plan {
        allowed.extend(plan.calls().into_iter().map(str::to_owned));
    }
    let record = Arc::new(Mutex::new(RunRecord::default()));
    // The engine's epoch deadline starts a little later (with the store),
    // so statements stop no later than the component would.
    let deadline = Instant::now() + bounds.execution.wall_time();
    let effects = RunEffects {
        allowed,
        statements: request.statements.to_vec(),
        data_source: request.data_source.clone(),
        read_only: request.test_run || request.plan.is_some_and(|plan| plan.max_risk_hints.read_only),
        session: None,
        session_failed: false,
        deadline: Some(deadline),
        catalog: request.catalog.clone(),
        invoker: request.invoker.clone(),
        record: record.clone(),
        max_invocations: bounds.invocations_per_run,
        max_bytes: bounds.invocation_bytes,
        metrics: component.engine().metrics().clone(),
        test_run: request.test_run,
        clock_ms: request.clock_ms,
    };
    let run_request = crate::wit::RunRequest {
        program: request.program.text().to_owned(),
        input: request.input.map(Value::to_string),
        context: request.context.map(Value::to_string),
        test_run: request.test_run,
        deploy: request.deploy,
    };
    let mut installation = None;
    let (result, mut context, cost) = component.call_with_state(
        CallKind::Execution,
        CallContext::execution(request.catalog.clone(), Box::new(effects)),
        |language, store| {
            if request.deploy {
                let deployed = language.call_deploy(store, &run_request)?;
                installation = deployed.installation.map(crate::installation::Installation::from_wit);
                Ok(deployed.result)
            } else {
                language.call_execute(store, &run_request)
            }
        },
    );
    let record = std::mem::take(&mut *record.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
    let simulated: Vec<(String, String)> = record
        .invocations
        .iter()
        .filter(|invocation| invocation.simulated)
        .map(|invocation| (invocation.step_id.clone(), invocation.entry_id.clone()))
        .collect();
    let mut execution = assess(component, &request, result, record, cost.fuel);
    for step in &mut execution.trace.steps {
        if let Some(calls) = &step.calls
            && simulated.iter().any(|(id, entry)| *id == step.id && entry == calls)
        {
            step.simulated = Some(true);
        }
    }
    if execution.outcome.ok && request.deploy {
        execution.installation = installation;
    }
    // A test run's transaction never commits (and was read-only).
    let succeeded = execution.outcome.ok && !request.test_run;
    // Effects end only once the host has judged the Run: a data-source
    // transaction commits only for a success it stands behind. A commit
    // that fails ends the Run with the trace so far (every statement ran)
    // and the status that says whether anything persisted.
    if let Some(effects) = context.call_effects()
        && let Err(error) = effects.finish(succeeded)
    {
        let (status, message) = match &error {
            CommitError::RolledBack(message) => (
                rolled_back_status(component),
                format!(
                    "the Run's transaction could not be committed and was rolled back, so nothing persists: {message}"
                ),
            ),
            CommitError::Unknown(message) => (
                ERROR,
                format!("the Run's transaction may or may not have been committed (its outcome is unknown): {message}"),
            ),
        };
        execution.outcome = Outcome::failure(status, message);
        execution.output = None;
    }
    execution
}

/// The run status a data-source Language declares for a Run whose one
/// transaction was rolled back (sql/postgres-15: `rolled_back`, `ok:
/// false`, no side effects).
pub const ROLLED_BACK: &str = "rolled_back";

/// The status of a Run whose commit the database refused: the Language's
/// [`ROLLED_BACK`] when it declares it as a failure without side effects
/// (Part II §5.7: a more specific engine-defined status), else the
/// reserved `error`.
fn rolled_back_status(component: &Component) -> &'static str {
    match component.description().run_status(ROLLED_BACK) {
        Some(status) if !status.ok && !status.side_effects => ROLLED_BACK,
        _ => ERROR,
    }
}

/// Judges what the component returned against what the host saw.
fn assess(
    component: &Component,
    request: &ExecutionRequest<'_>,
    result: Result<crate::wit::RunResult, CallError>,
    record: RunRecord,
    fuel: u64,
) -> Execution {
    let description = component.description();
    let bounds = component.engine().bounds();
    let host_trace = |_: &Outcome| host_trace(request.run_id, &record.invocations, &record.statements);

    let result = match result {
        Ok(result) => result,
        Err(error) => {
            let status = match &error {
                CallError::Timeout(_) => TIMEOUT,
                CallError::Fuel | CallError::Memory(_) | CallError::Stack | CallError::ResultTooLarge { .. } => {
                    RESOURCE_EXHAUSTED
                }
                CallError::Trap(_) => ENGINE_FAULT,
                CallError::Host(_) => ERROR,
            };
            let outcome = match (&error, &record.stopped_at_deadline) {
                (CallError::Timeout(ms), Some(step)) => deadline_outcome(*ms, step),
                _ => Outcome::failure(status, format!("the Run was stopped: {error}")),
            };
            return Execution {
                trace: host_trace(&outcome),
                outcome,
                output: None,
                invocations: record.invocations,
                faults: vec![error.to_string()],
                fuel,
                installation: None,
                refusal: None,
            };
        }
    };

    let metrics = component.engine().metrics();
    let mut faults = Vec::new();
    let size = run_result_size(&result);
    if size > bounds.result_bytes {
        metrics.bound_trip(CallLabel::Execution, BoundKind::ResultBytes);
        let outcome = Outcome::failure(
            RESOURCE_EXHAUSTED,
            format!("the Run's result is {size} bytes, above the bound of {} bytes", bounds.result_bytes),
        );
        return Execution {
            trace: host_trace(&outcome),
            outcome,
            output: None,
            invocations: record.invocations,
            faults: vec!["result too large".into()],
            fuel,
            installation: None,
            refusal: None,
        };
    }
    // Each kind of breach counts once per Run (`host_guarantee_violations`).
    let mut breached = Vec::new();
    let mut steps = Vec::with_capacity(result.steps.len());
    for step in result.steps {
        match trace_step_from_wit(step) {
            Ok(step) => steps.push(step),
            Err(problem) => {
                breached.push(GuaranteeKind::MalformedResult);
                faults.push(problem)
            }
        }
    }
    let mut outcome = outcome_from_wit(result.outcome);
    if !outcome.is_consistent() {
        breached.push(GuaranteeKind::MalformedResult);
        faults.push(format!("outcome '{}' pairs ok={} with error={:?}", outcome.status, outcome.ok, outcome.error));
    }
    if description.run_status(&outcome.status).is_none() {
        breached.push(GuaranteeKind::MalformedResult);
        faults.push(format!("run status '{}' is not in the Language's closed set", outcome.status));
    }
    // An execution-time refusal: nothing ran, the diagnostics ride
    // `output` (guest SDK `diag::refusal`).
    if outcome.status == VALIDATION_ERROR && !request.deploy && faults.is_empty() {
        match refusal(component, result.output.as_deref(), &steps, &record) {
            Ok(diagnostics) => {
                return Execution {
                    trace: Trace { run_id: request.run_id.to_owned(), level: TraceLevel::Full, steps, stats: None },
                    outcome,
                    output: None,
                    invocations: record.invocations,
                    faults,
                    fuel,
                    installation: None,
                    refusal: Some(diagnostics),
                };
            }
            Err(problem) => {
                breached.push(GuaranteeKind::MalformedResult);
                faults.push(problem);
            }
        }
    }
    let output = match result.output.map(|text| serde_json::from_str::<Value>(&text)) {
        Some(Ok(value)) => Some(value),
        Some(Err(error)) => {
            breached.push(GuaranteeKind::MalformedResult);
            faults.push(format!("the output is not JSON: {error}"));
            None
        }
        None => None,
    };
    for violation in &record.violations {
        if !matches!(violation, Violation::TooManyInvocations(_)) {
            breached.push(GuaranteeKind::Containment);
        }
        match violation {
            Violation::OutsidePlan(entry) => {
                faults.push(format!("it tried to invoke '{entry}', which is outside its validated program"))
            }
            Violation::NotVisible(entry) => {
                faults.push(format!("it tried to invoke '{entry}', which the caller cannot see"))
            }
            Violation::UnvalidatedStatement(statement) => {
                faults.push(format!("it tried to run '{statement}', which is not a validated statement"))
            }
            Violation::TooManyInvocations(_) => {}
        }
    }
    let mismatches = calls_mismatch(&steps, &record.invocations, &record.statements);
    if !mismatches.is_empty() {
        breached.push(GuaranteeKind::TraceMismatch);
    }
    faults.extend(mismatches);
    if let Some(plan) = request.plan
        && !request.deploy
    {
        let succeeded = outcome.ok;
        let broken = correspondence::check(plan, &steps, succeeded);
        if !broken.is_empty() {
            breached.push(GuaranteeKind::PlanCorrespondence);
        }
        faults.extend(broken.into_iter().map(|m| format!("plan–trace correspondence: {m}")));
    }
    // Control-flow entries never carry input or output (Part II §5.8).
    for step in &mut steps {
        if step.is_control_flow() {
            step.input = None;
            step.output = None;
        }
    }

    let exhausted = record.violations.iter().any(|v| matches!(v, Violation::TooManyInvocations(_)));
    let stats = result.stats.and_then(|text| serde_json::from_str(&text).ok());
    breached.sort_by_key(|kind| *kind as u8);
    breached.dedup();
    for kind in breached {
        metrics.guarantee_violation(kind);
    }
    if !faults.is_empty() {
        tracing::warn!(language = %description.name, run_id = request.run_id, faults = ?faults, "engine fault: the Run is failed");
        let outcome = Outcome::failure(
            ENGINE_FAULT,
            format!("the Language engine broke the platform's contract: {}", faults.join("; ")),
        );
        return Execution {
            trace: host_trace(&outcome),
            outcome,
            output: None,
            invocations: record.invocations,
            faults,
            fuel,
            installation: None,
            refusal: None,
        };
    }
    if exhausted {
        metrics.bound_trip(CallLabel::Execution, BoundKind::Invocations);
        outcome = Outcome::failure(
            RESOURCE_EXHAUSTED,
            format!("the Run reached its bound of {} invocations", bounds.invocations_per_run),
        );
    }
    // The component may have finished after its statement was stopped at
    // the Run's deadline (else the engine stopped it: `timeout` above);
    // either way the Run reached its wall-time bound.
    if let Some(step) = &record.stopped_at_deadline {
        metrics.bound_trip(CallLabel::Execution, BoundKind::Deadline);
        outcome = deadline_outcome(bounds.execution.wall_time_ms, step);
    } else if let Some(step) = &record.invoked_past_deadline
        && ![TIMEOUT, ENGINE_FAULT, RESOURCE_EXHAUSTED].contains(&outcome.status.as_str())
    {
        // The component went on after an invocation that ended past the
        // Run's deadline (the engine did not stop it in time): the Run
        // still reached its wall-time bound (Part II §10.1).
        metrics.bound_trip(CallLabel::Execution, BoundKind::Deadline);
        outcome = Outcome::failure(
            TIMEOUT,
            format!(
                "the Run reached its wall-time bound of {} ms: the invocation of step {step} ended after it",
                bounds.execution.wall_time_ms
            ),
        );
    }
    let output = if outcome.ok { output } else { None };
    Execution {
        trace: Trace { run_id: request.run_id.to_owned(), level: TraceLevel::Full, steps, stats },
        outcome,
        output,
        invocations: record.invocations,
        faults,
        fuel,
        installation: None,
        refusal: None,
    }
}

/// The diagnostics of an execution-time refusal, or why it is not one the
/// host can stand behind: it must have invoked nothing, run no statement,
/// reported no trace step, and carry at least one error-severity
/// diagnostic as its `output` (a JSON array). Codes the Language does not
/// declare are rewritten to `constraint`, as in validation.
fn refusal(
    component: &Component,
    output: Option<&str>,
    steps: &[TraceStep],
    record: &RunRecord,
) -> Result<Vec<Diagnostic>, String> {
    if !steps.is_empty() || !record.invocations.is_empty() || !record.statements.is_empty() {
        return Err("it answered validation_error (a refusal) after running steps".into());
    }
    let mut diagnostics: Vec<Diagnostic> = output
        .and_then(|text| serde_json::from_str(text).ok())
        .ok_or("it answered validation_error without its diagnostics as output")?;
    if !is_valid(&diagnostics) {
        for diagnostic in &mut diagnostics {
            if !component.description().declares_code(&diagnostic.code) {
                tracing::warn!(language = %component.description().name, code = %diagnostic.code, "undeclared diagnostic code of a refusal rewritten to 'constraint'");
                diagnostic.code = CONSTRAINT.to_owned();
            }
        }
        Ok(diagnostics)
    } else {
        Err("it answered validation_error without an error diagnostic".into())
    }
}

/// The outcome of a Run whose statement `step` the data source stopped at
/// the Run's deadline.
fn deadline_outcome(wall_time_ms: u64, step: &str) -> Outcome {
    Outcome::failure(
        TIMEOUT,
        format!(
            "the Run reached its wall-time bound of {wall_time_ms} ms: {step} was stopped and the Run's transaction rolled back"
        ),
    )
}

fn run_result_size(result: &crate::wit::RunResult) -> u64 {
    let steps: usize = result
        .steps
        .iter()
        .map(|s| {
            s.id.len()
                + s.input.as_ref().map_or(0, String::len)
                + s.output.as_ref().map_or(0, String::len)
                + s.decisions.iter().map(|d| d.at.len() + d.took.len() + d.because.len()).sum::<usize>()
                + 64
        })
        .sum();
    (steps + result.output.as_ref().map_or(0, String::len)) as u64
}

fn trace_step_from_wit(
    step: crate::wit::pilotage::language::run_types::TraceStep,
) -> Result<TraceStep, String> {
    let parse = |what: &str, text: Option<String>| -> Result<Option<Value>, String> {
        text.map(|text| {
            serde_json::from_str(&text).map_err(|e| format!("trace step '{}' {what} is not JSON: {e}", step.id))
        })
        .transpose()
    };
    Ok(TraceStep {
        input: parse("input", step.input.clone())?,
        output: parse("output", step.output.clone())?,
        outcome: outcome_from_wit(step.outcome),
        t_ms: step.t_ms,
        decisions: step
            .decisions
            .into_iter()
            .map(|d| Decision { at: d.at, took: d.took, because: d.because })
            .collect(),
        calls: step.calls,
        id: step.id,
        simulated: None,
    })
}

/// Differences between the calls a trace claims and the invocations the
/// host performed: a hidden call, an invented call, or a call attributed to
/// another step (matched as multisets of (step id, entry)).
///
/// A data-source Language names the relations a statement reads or
/// changes in reference sub-steps (`stmt-2.ref-1`, Part IV §7): such a
/// step, whose id is `<statement step>.<suffix>`, is backed by the
/// statement the host ran for `<statement step>` (its `calls` must still
/// match the plan: the correspondence check sees to that).
pub fn calls_mismatch(steps: &[TraceStep], invocations: &[Invocation], statements: &[StatementRun]) -> Vec<String> {
    let mut performed: Vec<(&str, &str)> =
        invocations.iter().map(|i| (i.step_id.as_str(), i.entry_id.as_str())).collect();
    let mut problems = Vec::new();
    for step in steps {
        let Some(calls) = step.calls.as_deref() else { continue };
        // A step that names a call but was never invoked is allowed only
        // when it failed before invoking (its outcome says so).
        match performed.iter().position(|(id, entry)| *id == step.id && *entry == calls) {
            Some(index) => {
                performed.remove(index);
            }
            None if !step.outcome.ok && step.output.as_ref().is_none_or(Value::is_null) => {}
            None if step
                .id
                .split_once('.')
                .is_some_and(|(statement, _)| statements.iter().any(|run| run.step_id == statement)) => {}
            None => problems
                .push(format!("its trace claims step '{}' called '{calls}', which the host never invoked", step.id)),
        }
    }
    for (id, entry) in performed {
        problems.push(format!("it invoked '{entry}' for step '{id}' and its trace does not show it"));
    }
    problems
}

/// The trace the host can vouch for when the component's own trace is
/// missing or untrustworthy: one entry per invocation it performed and per
/// statement it ran, in the order it did them. A statement's entry has the
/// component's step id, `input` `{"statement", "params"}` and `output`
/// `{"rows_matched"}` (`null` when it failed).
pub fn host_trace(run_id: &str, invocations: &[Invocation], statements: &[StatementRun]) -> Trace {
    let invocation_step = |invocation: &Invocation| TraceStep {
        id: invocation.step_id.clone(),
        calls: Some(invocation.entry_id.clone()),
        input: Some(invocation.input.clone()),
        output: Some(invocation.result.clone().unwrap_or(Value::Null)),
        outcome: match &invocation.result {
            Ok(_) => Outcome::success(),
            Err(message) => Outcome::failure(ERROR, message.clone()),
        },
        t_ms: Some(invocation.t_ms),
        decisions: Vec::new(),
        simulated: invocation.simulated.then_some(true),
    };
    let statement_step = |run: &StatementRun| TraceStep {
        id: run.step_id.clone(),
        calls: None,
        input: Some(serde_json::json!({"statement": run.statement, "params": run.params})),
        output: Some(match &run.result {
            Ok(rows_matched) => serde_json::json!({"rows_matched": rows_matched}),
            Err(_) => Value::Null,
        }),
        outcome: match &run.result {
            Ok(_) => Outcome::success(),
            Err(message) => Outcome::failure(ERROR, message.clone()),
        },
        t_ms: Some(run.t_ms),
        decisions: Vec::new(),
        simulated: None,
    };
    let mut steps = Vec::with_capacity(invocations.len() + statements.len());
    let mut pending = statements.iter().peekable();
    for (index, invocation) in invocations.iter().enumerate() {
        while let Some(run) = pending.next_if(|run| run.after_invocations <= index) {
            steps.push(statement_step(run));
        }
        steps.push(invocation_step(invocation));
    }
    steps.extend(pending.map(statement_step));
    Trace {
        run_id: run_id.to_owned(),
        level: TraceLevel::Full,
        steps,
        stats: Some(serde_json::json!({"recorded_by": "host"})),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn invocation(step: &str, entry: &str) -> Invocation {
        Invocation {
            step_id: step.into(),
            entry_id: entry.into(),
            input: Value::Null,
            result: Ok(Value::Null),
            t_ms: 0,
            simulated: false,
        }
    }

    fn step(id: &str, calls: Option<&str>) -> TraceStep {
        TraceStep {
            id: id.into(),
            calls: calls.map(Into::into),
            input: None,
            output: Some(Value::Null),
            outcome: Outcome::success(),
            t_ms: None,
            decisions: vec![],
            simulated: None,
        }
    }

    #[test]
    fn matching_calls_pass() {
        assert!(
            calls_mismatch(
                &[step("a", Some("x")), step("b#1", Some("y"))],
                &[invocation("a", "x"), invocation("b#1", "y")],
                &[]
            )
            .is_empty()
        );
    }

    #[test]
    fn hidden_and_invented_calls_are_found() {
        let hidden = calls_mismatch(&[], &[invocation("a", "x")], &[]);
        assert_eq!(hidden.len(), 1);
        assert!(hidden[0].contains("does not show"));
        let invented = calls_mismatch(&[step("a", Some("x"))], &[], &[]);
        assert!(invented[0].contains("never invoked"));
        let moved = calls_mismatch(&[step("b", Some("x"))], &[invocation("a", "x")], &[]);
        assert_eq!(moved.len(), 2);
    }

    #[test]
    fn a_step_that_failed_before_invoking_may_name_its_call() {
        let mut failed = step("a", Some("x"));
        failed.outcome = Outcome::failure("error", "input resolved to nothing");
        failed.output = None;
        assert!(calls_mismatch(&[failed], &[], &[]).is_empty());
    }

    #[test]
    fn the_host_trace_shows_statements_and_invocations_in_the_order_they_ran() {
        let ran = |step: &str, after_invocations: usize, result: Result<u64, String>| StatementRun {
            step_id: step.into(),
            statement: format!("SELECT '{step}'"),
            params: json!([1]),
            result,
            t_ms: 3,
            after_invocations,
        };
        let statements = [ran("stmt-1", 0, Ok(2)), ran("stmt-3", 1, Err("canceled".into()))];
        let trace = host_trace("run_x", &[invocation("call-2", "x")], &statements);
        let ids: Vec<&str> = trace.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["stmt-1", "call-2", "stmt-3"]);
        assert_eq!(trace.steps[0].input, Some(json!({"statement": "SELECT 'stmt-1'", "params": [1]})));
        assert_eq!(trace.steps[0].output, Some(json!({"rows_matched": 2})));
        assert_eq!(trace.steps[2].output, Some(Value::Null));
        assert_eq!(trace.steps[2].outcome, Outcome::failure(ERROR, "canceled"));
    }

    #[test]
    fn reference_sub_steps_are_backed_by_their_statement() {
        let ran = StatementRun {
            step_id: "stmt-1".into(),
            statement: "SELECT 1".into(),
            params: json!([]),
            result: Ok(1),
            t_ms: 0,
            after_invocations: 0,
        };
        let reference = step("stmt-1.ref-1", Some("s.customers"));
        assert!(calls_mismatch(std::slice::from_ref(&reference), &[], std::slice::from_ref(&ran)).is_empty());
        // Without the statement having run, the claim is invented.
        assert_eq!(calls_mismatch(&[reference], &[], &[]).len(), 1);
        let unrelated = step("stmt-2.ref-1", Some("s.customers"));
        assert_eq!(calls_mismatch(&[unrelated], &[], &[ran]).len(), 1);
    }
}
