//! The session-binding layer in front of rmcp's Streamable HTTP service
//! (Part III §8.1, §8.4), between authentication and rmcp:
//!
//! - a request carrying `Mcp-Session-Id` (POST, GET streams and their
//!   resumption with `Last-Event-ID`, DELETE) passes with its id only when
//!   the session is bound to the request's principal (tenant and subject);
//!   otherwise the id is replaced by one no session ever has, so rmcp gives
//!   exactly the answer an unknown session gets (404 `Session not found`
//!   for POST and GET, the same 204 for DELETE, which then ends nothing);
//! - an `initialize` without `Mcp-Session-Id` (it would open a session;
//!   the compatibility layer, which parses the body, says so with
//!   [`OpensSession`])
//!   first takes a place under the ceilings
//!   ([`SessionBindings::reserve`]); beyond a ceiling it is refused with
//!   HTTP 429, `Retry-After` and a JSON-RPC error, and no session is
//!   created, only when none of the principal's own sessions is idle:
//!   otherwise its least recently used idle one is closed to make room
//!   (`mcp::session_binding`). The place travels to the session manager with the request
//!   ([`PendingSession`]), which binds it to the new id.
//!
//! Why 429 and not 403: the refusal is about what the caller holds now and
//! clears when it ends a session (DELETE) or one idles out; 429 with
//! `Retry-After` is what HTTP clients already treat as "back off, then
//! retry". 403 would say the credential may never do this (a client would
//! ask for another token), and 503 would blame the server (a balancer would
//! send the caller elsewhere to open more).
//!
//! Stateless requests (2026-07-28, no `initialize`, no session) are
//! neither counted nor checked.

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::mcp::session_binding::{PendingSession, Reserved, SessionBindingError, SessionBindings, SessionOwner};
use crate::tenancy::Principal;

/// The session header of Streamable HTTP.
pub(crate) const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");

/// The id put in place of a session id the caller does not hold. It is not
/// of the form rmcp issues (a UUID), so no session ever has it.
pub(crate) const UNKNOWN_SESSION_ID: &str = "pilotage-unknown-session";

/// The JSON-RPC error code of a refused `initialize` (the start of
/// JSON-RPC's implementation-defined server-error range).
pub(crate) const SESSION_CEILING_CODE: i64 = -32000;

/// The layer's state.
#[derive(Clone, Debug)]
pub(crate) struct SessionBinding {
    /// The bindings and ceilings.
    pub bindings: SessionBindings,
    /// Sessions shared by replicas on one PostgreSQL; `None` on SQLite.
    pub shared: Option<crate::fleet::sessions::SharedSessions>,
    /// Where the id of a session evicted at the ceiling goes to be closed
    /// (`http/router.rs` closes it in the session manager).
    pub evictions: tokio::sync::mpsc::UnboundedSender<String>,
}

/// What the compatibility layer (`compat`), which parses each POST body
/// once, tells this layer: the body is an `initialize` request with this
/// JSON-RPC `id`. Absent for every other message, so this layer never
/// reads or parses a body itself.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OpensSession {
    /// The request's id, echoed by a refusal.
    pub id: Value,
}

impl OpensSession {
    /// Whether the classified `message` is an `initialize` request.
    pub(crate) fn of(message: &pilotage_protocol::jsonrpc::Message) -> Option<OpensSession> {
        use pilotage_protocol::jsonrpc::MessageKind;
        let method = message.value.get("method").and_then(Value::as_str);
        (message.kind == MessageKind::Request && method == Some("initialize"))
            .then(|| OpensSession { id: message.id.clone() })
    }
}

fn ceiling_refusal(error: &SessionBindingError, id: Value) -> Response {
    let SessionBindingError::CeilingReached { scope, limit, retry_after } = error;
    let seconds = retry_after.as_secs_f64().ceil() as u64;
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": SESSION_CEILING_CODE,
        "message": error.to_string(),
        "data": {"reason": "session_ceiling", "scope": scope.as_str(), "limit": limit, "retry_after_s": seconds}
    }});
    let mut response = (StatusCode::TOO_MANY_REQUESTS, body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// The middleware function.
pub(crate) async fn session_binding(State(layer): State<SessionBinding>, mut request: Request, next: Next) -> Response {
    let caller = request.extensions().get::<Principal>().map(SessionOwner::of);
    if let Some(value) = request.headers().get(&SESSION_HEADER) {
        let id = value.to_str().ok().map(str::to_owned);
        let local = id.as_deref().and_then(|id| layer.bindings.owner(id));
        let mut held = matches!((&local, &caller), (Some(owner), Some(caller)) if owner == caller);
        // A session this replica does not hold may be another replica's:
        // its stored owner decides (fleet::sessions); rmcp restores it.
        let mut adopted = None;
        if local.is_none()
            && let (Some(shared), Some(id), Some(caller)) = (&layer.shared, &id, &caller)
            && shared.owner(id).await.is_some_and(|owner| owner == *caller)
        {
            layer.bindings.adopt(id, caller);
            held = true;
            adopted = Some(id.clone());
        }
        if !held {
            request.headers_mut().insert(SESSION_HEADER, HeaderValue::from_static(UNKNOWN_SESSION_ID));
            return next.run(request).await;
        }
        if let (Some(shared), Some(id)) = (&layer.shared, &id) {
            shared.touch(id);
        }
        let deleting = request.method() == Method::DELETE;
        let response = next.run(request).await;
        // A restore that failed, or a DELETE of a session restored just for
        // it, leaves no session here to end the binding: end it now.
        if let Some(id) = adopted
            && (deleting || response.status() == StatusCode::NOT_FOUND)
        {
            layer.bindings.release(&id);
        }
        return response;
    }
    let Some(caller) = caller else { return next.run(request).await };
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let Some(OpensSession { id }) = request.extensions().get::<OpensSession>().cloned() else {
        return next.run(request).await;
    };
    let pending = match layer.bindings.reserve(&caller) {
        Ok(Reserved { reservation, evicted }) => {
            if let Some(evicted) = evicted {
                tracing::info!(tenant = %caller.tenant, issuer = %caller.issuer, subject = %caller.subject, session = %evicted, "the principal's least recently used idle MCP session was closed to make room for a new one");
                // Ended in the shared store before the new session opens:
                // until then its principal could restore it on any replica
                // (this one included, its binding being gone here).
                if let Some(shared) = &layer.shared {
                    shared.end(&evicted).await;
                }
                let _ = layer.evictions.send(evicted);
            }
            PendingSession::new(reservation)
        }
        Err(error) => {
            tracing::info!(tenant = %caller.tenant, issuer = %caller.issuer, subject = %caller.subject, %error, "refused an MCP session");
            return ceiling_refusal(&error, id);
        }
    };
    request.extensions_mut().insert(pending.clone());
    let response = next.run(request).await;
    // Not bound (the initialize failed before a session existed): the place
    // is given back.
    drop(pending.take());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_initialize_requests_only() {
        let opens = |body: &str| OpensSession::of(&pilotage_protocol::jsonrpc::classify(body.as_bytes()).unwrap());
        assert_eq!(
            opens(r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}"#),
            Some(OpensSession { id: json!(7) })
        );
        assert_eq!(opens(r#"{"jsonrpc":"2.0","method":"initialize"}"#), None, "a notification");
        assert_eq!(opens(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#), None);
        assert_eq!(opens(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), None, "a response");
    }
}
