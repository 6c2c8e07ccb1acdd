//! The operator console at `/console`: what the platform knows about a
//! tenant, as pages people look at rather than JSON they read
//! (docs/architecture.md, "The console and the views").
//!
//! Invariant: the console reads only what its viewer may see, and changes
//! only through a POST carrying the session's CSRF token (sign-out, an
//! approval decided from the inbox, [`approvals`]; a deployment enabled
//! or disabled by an administrator, [`actions`]). Every page answers from one [`session::Viewer`]: an operator (the
//! operator token or `pilotage:admin`: every tenant) or one tenant's reader
//! (`pilotage:tenant-admin` or `pilotage:console`). A tenant's page asked
//! for by a viewer who may not see that tenant is the same 404, byte for
//! byte, as a tenant that does not exist, so a tenant's reader learns no
//! other tenant's name. Secrets never reach a page (bindings show their
//! header names, never values; data sources show their target without
//! credentials).
//!
//! - Off by default (setting `console`; the chart's `console.enabled`):
//!   when off no route of this module is mounted, and the MCP request path
//!   is the same code either way.
//! - Sign-in with a credential the platform already accepts, exchanged for
//!   a session cookie sealed with the platform key (any replica reads it),
//!   `HttpOnly`, `SameSite=Lax`, `Path=/console`, 30 minutes
//!   ([`session`]).
//! - Server-rendered HTML with a little script, all embedded in the binary
//!   ([`assets`]); a strict Content-Security-Policy (no inline script, no
//!   framing, nothing from elsewhere).
//! - Pages: a tenant's overview with quotas, their use and live figures
//!   ([`figures`]); Languages; catalog; data sources; deployments and
//!   their firings; retained Runs with filters and the Run view ([`runs`]);
//!   the audit log ([`pages`]); what the tenant used per day ([`usage`]);
//!   the replica's capacity, on the operator's home and each tenant's
//!   overview ([`capacity`]).

mod actions;
mod approvals;
pub(crate) mod assets;
mod capacity;
mod figures;
mod oidc;
mod pages;
mod runs;
mod session;
mod usage;
pub(crate) use crate::web;

use axum::Router;
use axum::routing::{get, post};

use crate::admin::AdminState;

/// The console's routes, merged at the root by the edge when the setting
/// `console` is on.
pub(crate) fn router(state: AdminState) -> Router {
    Router::new()
        .route("/console", get(session::home))
        .route("/console/", get(session::home))
        .route("/console/sign-in", get(session::sign_in_page).post(session::sign_in))
        .route("/console/sign-out", post(session::sign_out))
        .route("/console/oidc/start", get(oidc::start))
        .route("/console/oidc/callback", get(oidc::callback))
        .route("/console/assets/{name}", get(assets::asset))
        .route("/console/approvals", get(approvals::inbox))
        .route("/console/approvals.json", get(approvals::count))
        .route("/console/approvals/{tenant}/{id}", post(approvals::post))
        .route("/console/t/{tenant}", get(pages::overview))
        .route("/console/t/{tenant}/figures.json", get(figures::figures))
        .route("/console/t/{tenant}/languages", get(pages::languages))
        .route("/console/t/{tenant}/catalog", get(pages::catalog))
        .route("/console/t/{tenant}/data-sources", get(pages::data_sources))
        .route("/console/t/{tenant}/deployments", get(runs::deployments))
        .route("/console/t/{tenant}/deployments/{name}", get(runs::deployment))
        .route("/console/t/{tenant}/deployments/{name}/state", post(actions::deployment_state))
        .route("/console/t/{tenant}/runs", get(runs::runs))
        .route("/console/t/{tenant}/runs/{run_id}", get(runs::run))
        .route("/console/t/{tenant}/usage", get(usage::usage))
        .route("/console/t/{tenant}/usage.csv", get(usage::usage_csv))
        .route("/console/t/{tenant}/audit", get(pages::audit))
        .route("/console/{*rest}", get(session::not_found_page))
        .with_state(state)
}
