//! `/admin/v1/tenants/{tenant}/data-sources`: a tenant's databases.
//!
//! - `GET …/data-sources`: every data source (never the URL);
//! - `PUT …/data-sources/{name}`: register or replace one
//!   ([`DataSourceSpec`] with `url`). The database must answer: the
//!   catalog is introspected before the change is kept, so a typo in the
//!   URL is a 422 now, not an empty catalog later;
//! - `GET …/data-sources/{name}`: one, with its last refresh;
//! - `DELETE …/data-sources/{name}`: detach it and drop its catalog entries;
//! - `POST …/data-sources/{name}/refresh`: introspect now; the answer is
//!   the catalog change (added, modified, removed entry ids).
//!
//! The URL is sealed with the platform's secret key (like secrets) under
//! the name `data-source:{name}`.

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::json;

use super::admission::AdminBody;
use super::api::{Admin, AdminState, ApiError, ApiResult, audit, live_tenant, parse_json};
use crate::changes::{Change, announce};
use crate::datasource::DataSourceError;
use crate::datasource::attached::{AttachedSource, DataSourceSpec, sealed_name};
use crate::tenancy::Tenant;
use pilotage_store::DataSourceRow;

fn check_name(name: &str) -> Result<(), ApiError> {
    let valid =
        !name.is_empty() && name.len() <= 63 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid { Ok(()) } else { Err(ApiError::field("name", "1 to 63 of letters, digits, '_' and '-'")) }
}

fn refused(error: &DataSourceError) -> ApiError {
    let code = match error {
        DataSourceError::Config(_) => "bad_data_source",
        DataSourceError::Unreachable { .. } => "unreachable",
        DataSourceError::Database(_) => "database_error",
        DataSourceError::Refused(refused) => return ApiError::refused("url", refused),
    };
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, error.to_string())
}

fn known(tenant: &Tenant, name: &str) -> Result<Arc<AttachedSource>, ApiError> {
    tenant.data_source(name).ok_or_else(|| ApiError::not_found(format!("no data source '{name}'")))
}

pub(super) async fn list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let sources: Vec<_> = live.data_sources().iter().map(|source| source.describe()).collect();
    Ok(Json(json!({"data_sources": sources})).into_response())
}

pub(super) async fn get(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    Ok(Json(known(&live, &name)?.describe()).into_response())
}

pub(super) async fn put(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
    AdminBody(body): AdminBody,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    check_name(&name)?;
    let spec: DataSourceSpec = parse_json(&body)?;
    spec.check().map_err(|(field, message)| ApiError::field(field, message))?;
    let url = spec.url.clone().filter(|url| !url.is_empty()).ok_or_else(|| {
        ApiError::field("url", "the connection URL is required (postgres://user:password@host:port/database)")
    })?;
    if let Some(other) = live.data_sources().iter().find(|s| s.spec.language == spec.language && s.name != name) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "language_taken",
            format!("data source '{}' already serves {}; one per Language", other.name, spec.language),
        ));
    }
    let attached = AttachedSource::new(
        &name,
        spec.clone(),
        &url,
        state.platform.runtime().clone(),
        state.platform.clock().clone(),
        Some(live.egress().clone()),
    )
    .map_err(|error| refused(&error))?;
    attached.source.check().await.map_err(|error| refused(&error))?;
    let attached = Arc::new(attached);
    let replaced = live.attach_data_source(attached.clone());
    let mut report = attached.refresh(live.catalog()).await.map_err(|error| refused(&error))?;
    if let Some(old) = replaced {
        // What the old source had and the new one does not see any more.
        let stale: Vec<String> = old.owned().into_iter().filter(|id| !attached.owns(id)).collect();
        let removed = live.with_catalog(|catalog| catalog.apply(Vec::new(), &stale));
        report.removed.extend(removed.removed);
    }
    let (nonce, sealed_url) = state.platform.secrets().seal(&tenant, &sealed_name(&name), &url);
    let row = DataSourceRow {
        tenant: tenant.clone(),
        name: name.clone(),
        spec: serde_json::to_string(&attached.spec).map_err(ApiError::internal)?,
        nonce,
        sealed_url,
        updated_at: state.platform.clock().now_ms(),
    };
    state.platform.store().data_source_put(&row).await?;
    announce(&state.platform, vec![Change::DataSource { tenant: tenant.clone(), name: name.clone() }]).await;
    audit(&state, &admin, "data_source.put", &format!("{tenant}/{name}"), json!({"target": attached.source.target()}))
        .await;
    let mut answer = attached.describe();
    answer["catalog"] = json!(report);
    Ok((StatusCode::OK, Json(answer)).into_response())
}

pub(super) async fn delete(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    known(&live, &name)?;
    state.platform.store().data_source_delete(&tenant, &name).await?;
    if let Some(source) = live.detach_data_source(&name) {
        source.source.pool().close().await;
    }
    announce(&state.platform, vec![Change::DataSource { tenant: tenant.clone(), name: name.clone() }]).await;
    audit(&state, &admin, "data_source.delete", &format!("{tenant}/{name}"), json!({})).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(super) async fn refresh(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    let live = live_tenant(&state, &tenant).await?;
    let source = known(&live, &name)?;
    let report = source.refresh(live.catalog()).await.map_err(|error| refused(&error))?;
    // The other replicas re-attach it and read its database afresh.
    announce(&state.platform, vec![Change::DataSource { tenant: tenant.clone(), name: name.clone() }]).await;
    let mut answer = source.describe();
    answer["catalog"] = json!(report);
    Ok(Json(answer).into_response())
}
