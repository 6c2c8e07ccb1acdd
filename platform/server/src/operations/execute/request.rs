//! Stage 1 of an execute, well-formedness (Part II §6.5.2 step 1): the
//! tool's arguments read once into the protocol's `ExecuteRequest`, then
//! every member checked against what the Language declares, giving one
//! [`CheckedRequest`] the later stages read and never re-parse. A request
//! whose idempotency key already holds an answer is answered from it here
//! (`key`), before anything else is looked at.

use std::sync::Arc;

use serde_json::Value;

use super::answer::ExecuteAnswer;
use super::key::{self, KeyPrint};
use super::retention;
use super::run::RunMode;
use super::runnable::Runnable;
use crate::operations::{Context, OpError, request_error};
use crate::policy::RunKind;
use crate::tenancy::LanguageSlot;
use pilotage_protocol::capabilities::SubFeature;
use pilotage_protocol::manifest::ExecutionMode;
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_protocol::requests::ExecuteRequest;
use pilotage_protocol::retention::Retention;
use pilotage_protocol::trace::{TraceLevel, effective_level};

/// The message every unresolvable `program_ref` gets, whether it does not
/// exist or is not visible to the caller (Part II §6.5.2 step 1).
const UNKNOWN_PROGRAM_REF: &str = "unknown program_ref: promote the program first, or look it up in the catalog";

/// An execute request that passed step 1: what later stages read.
pub(super) struct CheckedRequest {
    /// The Language's name.
    pub language: String,
    /// What runs.
    pub runnable: Runnable,
    /// The protocol's request (its `program` moved into [`Self::runnable`]).
    pub request: ExecuteRequest,
    /// The trace level asked for, parsed.
    pub requested_level: Option<TraceLevel>,
    /// Deploy, test Run, simulated clock.
    pub mode: RunMode,
    /// The kind of Run, as the tenant's policy sees it.
    pub kind: RunKind,
    /// Whether the Run's record is kept ([`retention::retained`]).
    pub retained: bool,
    /// The idempotency key and what it fingerprints, when it has one.
    pub key: Option<KeyPrint>,
}

/// What stage 1 gives: a request to go on with, or the answer its key
/// already holds.
pub(super) enum Stage1 {
    /// A new request.
    New(Box<CheckedRequest>),
    /// A replay of the key's answer (Part II §6.5.6).
    Replay(Box<ExecuteAnswer>),
}

/// Checks `raw`, an execute tool's arguments, for `slot`'s Language.
///
/// # Errors
/// Structural faults (a reserved member of the wrong JSON type) and the
/// request errors of Part II §6.5.2 step 1: both or neither of program and
/// `program_ref`, an unknown `program_ref` (`not_found`), an unknown
/// `trace_level` or `mode`, an undeclared `test_run` or idempotency, a
/// deploy the component cannot install, a bad simulated clock, a `store`
/// the retention forbids, an idempotency conflict; a store failure reading
/// the key.
pub(super) async fn check(context: &Context, slot: &Arc<LanguageSlot>, raw: &Value) -> Result<Stage1, OpError> {
    let description = slot.description();
    let language = slot.entry.name.clone();
    let mut request = ExecuteRequest::from_arguments(raw, &description.program_argument)
        .map_err(|error| OpError::Structural(format!("invalid arguments: {error}")))?;
    let manifest = context.tenant.manifest();
    let map = slot.entry.effective_capabilities(&manifest.manifest);
    let declares_sub = |feature| map.as_ref().is_some_and(|m| m.declares_sub(feature));

    let runnable = runnable(context, slot, &mut request).await?;
    let requested_level = match request.trace_level.as_deref() {
        None => None,
        Some(text) => Some(TraceLevel::parse(text).ok_or_else(|| {
            request_error(
                RequestErrorKind::InvalidRequest,
                format!("unknown trace_level '{text}'; use none, summary or full"),
            )
        })?),
    };
    if request.test_run.is_some() && !declares_sub(SubFeature::TestRun) {
        return Err(request_error(
            RequestErrorKind::InvalidRequest,
            format!("{language} does not declare execute.test_run; omit 'test_run'"),
        ));
    }
    let mode = mode(slot, &request)?;
    let kind = match (mode.test_run, mode.deploy) {
        (true, _) => RunKind::Test,
        (false, true) => RunKind::Deploy,
        (false, false) => RunKind::Immediate,
    };
    let retention = &slot.exposure.retention;
    check_store(&language, retention, request.store, context.caller.session_id.is_some())?;
    let retained = retention::retained(request.store, retention, context.caller.session_id.as_deref());
    let key = match &request.idempotency_key {
        Some(key) if declares_sub(SubFeature::Idempotency) => {
            let print = KeyPrint::of(key, &language, &runnable, &request);
            let level = effective_level(requested_level, description.trace_ceiling);
            if let Some(answer) = key::answered(context, &print, level).await? {
                return Ok(Stage1::Replay(Box::new(answer)));
            }
            Some(print)
        }
        Some(_) => {
            return Err(request_error(
                RequestErrorKind::InvalidRequest,
                format!("{language} does not declare execute.idempotency; omit 'idempotency_key'"),
            ));
        }
        None => None,
    };
    Ok(Stage1::New(Box::new(CheckedRequest {
        language,
        runnable,
        request,
        requested_level,
        mode,
        kind,
        retained,
        key,
    })))
}

/// The program that runs: exactly one of the inline program and
/// `program_ref`, the latter promoted for this Language and visible to the
/// caller.
async fn runnable(context: &Context, slot: &LanguageSlot, request: &mut ExecuteRequest) -> Result<Runnable, OpError> {
    let argument = &slot.description().program_argument;
    let language = &slot.entry.name;
    match (request.program.take(), &request.program_ref) {
        (Some(_), Some(_)) => Err(request_error(
            RequestErrorKind::InvalidRequest,
            format!("give either '{argument}' (an inline program) or 'program_ref', not both"),
        )),
        (None, None) => Err(request_error(
            RequestErrorKind::InvalidRequest,
            format!("give '{argument}' (an inline program) or 'program_ref' (a promoted program)"),
        )),
        (Some(program), None) => Ok(Runnable::Inline(program)),
        (None, Some(reference)) => {
            let find = || {
                let snapshot = context.tenant.snapshot(&context.caller.principal, language);
                context
                    .tenant
                    .promoted(reference)
                    .filter(|program| &program.language == language && snapshot.get(reference).is_some())
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
            promoted
                .map(Runnable::Promoted)
                .ok_or_else(|| request_error(RequestErrorKind::NotFound, UNKNOWN_PROGRAM_REF))
        }
    }
}

/// How the Run runs: the `mode` member against the Language's execution
/// mode, `test_run`, and a test run's simulated clock (the input's `at`,
/// which the component reads as `effects.now`).
fn mode(slot: &LanguageSlot, request: &ExecuteRequest) -> Result<RunMode, OpError> {
    let description = slot.description();
    let language = &slot.entry.name;
    let invalid = |message: String| Err(request_error(RequestErrorKind::InvalidRequest, message));
    let deploy = match (description.execution, request.mode.as_deref()) {
        (ExecutionMode::Both, Some("immediate")) => false,
        (ExecutionMode::Both, Some("deploy")) => true,
        (ExecutionMode::Both, Some(other)) => {
            return invalid(format!("unknown mode '{other}'; use immediate or deploy"));
        }
        (ExecutionMode::Both, None) => {
            return invalid(format!("{language} runs both ways: give mode immediate or deploy"));
        }
        (_, Some(_)) => return invalid(format!("{language} has one execution mode; omit 'mode'")),
        (mode, None) => mode == ExecutionMode::Deploy,
    };
    let test_run = request.test_run == Some(true);
    if deploy && !test_run && !slot.component.exports_deploy() {
        return Err(request_error(
            RequestErrorKind::Unsupported,
            format!(
                "{language} declares execution {:?} but its component does not export 'deploy' (world deploying-language of pilotage:language@1.2.0), so it cannot install programs here",
                description.execution
            ),
        ));
    }
    let clock_ms = match request.input.as_ref().and_then(|input| input.get("at")) {
        Some(at) if test_run => match at.as_str().and_then(pilotage_engine::clock::parse_rfc3339) {
            Some(ms) if ms >= 0 => Some(ms as u64),
            _ => {
                return invalid(format!(
                    "input.at is the test run's simulated clock: an RFC 3339 instant such as 2026-12-03T14:03:00+01:00, not {at}"
                ));
            }
        },
        _ => None,
    };
    Ok(RunMode { deploy: deploy && !test_run, test_run, clock_ms, firing: false })
}

/// Refuses `store: true` where nothing can be stored: a Language that
/// retains nothing, or `session` retention without an MCP session.
fn check_store(language: &str, retention: &Retention, store: Option<bool>, on_session: bool) -> Result<(), OpError> {
    if store != Some(true) {
        return Ok(());
    }
    if !retention.retains() {
        return Err(request_error(
            RequestErrorKind::Unsupported,
            format!("{language} declares retention '{retention}': runs cannot be stored; omit 'store'"),
        ));
    }
    if *retention == Retention::Session && !on_session {
        return Err(request_error(
            RequestErrorKind::Unsupported,
            "retention is 'session' and this request has no MCP session: runs cannot be stored; omit 'store'",
        ));
    }
    Ok(())
}
