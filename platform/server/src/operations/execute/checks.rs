//! Stages 2 to 4 of an execute (Part II §6.5.2): catalog drift, then
//! revalidation of an inline program or the promotion baseline of a
//! promoted one, then input binding (context binding is part of
//! validation), then the request's assertions against the plan. Each
//! failure is a refused Run ([`Refusal`]); nothing runs, nothing is held.

use std::sync::Arc;

use serde_json::Value;

use super::answer::Refusal;
use super::request::CheckedRequest;
use super::runnable::Runnable;
use crate::invocation::promotion::drifted;
use crate::operations::assertions::{Assertions, InputAt};
use crate::operations::validate::{failure_to_error, validated};
use crate::operations::{Context, OpError, request_error};
use crate::tenancy::LanguageSlot;
use pilotage_engine::admission::Pool;
use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::validation::{self, Program, Validated, ValidationFailure};
use pilotage_protocol::capabilities::Capability;
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_protocol::diagnostic::{Diagnostic, INPUT_BINDING};
use pilotage_protocol::outcome::{CATALOG_DRIFT, PROMOTION_DRIFT};
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_telemetry::spans;

/// A program that passed stages 2 to 4: what the Run is given.
pub(super) struct Checked {
    /// The program, as the component read it.
    pub program: Program,
    /// Its validation (plan, references, statements).
    pub validated: Arc<Validated>,
    /// The catalog it was checked against, which the Run invokes against.
    pub snapshot: CatalogSnapshot,
    /// The request's assertions, read against the plan.
    pub assertions: Option<Assertions>,
}

/// Checks `request`'s program for `slot`'s Language: `Ok(Err(refusal))`
/// for a refused Run.
///
/// # Errors
/// `bounds_exceeded`/`internal` when validation or input binding cannot
/// complete; `internal` when a promoted entry's input schema does not
/// compile.
pub(super) async fn check(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    request: &CheckedRequest,
) -> Result<Result<Checked, Refusal>, OpError> {
    let language = &request.language;
    // 2. Catalog drift.
    let snapshot = context.tenant.snapshot(&context.caller.principal, language);
    spans::record_catalog_version(snapshot.catalog_version());
    let manifest = context.tenant.manifest();
    let catalog_declared = slot
        .entry
        .effective_capabilities(&manifest.manifest)
        .is_some_and(|capabilities| capabilities.declares(Capability::Catalog));
    if catalog_declared
        && let Some(expected) = &request.request.expected_catalog_version
        && expected != snapshot.catalog_version()
    {
        return Ok(Err(Refusal::new(CATALOG_DRIFT, "catalog version mismatch")));
    }

    // 3. Revalidation, or the promotion baseline.
    let (program_value, promoted_entry) = match &request.runnable {
        Runnable::Inline(program) => (program, None),
        Runnable::Promoted(program) => {
            let changed = drifted(program, &snapshot);
            if !changed.is_empty() {
                let error = format!("{} changed since this program was promoted; promote it again", changed.join(", "));
                return Ok(Err(Refusal::new(PROMOTION_DRIFT, error)));
            }
            (&program.body, snapshot.get(&program.program_ref).cloned())
        }
    };
    let input = request.request.input.as_ref();
    let (program, validated) =
        validated(context, slot, program_value, request.request.context.as_ref(), &snapshot).await?;
    if !validated.response.valid {
        if promoted_entry.is_some() {
            return Ok(Err(Refusal::new(
                PROMOTION_DRIFT,
                "the promoted program no longer validates; promote it again",
            )));
        }
        let findings = validated.response.diagnostics.clone();
        return Ok(Err(Refusal::invalid("the program is invalid; nothing ran", findings)));
    }

    // 4. Input binding.
    let findings = bind_input(context, slot, promoted_entry.as_ref(), &program, input).await?;
    if !findings.is_empty() {
        return Ok(Err(Refusal::invalid("the input does not fit the program; nothing ran", findings)));
    }
    // The request's assertions, checked against the plan and the input
    // before anything runs (docs/assertions.md); a deploy's are kept with
    // the deployment and checked against each firing's input.
    let input_at = if request.mode.deploy { InputAt::Later } else { InputAt::Given(input) };
    let plan = validated.response.plan.as_ref();
    let assertions = match Assertions::read(request.request.assertions.as_ref(), plan, input_at) {
        Ok(assertions) => assertions,
        Err(findings) => {
            return Ok(Err(Refusal::invalid("the assertions do not fit the program; nothing ran", findings)));
        }
    };
    Ok(Ok(Checked { program, validated, snapshot, assertions }))
}

/// The input's findings: against a promoted entry's `input_schema` first,
/// then, when that passes, the component's own binding.
async fn bind_input(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    promoted_entry: Option<&CatalogEntry>,
    program: &Program,
    input: Option<&Value>,
) -> Result<Vec<Diagnostic>, OpError> {
    if let Some(schema) = promoted_entry.and_then(|entry| entry.input_schema.as_ref()) {
        let empty = Value::Object(Default::default());
        let validator = jsonschema::validator_for(schema).map_err(|error| {
            request_error(
                RequestErrorKind::Internal,
                format!("the promoted entry's input_schema does not compile: {error}"),
            )
        })?;
        let findings: Vec<Diagnostic> = validator
            .iter_errors(input.unwrap_or(&empty))
            .map(|error| Diagnostic::error(INPUT_BINDING, &error.instance_path().to_string(), error.to_string()))
            .collect();
        if !findings.is_empty() {
            return Ok(findings);
        }
    }
    let _place = context.admit(Pool::Validation, &slot.component).await?;
    validation::bind_input(&slot.component, program, input).await.map_err(|failure| match failure {
        ValidationFailure::Capacity(_) => failure_to_error(failure),
        other => request_error(RequestErrorKind::BoundsExceeded, other.to_string()),
    })
}
