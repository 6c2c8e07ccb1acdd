//! Webhook triggers: `POST /events/{tenant}/{source}` with a JSON body,
//! signed by the sender with the source's key (the tenant secret
//! `webhook:<source>`, sealed like every secret):
//!
//! - `Pilotage-Timestamp`: the sending time, Unix seconds;
//! - `Pilotage-Signature`: `sha256=` and the hex HMAC-SHA256 of
//!   `<timestamp>.<body>` under the key (`pilotage-signature`).
//!
//! A delivery to a tenant or source that does not exist is answered as one
//! whose signature does not match (401), so the unauthenticated endpoint
//! names no tenant. A delivery whose timestamp is more than
//! [`TOLERANCE_SECONDS`] away from
//! the server's clock is stale (401); one whose MAC was already received,
//! in any encoding, is a replay (409): deliveries are remembered in the
//! store (fleet-wide) by the MAC's bytes for longer than the tolerance. An accepted delivery fires
//! every enabled deployment of the tenant with a webhook trigger on that
//! source (each claimed once) and is answered `202` with the deployments it
//! fires; the firings run after the answer.

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use pilotage_engine::installation::Trigger;

use super::model::{WEBHOOK_SECRET_PREFIX, of_tenant};
use super::runtime::fire;
use crate::tenancy::Platform;

use pilotage_signature::Signed;
pub use pilotage_signature::{SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
/// How far a delivery's timestamp may be from the server's clock.
pub const TOLERANCE_SECONDS: i64 = 300;
/// How long deliveries are remembered (twice the tolerance).
pub const REPLAY_WINDOW_MS: i64 = 2 * TOLERANCE_SECONDS * 1000;
/// The largest event body accepted (larger: 413 before it is read
/// whole); the bound every trigger event shares.
pub use super::model::MAX_EVENT_BYTES;

fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

/// The event endpoint's routes (`/events/{tenant}/{source}`), outside
/// OAuth: a delivery is authenticated by its signature.
pub fn router(platform: Platform) -> Router {
    Router::new()
        .route("/events/{tenant}/{source}", post(deliver))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_EVENT_BYTES))
        .with_state(platform)
}

async fn deliver(
    State(platform): State<Platform>,
    Path((tenant, source)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (result, response) = receive(&platform, &tenant, &source, &headers, &body).await;
    platform.engine().metrics().webhook_delivery(result);
    response
}

/// Checks and accepts one delivery; the first member is the
/// `pilotage_webhook_deliveries_total` result.
async fn receive(
    platform: &Platform,
    tenant: &str,
    source: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> (&'static str, Response) {
    let (tenant, source) = (tenant.to_owned(), source.to_owned());
    // A signature's freshness is the real world's, like a credential's
    // lifetime: it is read from the system clock, not the platform's
    // (which a test or the demo may have frozen), and so are the
    // remembered deliveries it is pruned by.
    let received_ms = pilotage_engine::clock::system_now_ms();
    // An unknown or disabled tenant, an unknown source and a signature
    // that does not match answer alike (401, one body): the endpoint is
    // unauthenticated, and must not tell which tenants or sources exist.
    let not_matching = || refuse(StatusCode::UNAUTHORIZED, "the signature does not match this source's key");
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let (Some(timestamp), Some(signature)) = (header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER)) else {
        return (
            "unauthorized",
            refuse(
                StatusCode::UNAUTHORIZED,
                format!(
                    "a delivery carries {TIMESTAMP_HEADER} (Unix seconds) and {SIGNATURE_HEADER} (sha256=HMAC of '<timestamp>.<body>')"
                ),
            ),
        );
    };
    let signed = match Signed::parse(&timestamp, &signature) {
        Ok(signed) => signed,
        Err(error) => return ("unauthorized", refuse(StatusCode::UNAUTHORIZED, error.to_string())),
    };
    if platform.tenant(&tenant).is_none_or(|t| t.is_disabled()) {
        return ("unknown_source", not_matching());
    }
    let key = match platform.secret_value(&tenant, &format!("{WEBHOOK_SECRET_PREFIX}{source}")).await {
        Ok(key) => key,
        Err(_) => return ("unknown_source", not_matching()),
    };
    if !signed.verify(key.as_bytes(), body) {
        return ("unauthorized", not_matching());
    }
    let sent = signed.timestamp();
    if (received_ms / 1000 - sent).abs() > TOLERANCE_SECONDS {
        return (
            "stale",
            refuse(
                StatusCode::UNAUTHORIZED,
                format!(
                    "the delivery is stale: sent at {sent}, more than {TOLERANCE_SECONDS} s from the server's clock"
                ),
            ),
        );
    }
    let event: Value = match serde_json::from_slice(body) {
        Ok(event) => event,
        Err(error) => return ("malformed", refuse(StatusCode::BAD_REQUEST, format!("the body is not JSON: {error}"))),
    };
    // Remembered by the MAC's bytes: a re-cased signature is the same
    // delivery.
    let replay_id = signed.replay_id();
    match platform.store().delivery_claim(&tenant, &source, &replay_id, received_ms).await {
        Ok(true) => {}
        Ok(false) => {
            return ("replayed", refuse(StatusCode::CONFLICT, "this delivery was already received (a replay)"));
        }
        Err(error) => {
            tracing::error!(%error, "cannot record a webhook delivery");
            return ("unavailable", refuse(StatusCode::SERVICE_UNAVAILABLE, "the server's storage failed; retry"));
        }
    }
    let deployments = match of_tenant(platform.store(), &tenant).await {
        Ok(deployments) => deployments,
        Err(error) => {
            tracing::error!(%error, "cannot read deployments");
            return ("unavailable", refuse(StatusCode::SERVICE_UNAVAILABLE, "the server's storage failed; retry"));
        }
    };
    let trigger = Trigger::Webhook { source: source.clone() };
    let matching: Vec<_> = deployments.into_iter().filter(|d| d.row.enabled && d.triggers.contains(&trigger)).collect();
    let names: Vec<String> = matching.iter().map(|d| d.row.name.clone()).collect();
    let delivery = format!("webhook:{}", &replay_id[..32]);
    let at = platform.clock().now_ms();
    for deployment in matching {
        let platform = platform.clone();
        let (delivery, trigger, event) = (delivery.clone(), trigger.clone(), event.clone());
        tokio::spawn(async move {
            fire(&platform, &deployment, &delivery, Some(trigger), event, at, at).await;
        });
    }
    ("accepted", (StatusCode::ACCEPTED, Json(json!({"delivery": delivery, "fires": names}))).into_response())
}
