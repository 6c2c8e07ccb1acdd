//! A compatibility layer in front of rmcp's Streamable HTTP service:
//!
//! - a body that is not JSON gets the JSON-RPC parse error -32700, and
//!   JSON that is not one JSON-RPC message gets -32600 (rmcp would answer
//!   a plain-text 415; Part III §7.1 asks for carrier errors);
//! - a POST without `Accept`, or accepting only `application/json` (or
//!   `*/*`), is served as plain JSON rather than refused with 406: the
//!   request is passed on as accepting both, and an event-stream answer is
//!   unwrapped to the one JSON-RPC response it carries, keeping
//!   `Mcp-Session-Id`;
//! - a missing `Content-Type` on a JSON body is taken as JSON;
//! - each POST's body must arrive within a bound (408, then the
//!   connection closes), and each POST is bounded in time (a JSON-RPC
//!   error after the timeout);
//! - a session DELETE answers 204 (not 202), which every client accepts.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};

/// The layer's settings.
#[derive(Clone, Copy, Debug)]
pub struct Compat {
    /// Largest body read, in bytes.
    pub max_body_bytes: usize,
    /// Time allowed for one POST.
    pub timeout: Duration,
    /// Time allowed for the body to arrive once the head is read (setting
    /// `body_read_timeout_ms`).
    pub body_read_timeout: Duration,
}

fn rpc_error(status: StatusCode, id: Value, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn accepts(request: &Request, media: &str) -> bool {
    request
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|part| {
            let mut pieces = part.split(';');
            let essence = pieces.next().unwrap_or("").trim();
            let refused = pieces.any(|p| p.trim().replace(' ', "") == "q=0");
            essence.eq_ignore_ascii_case(media) && !refused
        })
}

/// The middleware function.
pub async fn compat(State(settings): State<Compat>, request: Request, next: Next) -> Response {
    if request.method() == Method::DELETE {
        // Ending a session: rmcp answers 202; clients that only accept 200
        // or 204 for a completed DELETE get 204, which every client takes.
        let mut response = next.run(request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        return response;
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let wants_stream = accepts(&request, "text/event-stream");
    let (mut parts, body) = request.into_parts();
    // A body trickled in byte by byte must not hold the connection: the
    // whole of it has `body_read_timeout` (the request timeout only starts
    // once it is read). The connection is closed after the answer, since
    // the rest of the body was never read.
    let reading = tokio::time::timeout(settings.body_read_timeout, axum::body::to_bytes(body, settings.max_body_bytes));
    let bytes = match reading.await {
        Ok(Ok(bytes)) => bytes,
        Err(_) => {
            let mut response = rpc_error(
                StatusCode::REQUEST_TIMEOUT,
                Value::Null,
                -32600,
                &format!("the request body did not arrive within {} ms", settings.body_read_timeout.as_millis()),
            );
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
        Ok(Err(_)) => {
            return rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                -32600,
                &format!("the request body is larger than {} bytes", settings.max_body_bytes),
            );
        }
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(error) => return rpc_error(StatusCode::BAD_REQUEST, Value::Null, -32700, &format!("Parse error: {error}")),
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let is_message = message.as_object().is_some_and(|object| {
        object.get("jsonrpc") == Some(&json!("2.0"))
            && (object.get("method").is_some_and(Value::is_string)
                || object.contains_key("result")
                || object.contains_key("error"))
    });
    if !is_message {
        let reason = if message.is_array() {
            "Invalid Request: batches are not supported; send one JSON-RPC message per request"
        } else {
            "Invalid Request: not a JSON-RPC 2.0 message"
        };
        return rpc_error(StatusCode::BAD_REQUEST, id, -32600, reason);
    }
    parts.headers.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    if !parts.headers.contains_key(header::CONTENT_TYPE) {
        parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    let request = Request::from_parts(parts, Body::from(bytes));
    let timeout = settings.timeout;
    let work = async move {
        let response = next.run(request).await;
        if wants_stream || !is_event_stream(&response) {
            return response;
        }
        unwrap_event_stream(response, &id).await
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(response) => response,
        Err(_) => rpc_error(
            StatusCode::GATEWAY_TIMEOUT,
            message.get("id").cloned().unwrap_or(Value::Null),
            -32603,
            &format!("the request took longer than {} ms", timeout.as_millis()),
        ),
    }
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// Reads an event stream until the JSON-RPC response to `id` arrives and
/// answers it as `application/json`, keeping the other headers.
async fn unwrap_event_stream(response: Response, id: &Value) -> Response {
    let (mut parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    let mut buffer = String::new();
    while let Some(chunk) = stream.next().await {
        let Ok(chunk): Result<Bytes, _> = chunk else { break };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(found) = response_in(&buffer, id) {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.remove(header::CACHE_CONTROL);
            parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            parts.status = StatusCode::OK;
            return Response::from_parts(parts, Body::from(found));
        }
    }
    rpc_error(StatusCode::BAD_GATEWAY, id.clone(), -32603, "the server's event stream ended without a response")
}

/// The data of the first complete event carrying a JSON-RPC response to
/// `id`.
fn response_in(buffer: &str, id: &Value) -> Option<String> {
    let normalized = buffer.replace("\r\n", "\n");
    let mut events = normalized.split("\n\n").collect::<Vec<_>>();
    // The last piece may be an incomplete event.
    events.pop();
    for event in events {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        let text = data.join("\n");
        if let Ok(message) = serde_json::from_str::<Value>(&text)
            && message.get("id") == Some(id)
            && (message.get("result").is_some() || message.get("error").is_some())
        {
            return Some(text);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_response_among_events() {
        let stream = "id: 0\nretry: 3000\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
        assert_eq!(response_in(stream, &json!(7)).as_deref(), Some("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}"));
        assert_eq!(response_in(stream, &json!(8)), None);
        assert_eq!(
            response_in("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", &json!(7)),
            None,
            "incomplete event"
        );
    }
}
