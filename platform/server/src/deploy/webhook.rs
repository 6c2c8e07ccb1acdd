//! Webhook triggers: `POST /events/{tenant}/{source}` with a JSON body,
//! signed by the sender with the source's key (the tenant secret
//! `webhook:<source>`, sealed like every secret):
//!
//! - `Pilotage-Timestamp`: the sending time, Unix seconds;
//! - `Pilotage-Signature`: `sha256=` and the lowercase hex HMAC-SHA256 of
//!   `<timestamp>.<body>` under the key.
//!
//! A delivery whose timestamp is more than [`TOLERANCE_SECONDS`] away from
//! the server's clock is stale (401); one whose signature was already
//! received is a replay (409): deliveries are remembered in the store
//! (fleet-wide) for longer than the tolerance. An accepted delivery fires
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
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use pilotage_engine::installation::Trigger;

use super::model::{WEBHOOK_SECRET_PREFIX, of_tenant};
use super::runtime::fire;
use crate::tenancy::Platform;

/// The timestamp header.
pub const TIMESTAMP_HEADER: &str = "pilotage-timestamp";
/// The signature header.
pub const SIGNATURE_HEADER: &str = "pilotage-signature";
/// How far a delivery's timestamp may be from the server's clock.
pub const TOLERANCE_SECONDS: i64 = 300;
/// How long deliveries are remembered (twice the tolerance).
pub const REPLAY_WINDOW_MS: i64 = 2 * TOLERANCE_SECONDS * 1000;
/// The largest event body accepted (larger: 413 before it is read
/// whole); the bound every trigger event shares.
pub use super::model::MAX_EVENT_BYTES;

/// The signature header's value for `body` sent at `timestamp` (Unix
/// seconds) under `key`: what a sender computes.
pub fn sign(key: &[u8], timestamp: i64, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

fn verify(key: &[u8], timestamp: &str, body: &[u8], signature: &str) -> bool {
    let Some(hex_part) = signature.strip_prefix("sha256=") else { return false };
    let Ok(expected) = hex::decode(hex_part) else { return false };
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    // Constant-time comparison.
    mac.verify_slice(&expected).is_ok()
}

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
    let unknown = || {
        ("unknown_source", refuse(StatusCode::NOT_FOUND, format!("no webhook source '{source}' in tenant '{tenant}'")))
    };
    if platform.tenant(&tenant).is_none_or(|t| t.is_disabled()) {
        return unknown();
    }
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
    let key = match platform.secret_value(&tenant, &format!("{WEBHOOK_SECRET_PREFIX}{source}")).await {
        Ok(key) => key,
        Err(_) => return unknown(),
    };
    if !verify(key.as_bytes(), &timestamp, body, &signature) {
        return ("unauthorized", refuse(StatusCode::UNAUTHORIZED, "the signature does not match this source's key"));
    }
    let Ok(sent) = timestamp.parse::<i64>() else {
        return ("unauthorized", refuse(StatusCode::UNAUTHORIZED, format!("{TIMESTAMP_HEADER} is not Unix seconds")));
    };
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
    match platform.store().delivery_claim(&tenant, &source, &signature, received_ms).await {
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
    let digest = signature.trim_start_matches("sha256=");
    let delivery = format!("webhook:{}", &digest[..digest.len().min(32)]);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_for_its_key_timestamp_and_body() {
        let signature = sign(b"key", 1_700_000_000, b"{\"state\":\"open\"}");
        assert!(verify(b"key", "1700000000", b"{\"state\":\"open\"}", &signature));
        assert!(!verify(b"other", "1700000000", b"{\"state\":\"open\"}", &signature));
        assert!(!verify(b"key", "1700000001", b"{\"state\":\"open\"}", &signature));
        assert!(!verify(b"key", "1700000000", b"{\"state\":\"shut\"}", &signature));
        assert!(!verify(b"key", "1700000000", b"{\"state\":\"open\"}", "sha256=zz"));
        assert!(!verify(b"key", "1700000000", b"{\"state\":\"open\"}", &signature.replace("sha256=", "")));
    }
}
