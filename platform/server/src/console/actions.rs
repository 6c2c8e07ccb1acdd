//! What an administrator does from a tenant's pages: a deployment enabled
//! or disabled from its page (`POST
//! /console/t/{tenant}/deployments/{name}/state`). Each action is a POST
//! carrying the session's CSRF token, behind the console's Origin check,
//! taken only by a viewer who administers the tenant (an operator, a
//! tenant administrator: `session::Viewer::admin`), and audited as the
//! admin API's same action is; then back to the page.

use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;

use super::session::TenantPage;
use super::web::{self, escape, urlencode};
use crate::admin::{AdminState, audit};
use crate::deploy::manage;

/// The state form of a deployment's page.
#[derive(Debug, Deserialize)]
pub(super) struct DeploymentState {
    csrf: String,
    /// `enabled` or `disabled`.
    state: String,
}

/// `POST /console/t/{tenant}/deployments/{name}/state`.
pub(super) async fn deployment_state(
    State(state): State<AdminState>,
    page: TenantPage,
    Path((_, name)): Path<(String, String)>,
    Form(form): Form<DeploymentState>,
) -> Response {
    let refused = |why: &str| {
        let mut response = page.page(&state, "Refused", &format!("<p id=\"refused\">{}</p>", escape(why)), &[]);
        *response.status_mut() = StatusCode::FORBIDDEN;
        response
    };
    if !page.viewer.issued(&state, &form.csrf) {
        return refused("This form was not issued to your session.");
    }
    let Some(admin) = page.viewer.admin() else {
        return refused("Only an administrator of this tenant enables or disables its deployments.");
    };
    let enabled = match form.state.as_str() {
        "enabled" => true,
        "disabled" => false,
        _ => return refused("A deployment is enabled or disabled."),
    };
    let tenant = page.tenant.as_str();
    match manage::set_enabled(&state.platform, tenant, &name, enabled).await {
        Ok(true) => {}
        Ok(false) => return page.not_found(&state),
        Err(error) => return page.failed(&state, &error),
    }
    let action = if enabled { "deployment.enable" } else { "deployment.disable" };
    audit(&state, &admin, action, &format!("{tenant}/{name}"), json!({"from": "console"})).await;
    web::see_other(&format!("/console/t/{}/deployments/{}", urlencode(tenant), urlencode(&name)), None)
}
