//! JSON that is not a valid JSON-RPC message gets a JSON-RPC error object
//! on the MCP endpoint, never rmcp's plain-text 415 (Part III §7.1,
//! JSON-RPC 2.0 §4–§5; the rules live in `pilotage_protocol::jsonrpc`).
//! Beside every refused variant, the valid ones are still served.

use serde_json::{Value, json};

use crate::endpoint::{Backend, raw_post, server, settings};

const JSON: (&str, &str) = ("content-type", "application/json");

fn initialize(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "edge", "version": "1"}}})
}

/// Posts `body` and asserts a JSON-RPC error with `code` and `id`, and
/// the HTTP `status`; returns the error's message.
async fn refused(url: &str, body: &str, headers: &[(&str, &str)], status: u16, code: i64, id: Value) -> String {
    let response = raw_post(url, body, headers).await;
    let got = response.status();
    let content_type = response.headers().get("content-type").map(|value| value.to_str().unwrap().to_owned());
    let Some(content_type) = content_type else {
        panic!("{body}: {got} without a Content-Type: {:?}", response.text().await);
    };
    assert_eq!(got, status, "{body}");
    assert!(content_type.starts_with("application/json"), "{body}: Content-Type {content_type}");
    let answer: Value = response.json().await.unwrap_or_else(|error| panic!("{body}: not JSON: {error}"));
    assert_eq!(answer["jsonrpc"], "2.0", "{body}: {answer}");
    assert_eq!(answer["id"], id, "{body}: {answer}");
    assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
    assert!(answer.get("result").is_none(), "{body}: {answer}");
    answer["error"]["message"].as_str().expect("a string message").to_owned()
}

/// Initializes a session and returns its id.
async fn session(url: &str) -> String {
    let response = raw_post(url, &initialize(json!(0)).to_string(), &[JSON]).await;
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let response =
        raw_post(url, &initialized, &[JSON, ("mcp-session-id", &session), ("mcp-protocol-version", "2025-11-25")])
            .await;
    assert!(response.status().is_success(), "{}", response.status());
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_of_a_wrong_type_or_out_of_range_get_invalid_request_with_a_null_id() {
    let server = server(settings(Backend::Sqlite).await).await;
    let url = server.mcp_url();
    for id in [
        "null",
        "1.5",
        "true",
        "false",
        "{}",
        "[]",
        "{\"a\":1}",
        "9223372036854775808",
        "-18446744073709551616",
        "1e3",
        "1.0",
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        let message = refused(&url, &body, &[JSON], 400, -32600, Value::Null).await;
        assert!(message.contains("'id'"), "{id}: {message}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_ids_are_still_served_and_echoed() {
    let server = server(settings(Backend::Sqlite).await).await;
    let url = server.mcp_url();
    // initialize with each id: no session needed.
    for id in [json!(0), json!(-1), json!(i64::MAX), json!(i64::MIN), json!("abc"), json!(""), json!("ünïcødé 😀")]
    {
        let response = raw_post(&url, &initialize(id.clone()).to_string(), &[JSON]).await;
        assert_eq!(response.status(), 200, "{id}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["id"], id);
        assert_eq!(answer["result"]["capabilities"]["extensions"]["io.github.jafarsa0/pilotage"]["version"], "1.1");
    }
    // And inside a session, with unknown members beside the known ones.
    let session = session(&url).await;
    let headers = [JSON, ("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    for id in [json!(7), json!(-9), json!(9_007_199_254_740_993_i64), json!("ping-α")] {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "ping", "junk": {"ignored": true}});
        let response = raw_post(&url, &body.to_string(), &headers).await;
        assert_eq!(response.status(), 200, "{id}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer, json!({"jsonrpc": "2.0", "id": id, "result": {}}));
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_of_a_wrong_json_type_are_refused_as_json_rpc_errors() {
    let server = server(settings(Backend::Sqlite).await).await;
    let url = server.mcp_url();
    let with_params = |params: &str| format!(r#"{{"jsonrpc":"2.0","id":5,"method":"initialize","params":{params}}}"#);
    for params in ["\"x\"", "3", "true", "null"] {
        let message = refused(&url, &with_params(params), &[JSON], 400, -32600, json!(5)).await;
        assert!(message.contains("'params' must be an object"), "{params}: {message}");
    }
    // By-position params are well-formed JSON-RPC but wrong for MCP: -32602.
    let message = refused(&url, &with_params("[]"), &[JSON], 400, -32602, json!(5)).await;
    assert!(message.contains("named parameters"), "{message}");
    // An object that does not fit the method's params (rmcp's own type).
    let message = refused(&url, &with_params("{}"), &[JSON], 400, -32602, json!(5)).await;
    assert!(message.contains("'initialize'"), "{message}");
    let message = refused(&url, &with_params(r#"{"protocolVersion":7}"#), &[JSON], 400, -32602, json!(5)).await;
    assert!(message.contains("'initialize'"), "{message}");
    // The good polarity: the same request with fitting params.
    let response = raw_post(&url, &initialize(json!(5)).to_string(), &[JSON]).await;
    assert_eq!(response.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_envelope_rules_answer_json_rpc_errors() {
    let server = server(settings(Backend::Sqlite).await).await;
    let url = server.mcp_url();
    let cases: &[(&str, i64, Value, &str)] = &[
        (r#"{"jsonrpc":"2.0","id":1,"method":7}"#, -32600, json!(1), "'method' must be a string"),
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, -32600, json!(1), "'jsonrpc' must be"),
        (r#"{"jsonrpc":2,"id":1,"method":"ping"}"#, -32600, json!(1), "'jsonrpc' must be"),
        (r#"{"id":"a","method":"ping"}"#, -32600, json!("a"), "'jsonrpc' is missing"),
        (r#"{"jsonrpc":"2.0","id":1}"#, -32600, json!(1), "none of"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#, -32600, json!(1), "exactly one"),
        (r#"{"jsonrpc":"2.0","result":{}}"#, -32600, Value::Null, "id of the request"),
        (r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#, -32600, json!(1), "'error.code'"),
        (r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#, -32600, json!(1), "'error.message'"),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, -32600, Value::Null, "batches"),
        (r#"[]"#, -32600, Value::Null, "batches"),
        ("42", -32600, Value::Null, "is an object"),
        (r#"{"jsonrpc":"2.0","id":1,"method":"ping"} junk"#, -32700, Value::Null, "trailing"),
        ("{ not json", -32700, Value::Null, "Parse error"),
        ("", -32700, Value::Null, "Parse error"),
    ];
    for (body, code, id, says) in cases {
        let message = refused(&url, body, &[JSON], 400, *code, id.clone()).await;
        assert!(message.contains(says), "{body}: {message}");
    }
    // Another media type than JSON: 415, and still a JSON-RPC error.
    let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    refused(&url, ping, &[("content-type", "text/plain")], 415, -32600, json!(3)).await;
    // The good polarity: a valid notification and a JSON content type with
    // parameters are served.
    let session = session(&url).await;
    let headers = [
        ("content-type", "application/json; charset=utf-8"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let response = raw_post(&url, ping, &headers).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap()["id"], 3);
    server.stop().await;
}

/// rmcp's own refusals (a request that needs a session and has none, an
/// unknown session id) keep their HTTP status but carry a JSON-RPC error
/// object, with the request's id where there is one; a known session is
/// still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_refusals_are_json_rpc_errors_too() {
    let server = server(settings(Backend::Sqlite).await).await;
    let url = server.mcp_url();
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).to_string();
    let version = ("mcp-protocol-version", "2025-11-25");
    let message = refused(&url, &list, &[JSON, version], 400, -32600, json!(5)).await;
    assert!(message.contains("Session"), "{message}");
    let unknown = ("mcp-session-id", "no-such-session");
    let message = refused(&url, &list, &[JSON, version, unknown], 404, -32600, json!(5)).await;
    assert!(message.contains("not found"), "{message}");

    let session = session(&url).await;
    let known = raw_post(&url, &list, &[JSON, version, ("mcp-session-id", &session)]).await;
    assert_eq!(known.status(), 200);
    let answer: Value = known.json().await.unwrap();
    assert_eq!(answer["id"], 5, "{answer}");
    assert!(answer["result"]["tools"].is_array(), "{answer}");
}

/// On the 2026-07-28 revision (no sessions, SEP-2575), the methods it
/// removed are 404 with -32601, whatever an older revision makes of them;
/// `tools/list` of that revision is served, and `initialize`
/// without the header (an older client's handshake) still opens a session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn methods_the_stateless_revision_removed_are_not_found() {
    let server = server(settings(Backend::Sqlite).await).await;
    let url = server.mcp_url();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "edge", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let stateless = [JSON, ("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2026-07-28")];
    for method in ["initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"] {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method,
                          "params": {"uri": "pilotage://manifest", "_meta": meta}});
        let message = refused(&url, &body.to_string(), &stateless, 404, -32601, json!(7)).await;
        assert!(message.contains(method), "{message}");
    }
    // rmcp answers the revision's `ping` so itself.
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"_meta": meta}});
    let mut headers = stateless.to_vec();
    headers.push(("mcp-method", "ping"));
    refused(&url, &body.to_string(), &headers, 404, -32601, json!(7)).await;
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"_meta": meta}});
    let headers =
        [JSON, ("accept", "application/json"), ("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")];
    let response = raw_post(&url, &body.to_string(), &headers).await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert!(answer["result"]["tools"].as_array().is_some_and(|tools| !tools.is_empty()), "{answer}");
    let response = raw_post(&url, &initialize(json!(9)).to_string(), &[JSON]).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("mcp-session-id"));
    server.stop().await;
}

/// Two requests with one id in one session at once: the second is refused
/// at once with -32600 and the id (rmcp keys answers by id, so it was never
/// answered and waited out the request timeout), the first is answered;
/// once the first is answered, its id may be used again, and two requests
/// with different ids in flight together are both answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_reusing_the_id_of_one_in_flight_is_refused_at_once() {
    let server = server(settings(Backend::Sqlite).await).await;
    let url = server.mcp_url();
    let session = session(&url).await;
    let waiting = |id: i64, ms: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "run_workflow", "arguments": {
            "workflow": {"steps": [{"id": "w", "kind": "call", "capability": "cap_wait", "with": {"ms": ms}}]}}}})
        .to_string()
    };
    let headers = [JSON, ("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    for accept in ["application/json", "application/json, text/event-stream"] {
        let headers: Vec<(&str, &str)> = headers.iter().copied().chain([("accept", accept)]).collect();
        let owned: Vec<(String, String)> =
            headers.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())).collect();
        let (first_url, first_body) = (url.clone(), waiting(7, 1500));
        let first = tokio::spawn(async move {
            let borrowed: Vec<(&str, &str)> =
                owned.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect();
            let response = raw_post(&first_url, &first_body, &borrowed).await;
            (response.status(), response.text().await.unwrap())
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let started = std::time::Instant::now();
        let message = refused(&url, &waiting(7, 10), &headers, 400, -32600, json!(7)).await;
        assert!(message.contains("in flight"), "{accept}: {message}");
        // Refused without waiting for the first (1.5 s) or the request
        // timeout (60 s); the bound leaves room for a busy machine.
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{accept}: refused at once");
        let (status, text) = first.await.unwrap();
        assert_eq!(status, 200, "{accept}: {text}");
        assert!(text.contains("\"id\":7") && text.contains("success"), "{accept}: {text}");
        // Answered: the id is free again; different ids run side by side.
        let (seven, eight) = (waiting(7, 300), waiting(8, 300));
        let (again, other) = tokio::join!(raw_post(&url, &seven, &headers), raw_post(&url, &eight, &headers));
        for response in [again, other] {
            assert_eq!(response.status(), 200, "{accept}");
            let text = response.text().await.unwrap();
            assert!(text.contains("success") && !text.contains("in flight"), "{accept}: {text}");
        }
    }
    server.stop().await;
}
