//! A compatibility layer in front of rmcp's Streamable HTTP service:
//!
//! - a request of the 2026-07-28 revision naming a method that revision
//!   removed gets 404 with -32601 (SEP-2575);
//! - a body that is not JSON gets the JSON-RPC parse error -32700, and
//!   JSON that is not one valid JSON-RPC message gets -32600 or -32602
//!   (`protocol::jsonrpc` has the rules; rmcp would answer a plain-text
//!   415; Part III §7.1 asks for carrier errors);
//! - a POST without `Accept`, or accepting only `application/json` (or
//!   `*/*`), is served as plain JSON rather than refused with 406: the
//!   request is passed on as accepting both, and an event-stream answer is
//!   unwrapped to the one JSON-RPC response it carries, keeping
//!   `Mcp-Session-Id`;
//! - a missing `Content-Type` on a JSON body is taken as JSON; another
//!   media type gets 415 with a JSON-RPC error;
//! - each POST's body must arrive within a bound (408, then the
//!   connection closes), and each POST is bounded in time (a JSON-RPC
//!   error after the timeout);
//! - a session DELETE answers 204 (not 202), which every client accepts;
//! - requests and answers of the 2025-11-25 task form are put in shape
//!   (`task_form`);
//! - a request whose id is that of a request still in flight in the same
//!   session gets -32600 at once (rmcp keys its answers by id, so the
//!   second would never be answered and wait out the request timeout).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::session_binding::OpensSession;
use super::task_form::{self, Answer};
use crate::mcp::arguments::EdgeArguments;
use crate::mcp::tasks_2025::Form2025;
use pilotage_protocol::jsonrpc;

/// The layer's settings, and the requests in flight.
#[derive(Clone, Debug)]
pub(crate) struct Compat {
    /// Largest body read, in bytes.
    pub max_body_bytes: usize,
    /// Time allowed for one POST.
    pub timeout: Duration,
    /// Time allowed for the body to arrive once the head is read (setting
    /// `body_read_timeout_ms`).
    pub body_read_timeout: Duration,
    /// The ids of the requests in flight, by session.
    pub in_flight: InFlight,
}

/// The `(session, request id)` pairs of this replica's requests in flight
/// (JSON-RPC 2.0 §4: an id identifies one request; MCP: unique within a
/// session). An id is in flight from the request's arrival until its answer
/// is sent whole (or the client goes away), so a second request with the
/// same id meanwhile can be refused instead of never answered. Bounded by
/// the requests in flight, themselves bounded by `max_connections`.
#[derive(Clone, Debug, Default)]
pub(crate) struct InFlight(std::sync::Arc<std::sync::Mutex<std::collections::HashSet<(String, String)>>>);

impl InFlight {
    /// Marks `id` in flight in `session`; `None` when it already is.
    fn claim(&self, session: &str, id: &Value) -> Option<InFlightId> {
        let key = (session.to_owned(), id.to_string());
        let mut held = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.insert(key.clone()).then(|| InFlightId { set: self.clone(), key })
    }
}

/// One claimed id; dropping it ends the claim.
#[derive(Debug)]
struct InFlightId {
    set: InFlight,
    key: (String, String),
}

impl Drop for InFlightId {
    fn drop(&mut self) {
        self.set.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.key);
    }
}

/// `response` with `claim` held until its body is sent whole or dropped
/// (an event stream's answer comes after the handler returns).
fn holding(response: Response, claim: InFlightId) -> Response {
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _held = &claim;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
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
pub(crate) async fn compat(State(settings): State<Compat>, request: Request, next: Next) -> Response {
    if request.method() == Method::DELETE {
        // Ending a session: rmcp answers 202; clients that only accept 200
        // or 204 for a completed DELETE get 204, which every client takes.
        let mut response = next.run(request).await;
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        return as_rpc_error(response, Value::Null).await;
    }
    if request.method() != Method::POST {
        let response = next.run(request).await;
        return as_rpc_error(response, Value::Null).await;
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
            // The rest of the body is never read, so the connection cannot
            // carry another request: say so, or a pooling client sends its
            // next request into a connection the server drops.
            let mut response = rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                -32600,
                &format!("the request body is larger than {} bytes", settings.max_body_bytes),
            );
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    let removed = removed_methods(&parts.headers);
    let Classified { mut message, arguments } = match classify_body(&bytes, removed) {
        Ok(classified) => classified,
        Err(error) => {
            // A method the request's revision removed is 404 on HTTP.
            let status = if error.code == METHOD_NOT_FOUND { StatusCode::NOT_FOUND } else { StatusCode::BAD_REQUEST };
            return rpc_error(status, error.id.clone(), error.code, &error.message);
        }
    };
    if let Some(opens) = OpensSession::of(&message) {
        parts.extensions.insert(opens);
    }
    let plan = task_form::plan(&mut message.value, parts.headers.contains_key("mcp-session-id"));
    if plan.mark {
        parts.extensions.insert(Form2025 { deadline: tokio::time::Instant::now() + settings.timeout });
    }
    // A tools/call whose arguments were taken out goes on without them (a
    // small envelope to serialize); the handler reads them from here.
    let bytes = if plan.rewritten || arguments.is_some() { Bytes::from(message.value.to_string()) } else { bytes };
    if let Some(arguments) = arguments {
        parts.extensions.insert(EdgeArguments(std::sync::Arc::new(arguments)));
    }
    let id = message.id.clone();
    let session = parts.headers.get(super::session_binding::SESSION_HEADER).and_then(|value| value.to_str().ok());
    let claim = match (message.kind, session) {
        (jsonrpc::MessageKind::Request, Some(session)) => match settings.in_flight.claim(session, &id) {
            Some(claim) => Some(claim),
            None => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    id,
                    jsonrpc::INVALID_REQUEST,
                    "Invalid Request: a request with this id is still in flight in this session; give each request an id of its own",
                );
            }
        },
        _ => None,
    };
    let id_for_errors = id.clone();
    parts.headers.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    match parts.headers.get(header::CONTENT_TYPE).map(|value| value.to_str().unwrap_or("")) {
        None => {
            parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        // rmcp refuses any other media type with a plain-text 415.
        Some(value) if !value.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json") => {
            return rpc_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                id,
                jsonrpc::INVALID_REQUEST,
                "Invalid Request: the Content-Type of a JSON-RPC message must be application/json",
            );
        }
        Some(_) => {}
    }
    let request = Request::from_parts(parts, Body::from(bytes));
    let timeout = settings.timeout;
    let work = async move {
        let response = next.run(request).await;
        if let Some(answer) = plan.answer {
            return in_form(response, &id, answer).await;
        }
        if wants_stream || !is_event_stream(&response) {
            return response;
        }
        unwrap_event_stream(response, &id).await
    };
    let echo = id_for_errors.clone();
    let response = match tokio::time::timeout(timeout, work).await {
        Ok(response) => as_rpc_error(response, echo).await,
        Err(_) => rpc_error(
            StatusCode::GATEWAY_TIMEOUT,
            message.id.clone(),
            -32603,
            &format!("the request took longer than {} ms", timeout.as_millis()),
        ),
    };
    // A JSON answer is whole here; an event stream's comes as it streams.
    match claim {
        Some(claim) if is_event_stream(&response) => holding(response, claim),
        _ => response,
    }
}

/// The largest answer [`in_form`] reads, in bytes (a tool list or an
/// initialize result is far smaller).
const FORM_ANSWER_BYTES: usize = 16 << 20;

/// The answer to a request planned `answer` (`task_form`), as
/// `application/json` in the 2025-11-25 shape; an answer that is not one
/// JSON-RPC response passes as it is.
async fn in_form(response: Response, id: &Value, answer: Answer) -> Response {
    let response = if is_event_stream(&response) { unwrap_event_stream(response, id).await } else { response };
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, FORM_ANSWER_BYTES).await else {
        return rpc_error(StatusCode::BAD_GATEWAY, id.clone(), -32603, "the server's answer could not be read");
    };
    let Ok(mut message) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    task_form::finish(answer, &mut message);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(message.to_string()))
}

/// The largest plain-text refusal of rmcp's that [`as_rpc_error`] reads
/// (its refusals are one line; anything longer is cut, not buffered).
const REFUSAL_TEXT_BYTES: usize = 4096;

/// rmcp answers some refusals with a plain-text body: 400 "Session ID is
/// required", 404 "Session not found", 406, 415, 500. On the MCP endpoint
/// every error answer is a JSON-RPC error object (Part III §7.1, §8), so
/// such a response keeps its status and headers and gets the text as the
/// message of an error: -32600 for a 4xx, -32603 for a 5xx. A response
/// that is already JSON (or an event stream, or a success) passes as it is.
async fn as_rpc_error(response: Response, id: Value) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut text = Vec::new();
    let mut stream = body.into_data_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        let room = REFUSAL_TEXT_BYTES.saturating_sub(text.len());
        text.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if text.len() >= REFUSAL_TEXT_BYTES {
            break;
        }
    }
    let text = String::from_utf8_lossy(&text);
    let text = text.trim();
    let reason = if text.is_empty() { status.canonical_reason().unwrap_or("refused") } else { text };
    let (code, label) = if status.is_client_error() {
        (jsonrpc::INVALID_REQUEST, "Invalid Request")
    } else {
        (-32603, "Internal error")
    };
    let mut answer = rpc_error(status, id, code, &format!("{label}: {reason}"));
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    for (name, value) in parts.headers.iter() {
        answer.headers_mut().append(name.clone(), value.clone());
    }
    answer
}

/// The methods rmcp reads into a typed request or notification. A message
/// naming one whose params do not fit the type is read as a custom one
/// instead, and then refused outside a session with a plain-text 400.
const TYPED_METHODS: &[&str] = {
    use rmcp::model::*;
    &[
        PingRequestMethod::VALUE,
        InitializeResultMethod::VALUE,
        DiscoverRequestMethod::VALUE,
        CompleteRequestMethod::VALUE,
        SetLevelRequestMethod::VALUE,
        GetPromptRequestMethod::VALUE,
        ListPromptsRequestMethod::VALUE,
        ListResourcesRequestMethod::VALUE,
        ListResourceTemplatesRequestMethod::VALUE,
        ReadResourceRequestMethod::VALUE,
        SubscriptionsListenRequestMethod::VALUE,
        SubscribeRequestMethod::VALUE,
        UnsubscribeRequestMethod::VALUE,
        CallToolRequestMethod::VALUE,
        ListToolsRequestMethod::VALUE,
        GetTaskMethod::VALUE,
        UpdateTaskMethod::VALUE,
        CancelTaskMethod::VALUE,
        ListSkillsRequestMethod::VALUE,
        GetSkillRequestMethod::VALUE,
        ReadResourceDirectoryRequestMethod::VALUE,
        CancelledNotificationMethod::VALUE,
        ProgressNotificationMethod::VALUE,
        InitializedNotificationMethod::VALUE,
        RootsListChangedNotificationMethod::VALUE,
    ]
};

/// The JSON-RPC rules of the edge (`pilotage_protocol::jsonrpc`), then
/// rmcp's own message type, so that no body rmcp would refuse with a
/// plain-text answer reaches it (Part III §7.1): a call to an MCP method
/// whose params do not fit the method is -32602; a response that does not
/// fit rmcp's type is -32600.
fn classify_body(bytes: &[u8], removed: &[&str]) -> Result<Classified, jsonrpc::EdgeError> {
    let mut message = jsonrpc::classify(bytes)?;
    if let Some(method) = message.value.get("method").and_then(Value::as_str).filter(|m| removed.contains(m)) {
        return Err(jsonrpc::EdgeError {
            code: METHOD_NOT_FOUND,
            message: format!("Method not found: '{method}' is not part of MCP {STATELESS_REVISION} and later"),
            id: message.id.clone(),
        });
    }
    // A tool's arguments are the bulk of a tools/call (a whole program, for
    // the loop tools), and rmcp's type takes any object there: they are
    // taken out, leaving an empty object, so neither the typed check nor
    // rmcp itself copies the program through serde's buffering of rmcp's
    // untagged enums; the handler gets them as parsed here
    // (`EdgeArguments`).
    let is_call = message.value.get("method").and_then(Value::as_str) == Some("tools/call");
    let arguments = message
        .value
        .get_mut("params")
        .filter(|_| is_call)
        .and_then(Value::as_object_mut)
        .and_then(|params| params.get_mut("arguments"))
        .filter(|arguments| arguments.is_object())
        .map(|arguments| std::mem::replace(arguments, Value::Object(serde_json::Map::new())));
    fits_mcp(&message)?;
    let arguments = match arguments {
        Some(Value::Object(arguments)) => Some(arguments),
        _ => None,
    };
    Ok(Classified { message, arguments })
}

/// A body [`classify_body`] accepted.
#[derive(Debug)]
struct Classified {
    /// The message, with an empty object in place of a tools/call's
    /// arguments when they were an object.
    message: jsonrpc::Message,
    /// Those arguments.
    arguments: Option<serde_json::Map<String, Value>>,
}

/// JSON-RPC "Method not found".
const METHOD_NOT_FOUND: i64 = -32601;

/// The first MCP revision without sessions (SEP-2575).
const STATELESS_REVISION: &str = "2026-07-28";

/// Methods that revision removed: a request of it naming one is answered
/// 404 with -32601, as SEP-2575 asks, whatever an older revision makes of
/// the method (`resources/subscribe` lives on as the listen filter).
const REMOVED_IN_STATELESS: [&str; 4] =
    ["initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"];

/// The methods removed in the revision a request's `MCP-Protocol-Version`
/// header names (none without the header, or inside a session: a
/// session's requests are of the revision it negotiated, before 2026-07-28).
fn removed_methods(headers: &axum::http::HeaderMap) -> &'static [&'static str] {
    let revision = headers.get("mcp-protocol-version").and_then(|value| value.to_str().ok());
    // Revisions are dates, so their order is the strings'.
    match revision {
        Some(revision) if revision >= STATELESS_REVISION && !headers.contains_key("mcp-session-id") => {
            &REMOVED_IN_STATELESS
        }
        _ => &[],
    }
}

/// Whether `message` is a request of the shapes agents send most (a
/// `tools/call` naming its tool, a `ping`), whose params rmcp's type takes
/// whatever their values: only `name` (a string), `arguments` and `_meta`
/// (objects), or only `_meta` for a ping. Those skip [`fits_mcp`]'s typed
/// pass, which costs more than the rest of the edge for a small message;
/// a unit test holds that each shape passed here also fits rmcp's type.
fn surely_fits(message: &jsonrpc::Message) -> bool {
    let Some(object) = message.value.as_object() else { return false };
    if message.kind != jsonrpc::MessageKind::Request {
        return false;
    }
    let params = match object.get("params") {
        None => None,
        Some(Value::Object(params)) => Some(params),
        Some(_) => return false,
    };
    let is_object = |key: &str| params.and_then(|params| params.get(key)).is_none_or(Value::is_object);
    match object.get("method").and_then(Value::as_str) {
        Some("ping") => params.is_none_or(|params| params.keys().all(|key| key == "_meta")) && is_object("_meta"),
        Some("tools/call") => {
            params.is_some_and(|params| {
                params.get("name").is_some_and(Value::is_string)
                    && params.keys().all(|key| matches!(key.as_str(), "name" | "arguments" | "_meta"))
            }) && is_object("arguments")
                && is_object("_meta")
        }
        _ => false,
    }
}

/// rmcp's own message type over an accepted JSON-RPC message (see
/// [`classify_body`]).
fn fits_mcp(message: &jsonrpc::Message) -> Result<(), jsonrpc::EdgeError> {
    if surely_fits(message) {
        return Ok(());
    }
    fits_typed(message)
}

/// [`fits_mcp`]'s typed pass.
fn fits_typed(message: &jsonrpc::Message) -> Result<(), jsonrpc::EdgeError> {
    use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ClientRequest};
    let invalid_params = |method: &str| jsonrpc::EdgeError {
        code: jsonrpc::INVALID_PARAMS,
        message: format!("Invalid params: the params of '{method}' do not fit the MCP method's parameters"),
        id: message.id.clone(),
    };
    match ClientJsonRpcMessage::deserialize(&message.value) {
        Ok(ClientJsonRpcMessage::Request(request)) => match &request.request {
            ClientRequest::CustomRequest(custom) if TYPED_METHODS.contains(&custom.method.as_str()) => {
                Err(invalid_params(&custom.method))
            }
            _ => Ok(()),
        },
        Ok(ClientJsonRpcMessage::Notification(notification)) => match &notification.notification {
            ClientNotification::CustomNotification(custom) if TYPED_METHODS.contains(&custom.method.as_str()) => {
                Err(invalid_params(&custom.method))
            }
            _ => Ok(()),
        },
        Ok(_) => Ok(()),
        Err(error) => match message.value.get("method").and_then(Value::as_str) {
            Some(method) => Err(invalid_params(method)),
            None => Err(jsonrpc::EdgeError {
                code: jsonrpc::INVALID_REQUEST,
                message: format!("Invalid Request: the response does not fit MCP ({error})"),
                id: message.id.clone(),
            }),
        },
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
/// answers it as `application/json`, keeping the other headers. The
/// response's bytes are passed on as they came: nothing is re-encoded, and
/// each event is probed for its `id` without building the message.
async fn unwrap_event_stream(response: Response, id: &Value) -> Response {
    let (mut parts, body) = response.into_parts();
    let mut stream = body.into_data_stream();
    let mut buffer = Vec::new();
    // Where the first event not yet read starts.
    let mut read = 0;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk): Result<Bytes, _> = chunk else { break };
        buffer.extend_from_slice(&chunk);
        let (found, next) = response_in(&buffer, read, id);
        read = next;
        if let Some(found) = found {
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.remove(header::CACHE_CONTROL);
            parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            parts.status = StatusCode::OK;
            return Response::from_parts(parts, Body::from(found));
        }
    }
    rpc_error(StatusCode::BAD_GATEWAY, id.clone(), -32603, "the server's event stream ended without a response")
}

/// The parts of a JSON-RPC message [`response_in`] reads; serde skips the
/// rest (a whole tool result) without building it.
#[derive(Deserialize)]
struct ResponseProbe {
    id: Option<Value>,
    result: Option<serde::de::IgnoredAny>,
    error: Option<serde::de::IgnoredAny>,
}

/// The data of the first complete event, from byte `from` of `buffer` on,
/// that carries a JSON-RPC response to `id`; and where the events not yet
/// complete start (the next call's `from`).
fn response_in(buffer: &[u8], from: usize, id: &Value) -> (Option<Vec<u8>>, usize) {
    let mut start = from;
    let mut data: Vec<&[u8]> = Vec::new();
    let mut at = from;
    while let Some(end) = buffer[at..].iter().position(|&byte| byte == b'\n').map(|offset| at + offset) {
        let line = &buffer[at..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        at = end + 1;
        if !line.is_empty() {
            if let Some(value) = line.strip_prefix(b"data:") {
                data.push(value.strip_prefix(b" ").unwrap_or(value));
            }
            continue;
        }
        // A blank line ends an event.
        start = at;
        let text = match data.as_slice() {
            [] => continue,
            [one] => one.to_vec(),
            many => many.join(&b'\n'),
        };
        data.clear();
        let answers = serde_json::from_slice::<ResponseProbe>(&text)
            .is_ok_and(|probe| probe.id.as_ref() == Some(id) && (probe.result.is_some() || probe.error.is_some()));
        if answers {
            return (Some(text), start);
        }
    }
    (None, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_methods_with_fitting_params_pass_and_unfitting_ones_are_invalid_params() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"k":1}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"some/extension","params":{"any":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
        ] {
            assert!(classify_body(body.as_bytes(), &[]).is_ok(), "{body}: {:?}", classify_body(body.as_bytes(), &[]));
        }
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":true}}"#,
            // Arguments that are not an object are checked as they are.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":"{}"}}"#,
            // An object of arguments does not hide the rest of the params.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5,"arguments":{"a":1}}}"#,
        ] {
            let error = classify_body(body.as_bytes(), &[]).unwrap_err();
            assert_eq!(error.code, jsonrpc::INVALID_PARAMS, "{body}");
        }
    }

    /// A tools/call's object of arguments is taken out whole, exactly as
    /// sent, and the message goes on with an empty object in its place; any
    /// other arguments stay where they are (see `classify_body`).
    #[test]
    fn a_tool_call_gives_up_its_arguments_whole() {
        let arguments =
            json!({"workflow": {"steps": [{"id": "a", "kind": "set", "value": [1, {"b": null}]}]}, "n": 1.5});
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                          "params": {"name": "validate_workflow", "arguments": arguments, "_meta": {"k": 1}}});
        let classified = classify_body(body.to_string().as_bytes(), &[]).unwrap();
        assert_eq!(classified.arguments.map(Value::Object), Some(arguments));
        let mut left = body.clone();
        left["params"]["arguments"] = json!({});
        assert_eq!(classified.message.value, left);
        assert_eq!(classified.message.id, json!(9));
        // No arguments, or arguments of another method: nothing taken.
        for body in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": null}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "x", "arguments": {"a": "b"}}}),
        ] {
            let classified = classify_body(body.to_string().as_bytes(), &[]).unwrap();
            assert!(classified.arguments.is_none(), "{body}");
            assert_eq!(classified.message.value, body);
        }
    }

    /// Every shape the fast path passes fits rmcp's type, and the fast
    /// path passes the common ones; over every combination of members and
    /// member types of a ping's and a tool call's params.
    #[test]
    fn what_surely_fits_fits_rmcps_type() {
        let values =
            [json!(null), json!(3), json!("s"), json!([1]), json!({}), json!({"progressToken": true, "k": [{}]})];
        let members = ["name", "arguments", "_meta", "task", "other"];
        let mut passed = 0;
        for method in ["ping", "tools/call"] {
            for id in [json!(1), json!("a")] {
                // Each member absent or of each type: 7^5 combinations.
                let mut choice = [0usize; 5];
                loop {
                    let mut params = serde_json::Map::new();
                    for (member, &chosen) in members.iter().zip(&choice) {
                        if chosen > 0 {
                            params.insert((*member).to_owned(), values[chosen - 1].clone());
                        }
                    }
                    for params in [Some(Value::Object(params)), None] {
                        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
                        if let Some(params) = params {
                            message["params"] = params;
                        }
                        let message = jsonrpc::classify(message.to_string().as_bytes()).unwrap();
                        if surely_fits(&message) {
                            passed += 1;
                            assert!(fits_typed(&message).is_ok(), "{}", message.value);
                        }
                    }
                    let Some(at) = choice.iter().position(|&chosen| chosen < values.len()) else { break };
                    choice[at] += 1;
                    for earlier in &mut choice[..at] {
                        *earlier = 0;
                    }
                }
            }
        }
        assert!(passed > 50, "{passed}");
        for common in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "x", "arguments": {}, "_meta": {"progressToken": 1}}}),
        ] {
            assert!(surely_fits(&jsonrpc::classify(common.to_string().as_bytes()).unwrap()), "{common}");
        }
        // Not a request: the typed pass decides.
        let notification = jsonrpc::classify(br#"{"jsonrpc":"2.0","method":"ping"}"#).unwrap();
        assert!(!surely_fits(&notification));
    }

    #[test]
    fn finds_the_response_among_events() {
        let answer = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}".to_vec();
        let stream = b"id: 0\nretry: 3000\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
        assert_eq!(response_in(stream, 0, &json!(7)).0, Some(answer.clone()));
        let (none, read) = response_in(stream, 0, &json!(8));
        assert_eq!((none, read), (None, stream.len()), "every event read, none answers 8");
        // A request's own id in a notification's params does not count.
        let progress = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{\"id\":7}}\n\n";
        assert_eq!(response_in(progress, 0, &json!(7)).0, None);
        // An error response answers too; a string id is not the number.
        let error = b"data: {\"jsonrpc\":\"2.0\",\"id\":\"7\",\"error\":{\"code\":1,\"message\":\"m\"}}\n\n";
        assert_eq!(response_in(error, 0, &json!(7)).0, None);
        assert!(response_in(error, 0, &json!("7")).0.is_some());
    }

    #[test]
    fn an_event_split_across_chunks_is_read_once_it_is_whole() {
        let whole = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{}}\r\n\r\n";
        for cut in 1..whole.len() {
            let (found, read) = response_in(&whole[..cut], 0, &json!(7));
            assert_eq!((found, read), (None, 0), "cut at {cut}: incomplete event");
            let (found, _) = response_in(whole, read, &json!(7));
            // Two data lines are one message joined by a line feed.
            assert_eq!(found.as_deref(), Some(&b"{\"jsonrpc\":\"2.0\",\"id\":7,\n\"result\":{}}"[..]), "cut at {cut}");
        }
    }
}
