//! What an execute keeps (Part II §6.5.3, §6.6): one rule for whether a
//! Run's record is kept, for how long, and the record itself, for every
//! Run (an execute's, a firing's, a refused firing's).

use pilotage_protocol::plan::Plan;
use pilotage_protocol::requests::TraceFetchResponse;
use pilotage_protocol::retention::Retention;
use pilotage_protocol::trace::TraceLevel;
use pilotage_store::{RunRow, StoreError};

use crate::operations::Context;

/// How long a firing's Run is kept when its Language's retention is not a
/// duration (`none`, `session`): a deployer must be able to fetch it.
const FIRING_RETENTION: &str = "P7D";

/// Whether a Run is retained: the request's explicit `store`, else the
/// Language's `retention`, which `session` retention meets only on an MCP
/// session (`session_id`). The stored-bytes quota and the record read this
/// one rule.
pub(super) fn retained(store: Option<bool>, retention: &Retention, session_id: Option<&str>) -> bool {
    match store {
        Some(explicit) => explicit,
        None => retention.retains() && (*retention != Retention::Session || session_id.is_some()),
    }
}

/// Where a record is kept and until when (epoch milliseconds): on the
/// session for `session` retention, else until the retention's span from
/// `now` ends. A firing has no session: it is kept for the Language's span,
/// or [`FIRING_RETENTION`] when that is not a duration.
fn kept(retention: &Retention, firing: bool, session_id: Option<&str>, now: i64) -> (Option<String>, Option<i64>) {
    let for_firing;
    let retention = match retention {
        Retention::Duration { .. } => retention,
        _ if firing => {
            for_firing = Retention::parse(FIRING_RETENTION).unwrap_or(Retention::None);
            &for_firing
        }
        _ => retention,
    };
    match retention {
        Retention::Session => (session_id.map(str::to_owned), None),
        Retention::Duration { span, .. } => {
            // Saturates: a span of centuries must not wrap into the past.
            let span_ms = i64::try_from(span.as_millis()).unwrap_or(i64::MAX);
            (None, Some(now.saturating_add(span_ms)))
        }
        _ => (None, Some(now)),
    }
}

/// A Run's record, as kept.
pub(crate) struct Record<'a> {
    /// What trace fetch answers from it.
    pub record: &'a TraceFetchResponse,
    /// The plan the caller was shown, for the console's Run view.
    pub plan: Option<&'a Plan>,
    /// The Run's Language.
    pub language: &'a str,
    /// The level the trace is kept at.
    pub recorded_level: TraceLevel,
    /// The Language's retention.
    pub retention: &'a Retention,
    /// Whether the Run is a deployment's firing.
    pub firing: bool,
}

/// A stored run record: the trace-fetch response (which trace fetch reads
/// back; it ignores the rest) and the plan from validation, when the
/// Language returns one (Part II §5.6).
#[derive(serde::Serialize)]
struct StoredRecord<'a> {
    #[serde(flatten)]
    record: &'a TraceFetchResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<&'a Plan>,
}

/// Stores `record` as a Run of the caller, committed before the response
/// leaves (Part IV §5); the bytes stored.
///
/// # Errors
/// [`StoreError`] when the insert fails (nothing is stored then).
pub(crate) async fn store(context: &Context, record: Record<'_>) -> Result<u64, StoreError> {
    let principal = &context.caller.principal;
    let now = context.platform.clock().now_ms();
    let (session_id, expires_at) = kept(record.retention, record.firing, context.caller.session_id.as_deref(), now);
    let row = RunRow {
        run_id: record.record.run_id.clone(),
        tenant: principal.tenant.clone(),
        issuer: principal.issuer.clone(),
        subject: principal.subject.clone(),
        language: record.language.to_owned(),
        session_id,
        recorded_level: record.recorded_level.as_str().to_owned(),
        record: serde_json::to_string(&StoredRecord { record: record.record, plan: record.plan }).unwrap_or_default(),
        status: record.record.outcome.status.clone(),
        created_at: now,
        expires_at,
    };
    context.platform.store().run_insert(&row).await?;
    Ok(row.record.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_decides_what_is_kept() {
        let session = Retention::Session;
        let week = Retention::parse("P7D").unwrap();
        assert!(retained(None, &week, None));
        assert!(!retained(None, &Retention::None, Some("s")));
        assert!(retained(None, &session, Some("s")));
        assert!(!retained(None, &session, None), "session retention keeps nothing without a session");
        assert!(!retained(Some(false), &week, Some("s")), "an explicit store:false wins");
        assert!(retained(Some(true), &session, Some("s")));
    }

    #[test]
    fn a_firing_without_a_span_is_kept_a_week_and_a_session_record_has_no_expiry() {
        let week_ms = 7 * 86_400_000;
        assert_eq!(kept(&Retention::Session, true, None, 1_000), (None, Some(1_000 + week_ms)));
        assert_eq!(kept(&Retention::None, true, None, 0), (None, Some(week_ms)));
        assert_eq!(kept(&Retention::Session, false, Some("s"), 5), (Some("s".into()), None));
        let hour = Retention::parse("PT1H").unwrap();
        assert_eq!(kept(&hour, true, None, 0), (None, Some(3_600_000)), "a firing keeps the Language's own span");
        assert_eq!(kept(&Retention::None, false, None, 9), (None, Some(9)));
    }
}
