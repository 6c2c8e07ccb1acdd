//! What an admin API request passes before its body is read: the
//! credential, checked from the headers alone ([`require_admin`], a layer
//! in front of every route but `/openapi.json`), then the route's body
//! bound, applied while the body streams in.
//!
//! - JSON routes read their body with [`AdminBody`], bounded by the
//!   `admin_max_body_bytes` setting (default 4 MiB);
//! - a Language upload reads its body with [`ComponentUpload::read`], once
//!   the tenant is known to be the caller's, bounded by
//!   `max_component_bytes` (default 32 MiB), hashing it (SHA-256) as the
//!   chunks arrive.
//!
//! A body over its bound is refused with 413 as soon as it is known to be:
//! at once from `Content-Length`, else at the chunk that crosses the bound,
//! without reading further. A request without a valid credential gets its
//! 401/403 before a byte of its body is read, so an unauthenticated client
//! cannot make the server buffer anything (a client sending
//! `Expect: 100-continue` is not even asked for the body).
//!
//! An admitted upload is held in memory once it is complete: wasmtime
//! compiles a component from its bytes, and the store keeps them to
//! reload the Language at start-up. The bound on that is
//! `max_component_bytes` per request, reached only by authenticated
//! administrators.

use axum::body::Body;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::api::{AdminLimits, AdminState, ApiError, authorize};

/// The layer: authenticate from the headers, then pass the request on
/// with its [`super::Admin`] in the extensions; refuse with the
/// credential's 401/403 otherwise, the body unread.
pub(crate) async fn require_admin(State(state): State<AdminState>, mut request: Request, next: Next) -> Response {
    // A client past its failed credentials is refused before its next one
    // is read (`super::throttle`).
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(peer)| *peer);
    let client = state.throttle.client(peer, request.headers());
    if let Err(left) = state.throttle.check(client) {
        return ApiError::throttled(left).into_response();
    }
    let authorized = authorize(&state, request.headers()).await;
    if matches!(&authorized, Err(error) if error.status == StatusCode::UNAUTHORIZED) {
        state.throttle.failed(client);
    }
    match authorized {
        Ok(admin) => {
            // The tenant a route acts on is in its path: a credential for
            // another tenant is refused here, before any body is read.
            if let Some(tenant) = path_tenant(request.uri().path()) {
                if let Err(error) = admin.may(&tenant) {
                    return error.into_response();
                }
                // What a tenant owns (its approvals, Runs, secrets…) is
                // asked of a tenant that exists: an unknown one is a 404
                // naming it, never an empty list that reads as "none".
                // Only after `may`, so no credential learns which other
                // tenants exist.
                if has_sub_resource(request.uri().path()) {
                    match state.platform.store().tenant(&tenant).await {
                        Ok(Some(_)) => {}
                        Ok(None) => return ApiError::not_found(format!("no tenant '{tenant}'")).into_response(),
                        Err(error) => return ApiError::from(error).into_response(),
                    }
                }
            }
            request.extensions_mut().insert(admin);
            next.run(request).await
        }
        Err(error) => {
            let unauthorized = error.status == StatusCode::UNAUTHORIZED;
            let mut response = error.into_response();
            // An OAuth client finds where to get a token for this resource
            // (RFC 9728 §5.1), as it does at the MCP resource.
            if unauthorized
                && let Ok(value) = axum::http::HeaderValue::from_str(&format!(
                    "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/admin/v1\"",
                    state.auth.public_url
                ))
            {
                response.headers_mut().insert(axum::http::header::WWW_AUTHENTICATE, value);
            }
            response
        }
    }
}

/// The tenant of an admin route's path (`/tenants/{tenant}/…`), decoded.
fn path_tenant(path: &str) -> Option<String> {
    let mut segments = path.trim_start_matches('/').split('/');
    let first = segments.next()?;
    let tenant = segments.next().filter(|segment| first == "tenants" && !segment.is_empty())?;
    Some(percent_encoding::percent_decode_str(tenant).decode_utf8_lossy().into_owned())
}

/// Whether `path` names something inside a tenant (`/tenants/{t}/…`),
/// not the tenant itself (whose own routes answer 404 when it is unknown).
fn has_sub_resource(path: &str) -> bool {
    path.trim_start_matches('/').split('/').filter(|segment| !segment.is_empty()).count() > 2
}

fn too_large(limit: usize, setting: &str) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the body is larger than {limit} bytes, this route's bound (setting {setting})"),
    )
    .at("body")
}

/// Reads `request`'s body, refusing it past `limit` bytes; `each` sees
/// every chunk as it arrives.
async fn read_bounded(
    request: Request,
    limit: usize,
    setting: &str,
    mut each: impl FnMut(&[u8]),
) -> Result<Vec<u8>, ApiError> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large(limit, setting));
    }
    let mut bytes = Vec::with_capacity(declared.map_or(0, |length| length as usize));
    let mut stream = request.into_body().into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| ApiError::field("body", format!("the body could not be read: {error}")))?;
        if bytes.len() + chunk.len() > limit {
            return Err(too_large(limit, setting));
        }
        each(&chunk);
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// A JSON route's body, at most `admin_max_body_bytes`.
#[derive(Debug)]
pub(crate) struct AdminBody(pub Vec<u8>);

impl FromRequest<AdminState> for AdminBody {
    type Rejection = ApiError;

    async fn from_request(request: Request<Body>, state: &AdminState) -> Result<Self, Self::Rejection> {
        read_bounded(request, state.limits.json_bytes, "admin_max_body_bytes", |_| {}).await.map(AdminBody)
    }
}

/// A Language component upload: its bytes (at most
/// `max_component_bytes`) and their SHA-256, computed as they arrived.
#[derive(Debug)]
pub(crate) struct ComponentUpload {
    /// The component's bytes.
    pub bytes: Vec<u8>,
    /// Their SHA-256, lowercase hex.
    pub sha256: String,
}

impl ComponentUpload {
    /// Reads `request`'s body as an upload under `limits`. A handler calls
    /// it after its own checks (the tenant the credential may administer),
    /// so a refused upload is not read at all.
    ///
    /// # Errors
    /// [`ApiError`] 413 `body_too_large` past `max_component_bytes`, 400
    /// when the body cannot be read.
    pub(crate) async fn read(request: Request, limits: &AdminLimits) -> Result<ComponentUpload, ApiError> {
        let mut hasher = Sha256::new();
        let bytes = read_bounded(request, limits.component_bytes, "max_component_bytes", |chunk| {
            hasher.update(chunk);
        })
        .await?;
        Ok(ComponentUpload { bytes, sha256: hex::encode(hasher.finalize()) })
    }
}
