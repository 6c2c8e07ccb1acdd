//! `execute` (Part II §6.5, Part III §4.4) in the exact processing order of
//! Part II §6.5.2; the first failing check decides the response:
//!
//! 1. well-formedness: runnable selection, `program_ref` resolution,
//!    `trace_level`, `test_run`, `mode`, `store` against retention,
//!    idempotency conflict (a replay returns the recorded response);
//! 2. catalog drift;
//! 3. revalidation (inline) or the promotion baseline (`program_ref`);
//! 4. input and context binding;
//! 5. execution: claim the idempotency key (owned by this process under a
//!    renewed lease, `idempotency.rs`; a retry finding the key claimed gets
//!    the key's answer, recorded or in progress, and meets neither the
//!    tenant's policy nor its quotas), then the policy on risk and the
//!    quotas (a refusal frees the claim), run under bounds, record the run
//!    durably when retained, then respond. A component may still refuse
//!    before invoking anything, when the program cannot run in the mode
//!    asked (a check `validate` cannot make, not knowing the mode): the
//!    answer is then a refused Run, `validation_error` with the
//!    component's diagnostics (Part IV §9, `language::execution`).
//!
//! Invariant: refused Runs (`validation_error`, `catalog_drift`,
//! `promotion_drift`) have no side effects, are never stored, and never
//! hold an idempotency key.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tracing::Instrument;

use super::assertions::{Assertions, InputAt};
use super::idempotency::interrupted_response;
use super::storage_error;
use super::validate::{failure_to_error, validated};
use super::{Context, OpError, request_error};
use crate::invocation::promotion::{PromotedProgram, drifted};
use crate::invocation::tenant_invoker::TenantInvoker;
use crate::policy::RunKind;
use crate::policy::approvals::Asked;
use crate::policy::gate::Gate;
use crate::{policy, tenancy};
use pilotage_engine::admission::{Permit, Pool, Refused};
use pilotage_engine::catalog::version::canonical_json;
use pilotage_engine::execution::{self, ExecutionRequest, RunControl};
use pilotage_engine::validation::{self, Program, Validated, ValidationFailure};
use pilotage_protocol::capabilities::{Capability, SubFeature};
use pilotage_protocol::diagnostic::{Diagnostic, INPUT_BINDING};
use pilotage_protocol::manifest::ExecutionMode;
use pilotage_protocol::outcome::{CATALOG_DRIFT, Outcome, PROMOTION_DRIFT, RESOURCE_EXHAUSTED, VALIDATION_ERROR};
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_protocol::requests::{ExecuteResponse, TraceFetchResponse};
use pilotage_protocol::retention::Retention;
use pilotage_protocol::trace::{TraceLevel, at_level, effective_level};
use pilotage_store::{Claim, HeldClaim, NewClaim, RunRow, StoreError};
use pilotage_telemetry::spans;

use crate::tenancy::usage::{RunUsage, UsageKind};
use tenancy::LanguageSlot;

/// The reserved members of an execute tool (Part III §4.4) besides the
/// program argument.
#[derive(Debug, Default, Deserialize)]
struct ExecuteArguments {
    #[serde(default)]
    program_ref: Option<String>,
    #[serde(default, deserialize_with = "pilotage_protocol::present")]
    input: Option<Value>,
    #[serde(default, deserialize_with = "pilotage_protocol::present")]
    context: Option<Value>,
    #[serde(default)]
    trace_level: Option<String>,
    #[serde(default)]
    expected_catalog_version: Option<String>,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    test_run: Option<bool>,
    #[serde(default)]
    store: Option<bool>,
    #[serde(default)]
    mode: Option<String>,
    /// The platform's assertions extension (`super::assertions`).
    #[serde(default, rename = "x-assertions")]
    assertions: Option<Value>,
}

/// The message every unresolvable `program_ref` gets, whether it does not
/// exist or is not visible to the caller (Part II §6.5.2 step 1).
pub(crate) const UNKNOWN_PROGRAM_REF: &str =
    "unknown program_ref: promote the program first, or look it up in the catalog";

/// A new run identifier: `run_` and 24 random hex digits.
pub(crate) fn new_run_id() -> String {
    format!("run_{}", hex::encode(rand::random::<[u8; 12]>()))
}

enum Runnable<'a> {
    Inline(&'a Value),
    Promoted(Arc<PromotedProgram>),
}

fn sha(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Counts a Run of `language` that ended `status` and records its id and
/// status on the request's span (the current one).
pub(super) fn observe_outcome(context: &Context, language: &str, run_id: &str, status: &str) {
    context.platform.engine().metrics().run(language, status);
    spans::record_run(&tracing::Span::current(), run_id, status);
}

/// The response of a Run refused before anything ran (counted as a Run of
/// `language`).
fn refused(
    context: &Context,
    language: &str,
    run_id: String,
    status: &str,
    error: &str,
    diagnostics: Option<Vec<Diagnostic>>,
) -> Value {
    observe_outcome(context, language, &run_id, status);
    serde_json::to_value(ExecuteResponse {
        run_id,
        outcome: Outcome::failure(status, error),
        output: None,
        diagnostics,
        trace: None,
        retry_after_ms: None,
        assertions: None,
    })
    .unwrap_or(Value::Null)
}

/// The response of a Run the node's execution pool could not admit
/// (issue: "Runs that wait cost nothing"): `resource_exhausted`, nothing
/// ran, with `retry_after_ms` beside the outcome; counted as a Run of
/// `language`.
pub(crate) fn capacity_refused(context: &Context, language: &str, run_id: String, refusal: &Refused) -> Value {
    let mut response = refused(context, language, run_id, RESOURCE_EXHAUSTED, &refusal.to_string(), None);
    if let Some(object) = response.as_object_mut() {
        object.insert("retry_after_ms".into(), refusal.retry_after_ms.into());
    }
    response
}

/// Serves an execute loop tool.
///
/// # Errors
/// Request errors of Part III §7.2 for well-formedness failures;
/// `bounds_exceeded`/`internal` when revalidation cannot complete. A
/// refused or failed Run is a result, never an error.
pub(crate) async fn execute(context: &Context, slot: &Arc<LanguageSlot>, raw: &Value) -> Result<Value, OpError> {
    execute_with(context, slot, raw, &RunControl::default()).await
}

/// [`execute`] with the Run under `control` (an MCP task's longer wall
/// time and its cancellation); the same checks, refusals and record.
///
/// # Errors
/// As [`execute`].
pub(crate) async fn execute_with(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    raw: &Value,
    control: &RunControl,
) -> Result<Value, OpError> {
    let description = slot.description();
    let language = slot.entry.name.clone();
    let args: ExecuteArguments = super::arguments(raw)?;
    let manifest = context.tenant.manifest();
    let map = slot.entry.effective_capabilities(&manifest.manifest);
    let declares_sub = |feature| map.as_ref().is_some_and(|m| m.declares_sub(feature));
    let declares = |capability| map.as_ref().is_some_and(|m| m.declares(capability));

    // 1. Well-formedness.
    let program = raw.get(&description.program_argument);
    let runnable = match (program, &args.program_ref) {
        (Some(_), Some(_)) => {
            return Err(request_error(
                RequestErrorKind::InvalidRequest,
                format!(
                    "give either '{}' (an inline program) or 'program_ref', not both",
                    description.program_argument
                ),
            ));
        }
        (None, None) => {
            return Err(request_error(
                RequestErrorKind::InvalidRequest,
                format!(
                    "give '{}' (an inline program) or 'program_ref' (a promoted program)",
                    description.program_argument
                ),
            ));
        }
        (Some(program), None) => Runnable::Inline(program),
        (None, Some(reference)) => {
            let find = || {
                let snapshot = context.tenant.snapshot(&context.caller.principal, &language);
                context
                    .tenant
                    .promoted(reference)
                    .filter(|program| program.language == language && snapshot.get(reference).is_some())
            };
            let mut promoted = find();
            // Promoted through another replica a moment ago, before this one
            // applied the announcement: read it from the store now, so a
            // client reads its own write wherever the balancer sends it.
            if promoted.is_none() && context.platform.store().is_shared() {
                if let Err(error) =
                    crate::tenancy::load::promoted_program(&context.platform, &context.tenant, reference).await
                {
                    tracing::warn!(%error, "cannot read a promoted program from the store");
                }
                promoted = find();
            }
            match promoted {
                Some(program) => Runnable::Promoted(program),
                None => return Err(request_error(RequestErrorKind::NotFound, UNKNOWN_PROGRAM_REF)),
            }
        }
    };
    let requested_level = match args.trace_level.as_deref() {
        None => None,
        Some(text) => Some(TraceLevel::parse(text).ok_or_else(|| {
            request_error(
                RequestErrorKind::InvalidRequest,
                format!("unknown trace_level '{text}'; use none, summary or full"),
            )
        })?),
    };
    if args.test_run.is_some() && !declares_sub(SubFeature::TestRun) {
        return Err(request_error(
            RequestErrorKind::InvalidRequest,
            format!("{language} does not declare execute.test_run; omit 'test_run'"),
        ));
    }
    let deploy = match (description.execution, args.mode.as_deref()) {
        (ExecutionMode::Both, Some("immediate")) => false,
        (ExecutionMode::Both, Some("deploy")) => true,
        (ExecutionMode::Both, Some(other)) => {
            return Err(request_error(
                RequestErrorKind::InvalidRequest,
                format!("unknown mode '{other}'; use immediate or deploy"),
            ));
        }
        (ExecutionMode::Both, None) => {
            return Err(request_error(
                RequestErrorKind::InvalidRequest,
                format!("{language} runs both ways: give mode immediate or deploy"),
            ));
        }
        (_, Some(_)) => {
            return Err(request_error(
                RequestErrorKind::InvalidRequest,
                format!("{language} has one execution mode; omit 'mode'"),
            ));
        }
        (mode, None) => mode == ExecutionMode::Deploy,
    };
    let test_run = args.test_run == Some(true);
    if deploy && !test_run && !slot.component.exports_deploy() {
        return Err(request_error(
            RequestErrorKind::Unsupported,
            format!(
                "{language} declares execution {:?} but its component does not export 'deploy' (world deploying-language of pilotage:language@1.2.0), so it cannot install programs here",
                description.execution
            ),
        ));
    }
    // A test run's simulated clock: the input's `at` (WIT `effects.now`).
    let clock_ms = match args.input.as_ref().and_then(|input| input.get("at")) {
        Some(at) if test_run => match at.as_str().and_then(pilotage_engine::clock::parse_rfc3339) {
            Some(ms) if ms >= 0 => Some(ms as u64),
            _ => {
                return Err(request_error(
                    RequestErrorKind::InvalidRequest,
                    format!(
                        "input.at is the test run's simulated clock: an RFC 3339 instant such as 2026-12-03T14:03:00+01:00, not {at}"
                    ),
                ));
            }
        },
        _ => None,
    };
    let mode = RunMode { deploy: deploy && !test_run, test_run, clock_ms, firing: false };
    let retention = slot.exposure.retention.clone();
    if args.store == Some(true) && !retention.retains() {
        return Err(request_error(
            RequestErrorKind::Unsupported,
            format!("{language} declares retention '{retention}': runs cannot be stored; omit 'store'"),
        ));
    }
    if args.store == Some(true) && retention == Retention::Session && context.caller.session_id.is_none() {
        return Err(request_error(
            RequestErrorKind::Unsupported,
            "retention is 'session' and this request has no MCP session: runs cannot be stored; omit 'store'",
        ));
    }
    let idempotency = match &args.idempotency_key {
        Some(key) if declares_sub(SubFeature::Idempotency) => {
            // Every member that changes what the request does is part of
            // the key's fingerprint (Part II §6.5.6): the same key with
            // another mode, a test run instead of a real one, or another
            // `store` is a conflict, never the other request's replay.
            let doing = format!(
                "mode={};test_run={};store={}",
                args.mode.as_deref().unwrap_or(""),
                args.test_run.unwrap_or(false),
                args.store.map_or("default", |store| if store { "true" } else { "false" })
            );
            let runnable_hash = match &runnable {
                Runnable::Inline(program) => sha(&[&language, "inline", &canonical_json(program), &doing]),
                Runnable::Promoted(program) => sha(&[&language, "ref", &program.program_ref, &doing]),
            };
            let input_hash = sha(&[
                &args.input.as_ref().map(canonical_json).unwrap_or_default(),
                &args.context.as_ref().map(canonical_json).unwrap_or_default(),
            ]);
            let principal = &context.caller.principal;
            let held =
                context.platform.store().idempotency_get(principal.owner(), key).await.map_err(|e| before_run(&e))?;
            if let Some(held) = held {
                if held.runnable_hash != runnable_hash || held.input_hash != input_hash {
                    return Err(conflict(key));
                }
                return replay(context, key, effective_level(requested_level, description.trace_ceiling)).await;
            }
            Some((key.clone(), runnable_hash, input_hash))
        }
        Some(_) => {
            return Err(request_error(
                RequestErrorKind::InvalidRequest,
                format!("{language} does not declare execute.idempotency; omit 'idempotency_key'"),
            ));
        }
        None => None,
    };

    // 2. Catalog drift.
    let run_id = new_run_id();
    let snapshot = context.tenant.snapshot(&context.caller.principal, &language);
    spans::record_catalog_version(snapshot.catalog_version());
    if declares(Capability::Catalog)
        && let Some(expected) = &args.expected_catalog_version
        && expected != snapshot.catalog_version()
    {
        return Ok(refused(context, &language, run_id, CATALOG_DRIFT, "catalog version mismatch", None));
    }

    // 3. Revalidation, or the promotion baseline.
    let (program_value, promoted_entry) = match &runnable {
        Runnable::Inline(program) => (*program, None),
        Runnable::Promoted(program) => {
            let changed = drifted(program, &snapshot);
            if !changed.is_empty() {
                return Ok(refused(
                    context,
                    &language,
                    run_id,
                    PROMOTION_DRIFT,
                    &format!("{} changed since this program was promoted; promote it again", changed.join(", ")),
                    None,
                ));
            }
            (&program.body, snapshot.get(&program.program_ref).cloned())
        }
    };
    let (program, validated) = validated(context, slot, program_value, args.context.as_ref(), &snapshot).await?;
    if !validated.response.valid {
        if promoted_entry.is_some() {
            return Ok(refused(
                context,
                &language,
                run_id,
                PROMOTION_DRIFT,
                "the promoted program no longer validates; promote it again",
                None,
            ));
        }
        return Ok(refused(
            context,
            &language,
            run_id,
            VALIDATION_ERROR,
            "the program is invalid; nothing ran",
            Some(validated.response.diagnostics.clone()),
        ));
    }

    // 4. Input binding (context binding was part of validation).
    let mut findings = Vec::new();
    if let Some(entry) = &promoted_entry
        && let Some(schema) = &entry.input_schema
    {
        let input = args.input.clone().unwrap_or(Value::Object(Default::default()));
        match jsonschema::validator_for(schema) {
            Ok(validator) => {
                findings.extend(validator.iter_errors(&input).map(|error| {
                    Diagnostic::error(INPUT_BINDING, &error.instance_path().to_string(), error.to_string())
                }))
            }
            Err(error) => {
                return Err(request_error(
                    RequestErrorKind::Internal,
                    format!("the promoted entry's input_schema does not compile: {error}"),
                ));
            }
        }
    }
    if findings.is_empty() {
        let _place = context.admit(Pool::Validation, &slot.component).await?;
        findings = validation::bind_input(&slot.component, &program, args.input.as_ref()).await.map_err(|failure| {
            match failure {
                ValidationFailure::Capacity(_) => failure_to_error(failure),
                other => request_error(RequestErrorKind::BoundsExceeded, other.to_string()),
            }
        })?;
    }
    if !findings.is_empty() {
        return Ok(refused(
            context,
            &language,
            run_id,
            VALIDATION_ERROR,
            "the input does not fit the program; nothing ran",
            Some(findings),
        ));
    }
    // The request's assertions, checked against the plan and the input
    // before anything runs (docs/assertions.md); a deploy's are kept with
    // the deployment and checked against each firing's input.
    let input_at = if mode.deploy { InputAt::Later } else { InputAt::Given(args.input.as_ref()) };
    let assertions = match Assertions::read(args.assertions.as_ref(), validated.response.plan.as_ref(), input_at) {
        Ok(assertions) => assertions,
        Err(findings) => {
            return Ok(refused(
                context,
                &language,
                run_id,
                VALIDATION_ERROR,
                "the assertions do not fit the program; nothing ran",
                Some(findings),
            ));
        }
    };

    // The idempotency claim comes before the policy and the quotas: a
    // retry of a request already claimed (recorded, or still running) is
    // answered from the claim alone, so concurrent retries of one key
    // never meet the policy again (no second approval request, no budget
    // taken) and a burst of identical requests cannot exhaust the tenant's
    // concurrent-run quota.
    let principal = context.caller.principal.clone();
    let mut lease = None;
    if let Some((key, runnable_hash, input_hash)) = &idempotency {
        let leases = context.platform.leases();
        let now = context.platform.clock().now_ms();
        let claim = context
            .platform
            .store()
            .idempotency_claim(&NewClaim {
                principal: principal.owner(),
                key,
                runnable_hash,
                input_hash,
                run_id: &run_id,
                owner: leases.instance_id(),
                now_ms: now,
                lease_expires_at: leases.lease_until(now),
                expires_at: now + idempotency_window(&retention).as_millis() as i64,
            })
            .await
            .map_err(|e| before_run(&e))?;
        match claim {
            Claim::Held(held) => {
                if &held.runnable_hash != runnable_hash || &held.input_hash != input_hash {
                    return Err(conflict(key));
                }
                return replay(context, key, effective_level(requested_level, description.trace_ceiling)).await;
            }
            // Renewed while this request is served; a killed process stops
            // renewing, and a retry then records the Run as interrupted.
            Claim::Claimed => lease = Some(leases.hold(principal.owner(), key, &run_id)),
        }
    }
    // Frees the claim of a request refused before it runs, so the same key
    // can be retried (once approved, once the budget or quota allows).
    let unclaim = async || {
        if let Some((key, _, _)) = &idempotency {
            let _ = context.platform.store().idempotency_release(principal.owner(), key, &run_id).await;
        }
    };

    // The tenant's policy on risk (Part II §7.3, enforced here): a held,
    // denied or over-budget Run is refused like the ones above, before
    // anything runs; its key's claim is freed.
    let kind = match (test_run, deploy) {
        (true, _) => RunKind::Test,
        (false, true) => RunKind::Deploy,
        (false, false) => RunKind::Immediate,
    };
    let asked = Asked {
        tenant: &context.caller.principal.tenant,
        issuer: &context.caller.principal.issuer,
        subject: &context.caller.principal.subject,
        language: &language,
        program: match &runnable {
            Runnable::Inline(program) => Some(*program),
            Runnable::Promoted(_) => None,
        },
        program_ref: args.program_ref.as_deref(),
        input: args.input.as_ref(),
        context: args.context.as_ref(),
        kind,
        catalog_version: snapshot.catalog_version(),
        plan: validated.response.plan.as_ref(),
        rule: None,
        address: context.caller.address.as_deref(),
    };
    let gate = policy::gate::pass(
        &context.platform,
        &context.tenant,
        &asked,
        validated.response.plan.as_ref(),
        &context.caller.principal.scopes,
        &run_id,
    )
    .await;
    let gate = match gate {
        Ok(gate) => gate,
        Err(error) => {
            unclaim().await;
            return Err(before_run(&error));
        }
    };
    let budget = match gate {
        Gate::Pass(taken) => taken,
        Gate::Refuse { status, error, approval } => {
            unclaim().await;
            let mut response = refused(context, &language, run_id, status, &error, None);
            if let (Some(approval), Some(object)) = (approval, response.as_object_mut()) {
                object.insert("approval".into(), approval);
            }
            return Ok(response);
        }
    };

    // 5. Execution, within the tenant's quotas (checked before anything
    // runs, so a refusal is a request error). A refusal from here on gives
    // the budget back and frees the claim, so the same key can be retried
    // once the quota allows.
    let free = async || {
        budget.give_back(&context.platform).await;
        unclaim().await;
    };
    let release = async |error: OpError| {
        free().await;
        error
    };
    let slot_guard = match context.tenant.start_run() {
        Ok(guard) => guard,
        Err(exceeded) => {
            return Err(release(request_error(RequestErrorKind::BoundsExceeded, exceeded.to_string())).await);
        }
    };
    let retained = match args.store {
        Some(explicit) => explicit,
        None => retention.retains(),
    };
    if retained {
        let limit = context.tenant.quotas().max_stored_run_bytes;
        let used = match context.platform.store().run_bytes_of_tenant(&principal.tenant).await {
            Ok(used) => used,
            Err(error) => return Err(release(before_run(&error)).await),
        };
        if used as u64 >= limit {
            return Err(release(request_error(
                RequestErrorKind::BoundsExceeded,
                format!(
                    "quota max_stored_run_bytes ({limit}) of tenant '{}' is reached; use store:false or wait for runs to expire",
                    principal.tenant
                ),
            ))
            .await);
        }
    }
    // The tenant's policy may bound the Run's invocations below the
    // platform's bound (a budget of invocations per Run).
    let limited;
    let control = match context.tenant.policy().max_invocations_per_run {
        Some(max) => {
            limited = RunControl { max_invocations: Some(max), ..control.clone() };
            &limited
        }
        None => control,
    };
    // The Run's turn in the node's execution pool: a refusal is a Run that
    // did not start (nothing ran, nothing is stored, the key is free).
    let place = match context
        .platform
        .engine()
        .admission()
        .admit(Pool::Execution, &context.tenant.id, slot.component.need())
        .await
    {
        Ok(place) => place,
        Err(refusal) => {
            free().await;
            drop(slot_guard);
            return Ok(capacity_refused(context, &language, run_id, &refusal));
        }
    };
    let held = Held { place, lease: lease.take(), slot: Some(slot_guard) };
    let request = RunRequest {
        slot: slot.clone(),
        program,
        validated,
        input: args.input.clone(),
        context_value: args.context.clone(),
        snapshot,
        mode,
        run_id: run_id.clone(),
        requested_level,
        store: args.store,
        key: idempotency.as_ref().map(|(key, _, _)| key.clone()),
        control: control.clone(),
        assertions,
    };
    let response = run_detached(context, request, held).await;
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            budget.give_back(&context.platform).await;
            if let Some((key, _, _)) = &idempotency {
                let _ = context.platform.store().idempotency_release(principal.owner(), key, &run_id).await;
            }
            return Err(error);
        }
    };
    observe_outcome(context, &language, &run_id, &response.outcome.status);
    // A Run the component refused holds no key (refused Runs have no
    // effects and may be retried with the same key once corrected); any
    // other Run recorded its response as the key's (`run`).
    if response.outcome.status == VALIDATION_ERROR {
        budget.give_back(&context.platform).await;
    }
    if let Some((key, _, _)) = &idempotency
        && response.outcome.status == VALIDATION_ERROR
    {
        let _ = context.platform.store().idempotency_release(principal.owner(), key, &run_id).await;
    }
    Ok(serde_json::to_value(&response).unwrap_or(Value::Null))
}

fn conflict(key: &str) -> OpError {
    request_error(
        RequestErrorKind::IdempotencyConflict,
        format!(
            "idempotency_key '{key}' was used with another program or input; use a fresh key for a changed request"
        ),
    )
}

/// A store failure of an execute before its Run started (a claim, a
/// replay, the policy's budget, the stored-bytes quota): retryable when the
/// database could not be reached ([`storage_error`]).
fn before_run(error: &StoreError) -> OpError {
    storage_error(error, "execute")
}

pub(super) fn internal(error: &dyn std::fmt::Display) -> OpError {
    tracing::error!(%error, "store failure during execute");
    request_error(RequestErrorKind::Internal, "the server's storage failed; the failure was logged")
}

/// The deduplication window: at least the retention period (Part II
/// §6.5.6), and a day when runs are not retained by duration.
pub(crate) fn idempotency_window(retention: &Retention) -> Duration {
    match retention {
        Retention::Duration { span, .. } => (*span).max(Duration::from_secs(3600)),
        _ => Duration::from_secs(86_400),
    }
}

/// Waits for the Run holding `key` to finish and returns its recorded
/// response. A claim whose lease ran out (its process stopped renewing
/// it) is taken over: the interrupted outcome, at `level`, becomes the
/// key's response (`idempotency.rs`). A live claim is only waited for.
async fn replay(context: &Context, key: &str, level: TraceLevel) -> Result<Value, OpError> {
    let principal = &context.caller.principal;
    // A live Run answers within its wall time; a dead one's lease runs
    // out within a lease of its last renewal. Waiting out both, the first
    // retry after a crash gets the recorded outcome, never "not finished".
    let patience = Duration::from_millis(context.platform.engine().bounds().execution.wall_time_ms)
        + Duration::from_millis(context.platform.leases().settings().lease_ms)
        + Duration::from_secs(10);
    let started = std::time::Instant::now();
    loop {
        let held =
            context.platform.store().idempotency_get(principal.owner(), key).await.map_err(|e| before_run(&e))?;
        let now = context.platform.clock().now_ms();
        match held {
            Some(HeldClaim { response: Some(response), .. }) => {
                return serde_json::from_str(&response).map_err(|e| internal(&e));
            }
            Some(held) if held.lease_expired(now) => {
                let run_id = held.run_id.clone().unwrap_or_else(new_run_id);
                let response = serde_json::to_value(interrupted_response(&run_id, level)).map_err(|e| internal(&e))?;
                let taken = context
                    .platform
                    .store()
                    .idempotency_take_over(
                        principal.owner(),
                        key,
                        held.run_id.as_deref(),
                        context.platform.leases().instance_id(),
                        now,
                        &response.to_string(),
                    )
                    .await
                    .map_err(|e| internal(&e))?;
                if taken {
                    tracing::warn!(%run_id, key = %key, owner = ?held.owner, "idempotency claim's lease ran out: Run recorded as interrupted");
                    return Ok(response);
                }
                // Renewed, finished or taken over by another retry
                // meanwhile: read it again.
            }
            Some(_) if started.elapsed() < patience => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Some(_) => {
                return Err(request_error(
                    RequestErrorKind::Internal,
                    format!("the Run holding idempotency_key '{key}' has not finished; retry later with the same key"),
                ));
            }
            None => {
                return Err(request_error(
                    RequestErrorKind::Internal,
                    format!("the Run holding idempotency_key '{key}' did not start; retry with the same key"),
                ));
            }
        }
    }
}

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

/// How long a firing's Run is kept when its Language's retention is not a
/// duration (`none`, `session`): a deployer must be able to fetch it.
pub(crate) const FIRING_RETENTION: &str = "P7D";

/// What a started Run holds until it ends: its place in the execution
/// pool, its idempotency claim's lease, the tenant's concurrent-run slot.
pub(super) struct Held {
    /// The place in the node's execution pool.
    pub(super) place: Permit,
    /// The renewed lease of the Run's idempotency claim, if it has a key.
    pub(super) lease: Option<crate::operations::leases::LeaseGuard>,
    /// The tenant's `max_concurrent_runs` slot (a firing takes none).
    pub(super) slot: Option<tenancy::RunSlot>,
}

/// One Run to start: the program as validated, what it is given, how it
/// runs and is recorded. Owned, since the Run outlives the request that
/// started it ([`run_detached`]).
pub(super) struct RunRequest {
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
    pub snapshot: pilotage_engine::catalog::CatalogSnapshot,
    /// Deploy, test Run, firing, clock.
    pub mode: RunMode,
    /// The Run's id.
    pub run_id: String,
    /// The trace level asked for.
    pub requested_level: Option<TraceLevel>,
    /// The request's `store`.
    pub store: Option<bool>,
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
/// call), as a Run on its own thread did. Only the request waits for it.
///
/// # Errors
/// As [`run`]; `internal` when the Run's task itself failed.
pub(super) async fn run_detached(
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

/// Starts the Run and records it when retained.
async fn run(context: &Context, request: RunRequest) -> Result<ExecuteResponse, OpError> {
    let RunRequest {
        slot,
        program,
        validated,
        input,
        context_value,
        snapshot,
        mode,
        run_id,
        requested_level,
        store,
        key,
        control,
        assertions,
    } = request;
    let (slot, run_id, key, control) = (&slot, run_id.as_str(), key.as_deref(), &control);
    let description = slot.description();
    let install_snapshot = mode.deploy.then(|| snapshot.clone());
    let install_validated = mode.deploy.then(|| validated.clone());
    let install_context = context_value.clone();
    // A deploy keeps its assertions for the firings; other Runs evaluate
    // them once they end.
    let (kept_assertions, assertions) = match assertions {
        Some(assertions) if mode.deploy => (Some(assertions.raw().clone()), None),
        other => (None, other),
    };
    // The stored record keeps the plan the caller was shown (the console's
    // Run view draws it above the trace); an Arc, not a copy.
    let record_validated = validated.clone();
    let invoker = TenantInvoker::new(
        &context.platform,
        context.tenant.clone(),
        context.caller.principal.clone(),
        snapshot.clone(),
    );
    let data_source = context.tenant.data_source_for(&slot.entry.name);
    let run_span = spans::run_span(&slot.entry.name, run_id);
    let started = std::time::Instant::now();
    // The Run is this task: while it waits on an invocation or a
    // statement it holds no thread.
    let mut execution = execution::execute_controlled(
        &slot.component,
        ExecutionRequest {
            program: &program,
            input: input.as_ref(),
            context: context_value.as_ref(),
            plan: validated.plan.as_ref(),
            references: &validated.references,
            statements: &validated.statements,
            data_source,
            catalog: snapshot,
            invoker: Arc::new(invoker),
            test_run: mode.test_run,
            deploy: mode.deploy,
            clock_ms: mode.clock_ms,
            run_id,
        },
        control,
    )
    .instrument(run_span.clone())
    .await;
    let kind = if mode.firing {
        UsageKind::Firing
    } else if mode.deploy {
        UsageKind::Deploy
    } else if mode.test_run {
        UsageKind::Test
    } else {
        UsageKind::Immediate
    };
    let used = RunUsage {
        kind,
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
        && !mode.firing
    {
        run_span.record("pilotage.outcome.status", execution.outcome.status.as_str());
        context.platform.count_usage(tenant, &RunUsage { outcome: &execution.outcome.status, ..used });
        return Ok(ExecuteResponse {
            run_id: run_id.to_owned(),
            outcome: execution.outcome,
            output: None,
            diagnostics: Some(diagnostics),
            trace: None,
            retry_after_ms: None,
            assertions: None,
        });
    }
    if mode.deploy && execution.outcome.ok {
        // The installation Run succeeds only once the platform has stored
        // what it installs (Part II §6.5.7: the outcome describes
        // installation).
        let installed = match (execution.installation.take(), &install_snapshot, &install_validated) {
            (Some(installation), Some(snapshot), Some(validated)) => {
                super::install::install(
                    context,
                    slot,
                    installation,
                    snapshot,
                    super::install::Kept { context: install_context.as_ref(), assertions: kept_assertions.as_ref() },
                    validated,
                    run_id,
                )
                .await
            }
            _ => Err(super::install::InstallError::Nothing),
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
    // Assertions read what the Run produced, at the level it is recorded,
    // and may only turn its success into `assertion_failed`.
    let report = assertions.map(|assertions| {
        let report =
            assertions.evaluate(&mut execution.outcome, &mut execution.output, &execution.trace, input.as_ref());
        context.platform.engine().metrics().assertions(&slot.entry.name, report.passed, report.failed);
        report
    });
    run_span.record("pilotage.outcome.status", execution.outcome.status.as_str());

    let recorded_level = description.trace_ceiling;
    let retention = &slot.exposure.retention;
    let retained = match store {
        Some(explicit) => explicit,
        None => retention.retains() && (retention != &Retention::Session || context.caller.session_id.is_some()),
    };
    // A firing has no session: it is kept for the Language's retention
    // period, or a week when that is not a duration.
    let firing_retention;
    let retention = match retention {
        Retention::Duration { .. } => retention,
        _ if mode.firing => {
            firing_retention = Retention::parse(FIRING_RETENTION).unwrap_or(Retention::None);
            &firing_retention
        }
        _ => retention,
    };
    let level = effective_level(requested_level, recorded_level);
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
    if let Some(key) = key
        && response.outcome.status != VALIDATION_ERROR
        && let Some(recorded) = fence(context, key, run_id, &response).await?
    {
        execution.outcome = recorded.outcome.clone();
        execution.output = None;
        response = recorded;
    }
    let mut stored_bytes = 0;
    if retained {
        let record_trace = at_level(&execution.trace, recorded_level).unwrap_or_else(|| execution.trace.clone());
        let record = TraceFetchResponse {
            run_id: run_id.to_owned(),
            outcome: execution.outcome.clone(),
            output: execution.output.clone(),
            trace: record_trace,
            narration: None,
            assertions: report,
        };
        let now = context.platform.clock().now_ms();
        let (session_id, expires_at) = match retention {
            Retention::Session => (context.caller.session_id.clone(), None),
            Retention::Duration { span, .. } => {
                // Saturates: a span of centuries must not wrap into the past.
                let span_ms = i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
                (None, Some(now.saturating_add(span_ms)))
            }
            _ => (None, Some(now)),
        };
        let row = RunRow {
            run_id: run_id.to_owned(),
            tenant: context.caller.principal.tenant.clone(),
            issuer: context.caller.principal.issuer.clone(),
            subject: context.caller.principal.subject.clone(),
            language: slot.entry.name.clone(),
            session_id,
            recorded_level: recorded_level.as_str().to_owned(),
            record: serde_json::to_string(&StoredRecord {
                record: &record,
                plan: record_validated.response.plan.as_ref(),
            })
            .unwrap_or_default(),
            status: record.outcome.status.clone(),
            created_at: now,
            expires_at,
        };
        stored_bytes = row.record.len() as u64;
        // Committed before the response leaves (Part IV §5).
        let inserted = context.platform.store().run_insert(&row).await;
        if inserted.is_err() {
            stored_bytes = 0;
        }
        context.platform.count_usage(tenant, &RunUsage { outcome: &execution.outcome.status, stored_bytes, ..used });
        inserted.map_err(|e| internal(&e))?;
        return Ok(response);
    }
    context.platform.count_usage(tenant, &RunUsage { outcome: &execution.outcome.status, stored_bytes, ..used });
    Ok(response)
}

/// A stored run record: the trace-fetch response (which `trace` fetch
/// reads back; it ignores the rest) and the plan from validation, when the
/// Language returns one (Part II §5.6), for the console's Run view.
#[derive(serde::Serialize)]
struct StoredRecord<'a> {
    #[serde(flatten)]
    record: &'a TraceFetchResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<&'a pilotage_protocol::plan::Plan>,
}

/// Records `response` as the answer of `key`, held by Run `run_id`. `None`
/// when it is recorded; the response recorded instead when the claim is no
/// longer this Run's (a retry found its lease run out and recorded the
/// interrupted outcome: `idempotency.rs`).
async fn fence(
    context: &Context,
    key: &str,
    run_id: &str,
    response: &ExecuteResponse,
) -> Result<Option<ExecuteResponse>, OpError> {
    let principal = &context.caller.principal;
    let store = context.platform.store();
    let text = serde_json::to_string(response).map_err(|e| internal(&e))?;
    let recorded = store.idempotency_complete(principal.owner(), key, run_id, &text).await.map_err(|e| internal(&e))?;
    if recorded {
        return Ok(None);
    }
    let held = store.idempotency_get(principal.owner(), key).await.map_err(|e| internal(&e))?;
    let theirs = held
        .and_then(|held| held.response)
        .and_then(|text| serde_json::from_str::<ExecuteResponse>(&text).ok())
        .filter(|theirs| theirs.run_id == run_id);
    if theirs.is_some() {
        tracing::warn!(%run_id, key = %key, "the Run's idempotency claim was taken over before it finished: it answers the outcome recorded then");
    }
    Ok(theirs)
}
