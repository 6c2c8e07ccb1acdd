//! `/admin/v1/tenants/{tenant}/usage` and `/admin/v1/usage` (every
//! tenant's, an operator's only): what tenants' Runs used per UTC day
//! (`crate::tenancy::usage`), as JSON or CSV (`?format=csv` or `Accept:
//! text/csv`), for billing and sizing. The figures waiting in this
//! replica's memory are stored first, so a read follows the Runs it
//! served; other replicas' last few seconds arrive with their next flush.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use chrono::NaiveDate;
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{Admin, AdminState, ApiError, ApiResult};
use crate::tenancy::usage::{csv_of, day_of, totals};

/// Days shown when `from` is not given: the last 30, today included.
const DEFAULT_DAYS: u64 = 30;
/// The longest range one request reads: a year and a day.
const MAX_DAYS: i64 = 366;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UsageQuery {
    /// The first day, `YYYY-MM-DD` (UTC).
    #[serde(default)]
    from: Option<String>,
    /// The last day, included (default: today).
    #[serde(default)]
    to: Option<String>,
    /// `json` (the default) or `csv`.
    #[serde(default)]
    format: Option<String>,
}

fn day(field: &str, text: &str) -> Result<NaiveDate, ApiError> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|_| ApiError::field(field, format!("'{text}' is not a day: use YYYY-MM-DD (UTC)")))
}

/// The range asked for, as `(from, to)` days.
fn range(state: &AdminState, query: &UsageQuery) -> Result<(String, String), ApiError> {
    let today = day("to", &day_of(state.platform.clock().now_ms()))?;
    let to = match &query.to {
        Some(text) => day("to", text)?,
        None => today,
    };
    let from = match &query.from {
        Some(text) => day("from", text)?,
        None => to - chrono::Days::new(DEFAULT_DAYS - 1),
    };
    if from > to {
        return Err(ApiError::field("from", format!("{from} is after {to}")));
    }
    if (to - from).num_days() >= MAX_DAYS {
        return Err(ApiError::field("from", format!("at most {MAX_DAYS} days per request")));
    }
    Ok((from.to_string(), to.to_string()))
}

fn wants_csv(query: &UsageQuery, headers: &HeaderMap) -> Result<bool, ApiError> {
    match query.format.as_deref() {
        Some("csv") => Ok(true),
        Some("json") => Ok(false),
        Some(other) => Err(ApiError::field("format", format!("unknown format '{other}'; use json or csv"))),
        None => Ok(headers
            .get(header::ACCEPT)
            .and_then(|accept| accept.to_str().ok())
            .is_some_and(|accept| accept.contains("text/csv"))),
    }
}

/// `GET /admin/v1/tenants/{tenant}/usage?from=&to=&format=`.
pub(super) async fn tenant_usage(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    Query(query): Query<UsageQuery>,
    headers: HeaderMap,
) -> ApiResult {
    admin.may(&tenant)?;
    answer(&state, Some(&tenant), &query, &headers).await
}

/// `GET /admin/v1/usage?from=&to=&format=`: every tenant's (operators).
pub(super) async fn all_usage(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Query(query): Query<UsageQuery>,
    headers: HeaderMap,
) -> ApiResult {
    if !matches!(admin, Admin::Operator(_)) {
        return Err(ApiError::forbidden("every tenant's usage is an operator's; ask for /tenants/{tenant}/usage"));
    }
    answer(&state, None, &query, &headers).await
}

async fn answer(state: &AdminState, tenant: Option<&str>, query: &UsageQuery, headers: &HeaderMap) -> ApiResult {
    let (from, to) = range(state, query)?;
    let csv = wants_csv(query, headers)?;
    // This replica's latest figures first; a failure here is logged by the
    // flusher's next try, and the stored figures are still worth showing.
    if let Err(error) = state.platform.flush_usage().await {
        tracing::warn!(%error, "usage figures could not be stored before a read");
    }
    let rows = state.platform.store().usage_of(tenant, &from, &to).await?;
    if csv {
        let body = csv_of(&rows);
        return Ok(([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], body).into_response());
    }
    let days: Vec<Value> = rows
        .iter()
        .map(|row| {
            json!({"tenant": row.tenant, "day": row.day, "kind": row.kind, "outcome": row.outcome, "runs": row.runs,
                   "invocations": row.invocations, "fuel": row.fuel, "wall_time_ms": row.wall_time_ms,
                   "stored_bytes": row.stored_bytes})
        })
        .collect();
    let mut body = json!({"from": from, "to": to, "days": days, "totals": totals(&rows)});
    if let Some(tenant) = tenant {
        body["tenant"] = json!(tenant);
    }
    Ok(Json(body).into_response())
}
