//! `validate` (Part II §6.4, Part III §4.3): diagnostics, and a plan when
//! the program is valid, against the caller's catalog snapshot.
//!
//! Invariant: validation never invokes a catalog entry.

use std::sync::Arc;

use serde_json::{Value, json};
use tracing::Instrument;

use super::assertions::{Assertions, InputAt};
use super::context::CAPACITY_RETRY_MS;
use super::{Context, OpError, request_error};
use crate::tenancy::{LanguageSlot, ValidationCache};
use pilotage_engine::admission::Pool;
use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::validation::{self, Program, Validated, ValidationFailure};
use pilotage_protocol::assertions::MEMBER;
use pilotage_protocol::plan::Plan;
use pilotage_protocol::request_error::{RequestError, RequestErrorKind};
use pilotage_telemetry::metrics::ValidationResult;

/// The program argument of a loop tool, or a structural fault when a
/// single-Language validate tool lacks it (Part III §4.4 rule 8).
///
/// # Errors
/// [`OpError::Structural`] when the argument is missing.
pub(crate) fn program_argument<'a>(slot: &LanguageSlot, args: &'a Value) -> Result<&'a Value, OpError> {
    let name = &slot.description().program_argument;
    args.get(name).ok_or_else(|| {
        OpError::Structural(format!("invalid arguments: missing required member '{name}' (the program)"))
    })
}

/// Validates `program` (the argument's JSON value) with `context_value`
/// against `snapshot`, from the cache when this exact question was asked
/// before (Part IV §6).
///
/// # Errors
/// `bounds_exceeded` when a validation bound is exceeded; `internal` when
/// the validator fails.
pub(crate) async fn validated(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    program: &Value,
    context_value: Option<&Value>,
    snapshot: &CatalogSnapshot,
) -> Result<(Program, Arc<Validated>), OpError> {
    let (built, result) = observed(context, slot, program, context_value, snapshot).await?;
    let program = match built {
        Some(built) => built,
        // A cache hit built nothing; execute and firings run the program.
        None => build(slot, context, program)?,
    };
    Ok((program, result))
}

/// The program from its argument, within the engine's bounds.
fn build(slot: &LanguageSlot, context: &Context, program: &Value) -> Result<Program, OpError> {
    let bounds = context.platform.engine().bounds();
    Program::from_argument(slot.description().program_kind, program, bounds.program_bytes, bounds.nesting_depth)
        .map_err(failure_to_error)
}

/// [`validated`] for a caller that needs only the result: a cache hit
/// never builds the program's text (Part IV §6).
///
/// # Errors
/// As [`validated`].
pub(crate) async fn validation_of(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    program: &Value,
    context_value: Option<&Value>,
    snapshot: &CatalogSnapshot,
) -> Result<Arc<Validated>, OpError> {
    Ok(observed(context, slot, program, context_value, snapshot).await?.1)
}

/// A validation in its span, counted; the program when it was built (on
/// a cache miss).
async fn observed(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    program: &Value,
    context_value: Option<&Value>,
    snapshot: &CatalogSnapshot,
) -> Result<(Option<Program>, Arc<Validated>), OpError> {
    let language = &slot.entry.name;
    let span = tracing::debug_span!(
        "pilotage.validate",
        otel.name = %format_args!("validate {language}"),
        pilotage.language = %language,
        pilotage.catalog_version = %snapshot.catalog_version(),
        pilotage.cache = tracing::field::Empty,
        pilotage.valid = tracing::field::Empty,
    );
    let metrics = context.platform.engine().metrics();
    let result = async {
        let kind = slot.description().program_kind;
        let key = ValidationCache::key(
            &context.tenant.id,
            slot.component.sha256(),
            &Program::digest_of_argument(kind, program),
            snapshot.catalog_version(),
            context_value,
        );
        let span = tracing::Span::current();
        if let Some(hit) = context.platform.validations().get(&key) {
            metrics.validation_cache(true);
            span.record("pilotage.cache", "hit");
            return Ok((None, hit));
        }
        // A program beyond the bounds is refused before it counts as a miss,
        // as before the cache was asked.
        let program = build(slot, context, program)?;
        metrics.validation_cache(false);
        span.record("pilotage.cache", "miss");
        // The validator runs on this task (a fiber of its own), after the
        // tenant's turn in the validation pool.
        let result = {
            let _place = context.admit(Pool::Validation, &slot.component).await?;
            validation::validate(&slot.component, &program, context_value, snapshot).await.map_err(failure_to_error)?
        };
        let result = Arc::new(result);
        context.platform.validations().put(key, result.clone());
        Ok((Some(program), result))
    }
    .instrument(span.clone())
    .await;
    let counted = match &result {
        Ok((_, validated)) if validated.response.valid => ValidationResult::Valid,
        Ok(_) => ValidationResult::Invalid,
        Err(OpError::Request(error)) if error.error.kind == RequestErrorKind::BoundsExceeded => {
            ValidationResult::BoundsExceeded
        }
        Err(_) => ValidationResult::Failed,
    };
    metrics.validation(language, counted);
    span.record("pilotage.valid", counted == ValidationResult::Valid);
    result
}

pub(crate) fn failure_to_error(failure: ValidationFailure) -> OpError {
    match failure {
        ValidationFailure::BoundsExceeded(message) => request_error(RequestErrorKind::BoundsExceeded, message),
        // The pool itself was full (admission keeps this rare): as
        // retryable as an admission refusal.
        ValidationFailure::Capacity(message) => OpError::Request(
            RequestError::new(RequestErrorKind::BoundsExceeded, message).with_retry_after(CAPACITY_RETRY_MS),
        ),
        other => {
            tracing::error!(failure = %other, "validator failure");
            request_error(RequestErrorKind::Internal, "the Language's validator failed; the failure was logged")
        }
    }
}

/// What a validate tool answers: the validation (perhaps the cache's), and
/// when the request carried `x-assertions`, the member that says whether
/// they fit the program.
pub(crate) struct ValidateAnswer {
    /// The validation; its `response` is the tool's `structuredContent`
    /// ([`Validated::rendered`] has it serialized).
    pub(crate) validated: Arc<Validated>,
    /// The result's `x-assertions` member ([`assertions_checked`]).
    pub(crate) assertions: Option<Value>,
}

/// Serves a validate loop tool.
///
/// # Errors
/// As [`validated`], plus a structural fault without the program.
pub(crate) async fn validate(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    args: &Value,
) -> Result<ValidateAnswer, OpError> {
    let program = program_argument(slot, args)?;
    let snapshot = context.tenant.snapshot(&context.caller.principal, &slot.entry.name);
    pilotage_telemetry::spans::record_catalog_version(snapshot.catalog_version());
    let validated = validation_of(context, slot, program, args.get("context"), &snapshot).await?;
    let assertions = args.get(MEMBER).map(|raw| assertions_checked(raw, validated.response.plan.as_ref()));
    Ok(ValidateAnswer { validated, assertions })
}

/// The validate result's `x-assertions` member (docs/assertions.md, "At
/// validation"): `{"checked", "fit", "diagnostics"}`, the assertions read
/// as an execute reads them, against this validation's plan (none when
/// the program is invalid: their steps are then not checked). The input is
/// not known yet, so `equals_input` pointers are checked when the Run
/// comes. The program's own `valid` and `diagnostics` are left as they are.
fn assertions_checked(raw: &Value, plan: Option<&Plan>) -> Value {
    let diagnostics = match Assertions::read(Some(raw), plan, InputAt::Later) {
        Ok(_) => Vec::new(),
        Err(findings) => findings,
    };
    json!({
        "checked": raw.as_array().map_or(0, Vec::len),
        "fit": diagnostics.is_empty(),
        "diagnostics": diagnostics,
    })
}
