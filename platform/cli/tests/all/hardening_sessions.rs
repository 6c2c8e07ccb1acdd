//! Hardening through the real endpoint: MCP sessions bound to the
//! principal that opened them (Part III §8.1, §8.4), the ceilings on open
//! sessions, the JWKS refresh that never holds up tokens whose key is
//! known, and the admin API authenticating before it reads a body, with
//! each route's body bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use pilotage_server::auth::dev::DevTokens;
use pilotage_server::auth::{AuthMode, IssuerConfig};
use pilotage_server::settings::Settings;
use pilotage_server::start::Server;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::endpoint::{Backend, server, settings};

const ADMIN_TOKEN: &str = "operator-token-for-hardening-0123456789";

/// A server and the means to mint development tokens for it.
struct World {
    server: Server,
    tokens: DevTokens,
}

impl World {
    async fn start(settings: Settings) -> World {
        let data_dir = settings.data_dir.clone();
        let server = server(settings).await;
        let tokens = DevTokens::load(&data_dir, format!("http://{}/mcp", server.addr)).unwrap();
        World { server, tokens }
    }

    fn token(&self, tenant: &str, subject: &str) -> String {
        self.tokens.mint(tenant, subject, &[], 600).unwrap()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr)
    }
}

fn http() -> reqwest::Client {
    pilotage_client::install_crypto_provider();
    reqwest::Client::new()
}

fn initialize(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "hardening", "version": "1"}}})
    .to_string()
}

/// Posts `body` as JSON to `url`, as `token`, in `session`.
async fn post(url: &str, token: Option<&str>, session: Option<&str>, body: &str) -> reqwest::Response {
    let mut request = http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_owned());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.unwrap()
}

/// Opens a session as `token` at `url`; returns the response (its
/// `Mcp-Session-Id` when it opened one).
async fn open(url: &str, token: Option<&str>) -> reqwest::Response {
    post(url, token, None, &initialize(1)).await
}

/// Opens a session that must open, and completes the handshake.
pub(crate) async fn opened(url: &str, token: Option<&str>) -> String {
    let response = open(url, token).await;
    assert_eq!(response.status(), 200, "initialize");
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let response = post(url, token, Some(&session), &initialized).await;
    assert_eq!(response.status(), 202, "notifications/initialized");
    session
}

fn tools_list() -> String {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string()
}

/// The status and body bytes of `request` sent as `token` in `session`.
pub(crate) async fn answer(
    method: reqwest::Method,
    url: &str,
    token: &str,
    session: &str,
    extra: &[(&str, &str)],
) -> (u16, Vec<u8>) {
    let mut request = http()
        .request(method.clone(), url)
        .bearer_auth(token)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25");
    if method == reqwest::Method::POST {
        request =
            request.header("content-type", "application/json").header("accept", "application/json").body(tools_list());
    }
    if method == reqwest::Method::GET {
        request = request.header("accept", "text/event-stream");
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    // A live event stream never ends: only the refusals are read whole.
    if status == 200 && method == reqwest::Method::GET {
        return (status, Vec::new());
    }
    (status, response.bytes().await.unwrap().to_vec())
}

pub(crate) fn unknown_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Regression test for issue 16 class 9: another principal's token with a
/// session's id gets exactly the answer an unknown id gets, on every kind
/// of request, and cannot end the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_answers_only_the_principal_that_opened_it() {
    let world = World::start(settings(Backend::Sqlite).await).await;
    world.server.platform.add_tenant("other");
    let mcp = world.url("/mcp");
    let alice = world.token("demo", "alice");
    let bob = world.token("demo", "bob");
    let alice_elsewhere = world.token("other", "alice");
    let session = opened(&mcp, Some(&alice)).await;

    // The owner is served, on /mcp and on /t/demo/mcp alike (the same
    // principal).
    let (status, _) = answer(reqwest::Method::POST, &mcp, &alice, &session, &[]).await;
    assert_eq!(status, 200);
    let (status, _) = answer(reqwest::Method::POST, &world.url("/t/demo/mcp"), &alice, &session, &[]).await;
    assert_eq!(status, 200, "the same principal through the tenant path");
    let (status, _) = answer(reqwest::Method::GET, &mcp, &alice, &session, &[]).await;
    assert_eq!(status, 200, "the owner's GET stream opens");

    // Another subject of the tenant, and the same subject in another
    // tenant, get the unknown-session answer, byte for byte.
    let other_path = world.url("/t/other/mcp");
    let cases: [(&str, &str, &str); 3] = [
        ("bob", &mcp, &bob),
        ("alice@other", &other_path, &alice_elsewhere),
        ("bob on /t/demo", &world.url("/t/demo/mcp"), &bob),
    ];
    for (who, url, token) in cases {
        for (method, extra) in [
            (reqwest::Method::POST, &[][..]),
            (reqwest::Method::GET, &[][..]),
            (reqwest::Method::GET, &[("last-event-id", "0")][..]),
            (reqwest::Method::DELETE, &[][..]),
        ] {
            let foreign = answer(method.clone(), url, token, &session, extra).await;
            let unknown = answer(method.clone(), url, token, &unknown_id(), extra).await;
            assert_eq!(
                foreign,
                unknown,
                "{who} {method} {extra:?}: {} vs {}",
                String::from_utf8_lossy(&foreign.1),
                String::from_utf8_lossy(&unknown.1)
            );
            assert_ne!(foreign.0, 200, "{who} {method} {extra:?} was served");
        }
    }
    let (status, body) = answer(reqwest::Method::POST, &mcp, &bob, &session, &[]).await;
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));

    // The foreign DELETEs ended nothing: the owner is still served; the
    // owner's DELETE ends it, and then the id is unknown to the owner too.
    let (status, _) = answer(reqwest::Method::POST, &mcp, &alice, &session, &[]).await;
    assert_eq!(status, 200, "a foreign DELETE ended the session");
    let (status, _) = answer(reqwest::Method::DELETE, &mcp, &alice, &session, &[]).await;
    assert_eq!(status, 204);
    let ended = answer(reqwest::Method::POST, &mcp, &alice, &session, &[]).await;
    let unknown = answer(reqwest::Method::POST, &mcp, &alice, &unknown_id(), &[]).await;
    assert_eq!(ended.0, 404);
    assert_eq!(ended, unknown);
    world.server.stop().await;
}

/// The refusal of an `initialize` beyond a ceiling: 429, `Retry-After`,
/// the JSON-RPC error, and no session.
async fn assert_refused(response: reqwest::Response, scope: &str, limit: u64) {
    assert_eq!(response.status(), 429);
    assert!(response.headers().get("mcp-session-id").is_none(), "a refused initialize opened a session");
    let retry_after: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=1800).contains(&retry_after), "Retry-After {retry_after}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], 1, "{body}");
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert_eq!(body["error"]["data"]["scope"], scope, "{body}");
    assert_eq!(body["error"]["data"]["limit"], limit, "{body}");
    assert_eq!(body["error"]["data"]["retry_after_s"], retry_after, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("too many open MCP sessions") && message.contains("DELETE"), "{message}");
    assert!(message.contains("none of your sessions is idle"), "{message}");
}

/// A GET stream of `session`, held open while the response lives (its body
/// is not read).
async fn stream(url: &str, token: Option<&str>, session: &str) -> reqwest::Response {
    let mut request = http()
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", session);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200, "the GET stream opens");
    response
}

/// The status of a `tools/list` in `session`.
async fn listed(url: &str, token: Option<&str>, session: &str) -> u16 {
    post(url, token, Some(session), &tools_list()).await.status().as_u16()
}

/// Regression test for issue 16 class 12 and issue 27 item 8: sessions are
/// capped per principal and per tenant, counted live; at the ceiling the
/// principal's least recently used idle session is closed to make room
/// (clients that never DELETE do not lock their principal out), and only
/// when every one of its sessions is busy (a request in flight, an open
/// stream) is the `initialize` refused. Another principal's session is
/// never closed; stateless requests are not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_capped_per_principal_and_per_tenant() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.max_sessions_per_principal = 2;
    settings.max_sessions_per_tenant = 3;
    let world = World::start(settings).await;
    world.server.platform.add_tenant("other");
    let mcp = world.url("/mcp");
    let alice = world.token("demo", "alice");
    let bob = world.token("demo", "bob");
    let carol = world.token("demo", "carol");

    // Ten clients that never DELETE: each new one closes the least
    // recently used idle session, so alice is never locked out, holds two,
    // and the most recent two are the ones alive.
    let mut sessions = Vec::new();
    for _ in 0..10 {
        sessions.push(opened(&mcp, Some(&alice)).await);
    }
    for (index, session) in sessions.iter().enumerate() {
        let expected = if index >= 8 { 200 } else { 404 };
        assert_eq!(listed(&mcp, Some(&alice), session).await, expected, "session {index}");
    }
    // Using the older of the two makes the other the least recent.
    assert_eq!(listed(&mcp, Some(&alice), &sessions[8]).await, 200);
    let newest = opened(&mcp, Some(&alice)).await;
    assert_eq!(listed(&mcp, Some(&alice), &sessions[9]).await, 404, "the least recently used was closed");
    assert_eq!(listed(&mcp, Some(&alice), &sessions[8]).await, 200);

    // Busy sessions are never closed: with a stream open on each, the
    // next initialize is refused; once one stream ends, it is served.
    let streaming = [stream(&mcp, Some(&alice), &sessions[8]).await, stream(&mcp, Some(&alice), &newest).await];
    assert_refused(open(&mcp, Some(&alice)).await, "principal", 2).await;
    assert_eq!(listed(&mcp, Some(&alice), &sessions[8]).await, 200, "the refusal closed nothing");
    let [first_stream, second_stream] = streaming;
    drop(first_stream);
    // The server notices the closed stream at its next write at the
    // latest (an SSE keep-alive every 15 s).
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    let replacement = loop {
        let response = open(&mcp, Some(&alice)).await;
        if response.status() == 200 {
            break response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "the ended stream left its session busy");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(listed(&mcp, Some(&alice), &sessions[8]).await, 404, "the idle one was closed");
    assert_eq!(listed(&mcp, Some(&alice), &newest).await, 200, "the streaming one was kept");
    drop(second_stream);

    // The tenant ceiling (alice 2 + bob 1): carol, who holds nothing, is
    // refused until another's session ends; bob closes only his own.
    let bobs = opened(&mcp, Some(&bob)).await;
    assert_refused(open(&mcp, Some(&carol)).await, "tenant", 3).await;
    let bobs_next = opened(&mcp, Some(&bob)).await;
    assert_eq!(listed(&mcp, Some(&bob), &bobs).await, 404);
    assert_eq!(listed(&mcp, Some(&alice), &newest).await, 200, "another principal's session is never closed");
    assert_eq!(listed(&mcp, Some(&alice), &replacement).await, 200);
    // Another tenant has its own count.
    let _elsewhere = opened(&world.url("/t/other/mcp"), Some(&world.token("other", "carol"))).await;

    // A 2026-07-28 client has no session and is not counted: it is served
    // while the tenant is at its ceiling.
    {
        use rmcp::model::ProtocolVersion;
        use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
        pilotage_client::install_crypto_provider();
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(mcp.clone());
        let client = ()
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
            )
            .await
            .expect("a stateless client is served at the ceiling");
        assert!(!client.list_all_tools().await.unwrap().is_empty());
        client.cancel().await.unwrap();
    }

    // Ending a session (DELETE) frees its place at once; a foreign DELETE
    // frees nothing.
    let (status, _) = answer(reqwest::Method::DELETE, &mcp, &carol, &bobs_next, &[]).await;
    assert_eq!(status, 204);
    assert_refused(open(&mcp, Some(&carol)).await, "tenant", 3).await;
    let (status, _) = answer(reqwest::Method::DELETE, &mcp, &bob, &bobs_next, &[]).await;
    assert_eq!(status, 204);
    let _carols = opened(&mcp, Some(&carol)).await;
    world.server.stop().await;
}

/// A session that idles out gives its place back: at the tenant ceiling,
/// a principal holding nothing is served once another's session idles out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_gives_its_place_back() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.max_sessions_per_principal = 1;
    settings.max_sessions_per_tenant = 1;
    settings.session_idle_secs = 1;
    let world = World::start(settings).await;
    let mcp = world.url("/mcp");
    let bob = world.token("demo", "bob");
    let _held = opened(&mcp, None).await;
    assert_refused(open(&mcp, Some(&bob)).await, "tenant", 1).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let response = open(&mcp, Some(&bob)).await;
        if response.status() == 200 {
            assert!(response.headers().get("mcp-session-id").is_some());
            break;
        }
        assert_eq!(response.status(), 429);
        assert!(std::time::Instant::now() < deadline, "the idle session never gave its place back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    world.server.stop().await;
}

// --- JWKS refresh --------------------------------------------------------

const ISSUER: &str = "https://slow-issuer.test";
const PUBLIC_URL: &str = "http://pilotage.test";

struct Key {
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
}

fn ec_key(kid: &str) -> Key {
    use p256::pkcs8::{EncodePrivateKey, LineEnding};
    let signing = <p256::ecdsa::SigningKey as p256::elliptic_curve::Generate>::generate();
    let pem = signing.to_pkcs8_pem(LineEnding::LF).unwrap();
    let point = signing.verifying_key().to_sec1_point(false);
    Key {
        kid: kid.to_owned(),
        encoding: EncodingKey::from_ec_pem(pem.as_bytes()).unwrap(),
        jwk: json!({"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                    "x": URL_SAFE_NO_PAD.encode(point.x().unwrap()), "y": URL_SAFE_NO_PAD.encode(point.y().unwrap())}),
    }
}

fn jwt(key: &Key, subject: &str) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let claims = json!({"iss": ISSUER, "aud": format!("{PUBLIC_URL}/mcp"), "sub": subject, "tenant": "demo",
                        "scope": "pilotage:mcp", "iat": now, "nbf": now - 5, "exp": now + 600});
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, &claims, &key.encoding).unwrap()
}

/// A JWKS endpoint on loopback: the first fetch is answered at once with
/// the first key; every later one signals that it started, then waits for
/// the test's release (at most 20 s) and answers with every key.
struct SlowJwks {
    url: String,
    fetches: Arc<AtomicUsize>,
    started: tokio::sync::mpsc::UnboundedReceiver<()>,
    release: Arc<tokio::sync::Notify>,
}

async fn slow_jwks(first: Value, all: Vec<Value>) -> SlowJwks {
    let fetches = Arc::new(AtomicUsize::new(0));
    let (started_tx, started) = tokio::sync::mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let (counter, gate) = (fetches.clone(), release.clone());
    let router = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let (counter, gate, started_tx, first, all) =
                (counter.clone(), gate.clone(), started_tx.clone(), first.clone(), all.clone());
            async move {
                if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                    return axum::Json(json!({"keys": [first]}));
                }
                let _ = started_tx.send(());
                let _ = tokio::time::timeout(Duration::from_secs(20), gate.notified()).await;
                axum::Json(json!({"keys": all}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    SlowJwks { url, fetches, started, release }
}

/// Regression test for issue 16 class 11: while a slow JWKS fetch for an
/// unknown `kid` is in flight, a token whose key is known is served; the
/// tokens waiting for the unknown key share that one fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_key_refresh_does_not_hold_up_known_keys() {
    let known = ec_key("known");
    let rotated = ec_key("rotated");
    let mut jwks = slow_jwks(known.jwk.clone(), vec![known.jwk.clone(), rotated.jwk.clone()]).await;
    let mut settings = settings(Backend::Sqlite).await;
    settings.auth.mode = AuthMode::Jwt;
    settings.auth.issuers =
        vec![IssuerConfig { algorithms: vec!["ES256".into()], ..IssuerConfig::new(ISSUER, &jwks.url) }];
    settings.public_url = Some(PUBLIC_URL.into());
    settings.allowed_hosts = vec!["127.0.0.1".into(), "localhost".into(), "pilotage.test".into()];
    let server = server(settings).await;
    let mcp = server.mcp_url();

    // The first token fetches the key set (answered at once).
    assert_eq!(open(&mcp, Some(&jwt(&known, "alice"))).await.status(), 200);
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 1);
    // Refreshes are at most one per 5 s: wait that out so an unknown kid
    // may fetch again.
    tokio::time::sleep(pilotage_server::auth::jwt::REFRESH_INTERVAL + Duration::from_millis(200)).await;

    // Two tokens with the new kid: one fetch starts and hangs.
    let waiting: Vec<_> = (0..2)
        .map(|n| {
            let (url, token) = (mcp.clone(), jwt(&rotated, &format!("rotated-{n}")));
            tokio::spawn(async move { open(&url, Some(&token)).await.status() })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(10), jwks.started.recv())
        .await
        .expect("the refresh reached the issuer")
        .unwrap();

    // A known key is served while that fetch has not answered.
    let response = open(&mcp, Some(&jwt(&known, "bob"))).await;
    assert_eq!(response.status(), 200, "a known key waited for the refresh");
    assert!(waiting.iter().all(|task| !task.is_finished()), "the unknown-key requests did not wait for the fetch");
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 2, "one fetch in flight");

    // Released, the fetch serves both waiting tokens: one fetch for both.
    jwks.release.notify_one();
    for task in waiting {
        assert_eq!(task.await.unwrap(), 200);
    }
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 2, "the waiting tokens shared one fetch");
    // The rate limit stays: another unknown kid within 5 s fetches nothing.
    let stranger = ec_key("stranger");
    assert_eq!(open(&mcp, Some(&jwt(&stranger, "eve"))).await.status(), 401);
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 2);
    server.stop().await;
}

// --- admin API -----------------------------------------------------------

/// The status of a raw HTTP/1.1 response on `stream`, its headers and
/// body (by `Content-Length`).
pub(crate) async fn read_response(stream: &mut tokio::net::TcpStream) -> (u16, String, Vec<u8>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let read = stream.read(&mut chunk).await.unwrap();
        assert!(read > 0, "the connection closed before a response");
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).await.unwrap();
        assert!(read > 0, "the connection closed mid-body");
        body.extend_from_slice(&chunk[..read]);
    }
    (status, head, body)
}

/// Sends only the head of a request declaring a `length`-byte body.
pub(crate) async fn head_only(
    server: &Server,
    method: &str,
    path: &str,
    token: Option<&str>,
    length: usize,
) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let authorization = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/wasm\r\n{authorization}Content-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

async fn admin_server(component_bytes: usize) -> Server {
    let mut settings = settings(Backend::Sqlite).await;
    settings.admin_token = Some(ADMIN_TOKEN.into());
    settings.max_component_bytes = component_bytes;
    settings.admin_max_body_bytes = 64 * 1024;
    server(settings).await
}

/// Regression test for issue 16 class 7: an unauthenticated 30 MiB upload
/// is answered 401 before a byte of its body is sent, while an
/// authenticated one is read (the server waits for it) and installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_authenticates_before_it_reads_a_body() {
    let workflow = pilotage_bundled::WORKFLOW;
    let server = admin_server(workflow.len() + 1024).await;
    let upload = "/admin/v1/tenants/demo/languages";
    for token in [None, Some("not-the-operator-token-0123456789")] {
        let mut stream = head_only(&server, "POST", upload, token, 30 << 20).await;
        let (status, _, body) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream))
            .await
            .expect("the server answered without the body");
        assert_eq!(status, 401, "{}", String::from_utf8_lossy(&body));
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    // A JSON route alike.
    let mut stream = head_only(&server, "POST", "/admin/v1/tenants", None, 30 << 20).await;
    let (status, _, _) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream)).await.unwrap();
    assert_eq!(status, 401);

    // Authenticated, the server waits for the body, then installs it.
    let mut stream = head_only(&server, "POST", upload, Some(ADMIN_TOKEN), workflow.len()).await;
    let early = tokio::time::timeout(Duration::from_millis(500), read_response(&mut stream)).await;
    assert!(early.is_err(), "the server answered before the body arrived");
    for piece in workflow.chunks(64 * 1024) {
        stream.write_all(piece).await.unwrap();
    }
    let (status, _, body) = tokio::time::timeout(Duration::from_secs(60), read_response(&mut stream)).await.unwrap();
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["name"], "workflow/v1");
    server.stop().await;
}

/// Each route's body is bounded: a larger one gets 413 naming the bound
/// and its setting, declared (`Content-Length`) or streamed (chunked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_bodies_beyond_their_route_bound_get_413() {
    let workflow = pilotage_bundled::WORKFLOW;
    let bound = workflow.len() + 1024;
    let server = admin_server(bound).await;
    let base = format!("http://{}/admin/v1", server.addr);
    let http = http();

    // Declared too large: refused at once, the body never sent.
    let mut stream = head_only(&server, "POST", "/admin/v1/tenants/demo/languages", Some(ADMIN_TOKEN), bound + 1).await;
    let (status, _, body) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream)).await.unwrap();
    assert_eq!(status, 413);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], "body_too_large", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&bound.to_string()) && message.contains("max_component_bytes"), "{message}");

    // Streamed without a length: refused at the chunk that crosses it.
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /admin/v1/tenants/demo/languages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // The last chunk crosses the bound by one byte; nothing is sent after
    // it, so the server has read everything when it answers.
    let mut sent = 0;
    while sent <= bound {
        let size = (64 * 1024).min(bound + 1 - sent);
        stream.write_all(format!("{size:x}\r\n").as_bytes()).await.unwrap();
        stream.write_all(&vec![0u8; size]).await.unwrap();
        sent += size;
        if sent <= bound {
            stream.write_all(b"\r\n").await.unwrap();
        }
    }
    let (status, _, body) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream)).await.unwrap();
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));

    // A JSON route has the small bound (64 KiB here).
    let mut stream =
        head_only(&server, "PUT", "/admin/v1/tenants/demo/secrets/big", Some(ADMIN_TOKEN), 100 * 1024).await;
    let (status, _, body) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream)).await.unwrap();
    assert_eq!(status, 413);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("admin_max_body_bytes"), "{body}");
    // Within it, the same route works.
    let response = http
        .put(format!("{base}/tenants/demo/secrets/small"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"value": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    // An upload within its bound works through an ordinary client.
    let response = http
        .post(format!("{base}/tenants/demo/languages"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/wasm")
        .body(workflow.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    // A body that is no component is identified by the digest computed as
    // it streamed in.
    let garbage = vec![7u8; 2048];
    let response = http
        .post(format!("{base}/tenants/demo/languages"))
        .bearer_auth(ADMIN_TOKEN)
        .body(garbage.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    use sha2::Digest;
    assert_eq!(body["error"]["sha256"], hex::encode(sha2::Sha256::digest(&garbage)), "{body}");
    server.stop().await;
}
