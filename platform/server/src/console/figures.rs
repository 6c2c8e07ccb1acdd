//! `GET /console/t/{tenant}/figures.json`: the live figures the overview's
//! charts draw (`assets/console.js` polls it every 5 seconds).
//!
//! `{"tenant": {"runs_by_status": {status: n}, "firings_by_deployment":
//! {name: n}, "running": n}, "platform": {"recording", …}|null, "at": ms}`: the tenant's
//! from its stored records of the last 24 hours (so a tenant's reader sees
//! only its own), and for an operator, this replica's counters since it
//! started (`pilotage_mcp_requests_total` by outcome,
//! `pilotage_runs_total` by status, `pilotage_firings_total` by result),
//! or `{"recording": false}` when the replica records no metrics (it
//! serves none: neither `metrics_listen` nor `metrics_token`).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::session::TenantPage;
use crate::admin::AdminState;

/// The window of the tenant's figures, in ms.
const WINDOW_MS: i64 = 24 * 3600 * 1000;

fn object(pairs: impl IntoIterator<Item = (String, i64)>) -> Value {
    Value::Object(pairs.into_iter().map(|(k, v)| (k, json!(v))).collect::<Map<_, _>>())
}

pub(super) async fn figures(State(state): State<AdminState>, page: TenantPage) -> Response {
    let (viewer, tenant, live) = (&page.viewer, page.tenant.as_str(), &page.live);
    let store = state.platform.store();
    let since = state.platform.clock().now_ms() - WINDOW_MS;
    let (runs, firings) =
        match (store.runs_by_status(tenant, since).await, store.firings_count_by_deployment(tenant, since).await) {
            (Ok(runs), Ok(firings)) => (runs, firings),
            (Err(error), _) | (_, Err(error)) => return page.failed(&state, &error),
        };
    let platform = viewer.operator().then(|| {
        let metrics = state.platform.engine().metrics();
        if !metrics.is_enabled() {
            // This replica counts nothing unless it serves its metrics
            // (metrics_listen or metrics_token): say so, never draw zeros.
            return json!({"recording": false});
        }
        let totals = |family: &str, label: &str| {
            object(metrics.totals_by(family, label).into_iter().map(|(k, v)| (k, i64::try_from(v).unwrap_or(i64::MAX))))
        };
        json!({
            "recording": true,
            "requests_by_outcome": totals("mcp_requests_total", "outcome"),
            "runs_by_status": totals("runs_total", "status"),
            "firings_by_result": totals("firings_total", "result"),
        })
    });
    let mut response = Json(json!({
        "tenant": {
            "runs_by_status": object(runs),
            "firings_by_deployment": object(firings),
            "running": live.running(),
        },
        "platform": platform,
        "at": pilotage_engine::clock::system_now_ms(),
    }))
    .into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
