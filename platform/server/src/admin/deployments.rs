//! `/admin/v1/tenants/{tenant}/deployments`: a tenant's deployed programs
//! (Part II §6.5.7; docs/architecture.md "Deployments").
//!
//! - `GET …/deployments`: every deployment (`deploy::model::Deployment::view`);
//! - `GET …/deployments/{name}`: one, with its body and its latest firings
//!   (`?firings=` how many, default 20, at most 500), each with its Run's
//!   `run_id` and outcome status;
//! - `POST …/deployments/{name}/disable` and `…/enable`: stop or resume its
//!   triggers (an enabled schedule's next tick is computed from now: ticks
//!   missed while disabled never fire);
//! - `DELETE …/deployments/{name}`: remove it (its firings' Runs stay until
//!   their retention ends).
//!
//! Agents deploy through MCP (`execute` with `mode: "deploy"`); operators
//! and tenant admins watch and stop what was deployed here. Every change
//! is audited and announced to the other replicas.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{Admin, AdminState, ApiError, ApiResult, audit, live_tenant};
use pilotage_engine::clock::rfc3339;

use crate::deploy::manage;
use crate::deploy::model::{Deployment, of_tenant};

/// `?firings=`.
#[derive(Debug, Deserialize)]
pub(super) struct FiringsQuery {
    #[serde(default)]
    firings: Option<i64>,
}

async fn one(state: &AdminState, tenant: &str, name: &str) -> Result<Deployment, ApiError> {
    let row = state
        .platform
        .store()
        .deployment_get(tenant, name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no deployment '{name}' in tenant '{tenant}'")))?;
    Deployment::from_row(row).map_err(ApiError::internal)
}

/// `GET …/deployments`.
pub(super) async fn list(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path(tenant): Path<String>,
) -> ApiResult {
    admin.may(&tenant)?;
    live_tenant(&state, &tenant).await?;
    let deployments = of_tenant(state.platform.store(), &tenant).await?;
    let views: Vec<Value> = deployments.iter().map(Deployment::view).collect();
    Ok(Json(json!({"deployments": views})).into_response())
}

/// `GET …/deployments/{name}`.
pub(super) async fn get(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
    Query(query): Query<FiringsQuery>,
) -> ApiResult {
    admin.may(&tenant)?;
    let deployment = one(&state, &tenant, &name).await?;
    let store = state.platform.store();
    let rows = store.firings_of(&tenant, &name, query.firings.unwrap_or(20).clamp(1, 500)).await?;
    let mut firings = Vec::with_capacity(rows.len());
    for row in rows {
        // The outcome is the Run's; a Run past its retention is gone.
        let status = match store.run_get(&row.run_id).await? {
            Some(run) => {
                serde_json::from_str::<Value>(&run.record).ok().map(|record| record["outcome"]["status"].clone())
            }
            None => None,
        };
        firings.push(json!({
            "instance": row.instance,
            "version": row.version,
            "run_id": row.run_id,
            "status": status,
            "replica": row.owner,
            "at": rfc3339(row.claimed_at),
        }));
    }
    let mut view = deployment.view();
    view["body"] = json!(deployment.row.body);
    view["firings"] = json!(firings);
    Ok(Json(view).into_response())
}

async fn set_enabled(state: &AdminState, admin: &Admin, tenant: &str, name: &str, enabled: bool) -> ApiResult {
    admin.may(tenant)?;
    let found = manage::set_enabled(&state.platform, tenant, name, enabled).await.map_err(ApiError::internal)?;
    if !found {
        return Err(ApiError::not_found(format!("no deployment '{name}' in tenant '{tenant}'")));
    }
    let action = if enabled { "deployment.enable" } else { "deployment.disable" };
    audit(state, admin, action, &format!("{tenant}/{name}"), json!({})).await;
    Ok(Json(one(state, tenant, name).await?.view()).into_response())
}

/// `POST …/deployments/{name}/disable`.
pub(super) async fn disable(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
) -> ApiResult {
    set_enabled(&state, &admin, &tenant, &name, false).await
}

/// `POST …/deployments/{name}/enable`.
pub(super) async fn enable(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
) -> ApiResult {
    set_enabled(&state, &admin, &tenant, &name, true).await
}

/// `DELETE …/deployments/{name}`.
pub(super) async fn delete(
    State(state): State<AdminState>,
    Extension(admin): Extension<Admin>,
    Path((tenant, name)): Path<(String, String)>,
) -> ApiResult {
    admin.may(&tenant)?;
    if !manage::remove(&state.platform, &tenant, &name).await.map_err(ApiError::internal)? {
        return Err(ApiError::not_found(format!("no deployment '{name}' in tenant '{tenant}'")));
    }
    audit(&state, &admin, "deployment.delete", &format!("{tenant}/{name}"), json!({})).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}
