//! `/admin/v1/tenants`: create, list, show, change (name, disabled,
//! quotas) and delete tenants; only an operator creates, changes and
//! deletes them.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::admission::AdminBody;
use super::api::{Admin, AdminState, ApiError, ApiResult, audit, parse_json};
use crate::changes::{Change, announce};
use crate::egress::EgressPolicy;
use crate::tenancy::Quotas;
use crate::tenancy::load::apply_row;
use pilotage_store::{Scope, TenantRow};

/// Checks a tenant id: 1–63 of `a-z`, `0-9`, `-`, starting with a letter
/// or digit.
pub(crate) fn check_tenant_id(id: &str) -> Result<(), ApiError> {
    let valid = !id.is_empty()
        && id.len() <= 63
        && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !id.starts_with('-');
    if valid { Ok(()) } else { Err(ApiError::field("id", "1 to 63 of a-z, 0-9 and '-', not starting with '-'")) }
}

/// The JSON of a stored policy (`{}` reads as the default).
pub(super) fn policy_json(text: &str) -> Value {
    let policy = crate::policy::Policy::read_stored(text).unwrap_or_else(|_| crate::policy::Policy::fail_safe());
    json!({"policy": policy, "version": policy.version()})
}

pub(super) fn tenant_json(row: &TenantRow) -> Value {
    json!({"id": row.id, "name": row.name, "disabled": row.disabled,
           "quotas": serde_json::from_str::<Value>(&row.quotas).unwrap_or(Value::Null),
           "egress": serde_json::from_str::<Value>(&row.egress).unwrap_or(Value::Null),
           "policy": policy_json(&row.policy)["policy"], "created_at": row.created_at})
}

pub(super) async fn tenant_row(state: &AdminState, id: &str) -> Result<TenantRow, ApiError> {
    state.platform.store().tenant(id).await?.ok_or_else(|| ApiError::not_found(format!("no tenant '{id}'")))
}

/// `POST /admin/v1/tenants` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TenantCreate {
    /// The tenant's id.
    pub id: String,
    /// A display name (default: the id).
    #[serde(default)]
    pub name: Option<String>,
    /// Quotas (default: the platform's).
    #[serde(default)]
    pub quotas: Option<Quotas>,
    /// Where the tenant may make the platform connect (default: public
    /// addresses only, `crate::egress`).
    #[serde(default)]
    pub egress: Option<EgressPolicy>,
}

/// The policy as stored, once it checks.
fn egress_json(policy: &EgressPolicy) -> Result<String, ApiError> {
    policy.check().map_err(|e| ApiError::field("egress", e.to_string()))?;
    Ok(serde_json::to_string(policy).unwrap_or_else(|_| "{}".to_owned()))
}

pub(super) async fn tenants_create(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    if !matches!(admin, Admin::Operator(_)) {
        return Err(ApiError::forbidden("only an operator creates tenants"));
    }
    let request: TenantCreate = parse_json(&body)?;
    check_tenant_id(&request.id)?;
    let quotas = request.quotas.unwrap_or_default();
    let row = TenantRow {
        id: request.id.clone(),
        name: request.name.unwrap_or_else(|| request.id.clone()),
        disabled: false,
        quotas: serde_json::to_string(&quotas).unwrap_or_default(),
        egress: egress_json(&request.egress.unwrap_or_default())?,
        policy: "{}".to_owned(),
        created_at: state.platform.clock().now_ms(),
    };
    let created = state.platform.store().tenant_insert(&row).await?;
    if created {
        apply_row(&state.platform, &row);
        announce(&state.platform, vec![Change::Tenant { tenant: row.id.clone() }]).await;
        audit(&state, &admin, "tenant.create", &row.id, json!({"name": row.name})).await;
    }
    let row = tenant_row(&state, &row.id).await?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(tenant_json(&row))).into_response())
}

pub(super) async fn tenants_list(State(state): State<AdminState>, Extension(admin): Extension<Admin>) -> ApiResult {
    let rows = state.platform.store().tenants(Scope::Every).await?;
    let visible: Vec<Value> = rows.iter().filter(|row| admin.may(&row.id).is_ok()).map(tenant_json).collect();
    Ok(Json(json!({"tenants": visible})).into_response())
}

pub(super) async fn tenants_get(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
) -> ApiResult {
    admin.may(&tenant)?;
    Ok(Json(tenant_json(&tenant_row(&state, &tenant).await?)).into_response())
}

/// `PATCH /admin/v1/tenants/{tenant}` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TenantPatch {
    /// A new display name.
    #[serde(default)]
    pub name: Option<String>,
    /// Disable (true) or enable (false).
    #[serde(default)]
    pub disabled: Option<bool>,
    /// New quotas.
    #[serde(default)]
    pub quotas: Option<Quotas>,
    /// A new egress policy (replaces the old one whole).
    #[serde(default)]
    pub egress: Option<EgressPolicy>,
}

pub(super) async fn tenants_patch(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    if !matches!(admin, Admin::Operator(_)) {
        return Err(ApiError::forbidden("only an operator changes a tenant"));
    }
    let patch: TenantPatch = parse_json(&body)?;
    let mut row = tenant_row(&state, &tenant).await?;
    if let Some(name) = patch.name {
        row.name = name;
    }
    if let Some(disabled) = patch.disabled {
        row.disabled = disabled;
    }
    if let Some(quotas) = patch.quotas {
        row.quotas = serde_json::to_string(&quotas).unwrap_or_default();
    }
    if let Some(egress) = &patch.egress {
        row.egress = egress_json(egress)?;
    }
    state.platform.store().tenant_update(&row).await?;
    if state.platform.tenant(&tenant).is_some() {
        apply_row(&state.platform, &row);
    }
    announce(&state.platform, vec![Change::Tenant { tenant: tenant.clone() }]).await;
    let egress = serde_json::from_str::<Value>(&row.egress).unwrap_or(Value::Null);
    audit(
        &state,
        &admin,
        "tenant.update",
        &tenant,
        json!({"disabled": row.disabled, "name": row.name, "egress": egress}),
    )
    .await;
    Ok(Json(tenant_json(&row)).into_response())
}

pub(super) async fn tenants_delete(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
) -> ApiResult {
    if !matches!(admin, Admin::Operator(_)) {
        return Err(ApiError::forbidden("only an operator deletes a tenant"));
    }
    tenant_row(&state, &tenant).await?;
    state.platform.store().tenant_delete(&tenant).await?;
    state.platform.remove_tenant(&tenant);
    announce(&state.platform, vec![Change::Tenant { tenant: tenant.clone() }]).await;
    audit(&state, &admin, "tenant.delete", &tenant, json!({})).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}
