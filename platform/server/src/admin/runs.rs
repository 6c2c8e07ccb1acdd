//! `/admin/v1/tenants/{tenant}/runs` (retained Runs, any subject's) and
//! `/admin/v1/audit` (the audit log, a tenant admin's own records only).

use axum::Extension;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{Admin, AdminState, ApiError, ApiResult};

#[derive(Debug, Deserialize)]
pub(super) struct RunsQuery {
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

pub(super) async fn runs_list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    Query(query): Query<RunsQuery>,
) -> ApiResult {
    admin.may(&tenant)?;
    let rows = state
        .platform
        .store()
        .runs_filtered(
            &tenant,
            query.subject.as_deref(),
            query.language.as_deref(),
            query.limit.unwrap_or(50).clamp(1, 500),
        )
        .await?;
    let runs: Vec<Value> = rows
        .iter()
        .map(|row| {
            let record: Value = serde_json::from_str(&row.record).unwrap_or(Value::Null);
            json!({"run_id": row.run_id, "issuer": row.issuer, "subject": row.subject, "language": row.language, "created_at": row.created_at,
                   "expires_at": row.expires_at, "outcome": record["outcome"]})
        })
        .collect();
    Ok(Json(json!({"runs": runs})).into_response())
}

pub(super) async fn runs_get(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, run_id)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let row = state
        .platform
        .store()
        .run_get(&run_id)
        .await?
        .filter(|row| row.tenant == tenant)
        .ok_or_else(|| ApiError::not_found(format!("no run '{run_id}'")))?;
    let record: Value = serde_json::from_str(&row.record).unwrap_or(Value::Null);
    Ok(Json(json!({"run_id": row.run_id, "issuer": row.issuer, "subject": row.subject, "language": row.language, "created_at": row.created_at, "record": record})).into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct AuditQuery {
    #[serde(default)]
    limit: Option<i64>,
}

pub(super) async fn audit_list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Query(query): Query<AuditQuery>,
) -> ApiResult {
    let rows = state.platform.store().audit_log(query.limit.unwrap_or(100).clamp(1, 1000)).await?;
    let visible: Vec<_> = rows
        .into_iter()
        .filter(|row| match &admin {
            Admin::Operator(_) => true,
            Admin::TenantAdmin { tenant, .. } => row.target == *tenant || row.target.starts_with(&format!("{tenant}/")),
        })
        .collect();
    Ok(Json(json!({"audit": visible})).into_response())
}
