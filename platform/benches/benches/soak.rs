//! Soak benchmark (issue 16, hardening). Not a test: a command whose
//! figures go into the issue's note. Run with
//! `PILOTAGE_SOAK_SECS=600 cargo bench --bench soak` (default 600 s).
//!
//! Spawns the real `pilotage serve` binary on a free loopback port (the
//! demo tenant with its capability service, development authentication,
//! SQLite in a fresh data folder, the default bounds except a 2 s body-read
//! bound and a 30 s session idle time), waits for `/readyz`, and drives
//! [`WORKERS`] client tasks for the run's length with a deterministic
//! weighted mix over Streamable HTTP (protocol 2025-11-25, Part III §7),
//! each worker in its own MCP session:
//!
//! - `validate_workflow` of valid programs (the Part III §9.4 program, every
//!   other one with a distinct text so the validation cache both answers and
//!   misses) and of invalid ones (an unknown capability, a reference to a
//!   step that does not exist): `valid` true / false with diagnostics;
//! - hostile requests: a program nested beyond the nesting bound (a
//!   `bounds_exceeded` request error), a body nested far beyond any parser's
//!   depth (a JSON-RPC parse error), a string just under the body limit (an
//!   answer, not a crash), a body over the limit (413 with a JSON-RPC
//!   error), JSON-RPC shapes that are wrong (each its JSON-RPC error), and a
//!   foreign `Origin` (403 before any session exists);
//! - `run_workflow` with the retention default, then `trace_workflow` of its
//!   `run_id` (the same outcome); some runs with an idempotency key repeated
//!   (the first Run's `run_id` answers again, Part II §6.5);
//! - whole sessions: `initialize`, `notifications/initialized`, a call and
//!   `DELETE`.
//!
//! Beside the workers, one task opens a session every 2 s and drops it
//! (it idles out: about 15 live at once, far under the per-principal cap of
//! 64), and two tasks play slow clients that trickle a body one byte every
//! 250 ms (expected: 408 and the connection closed within the body-read
//! bound plus slack).
//!
//! Every answer is classified: an expected refusal is not an error; an
//! unexpected HTTP status, a transport error or a wrong JSON-RPC answer is,
//! counted by kind with the first examples printed. The server's `VmRSS` is
//! sampled every 5 s. Printed: per minute, requests, p50/p99 latency per
//! kind and errors; at the end, totals, errors by kind, RSS after the
//! warm-up (the first minute; half the run when it is shorter than two
//! minutes) against the end, and the latency drift (last window against the
//! first). The server is stopped with SIGTERM and must exit 0. The process
//! exits non-zero on any error.
//!
//! The demo tenant's request quota (200/s by default) is raised through the
//! admin API, or it would refuse part of the load; every other bound is the
//! server's own.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// Concurrent client tasks, each with its own MCP session.
const WORKERS: usize = 8;
/// Concurrent slow clients.
const SLOW_CLIENTS: usize = 2;
/// How often a session is opened and dropped.
const DROP_EVERY: Duration = Duration::from_secs(2);
/// The session idle time the server runs with, seconds.
const SESSION_IDLE_SECS: u64 = 30;
/// The body-read bound the server runs with, milliseconds.
const BODY_READ_TIMEOUT_MS: u64 = 2_000;
/// The server's body limit (its default, 4 MiB).
const MAX_BODY_BYTES: usize = 4 << 20;
/// A slow client's connection must be answered and closed within the
/// body-read bound plus this (a loaded machine).
const SLOW_SLACK: Duration = Duration::from_secs(3);
/// How long one ordinary request may take before it counts as a transport
/// error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The width of one reporting window.
const WINDOW: Duration = Duration::from_secs(60);
/// The operator token the server is started with (admin API).
const ADMIN_TOKEN: &str = "operator-token-of-the-soak-benchmark-0123456789";
const PROTOCOL: &str = "2025-11-25";
/// Examples printed per error kind.
const EXAMPLES: usize = 3;

/// What one operation of the mix was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    ValidateValid,
    ValidateUnknownCapability,
    ValidateBadReference,
    HostileNesting,
    HostileDeepBody,
    HostileHugeString,
    HostileOversize,
    HostileShape,
    ForeignOrigin,
    Execute,
    TraceFetch,
    ExecuteIdempotent,
    SessionCycle,
    SessionDrop,
    SlowClient,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::ValidateValid => "validate_valid",
            Kind::ValidateUnknownCapability => "validate_unknown_cap",
            Kind::ValidateBadReference => "validate_bad_ref",
            Kind::HostileNesting => "hostile_nesting",
            Kind::HostileDeepBody => "hostile_deep_body",
            Kind::HostileHugeString => "hostile_huge_string",
            Kind::HostileOversize => "hostile_oversize",
            Kind::HostileShape => "hostile_shape",
            Kind::ForeignOrigin => "foreign_origin",
            Kind::Execute => "execute",
            Kind::TraceFetch => "trace_fetch",
            Kind::ExecuteIdempotent => "execute_idempotent",
            Kind::SessionCycle => "session_cycle",
            Kind::SessionDrop => "session_drop",
            Kind::SlowClient => "slow_client",
        }
    }
}

/// The workers' mix: each kind with its weight (out of the sum).
const MIX: [(Kind, u32); 12] = [
    (Kind::ValidateValid, 20),
    (Kind::ValidateUnknownCapability, 8),
    (Kind::ValidateBadReference, 8),
    (Kind::HostileNesting, 3),
    (Kind::HostileDeepBody, 3),
    (Kind::HostileHugeString, 1),
    (Kind::HostileOversize, 1),
    (Kind::HostileShape, 8),
    (Kind::ForeignOrigin, 4),
    (Kind::Execute, 24),
    (Kind::ExecuteIdempotent, 12),
    (Kind::SessionCycle, 8),
];

/// A deterministic generator (splitmix64), one per task.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick(&mut self) -> Kind {
        let total: u32 = MIX.iter().map(|(_, weight)| weight).sum();
        let mut at = (self.next() % u64::from(total)) as u32;
        for (kind, weight) in MIX {
            if at < weight {
                return kind;
            }
            at -= weight;
        }
        unreachable!("the weights cover the range")
    }
}

/// Everything recorded during the run.
#[derive(Default)]
struct Stats {
    /// Latencies in µs by (window, kind).
    latencies: BTreeMap<(u64, Kind), Vec<u64>>,
    /// Errors by window.
    window_errors: BTreeMap<u64, u64>,
    /// Errors by "kind: class".
    errors: BTreeMap<String, u64>,
    /// The first examples of each error class.
    examples: BTreeMap<String, Vec<String>>,
}

/// The shared recorder.
#[derive(Clone)]
struct Recorder {
    began: Instant,
    stats: Arc<Mutex<Stats>>,
}

impl Recorder {
    fn window(&self, at: Instant) -> u64 {
        (at.duration_since(self.began).as_secs_f64() / WINDOW.as_secs_f64()) as u64
    }

    fn record(&self, kind: Kind, started: Instant, verdict: Result<(), Failure>) {
        let micros = started.elapsed().as_micros() as u64;
        let window = self.window(started);
        let mut stats = self.stats.lock().expect("the stats lock");
        stats.latencies.entry((window, kind)).or_default().push(micros);
        if let Err(failure) = verdict {
            *stats.window_errors.entry(window).or_default() += 1;
            let class = format!("{}: {}", kind.name(), failure.class);
            *stats.errors.entry(class.clone()).or_default() += 1;
            let examples = stats.examples.entry(class).or_default();
            if examples.len() < EXAMPLES {
                let mut detail = failure.detail;
                detail.truncate(600);
                examples.push(detail);
            }
        }
    }
}

/// An unexpected answer: its class (unexpected status, transport, wrong
/// answer) and what was seen.
struct Failure {
    class: &'static str,
    detail: String,
}

fn transport(error: impl std::fmt::Display) -> Failure {
    Failure { class: "transport", detail: error.to_string() }
}

fn status(got: u16, body: &str) -> Failure {
    Failure { class: "unexpected status", detail: format!("HTTP {got}: {body}") }
}

fn wrong(detail: String) -> Failure {
    Failure { class: "wrong answer", detail }
}

/// The Part III §9.4 program; `nonce` (when some) renames the output member
/// so the program text is new to the validation cache.
fn spec_program(nonce: Option<u64>) -> Value {
    let member = nonce.map_or_else(|| "name".to_owned(), |n| format!("name_{n}"));
    json!({
        "steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profile",
                   "with": {"user_id": "$.input.userId"}}],
        "output": {member: "$.steps.profile.output.name"}
    })
}

fn unknown_capability_program(nonce: u64) -> Value {
    json!({
        "steps": [{"id": "profile", "kind": "call", "capability": format!("cap_no_such_capability_{}", nonce % 64),
                   "with": {"user_id": "$.input.userId"}}],
        "output": {"name": "$.steps.profile.output.name"}
    })
}

fn bad_reference_program(nonce: u64) -> Value {
    json!({
        "steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profile",
                   "with": {"user_id": format!("$.steps.missing_{}.output.id", nonce % 64)}}],
        "output": {"name": "$.steps.profile.output.name"}
    })
}

/// A program whose output is nested 100 deep: beyond the nesting bound.
fn nested_program() -> Value {
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!({"a": deep});
    }
    json!({"steps": [], "output": deep})
}

/// A wrong JSON-RPC shape and the HTTP status and JSON-RPC error code it
/// must get (JSON-RPC 2.0 §5.1; `pilotage_protocol::jsonrpc`).
struct Shape {
    body: &'static str,
    status: u16,
    code: i64,
}

const SHAPES: [Shape; 6] = [
    Shape { body: r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, status: 400, code: -32600 },
    Shape { body: r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":"x"}"#, status: 400, code: -32600 },
    Shape { body: r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":[]}"#, status: 400, code: -32602 },
    Shape { body: r#"{"jsonrpc":"2.0","id":6,"method":"#, status: 400, code: -32700 },
    Shape { body: r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#, status: 400, code: -32600 },
    Shape { body: r#"[]"#, status: 400, code: -32600 },
];

/// Bodies built once.
struct Bodies {
    /// A `validate_workflow` call whose program holds a string that brings
    /// the body just under the limit.
    huge: &'static [u8],
    /// A body over the limit.
    oversize: &'static [u8],
    /// A body nested 200 000 arrays deep.
    deep: &'static [u8],
}

impl Bodies {
    fn build() -> Bodies {
        let mut program = spec_program(None);
        program["steps"][0]["with"]["user_id"] = json!("");
        let frame = tool_body(1, "validate_workflow", &json!({"workflow": program})).to_string();
        let filler = "x".repeat(MAX_BODY_BYTES - frame.len() - 1024);
        program["steps"][0]["with"]["user_id"] = json!(filler);
        let huge = tool_body(1, "validate_workflow", &json!({"workflow": program})).to_string().into_bytes();
        assert!(huge.len() < MAX_BODY_BYTES);
        program["steps"][0]["with"]["user_id"] = json!("y".repeat(MAX_BODY_BYTES + (64 << 10)));
        let oversize = tool_body(1, "validate_workflow", &json!({"workflow": program})).to_string().into_bytes();
        assert!(oversize.len() > MAX_BODY_BYTES);
        let depth = 200_000;
        let mut deep = Vec::with_capacity(2 * depth + 64);
        deep.extend_from_slice(br#"{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":"#);
        deep.extend(std::iter::repeat_n(b'[', depth));
        deep.extend(std::iter::repeat_n(b']', depth));
        deep.extend_from_slice(b"}}");
        Bodies {
            huge: Box::leak(huge.into_boxed_slice()),
            oversize: Box::leak(oversize.into_boxed_slice()),
            deep: Box::leak(deep.into_boxed_slice()),
        }
    }
}

fn tool_body(id: u64, name: &str, arguments: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

fn initialize_body(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "pilotage-soak", "version": "1"}}})
    .to_string()
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// One client: an HTTP connection pool and the MCP endpoint.
struct Client {
    http: reqwest::Client,
    mcp: String,
    next_id: AtomicU64,
}

/// A tool call's answer: `isError` and `structuredContent`.
struct ToolAnswer {
    is_error: bool,
    content: Value,
}

impl Client {
    fn new(mcp: String) -> Client {
        let http = reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build().expect("an HTTP client");
        Client { http, mcp, next_id: AtomicU64::new(1) }
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// POSTs `body` (in `session` when some); the status, the session id
    /// header and the body text.
    async fn post(
        &self,
        session: Option<&str>,
        body: impl Into<reqwest::Body>,
        origin: Option<&str>,
    ) -> Result<(u16, Option<String>, String), Failure> {
        let mut request = self
            .http
            .post(&self.mcp)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session).header("mcp-protocol-version", PROTOCOL);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let response = request.send().await.map_err(transport)?;
        let code = response.status().as_u16();
        let session = response.headers().get("mcp-session-id").and_then(|value| value.to_str().ok()).map(str::to_owned);
        let text = response.text().await.map_err(transport)?;
        Ok((code, session, text))
    }

    /// Opens a session: `initialize` then `notifications/initialized`.
    async fn open(&self) -> Result<String, Failure> {
        let (code, session, text) = self.post(None, initialize_body(self.id()), None).await?;
        if code != 200 {
            return Err(status(code, &text));
        }
        let answer: Value = serde_json::from_str(&text).map_err(|e| wrong(format!("initialize: {e}: {text}")))?;
        if answer["result"]["protocolVersion"] != PROTOCOL {
            return Err(wrong(format!("initialize: {answer}")));
        }
        let session = session.ok_or_else(|| wrong("initialize: no Mcp-Session-Id".to_owned()))?;
        let (code, _, text) = self.post(Some(&session), INITIALIZED, None).await?;
        if code != 202 {
            return Err(status(code, &format!("notifications/initialized: {text}")));
        }
        Ok(session)
    }

    /// Ends `session` with `DELETE`: 204.
    async fn close(&self, session: &str) -> Result<(), Failure> {
        let response = self
            .http
            .delete(&self.mcp)
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", PROTOCOL)
            .send()
            .await
            .map_err(transport)?;
        let code = response.status().as_u16();
        let text = response.text().await.map_err(transport)?;
        if code == 204 { Ok(()) } else { Err(status(code, &format!("DELETE: {text}"))) }
    }

    /// Calls tool `name` in `session`; a JSON-RPC result with
    /// `structuredContent`, or a failure.
    async fn tool(&self, session: &str, name: &str, arguments: &Value) -> Result<ToolAnswer, Failure> {
        let id = self.id();
        let (code, _, text) = self.post(Some(session), tool_body(id, name, arguments).to_string(), None).await?;
        if code != 200 {
            return Err(status(code, &text));
        }
        let answer: Value = serde_json::from_str(&text).map_err(|e| wrong(format!("{name}: {e}: {text}")))?;
        if answer["id"] != id || answer["jsonrpc"] != "2.0" {
            return Err(wrong(format!("{name}: id {id} answered by {answer}")));
        }
        let result = &answer["result"];
        let Some(content) = result.get("structuredContent") else {
            return Err(wrong(format!("{name}: no structuredContent: {answer}")));
        };
        Ok(ToolAnswer { is_error: result["isError"] == true, content: content.clone() })
    }

    /// Posts a raw `body` and checks the JSON-RPC error: HTTP `want`,
    /// error `code`.
    async fn refused(&self, session: Option<&str>, body: &'static [u8], want: u16, code: i64) -> Result<(), Failure> {
        let (got, _, text) = self.post(session, body, None).await?;
        if got != want {
            let mut text = text;
            text.truncate(300);
            return Err(status(got, &text));
        }
        let answer: Value = serde_json::from_str(&text).map_err(|e| wrong(format!("not JSON ({e}): {text}")))?;
        if answer["jsonrpc"] != "2.0" || answer["error"]["code"] != code || answer.get("result").is_some() {
            return Err(wrong(format!("want JSON-RPC error {code}: {answer}")));
        }
        Ok(())
    }
}

fn expect_valid(answer: ToolAnswer, want: bool) -> Result<(), Failure> {
    if answer.is_error {
        return Err(wrong(format!("a request error: {}", answer.content)));
    }
    if answer.content["valid"] != want {
        return Err(wrong(format!("valid should be {want}: {}", answer.content)));
    }
    if !want && answer.content["diagnostics"].as_array().is_none_or(Vec::is_empty) {
        return Err(wrong(format!("invalid without diagnostics: {}", answer.content)));
    }
    Ok(())
}

fn expect_request_error(answer: ToolAnswer, kind: &str) -> Result<(), Failure> {
    if !answer.is_error || answer.content["error"]["kind"] != kind {
        return Err(wrong(format!("want request error {kind}: {}", answer.content)));
    }
    Ok(())
}

/// A successful Run's `run_id` and outcome.
fn expect_run(answer: ToolAnswer) -> Result<(String, Value), Failure> {
    if answer.is_error || answer.content["outcome"]["ok"] != true {
        return Err(wrong(format!("want a successful Run: {}", answer.content)));
    }
    if answer.content["output"] != json!({"name": "Amira Hassan"}) {
        return Err(wrong(format!("wrong output: {}", answer.content)));
    }
    let run_id = answer.content["run_id"].as_str().ok_or_else(|| wrong(format!("no run_id: {}", answer.content)))?;
    Ok((run_id.to_owned(), answer.content["outcome"].clone()))
}

fn run_arguments(idempotency_key: Option<&str>) -> Value {
    let mut arguments = json!({"workflow": spec_program(None), "input": {"userId": "42"}, "store": true});
    if let Some(key) = idempotency_key {
        arguments["idempotency_key"] = json!(key);
    }
    arguments
}

/// One worker: its own session, then the mix until `until`.
async fn worker(index: usize, client: Client, bodies: Arc<Bodies>, recorder: Recorder, until: Instant) {
    let mut mix = Mix(0x50A4 + index as u64);
    let session = client.open().await.unwrap_or_else(|failure| panic!("worker {index}: {}", failure.detail));
    let mut keys: HashMap<String, String> = HashMap::new();
    let mut nonce = 0u64;
    while Instant::now() < until {
        let kind = mix.pick();
        nonce += 1;
        let n = ((index as u64) << 32) | nonce;
        let started = Instant::now();
        let verdict = match kind {
            Kind::ValidateValid => {
                let program = spec_program(if nonce.is_multiple_of(2) { Some(n) } else { None });
                match client.tool(&session, "validate_workflow", &json!({"workflow": program})).await {
                    Ok(answer) => expect_valid(answer, true),
                    Err(failure) => Err(failure),
                }
            }
            Kind::ValidateUnknownCapability => {
                let arguments = json!({"workflow": unknown_capability_program(n)});
                match client.tool(&session, "validate_workflow", &arguments).await {
                    Ok(answer) => expect_valid(answer, false),
                    Err(failure) => Err(failure),
                }
            }
            Kind::ValidateBadReference => {
                let arguments = json!({"workflow": bad_reference_program(n)});
                match client.tool(&session, "validate_workflow", &arguments).await {
                    Ok(answer) => expect_valid(answer, false),
                    Err(failure) => Err(failure),
                }
            }
            Kind::HostileNesting => {
                match client.tool(&session, "validate_workflow", &json!({"workflow": nested_program()})).await {
                    Ok(answer) => expect_request_error(answer, "bounds_exceeded"),
                    Err(failure) => Err(failure),
                }
            }
            Kind::HostileDeepBody => client.refused(Some(&session), bodies.deep, 400, -32700).await,
            Kind::HostileHugeString => huge_string(&client, &session, bodies.huge).await,
            Kind::HostileOversize => client.refused(Some(&session), bodies.oversize, 413, -32600).await,
            Kind::HostileShape => {
                let shape = &SHAPES[(nonce as usize) % SHAPES.len()];
                client.refused(Some(&session), shape.body.as_bytes(), shape.status, shape.code).await
            }
            Kind::ForeignOrigin => match client.post(None, initialize_body(1), Some("https://evil.example")).await {
                Ok((403, None, _)) => Ok(()),
                Ok((code, session, text)) => Err(status(code, &format!("session {session:?}: {text}"))),
                Err(failure) => Err(failure),
            },
            Kind::Execute => {
                match client.tool(&session, "run_workflow", &run_arguments(None)).await.and_then(expect_run) {
                    Ok((run_id, outcome)) => {
                        recorder.record(kind, started, Ok(()));
                        let started = Instant::now();
                        let verdict = trace_fetch(&client, &session, &run_id, &outcome).await;
                        recorder.record(Kind::TraceFetch, started, verdict);
                        continue;
                    }
                    Err(failure) => Err(failure),
                }
            }
            Kind::ExecuteIdempotent => {
                let key = format!("soak-{index}-{}", nonce % 5);
                match client.tool(&session, "run_workflow", &run_arguments(Some(&key))).await.and_then(expect_run) {
                    Ok((run_id, _)) => match keys.get(&key) {
                        Some(first) if *first != run_id => {
                            Err(wrong(format!("key {key}: run {run_id}, the first was {first}")))
                        }
                        Some(_) => Ok(()),
                        None => {
                            keys.insert(key, run_id);
                            Ok(())
                        }
                    },
                    Err(failure) => Err(failure),
                }
            }
            Kind::SessionCycle => session_cycle(&client).await,
            Kind::TraceFetch | Kind::SessionDrop | Kind::SlowClient => unreachable!("not in the mix"),
        };
        recorder.record(kind, started, verdict);
    }
    if let Err(failure) = client.close(&session).await {
        recorder.record(Kind::SessionCycle, Instant::now(), Err(failure));
    }
}

/// The huge string is an answer, whatever the Language makes of it: a
/// validation result or a request error, never a crash.
async fn huge_string(client: &Client, session: &str, body: &'static [u8]) -> Result<(), Failure> {
    let (code, _, text) = client.post(Some(session), body, None).await?;
    if code != 200 {
        let mut text = text;
        text.truncate(300);
        return Err(status(code, &text));
    }
    let answer: Value = serde_json::from_str(&text).map_err(|e| wrong(format!("not JSON ({e})")))?;
    let content = &answer["result"]["structuredContent"];
    if content.get("valid").is_some() || content["error"]["kind"].is_string() {
        Ok(())
    } else {
        let mut text = answer.to_string();
        text.truncate(300);
        Err(wrong(format!("neither a validation nor a request error: {text}")))
    }
}

async fn trace_fetch(client: &Client, session: &str, run_id: &str, outcome: &Value) -> Result<(), Failure> {
    let answer = client.tool(session, "trace_workflow", &json!({"run_id": run_id})).await?;
    if answer.is_error {
        return Err(wrong(format!("trace of {run_id}: {}", answer.content)));
    }
    if answer.content["outcome"] != *outcome || answer.content["trace"]["steps"].as_array().is_none_or(Vec::is_empty) {
        return Err(wrong(format!("trace of {run_id} (outcome {outcome}): {}", answer.content)));
    }
    Ok(())
}

async fn session_cycle(client: &Client) -> Result<(), Failure> {
    let session = client.open().await?;
    let answer = client.tool(&session, "pilotage_manifest", &json!({})).await?;
    if answer.is_error || !answer.content.is_object() {
        return Err(wrong(format!("manifest: {}", answer.content)));
    }
    client.close(&session).await
}

/// Opens a session every [`DROP_EVERY`] and forgets it.
async fn dropper(client: Client, recorder: Recorder, until: Instant) {
    while Instant::now() < until {
        let started = Instant::now();
        let verdict = client.open().await.map(drop);
        recorder.record(Kind::SessionDrop, started, verdict);
        tokio::time::sleep(DROP_EVERY).await;
    }
}

/// Trickles a body one byte every 250 ms until the server answers and
/// closes: 408 within the body-read bound plus slack.
async fn slow_client(addr: String, recorder: Recorder, until: Instant) {
    while Instant::now() < until {
        let started = Instant::now();
        let verdict = trickle(&addr).await;
        recorder.record(Kind::SlowClient, started, verdict);
    }
}

async fn trickle(addr: &str) -> Result<(), Failure> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(transport)?;
    let started = Instant::now();
    let (mut reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\n\
         Content-Length: 100000\r\n\r\n{{"
    );
    writer.write_all(head.as_bytes()).await.map_err(transport)?;
    let writing = tokio::spawn(async move {
        for _ in 0..1000 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let bound = Duration::from_millis(BODY_READ_TIMEOUT_MS) + SLOW_SLACK;
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let outcome = loop {
        match tokio::time::timeout_at((started + bound).into(), reader.read(&mut buffer)).await {
            Err(_) => break Err(wrong(format!("still open after {bound:?}"))),
            Ok(Ok(0)) | Ok(Err(_)) => break Ok(()),
            Ok(Ok(read)) => received.extend_from_slice(&buffer[..read]),
        }
    };
    writing.abort();
    outcome?;
    let text = String::from_utf8_lossy(&received);
    if !text.starts_with("HTTP/1.1 408") {
        return Err(wrong(format!("after {:?}: {text}", started.elapsed())));
    }
    if started.elapsed() < Duration::from_millis(BODY_READ_TIMEOUT_MS / 2) {
        return Err(wrong(format!("closed too early, after {:?}", started.elapsed())));
    }
    Ok(())
}

/// The resident set of `pid` in KiB (`VmRSS` of `/proc/<pid>/status`).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn millis(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// The server process and what it is reached at.
struct Served {
    child: tokio::process::Child,
    pid: u32,
    addr: String,
    log_errors: Arc<Mutex<Vec<String>>>,
}

async fn serve(data_dir: &Path) -> Served {
    let config = data_dir.join("soak.toml");
    std::fs::create_dir_all(data_dir).expect("the data folder");
    std::fs::write(&config, format!("session_idle_secs = {SESSION_IDLE_SECS}\n")).expect("the settings file");
    let mut child = tokio::process::Command::new(pilotage_test_support::pilotage_binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--demo-postgres", "off", "--admin-token", ADMIN_TOKEN])
        .arg("--body-read-timeout-ms")
        .arg(BODY_READ_TIMEOUT_MS.to_string())
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(data_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the pilotage binary starts");
    let pid = child.id().expect("a pid");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(180), lines.next_line())
            .await
            .expect("the server starts within 3 minutes")
            .expect("stderr reads")
            .expect("the server says where it listens");
        if let Some(url) = line.strip_prefix("Pilotage Platform: MCP at ") {
            break url.trim().to_owned();
        }
    };
    // Keep reading the log; ERROR lines and panics are errors of the run.
    let log_errors = Arc::new(Mutex::new(Vec::new()));
    let seen = log_errors.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("ERROR") || line.contains("panicked") {
                seen.lock().expect("the log lock").push(line);
            }
        }
    });
    let addr = url.trim_start_matches("http://").split('/').next().expect("an address").to_owned();
    Served { child, pid, addr, log_errors }
}

async fn ready(http: &reqwest::Client, addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(response) = http.get(format!("http://{addr}/readyz")).send().await
            && response.status() == 200
        {
            return;
        }
        assert!(Instant::now() < deadline, "/readyz did not answer 200 within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Raises the demo tenant's request quota through the admin API.
async fn raise_quota(http: &reqwest::Client, addr: &str) {
    let response = http
        .patch(format!("http://{addr}/admin/v1/tenants/demo"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"quotas": {"requests_per_second": 1_000_000, "max_concurrent_runs": 64}}))
        .send()
        .await
        .expect("the admin API answers");
    let code = response.status();
    assert!(code.is_success(), "raising the quota: {code} {}", response.text().await.unwrap_or_default());
}

fn report(stats: &Stats, rss: &[(Duration, u64)], secs: u64) -> bool {
    let windows: Vec<u64> = {
        let mut windows: Vec<u64> = stats.latencies.keys().map(|(window, _)| *window).collect();
        windows.dedup();
        windows
    };
    println!("\nper window of {} s: requests, errors; per kind: count p50/p99 ms", WINDOW.as_secs());
    let mut total = 0usize;
    for window in &windows {
        let mut line = String::new();
        let mut requests = 0;
        for ((_, kind), latencies) in
            stats.latencies.range((*window, Kind::ValidateValid)..=(*window, Kind::SlowClient))
        {
            let mut sorted = latencies.clone();
            sorted.sort_unstable();
            requests += sorted.len();
            line.push_str(&format!(
                "\n    {:<22} {:>6}  {:>8.1} / {:>8.1}",
                kind.name(),
                sorted.len(),
                millis(percentile(&sorted, 0.5)),
                millis(percentile(&sorted, 0.99))
            ));
        }
        total += requests;
        println!(
            "  minute {}: {requests} requests, {} errors{line}",
            window + 1,
            stats.window_errors.get(window).copied().unwrap_or(0)
        );
    }
    let errors: u64 = stats.errors.values().sum();
    println!("\ntotal: {total} requests in {secs} s, {errors} errors");
    for (class, count) in &stats.errors {
        println!("  {class}: {count}");
        for example in &stats.examples[class] {
            println!("      e.g. {example}");
        }
    }

    // Latency drift: the last full window against the first one (the only
    // one, when the run is shorter than two windows).
    let full: Vec<u64> = windows.iter().copied().filter(|w| (w + 1) * WINDOW.as_secs() <= secs).collect();
    if let (Some(first), Some(last)) = (full.first(), full.last()) {
        println!("\nlatency drift, minute {} -> minute {}: p50 ms, p99 ms", first + 1, last + 1);
        let all = |window: u64| -> Vec<u64> {
            let mut all: Vec<u64> = stats
                .latencies
                .range((window, Kind::ValidateValid)..=(window, Kind::SlowClient))
                .flat_map(|(_, latencies)| latencies.iter().copied())
                .collect();
            all.sort_unstable();
            all
        };
        let mut kinds: Vec<Kind> = stats.latencies.keys().map(|(_, kind)| *kind).collect();
        kinds.sort();
        kinds.dedup();
        for kind in kinds {
            let get = |window: u64| {
                let mut sorted = stats.latencies.get(&(window, kind)).cloned().unwrap_or_default();
                sorted.sort_unstable();
                sorted
            };
            let (a, b) = (get(*first), get(*last));
            println!(
                "  {:<22} p50 {:>8.1} -> {:>8.1}   p99 {:>8.1} -> {:>8.1}",
                kind.name(),
                millis(percentile(&a, 0.5)),
                millis(percentile(&b, 0.5)),
                millis(percentile(&a, 0.99)),
                millis(percentile(&b, 0.99))
            );
        }
        let (a, b) = (all(*first), all(*last));
        println!(
            "  {:<22} p50 {:>8.1} -> {:>8.1}   p99 {:>8.1} -> {:>8.1}",
            "all kinds",
            millis(percentile(&a, 0.5)),
            millis(percentile(&b, 0.5)),
            millis(percentile(&a, 0.99)),
            millis(percentile(&b, 0.99))
        );
    }

    // RSS: after the warm-up against the end.
    let warm_up = if secs >= 2 * WINDOW.as_secs() { WINDOW } else { Duration::from_secs(secs / 2) };
    println!("\nserver VmRSS (MiB) every 5 s:");
    for chunk in rss.chunks(12) {
        let line: Vec<String> = chunk.iter().map(|(_, kib)| format!("{:.1}", *kib as f64 / 1024.0)).collect();
        println!("  {}", line.join(" "));
    }
    let after_warm_up = rss.iter().find(|(at, _)| *at >= warm_up).or(rss.first());
    if let (Some((at, start)), Some((end_at, end))) = (after_warm_up, rss.last()) {
        let peak = rss.iter().map(|(_, kib)| *kib).max().unwrap_or(0);
        println!(
            "RSS after warm-up ({:.0} s) {:.1} MiB, at the end ({:.0} s) {:.1} MiB: growth {:+.1} %; peak {:.1} MiB",
            at.as_secs_f64(),
            *start as f64 / 1024.0,
            end_at.as_secs_f64(),
            *end as f64 / 1024.0,
            (*end as f64 - *start as f64) * 100.0 / *start as f64,
            peak as f64 / 1024.0
        );
    }
    errors == 0
}

fn main() {
    let secs: u64 = std::env::var("PILOTAGE_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(600);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let clean = runtime.block_on(soak(secs));
    if !clean {
        std::process::exit(1);
    }
}

async fn soak(secs: u64) -> bool {
    pilotage_client::install_crypto_provider();
    let data_dir: PathBuf = std::env::temp_dir().join(format!("pilotage-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data_dir);
    let mut served = serve(&data_dir).await;
    let http = reqwest::Client::new();
    ready(&http, &served.addr).await;
    raise_quota(&http, &served.addr).await;
    let mcp = format!("http://{}/mcp", served.addr);
    println!(
        "soak: {secs} s, {WORKERS} workers, {SLOW_CLIENTS} slow clients, a session dropped every {} s; server pid {} at {mcp}",
        DROP_EVERY.as_secs(),
        served.pid
    );

    let bodies = Arc::new(Bodies::build());
    let began = Instant::now();
    let until = began + Duration::from_secs(secs);
    let recorder = Recorder { began, stats: Arc::default() };
    let rss = Arc::new(Mutex::new(Vec::new()));
    let sampler = {
        let rss = rss.clone();
        let pid = served.pid;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tick.tick().await;
                if let Some(kib) = rss_kib(pid) {
                    rss.lock().expect("the rss lock").push((began.elapsed(), kib));
                }
                if Instant::now() >= until {
                    return;
                }
            }
        })
    };
    let mut tasks = Vec::new();
    for index in 0..WORKERS {
        tasks.push(tokio::spawn(worker(index, Client::new(mcp.clone()), bodies.clone(), recorder.clone(), until)));
    }
    tasks.push(tokio::spawn(dropper(Client::new(mcp.clone()), recorder.clone(), until)));
    for _ in 0..SLOW_CLIENTS {
        tasks.push(tokio::spawn(slow_client(served.addr.clone(), recorder.clone(), until)));
    }
    let mut clean = true;
    for task in tasks {
        if let Err(error) = task.await {
            println!("a client task failed: {error}");
            clean = false;
        }
    }
    let _ = sampler.await;
    let elapsed = began.elapsed();
    if let Some(kib) = rss_kib(served.pid) {
        rss.lock().expect("the rss lock").push((elapsed, kib));
    }

    {
        let stats = recorder.stats.lock().expect("the stats lock");
        clean &= report(&stats, &rss.lock().expect("the rss lock"), secs);
    }

    // Stop: SIGTERM, and the process must exit 0.
    let killed = std::process::Command::new("kill").args(["-TERM", &served.pid.to_string()]).status();
    assert!(killed.is_ok_and(|status| status.success()), "SIGTERM is sent");
    let stopping = Instant::now();
    match tokio::time::timeout(Duration::from_secs(30), served.child.wait()).await {
        Ok(Ok(status)) if status.success() => {
            println!("server stopped on SIGTERM in {:.2} s, exit status 0", stopping.elapsed().as_secs_f64())
        }
        other => {
            println!("server did not exit 0 within 30 s of SIGTERM: {other:?}");
            clean = false;
        }
    }
    let log_errors = served.log_errors.lock().expect("the log lock");
    println!("server log: {} ERROR or panic lines", log_errors.len());
    for line in log_errors.iter().take(5) {
        println!("  {line}");
    }
    clean &= log_errors.is_empty();
    let _ = std::fs::remove_dir_all(&data_dir);
    println!("soak: {}", if clean { "clean" } else { "ERRORS" });
    clean
}
