//! The stages of an execute in their order (this module's parent
//! describes each): a checked request, its checks, admission, the Run,
//! the answer.

use std::sync::Arc;

use serde_json::Value;

use super::admission::{self, Admission};
use super::answer::{ExecuteAnswer, new_run_id, observe_outcome};
use super::request::{self, Stage1};
use super::{checks, run};
use crate::operations::{Context, OpError};
use crate::tenancy::LanguageSlot;
use pilotage_engine::execution::RunControl;
use pilotage_protocol::outcome::VALIDATION_ERROR;

/// Serves an execute loop tool.
///
/// # Errors
/// Request errors of Part III §7.2 for well-formedness failures;
/// `bounds_exceeded`/`internal` when revalidation cannot complete. A
/// refused or failed Run is an answer, never an error.
pub(crate) async fn execute(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    raw: &Value,
) -> Result<ExecuteAnswer, OpError> {
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
) -> Result<ExecuteAnswer, OpError> {
    let request = match request::check(context, slot, raw).await? {
        Stage1::New(request) => request,
        Stage1::Replay(answer) => return Ok(*answer),
    };
    let language = request.language.clone();
    let run_id = new_run_id();
    let checked = match checks::check(context, slot, &request).await? {
        Ok(checked) => checked,
        Err(refusal) => return Ok(refusal.answer(context, &language, run_id)),
    };
    let (held, refund) = match admission::admit(context, slot, &request, &checked, &run_id).await? {
        Admission::Admitted { held, refund } => (held, refund),
        Admission::Replay(answer) => return Ok(*answer),
        Admission::Refused(refusal) => return Ok(refusal.answer(context, &language, run_id)),
    };
    // The tenant's policy may bound the Run's invocations below the
    // platform's bound (a budget of invocations per Run).
    let mut control = control.clone();
    if let Some(max) = context.tenant.policy().max_invocations_per_run {
        control.max_invocations = Some(max);
    }
    let request = *request;
    let run = run::RunRequest {
        slot: slot.clone(),
        program: checked.program,
        validated: checked.validated,
        input: request.request.input,
        context_value: request.request.context,
        snapshot: checked.snapshot,
        mode: request.mode,
        run_id: run_id.clone(),
        requested_level: request.requested_level,
        retained: request.retained,
        key: request.key.map(|print| print.key),
        control,
        assertions: checked.assertions,
    };
    let response = match run::run_detached(context, run, held).await {
        Ok(response) => response,
        Err(error) => {
            refund.give_back().await;
            return Err(error);
        }
    };
    observe_outcome(context, &language, &run_id, &response.outcome.status);
    // A Run the component refused holds no key and spends no budget
    // (refused Runs have no effects and may be retried with the same key
    // once corrected); any other Run recorded its response as the key's.
    if response.outcome.status == VALIDATION_ERROR {
        refund.give_back().await;
    } else {
        refund.keep();
    }
    Ok(response.into())
}
