//! `/admin/v1/tenants`: create, list, show, change (name, disabled,
//! quotas, egress, trusted issuers) and delete tenants; only an operator
//! creates, changes and deletes them.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::admission::AdminBody;
use super::api::{Admin, AdminState, ApiError, ApiResult, audit, parse_json};
use crate::auth::IssuerConfig;
use crate::auth::jwt::check_issuer;
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
           "issuers": serde_json::from_str::<Value>(&row.issuers).unwrap_or(json!([])),
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

/// `quotas` once they check ([`Quotas::check`]).
fn quotas_checked(quotas: &Quotas) -> Result<(), ApiError> {
    quotas.check().map_err(|refused| ApiError::field(&format!("quotas.{}", refused.member), refused.to_string()))
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
    quotas_checked(&quotas)?;
    let row = TenantRow {
        id: request.id.clone(),
        name: request.name.unwrap_or_else(|| request.id.clone()),
        disabled: false,
        quotas: serde_json::to_string(&quotas).unwrap_or_default(),
        egress: egress_json(&request.egress.unwrap_or_default())?,
        policy: "{}".to_owned(),
        issuers: "[]".to_owned(),
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
    /// The identity providers trusted for the tenant (replaces the list
    /// whole; `[]` trusts none but the operator's).
    #[serde(default)]
    pub issuers: Option<Vec<IssuerConfig>>,
}

/// The issuers `tenant` is to trust, as stored, once each checks: a URL
/// for its keys, asymmetric algorithms, not one of the settings' issuers
/// (the operator's own are configured there), listed once, tied to no
/// other tenant through its own `tenants`, and configured as any other
/// tenant trusting the same issuer has it (one issuer, one way of reading
/// its tokens).
fn issuers_json(state: &AdminState, tenant: &str, issuers: &[IssuerConfig]) -> Result<String, ApiError> {
    let mut checked: Vec<IssuerConfig> = Vec::new();
    for (n, issuer) in issuers.iter().enumerate() {
        let field = format!("issuers[{n}]");
        let at = |name: &str| format!("{field}.{name}");
        if reqwest::Url::parse(&issuer.issuer).is_err() {
            return Err(ApiError::field(&at("issuer"), format!("'{}' is not a URL", issuer.issuer)));
        }
        let jwks = reqwest::Url::parse(&issuer.jwks_url)
            .map_err(|_| ApiError::field(&at("jwks_url"), format!("'{}' is not a URL", issuer.jwks_url)))?;
        if !matches!(jwks.scheme(), "https" | "http") {
            return Err(ApiError::field(&at("jwks_url"), "an http or https URL"));
        }
        check_issuer(issuer).map_err(|e| ApiError::field(&at("algorithms"), e.to_string()))?;
        if !issuer.tenants.is_empty() && issuer.tenants.iter().any(|t| t != tenant) {
            return Err(ApiError::field(
                &at("tenants"),
                format!("an issuer stored with tenant '{tenant}' serves that tenant only; leave `tenants` out"),
            ));
        }
        if state.auth.settings.issuers.iter().any(|own| own.issuer == issuer.issuer) {
            return Err(ApiError::field(
                &at("issuer"),
                format!(
                    "{} is one of the server's own issuers (its settings); it is not stored with a tenant",
                    issuer.issuer
                ),
            ));
        }
        if checked.iter().any(|earlier| earlier.issuer == issuer.issuer) {
            return Err(ApiError::field(&at("issuer"), format!("{} is listed twice", issuer.issuer)));
        }
        let stored = IssuerConfig { tenants: Vec::new(), ..issuer.clone() };
        for other in state.platform.tenants().iter().filter(|t| t.id != tenant) {
            if let Some(theirs) =
                state.platform.tenant_issuers(&other.id).into_iter().find(|t| t.issuer == issuer.issuer)
                && theirs != stored
            {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "conflict",
                    format!(
                        "tenant '{}' trusts {} configured otherwise; an issuer is configured alike for every tenant that trusts it",
                        other.id, issuer.issuer
                    ),
                )
                .at(&field));
            }
        }
        checked.push(stored);
    }
    Ok(serde_json::to_string(&checked).unwrap_or_else(|_| "[]".to_owned()))
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
        quotas_checked(&quotas)?;
        row.quotas = serde_json::to_string(&quotas).unwrap_or_default();
    }
    if let Some(egress) = &patch.egress {
        row.egress = egress_json(egress)?;
    }
    if let Some(issuers) = &patch.issuers {
        row.issuers = issuers_json(&state, &tenant, issuers)?;
    }
    state.platform.store().tenant_update(&row).await?;
    if state.platform.tenant(&tenant).is_some() {
        apply_row(&state.platform, &row);
    }
    announce(&state.platform, vec![Change::Tenant { tenant: tenant.clone() }]).await;
    let quotas = serde_json::from_str::<Value>(&row.quotas).unwrap_or(Value::Null);
    let egress = serde_json::from_str::<Value>(&row.egress).unwrap_or(Value::Null);
    let issuers = serde_json::from_str::<Value>(&row.issuers).unwrap_or(json!([]));
    audit(
        &state,
        &admin,
        "tenant.update",
        &tenant,
        json!({"disabled": row.disabled, "name": row.name, "quotas": quotas, "egress": egress, "issuers": issuers}),
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
