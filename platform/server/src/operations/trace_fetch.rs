//! `trace`, the fetch door (Part II §6.6): the stored record of a started
//! Run, at the lower of the requested and recorded levels.
//!
//! Invariant: an unknown, expired, unstored, refused, other-session or
//! other-caller Run gets one and the same result, byte for byte
//! (Part III §7.2 whole-result indistinguishability).

use serde::Deserialize;
use serde_json::Value;

use super::{Context, OpError, arguments, request_error};
use crate::tenancy::LanguageSlot;
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_protocol::requests::TraceFetchResponse;
use pilotage_protocol::trace::{TraceLevel, at_level};

/// The one message of every unreachable Run.
pub(crate) const UNKNOWN_RUN: &str = "unknown run: it may have expired, not have been stored, or not be yours";

#[derive(Debug, Deserialize)]
struct TraceArguments {
    run_id: String,
    #[serde(default)]
    trace_level: Option<String>,
    #[serde(default)]
    question: Option<String>,
}

/// Serves a trace-fetch loop tool.
///
/// # Errors
/// `invalid_request` for `trace_level: none` or an unknown level, or a
/// `question` (narration is not declared); `not_found` for every Run the
/// caller cannot fetch.
pub(crate) async fn trace(context: &Context, slot: &LanguageSlot, raw: &Value) -> Result<Value, OpError> {
    let args: TraceArguments = arguments(raw)?;
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
    if args.question.is_some() {
        return Err(request_error(
            RequestErrorKind::InvalidRequest,
            "this server does not declare trace_fetch.narrate: omit 'question' and read the trace",
        ));
    }
    let unknown = || request_error(RequestErrorKind::NotFound, UNKNOWN_RUN);
    let row = context.platform.store().run_get(&args.run_id).await.map_err(|error| {
        tracing::error!(%error, "store failure during trace fetch");
        request_error(RequestErrorKind::Internal, "the server's storage failed; the failure was logged")
    })?;
    let principal = &context.caller.principal;
    let Some(row) = row.filter(|row| {
        row.tenant == principal.tenant
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
    Ok(serde_json::to_value(record).unwrap_or(Value::Null))
}
