//! `GET /metrics`: the Prometheus exposition of `telemetry::metrics`, in
//! the Prometheus text format 0.0.4.
//!
//! Where it is served is the operator's choice (`config::Settings`):
//!
//! - `metrics_listen`: on a listener of its own, which serves nothing else
//!   (bind it where only the scraper reaches, e.g. a pod's own address);
//! - `metrics_token` (without `metrics_listen`): on the main listener,
//!   answering only a request with `Authorization: Bearer <token>` (401
//!   otherwise, compared in constant time); with both, the own listener
//!   asks for the token too;
//! - neither: not served (`/metrics` on the main listener answers 404).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::mcp::listeners::Listeners;
use crate::tenancy::Platform;
use pilotage_engine::admission::Pool;
use pilotage_telemetry::metrics::{CapacityPool, PoolFigures, TEXT_CONTENT_TYPE};

/// What `/metrics` serves and who may read it.
#[derive(Clone, Debug)]
pub(crate) struct MetricsEndpoint {
    platform: Platform,
    listeners: Arc<Listeners>,
    /// The bearer token a scrape must present, if any.
    token: Option<Arc<str>>,
}

impl MetricsEndpoint {
    /// The endpoint of `platform`'s metrics (with the sessions and
    /// subscriptions of `listeners` as gauges), protected by `token` when
    /// given.
    pub(crate) fn new(platform: Platform, listeners: Arc<Listeners>, token: Option<&str>) -> MetricsEndpoint {
        MetricsEndpoint { platform, listeners, token: token.map(Arc::from) }
    }

    fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.token else { return true };
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .unwrap_or("");
        subtle::ConstantTimeEq::ct_eq(presented.as_bytes(), expected.as_bytes()).into()
    }
}

/// The handler: 401 with `WWW-Authenticate: Bearer` when a token is
/// required and not presented; else the exposition, with the gauges read
/// now (open sessions and subscriptions, tenants, enabled deployments,
/// MQTT subscriptions, the pools' capacity by pool and by tenant).
pub(crate) async fn metrics_get(State(endpoint): State<MetricsEndpoint>, headers: HeaderMap) -> Response {
    if !endpoint.admits(&headers) {
        let mut response =
            (StatusCode::UNAUTHORIZED, "a bearer token is required to read the metrics\n").into_response();
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"metrics\""));
        return response;
    }
    let platform = &endpoint.platform;
    let (sessions, subscriptions) = endpoint.listeners.counts();
    let metrics = platform.engine().metrics();
    metrics.set_gauges(sessions, subscriptions, platform.tenants().len());
    let deployments = platform.store().deployments_enabled_count().await.unwrap_or_default();
    metrics.set_deployment_gauges(deployments, platform.deployments().mqtt_held().await.len());
    let usage = platform.engine().admission().usage();
    let figures = usage.pools.each_ref().map(|pool| PoolFigures {
        in_use: pool.calls,
        waiting: pool.waiting,
        limit: pool.admitted_calls,
    });
    let tenants: Vec<(&str, CapacityPool, u64, u64)> = usage
        .tenants
        .iter()
        .map(|held| {
            let pool = match held.pool {
                Pool::Validation => CapacityPool::Validation,
                Pool::Execution => CapacityPool::Execution,
            };
            (held.tenant.as_str(), pool, u64::from(held.calls), u64::from(held.waiting))
        })
        .collect();
    metrics.set_capacity(figures, &tenants);
    ([(header::CONTENT_TYPE, HeaderValue::from_static(TEXT_CONTENT_TYPE))], metrics.encode()).into_response()
}

/// The main listener's `/metrics` when it does not serve the metrics
/// (they are off, or on a listener of their own): 404.
pub(crate) async fn metrics_not_served() -> Response {
    (StatusCode::NOT_FOUND, "metrics are not served on this listener\n").into_response()
}

/// A router serving `/metrics` and nothing else.
pub(crate) fn router(endpoint: MetricsEndpoint) -> Router {
    Router::new().route("/metrics", get(metrics_get)).with_state(endpoint)
}
