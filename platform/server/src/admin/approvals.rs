//! `/admin/v1/tenants/{tenant}/policy` (the tenant's policy on risk: an
//! operator sets it, a tenant administrator reads it) and
//! `/admin/v1/tenants/{tenant}/approvals` (approval requests: list, read,
//! approve, reject; `crate::policy`).

use axum::extract::{ConnectInfo, Path, Query, State};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{Admin, AdminState, ApiError, ApiResult, audit, parse_json};
use super::tenants::{policy_json, tenant_row};
use crate::changes::{Change, announce};
use crate::policy::Policy;
use crate::policy::approvals::{self, Approver, COMMENT_MAX_CHARS, DecideError};
use crate::tenancy::load::apply_row;
use pilotage_store::ApprovalRow;

pub(super) async fn policy_get(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
) -> ApiResult {
    admin.may(&tenant)?;
    let row = tenant_row(&state, &tenant).await?;
    Ok(Json(policy_json(&row.policy)).into_response())
}

pub(super) async fn policy_put(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    super::admission::AdminBody(body): super::admission::AdminBody,
) -> ApiResult {
    if !matches!(admin, Admin::Operator(_)) {
        return Err(ApiError::forbidden("only an operator sets a tenant's policy"));
    }
    let policy: Policy = parse_json(&body)?;
    if let Err(crate::policy::PolicyError::OutOfRange { member, message }) = policy.check() {
        return Err(ApiError::field(&member, message));
    }
    let mut row = tenant_row(&state, &tenant).await?;
    let before = policy_json(&row.policy);
    row.policy = serde_json::to_string(&policy).unwrap_or_else(|_| "{}".into());
    state.platform.store().tenant_update(&row).await?;
    if state.platform.tenant(&tenant).is_some() {
        apply_row(&state.platform, &row);
    }
    announce(&state.platform, vec![Change::Tenant { tenant: tenant.clone() }]).await;
    let after = policy_json(&row.policy);
    audit(
        &state,
        &admin,
        "tenant.policy",
        &tenant,
        json!({"from_version": before["version"], "version": after["version"], "policy": after["policy"]}),
    )
    .await;
    Ok(Json(after).into_response())
}

/// An approval as the admin API and the CLI show it.
pub(crate) fn approval_json(row: &ApprovalRow, now_ms: i64, url: String) -> Value {
    json!({
        "id": row.id,
        "tenant": row.tenant,
        "issuer": row.issuer,
        "subject": row.subject,
        "language": row.language,
        "state": approvals::state_at(row, now_ms),
        "created_at": pilotage_engine::clock::rfc3339(row.created_at),
        "expires_at": pilotage_engine::clock::rfc3339(row.expires_at),
        "decided_by": row.decided_by,
        "decided_at": row.decided_at.map(pilotage_engine::clock::rfc3339),
        "decided_from": row.decided_from,
        "used_by_run": row.used_by_run,
        "binding": row.binding,
        "request": serde_json::from_str::<Value>(&row.request).unwrap_or(Value::Null),
        "url": url,
    })
}

#[derive(Debug, Deserialize)]
pub(super) struct ApprovalsQuery {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

pub(super) async fn approvals_list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    Query(query): Query<ApprovalsQuery>,
) -> ApiResult {
    admin.may(&tenant)?;
    let now = state.platform.clock().now_ms();
    // `expired` is not stored: read every state and keep those past their
    // time (and `pending`, `approved` keep only those still counting).
    let stored = match query.state.as_deref() {
        None | Some("") | Some("expired") => None,
        Some(known @ ("pending" | "approved" | "rejected" | "used")) => Some(known),
        Some(other) => {
            return Err(ApiError::field(
                "state",
                format!("unknown state '{other}'; use pending, approved, rejected, used or expired"),
            ));
        }
    };
    let rows =
        state.platform.store().approvals_of_tenant(&tenant, stored, query.limit.unwrap_or(50).clamp(1, 500)).await?;
    let approvals: Vec<Value> = rows
        .iter()
        .filter(|row| {
            query.state.as_deref().is_none_or(|wanted| wanted.is_empty() || approvals::state_at(row, now) == wanted)
        })
        .map(|row| approval_json(row, now, approvals::page_url(&state.platform, &row.id)))
        .collect();
    Ok(Json(json!({"approvals": approvals})).into_response())
}

pub(super) async fn approvals_get(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, id)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let row =
        state.platform.store().approval(&tenant, &id).await?.ok_or_else(|| ApiError::not_found("no such approval"))?;
    let now = state.platform.clock().now_ms();
    Ok(Json(approval_json(&row, now, approvals::page_url(&state.platform, &row.id))).into_response())
}

/// The body of a decision: nothing, or `{"comment": "…"}` (at most
/// [`COMMENT_MAX_CHARS`] characters, kept in the audit record).
#[derive(Debug, Default, Deserialize)]
struct Decided {
    #[serde(default)]
    comment: String,
}

pub(super) async fn approvals_approve(
    state: State<AdminState>,
    admin: Extension<Admin>,
    path: Path<(String, String)>,
    peer: Option<Extension<ConnectInfo<std::net::SocketAddr>>>,
    body: axum::body::Bytes,
) -> ApiResult {
    decide(state, admin, path, peer, &body, true).await
}

pub(super) async fn approvals_reject(
    state: State<AdminState>,
    admin: Extension<Admin>,
    path: Path<(String, String)>,
    peer: Option<Extension<ConnectInfo<std::net::SocketAddr>>>,
    body: axum::body::Bytes,
) -> ApiResult {
    decide(state, admin, path, peer, &body, false).await
}

async fn decide(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, id)): Path<(String, String)>,
    peer: Option<Extension<ConnectInfo<std::net::SocketAddr>>>,
    body: &[u8],
    approve: bool,
) -> ApiResult {
    admin.may(&tenant)?;
    let decided: Decided =
        if body.iter().all(u8::is_ascii_whitespace) { Decided::default() } else { parse_json(body)? };
    let comment = decided.comment.trim();
    if comment.chars().count() > COMMENT_MAX_CHARS {
        return Err(ApiError::field("comment", format!("a comment is at most {COMMENT_MAX_CHARS} characters")));
    }
    let approver = match &admin {
        Admin::Operator(who) => Approver { tenant: None, who: who.clone() },
        Admin::TenantAdmin { tenant, who } => Approver { tenant: Some(tenant.clone()), who: who.clone() },
    };
    let address = peer.map_or_else(|| "unknown".to_owned(), |Extension(ConnectInfo(addr))| addr.ip().to_string());
    let row = approvals::decide(&state.platform, &tenant, &id, approve, &approver, &address, comment)
        .await
        .map_err(decide_error)?;
    let now = state.platform.clock().now_ms();
    Ok(Json(approval_json(&row, now, approvals::page_url(&state.platform, &row.id))).into_response())
}

/// The admin API's answer to a decision that was not recorded.
pub(super) fn decide_error(error: DecideError) -> ApiError {
    match error {
        DecideError::NotFound => ApiError::not_found("no such approval"),
        DecideError::OwnRequest => ApiError::forbidden("the subject who asked cannot decide its own request"),
        DecideError::NotPending(state) => ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "conflict",
            format!("this approval is {state}: nothing was decided"),
        ),
        DecideError::Store(error) => ApiError::internal(error),
    }
}
