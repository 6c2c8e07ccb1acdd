//! Execution through a Language component, with the checks the host
//! enforces on what it returns (Part II §5.8.4, §6.5.4, §6.5.6, §10.1).
//!
//! Invariant: the component touches the world only through `invoke`; the
//! host performs, records and authorizes every invocation, and a Run whose
//! trace does not match what the host saw is never reported as a success.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use crate::catalog::CatalogSnapshot;
use crate::error::CallError;
use crate::host::{CallContext, CommitError, outcome_from_wit};
use crate::runtime::{CallCost, CallKind, Component};
use pilotage_protocol::correspondence;
use pilotage_protocol::diagnostic::{CONSTRAINT, Diagnostic, is_valid};
use pilotage_protocol::outcome::{
    ENGINE_FAULT, ERROR, Outcome, PARTIAL, RESOURCE_EXHAUSTED, TIMEOUT, VALIDATION_ERROR,
};
use pilotage_protocol::plan::Plan;
use pilotage_protocol::trace::{Decision, Trace, TraceLevel, TraceStep};

use super::validation::Program;
use pilotage_telemetry::metrics::{BoundKind, CallLabel, GuaranteeKind, Metrics};

use crate::effects::{Cancellation, DataSource, Invocation, Invoker, RunEffects, RunRecord, Violation};
use crate::host_trace::{calls_mismatch, host_trace};

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

/// How a Run may be steered from outside while it runs: a longer wall
/// time than the engine's execution bound (a task Run, set per tenant), a
/// lower invocation bound (a tenant's policy) and a [`Cancellation`]. The
/// default is an ordinary Run.
#[derive(Clone, Debug, Default)]
pub struct RunControl {
    /// The Run's wall-time bound in milliseconds, instead of the engine's
    /// `bounds.execution.wall_time_ms`. Still enforced the same way
    /// (statement timeouts, the host's clock check, epoch interruption).
    pub wall_time_ms: Option<u64>,
    /// At most this many invocations, when below the engine's
    /// `bounds.execution`'s `invocations_per_run` (never above it). The
    /// invocation past it is refused and the Run ends `resource_exhausted`.
    pub max_invocations: Option<u32>,
    /// Stops the Run at its next invocation boundary when cancelled.
    pub cancellation: Option<Cancellation>,
}

/// Executes a validated program. Never fails: every failure of a started
/// Run is an outcome with `ok: false` and the trace the host can stand
/// behind (Part II §6.5.6, Part IV §10).
pub async fn execute(component: &Component, request: ExecutionRequest<'_>) -> Execution {
    execute_controlled(component, request, &RunControl::default()).await
}

/// [`execute`] under `control`: its wall time, and its cancellation
/// (a cancelled Run ends `partial`, its trace holding what ran).
pub async fn execute_controlled(
    component: &Component,
    request: ExecutionRequest<'_>,
    control: &RunControl,
) -> Execution {
    let mut bounds = component.engine().bounds().clone();
    if let Some(wall_time_ms) = control.wall_time_ms {
        bounds.execution.wall_time_ms = wall_time_ms;
    }
    if let Some(max) = control.max_invocations {
        bounds.invocations_per_run = bounds.invocations_per_run.min(max);
    }
    let bounds = &bounds;
    let mut allowed: BTreeSet<String> = request.references.iter().cloned().collect();
    if let Some(plan) = request.plan {
        allowed.extend(plan.calls().into_iter().map(str::to_owned));
    }
    let record = Arc::new(Mutex::new(RunRecord::default()));
    // The engine interrupts the guest one epoch tick after this deadline
    // (`runtime`), so statements stop before the component would.
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
        cancellation: control.cancellation.clone(),
    };
    let run_request = crate::wit::RunRequest {
        program: request.program.text().to_owned(),
        input: request.input.map(Value::to_string),
        context: request.context.map(Value::to_string),
        test_run: request.test_run,
        deploy: request.deploy,
    };
    let mut installation = None;
    let context = CallContext::execution(request.catalog.clone(), Box::new(effects));
    let (result, mut context, cost) = match component.start_under(CallKind::Execution, &bounds.execution, context).await
    {
        Ok(mut call) => {
            let result = if request.deploy {
                call.deploy(&run_request).await.map(|deployed| {
                    installation = deployed.installation.map(crate::installation::Installation::from_wit);
                    deployed.result
                })
            } else {
                call.execute(&run_request).await
            };
            let (context, cost) = call.finish();
            (result, Some(context), cost)
        }
        // Nothing of the component ran, so no statement either: the
        // effects (and their unopened session) are dropped with the store.
        Err(error) => (Err(error), None, CallCost::default()),
    };
    let record = std::mem::take(&mut *record.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
    let simulated: Vec<(String, String)> = record
        .invocations
        .iter()
        .filter(|invocation| invocation.simulated)
        .map(|invocation| (invocation.step_id.clone(), invocation.entry_id.clone()))
        .collect();
    let mut execution = assess(component, &request, bounds, result, record, cost.fuel);
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
    let finished = match context.as_mut().and_then(CallContext::call_effects) {
        Some(effects) => effects.finish(succeeded).await,
        None => Ok(()),
    };
    if let Err(error) = finished {
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

/// The `error` of a Run cancelled before step `step` (`tasks/cancel`),
/// after `invoked` invocations.
fn cancelled_message(step: &str, invoked: usize) -> String {
    format!(
        "cancelled: the Run was asked to stop and stopped before step {step}, after {invoked} invocation(s); \
         those are in the trace, and any data-source transaction was rolled back"
    )
}

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
    bounds: &crate::Bounds,
    result: Result<crate::wit::RunResult, CallError>,
    record: RunRecord,
    fuel: u64,
) -> Execution {
    let description = component.description();
    let result = match result {
        Ok(result) => result,
        Err(error) => return stopped(request, record, error, fuel),
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
        return failed(request, record, outcome, vec!["result too large".into()], fuel);
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
    let outcome = outcome_from_wit(result.outcome);
    if !outcome.is_consistent() {
        breached.push(GuaranteeKind::MalformedResult);
        faults.push(format!("outcome '{}' pairs ok={} with error={:?}", outcome.status, outcome.ok, outcome.error));
    }
    if description.run_status(&outcome.status).is_none() {
        breached.push(GuaranteeKind::MalformedResult);
        faults.push(format!("run status '{}' is not in the Language's closed set", outcome.status));
    }
    // An execution-time refusal: nothing ran (nor was installed), the
    // diagnostics ride `output` (guest SDK `diag::refusal`). A deploy may
    // refuse too: a program that cannot be installed as asked (Part II
    // §5.7).
    if outcome.status == VALIDATION_ERROR && faults.is_empty() {
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
    containment_faults(&record.violations, &mut breached, &mut faults);
    trace_faults(request, &steps, &record, outcome.ok, &mut breached, &mut faults);
    // Control-flow entries never carry input or output (Part II §5.8).
    for step in &mut steps {
        if step.is_control_flow() {
            step.input = None;
            step.output = None;
        }
    }

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
        return failed(request, record, outcome, faults, fuel);
    }
    let outcome = bounded_outcome(outcome, &record, bounds, metrics);
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

/// The Execution of a Run the engine stopped before the component
/// answered (a bound, a trap, a host fault, no instance free): the status
/// the cause maps to, and the host's trace of what ran.
fn stopped(request: &ExecutionRequest<'_>, record: RunRecord, error: CallError, fuel: u64) -> Execution {
    let status = match &error {
        CallError::Timeout(_) => TIMEOUT,
        CallError::Fuel | CallError::Memory(_) | CallError::Stack | CallError::ResultTooLarge { .. } => {
            RESOURCE_EXHAUSTED
        }
        CallError::Trap(_) => ENGINE_FAULT,
        CallError::Host(_) => ERROR,
        // The pool had no instance free: nothing ran.
        CallError::Capacity(_) => RESOURCE_EXHAUSTED,
    };
    let outcome = match (&error, &record.stopped_at_deadline) {
        (CallError::Timeout(ms), Some(step)) => deadline_outcome(*ms, step),
        _ => Outcome::failure(status, format!("the Run was stopped: {error}")),
    };
    failed(request, record, outcome, vec![error.to_string()], fuel)
}

/// A failed Run whose result the host does not stand behind: the host's
/// own trace of what it saw (invocations and statements), no output.
fn failed(
    request: &ExecutionRequest<'_>,
    record: RunRecord,
    outcome: Outcome,
    faults: Vec<String>,
    fuel: u64,
) -> Execution {
    Execution {
        trace: host_trace(request.run_id, &record.invocations, &record.statements),
        outcome,
        output: None,
        invocations: record.invocations,
        faults,
        fuel,
        installation: None,
        refusal: None,
    }
}

/// Faults for what the component tried beyond its containment: an entry
/// outside its validated program or that the caller cannot see, a
/// statement that was not validated. An invocation past the Run's bound is
/// a bound reached ([`bounded_outcome`]), not a breach.
fn containment_faults(violations: &[Violation], breached: &mut Vec<GuaranteeKind>, faults: &mut Vec<String>) {
    for violation in violations {
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
}

/// Faults where the component's trace disagrees with the invocations and
/// statements the host performed, or, for a Run of a plan (not a deploy),
/// with the plan (Part II §6.5.4).
fn trace_faults(
    request: &ExecutionRequest<'_>,
    steps: &[TraceStep],
    record: &RunRecord,
    succeeded: bool,
    breached: &mut Vec<GuaranteeKind>,
    faults: &mut Vec<String>,
) {
    let mismatches = calls_mismatch(steps, &record.invocations, &record.statements);
    if !mismatches.is_empty() {
        breached.push(GuaranteeKind::TraceMismatch);
    }
    faults.extend(mismatches);
    if let Some(plan) = request.plan
        && !request.deploy
    {
        let broken = correspondence::check(plan, steps, succeeded);
        if !broken.is_empty() {
            breached.push(GuaranteeKind::PlanCorrespondence);
        }
        faults.extend(broken.into_iter().map(|m| format!("plan–trace correspondence: {m}")));
    }
}

/// The outcome of a Run the component completed within its contract, once
/// the Run's bounds have their say (the invocation bound, then the
/// wall-time bound), and then its cancellation (`partial`) unless a bound
/// or a breach says more (Part II §10.1).
fn bounded_outcome(mut outcome: Outcome, record: &RunRecord, bounds: &crate::Bounds, metrics: &Metrics) -> Outcome {
    let exhausted = record.violations.iter().any(|v| matches!(v, Violation::TooManyInvocations(_)));
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
    // A cancelled Run started and did not complete: the reserved
    // `partial` (effects possible: what ran before the boundary ran),
    // unless a bound or a contract breach says more.
    if let Some(step) = &record.cancelled_at
        && ![TIMEOUT, ENGINE_FAULT, RESOURCE_EXHAUSTED].contains(&outcome.status.as_str())
    {
        outcome = Outcome::failure(PARTIAL, cancelled_message(step, record.invocations.len()));
    }
    outcome
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

fn trace_step_from_wit(step: crate::wit::pilotage::language::run_types::TraceStep) -> Result<TraceStep, String> {
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
