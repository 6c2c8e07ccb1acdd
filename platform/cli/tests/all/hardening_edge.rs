//! The HTTP edge under hostile or careless clients, through the real
//! endpoint: strict access-tool schemas as carrier errors (Part III §7.1),
//! `Origin` validation (the MCP Streamable HTTP transport), slow clients
//! (header and body deadlines, the connection cap) and replies that never
//! wait on Nagle's algorithm.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::endpoint::{Backend, call, client, ok, request_error, server, settings};

// ---------------------------------------------------------------------------
// Part III §7.1: a violation of a tool's input schema is a carrier error.

/// Calls `tool` and expects the JSON-RPC -32602, returning its message.
async fn carrier_error(
    client: &rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>,
    tool: &str,
    args: Value,
) -> String {
    match call(client, tool, args.clone()).await {
        Err(rmcp::ServiceError::McpError(error)) => {
            assert_eq!(error.code.0, -32602, "{tool} {args}: {error:?}");
            error.message.to_string()
        }
        other => panic!("{tool} {args}: expected the carrier error -32602, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_tool_schema_violations_are_carrier_errors() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    let catalog = |extra: Value| {
        let mut args = json!({"language": "workflow/v1", "verb": "list"});
        for (key, value) in extra.as_object().unwrap() {
            args[key] = value.clone();
        }
        args
    };
    // Every kind of violation of the binding-defined strict schemas of
    // pilotage_catalog and pilotage_get_guide (Part III §4.1, §4.2).
    for (tool, args, names) in [
        ("pilotage_catalog", catalog(json!({"verb": "fetch"})), "/verb"),
        ("pilotage_catalog", catalog(json!({"verb": "LIST"})), "/verb"),
        ("pilotage_catalog", catalog(json!({"verb": 1})), "/verb"),
        ("pilotage_catalog", json!({"language": "workflow/v1"}), "\"verb\" is a required property"),
        ("pilotage_catalog", json!({"verb": "list"}), "\"language\" is a required property"),
        ("pilotage_catalog", catalog(json!({"language": 7})), "/language"),
        ("pilotage_catalog", catalog(json!({"limit": 0})), "/limit"),
        ("pilotage_catalog", catalog(json!({"limit": "10"})), "/limit"),
        ("pilotage_catalog", catalog(json!({"limit": 2.5})), "/limit"),
        ("pilotage_catalog", catalog(json!({"kind": ["capability"]})), "/kind"),
        ("pilotage_catalog", json!({"language": "workflow/v1", "verb": "get", "id": 42}), "/id"),
        ("pilotage_get_guide", json!({}), "\"language\" is a required property"),
        ("pilotage_get_guide", json!({"language": null}), "/language"),
        ("pilotage_get_guide", json!({"language": "workflow/v1", "id": 1}), "/id"),
        ("pilotage_get_guide", json!({"language": "workflow/v1", "id": "workflow-core", "topic": {}}), "/topic"),
        // Loop tools: only the structural faults of Part III §4.6.
        ("trace_workflow", json!({}), "\"run_id\" is a required property"),
        ("trace_workflow", json!({"run_id": 5}), "/run_id"),
        ("trace_workflow", json!({"run_id": "run_x", "trace_level": 2}), "/trace_level"),
        ("validate_workflow", json!({}), "\"workflow\" is a required property"),
        ("run_workflow", json!({"program_ref": 3}), "/program_ref"),
        ("run_workflow", json!({"program_ref": "prog_x", "store": "yes"}), "/store"),
        ("run_workflow", json!({"program_ref": "prog_x", "idempotency_key": {}}), "/idempotency_key"),
        ("promote_workflow", json!({"workflow": {}, "input_schema": "object"}), "/input_schema"),
    ] {
        let message = carrier_error(&client, tool, args.clone()).await;
        assert!(message.starts_with(&format!("invalid arguments for tool '{tool}': ")), "{message}");
        assert!(message.contains(names), "{tool} {args}: {message}");
    }
    // The good polarity: what the schemas allow is served, and what they
    // do not express stays a request error (Part III §4.2 invalid
    // combinations, §4.6 value faults).
    let page = ok(&client, "pilotage_catalog", catalog(json!({"limit": 1}))).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    ok(&client, "pilotage_get_guide", json!({"language": "workflow/v1", "unknown_member": true})).await;
    for (tool, args) in [
        ("pilotage_catalog", json!({"language": "workflow/v1", "verb": "get", "id": "x", "kind": "capability"})),
        ("pilotage_catalog", json!({"language": "workflow/v1", "verb": "get"})),
        ("trace_workflow", json!({"run_id": "run_x", "trace_level": "verbose"})),
        ("run_workflow", json!({"workflow": crate::endpoint::spec_program(), "trace_level": "verbose"})),
    ] {
        let error = request_error(&client, tool, args.clone()).await;
        assert_eq!(error["error"]["kind"], "invalid_request", "{tool} {args}");
    }
    assert_eq!(
        request_error(&client, "pilotage_catalog", json!({"language": "workflow/v9", "verb": "list"})).await["error"]["kind"],
        "not_found"
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

// ---------------------------------------------------------------------------
// Origin validation.

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "origin-test", "version": "1"}}})
    .to_string()
}

/// POSTs `initialize` with `origin`; returns the status, whether a session
/// was created, and the body.
async fn initialize_from(http: &reqwest::Client, url: &str, origin: Option<&str>) -> (u16, bool, String) {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(initialize_body());
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    let session = response.headers().contains_key("mcp-session-id");
    (status, session, response.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_is_refused_before_a_session_exists() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.admin_token = Some("operator-token-for-origin-tests".to_owned());
    let server = server(settings).await;
    pilotage_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let url = server.mcp_url();
    let own = format!("http://{}", server.addr);
    let port = server.addr.port();
    for good in [
        None,
        Some(own.as_str()),
        Some("http://localhost"),
        Some("http://localhost:5173"),
        Some("HTTP://LocalHost:5173"),
        Some("http://127.0.0.1:9"),
        Some("http://[::1]:3000"),
    ] {
        let (status, session, body) = initialize_from(&http, &url, good).await;
        assert_eq!(status, 200, "Origin {good:?}: {body}");
        assert!(session, "Origin {good:?} initializes a session");
    }
    let scheme_variant = format!("https://127.0.0.1:{port}");
    for bad in [
        "https://evil.example",
        "null",
        "http://localhost.evil.example:5173",
        "http://127.0.0.1.nip.io",
        scheme_variant.as_str(),
        "http://localhost:5173/app",
        "not an origin",
        // Issue 27 item 6: a written port that is no port.
        "http://localhost:99999",
        "http://localhost:0",
        "http://127.0.0.1:65536",
    ] {
        let (status, session, body) = initialize_from(&http, &url, Some(bad)).await;
        assert_eq!(status, 403, "Origin {bad}: {body}");
        assert!(!session, "no session for Origin {bad}");
        let body: Value = serde_json::from_str(&body).expect("a JSON-RPC error body");
        assert_eq!(body["error"]["code"], -32600);
        assert!(body["error"]["message"].as_str().unwrap().contains("Origin"), "{body}");
    }
    // The tenant path and the admin API refuse it too, before
    // authentication (403, not 401).
    let tenant_url = format!("http://{}/t/demo/mcp", server.addr);
    assert_eq!(initialize_from(&http, &tenant_url, Some("https://evil.example")).await.0, 403);
    let admin = format!("http://{}/admin/v1/tenants", server.addr);
    let refused = http.get(&admin).header("origin", "https://evil.example").send().await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "forbidden_origin");
    let refused = http
        .get(&admin)
        .header("origin", "https://evil.example")
        .bearer_auth("operator-token-for-origin-tests")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403, "a credential does not make a foreign page acceptable");
    assert_eq!(http.get(&admin).header("origin", own.as_str()).send().await.unwrap().status(), 401);
    let allowed = http
        .get(&admin)
        .header("origin", "http://localhost:8080")
        .bearer_auth("operator-token-for-origin-tests")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_origins_replace_the_default() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.allowed_origins = vec!["https://app.example".to_owned(), "null".to_owned()];
    let server = server(settings).await;
    pilotage_client::install_crypto_provider();
    let http = reqwest::Client::new();
    let url = server.mcp_url();
    for (origin, status) in [
        (None, 200),
        (Some("https://app.example"), 200),
        (Some("https://APP.example:443"), 200),
        (Some("null"), 200),
        (Some("https://app.example:8443"), 403),
        (Some("http://app.example"), 403),
        (Some("http://localhost:5173"), 403),
    ] {
        let (got, session, body) = initialize_from(&http, &url, origin).await;
        assert_eq!(got, status, "Origin {origin:?}: {body}");
        assert_eq!(session, status == 200, "Origin {origin:?}");
    }
    server.stop().await;
}

// ---------------------------------------------------------------------------
// Slow clients.

/// Writes `head`, then one byte every `every` until the peer stops taking
/// them (or `max` bytes were trickled).
fn trickle(mut writer: tokio::net::tcp::OwnedWriteHalf, head: String, every: Duration, max: usize) {
    tokio::spawn(async move {
        if writer.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for _ in 0..max {
            tokio::time::sleep(every).await;
            if writer.write_all(b"a").await.is_err() {
                return;
            }
        }
    });
}

/// Reads until the server closes the connection; returns what it sent and
/// when it closed, or `None` when it is still open after `within`.
async fn closed_within(
    mut reader: tokio::net::tcp::OwnedReadHalf,
    started: Instant,
    within: Duration,
) -> Option<(Vec<u8>, Duration)> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let until = tokio::time::Instant::from_std(started + within);
    loop {
        match tokio::time::timeout_at(until, reader.read(&mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some((received, started.elapsed())),
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
        }
    }
}

async fn slow_connection(addr: std::net::SocketAddr, head: String) -> (tokio::net::tcp::OwnedReadHalf, Instant) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let started = Instant::now();
    let (reader, writer) = stream.into_split();
    trickle(writer, head, Duration::from_millis(200), 600);
    (reader, started)
}

const HEADER_TIMEOUT_MS: u64 = 600;
const BODY_TIMEOUT_MS: u64 = 900;
/// Slack for a loaded machine: the bound is what is asserted, not the
/// exact instant.
const SLACK: Duration = Duration::from_millis(2_500);

fn slow_head(path: &str) -> String {
    format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nX-Slow: ")
}

fn slow_body(path: &str, extra: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{extra}Content-Length: 100000\r\n\r\n{{"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_closed_within_the_bounds_while_others_are_served() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.header_read_timeout_ms = HEADER_TIMEOUT_MS;
    settings.body_read_timeout_ms = BODY_TIMEOUT_MS;
    settings.admin_token = Some("operator-token-for-slow-tests".to_owned());
    let server = server(settings).await;
    let addr = server.addr;

    // Trickled heads, trickled bodies on /mcp and on the admin API, and
    // connections that send nothing at all.
    let mut heads = Vec::new();
    let mut bodies = Vec::new();
    let mut admin_bodies = Vec::new();
    let mut silent = Vec::new();
    for _ in 0..40 {
        heads.push(slow_connection(addr, slow_head("/mcp")).await);
        bodies.push(slow_connection(addr, slow_body("/mcp", "")).await);
        admin_bodies.push(
            slow_connection(
                addr,
                slow_body("/admin/v1/tenants", "Authorization: Bearer operator-token-for-slow-tests\r\n"),
            )
            .await,
        );
        let stream = TcpStream::connect(addr).await.unwrap();
        let started = Instant::now();
        silent.push((stream.into_split(), started));
    }

    // Meanwhile ordinary requests are served.
    pilotage_client::install_crypto_provider();
    let http = reqwest::Client::new();
    assert_eq!(http.get(format!("http://{addr}/healthz")).send().await.unwrap().status(), 200);
    let mcp = client(&server.mcp_url()).await;
    ok(&mcp, "pilotage_manifest", json!({})).await;

    let header_bound = Duration::from_millis(HEADER_TIMEOUT_MS) + SLACK;
    for (reader, started) in heads {
        let (received, elapsed) =
            closed_within(reader, started, header_bound).await.expect("a trickled head is closed within the bound");
        assert!(elapsed >= Duration::from_millis(HEADER_TIMEOUT_MS / 2), "closed too early: {elapsed:?}");
        // hyper answers a timed-out head with 408 or not at all.
        assert!(received.is_empty() || received.starts_with(b"HTTP/1.1 408"), "{}", String::from_utf8_lossy(&received));
    }
    for ((reader, _), started) in silent {
        closed_within(reader, started, header_bound).await.expect("a silent connection is closed within the bound");
    }
    let body_bound = Duration::from_millis(BODY_TIMEOUT_MS) + SLACK;
    for (reader, started) in bodies {
        let (received, elapsed) =
            closed_within(reader, started, body_bound).await.expect("a trickled body is closed within the bound");
        assert!(elapsed >= Duration::from_millis(BODY_TIMEOUT_MS / 2), "closed too early: {elapsed:?}");
        let text = String::from_utf8_lossy(&received);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("did not arrive within 900 ms"), "{text}");
        assert!(text.to_ascii_lowercase().contains("connection: close"), "{text}");
    }
    for (reader, started) in admin_bodies {
        let (received, _) =
            closed_within(reader, started, body_bound).await.expect("a trickled admin body is closed within the bound");
        let text = String::from_utf8_lossy(&received);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("request_timeout"), "{text}");
    }

    // A trickled body to a route that never reads it does not hold the
    // connection either: the answer is sent and the connection closed.
    let (reader, started) = slow_connection(addr, slow_body("/healthz", "")).await;
    let (received, _) = closed_within(reader, started, body_bound).await.expect("an unread body is not waited for");
    assert!(String::from_utf8_lossy(&received).starts_with("HTTP/1.1 "), "answered before closing");

    // A body that arrives within the bound, in pieces, is served.
    let stream = TcpStream::connect(addr).await.unwrap();
    let (reader, mut writer) = stream.into_split();
    let started = Instant::now();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    for piece in body.as_bytes().chunks(body.len() / 3 + 1) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        writer.write_all(piece).await.unwrap();
    }
    let (received, _) = closed_within(reader, started, Duration::from_secs(10)).await.expect("answered");
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    mcp.cancel().await.unwrap();
    server.stop().await;
}

/// Sends a complete GET /healthz on a new connection and returns it.
async fn healthz_request(addr: std::net::SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect (the backlog takes it)");
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    stream
}

/// Whether the server answers on `stream` within `within`.
async fn answered(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buffer = [0u8; 1024];
    matches!(tokio::time::timeout(within, stream.read(&mut buffer)).await, Ok(Ok(read)) if read > 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_holds() {
    const CAP: usize = 4;
    const EXTRA: usize = 3;
    let mut settings = settings(Backend::Sqlite).await;
    settings.max_connections = CAP;
    settings.header_read_timeout_ms = 20_000;
    let server = server(settings).await;
    let addr = server.addr;
    let mut streams = Vec::new();
    for _ in 0..CAP + EXTRA {
        streams.push(healthz_request(addr).await);
    }
    let outcomes =
        futures::future::join_all(streams.iter_mut().map(|stream| answered(stream, Duration::from_millis(1_500))))
            .await;
    let served = outcomes.iter().filter(|served| **served).count();
    assert_eq!(served, CAP, "at most {CAP} connections are served at once: {outcomes:?}");
    // Closing the served (idle keep-alive) connections frees their places:
    // the waiting ones are served next, their requests intact.
    let (served, mut waiting): (Vec<_>, Vec<_>) = streams.into_iter().zip(outcomes).partition(|(_, served)| *served);
    drop(served);
    for (stream, _) in &mut waiting {
        assert!(answered(stream, Duration::from_secs(5)).await, "a waiting connection is served once a place frees");
    }
    drop(waiting);
    server.stop().await;
}

// ---------------------------------------------------------------------------
// Nagle's algorithm (issue 17).

/// Sequential requests on one keep-alive connection accepting
/// `application/json, text/event-stream`: each reply is written in pieces
/// (headers, then event data), which under Nagle's algorithm waited for the
/// client's delayed acknowledgement (about 44 ms a reply). With
/// TCP_NODELAY on the accepted socket, a `ping` answers in a few ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_stream_replies_do_not_wait_on_nagle() {
    let server = server(settings(Backend::Sqlite).await).await;
    pilotage_client::install_crypto_provider();
    let http = reqwest::Client::builder().http1_only().pool_max_idle_per_host(1).build().unwrap();
    let url = server.mcp_url();
    let accept = "application/json, text/event-stream";
    let response = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(initialize_body())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    response.text().await.unwrap();
    let initialized = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-session-id", &session)
        .body(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
        .send()
        .await
        .unwrap();
    assert!(initialized.status().is_success());
    initialized.text().await.unwrap();
    let mut latencies = Vec::new();
    for id in 0..40 {
        let started = Instant::now();
        let response = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-session-id", &session)
            .body(json!({"jsonrpc": "2.0", "id": id + 10, "method": "ping"}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        assert!(text.contains("\"result\""), "{text}");
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    eprintln!("ping on one keep-alive connection, Accept: {accept}: median {median:?}, sorted {latencies:?}");
    assert!(median < Duration::from_millis(25), "replies wait on Nagle's algorithm: median {median:?}");
    server.stop().await;
}

/// Shutdown waits for connections to close, as before; a slow client can
/// no longer hold it open past the read bounds, and an idle keep-alive
/// connection is closed at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_is_not_held_by_slow_clients() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.header_read_timeout_ms = HEADER_TIMEOUT_MS;
    settings.body_read_timeout_ms = BODY_TIMEOUT_MS;
    let server = server(settings).await;
    let addr = server.addr;
    let (_head_reader, _) = slow_connection(addr, slow_head("/mcp")).await;
    let (_body_reader, _) = slow_connection(addr, slow_body("/mcp", "")).await;
    let mut idle = healthz_request(addr).await;
    assert!(answered(&mut idle, Duration::from_secs(5)).await);
    let started = Instant::now();
    tokio::time::timeout(Duration::from_millis(BODY_TIMEOUT_MS) + SLACK, server.stop())
        .await
        .expect("shutdown completes within the body bound");
    eprintln!("shutdown with slow clients took {:?}", started.elapsed());
    assert!(TcpStream::connect(addr).await.is_err(), "nothing listens after shutdown");
}

// --- Credential guesses ---------------------------------------------------

const OPERATOR: &str = "operator-token-for-throttling-0123456789";

/// A client whose connections come from `local` (any 127/8 address is
/// this machine's loopback).
fn from(local: &str) -> reqwest::Client {
    pilotage_client::install_crypto_provider();
    reqwest::Client::builder().local_address(local.parse::<std::net::IpAddr>().unwrap()).build().unwrap()
}

/// The status and `Retry-After` of the admin API's tenant list as `token`,
/// from `client`, naming `forwarded` in `X-Forwarded-For` when given.
async fn tenants_as(client: &reqwest::Client, base: &str, token: &str, forwarded: Option<&str>) -> (u16, Option<u64>) {
    let mut request = client.get(format!("{base}/admin/v1/tenants")).bearer_auth(token);
    if let Some(forwarded) = forwarded {
        request = request.header("x-forwarded-for", forwarded);
    }
    let response = request.send().await.unwrap();
    let retry = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    (response.status().as_u16(), retry)
}

/// A sign-in form posted with `token` from `client`: status, `Retry-After`
/// and page.
async fn sign_in_as(client: &reqwest::Client, url: &str, token: &str) -> (u16, Option<u64>, String) {
    let response = client
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    let retry = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    (response.status().as_u16(), retry, response.text().await.unwrap())
}

/// Issue 46 item 7: the admin API's bearer check, the console's sign-in
/// and the approval page's sign-in take at most 10 bad credentials a
/// minute from one client address; then every credential from it, a valid
/// one too, gets 429 with `Retry-After` until the minute ends, while other
/// addresses are served. Behind a trusted proxy the client is the address
/// the proxy forwarded for; from anywhere else `X-Forwarded-For` is
/// ignored, so a guesser cannot pick a fresh address per guess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credential_guesses_are_throttled_per_client_address() {
    let mut configured = settings(Backend::Sqlite).await;
    configured.admin_token = Some(OPERATOR.to_owned());
    configured.console = true;
    configured.trusted_proxies = vec!["127.0.0.3".to_owned()];
    let server = server(configured).await;
    let base = format!("http://{}", server.addr);
    let in_window = |retry: Option<u64>| retry.is_some_and(|s| (1..=60).contains(&s));

    // The admin API: ten bad guesses answer 401, the eleventh 429, and
    // then the operator token too; another address is served.
    let guesser = from("127.0.0.1");
    for guess in 0..10 {
        assert_eq!(tenants_as(&guesser, &base, &format!("guess-{guess}"), None).await.0, 401, "guess {guess}");
    }
    let (status, retry) = tenants_as(&guesser, &base, "guess-10", None).await;
    assert_eq!(status, 429);
    assert!(in_window(retry), "{retry:?}");
    assert_eq!(tenants_as(&guesser, &base, OPERATOR, None).await.0, 429, "a throttled address gets no answer");
    assert_eq!(tenants_as(&from("127.0.0.2"), &base, OPERATOR, None).await.0, 200, "another address is served");

    // An address that is no trusted proxy cannot pick its client address.
    let spoofer = from("127.0.0.5");
    for guess in 0..10 {
        let forwarded = format!("198.51.100.{guess}");
        assert_eq!(tenants_as(&spoofer, &base, "guess", Some(&forwarded)).await.0, 401);
    }
    assert_eq!(tenants_as(&spoofer, &base, "guess", Some("198.51.100.99")).await.0, 429);

    // Through the trusted proxy, each forwarded client counts apart.
    let proxy = from("127.0.0.3");
    for _ in 0..10 {
        assert_eq!(tenants_as(&proxy, &base, "guess", Some("203.0.113.1, 127.0.0.3")).await.0, 401);
    }
    assert_eq!(tenants_as(&proxy, &base, OPERATOR, Some("203.0.113.1")).await.0, 429);
    assert_eq!(tenants_as(&proxy, &base, OPERATOR, Some("203.0.113.2")).await.0, 200, "another client behind it");

    // The console's and the approval page's sign-in forms.
    for (local, url) in [
        ("127.0.0.6", format!("{base}/console/sign-in")),
        ("127.0.0.7", format!("{base}/approvals/apr_00000000000000000000000000000000/sign-in")),
    ] {
        let client = from(local);
        for guess in 0..10 {
            let (status, _, _) = sign_in_as(&client, &url, &format!("guess-{guess}")).await;
            assert_eq!(status, 401, "{url} guess {guess}");
        }
        let (status, retry, page) = sign_in_as(&client, &url, OPERATOR).await;
        assert_eq!(status, 429, "{url}: {page}");
        assert!(in_window(retry), "{retry:?}");
        assert!(page.contains("Too many credentials"), "{page}");
        let (status, _, page) = sign_in_as(&from("127.0.0.8"), &url, OPERATOR).await;
        assert!(status == 303 || status == 200, "{url} from another address: {status} {page}");
    }
    server.stop().await;
}

// --- A storage outage -----------------------------------------------------

/// A TCP relay to the machine's PostgreSQL that the test can cut: cut, it
/// closes every relayed connection and every new one at once, as a database
/// that went away does; restored, it relays again.
struct CuttableLink {
    addr: std::net::SocketAddr,
    cut: tokio::sync::watch::Sender<bool>,
}

impl CuttableLink {
    async fn to_postgres() -> CuttableLink {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, watching) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if *watching.borrow() {
                    continue;
                }
                let mut watching = watching.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect("127.0.0.1:5432").await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = watching.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        CuttableLink { addr, cut }
    }

    /// The database URL of `schema_url` (a URL of the machine's
    /// PostgreSQL) through this link.
    fn url(&self, schema_url: &str) -> String {
        schema_url.replace("127.0.0.1:5432", &self.addr.to_string())
    }

    fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

/// Issue 46 item 11: while the store's database cannot be reached, a call
/// that needs it answers a retryable request error (`internal` with
/// `retry_after_ms`, saying nothing ran) instead of "the server's storage
/// failed"; once the database is back the same request succeeds, and what
/// was stored before is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_gets_a_retryable_answer_and_recovery_loses_nothing() {
    let link = CuttableLink::to_postgres().await;
    let mut configured = settings(Backend::Postgres).await;
    let schema_url = configured.database_url.clone().unwrap();
    configured.database_url = Some(link.url(&schema_url));
    let server = server(configured).await;
    let client = client(&server.mcp_url()).await;
    let workflow = |key: &str| {
        json!({"workflow": {"steps": [{"id": "p", "kind": "call", "capability": "cap_read_user_profile",
                                       "with": {"user_id": "42"}}], "output": {"name": "$.steps.p.output.name"}},
               "idempotency_key": key, "store": true})
    };
    let before = ok(&client, "run_workflow", workflow("before-the-cut")).await;
    assert_eq!(before["outcome"]["status"], "success", "{before}");

    link.set_cut(true);
    let started = Instant::now();
    let refused = request_error(&client, "run_workflow", workflow("during-the-cut")).await;
    assert_eq!(refused["error"]["kind"], "internal", "{refused}");
    assert!(refused["retry_after_ms"].as_u64().is_some_and(|ms| ms > 0), "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("nothing ran"), "{refused}");
    assert!(started.elapsed() < Duration::from_secs(30), "answered within the pool's wait: {:?}", started.elapsed());
    let fetch = json!({"run_id": before["run_id"]});
    let refused = request_error(&client, "trace_workflow", fetch.clone()).await;
    assert!(refused["retry_after_ms"].as_u64().is_some(), "{refused}");
    // The same server answers what needs no storage.
    let validated = ok(&client, "validate_workflow", json!({"workflow": workflow("v")["workflow"]})).await;
    assert_eq!(validated["valid"], true, "{validated}");

    // Restored: the refused request runs (its key was never claimed), and
    // the Run stored before the cut is intact.
    link.set_cut(false);
    let deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let result = call(&client, "run_workflow", workflow("during-the-cut")).await.unwrap();
        let content = result.structured_content.clone().unwrap();
        if result.is_error == Some(false) {
            break content;
        }
        assert!(content["retry_after_ms"].as_u64().is_some(), "only retryable answers while recovering: {content}");
        assert!(Instant::now() < deadline, "the store did not come back: {content}");
        tokio::time::sleep(Duration::from_millis(content["retry_after_ms"].as_u64().unwrap_or(500).min(2_000))).await;
    };
    assert_eq!(after["outcome"]["status"], "success", "{after}");
    assert_eq!(ok(&client, "trace_workflow", fetch).await["run_id"], before["run_id"]);
    let _ = client.cancel().await;
    server.stop().await;
}
