//! The operator and language-author API at `/admin/v1` (JSON; OpenAPI at
//! `/admin/v1/openapi.json`): tenants, Language uploads (compiled,
//! described and linted; refused with the findings when the lint finds an
//! error), catalog entries and bulk apply, data sources, secrets, runs,
//! and the audit log.
//!
//! Credentials: the operator token (`--admin-token`), or a bearer token
//! (a JWT in `jwt` mode, a development token in `dev` mode) holding
//! `pilotage:admin` (every tenant) or `pilotage:tenant-admin` (its own
//! tenant), checked from the headers before any body is read
//! ([`admission`]); each route's body is bounded. Every request is validated with a 4xx naming the field, every
//! change is audited (who, what, when), and writes are idempotent where
//! they can be.

pub mod admission;
pub mod data_sources;
pub mod openapi;

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::auth::middleware::Authenticator;
use crate::auth::{ADMIN_SCOPE, AuthMode, TENANT_ADMIN_SCOPE};
use crate::catalog::StoredEntry;
use crate::catalog::tenant::ApplyReport;
use crate::fleet::changes::{Change, announce};
use crate::language::lint::{LintSeverity, has_errors, lint};
use crate::operations::now_ms;
use crate::protocol::catalog::CatalogEntry;
use crate::run::invoker::HttpBinding;
use crate::service::{Platform, Quotas};
use crate::store::{AuditRow, LanguageRow, TenantRow};

pub use admission::{AdminBody, AdminLimits, ComponentUpload};

/// The admin API's state.
#[derive(Clone)]
pub struct AdminState {
    /// The platform.
    pub platform: Platform,
    /// Token checks shared with `/mcp`.
    pub auth: Arc<Authenticator>,
    /// The operator token, when configured.
    pub operator_token: Option<String>,
    /// The body bounds.
    pub limits: AdminLimits,
}

/// Who is calling the admin API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admin {
    /// Every tenant.
    Operator(String),
    /// One tenant's own resources.
    TenantAdmin {
        /// The tenant.
        tenant: String,
        /// Who.
        subject: String,
    },
}

impl Admin {
    fn actor(&self) -> String {
        match self {
            Admin::Operator(who) => who.clone(),
            Admin::TenantAdmin { tenant, subject } => format!("{subject}@{tenant}"),
        }
    }

    fn may(&self, tenant: &str) -> Result<(), ApiError> {
        match self {
            Admin::Operator(_) => Ok(()),
            Admin::TenantAdmin { tenant: own, .. } if own == tenant => Ok(()),
            Admin::TenantAdmin { .. } => Err(ApiError::forbidden("this credential administers another tenant")),
        }
    }
}

/// An admin API error: a status and `{"error": {"code", "message",
/// "field"?, "findings"?}}`.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: Value,
}

impl ApiError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError { status, body: json!({"error": {"code": code, "message": message.into()}}) }
    }

    /// 400 naming the offending field.
    pub fn field(field: &str, message: impl Into<String>) -> ApiError {
        let mut error = ApiError::new(StatusCode::BAD_REQUEST, "invalid_field", message);
        error.body["error"]["field"] = json!(field);
        error
    }

    /// The same error, naming `field`.
    fn at(mut self, field: &str) -> ApiError {
        self.body["error"]["field"] = json!(field);
        self
    }

    fn unauthorized(message: &str) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    fn forbidden(message: &str) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    fn internal(error: impl std::fmt::Display) -> ApiError {
        tracing::error!(%error, "admin API failure");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the server failed; the failure was logged")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(error: crate::store::StoreError) -> Self {
        ApiError::internal(error)
    }
}

type ApiResult = Result<Response, ApiError>;

async fn authorize(state: &AdminState, headers: &HeaderMap) -> Result<Admin, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().to_owned())
        .ok_or_else(|| ApiError::unauthorized("an admin credential is required (Authorization: Bearer …)"))?;
    if let Some(operator) = &state.operator_token
        && bool::from(operator.as_bytes().ct_eq(token.as_bytes()))
    {
        return Ok(Admin::Operator("operator".into()));
    }
    let claims = match state.auth.settings.mode {
        AuthMode::Jwt => match &state.auth.verifier {
            Some(verifier) => verifier.verify(&token).await,
            None => return Err(ApiError::unauthorized("the credential is not valid")),
        },
        AuthMode::Dev => match &state.auth.dev {
            Some(dev) => dev.verify(&token),
            None => return Err(ApiError::unauthorized("the credential is not valid")),
        },
    }
    .map_err(|_| ApiError::unauthorized("the credential is not valid"))?;
    let scopes = claims.scopes();
    let subject = claims.sub.clone().unwrap_or_default();
    if scopes.contains(ADMIN_SCOPE) {
        return Ok(Admin::Operator(subject));
    }
    if scopes.contains(TENANT_ADMIN_SCOPE) {
        let tenants = claims.tenants(&state.auth.settings.tenant_claim);
        if let [tenant] = tenants.as_slice() {
            return Ok(Admin::TenantAdmin { tenant: tenant.clone(), subject });
        }
        return Err(ApiError::forbidden("a tenant-admin credential must name exactly one tenant"));
    }
    Err(ApiError::forbidden(&format!("the credential holds neither {ADMIN_SCOPE} nor {TENANT_ADMIN_SCOPE}")))
}

async fn audit(state: &AdminState, admin: &Admin, action: &str, target: &str, detail: Value) {
    let row = AuditRow {
        at: now_ms(),
        actor: admin.actor(),
        action: action.to_owned(),
        target: target.to_owned(),
        detail: detail.to_string(),
    };
    if let Err(error) = state.platform.store().audit(&row).await {
        tracing::error!(%error, "cannot write the audit log");
    }
    tracing::info!(actor = %row.actor, action, target, "admin change");
}

/// Checks a tenant id: 1–63 of `a-z`, `0-9`, `-`, starting with a letter
/// or digit.
pub fn check_tenant_id(id: &str) -> Result<(), ApiError> {
    let valid = !id.is_empty()
        && id.len() <= 63
        && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !id.starts_with('-');
    if valid { Ok(()) } else { Err(ApiError::field("id", "1 to 63 of a-z, 0-9 and '-', not starting with '-'")) }
}

fn tenant_json(row: &TenantRow) -> Value {
    json!({"id": row.id, "name": row.name, "disabled": row.disabled,
           "quotas": serde_json::from_str::<Value>(&row.quotas).unwrap_or(Value::Null), "created_at": row.created_at})
}

async fn tenant_row(state: &AdminState, id: &str) -> Result<TenantRow, ApiError> {
    state
        .platform
        .store()
        .tenants()
        .await?
        .into_iter()
        .find(|t| t.id == id)
        .ok_or_else(|| ApiError::not_found(format!("no tenant '{id}'")))
}

/// `POST /admin/v1/tenants` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantCreate {
    /// The tenant's id.
    pub id: String,
    /// A display name (default: the id).
    #[serde(default)]
    pub name: Option<String>,
    /// Quotas (default: the platform's).
    #[serde(default)]
    pub quotas: Option<Quotas>,
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| {
        let field = error.to_string().split('`').nth(1).unwrap_or("body").to_owned();
        ApiError::field(&field, format!("the body does not fit: {error}"))
    })
}

async fn tenants_create(
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
        created_at: now_ms(),
    };
    let created = state.platform.store().tenant_insert(&row).await?;
    let tenant = state.platform.add_tenant(&row.id);
    if created {
        tenant.set_quotas(quotas);
        announce(&state.platform, vec![Change::Tenant { tenant: row.id.clone() }]).await;
        audit(&state, &admin, "tenant.create", &row.id, json!({"name": row.name})).await;
    }
    let row = tenant_row(&state, &row.id).await?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(tenant_json(&row))).into_response())
}

async fn tenants_list(State(state): State<AdminState>, Extension(admin): Extension<Admin>) -> ApiResult {
    let rows = state.platform.store().tenants().await?;
    let visible: Vec<Value> = rows.iter().filter(|row| admin.may(&row.id).is_ok()).map(tenant_json).collect();
    Ok(Json(json!({"tenants": visible})).into_response())
}

async fn tenants_get(
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
pub struct TenantPatch {
    /// A new display name.
    #[serde(default)]
    pub name: Option<String>,
    /// Disable (true) or enable (false).
    #[serde(default)]
    pub disabled: Option<bool>,
    /// New quotas.
    #[serde(default)]
    pub quotas: Option<Quotas>,
}

async fn tenants_patch(
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
    state.platform.store().tenant_update(&row).await?;
    if let Some(live) = state.platform.tenant(&tenant) {
        live.set_disabled(row.disabled);
        live.set_quotas(serde_json::from_str(&row.quotas).unwrap_or_default());
    }
    announce(&state.platform, vec![Change::Tenant { tenant: tenant.clone() }]).await;
    audit(&state, &admin, "tenant.update", &tenant, json!({"disabled": row.disabled, "name": row.name})).await;
    Ok(Json(tenant_json(&row)).into_response())
}

async fn tenants_delete(
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

async fn live_tenant(state: &AdminState, tenant: &str) -> Result<Arc<crate::service::Tenant>, ApiError> {
    state.platform.tenant(tenant).ok_or_else(|| ApiError::not_found(format!("no tenant '{tenant}'")))
}

async fn languages_upload(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    request: axum::extract::Request,
) -> ApiResult {
    admin.may(&tenant)?;
    live_tenant(&state, &tenant).await?;
    let ComponentUpload { bytes, sha256 } = ComponentUpload::read(request, &state.limits).await?;
    if bytes.is_empty() {
        return Err(ApiError::field("body", "the body must be the component's bytes (application/wasm)"));
    }
    let engine = state.platform.engine().clone();
    // The bytes move to the compiling thread and back: one copy in memory.
    let (bytes, loaded) = tokio::task::spawn_blocking(move || {
        let loaded = engine.load(&bytes);
        (bytes, loaded)
    })
    .await
    .map_err(ApiError::internal)?;
    let component = loaded.map_err(|error| {
        let mut refused = ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "not_loadable", error.to_string());
        refused.body["error"]["sha256"] = json!(sha256);
        refused
    })?;
    let findings = lint(component.description());
    if has_errors(&findings) {
        let mut error = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "lint_failed",
            format!("{} does not pass the conformance lint", component.description().name),
        );
        error.body["error"]["findings"] = serde_json::to_value(&findings).unwrap_or_default();
        audit(
            &state,
            &admin,
            "language.refuse",
            &tenant,
            json!({"name": component.description().name, "sha256": component.sha256()}),
        )
        .await;
        return Err(error);
    }
    let name = component.description().name.clone();
    let row = LanguageRow {
        tenant: tenant.clone(),
        name: name.clone(),
        sha256: component.sha256().to_owned(),
        lint: serde_json::to_string(&findings).unwrap_or_default(),
        active: true,
        uploaded_by: admin.actor(),
        created_at: now_ms(),
    };
    state.platform.store().language_insert(&row, &bytes).await?;
    state.platform.store().language_activate(&tenant, &name, &row.sha256).await?;
    state.platform.install_language(&tenant, component.clone()).await;
    announce(&state.platform, vec![Change::Language { tenant: tenant.clone(), name: name.clone() }]).await;
    audit(&state, &admin, "language.upload", &tenant, json!({"name": name, "sha256": row.sha256})).await;
    let warnings: Vec<_> = findings.iter().filter(|f| f.severity == LintSeverity::Warning).collect();
    Ok((StatusCode::CREATED, Json(json!({"name": name, "sha256": row.sha256, "active": true, "lint": warnings})))
        .into_response())
}

async fn languages_list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
) -> ApiResult {
    admin.may(&tenant)?;
    let rows = state.platform.store().languages_of_tenant(&tenant).await?;
    let live = state.platform.tenant(&tenant);
    let mut languages: Vec<Value> = rows
        .iter()
        .map(|row| {
            json!({"name": row.name, "sha256": row.sha256, "active": row.active, "uploaded_by": row.uploaded_by,
                   "created_at": row.created_at, "lint": serde_json::from_str::<Value>(&row.lint).unwrap_or(Value::Null)})
        })
        .collect();
    // Bundled Languages are served without an upload.
    if let Some(live) = live {
        for slot in live.languages() {
            if !rows.iter().any(|row| row.sha256 == slot.component.sha256()) {
                languages.push(json!({"name": slot.entry.name, "sha256": slot.component.sha256(), "active": true, "uploaded_by": "bundled",
                                      "lint": lint(slot.description())}));
            }
        }
    }
    Ok(Json(json!({"languages": languages})).into_response())
}

async fn languages_get(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, family, version)): Path<(String, String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let name = format!("{family}/{version}");
    let slot = live_tenant(&state, &tenant)
        .await?
        .language(&name)
        .ok_or_else(|| ApiError::not_found(format!("no active Language '{name}'")))?;
    Ok(Json(
        json!({"name": name, "sha256": slot.component.sha256(), "entry": slot.entry, "lint": lint(slot.description())}),
    )
    .into_response())
}

/// `POST …/languages/{family}/{version}/activate` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Activate {
    /// The version (component SHA-256) to serve.
    pub sha256: String,
}

async fn languages_activate(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, family, version)): Path<(String, String, String)>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    admin.may(&tenant)?;
    let request: Activate = parse_json(&body)?;
    let name = format!("{family}/{version}");
    let rows = state.platform.store().languages_of_tenant(&tenant).await?;
    let row = rows
        .into_iter()
        .find(|row| row.name == name && row.sha256 == request.sha256)
        .ok_or_else(|| ApiError::field("sha256", format!("no uploaded version {} of {name}", request.sha256)))?;
    let component = load_stored(&state.platform, &row.sha256).await.map_err(ApiError::internal)?;
    state.platform.store().language_activate(&tenant, &name, &row.sha256).await?;
    state.platform.install_language(&tenant, component).await;
    announce(&state.platform, vec![Change::Language { tenant: tenant.clone(), name: name.clone() }]).await;
    audit(&state, &admin, "language.activate", &tenant, json!({"name": name, "sha256": row.sha256})).await;
    Ok(Json(json!({"name": name, "sha256": row.sha256, "active": true})).into_response())
}

async fn languages_retire(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, family, version)): Path<(String, String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let name = format!("{family}/{version}");
    let live = live_tenant(&state, &tenant).await?;
    state.platform.store().language_retire(&tenant, &name).await?;
    if !live.retire_language(&name) {
        return Err(ApiError::not_found(format!("no active Language '{name}'")));
    }
    state.platform.sessions().notify_tools_changed(&tenant).await;
    announce(&state.platform, vec![Change::Language { tenant: tenant.clone(), name: name.clone() }]).await;
    audit(&state, &admin, "language.retire", &tenant, json!({"name": name})).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A catalog entry as the admin API takes it: the protocol entry, plus
/// `visibility` scopes and an HTTP `binding`.
#[derive(Debug, Deserialize)]
pub struct EntryInput {
    /// The entry.
    #[serde(flatten)]
    pub entry: CatalogEntry,
    /// Scopes a caller must hold to see it.
    #[serde(default)]
    pub visibility: Vec<String>,
    /// Where a callable entry is served.
    #[serde(default)]
    pub binding: Option<HttpBinding>,
}

fn check_entry(input: &EntryInput, field: &str) -> Result<(), ApiError> {
    let entry = &input.entry;
    if entry.id.is_empty() || entry.id.len() > 200 {
        return Err(ApiError::field(&format!("{field}.id"), "1 to 200 characters"));
    }
    if let Some(problem) = entry.risk_hints.inconsistency_with(&entry.risk) {
        return Err(ApiError::field(&format!("{field}.risk"), problem));
    }
    for (name, schema) in [("input_schema", &entry.input_schema), ("output_schema", &entry.output_schema)] {
        if let Some(schema) = schema
            && !schema.is_null()
            && (!schema.is_object() || jsonschema::validator_for(schema).is_err())
        {
            return Err(ApiError::field(&format!("{field}.{name}"), "not a JSON Schema object"));
        }
    }
    if let Some(binding) = &input.binding {
        match reqwest::Url::parse(&binding.url) {
            Ok(url) if url.scheme() == "http" || url.scheme() == "https" => {}
            _ => return Err(ApiError::field(&format!("{field}.binding.url"), "an http or https URL")),
        }
    }
    Ok(())
}

/// Refuses to change an entry a data source owns (409): it comes from the
/// database and the next refresh would undo the change.
fn owned_by_operator(tenant: &crate::service::Tenant, id: &str) -> Result<(), ApiError> {
    if tenant.entry_from_data_source(id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "owned_by_data_source",
            format!("'{id}' comes from a data source; change the database or the data source instead"),
        ));
    }
    Ok(())
}

async fn persist(state: &AdminState, tenant: &str, stored: &[StoredEntry]) -> Result<(), ApiError> {
    let rows: Vec<(String, String)> =
        stored.iter().map(|s| (s.entry.id.clone(), serde_json::to_string(s).unwrap_or_default())).collect();
    state.platform.store().catalog_put(tenant, &rows, now_ms()).await?;
    Ok(())
}

fn entry_json(stored: &StoredEntry) -> Value {
    let mut value = serde_json::to_value(&stored.entry).unwrap_or_default();
    value["visibility"] = json!(stored.visibility);
    if let Some(binding) = &stored.binding {
        value["binding"] = serde_json::to_value(binding).unwrap_or_default();
    }
    value
}

async fn catalog_put(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, id)): Path<(String, String)>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let input: EntryInput = parse_json(&body)?;
    if input.entry.id != id {
        return Err(ApiError::field("id", format!("the body's id '{}' is not the path's '{id}'", input.entry.id)));
    }
    check_entry(&input, "entry")?;
    owned_by_operator(&live, &id)?;
    let stored = StoredEntry::new(input.entry, input.visibility, input.binding);
    persist(&state, &tenant, std::slice::from_ref(&stored)).await?;
    let report = live.with_catalog(|catalog| catalog.apply(vec![stored.clone()], &[]));
    announce(&state.platform, vec![Change::CatalogEntry { tenant: tenant.clone(), id: id.clone() }]).await;
    audit(&state, &admin, "catalog.put", &format!("{tenant}/{id}"), json!(report)).await;
    let status = if report.added.is_empty() { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(entry_json(&stored))).into_response())
}

async fn catalog_get(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, id)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let stored =
        live.with_catalog(|c| c.stored(&id).cloned()).ok_or_else(|| ApiError::not_found(format!("no entry '{id}'")))?;
    Ok(Json(entry_json(&stored)).into_response())
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

async fn catalog_list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    Query(query): Query<ListQuery>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let limit = query.limit.unwrap_or(100).clamp(1, 1000);
    let (items, next): (Vec<Value>, Option<String>) = live.with_catalog(|catalog| {
        let mut items: Vec<&Arc<StoredEntry>> = catalog
            .all()
            .filter(|s| query.after.as_deref().is_none_or(|after| s.entry.id.as_str() > after))
            .take(limit + 1)
            .collect();
        let next = (items.len() > limit).then(|| items[limit - 1].entry.id.clone());
        items.truncate(limit);
        (items.iter().map(|s| entry_json(s)).collect(), next)
    });
    Ok(Json(json!({"entries": items, "next_after": next})).into_response())
}

async fn catalog_delete(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, id)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    owned_by_operator(&live, &id)?;
    state.platform.store().catalog_delete(&tenant, std::slice::from_ref(&id)).await?;
    let report = live.with_catalog(|catalog| catalog.apply(Vec::new(), std::slice::from_ref(&id)));
    if report.removed.is_empty() {
        return Err(ApiError::not_found(format!("no entry '{id}'")));
    }
    announce(&state.platform, vec![Change::CatalogEntry { tenant: tenant.clone(), id: id.clone() }]).await;
    audit(&state, &admin, "catalog.delete", &format!("{tenant}/{id}"), json!({})).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST …/catalog/apply` body: the whole catalog; entries not listed are
/// removed.
#[derive(Debug, Deserialize)]
pub struct ApplyBody {
    /// Every entry the catalog must hold.
    pub entries: Vec<EntryInput>,
}

async fn catalog_apply(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let request: ApplyBody = parse_json(&body)?;
    let mut seen = std::collections::BTreeSet::new();
    let mut stored = Vec::new();
    for (index, input) in request.entries.into_iter().enumerate() {
        check_entry(&input, &format!("entries[{index}]"))?;
        if !seen.insert(input.entry.id.clone()) {
            return Err(ApiError::field(
                &format!("entries[{index}].id"),
                format!("'{}' appears twice", input.entry.id),
            ));
        }
        owned_by_operator(&live, &input.entry.id).map_err(|error| error.at(&format!("entries[{index}].id")))?;
        stored.push(StoredEntry::new(input.entry, input.visibility, input.binding));
    }
    // Entries of data sources are theirs: a bulk apply leaves them alone.
    let (report, rebound): (ApplyReport, Vec<String>) = live.with_catalog(|catalog| {
        let remove: Vec<String> = catalog
            .all()
            .map(|s| s.entry.id.clone())
            .filter(|id| !seen.contains(id) && !live.entry_from_data_source(id))
            .collect();
        // An entry whose binding alone changed is not in the report (its
        // content is the same) but is still a change for the other replicas.
        let rebound = stored
            .iter()
            .filter(|new| catalog.stored(&new.entry.id).is_some_and(|old| old.binding != new.binding))
            .map(|new| new.entry.id.clone())
            .collect();
        (catalog.apply(stored.clone(), &remove), rebound)
    });
    persist(&state, &tenant, &stored).await?;
    state.platform.store().catalog_delete(&tenant, &report.removed).await?;
    let changed: std::collections::BTreeSet<&String> =
        report.added.iter().chain(&report.modified).chain(&report.removed).chain(&rebound).collect();
    let changes =
        changed.into_iter().map(|id| Change::CatalogEntry { tenant: tenant.clone(), id: id.clone() }).collect();
    announce(&state.platform, changes).await;
    audit(&state, &admin, "catalog.apply", &tenant, json!(report)).await;
    Ok(Json(json!(report)).into_response())
}

/// `PUT …/secrets/{name}` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretBody {
    /// The secret's value; stored encrypted, never returned.
    pub value: String,
}

async fn secrets_put(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    admin.may(&tenant)?;
    live_tenant(&state, &tenant).await?;
    // ':' separates a trigger source's kind from its name: the deployment
    // runtime reads a webhook source's key from `webhook:<source>` and a
    // broker's settings from `mqtt:<broker>` (docs/architecture.md
    // "Deployments").
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':')) {
        return Err(ApiError::field("name", "letters, digits, '_', '-' and ':'"));
    }
    let request: SecretBody = parse_json(&body)?;
    let (nonce, sealed) = state.platform.secrets().seal(&tenant, &name, &request.value);
    state.platform.store().secret_put(&tenant, &name, &nonce, &sealed, now_ms()).await?;
    audit(&state, &admin, "secret.put", &format!("{tenant}/{name}"), json!({})).await;
    Ok(Json(json!({"name": name})).into_response())
}

async fn secrets_list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
) -> ApiResult {
    admin.may(&tenant)?;
    Ok(Json(json!({"secrets": state.platform.store().secret_names(&tenant).await?})).into_response())
}

async fn secrets_delete(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    if !state.platform.store().secret_delete(&tenant, &name).await? {
        return Err(ApiError::not_found(format!("no secret '{name}'")));
    }
    audit(&state, &admin, "secret.delete", &format!("{tenant}/{name}"), json!({})).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, Deserialize)]
struct RunsQuery {
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn runs_list(
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
            json!({"run_id": row.run_id, "subject": row.subject, "language": row.language, "created_at": row.created_at,
                   "expires_at": row.expires_at, "outcome": record["outcome"]})
        })
        .collect();
    Ok(Json(json!({"runs": runs})).into_response())
}

async fn runs_get(
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
    Ok(Json(json!({"run_id": row.run_id, "subject": row.subject, "language": row.language, "created_at": row.created_at, "record": record})).into_response())
}

#[derive(Debug, Deserialize)]
struct AuditQuery {
    #[serde(default)]
    limit: Option<i64>,
}

async fn audit_list(
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

async fn openapi_json() -> Response {
    Json(openapi::document()).into_response()
}

/// The admin routes, to be nested at `/admin/v1`.
pub fn router(state: AdminState) -> Router {
    let authenticated = Router::new()
        .route("/tenants", get(tenants_list).post(tenants_create))
        .route("/tenants/{tenant}", get(tenants_get).patch(tenants_patch).delete(tenants_delete))
        .route("/tenants/{tenant}/languages", get(languages_list).post(languages_upload))
        .route("/tenants/{tenant}/languages/{family}/{version}", get(languages_get).delete(languages_retire))
        .route("/tenants/{tenant}/languages/{family}/{version}/activate", post(languages_activate))
        .route("/tenants/{tenant}/catalog/entries", get(catalog_list))
        .route("/tenants/{tenant}/catalog/entries/{id}", put(catalog_put).get(catalog_get).delete(catalog_delete))
        .route("/tenants/{tenant}/catalog/apply", post(catalog_apply))
        .route("/tenants/{tenant}/data-sources", get(data_sources::list))
        .route(
            "/tenants/{tenant}/data-sources/{name}",
            put(data_sources::put).get(data_sources::get).delete(data_sources::delete),
        )
        .route("/tenants/{tenant}/data-sources/{name}/refresh", post(data_sources::refresh))
        .route("/tenants/{tenant}/secrets", get(secrets_list))
        .route("/tenants/{tenant}/secrets/{name}", put(secrets_put).delete(secrets_delete))
        .route("/tenants/{tenant}/runs", get(runs_list))
        .route("/tenants/{tenant}/runs/{run_id}", get(runs_get))
        .route("/audit", get(audit_list))
        // Every route above authenticates from the headers before its body
        // is read; each body extractor applies its route's bound.
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), admission::require_admin))
        .with_state(state);
    Router::new().route("/openapi.json", get(openapi_json)).merge(authenticated)
}

/// The component a stored version names: the one already loaded with
/// that SHA-256 when some tenant uses it, else loaded from the bytes in the
/// store (compiled, or read from the compiled-code cache).
///
/// # Errors
/// A message when the store has no such component, the read fails, or
/// the bytes do not load or do not hash to `sha256`.
pub async fn load_stored(platform: &Platform, sha256: &str) -> Result<crate::engine::Component, String> {
    if let Some(component) = platform.engine().loaded(sha256) {
        return Ok(component);
    }
    let bytes = platform
        .store()
        .component_bytes(sha256)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the store has no component {sha256}"))?;
    let engine = platform.engine().clone();
    let component = tokio::task::spawn_blocking(move || engine.load(&bytes))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if component.sha256() != sha256 {
        return Err(format!("the stored component {sha256} has SHA-256 {}", component.sha256()));
    }
    Ok(component)
}

/// Loads every stored tenant into the platform: tenants, their active
/// Languages, catalog entries, data sources and promoted programs.
///
/// Each kind of row is read in one query for all tenants, and each
/// distinct component once (by SHA-256) whatever the number of tenants
/// serving it, so start-up grows with the rows stored, not with round trips
/// per tenant (issue: performance, 10,000 tenants).
///
/// # Errors
/// A message naming what could not be loaded.
pub async fn load_tenants(platform: &Platform) -> Result<usize, String> {
    let store = platform.store();
    let rows = store.tenants().await.map_err(|e| e.to_string())?;
    let mut tenants = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let tenant = platform.add_tenant(&row.id);
        tenant.set_disabled(row.disabled);
        tenant.set_quotas(serde_json::from_str(&row.quotas).unwrap_or_default());
        tenants.insert(row.id.clone(), tenant);
    }
    let retention = platform.retention().clone();
    let mut components = std::collections::HashMap::new();
    for language in store.languages_active().await.map_err(|e| e.to_string())? {
        let Some(tenant) = tenants.get(&language.tenant) else { continue };
        let component = match components.get(&language.sha256) {
            Some(component) => Clone::clone(component),
            None => {
                let component = load_stored(platform, &language.sha256)
                    .await
                    .map_err(|e| format!("tenant {}: {}: {e}", language.tenant, language.name))?;
                components.insert(language.sha256.clone(), component.clone());
                component
            }
        };
        tenant.install_language(crate::service::LanguageSlot::new(component, retention.clone()));
    }
    let mut entries: std::collections::HashMap<String, Vec<StoredEntry>> = std::collections::HashMap::new();
    for (tenant, text) in store.catalog_all().await.map_err(|e| e.to_string())? {
        let entry: StoredEntry =
            serde_json::from_str(&text).map_err(|e| format!("tenant {tenant}: a catalog entry: {e}"))?;
        entries.entry(tenant).or_default().push(StoredEntry::new(entry.entry, entry.visibility, entry.binding));
    }
    for (id, tenant) in &tenants {
        tenant.put_entries(entries.remove(id).unwrap_or_default());
    }
    for source in store.data_sources_all().await.map_err(|e| e.to_string())? {
        if let Some(tenant) = tenants.get(&source.tenant) {
            data_sources::restore(platform, tenant, &source).await?;
        }
    }
    let mut promoted: std::collections::HashMap<String, Vec<_>> = std::collections::HashMap::new();
    for row in store.promoted_all().await.map_err(|e| e.to_string())? {
        promoted.entry(row.tenant.clone()).or_default().push(row);
    }
    for (id, tenant) in &tenants {
        crate::operations::promote::restore(tenant, promoted.remove(id).unwrap_or_default())?;
    }
    Ok(rows.len())
}

/// Loads one stored tenant into the platform, as [`load_tenants`] does for
/// all of them: its row, active Languages, catalog entries, data sources
/// and promoted programs. A replica calls it when another replica announces
/// a change to a tenant it has not loaded (`fleet::changes`).
///
/// # Errors
/// A message naming what could not be loaded; nothing when the tenant is
/// not stored.
pub async fn load_tenant(platform: &Platform, id: &str) -> Result<(), String> {
    let store = platform.store();
    let Some(row) = store.tenant_get(id).await.map_err(|e| e.to_string())? else { return Ok(()) };
    let tenant = platform.add_tenant(&row.id);
    tenant.set_disabled(row.disabled);
    tenant.set_quotas(serde_json::from_str(&row.quotas).unwrap_or_default());
    for language in store.languages_of_tenant(id).await.map_err(|e| e.to_string())? {
        if language.active {
            let component = load_stored(platform, &language.sha256)
                .await
                .map_err(|e| format!("tenant {id}: {}: {e}", language.name))?;
            tenant.install_language(crate::service::LanguageSlot::new(component, platform.retention().clone()));
        }
    }
    let mut entries = Vec::new();
    for text in store.catalog_of_tenant(id).await.map_err(|e| e.to_string())? {
        let entry: StoredEntry =
            serde_json::from_str(&text).map_err(|e| format!("tenant {id}: a catalog entry: {e}"))?;
        entries.push(StoredEntry::new(entry.entry, entry.visibility, entry.binding));
    }
    tenant.put_entries(entries);
    for source in store.data_sources_of_tenant(id).await.map_err(|e| e.to_string())? {
        data_sources::restore(platform, &tenant, &source).await?;
    }
    let promoted = store.promoted_of_tenant(id).await.map_err(|e| e.to_string())?;
    crate::operations::promote::restore(&tenant, promoted)?;
    platform.sessions().notify_tools_changed(id).await;
    Ok(())
}
