//! `/admin/v1/tenants/{tenant}/languages`: uploads (compiled, described
//! and linted; refused with the findings when the lint finds an error),
//! the versions stored, the one served, activation and retirement.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::admission::{AdminBody, ComponentUpload};
use super::api::{Admin, AdminState, ApiError, ApiResult, audit, live_tenant, parse_json};
use crate::changes::{Change, announce};
use pilotage_engine::lint::{LintSeverity, has_errors, lint};
use pilotage_store::{LanguageRow, Scope};

pub(super) async fn languages_upload(
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
        created_at: state.platform.clock().now_ms(),
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

pub(super) async fn languages_list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
) -> ApiResult {
    admin.may(&tenant)?;
    let rows = state.platform.store().languages(Scope::Tenant(&tenant), false).await?;
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

pub(super) async fn languages_get(
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
pub(super) struct Activate {
    /// The version (component SHA-256) to serve.
    pub sha256: String,
}

pub(super) async fn languages_activate(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, family, version)): Path<(String, String, String)>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    admin.may(&tenant)?;
    let request: Activate = parse_json(&body)?;
    let name = format!("{family}/{version}");
    let rows = state.platform.store().languages(Scope::Tenant(&tenant), false).await?;
    let row = rows
        .into_iter()
        .find(|row| row.name == name && row.sha256 == request.sha256)
        .ok_or_else(|| ApiError::field("sha256", format!("no uploaded version {} of {name}", request.sha256)))?;
    let component = crate::tenancy::load::component(&state.platform, &row.sha256).await.map_err(ApiError::internal)?;
    state.platform.store().language_activate(&tenant, &name, &row.sha256).await?;
    state.platform.install_language(&tenant, component).await;
    announce(&state.platform, vec![Change::Language { tenant: tenant.clone(), name: name.clone() }]).await;
    audit(&state, &admin, "language.activate", &tenant, json!({"name": name, "sha256": row.sha256})).await;
    Ok(Json(json!({"name": name, "sha256": row.sha256, "active": true})).into_response())
}

pub(super) async fn languages_retire(
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
    state.platform.tools_changed(&tenant).await;
    announce(&state.platform, vec![Change::Language { tenant: tenant.clone(), name: name.clone() }]).await;
    audit(&state, &admin, "language.retire", &tenant, json!({"name": name})).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}
