//! A deployment's firing as a Run (Part II §6.5.7): the deployed body,
//! re-checked against the deployer's catalog, run as the deployer and
//! always retained, refused or not.

use std::sync::Arc;

use pilotage_engine::admission::Pool;
use pilotage_protocol::outcome::{CATALOG_DRIFT, Outcome, RESOURCE_EXHAUSTED, VALIDATION_ERROR};
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_protocol::requests::{ExecuteResponse, TraceFetchResponse};
use pilotage_protocol::trace::TraceLevel;
use serde_json::Value;

use super::assertions::{Assertions, InputAt};
use super::execute::{Held, Record, RunMode, RunRequest, internal, observe_outcome, run_detached, store_record};
use super::validate::validated;
use super::{Context, OpError, request_error};
use crate::tenancy::LanguageSlot;

/// Runs one firing of `deployment` (Part II §6.5.7: a later execution of
/// the deployed body) as its deploying principal (`context.caller`), with
/// `input` the firing (`{"trigger", "event", "at"}`) and `clock_ms` the
/// platform's clock as `effects.now`. Before anything runs, every entry
/// the body referenced when it was deployed must still be visible and
/// unchanged, and the body must still validate; otherwise the firing's Run
/// is `catalog_drift` or `validation_error` and nothing runs. Every
/// firing's Run is retained under `run_id`, refused or not.
///
/// # Errors
/// [`OpError`] when the body cannot be validated at all or the store
/// fails.
pub(crate) async fn fire(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    deployment: &crate::deployments::model::Deployment,
    input: Value,
    clock_ms: i64,
    run_id: &str,
) -> Result<ExecuteResponse, OpError> {
    let language = slot.entry.name.clone();
    let snapshot = context.tenant.snapshot(&context.caller.principal, &language);
    let changed: Vec<&str> = deployment
        .baseline
        .iter()
        .filter(|(id, recorded)| {
            snapshot.get(id).map(pilotage_protocol::catalog::CatalogEntry::baseline).as_ref() != Some(*recorded)
        })
        .map(|(id, _)| id.as_str())
        .collect();
    let body = match slot.description().program_kind {
        pilotage_engine::description::ProgramKind::Json => serde_json::from_str(&deployment.row.body)
            .map_err(|e| request_error(RequestErrorKind::Internal, format!("the stored body is not JSON: {e}")))?,
        pilotage_engine::description::ProgramKind::Text => Value::String(deployment.row.body.clone()),
    };
    let context_value: Option<Value> =
        deployment.row.context.as_deref().and_then(|text| serde_json::from_str(text).ok());
    let mut retry_after_ms = None;
    let refusal = if changed.is_empty() {
        let (program, validated) = validated(context, slot, &body, context_value.as_ref(), &snapshot).await?;
        // The assertions the deployment keeps, checked against this
        // firing's input before anything runs.
        let assertions = match (&deployment.row.assertions, validated.response.valid) {
            (Some(kept), true) => {
                let raw: Value = serde_json::from_str(kept).map_err(|e| {
                    request_error(RequestErrorKind::Internal, format!("the kept assertions are not JSON: {e}"))
                })?;
                Assertions::read(Some(&raw), validated.response.plan.as_ref(), InputAt::Given(Some(&input)))
            }
            _ => Ok(None),
        };
        // A firing takes its turn in the execution pool like any Run; one
        // that gets no place is a refused Run, retained like the others.
        let place = if validated.response.valid && assertions.is_ok() {
            let admission = context.platform.engine().admission();
            Some(admission.admit(Pool::Execution, &context.tenant.id, slot.component.need()).await)
        } else {
            None
        };
        if let Some(Err(refused)) = &place {
            retry_after_ms = Some(refused.retry_after_ms);
            Outcome::failure(RESOURCE_EXHAUSTED, refused.to_string())
        } else if let Some(Ok(place)) = place {
            let mode = RunMode { deploy: false, test_run: false, clock_ms: Some(clock_ms.max(0) as u64), firing: true };
            let request = RunRequest {
                slot: slot.clone(),
                program,
                validated,
                input: Some(input),
                context_value,
                snapshot,
                mode,
                run_id: run_id.to_owned(),
                requested_level: Some(TraceLevel::Full),
                retained: true,
                key: None,
                control: Default::default(),
                assertions: assertions.ok().flatten(),
            };
            let response = run_detached(context, request, Held { place, lease: None, slot: None }).await?;
            observe_outcome(context, &language, run_id, &response.outcome.status);
            return Ok(response);
        } else if let Err(findings) = &assertions {
            let why: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
            Outcome::failure(
                VALIDATION_ERROR,
                format!("the deployment's assertions do not fit this firing; nothing ran: {}", why.join("; ")),
            )
        } else {
            Outcome::failure(
                VALIDATION_ERROR,
                "the deployed body no longer validates against the deployer's catalog; nothing ran: deploy it again",
            )
        }
    } else {
        Outcome::failure(
            CATALOG_DRIFT,
            format!(
                "{} changed or is no longer visible to the deployer since the deployment; nothing ran: deploy it again",
                changed.join(", ")
            ),
        )
    };
    observe_outcome(context, &language, run_id, &refusal.status);
    let record = TraceFetchResponse {
        run_id: run_id.to_owned(),
        outcome: refusal.clone(),
        output: None,
        trace: pilotage_protocol::trace::Trace {
            run_id: run_id.to_owned(),
            level: TraceLevel::Full,
            steps: Vec::new(),
            stats: None,
        },
        narration: None,
        assertions: None,
    };
    let stored = store_record(
        context,
        Record {
            record: &record,
            plan: None,
            language: &language,
            recorded_level: TraceLevel::Full,
            retention: &slot.exposure.retention,
            firing: true,
        },
    )
    .await;
    // A refused firing is a Run of the tenant's usage that ran nothing.
    context.platform.count_usage(
        &context.caller.principal.tenant,
        &crate::tenancy::usage::RunUsage {
            kind: crate::tenancy::usage::UsageKind::Firing,
            outcome: &record.outcome.status,
            invocations: 0,
            fuel: 0,
            wall_time: std::time::Duration::ZERO,
            stored_bytes: *stored.as_ref().unwrap_or(&0),
        },
    );
    stored.map_err(|e| internal(&e))?;
    Ok(ExecuteResponse {
        run_id: run_id.to_owned(),
        outcome: refusal,
        output: None,
        diagnostics: None,
        trace: None,
        retry_after_ms,
        assertions: None,
    })
}
