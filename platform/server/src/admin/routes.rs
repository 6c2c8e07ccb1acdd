//! The admin routes, nested at `/admin/v1` by the edge; every route but
//! the OpenAPI document authenticates from the headers before its body is
//! read ([`super::admission`]).

use axum::Json;
use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};

use super::api::AdminState;
use super::catalog::{catalog_apply, catalog_delete, catalog_get, catalog_list, catalog_put};
use super::languages::{languages_activate, languages_get, languages_list, languages_retire, languages_upload};
use super::runs::{audit_list, runs_get, runs_list};
use super::secrets::{secrets_delete, secrets_list, secrets_put};
use super::tenants::{tenants_create, tenants_delete, tenants_get, tenants_list, tenants_patch};
use super::{admission, approvals, data_sources, deployments, openapi, usage};

async fn openapi_json() -> Response {
    Json(openapi::document()).into_response()
}

/// The admin routes, to be nested at `/admin/v1`.
pub(crate) fn router(state: AdminState) -> Router {
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
        .route("/tenants/{tenant}/deployments", get(deployments::list))
        .route("/tenants/{tenant}/deployments/{name}", get(deployments::get).delete(deployments::delete))
        .route("/tenants/{tenant}/deployments/{name}/disable", post(deployments::disable))
        .route("/tenants/{tenant}/deployments/{name}/enable", post(deployments::enable))
        .route("/tenants/{tenant}/runs", get(runs_list))
        .route("/tenants/{tenant}/runs/{run_id}", get(runs_get))
        .route("/tenants/{tenant}/policy", get(approvals::policy_get).put(approvals::policy_put))
        .route("/tenants/{tenant}/approvals", get(approvals::approvals_list))
        .route("/tenants/{tenant}/approvals/{id}", get(approvals::approvals_get))
        .route("/tenants/{tenant}/approvals/{id}/approve", post(approvals::approvals_approve))
        .route("/tenants/{tenant}/approvals/{id}/reject", post(approvals::approvals_reject))
        .route("/tenants/{tenant}/usage", get(usage::tenant_usage))
        .route("/usage", get(usage::all_usage))
        .route("/audit", get(audit_list))
        // Every route above authenticates from the headers before its body
        // is read; each body extractor applies its route's bound.
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), admission::require_admin))
        .with_state(state);
    Router::new().route("/openapi.json", get(openapi_json)).merge(authenticated)
}
