//! Stage 5b of an execute, the Run (Part II §6.5.2 step 5, §6.5.7): the
//! component executes the validated program on a task of its own, as the
//! caller, against the catalog it was checked against; a deploy's
//! installation is stored; the request's assertions are evaluated; the
//! response is recorded under the idempotency key and the Run kept by the
//! one retention rule (`retention`). Also the path of a deployment's
//! firing (`crate::operations::firing`).

use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;

use super::key::{self, internal};
use super::retention::{self, Record};
use crate::invocation::tenant_invoker::TenantInvoker;
use crate::operations::assertions::Assertions;
use crate::operations::install::{self, InstallError, Kept};
use crate::operations::leases::LeaseGuard;
use crate::operations::{Context, OpError, request_error};
use crate::tenancy::usage::{RunUsage, UsageKind};
use crate::tenancy::{LanguageSlot, RunSlot};
use pilotage_engine::admission::Permit;
use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::execution::{self, Execution, ExecutionRequest, RunControl};
use pilotage_engine::validation::{Program, Validated};
use pilotage_protocol::assertions::Report;
use pilotage_protocol::outcome::{Outcome, VALIDATION_ERROR};
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_protocol::requests::{ExecuteResponse, TraceFetchResponse};
use pilotage_protocol::trace::{TraceLevel, at_level, effective_level};
use pilotage_telemetry::spans;

/// How a Run runs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RunMode {
    /// Install it (deploy mode of a deploying Language).
    pub deploy: bool,
    /// A test run: the host performs only read-only invocations.
    pub test_run: bool,
    /// What `effects.now` answers, when not the host's clock.
    pub clock_ms: Option<u64>,
    /// A deployment's firing (no session; always retained).
    pub firing: bool,
}

impl RunMode {
    /// The kind of Run, as usage counts it.
    fn usage_kind(&self) -> UsageKind {
        if self.firing {
            UsageKind::Firing
        } else if self.deploy {
            UsageKind::Deploy
        } else if self.test_run {
            UsageKind::Test
        } else {
            UsageKind::Immediate
        }
    }
}

/// What a started Run holds until it ends: its place in the execution
/// pool, its idempotency claim's lease, the tenant's concurrent-run slot.
pub(crate) struct Held {
    /// The place in the node's execution pool.
    pub place: Permit,
    /// The renewed lease of the Run's idempotency claim, if it has a key.
    pub lease: Option<LeaseGuard>,
    /// The tenant's `max_concurrent_runs` slot (a firing takes none).
    pub slot: Option<RunSlot>,
}

/// One Run to start: the program as validated, what it is given, how it
/// runs and is recorded. Owned, since the Run outlives the request that
/// started it ([`run_detached`]).
pub(crate) struct RunRequest {
    /// The Language's installed slot.
    pub slot: Arc<LanguageSlot>,
    /// The program.
    pub program: Program,
    /// Its validation (plan, references, statements).
    pub validated: Arc<Validated>,
    /// The bound input.
    pub input: Option<Value>,
    /// The bound context.
    pub context_value: Option<Value>,
    /// The catalog the Run invokes against.
    pub snapshot: CatalogSnapshot,
    /// Deploy, test Run, firing, clock.
    pub mode: RunMode,
    /// The Run's id.
    pub run_id: String,
    /// The trace level asked for.
    pub requested_level: Option<TraceLevel>,
    /// Whether the Run is kept ([`retention::retained`]).
    pub retained: bool,
    /// Its idempotency key, when it has one.
    pub key: Option<String>,
    /// Cancellation and progress of the Run.
    pub control: RunControl,
    /// The request's assertions, evaluated once the Run ends.
    pub assertions: Option<Assertions>,
}

/// [`run`] on a task of its own that holds `held` until the Run is
/// recorded: a Run that started ends and is recorded even when its
/// request is dropped meanwhile (the client went away or cancelled the
/// call). Only the request waits for it.
///
/// # Errors
/// As [`run`]; `internal` when the Run's task itself failed.
pub(crate) async fn run_detached(
    context: &Context,
    request: RunRequest,
    held: Held,
) -> Result<ExecuteResponse, OpError> {
    let context = context.clone();
    let task = async move {
        let response = run(&context, request).await;
        // Given back once the Run is recorded, in this order: the next
        // Run may start, the key stops being renewed (its response is
        // recorded), the tenant's slot frees.
        let Held { place, lease, slot } = held;
        drop((place, lease, slot));
        response
    };
    tokio::spawn(task.instrument(tracing::Span::current()))
        .await
        .map_err(|e| request_error(RequestErrorKind::Internal, format!("the Run stopped unexpectedly: {e}")))?
}

/// Runs `request` and records it when retained.
///
/// # Errors
/// `internal` when the response cannot be recorded under its key or the
/// retained Run cannot be stored.
async fn run(context: &Context, request: RunRequest) -> Result<ExecuteResponse, OpError> {
    let slot = request.slot.clone();
    let language = slot.entry.name.as_str();
    let run_id = request.run_id.clone();
    let run_span = spans::run_span(language, &run_id);
    let started = std::time::Instant::now();
    let mut execution = execute(context, &request).instrument(run_span.clone()).await;
    let used = RunUsage {
        kind: request.mode.usage_kind(),
        outcome: "",
        invocations: execution.invocations.len() as u64,
        fuel: execution.fuel,
        wall_time: started.elapsed(),
        stored_bytes: 0,
    };
    let tenant = context.caller.principal.tenant.as_str();
    // The component refused before invoking anything (an execution-time
    // validation refusal, Part II §6.5.2 and Part IV §9): a refused Run,
    // never stored, with its diagnostics; a firing's refusal is retained
    // like its other refusals.
    if let Some(diagnostics) = execution.refusal.take()
        && !request.mode.firing
    {
        run_span.record("pilotage.outcome.status", execution.outcome.status.as_str());
        context.platform.count_usage(tenant, &RunUsage { outcome: &execution.outcome.status, ..used });
        return Ok(ExecuteResponse {
            run_id,
            outcome: execution.outcome,
            output: None,
            diagnostics: Some(diagnostics),
            trace: None,
            retry_after_ms: None,
            assertions: None,
        });
    }
    if request.mode.deploy && execution.outcome.ok {
        installed(context, &request, &mut execution).await;
    }
    // Assertions read what the Run produced, at the level it is recorded,
    // and may only turn its success into `assertion_failed`; a deploy's
    // are kept for its firings instead.
    let evaluated = request.assertions.as_ref().filter(|_| !request.mode.deploy);
    let report = evaluated.map(|assertions| {
        let report = assertions.evaluate(
            &mut execution.outcome,
            &mut execution.output,
            &execution.trace,
            request.input.as_ref(),
        );
        context.platform.engine().metrics().assertions(language, report.passed, report.failed);
        report
    });
    run_span.record("pilotage.outcome.status", execution.outcome.status.as_str());
    answer_and_record(context, &request, execution, report, used).await
}

/// The component's execution of `request`, as the caller: while it waits
/// on an invocation or a statement, this task holds no thread.
async fn execute(context: &Context, request: &RunRequest) -> Execution {
    let slot = &request.slot;
    let invoker = TenantInvoker::new(
        &context.platform,
        context.tenant.clone(),
        context.caller.principal.clone(),
        request.snapshot.clone(),
    );
    let validated = &request.validated;
    execution::execute_controlled(
        &slot.component,
        ExecutionRequest {
            program: &request.program,
            input: request.input.as_ref(),
            context: request.context_value.as_ref(),
            plan: validated.plan.as_ref(),
            references: &validated.references,
            statements: &validated.statements,
            data_source: context.tenant.data_source_for(&slot.entry.name),
            catalog: request.snapshot.clone(),
            invoker: Arc::new(invoker),
            test_run: request.mode.test_run,
            deploy: request.mode.deploy,
            clock_ms: request.mode.clock_ms,
            run_id: &request.run_id,
        },
        &request.control,
    )
    .await
}

/// Stores what a successful deploy Run installs (Part II §6.5.7: the
/// outcome describes installation) and names it in the output; a
/// deployment the platform cannot store fails the Run.
async fn installed(context: &Context, request: &RunRequest, execution: &mut Execution) {
    // A deploy keeps its assertions for the firings.
    let kept_assertions = request.assertions.as_ref().map(|assertions| assertions.raw().clone());
    let installed = match execution.installation.take() {
        Some(installation) => {
            install::install(
                context,
                &request.slot,
                installation,
                &request.snapshot,
                Kept { context: request.context_value.as_ref(), assertions: kept_assertions.as_ref() },
                &request.validated,
                &request.run_id,
            )
            .await
        }
        None => Err(InstallError::Nothing),
    };
    match installed {
        Ok(installed) => {
            let mut output = match execution.output.take() {
                Some(Value::Object(map)) => map,
                Some(other) => serde_json::Map::from_iter([("component".to_owned(), other)]),
                None => serde_json::Map::new(),
            };
            output.insert("deployment".into(), Value::String(installed.name));
            output.insert("version".into(), installed.version.into());
            output.insert("replaced".into(), Value::Bool(installed.version > 1));
            output.insert("triggers".into(), serde_json::to_value(&installed.triggers).unwrap_or_default());
            output.insert(
                "next_due".into(),
                installed.next_due.map(pilotage_engine::clock::rfc3339).map_or(Value::Null, Value::String),
            );
            execution.output = Some(Value::Object(output));
        }
        Err(refusal) => {
            execution.outcome = Outcome::failure(pilotage_protocol::outcome::ERROR, refusal.to_string());
            execution.output = None;
        }
    }
}

/// The Run's response at the level asked, recorded as its key's answer
/// and, when retained, stored with its trace at the Language's ceiling;
/// the Run's usage counted.
async fn answer_and_record(
    context: &Context,
    request: &RunRequest,
    mut execution: Execution,
    report: Option<Report>,
    used: RunUsage<'_>,
) -> Result<ExecuteResponse, OpError> {
    let slot = &request.slot;
    let run_id = request.run_id.as_str();
    let recorded_level = slot.description().trace_ceiling;
    let level = effective_level(request.requested_level, recorded_level);
    let mut response = ExecuteResponse {
        run_id: run_id.to_owned(),
        outcome: execution.outcome.clone(),
        output: if execution.outcome.ok { execution.output.clone() } else { None },
        diagnostics: None,
        trace: at_level(&execution.trace, level),
        retry_after_ms: None,
        assertions: report.clone(),
    };
    // One Run, one outcome: the key's response is recorded before the Run
    // is stored or answered, fenced by this Run's claim. When a retry took
    // the claim over meanwhile (this process was paused past its lease),
    // the outcome it recorded is the Run's, for this caller and the stored
    // record alike; the record keeps the steps that really ran.
    if let Some(key) = request.key.as_deref()
        && response.outcome.status != VALIDATION_ERROR
        && let Some(recorded) = key::fence(context, key, run_id, &response).await?
    {
        execution.outcome = recorded.outcome.clone();
        execution.output = None;
        response = recorded;
    }
    let tenant = context.caller.principal.tenant.as_str();
    if !request.retained {
        context.platform.count_usage(tenant, &RunUsage { outcome: &execution.outcome.status, ..used });
        return Ok(response);
    }
    let record = TraceFetchResponse {
        run_id: run_id.to_owned(),
        outcome: execution.outcome,
        output: execution.output,
        trace: at_level(&execution.trace, recorded_level).unwrap_or_else(|| execution.trace.clone()),
        narration: None,
        assertions: report,
    };
    let stored = retention::store(
        context,
        Record {
            record: &record,
            plan: request.validated.response.plan.as_ref(),
            language: &slot.entry.name,
            recorded_level,
            retention: &slot.exposure.retention,
            firing: request.mode.firing,
        },
    )
    .await;
    let stored_bytes = *stored.as_ref().unwrap_or(&0);
    context.platform.count_usage(tenant, &RunUsage { outcome: &record.outcome.status, stored_bytes, ..used });
    stored.map_err(|e| internal(&e))?;
    Ok(response)
}
