//! `trace`, the fetch door (Part II §6.6): the stored record of a started
//! Run, at the lower of the requested and recorded levels.
//!
//! Where the Language declares `trace_fetch.narrate`, the response also
//! carries `narration` (Part II §6.6 "Narration"), made by
//! [`narration::narrate`](super::narration::narrate) from the record as
//! returned, after the level cut, and the request may carry a `question`;
//! elsewhere a `question` is `invalid_request` (Part III §4.4).
//!
//! Invariant: an unknown, expired, unstored, refused, other-session or
//! other-caller Run gets one and the same result, byte for byte
//! (Part III §7.2 whole-result indistinguishability).
//!
//! Invariant: the facts (`run_id`, `outcome`, `output`, `trace`) do not
//! depend on the `question`; only `narration` does.

use serde_json::Value;

use super::narration::{QUESTION_MAX_CHARS, narrate};
use super::{Context, OpError, arguments, request_error, storage_error};
use crate::tenancy::LanguageSlot;
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_protocol::requests::{TraceFetchRequest, TraceFetchResponse};
use pilotage_protocol::trace::{TraceLevel, at_level};

/// The one message of every unreachable Run.
pub(crate) const UNKNOWN_RUN: &str = "unknown run: it may have expired, not have been stored, or not be yours";

/// Serves a trace-fetch loop tool (Part II §6.6): the stored record at the
/// lower of the requested and recorded levels, with `narration` where the
/// Language declares `trace_fetch.narrate`.
///
/// # Errors
/// `invalid_request` for `trace_level: none` or an unknown level, for a
/// `question` where narration is not declared, or for one longer than
/// [`QUESTION_MAX_CHARS`]; `not_found` for every Run the caller cannot
/// fetch.
pub(crate) async fn trace(context: &Context, slot: &LanguageSlot, raw: &Value) -> Result<TraceFetchResponse, OpError> {
    let args: TraceFetchRequest = arguments(raw)?;
    let requested = match args.trace_level.as_deref() {
        None => None,
        Some("none") => {
            return Err(request_error(
                RequestErrorKind::InvalidRequest,
                "trace_level 'none' only applies to execute; ask for summary or full",
            ));
        }
        Some(text) => match TraceLevel::parse(text) {
            Some(level) => Some(level),
            None => {
                return Err(request_error(
                    RequestErrorKind::InvalidRequest,
                    format!("unknown trace_level '{text}'; use summary or full"),
                ));
            }
        },
    };
    let narrates = slot.narrates();
    let question = admitted_question(narrates, args.question.as_deref())?;
    let unknown = || request_error(RequestErrorKind::NotFound, UNKNOWN_RUN);
    let row =
        context.platform.store().run_get(&args.run_id).await.map_err(|error| storage_error(&error, "trace fetch"))?;
    let principal = &context.caller.principal;
    let Some(row) = row.filter(|row| {
        row.tenant == principal.tenant
            && row.issuer == principal.issuer
            && row.subject == principal.subject
            && row.language == slot.entry.name
            && row.expires_at.is_none_or(|expires| expires > context.platform.clock().now_ms())
            && row.session_id.as_ref().is_none_or(|session| Some(session) == context.caller.session_id.as_ref())
    }) else {
        return Err(unknown());
    };
    let mut record: TraceFetchResponse = serde_json::from_str(&row.record).map_err(|error| {
        tracing::error!(%error, run_id = %row.run_id, "a stored run record does not parse");
        request_error(RequestErrorKind::Internal, "a stored record is unreadable; the failure was logged")
    })?;
    if let Some(level) = requested {
        record.trace = at_level(&record.trace, level).unwrap_or(record.trace);
    }
    // Narrated from the record as it is returned, so the narration knows
    // nothing the response does not show.
    record.narration = None;
    if narrates {
        record.narration = Some(narrate(&record, question, &slot.description().run_statuses));
    }
    Ok(record)
}

/// The `question` to answer (Part II §6.6, Part III §4.4): `None` when
/// absent or blank.
///
/// # Errors
/// `invalid_request` when a question is given and `narrates` is false, or
/// when it is longer than [`QUESTION_MAX_CHARS`] characters.
fn admitted_question(narrates: bool, question: Option<&str>) -> Result<Option<&str>, OpError> {
    let Some(question) = question else { return Ok(None) };
    if !narrates {
        return Err(request_error(
            RequestErrorKind::InvalidRequest,
            "this Language does not declare trace_fetch.narrate: omit 'question' and read the trace",
        ));
    }
    let length = question.chars().count();
    if length > QUESTION_MAX_CHARS {
        return Err(request_error(
            RequestErrorKind::InvalidRequest,
            format!("'question' has {length} characters; at most {QUESTION_MAX_CHARS} are accepted"),
        ));
    }
    Ok(Some(question.trim()).filter(|question| !question.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(result: Result<Option<&str>, OpError>) -> String {
        match result {
            Err(OpError::Request(error)) => error.kind().as_str().to_owned(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn a_question_needs_narrate_declared() {
        assert_eq!(kind(admitted_question(false, Some("why?"))), "invalid_request");
        assert_eq!(admitted_question(false, None), Ok(None));
        assert_eq!(admitted_question(true, Some(" why? ")), Ok(Some("why?")));
        assert_eq!(admitted_question(true, Some("   ")), Ok(None));
    }

    #[test]
    fn a_question_is_bounded_in_characters_not_bytes() {
        let longest = "é".repeat(QUESTION_MAX_CHARS);
        assert_eq!(admitted_question(true, Some(&longest)), Ok(Some(longest.as_str())));
        let longer = format!("{longest}?");
        assert_eq!(kind(admitted_question(true, Some(&longer))), "invalid_request");
    }
}
