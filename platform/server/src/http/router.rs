//! The application router: `/mcp` and `/t/{tenant}/mcp` (rmcp's
//! Streamable HTTP service behind the origin check, authentication, the
//! compatibility layer and the session binding), the protected-resource
//! metadata, the server card and its AI Catalog, the admin API, webhook
//! deliveries, `/healthz`, `/readyz` and `/metrics`.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use tokio_util::sync::CancellationToken;

use super::{compat, connections, metrics, origin, server_card, session_binding};

use crate::admin::AdminState;
use crate::auth::middleware::{
    admin_protected_resource, protected_resource, require_principal, tenant_protected_resource, unknown_well_known,
};
use crate::mcp::PilotageServer;
use crate::mcp::listeners::Listeners;
use crate::mcp::observed::ObservedServer;
use crate::mcp::session_binding::{SessionBindings, SessionCeilings};
use crate::mcp::sessions::ObservedSessions;
use crate::settings::Settings;
use crate::tenancy::Platform;

/// The MCP service for `platform`, with its sessions observed so
/// session-retained runs die with their session, and its binding to its
/// principal ends.
fn mcp_service(
    platform: &Platform,
    listeners: &Arc<Listeners>,
    settings: &Settings,
    shutdown: &CancellationToken,
    bindings: &SessionBindings,
    shared: Option<&crate::fleet::sessions::SharedSessions>,
    mut evictions: tokio::sync::mpsc::UnboundedReceiver<String>,
) -> StreamableHttpService<ObservedServer, ObservedSessions<LocalSessionManager>> {
    let shared = shared.cloned();
    let mut sessions = LocalSessionManager::default();
    let session_idle = Duration::from_secs(settings.session_idle_secs);
    sessions.session_config.keep_alive = Some(session_idle);
    // rmcp keeps the answers of a session's completed requests for a late
    // resume (`Last-Event-ID`); by default for 60 s, evicted only when the
    // session next hears from its client. A burst's answers then held the
    // node's memory a minute and more; a client that lost its stream
    // reconnects within seconds.
    sessions.session_config.completed_cache_ttl = COMPLETED_ANSWERS_TTL;
    let closing = platform.clone();
    let bound = bindings.clone();
    let shared_sessions = shared.clone();
    let idle = session_idle;
    let closing_listeners = listeners.clone();
    let on_close: Arc<dyn Fn(&SessionId) + Send + Sync> = Arc::new(move |id: &SessionId| {
        let platform = closing.clone();
        let id = id.to_string();
        bound.release(&id);
        closing_listeners.remove(&id);
        let runtime = platform.runtime().clone();
        // With replicas, this copy closing (idle here, or this replica
        // stopping) ends the session only when the fleet is done with it.
        if let Some(shared) = shared_sessions.clone() {
            runtime.spawn(async move { shared.close_local(&id, idle).await });
            return;
        }
        runtime.spawn(async move {
            match platform.store().runs_delete_session(&id).await {
                Ok(deleted) if deleted > 0 => {
                    tracing::info!(session = %id, deleted, "session ended; its runs were deleted")
                }
                Ok(_) => {}
                Err(error) => tracing::error!(session = %id, %error, "cannot delete the runs of an ended session"),
            }
        });
    });
    // Origin is validated by the edge (`origin`), before authentication,
    // for the MCP endpoints and the admin API alike.
    // A stateless (2026-07-28) request whose handler answers at once gets
    // its response as `application/json` rather than a one-event stream
    // (rmcp falls back to a stream when notifications come first): no SSE
    // framing to write, and none for the edge to unwrap for a client that
    // accepts only JSON. Session requests keep their event streams.
    let mut config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_allowed_hosts(settings.allowed_hosts())
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(settings.max_body_bytes);
    if shared.is_some() {
        config.session_store =
            Some(Arc::new(crate::fleet::sessions::StoredSessions::new(platform.store().clone(), bindings.clone())));
    }
    let factory = platform.clone();
    let listeners = listeners.clone();
    let manager = Arc::new(ObservedSessions::new(sessions, on_close, bindings.clone()));
    // A session evicted at the ceiling (its binding already ended, and with
    // replicas its stored row too, before the new session opened) is closed
    // here: its transport and runs go; the stored row is ended again in
    // case that first write failed.
    let closer = manager.clone();
    let store = platform.store().clone();
    let fleet = shared.is_some();
    platform.runtime().spawn(async move {
        while let Some(id) = evictions.recv().await {
            if fleet && let Err(error) = store.session_end(&id).await {
                tracing::error!(session = %id, %error, "cannot end an evicted session");
            }
            let _ = closer.close_session(&SessionId::from(id)).await;
        }
    });
    StreamableHttpService::new(
        move || Ok(ObservedServer::http(PilotageServer::new(factory.clone(), listeners.clone()))),
        manager,
        config,
    )
}

/// How long a session keeps the answer of a completed request for a
/// client that resumes its stream (`Last-Event-ID`).
const COMPLETED_ANSWERS_TTL: Duration = Duration::from_secs(10);

async fn healthz() -> impl IntoResponse {
    (StatusCode::OK, "ok\n")
}

/// `/readyz`: 503 while the server drains, while its database does not
/// answer, and while its capacity is saturated (a call waits for a place
/// in a pool, or a pool's admitted part is at least
/// `SATURATED_AT` in use), so a balancer steers new sessions to another
/// replica; the body says which. 200 otherwise.
async fn readyz(State(platform): State<Platform>) -> impl IntoResponse {
    if platform.in_flight().is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n".to_owned());
    }
    if !platform.store().ping().await {
        return (StatusCode::SERVICE_UNAVAILABLE, "the database does not answer\n".to_owned());
    }
    let usage = platform.engine().admission().usage();
    if usage.saturated(pilotage_engine::admission::SATURATED_AT) {
        let pools: Vec<String> = usage
            .pools
            .iter()
            .map(|pool| {
                format!(
                    "{}: {} of {} calls, {} waiting",
                    pool.pool.as_str(),
                    pool.calls,
                    pool.admitted_calls,
                    pool.waiting
                )
            })
            .collect();
        return (StatusCode::SERVICE_UNAVAILABLE, format!("saturated: {}\n", pools.join("; ")));
    }
    (StatusCode::OK, "ready\n".to_owned())
}

/// The application router: `/mcp` and `/t/{tenant}/mcp` behind
/// authentication, the protected-resource metadata, the admin API at
/// `/admin/v1`, `/healthz`, `/readyz`, and `/metrics` behind its bearer
/// token when `settings.metrics_token` is set and the metrics have no
/// listener of their own.
pub(crate) fn app(
    platform: Platform,
    listeners: Arc<Listeners>,
    settings: &Settings,
    shutdown: CancellationToken,
    admin: AdminState,
) -> Router {
    let bindings = SessionBindings::new(SessionCeilings {
        per_principal: settings.max_sessions_per_principal,
        per_tenant: settings.max_sessions_per_tenant,
        idle: Duration::from_secs(settings.session_idle_secs),
    });
    // Replicas on one PostgreSQL share sessions (fleet::sessions).
    let shared =
        platform.store().is_shared().then(|| crate::fleet::sessions::SharedSessions::new(platform.store().clone()));
    let (evict, evictions) = tokio::sync::mpsc::unbounded_channel();
    let mcp = mcp_service(&platform, &listeners, settings, &shutdown, &bindings, shared.as_ref(), evictions);
    let compat = compat::Compat {
        max_body_bytes: settings.max_body_bytes,
        timeout: Duration::from_millis(settings.request_timeout_ms),
        body_read_timeout: Duration::from_millis(settings.body_read_timeout_ms),
        in_flight: compat::InFlight::default(),
    };
    let binding = session_binding::SessionBinding { bindings, shared, evictions: evict };
    let auth = admin.auth.clone();
    let origins = Arc::new(origin::OriginPolicy::new(&settings.allowed_origins, &settings.public_url()));
    // Order: the Origin check first, then authenticate (a refused request
    // never reaches rmcp), then the compatibility layer, then the session
    // binding (which needs the principal, and reads the body compat has
    // already bounded).
    // Each middleware layer clones the service below it for every request;
    // behind an `Arc` that is a pointer copy, not a copy of rmcp's
    // configuration (its allowed hosts) five times over.
    let mcp = Arc::new(mcp);
    let serve = move |request: axum::extract::Request| {
        let mcp = mcp.clone();
        async move { mcp.handle(request).await.map(axum::body::Body::new) }
    };
    let mcp_routes = Router::new()
        .route("/mcp", axum::routing::any(serve.clone()))
        .route("/t/{tenant}/mcp", axum::routing::any(serve))
        .layer(axum::middleware::from_fn_with_state(binding, session_binding::session_binding))
        .layer(axum::middleware::from_fn_with_state(compat, compat::compat))
        .layer(axum::middleware::from_fn_with_state(auth.clone(), require_principal))
        .layer(axum::middleware::from_fn_with_state(origins.clone(), origin::mcp_origin));
    // The approval page's forms (sign-in, decision) are refused when posted
    // from another site's page, as the console's are.
    let approval_page = crate::admin::approval_page(admin.clone())
        .layer(axum::middleware::from_fn_with_state(
            connections::BodyDeadline(Duration::from_millis(settings.body_read_timeout_ms)),
            connections::body_deadline,
        ))
        .layer(axum::middleware::from_fn_with_state(origins.clone(), origin::admin_origin));
    // The console exists only when the setting is on: off, no route of it
    // is mounted and nothing of it runs on any request.
    // A form posted from another site's page (a forged sign-in) is refused
    // by its Origin, as the admin API's requests are.
    let console = settings.console.then(|| {
        crate::console::router(admin.clone())
            .layer(axum::middleware::from_fn_with_state(
                connections::BodyDeadline(Duration::from_millis(settings.body_read_timeout_ms)),
                connections::body_deadline,
            ))
            .layer(axum::middleware::from_fn_with_state(origins.clone(), origin::admin_origin))
    });
    let admin_routes = crate::admin::router(admin)
        .layer(axum::middleware::from_fn_with_state(
            connections::BodyDeadline(Duration::from_millis(settings.body_read_timeout_ms)),
            connections::body_deadline,
        ))
        .layer(axum::middleware::from_fn_with_state(origins, origin::admin_origin));
    let metadata = Router::new()
        .route("/.well-known/oauth-protected-resource", get(protected_resource))
        .route("/.well-known/oauth-protected-resource/mcp", get(protected_resource))
        .route("/.well-known/oauth-protected-resource/t/{tenant}/mcp", get(tenant_protected_resource))
        .route("/.well-known/oauth-protected-resource/admin/v1", get(admin_protected_resource))
        .route("/.well-known/{*rest}", axum::routing::any(unknown_well_known))
        .with_state(auth);
    let mut router = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(platform.clone())
        .nest("/admin/v1", admin_routes)
        .merge(approval_page)
        .merge(console.unwrap_or_default())
        .merge(metadata)
        .merge(server_card::router(settings))
        .merge(crate::deploy::webhook::router(platform.clone()))
        .merge(mcp_routes);
    // Unknown paths of this listener are refused by the MCP routes'
    // authentication (401); `/metrics` says plainly whether it is here.
    // The main listener serves `/metrics` behind its token when the
    // metrics have no listener of their own.
    match settings.metrics_token.as_deref().filter(|_| settings.metrics_listen.is_none()) {
        Some(token) => {
            router = router.merge(metrics::router(metrics::MetricsEndpoint::new(platform, listeners, Some(token))))
        }
        None => router = router.route("/metrics", get(metrics::metrics_not_served)),
    }
    router
}
