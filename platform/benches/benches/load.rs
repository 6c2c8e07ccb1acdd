//! Load driver benchmark (issue: platform throughput under load). Run with
//! `cargo bench --bench load`.
//!
//! Measures throughput at N concurrent connections the way `wrk` would:
//! each connection is one HTTP/1.1 keep-alive socket (TCP_NODELAY) that
//! sends its next request as soon as the previous reply has been read in
//! full. Two servers are driven in the same process run, by the same
//! driver, so their figures can be compared:
//!
//! - a bare rmcp Streamable HTTP server built here ([`BareServer`]: one
//!   tool `noop` answering an empty successful result), served with
//!   `StreamableHttpService` + `LocalSessionManager` and the same
//!   `StreamableHttpServerConfig` choices as the platform (default config,
//!   the platform's loopback allowed hosts and body limit), by
//!   `axum::serve` with TCP_NODELAY on every accepted socket;
//! - the real platform server, started in-process like the endpoint bench
//!   (`server::start`: SQLite in a fresh data folder, the demo tenant,
//!   development authentication on loopback, `demo_postgres: "off"`), with
//!   the demo tenant's quotas raised so they never cap the load.
//!
//! Each connection opens its own MCP session with raw JSON-RPC POSTs
//! (`initialize` at protocol 2025-11-25, the `Mcp-Session-Id` header,
//! `notifications/initialized`), then loops one request, sending
//! `Accept: application/json, text/event-stream` (what MCP clients send,
//! so replies are event streams), `Mcp-Session-Id` and
//! `MCP-Protocol-Version`. Every reply is read in full and checked: it must
//! be HTTP 200 carrying a JSON-RPC result for the request's id (no error,
//! no `isError: true`; for validation, `structuredContent.valid == true`).
//! Anything else counts as an error; a run with errors says so at the end
//! and exits with status 1.
//!
//! Workloads, in this order, each for `PILOTAGE_LOAD_SECS` after a 1 s
//! warm-up, printed one line each (calls, calls/s, p50/p99/max latency in
//! µs, errors):
//!
//! - `bare_ping`: MCP `ping` to the bare server;
//! - `bare_noop`: `tools/call noop` to the bare server;
//! - `platform_ping`: MCP `ping` to the platform;
//! - `platform_manifest`: `tools/call pilotage_manifest`, the platform's
//!   cheapest tool (its "no-op");
//! - `validate_cached`: `validate_workflow` of the 10-step program of
//!   `workload/mod.rs`, the same text every call (the validation cache
//!   answers);
//! - `validate_uncached`: the same program with a distinct nonce in every
//!   call's text, so the validation cache never answers;
//! - `execute_unstored`: `run_workflow` of that program (cached) with
//!   `store: false`, three HTTP invocations of the demo capability
//!   service a call; it counts only Runs whose outcome is `ok`;
//! - `telemetry_off`, `telemetry_on`: `validate_cached` against two more
//!   in-process platforms of the same settings: one with telemetry off (no
//!   metrics recorded, spans disabled), one serving its metrics (scraped
//!   once a second) and exporting every span over OTLP/HTTP to a sink in
//!   this process (its threads carry `pilotage serve`'s subscriber with the
//!   OTLP layer). Their ratio is the telemetry's overhead; the sink's
//!   request and byte counts are printed at the end;
//! - `manifest_json`, `cached_json`, `uncached_json`: the manifest and the
//!   two validations from a client whose `Accept` is `application/json`
//!   only (what the platform answers as JSON, unwrapping rmcp's event
//!   stream at its edge);
//! - `bare_noop_stateless`, `manifest_stateless`, `cached_stateless`: the
//!   stateless 2026-07-28 revision, no `initialize` and no session, the
//!   request metadata in every `_meta`, `Mcp-Method` and `Mcp-Name`
//!   headers; the bare server's floor in the same mode (both servers set
//!   `json_response`, so these replies are JSON);
//! - `console_off`, `console_on`, `console_on_2`, `console_off_2`:
//!   `platform_manifest` against two more in-process platforms of the same
//!   settings, one serving the operator console and one not (the
//!   default), in the order off, on, on, off so the machine's drift
//!   cancels: their ratio is what the console adds to the MCP request
//!   path.
//!
//! Then the ratios the issue's targets name: manifest ÷ bare no-op in
//! each mode (target ≥ 0.85), platform ping ÷ bare ping, validate uncached
//! ÷ manifest (≥ 0.5) and cached ÷ manifest (≥ 0.9), each JSON-only
//! workload ÷ its SSE twin (≥ 0.95), cached validate's p99 ÷ p50 (≤ 2),
//! also shown ÷ `platform_ping`; and telemetry on ÷ off.
//!
//! Then, on a full run (no `PILOTAGE_LOAD_ONLY`, in-process servers), the
//! resident memory per idle session of each server: `PILOTAGE_LOAD_SESSIONS`
//! (default 500; 0 skips it) sessions opened and their connections closed,
//! the growth of this process's RSS divided by their number, bare rmcp
//! first (rmcp's own floor), then the platform.
//!
//! Knobs (environment):
//!
//! - `PILOTAGE_LOAD_SECS`: measured seconds per workload (default 5);
//! - `PILOTAGE_LOAD_CONNECTIONS`: concurrent connections (default 32);
//! - `PILOTAGE_LOAD_CLIENT_THREADS`: worker threads of the driver's own
//!   runtime (default 2, like wrk's default `-t2`);
//! - `PILOTAGE_LOAD_ONLY=name,name`: run only these workloads;
//! - `PILOTAGE_LOAD_URL` (+ `PILOTAGE_LOAD_TOKEN`, sent as a bearer token):
//!   drive the platform workloads against that server (plain `http://`
//!   only, e.g. a release `pilotage serve` in another process) instead of
//!   an in-process one. Its tenant's request quota (200/s by default) must
//!   be raised beforehand (`PATCH /admin/v1/tenants/{tenant}` with
//!   `{"quotas": {"requests_per_second": 1000000}}`), or quota refusals
//!   show as errors; its `max_sessions_per_principal` (default 64) must
//!   allow the connections (each workload closes its sessions with DELETE
//!   before the next opens its own).
//!
//! - `PILOTAGE_LOAD_REPLICAS=1,2`: instead, the platform workloads through
//!   haproxy in front of each number of release `pilotage serve` replicas
//!   on a fresh PostgreSQL schema (`fleet/mod.rs`; needs haproxy and the
//!   machine's PostgreSQL), the ratio of each count's calls/s to the
//!   first's, and the propagation delay of an admin catalog edit from one
//!   replica to another.
//!
//! The driver runs on its own tokio runtime (as wrk is its own process),
//! but clients and servers share the machine's cores: the figures are
//! ratios within one run, not the capacity of a server on its own machine.

/// The allocator the `pilotage` binary runs with (see its `main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod fleet;
// Shared with the engine and endpoint benches; this one does not execute
// the program, so the execute input is unused here.
#[allow(dead_code, reason = "the shared workload module serves benches that use all of it")]
mod workload;

use std::convert::Infallible;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::serve::ListenerExt;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use pilotage_server::settings::Settings;
use pilotage_server::start::Server;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The MCP revision every connection negotiates (the last one with
/// `initialize` and sessions).
const PROTOCOL_VERSION: &str = "2025-11-25";

/// The stateless revision (SEP-2575): no session, the protocol metadata in
/// every request's `_meta`, `Mcp-Method` and `Mcp-Name` headers (SEP-2243).
const STATELESS_VERSION: &str = "2026-07-28";

/// Streamable HTTP's session header.
const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");

/// Streamable HTTP's protocol-version header, required on every request
/// after `initialize`.
const PROTOCOL_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// Time each workload runs before its calls are counted: sessions warm up,
/// the allocator and the validation cache fill, the sockets settle.
const WARM_UP: Duration = Duration::from_secs(1);

/// The next nonce of an uncached validation. Seeded from the clock in
/// `main`, so a second run against the same external server does not
/// repeat the texts of the first (its cache would answer them).
static NONCE: AtomicU64 = AtomicU64::new(0);

// ---------------------------------------------------------------------------
// The bare rmcp server
// ---------------------------------------------------------------------------

/// The reference server: rmcp's Streamable HTTP service around a
/// hand-written handler with one tool, `noop`, that does nothing. What the
/// platform adds on top of rmcp is the difference between its figures and
/// this one's.
#[derive(Clone, Copy, Debug)]
struct BareServer;

/// The one tool of [`BareServer`].
fn noop_tool() -> Tool {
    let mut schema = JsonObject::new();
    schema.insert("type".to_owned(), json!("object"));
    Tool::new("noop", "Does nothing.", Arc::new(schema))
}

impl ServerHandler for BareServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bare-rmcp", "1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![noop_tool()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != "noop" {
            return Err(McpError::invalid_params(format!("Unknown tool: {}", request.name), None));
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("")]).into())
    }
}

/// Starts the bare server on a free loopback port on the current runtime;
/// it stops when `shutdown` is cancelled. Returns its `/mcp` URL and the
/// serving task.
///
/// The session manager and config take the platform's choices
/// (`platform/server/src/http/router.rs`), from the same default `Settings`, so the
/// two servers differ only by what the platform does around rmcp.
async fn start_bare(shutdown: &CancellationToken) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let defaults = Settings::default();
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(Duration::from_secs(defaults.session_idle_secs));
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_allowed_hosts(defaults.allowed_hosts())
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(defaults.max_body_bytes);
    let service = StreamableHttpService::new(|| Ok(BareServer), Arc::new(sessions), config);
    let router = Router::new().route_service("/mcp", service);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let address = listener.local_addr().expect("a bound address");
    // axum's `serve` leaves Nagle's algorithm on; event-stream replies
    // written in pieces would then wait on the client's delayed ACK
    // (~40 ms a reply). The platform's accept loop sets it too.
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    let stopping = shutdown.clone();
    let task = tokio::spawn(async move {
        axum::serve(listener, router).with_graceful_shutdown(async move { stopping.cancelled().await }).await
    });
    (format!("http://{address}/mcp"), task)
}

// ---------------------------------------------------------------------------
// The platform server
// ---------------------------------------------------------------------------

/// The data folder of the in-process platform server.
fn platform_data_dir(server: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("pilotage-bench-load-{server}-{}", std::process::id()))
}

/// Starts the platform in-process as the endpoint bench does, without
/// PostgreSQL, with quotas and session ceilings that never cap the load;
/// `server` names its data folder; `metrics_listen` serves its metrics.
async fn start_platform(connections: usize, server: &str, metrics_listen: Option<std::net::SocketAddr>) -> Server {
    start_platform_with(connections, server, metrics_listen, false).await
}

/// [`start_platform`], with the operator console on or off.
async fn start_platform_with(
    connections: usize,
    server: &str,
    metrics_listen: Option<std::net::SocketAddr>,
    console: bool,
) -> Server {
    // Each workload closes its sessions before the next opens its own;
    // the ceilings are raised only so that more than the default 64
    // connections can be asked for.
    let ceiling = connections.max(1024);
    let settings = Settings {
        listen: "127.0.0.1:0".parse().expect("an address"),
        data_dir: platform_data_dir(server),
        demo_postgres: "off".to_owned(),
        max_sessions_per_principal: ceiling,
        max_sessions_per_tenant: ceiling,
        metrics_listen,
        console,
        ..Settings::default()
    };
    workload::start_demo_server(settings).await
}

// ---------------------------------------------------------------------------
// The telemetry pass: the same platform with telemetry off and on
// ---------------------------------------------------------------------------

/// What the OTLP sink received.
#[derive(Clone, Default)]
struct SinkCounts {
    requests: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

/// Starts an OTLP/HTTP sink on `runtime`: `POST /v1/traces` is read in
/// full, counted and answered 200 (a collector that drops everything);
/// returns its base URL.
fn start_otlp_sink(runtime: &tokio::runtime::Runtime, counts: SinkCounts) -> String {
    runtime.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a sink port");
        let address = listener.local_addr().expect("its address");
        let app = Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: Bytes| {
                let counts = counts.clone();
                async move {
                    counts.requests.fetch_add(1, Ordering::Relaxed);
                    counts.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                    StatusCode::OK
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{address}")
    })
}

/// A runtime like the servers' whose every thread (workers and blocking
/// pool) reports to `dispatch`: the `tracing` subscriber of `pilotage
/// serve` with OTLP export on, scoped to this runtime so that the other
/// servers of the process keep theirs off.
fn traced_runtime(dispatch: tracing::Dispatch) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_start(move || {
            // Held for the thread's life.
            std::mem::forget(tracing::dispatcher::set_default(&dispatch));
        })
        .build()
        .expect("a tokio runtime")
}

/// Scrapes `url` once a second until `stop` (what a Prometheus with a 1 s
/// interval does); returns the number of scrapes.
async fn scrape_until(url: String, stop: CancellationToken) -> u64 {
    pilotage_client::install_crypto_provider();
    let client = reqwest::Client::new();
    let mut scrapes = 0;
    let mut interval = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return scrapes,
            _ = interval.tick() => {
                if let Ok(response) = client.get(&url).send().await
                    && response.status() == StatusCode::OK
                    && response.text().await.is_ok_and(|text| text.contains("pilotage_mcp_requests_total"))
                {
                    scrapes += 1;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The driver: one HTTP/1.1 connection, one MCP session
// ---------------------------------------------------------------------------

/// Where an MCP endpoint listens, parsed once from its URL.
#[derive(Clone, Debug)]
struct Endpoint {
    /// `host:port` to connect to.
    address: String,
    /// The `Host` header (rmcp refuses a host outside its allowed list).
    host: HeaderValue,
    /// The request target in origin form (`/mcp`).
    target: Uri,
    /// The `Authorization` header, when a token was given.
    authorization: Option<HeaderValue>,
}

impl Endpoint {
    /// From an `http://host[:port]/path` URL and an optional bearer token.
    fn parse(url: &str, token: Option<&str>) -> Endpoint {
        let uri: Uri = url.parse().unwrap_or_else(|error| panic!("{url}: {error}"));
        assert_eq!(uri.scheme_str(), Some("http"), "{url}: the driver speaks plain HTTP/1.1 only");
        let authority = uri.authority().unwrap_or_else(|| panic!("{url}: no host")).clone();
        let address = format!("{}:{}", authority.host(), authority.port_u16().unwrap_or(80));
        let target = uri.path_and_query().map_or("/", |path| path.as_str()).parse().expect("a request target");
        Endpoint {
            address,
            host: HeaderValue::from_str(authority.as_str()).expect("a Host header"),
            target,
            authorization: token
                .map(|token| HeaderValue::from_str(&format!("Bearer {token}")).expect("a token usable in a header")),
        }
    }
}

/// A request body sent in one piece with its exact length, so the request
/// carries `Content-Length` (no chunked encoding), as wrk's would.
struct RequestBody(Option<Bytes>);

impl Body for RequestBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|bytes| Ok(Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, |bytes| bytes.len() as u64))
    }
}

/// A reply read in full.
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Reply {
    fn is_event_stream(&self) -> bool {
        self.headers.get(CONTENT_TYPE).is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"))
    }

    /// Gives `pick` each JSON-RPC message of the reply in turn (each
    /// non-empty `data:` line of an event stream, or the whole body of a
    /// JSON reply) and returns the first answer it gives.
    ///
    /// rmcp writes each message on one `data:` line, so multi-line events
    /// are not reassembled.
    fn find_message<R>(&self, mut pick: impl FnMut(&[u8]) -> Option<R>) -> Option<R> {
        if !self.is_event_stream() {
            return pick(&self.body);
        }
        self.body.split(|&byte| byte == b'\n').find_map(|line| {
            let data = line.strip_prefix(b"data:")?;
            let data = data.strip_prefix(b" ").unwrap_or(data);
            let data = data.strip_suffix(b"\r").unwrap_or(data);
            if data.is_empty() { None } else { pick(data) }
        })
    }

    /// The start of the body as text, for error messages.
    fn excerpt(&self) -> String {
        excerpt(&self.body)
    }
}

/// The start of `bytes` as text, for error messages.
fn excerpt(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned()
}

/// The parts of a JSON-RPC reply the check reads; serde skips the rest
/// without building it, so checking costs the driver little.
#[derive(Deserialize)]
struct ReplyProbe {
    id: Option<u64>,
    result: Option<ResultProbe>,
    error: Option<IgnoredAny>,
}

/// The parts of a result the check reads.
#[derive(Deserialize)]
struct ResultProbe {
    #[serde(rename = "isError")]
    is_error: Option<bool>,
    #[serde(rename = "structuredContent")]
    structured_content: Option<StructuredProbe>,
}

/// The part of a validation's or a Run's structured content the check
/// reads.
#[derive(Deserialize)]
struct StructuredProbe {
    valid: Option<bool>,
    outcome: Option<OutcomeProbe>,
}

/// A Run's outcome, as far as the check reads it.
#[derive(Deserialize)]
struct OutcomeProbe {
    ok: bool,
}

/// What a reply must carry to count as a successful call.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// A JSON-RPC result for the request's id, not a tool error.
    Result,
    /// That, and `structuredContent.valid == true` (a validation).
    Valid,
    /// That, and `structuredContent.outcome.ok == true` (a Run that
    /// succeeded).
    RunOk,
}

/// Why a call failed.
#[derive(Debug)]
enum CallError {
    /// The server answered, but not with the expected result: the
    /// connection can carry on.
    Refused(String),
    /// The connection failed; it is given up.
    Lost(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Refused(message) => write!(formatter, "refused: {message}"),
            CallError::Lost(message) => write!(formatter, "connection lost: {message}"),
        }
    }
}

/// Checks `reply` answers request `id` as `expect` says.
fn check_reply(reply: &Reply, id: u64, expect: Expect) -> Result<(), String> {
    if reply.status != StatusCode::OK {
        return Err(format!("HTTP {}: {}", reply.status, reply.excerpt()));
    }
    let verdict = reply.find_message(|data| {
        let probe: ReplyProbe = serde_json::from_slice(data).ok()?;
        if probe.id != Some(id) {
            // A notification or a priming event: not the answer.
            return None;
        }
        Some(match (&probe.error, &probe.result) {
            (Some(_), _) => Err(format!("JSON-RPC error: {}", excerpt(data))),
            (None, None) => Err(format!("no result: {}", excerpt(data))),
            (None, Some(result)) if result.is_error == Some(true) => Err(format!("tool error: {}", excerpt(data))),
            (None, Some(result)) => match expect {
                Expect::Result => Ok(()),
                Expect::Valid if result.structured_content.as_ref().and_then(|s| s.valid) == Some(true) => Ok(()),
                Expect::Valid => Err(format!("not valid: {}", excerpt(data))),
                Expect::RunOk
                    if result.structured_content.as_ref().and_then(|s| s.outcome.as_ref()).is_some_and(|o| o.ok) =>
                {
                    Ok(())
                }
                Expect::RunOk => Err(format!("the Run did not succeed: {}", excerpt(data))),
            },
        })
    });
    verdict.unwrap_or_else(|| Err(format!("no reply to id {id}: {}", reply.excerpt())))
}

/// A JSON-RPC request body serialized once, with holes for what changes
/// from call to call: the request id, and for an uncached validation a
/// nonce inside the program. Filling them is one allocation and a copy.
/// The id changes even where the call is identical because MCP forbids a
/// client to reuse a request id within a session, and rmcp routes each
/// reply to its request's stream by that id.
#[derive(Clone, Debug)]
struct BodyTemplate {
    /// The text before the id.
    head: String,
    /// The text after the id (up to the nonce, when there is one).
    after_id: String,
    /// The text after the nonce; `None` without one.
    after_nonce: Option<String>,
}

/// Stands for the id while a template is serialized (a number no other
/// part of a body contains).
const ID_MARK: u64 = 7_316_402_985_117_343;

/// Stands for the nonce while a template is serialized.
const NONCE_MARK: u64 = 5_508_812_670_221_969;

impl BodyTemplate {
    /// `method` with `params`; when `with_nonce`, `params` must contain
    /// [`NONCE_MARK`] once, where the nonce goes.
    fn new(method: &str, params: Option<Value>, with_nonce: bool) -> BodyTemplate {
        let mut message = json!({"jsonrpc": "2.0", "id": ID_MARK, "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        let text = message.to_string();
        let (head, rest) = split_once_exactly(&text, ID_MARK);
        if !with_nonce {
            return BodyTemplate { head, after_id: rest, after_nonce: None };
        }
        let (after_id, after_nonce) = split_once_exactly(&rest, NONCE_MARK);
        BodyTemplate { head, after_id, after_nonce: Some(after_nonce) }
    }

    fn has_nonce(&self) -> bool {
        self.after_nonce.is_some()
    }

    /// The body of request `id` (`nonce` is ignored without a nonce hole).
    fn render(&self, id: u64, nonce: u64) -> Bytes {
        let extra = self.after_nonce.as_ref().map_or(0, String::len);
        let mut text = String::with_capacity(self.head.len() + self.after_id.len() + extra + 40);
        text.push_str(&self.head);
        let _ = write!(text, "{id}");
        text.push_str(&self.after_id);
        if let Some(after_nonce) = &self.after_nonce {
            let _ = write!(text, "{nonce}");
            text.push_str(after_nonce);
        }
        Bytes::from(text)
    }
}

/// `text` split around the one occurrence of `mark`.
fn split_once_exactly(text: &str, mark: u64) -> (String, String) {
    let mark = mark.to_string();
    assert_eq!(text.matches(&mark).count(), 1, "the template mark {mark} occurs once in {text}");
    let (before, after) = text.split_once(&mark).expect("the mark is there");
    (before.to_owned(), after.to_owned())
}

/// How a connection speaks MCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A 2025-11-25 session, accepting JSON and event streams.
    Session,
    /// The same session from a client that accepts only
    /// `application/json`.
    SessionJsonOnly,
    /// The stateless 2026-07-28 revision: no `initialize`, no session.
    Stateless,
}

/// `params` with the 2026-07-28 request metadata a stateless client sends
/// in every request.
fn stateless_params(params: Option<Value>) -> Value {
    let mut params = params.unwrap_or_else(|| json!({}));
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "pilotage-load", "version": "1.0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    params
}

/// One HTTP/1.1 keep-alive connection carrying one MCP session (or, in
/// [`Mode::Stateless`], a run of independent requests).
struct McpConnection {
    sender: SendRequest<RequestBody>,
    target: Uri,
    /// The headers of every request (with the session's, once open).
    headers: HeaderMap,
    next_id: u64,
    /// The `Content-Type` of the first call reply, shown in the report.
    reply_format: Option<HeaderValue>,
    mode: Mode,
}

impl McpConnection {
    /// Connects and opens a session: `initialize`, then
    /// `notifications/initialized`.
    async fn open(endpoint: &Endpoint) -> Result<McpConnection, String> {
        McpConnection::open_as(endpoint, Mode::Session, None).await
    }

    /// Connects as `mode` says; a stateless connection sends `Mcp-Method`
    /// and `Mcp-Name` of `call` (method, tool) with every request.
    async fn open_as(endpoint: &Endpoint, mode: Mode, call: Option<(&str, &str)>) -> Result<McpConnection, String> {
        let stream = TcpStream::connect(&endpoint.address)
            .await
            .map_err(|error| format!("connect {}: {error}", endpoint.address))?;
        stream.set_nodelay(true).map_err(|error| format!("TCP_NODELAY: {error}"))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| format!("HTTP handshake: {error}"))?;
        // The connection future drives the socket; it ends when the
        // sender is dropped or the server closes.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut headers = HeaderMap::new();
        headers.insert(HOST, endpoint.host.clone());
        let accept = match mode {
            Mode::SessionJsonOnly => "application/json",
            Mode::Session | Mode::Stateless => "application/json, text/event-stream",
        };
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(authorization) = &endpoint.authorization {
            headers.insert(AUTHORIZATION, authorization.clone());
        }
        if mode == Mode::Stateless {
            headers.insert(PROTOCOL_HEADER, HeaderValue::from_static(STATELESS_VERSION));
            if let Some((method, name)) = call {
                headers.insert("mcp-method", HeaderValue::from_str(method).map_err(|e| e.to_string())?);
                if !name.is_empty() {
                    headers.insert("mcp-name", HeaderValue::from_str(name).map_err(|e| e.to_string())?);
                }
            }
            return Ok(McpConnection {
                sender,
                target: endpoint.target.clone(),
                headers,
                next_id: 1,
                reply_format: None,
                mode,
            });
        }
        headers.insert(PROTOCOL_HEADER, HeaderValue::from_static(PROTOCOL_VERSION));
        let mut connection =
            McpConnection { sender, target: endpoint.target.clone(), headers, next_id: 1, reply_format: None, mode };

        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "pilotage-load", "version": "1.0"}
        });
        let (id, reply) = connection.request("initialize", Some(params)).await.map_err(|e| e.to_string())?;
        let session = reply
            .headers
            .get(&SESSION_HEADER)
            .cloned()
            .ok_or_else(|| format!("initialize: no Mcp-Session-Id (HTTP {}): {}", reply.status, reply.excerpt()))?;
        let result = result_of(&reply, id).map_err(|error| format!("initialize: {error}"))?;
        if result["protocolVersion"] != json!(PROTOCOL_VERSION) {
            return Err(format!("initialize: the server chose protocol {}", result["protocolVersion"]));
        }
        connection.headers.insert(SESSION_HEADER, session);
        let initialized = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        let reply = connection.send(Method::POST, initialized).await.map_err(|e| e.to_string())?;
        if !reply.status.is_success() {
            return Err(format!("notifications/initialized: HTTP {}: {}", reply.status, reply.excerpt()));
        }
        Ok(connection)
    }

    /// Sends one request and reads its reply in full.
    async fn send(&mut self, method: Method, body: Bytes) -> Result<Reply, CallError> {
        self.sender.ready().await.map_err(|error| CallError::Lost(error.to_string()))?;
        let mut request = Request::new(RequestBody(Some(body)));
        *request.method_mut() = method;
        *request.uri_mut() = self.target.clone();
        *request.headers_mut() = self.headers.clone();
        let response = self.sender.send_request(request).await.map_err(|error| CallError::Lost(error.to_string()))?;
        let (parts, body) = response.into_parts();
        let body = read_body(body).await.map_err(|error| CallError::Lost(error.to_string()))?;
        Ok(Reply { status: parts.status, headers: parts.headers, body })
    }

    /// A one-off request (not in the measured loop): its id and reply.
    async fn request(&mut self, method: &str, params: Option<Value>) -> Result<(u64, Reply), CallError> {
        let id = self.next_id;
        self.next_id += 1;
        let body = BodyTemplate::new(method, params, false).render(id, 0);
        Ok((id, self.send(Method::POST, body).await?))
    }

    /// One measured call: the body of `template`, checked as `expect` says.
    /// Returns the size of the reply body in bytes.
    async fn call(&mut self, template: &BodyTemplate, nonce: u64, expect: Expect) -> Result<usize, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        let reply = self.send(Method::POST, template.render(id, nonce)).await?;
        if self.reply_format.is_none() {
            self.reply_format = reply.headers.get(CONTENT_TYPE).cloned();
        }
        check_reply(&reply, id, expect).map_err(CallError::Refused)?;
        Ok(reply.body.len())
    }

    /// Ends the session (DELETE), so the server's session ceilings see it
    /// gone before the next workload opens its own.
    async fn close(mut self) -> Result<(), String> {
        if self.mode == Mode::Stateless {
            return Ok(());
        }
        self.headers.remove(CONTENT_TYPE);
        let reply = self.send(Method::DELETE, Bytes::new()).await.map_err(|error| error.to_string())?;
        if reply.status.is_success() {
            Ok(())
        } else {
            Err(format!("DELETE: HTTP {}: {}", reply.status, reply.excerpt()))
        }
    }
}

/// Resident memory of this process, in bytes (`VmRSS`).
fn resident_bytes() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kilobytes| kilobytes * 1024.0)
}

/// Opens `count` sessions on `endpoint`, closes their connections (the
/// sessions stay open on the server until they idle out), and returns the
/// growth of resident memory per session once settled
/// (`PILOTAGE_LOAD_SESSIONS_SETTLE_SECS`, default 5 s; rmcp keeps each
/// request's reply for late resumption for 60 s, so a settle above that
/// shows the cost of a session left idle for longer).
async fn idle_session_bytes(endpoint: &Endpoint, count: usize) -> f64 {
    let settle = Duration::from_secs(env_number("PILOTAGE_LOAD_SESSIONS_SETTLE_SECS", 5));
    tokio::time::sleep(settle).await;
    let before = resident_bytes();
    for _ in 0..count {
        let connection = McpConnection::open(endpoint).await.expect("a session opens");
        drop(connection);
    }
    tokio::time::sleep(settle).await;
    (resident_bytes() - before) / count as f64
}

/// Reads a reply body to its end.
async fn read_body(body: Incoming) -> Result<Vec<u8>, hyper::Error> {
    let mut body = std::pin::pin!(body);
    let mut bytes = Vec::new();
    while let Some(frame) = std::future::poll_fn(|context| body.as_mut().poll_frame(context)).await {
        if let Ok(data) = frame?.into_data() {
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// The whole `result` of the answer to `id` in `reply` (for the one-off
/// checks, which read more than the probe does).
fn result_of(reply: &Reply, id: u64) -> Result<Value, String> {
    if reply.status != StatusCode::OK {
        return Err(format!("HTTP {}: {}", reply.status, reply.excerpt()));
    }
    let message = reply
        .find_message(|data| {
            let message: Value = serde_json::from_slice(data).ok()?;
            (message["id"] == json!(id)).then_some(message)
        })
        .ok_or_else(|| format!("no reply to id {id}: {}", reply.excerpt()))?;
    match message.get("result") {
        Some(result) => Ok(result.clone()),
        None => Err(format!("not a result: {message}")),
    }
}

// ---------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------

/// Which server a workload drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Bare,
    Platform,
    /// A platform with neither metrics nor trace export.
    TelemetryOff,
    /// A platform serving its metrics (scraped every second) and exporting
    /// every span over OTLP to a local sink.
    TelemetryOn,
    /// A platform of the same settings serving the operator console.
    ConsoleOn,
    /// Its twin with the console off (the default), started the same way
    /// at the same time.
    ConsoleOff,
}

/// One measured loop: the same kind of call on every connection.
struct Workload {
    /// The name printed and matched by `PILOTAGE_LOAD_ONLY`.
    name: &'static str,
    target: Target,
    mode: Mode,
    /// The method and tool name (`Mcp-Method`, `Mcp-Name`).
    call: (&'static str, &'static str),
    template: BodyTemplate,
    expect: Expect,
}

/// `tools/call` params.
fn tool_call(name: &str, arguments: Value) -> Option<Value> {
    Some(json!({"name": name, "arguments": arguments}))
}

/// A workload calling `call` (method, tool; the tool's `arguments`, and
/// whether they hold the nonce mark) in `mode`.
fn workload(
    name: &'static str,
    target: Target,
    mode: Mode,
    call: (&'static str, &'static str),
    arguments: Option<Value>,
    expect: Expect,
) -> Workload {
    let (method, tool) = call;
    let with_nonce =
        arguments.as_ref().is_some_and(|arguments| arguments.to_string().contains(&NONCE_MARK.to_string()));
    let params = arguments.map(|arguments| json!({"name": tool, "arguments": arguments}));
    let params = if mode == Mode::Stateless { Some(stateless_params(params)) } else { params };
    Workload { name, target, mode, call, template: BodyTemplate::new(method, params, with_nonce), expect }
}

/// The workloads, in the order they run.
fn workloads() -> Vec<Workload> {
    use Mode::{Session, SessionJsonOnly, Stateless};
    use Target::{Bare, ConsoleOff, ConsoleOn, Platform, TelemetryOff, TelemetryOn};
    let ping = ("ping", "");
    let noop = ("tools/call", "noop");
    let manifest = ("tools/call", "pilotage_manifest");
    let validate = ("tools/call", "validate_workflow");
    // The same 10-step program every call: the validation cache answers.
    let cached = || Some(json!({"workflow": workload::ten_step_program(0)}));
    // A distinct nonce in every call's text: the cache never answers.
    let uncached = || Some(json!({"workflow": workload::ten_step_program(NONCE_MARK)}));
    let none = || Some(json!({}));
    // The 10-step program run without keeping its record: three HTTP
    // invocations of the demo capability service a call.
    let execute = ("tools/call", "run_workflow");
    let unstored =
        || Some(json!({"workflow": workload::ten_step_program(0), "input": workload::input(), "store": false}));
    vec![
        workload("bare_ping", Bare, Session, ping, None, Expect::Result),
        workload("bare_noop", Bare, Session, noop, none(), Expect::Result),
        workload("platform_ping", Platform, Session, ping, None, Expect::Result),
        workload("platform_manifest", Platform, Session, manifest, none(), Expect::Result),
        workload("validate_cached", Platform, Session, validate, cached(), Expect::Valid),
        workload("validate_uncached", Platform, Session, validate, uncached(), Expect::Valid),
        workload("execute_unstored", Platform, Session, execute, unstored(), Expect::RunOk),
        workload("manifest_json", Platform, SessionJsonOnly, manifest, none(), Expect::Result),
        workload("cached_json", Platform, SessionJsonOnly, validate, cached(), Expect::Valid),
        workload("uncached_json", Platform, SessionJsonOnly, validate, uncached(), Expect::Valid),
        workload("bare_noop_stateless", Bare, Stateless, noop, none(), Expect::Result),
        workload("manifest_stateless", Platform, Stateless, manifest, none(), Expect::Result),
        workload("cached_stateless", Platform, Stateless, validate, cached(), Expect::Valid),
        workload("telemetry_off", TelemetryOff, Session, validate, cached(), Expect::Valid),
        workload("telemetry_on", TelemetryOn, Session, validate, cached(), Expect::Valid),
        // Off, on, on, off: the order cancels the machine's drift through
        // the four runs.
        workload("console_off", ConsoleOff, Session, manifest, none(), Expect::Result),
        workload("console_on", ConsoleOn, Session, manifest, none(), Expect::Result),
        workload("console_on_2", ConsoleOn, Session, manifest, none(), Expect::Result),
        workload("console_off_2", ConsoleOff, Session, manifest, none(), Expect::Result),
    ]
}

/// The knobs of a run (see the module documentation).
#[derive(Debug)]
struct LoadSettings {
    duration: Duration,
    connections: usize,
    client_threads: usize,
    only: Option<Vec<String>>,
    external_url: Option<String>,
    external_token: Option<String>,
}

/// A numeric environment variable; an unparsable value stops the run
/// rather than silently measuring something else.
fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text.trim().parse().unwrap_or_else(|_| panic!("{name}={text}: not a number")),
        Err(_) => default,
    }
}

impl LoadSettings {
    fn from_env() -> LoadSettings {
        let nonempty = |name: &str| std::env::var(name).ok().filter(|value| !value.trim().is_empty());
        LoadSettings {
            duration: Duration::from_secs(env_number("PILOTAGE_LOAD_SECS", 5).max(1)),
            connections: env_number("PILOTAGE_LOAD_CONNECTIONS", 32).max(1) as usize,
            client_threads: env_number("PILOTAGE_LOAD_CLIENT_THREADS", 2).max(1) as usize,
            only: nonempty("PILOTAGE_LOAD_ONLY")
                .map(|list| list.split(',').map(|name| name.trim().to_owned()).filter(|n| !n.is_empty()).collect()),
            external_url: nonempty("PILOTAGE_LOAD_URL"),
            external_token: nonempty("PILOTAGE_LOAD_TOKEN"),
        }
    }

    fn selects(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|only| only.iter().any(|chosen| chosen == name))
    }
}

/// What one connection's loop measured.
#[derive(Default)]
struct ConnectionRun {
    /// Latency of each successful call completed inside the measured
    /// window, in ns.
    latencies: Vec<u64>,
    /// Reply body bytes of those calls.
    reply_bytes: u64,
    /// Failed calls, warm-up included.
    errors: u64,
    first_error: Option<String>,
    reply_format: Option<HeaderValue>,
    /// The connection, unless it was lost.
    connection: Option<McpConnection>,
}

/// Loops calls on `connection` until `end`; counts those completed after
/// `warm_end`, as wrk counts the replies read in its window.
async fn connection_loop(
    mut connection: McpConnection,
    template: Arc<BodyTemplate>,
    expect: Expect,
    warm_end: Instant,
    end: Instant,
) -> ConnectionRun {
    let mut run = ConnectionRun::default();
    let mut lost = false;
    while Instant::now() < end {
        let nonce = if template.has_nonce() { NONCE.fetch_add(1, Ordering::Relaxed) } else { 0 };
        let started = Instant::now();
        let outcome = connection.call(&template, nonce, expect).await;
        let finished = Instant::now();
        match outcome {
            Ok(reply_bytes) => {
                if finished >= warm_end && finished <= end {
                    run.latencies.push((finished - started).as_nanos() as u64);
                    run.reply_bytes += reply_bytes as u64;
                }
            }
            Err(error) => {
                run.errors += 1;
                lost = matches!(error, CallError::Lost(_));
                run.first_error.get_or_insert_with(|| error.to_string());
                if lost {
                    break;
                }
            }
        }
    }
    run.reply_format = connection.reply_format.clone();
    run.connection = (!lost).then_some(connection);
    run
}

/// The figures of one workload.
struct Figures {
    name: &'static str,
    calls: usize,
    per_second: f64,
    /// p50, p99, max, in µs.
    latency_micros: [f64; 3],
    /// Mean reply body size, in bytes (event-stream framing included).
    reply_bytes: u64,
    errors: u64,
    first_error: Option<String>,
    reply_format: String,
}

impl Figures {
    fn print(&self, connections: usize) {
        println!(
            "{:<18} {connections:>3} conns {:>8} calls {:>9.0} calls/s  p50 {:>7.0} µs  p99 {:>7.0} µs  max {:>7.0} µs  \
             errors {}  (replies: {}, {} B)",
            self.name,
            self.calls,
            self.per_second,
            self.latency_micros[0],
            self.latency_micros[1],
            self.latency_micros[2],
            self.errors,
            self.reply_format,
            self.reply_bytes,
        );
        if let Some(error) = &self.first_error {
            println!("  !! {}: {} errors, the first: {error}", self.name, self.errors);
        }
    }
}

/// Runs `workload` against `endpoint` on the current (driver) runtime.
async fn drive(workload: &Workload, endpoint: &Endpoint, load: &LoadSettings) -> Figures {
    let opened = futures::future::join_all(
        (0..load.connections).map(|_| McpConnection::open_as(endpoint, workload.mode, Some(workload.call))),
    )
    .await;
    let connections: Vec<McpConnection> = opened
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|error| panic!("{}: cannot open a session: {error}", workload.name));
    let warm_end = Instant::now() + WARM_UP;
    let end = warm_end + load.duration;
    let template = Arc::new(workload.template.clone());
    let tasks: Vec<_> = connections
        .into_iter()
        .map(|connection| tokio::spawn(connection_loop(connection, template.clone(), workload.expect, warm_end, end)))
        .collect();
    let mut latencies = Vec::new();
    let mut reply_bytes = 0;
    let mut errors = 0;
    let mut first_error = None;
    let mut reply_format = None;
    let mut open = Vec::new();
    for task in tasks {
        let run = task.await.expect("a connection task");
        latencies.extend(run.latencies);
        reply_bytes += run.reply_bytes;
        errors += run.errors;
        first_error = first_error.or(run.first_error);
        reply_format = reply_format.or(run.reply_format);
        open.extend(run.connection);
    }
    let lost = load.connections - open.len();
    let closed = futures::future::join_all(open.into_iter().map(McpConnection::close)).await;
    if let Some(Err(error)) = closed.iter().find(|result| result.is_err()) {
        let failures = closed.iter().filter(|result| result.is_err()).count();
        eprintln!("{}: {failures} sessions did not close: {error}", workload.name);
    }
    if lost > 0 {
        eprintln!("{}: {lost} connections were lost", workload.name);
    }
    latencies.sort_unstable();
    let at = |quantile: f64| {
        if latencies.is_empty() {
            0.0
        } else {
            latencies[((latencies.len() - 1) as f64 * quantile).round() as usize] as f64 / 1e3
        }
    };
    Figures {
        name: workload.name,
        calls: latencies.len(),
        per_second: latencies.len() as f64 / load.duration.as_secs_f64(),
        latency_micros: [at(0.50), at(0.99), at(1.0)],
        reply_bytes: reply_bytes.checked_div(latencies.len() as u64).unwrap_or(0),
        errors,
        first_error,
        reply_format: reply_format
            .map_or_else(|| "none".to_owned(), |value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
    }
}

/// Checks each server answers what the workloads assume before measuring:
/// the bare server lists `noop`; the platform validates the 10-step
/// program into a plan of [`workload::STEPS`] steps.
async fn preflight(target: Target, endpoint: &Endpoint) {
    let mut connection = McpConnection::open(endpoint).await.unwrap_or_else(|error| panic!("{target:?}: {error}"));
    match target {
        Target::Bare => {
            let (id, reply) = connection.request("tools/list", None).await.expect("tools/list is answered");
            let result = result_of(&reply, id).expect("tools/list has a result");
            assert_eq!(result["tools"][0]["name"], json!("noop"), "{result}");
        }
        Target::Platform | Target::TelemetryOff | Target::TelemetryOn | Target::ConsoleOn | Target::ConsoleOff => {
            let params = tool_call("validate_workflow", json!({"workflow": workload::ten_step_program(0)}));
            let (id, reply) = connection.request("tools/call", params).await.expect("validate_workflow is answered");
            let result = result_of(&reply, id).expect("validate_workflow has a result");
            let validation = &result["structuredContent"];
            assert_eq!(validation["valid"], json!(true), "{result}");
            assert_eq!(validation["plan"]["steps"].as_array().map(Vec::len), Some(workload::STEPS), "{result}");
        }
    }
    connection.close().await.unwrap_or_else(|error| panic!("{target:?}: {error}"));
}

/// Prints `numerator ÷ denominator` when both ran, against `target` when
/// the issue names one.
fn print_ratio(figures: &[Figures], numerator: &str, denominator: &str, target: Option<f64>) {
    let find = |name: &str| figures.iter().find(|figures| figures.name == name);
    let (Some(top), Some(bottom)) = (find(numerator), find(denominator)) else { return };
    if bottom.per_second == 0.0 {
        println!("  {numerator} / {denominator}: no {denominator} calls");
        return;
    }
    let ratio = top.per_second / bottom.per_second;
    let verdict = match target {
        Some(target) if ratio >= target => format!("(target ≥ {target:.2}: met)"),
        Some(target) => format!("(target ≥ {target:.2}: NOT MET)"),
        None => String::new(),
    };
    println!("  {:<40} = {ratio:>5.2} {verdict}", format!("{numerator} / {denominator}"));
}

/// `PILOTAGE_LOAD_REPLICAS=1,2`: the platform workloads through haproxy in
/// front of each number of release `pilotage serve` replicas on one
/// PostgreSQL (`fleet/mod.rs`), the throughput ratio of each count to the
/// first, and, with two replicas or more, the propagation delay of an admin
/// catalog edit from replica 0 to replica 1.
fn fleet_main(load: &LoadSettings, counts: &[usize], chosen: &[Workload]) {
    let driver = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(load.client_threads)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut figures: Vec<(usize, Figures)> = Vec::new();
    driver.block_on(async {
        for &count in counts {
            let fleet = fleet::Fleet::start(count).await;
            println!("{count} replica(s) behind haproxy at {}:", fleet.url);
            if count >= 2 {
                let delays = fleet.propagation(200).await;
                println!(
                    "  propagation of an admin catalog edit, replica 0 -> 1, after its answer: p50 {:?}  p99 {:?}  max {:?}  ({} edits)",
                    delays[delays.len() / 2],
                    delays[delays.len() * 99 / 100],
                    delays[delays.len() - 1],
                    delays.len()
                );
            }
            let endpoint = Endpoint::parse(&fleet.url, None);
            preflight(Target::Platform, &endpoint).await;
            for workload in chosen.iter().filter(|workload| workload.target == Target::Platform) {
                let measured = drive(workload, &endpoint, load).await;
                measured.print(load.connections);
                figures.push((count, measured));
            }
        }
    });
    println!("ratios of calls/s to {} replica(s):", counts[0]);
    for (count, measured) in figures.iter().filter(|(count, _)| *count != counts[0]) {
        let base = figures.iter().find(|(first, f)| *first == counts[0] && f.name == measured.name);
        if let Some((_, base)) = base.filter(|(_, base)| base.per_second > 0.0) {
            println!(
                "  {:<20} {count} / {} replicas = {:.2}",
                measured.name,
                counts[0],
                measured.per_second / base.per_second
            );
        }
    }
    if figures.iter().any(|(_, measured)| measured.errors > 0) {
        for (count, measured) in figures.iter().filter(|(_, measured)| measured.errors > 0) {
            eprintln!(
                "!!! {count} replicas, {}: {} failed calls: {:?}",
                measured.name, measured.errors, measured.first_error
            );
        }
        std::process::exit(1);
    }
}

fn main() {
    let load = LoadSettings::from_env();
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    NONCE.store(seed, Ordering::Relaxed);
    let chosen: Vec<Workload> = workloads().into_iter().filter(|workload| load.selects(workload.name)).collect();
    if let Some(only) = &load.only {
        let known: Vec<&str> = workloads().iter().map(|workload| workload.name).collect();
        for name in only {
            assert!(known.contains(&name.as_str()), "PILOTAGE_LOAD_ONLY: no workload {name} (known: {known:?})");
        }
    }
    let needs = |target: Target| chosen.iter().any(|workload| workload.target == target);
    if let Ok(list) = std::env::var("PILOTAGE_LOAD_REPLICAS") {
        let counts: Vec<usize> = list
            .split(',')
            .map(|count| count.trim().parse().unwrap_or_else(|_| panic!("PILOTAGE_LOAD_REPLICAS={list}: not a number")))
            .collect();
        assert!(!counts.is_empty() && counts.iter().all(|count| *count >= 1), "PILOTAGE_LOAD_REPLICAS={list}");
        fleet_main(&load, &counts, &chosen);
        return;
    }

    // The servers run on their own runtime (what `pilotage serve` builds:
    // one worker per core); the driver on another, as wrk is a process of
    // its own.
    let servers = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let driver = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(load.client_threads)
        .enable_all()
        .build()
        .expect("a tokio runtime");

    let shutdown = CancellationToken::new();
    let bare = needs(Target::Bare).then(|| servers.block_on(start_bare(&shutdown)));
    let platform = (needs(Target::Platform) && load.external_url.is_none())
        .then(|| servers.block_on(start_platform(load.connections, "platform", None)));
    // The telemetry pass: two in-process servers of the same settings, one
    // with telemetry off, one serving metrics and exporting spans (on a
    // runtime whose threads carry `pilotage serve`'s subscriber with OTLP
    // export; the sink and the exporter's sends run on `sink_runtime`).
    // The console pass: two more platforms of the same settings, the
    // operator console on (its routes mounted beside /mcp) and off.
    let console_on = needs(Target::ConsoleOn)
        .then(|| servers.block_on(start_platform_with(load.connections, "console-on", None, true)));
    let console_off = needs(Target::ConsoleOff)
        .then(|| servers.block_on(start_platform_with(load.connections, "console-off", None, false)));
    let console_on_endpoint = console_on.as_ref().map(|server| Endpoint::parse(&server.mcp_url(), None));
    let console_off_endpoint = console_off.as_ref().map(|server| Endpoint::parse(&server.mcp_url(), None));
    let telemetry = needs(Target::TelemetryOff) || needs(Target::TelemetryOn);
    if telemetry {
        // The process's own subscriber is `pilotage serve`'s without
        // export (warnings as text lines): what the "off" server runs
        // with. It also makes `tracing` judge each callsite against every
        // subscriber, not just the one current on the thread that reaches
        // it first.
        use pilotage_server::telemetry::logs::{LogFormat, subscriber};
        let filter = tracing_subscriber::EnvFilter::new("warn");
        tracing::subscriber::set_global_default(subscriber(filter, LogFormat::Text, None))
            .expect("no subscriber is installed yet");
    }
    let sink_runtime = telemetry.then(|| {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a tokio runtime")
    });
    let sink_counts = SinkCounts::default();
    let pipeline = sink_runtime.as_ref().map(|runtime| {
        use pilotage_server::telemetry::otlp::{ExportTarget, OtlpPipeline, traces_url};
        let sink = start_otlp_sink(runtime, sink_counts.clone());
        let target = ExportTarget::Url(traces_url(&sink).expect("the sink's URL"));
        OtlpPipeline::start(&target, runtime.handle().clone()).expect("the OTLP pipeline starts")
    });
    let traced = pipeline.as_ref().map(|pipeline| {
        use pilotage_server::telemetry::logs::{LogFormat, subscriber};
        let filter = tracing_subscriber::EnvFilter::new("warn");
        traced_runtime(tracing::Dispatch::new(subscriber(filter, LogFormat::Text, Some(pipeline))))
    });
    let telemetry_off = telemetry.then(|| servers.block_on(start_platform(load.connections, "telemetry-off", None)));
    let telemetry_on = traced.as_ref().map(|runtime| {
        runtime.block_on(start_platform(
            load.connections,
            "telemetry-on",
            Some("127.0.0.1:0".parse().expect("an address")),
        ))
    });
    let telemetry_off_endpoint = telemetry_off.as_ref().map(|server| Endpoint::parse(&server.mcp_url(), None));
    let telemetry_on_endpoint = telemetry_on.as_ref().map(|server| Endpoint::parse(&server.mcp_url(), None));
    let metrics_url =
        telemetry_on.as_ref().and_then(|server| server.metrics_addr).map(|address| format!("http://{address}/metrics"));
    let bare_endpoint = bare.as_ref().map(|(url, _)| Endpoint::parse(url, None));
    let platform_endpoint = match (&load.external_url, &platform) {
        (Some(url), _) => Some(Endpoint::parse(url, load.external_token.as_deref())),
        (None, Some(server)) => Some(Endpoint::parse(&server.mcp_url(), None)),
        (None, None) => None,
    };

    println!(
        "load: {} connections, {} s per workload after {} s warm-up, {} driver threads; bare rmcp {}, platform {}",
        load.connections,
        load.duration.as_secs(),
        WARM_UP.as_secs(),
        load.client_threads,
        bare_endpoint.as_ref().map_or("-".to_owned(), |endpoint| endpoint.address.clone()),
        match (&load.external_url, &platform_endpoint) {
            (Some(url), _) => format!("{url} (external)"),
            (None, Some(endpoint)) => format!("{} (in-process)", endpoint.address),
            (None, None) => "-".to_owned(),
        },
    );

    let mut figures = Vec::new();
    driver.block_on(async {
        if let Some(endpoint) = &bare_endpoint {
            preflight(Target::Bare, endpoint).await;
        }
        if let Some(endpoint) = &platform_endpoint {
            preflight(Target::Platform, endpoint).await;
        }
        for (target, endpoint) in [
            (Target::TelemetryOff, &telemetry_off_endpoint),
            (Target::TelemetryOn, &telemetry_on_endpoint),
            (Target::ConsoleOn, &console_on_endpoint),
            (Target::ConsoleOff, &console_off_endpoint),
        ] {
            if let Some(endpoint) = endpoint {
                preflight(target, endpoint).await;
            }
        }
        for workload in &chosen {
            let endpoint = match workload.target {
                Target::Bare => bare_endpoint.as_ref(),
                Target::Platform => platform_endpoint.as_ref(),
                Target::TelemetryOff => telemetry_off_endpoint.as_ref(),
                Target::TelemetryOn => telemetry_on_endpoint.as_ref(),
                Target::ConsoleOn => console_on_endpoint.as_ref(),
                Target::ConsoleOff => console_off_endpoint.as_ref(),
            }
            .expect("the workload's server is up");
            let scraping = match (workload.target, &metrics_url) {
                (Target::TelemetryOn, Some(url)) => {
                    let stop = CancellationToken::new();
                    Some((tokio::spawn(scrape_until(url.clone(), stop.clone())), stop))
                }
                _ => None,
            };
            let measured = drive(workload, endpoint, &load).await;
            measured.print(load.connections);
            if let Some((scraper, stop)) = scraping {
                stop.cancel();
                let scrapes = scraper.await.unwrap_or(0);
                println!("  telemetry_on: {scrapes} scrapes of /metrics during the run");
            }
            figures.push(measured);
        }
    });

    // Memory per idle session, bare rmcp then the platform (both in this
    // process, so each is the growth of its RSS while the other idles).
    let sessions = env_number("PILOTAGE_LOAD_SESSIONS", 500) as usize;
    if sessions > 0 && load.external_url.is_none() && load.only.is_none() {
        for (name, endpoint) in [("bare rmcp", &bare_endpoint), ("platform", &platform_endpoint)] {
            if let Some(endpoint) = endpoint {
                let per_session = driver.block_on(idle_session_bytes(endpoint, sessions));
                println!("per idle session, {name}: {:.1} KB ({sessions} sessions)", per_session / 1024.0);
            }
        }
    }

    println!("ratios of calls/s:");
    print_ratio(&figures, "platform_ping", "bare_ping", Some(0.7));
    print_ratio(&figures, "platform_manifest", "bare_noop", Some(0.85));
    print_ratio(&figures, "manifest_stateless", "bare_noop_stateless", Some(0.85));
    print_ratio(&figures, "validate_uncached", "platform_manifest", Some(0.5));
    print_ratio(&figures, "validate_cached", "platform_manifest", Some(0.9));
    print_ratio(&figures, "execute_unstored", "platform_manifest", None);
    print_ratio(&figures, "cached_stateless", "manifest_stateless", Some(0.9));
    print_ratio(&figures, "manifest_json", "platform_manifest", Some(0.95));
    print_ratio(&figures, "cached_json", "validate_cached", Some(0.95));
    print_ratio(&figures, "uncached_json", "validate_uncached", Some(0.95));
    print_ratio(&figures, "validate_uncached", "platform_ping", None);
    print_ratio(&figures, "validate_cached", "platform_ping", None);
    print_ratio(&figures, "telemetry_on", "telemetry_off", None);
    print_ratio(&figures, "console_on", "console_off", None);
    print_ratio(&figures, "console_on_2", "console_off_2", None);
    let calls = |name: &str| figures.iter().find(|figures| figures.name == name).map(|figures| figures.per_second);
    if let (Some(on), Some(on_2), Some(off), Some(off_2)) =
        (calls("console_on"), calls("console_on_2"), calls("console_off"), calls("console_off_2"))
    {
        println!("  {:<40} = {:>5.2}", "console on / off (both pairs)", (on + on_2) / (off + off_2).max(1.0));
    }
    if let Some(cached) = figures.iter().find(|figures| figures.name == "validate_cached") {
        let [p50, p99, _] = cached.latency_micros;
        let verdict = if p99 <= 2.0 * p50 { "met" } else { "NOT MET" };
        println!(
            "  {:<40} = {:>5.2} (target ≤ 2.00 on a quiet machine: {verdict})",
            "validate_cached p99 / p50",
            p99 / p50.max(1.0)
        );
    }

    drop(driver);
    shutdown.cancel();
    if let Some((_, task)) = bare {
        let _ = servers.block_on(task);
    }
    if let Some(server) = platform {
        servers.block_on(server.stop());
        let _ = std::fs::remove_dir_all(platform_data_dir("platform"));
    }
    for (server, name) in [(console_on, "console-on"), (console_off, "console-off")] {
        if let Some(server) = server {
            servers.block_on(server.stop());
            let _ = std::fs::remove_dir_all(platform_data_dir(name));
        }
    }
    if let Some(server) = telemetry_off {
        servers.block_on(server.stop());
        let _ = std::fs::remove_dir_all(platform_data_dir("telemetry-off"));
    }
    if let (Some(server), Some(runtime)) = (telemetry_on, &traced) {
        runtime.block_on(server.stop());
        let _ = std::fs::remove_dir_all(platform_data_dir("telemetry-on"));
    }
    if let (Some(pipeline), Some(runtime)) = (pipeline, &sink_runtime) {
        runtime.block_on(pipeline.shutdown());
        println!(
            "OTLP sink: {} export requests, {} bytes",
            sink_counts.requests.load(Ordering::Relaxed),
            sink_counts.bytes.load(Ordering::Relaxed)
        );
    }

    let failed: Vec<_> = figures.iter().filter(|figures| figures.errors > 0).collect();
    if !failed.is_empty() {
        eprintln!();
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        for figures in &failed {
            eprintln!("!!! {}: {} failed calls; its figures are not valid", figures.name, figures.errors);
        }
        eprintln!("!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!");
        std::process::exit(1);
    }
}
