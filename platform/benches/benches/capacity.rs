//! Capacity scenario (issue: "Runs that wait cost nothing"). Not a test and
//! not criterion: a load scenario whose figures go into the issue's note.
//! It never asserts on a time or a size; it prints ratios and counts beside
//! their targets, and exits with status 1 only when something that must
//! hold does not (below).
//!
//! What it measures: how one server process holds a burst of Runs that all
//! wait on a slow capability at once, and whether a quiet tenant beside
//! the burst keeps its latency; what a waiting Run costs in memory, and
//! whether the memory comes back afterwards.
//!
//! Run with `cargo bench -p pilotage-benches --bench capacity` (the first
//! run builds the release `pilotage` binary). A small run:
//! `PILOTAGE_CAPACITY_TENANTS=5 PILOTAGE_CAPACITY_RUNS=4
//! PILOTAGE_CAPACITY_WAIT_MS=2000 PILOTAGE_CAPACITY_SETTLE_SECS=10 cargo
//! bench -p pilotage-benches --bench capacity`.
//!
//! One run is one server process, spawned as `pilotage serve` on a free
//! loopback port with a fresh data folder (SQLite), development
//! authentication and the admin API:
//!
//! 1. This process serves `POST /slow` (answers `{"ok": true, "waited_ms":
//!    N}` after the wait; it counts the requests it is holding) and
//!    `POST /fast` (answers at once) on loopback.
//! 2. Through the admin API: tenant `quiet` and tenants `t0 … t{N-1}`, each
//!    with the workflow/v1 component uploaded and catalog entries
//!    `cap_slow` and `cap_fast` bound to the two services (risk `safe`,
//!    read-only); with quotas `raised`, every tenant's
//!    `max_concurrent_runs` is the Runs per tenant + 10 and its
//!    `requests_per_second` 100000. A development token and one MCP
//!    session (protocol 2025-11-25, plain JSON answers) per tenant.
//! 3. Idle baseline: the quiet tenant warms up (10 calls of each kind, not
//!    counted), then 5 s of quiet, the server's `VmRSS`, `RssAnon` and
//!    `Threads` (`/proc/PID/status`), then the quiet tenant makes 200
//!    uncached validations (a nonce in the program text) and 200 Runs of
//!    the fast program, alternating, one at a time.
//! 4. Burst: every tenant `t*` sends its Runs of the slow program
//!    (`run_workflow`, `store: false`) at once. Until the burst's last
//!    answer, the quiet tenant keeps alternating an uncached validation
//!    and a fast Run, and a sampler reads `VmRSS` every 100 ms.
//! 5. Settling: `VmRSS`, `RssAnon` and `Threads` at +1 s, +10 s, +30 s and
//!    +`PILOTAGE_CAPACITY_SETTLE_SECS` after the burst's last answer
//!    (points past the last one are skipped); at
//!    +`PILOTAGE_CAPACITY_TOUCH_SECS` every session sends one `ping`.
//!
//! Environment variables:
//!
//! - `PILOTAGE_CAPACITY_TENANTS` (default 100): tenants in the burst.
//! - `PILOTAGE_CAPACITY_RUNS` (default 20): concurrent Runs per tenant.
//! - `PILOTAGE_CAPACITY_WAIT_MS` (default 5000): how long `/slow` holds
//!   each request; keep it under the server's invocation timeout (10 s by
//!   default) or every slow Run fails.
//! - `PILOTAGE_CAPACITY_SETTLE_SECS` (default 60): the last settle point.
//! - `PILOTAGE_CAPACITY_TOUCH_SECS` (default 15; 0: never): when, after
//!   the burst, every session sends one `ping`, as agents that go on
//!   talking do. The server keeps a session's answers to completed
//!   requests for a late resume (`Last-Event-ID`) until the session next
//!   hears from its client past their time to live (rmcp evicts them
//!   then), so without this the burst's answers stay as long as the
//!   sessions stay silent.
//! - `PILOTAGE_CAPACITY_QUOTAS` (`raised`, the default, or `default`:
//!   the tenants keep the platform's quotas, 16 Runs at once and 200
//!   requests/s, so part of the burst is refused by quota; so are some of
//!   the quiet tenant's back-to-back calls, which go over 200/s: counted
//!   as `quota`, not timed).
//! - `PILOTAGE_CAPACITY_TOML`: TOML appended verbatim to the settings file
//!   (which holds only `max_connections = 8192`, `request_timeout_ms =
//!   120000` and `egress.allow_private = true`, all top-level keys, so
//!   the extra text may hold top-level keys as well as tables; the server
//!   refuses unknown keys).
//! - `PILOTAGE_CAPACITY_SERVE_ARGS`: extra `pilotage serve` arguments,
//!   separated by whitespace.
//! - `PILOTAGE_CAPACITY_COMPONENT`: the Language component's file (default:
//!   the bundled workflow/v1 component).
//! - `PILOTAGE_CAPACITY_LANGUAGE` (`workflow`, the default, or `recipe`):
//!   the Language of that component, for its tools and programs; `recipe`
//!   with `target/recipe-py/recipe.wasm` (built by the Python Language's
//!   test) and `PILOTAGE_CAPACITY_SERVE_ARGS="--core-instances-per-component
//!   64"` drives the CPython Language.
//! - `PILOTAGE_BIN`: the `pilotage` binary to run (default: this
//!   workspace's, built by cargo), so the same scenario can be run against
//!   another build side by side; a build without the capacity work may fail
//!   many calls, which are counted and reported.
//!
//! Printed figures:
//!
//! - burst, per outcome class: `ok` (the Run's outcome is ok), `quota` (a
//!   `bounds_exceeded` request error naming a tenant quota, by quota),
//!   `capacity` (outcome `resource_exhausted` with `retry_after_ms`, or a
//!   `bounds_exceeded` request error with `retry_after_ms`; with the
//!   min/median/max `retry_after_ms`), `failure` (anything else: another
//!   request error or outcome, an HTTP error, a transport error or a
//!   timeout; with up to 5 distinct messages); the `ok` Runs' latency;
//! - `held at most`: the most requests `/slow` held at once, the Runs that
//!   were really waiting at the same time;
//! - quiet tenant, idle and during the burst: p50/p99 latency of its `ok`
//!   validations and fast Runs (refusals are counted, not timed), the
//!   ratio of the p99 during the burst to the idle p99 (target ≤ 2), and
//!   its calls per class (failures must be 0);
//! - memory: `VmRSS` before the burst, its peak (with the Runs held at that
//!   moment), and (peak − before) ÷ most Runs held, in KiB per waiting Run
//!   (target ≤ 1024; with few Runs the quiet tenant's own calls dominate
//!   the growth, so the figure means something at the default scale);
//!   `VmRSS` at each settle point and its ratio to before
//!   (target ≤ 1.10 at +60 s); threads before, the most seen during
//!   the burst, and at the last settle point;
//! - the server log: lines with `panicked`, `ERROR` and `WARN`.
//!
//! Exit status 1 when a quiet-tenant call fails, when a burst call is in
//! the `failure` class, when the server's log shows a line with
//! `panicked`, or when the scenario cannot be set up. A figure missing its
//! target is printed with the target beside it, never an exit status.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::serve::ListenerExt;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

/// The operator token the server is started with (admin API).
const ADMIN_TOKEN: &str = "operator-token-of-the-capacity-scenario-0123456789";
/// The MCP protocol version the sessions speak.
const PROTOCOL: &str = "2025-11-25";
/// The tenant whose latency the burst must not disturb.
const QUIET: &str = "quiet";
/// The Language the scenario drives: its tools, its program argument and
/// its programs (`PILOTAGE_CAPACITY_LANGUAGE`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    /// workflow/v1 (the bundled component).
    Workflow,
    /// recipe/v1 (the Rust, JavaScript and Python recipe components).
    Recipe,
}

impl Dialect {
    fn argument(self) -> &'static str {
        match self {
            Dialect::Workflow => "workflow",
            Dialect::Recipe => "recipe",
        }
    }

    fn validate_tool(self) -> &'static str {
        match self {
            Dialect::Workflow => "validate_workflow",
            Dialect::Recipe => "validate_recipe",
        }
    }

    fn run_tool(self) -> &'static str {
        match self {
            Dialect::Workflow => "run_workflow",
            Dialect::Recipe => "run_recipe",
        }
    }
}
/// The quiet time before the idle figures, so start-up work has settled.
const IDLE_WAIT: Duration = Duration::from_secs(5);
/// Calls of each kind the quiet tenant makes for the idle baseline.
const IDLE_CALLS: usize = 200;
/// Calls of each kind the quiet tenant makes, uncounted, before the idle
/// wait.
const WARM_UP_CALLS: usize = 10;
/// How often the sampler reads the server's memory during the burst.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Settle points before the last one (`PILOTAGE_CAPACITY_SETTLE_SECS`).
const SETTLE_POINTS: [u64; 3] = [1, 10, 30];
/// A call still unanswered after this is a failure (the server's own
/// request timeout is 120 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(150);
/// Tenants set up at once: the admin API is not what is measured.
const SETUP_PARALLEL: usize = 8;
/// Distinct failure messages printed per class.
const SAMPLES: usize = 5;
/// A printed message is cut to this many characters.
const EXCERPT_CHARS: usize = 300;
/// Log lines kept to explain a server that did not start.
const LOG_TAIL: usize = 30;

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// Makes every validation text distinct, so the validation cache misses.
static NONCE: AtomicU64 = AtomicU64::new(0);

/// The scenario's parameters, from the environment.
struct Scenario {
    tenants: usize,
    runs: usize,
    wait_ms: u64,
    settle_secs: u64,
    touch_secs: u64,
    raise_quotas: bool,
    extra_toml: String,
    serve_args: Vec<String>,
    binary: PathBuf,
    component: Vec<u8>,
    dialect: Dialect,
}

/// A whole number from `name`, `default` when unset; a malformed value
/// stops the run rather than silently measuring something else.
fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text.trim().parse().unwrap_or_else(|_| panic!("{name} must be a whole number, not '{text}'")),
        Err(_) => default,
    }
}

impl Scenario {
    /// Reads the environment (see the module documentation); resolving the
    /// default binary builds it, so this runs before the runtime starts.
    fn from_env() -> Scenario {
        let quotas = std::env::var("PILOTAGE_CAPACITY_QUOTAS").unwrap_or_else(|_| "raised".to_owned());
        let raise_quotas = match quotas.as_str() {
            "raised" => true,
            "default" => false,
            other => panic!("PILOTAGE_CAPACITY_QUOTAS must be 'raised' or 'default', not '{other}'"),
        };
        let component = match std::env::var("PILOTAGE_CAPACITY_COMPONENT") {
            Ok(path) => std::fs::read(&path).unwrap_or_else(|e| panic!("PILOTAGE_CAPACITY_COMPONENT {path}: {e}")),
            Err(_) => pilotage_bundled::WORKFLOW.to_vec(),
        };
        let binary =
            std::env::var_os("PILOTAGE_BIN").map_or_else(pilotage_test_support::pilotage_binary, PathBuf::from);
        Scenario {
            tenants: env_number("PILOTAGE_CAPACITY_TENANTS", 100) as usize,
            runs: env_number("PILOTAGE_CAPACITY_RUNS", 20) as usize,
            wait_ms: env_number("PILOTAGE_CAPACITY_WAIT_MS", 5_000),
            settle_secs: env_number("PILOTAGE_CAPACITY_SETTLE_SECS", 60).max(1),
            touch_secs: env_number("PILOTAGE_CAPACITY_TOUCH_SECS", 15),
            raise_quotas,
            extra_toml: std::env::var("PILOTAGE_CAPACITY_TOML").unwrap_or_default(),
            serve_args: std::env::var("PILOTAGE_CAPACITY_SERVE_ARGS")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
            binary,
            component,
            dialect: match std::env::var("PILOTAGE_CAPACITY_LANGUAGE").as_deref() {
                Err(_) | Ok("workflow") => Dialect::Workflow,
                Ok("recipe") => Dialect::Recipe,
                Ok(other) => panic!("PILOTAGE_CAPACITY_LANGUAGE must be 'workflow' or 'recipe', not '{other}'"),
            },
        }
    }

    /// The Runs of the burst.
    fn total(&self) -> usize {
        self.tenants * self.runs
    }

    /// The settle points, seconds after the burst: the fixed ones below the
    /// last, then the last.
    fn settle_points(&self) -> Vec<u64> {
        let mut points: Vec<u64> = SETTLE_POINTS.iter().copied().filter(|p| *p < self.settle_secs).collect();
        points.push(self.settle_secs);
        points
    }
}

// ---------------------------------------------------------------------------
// The capability services
// ---------------------------------------------------------------------------

/// What `/slow` is holding: the Runs really waiting on it.
#[derive(Default)]
struct Holding {
    held: AtomicU64,
    max_held: AtomicU64,
    served: AtomicU64,
}

/// Counts a held request out however its handler ends (a dropped
/// connection drops the handler mid-wait).
struct HeldGuard(Arc<Holding>);

impl Drop for HeldGuard {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `POST /slow`: holds the request for `wait_ms`, counting it while held.
async fn hold(holding: Arc<Holding>, wait_ms: u64) -> axum::Json<Value> {
    let now = holding.held.fetch_add(1, Ordering::SeqCst) + 1;
    holding.max_held.fetch_max(now, Ordering::SeqCst);
    let _guard = HeldGuard(holding.clone());
    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    holding.served.fetch_add(1, Ordering::SeqCst);
    axum::Json(json!({"ok": true, "waited_ms": wait_ms}))
}

/// The two services' URLs and the slow one's counters.
struct Services {
    slow_url: String,
    fast_url: String,
    holding: Arc<Holding>,
}

/// A loopback listener with a deep accept queue: the server opens up to
/// one connection per waiting Run at once, and tokio's default backlog
/// (1024) would drop SYNs and delay Runs by the retransmission time.
fn deep_listener() -> tokio::net::TcpListener {
    let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
    socket.set_reuseaddr(true).expect("SO_REUSEADDR");
    socket.bind("127.0.0.1:0".parse().expect("an address")).expect("a loopback port");
    socket.listen(8192).expect("the socket listens")
}

/// Starts `/slow` and `/fast` on one loopback listener of this process.
fn start_services(wait_ms: u64) -> Services {
    let holding = Arc::new(Holding::default());
    let slow = holding.clone();
    // The bodies are read (and ignored) so every connection stays reusable.
    let router = axum::Router::new()
        .route(
            "/slow",
            axum::routing::post(move |_body: axum::body::Bytes| {
                let holding = slow.clone();
                async move { hold(holding, wait_ms).await }
            }),
        )
        .route("/fast", axum::routing::post(|_body: axum::body::Bytes| async { axum::Json(json!({"ok": true})) }));
    let listener = deep_listener();
    let address = listener.local_addr().expect("the services' address");
    // Nagle's algorithm would hold small answers for the delayed ACK.
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, router).await });
    Services { slow_url: format!("http://{address}/slow"), fast_url: format!("http://{address}/fast"), holding }
}

// ---------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------

/// What the server's log showed.
#[derive(Default)]
struct Log {
    panics: Vec<String>,
    errors: u64,
    warnings: u64,
    error_samples: Vec<String>,
    tail: VecDeque<String>,
}

impl Log {
    /// Notes one stderr line: panics and ERROR lines are kept for the
    /// report, the last lines to explain a failed start.
    fn note(&mut self, line: String) {
        if line.contains("panicked") {
            self.panics.push(excerpt(&line));
        }
        if line.contains("ERROR") {
            self.errors += 1;
            if self.error_samples.len() < SAMPLES {
                self.error_samples.push(excerpt(&line));
            }
        }
        if line.contains("WARN") {
            self.warnings += 1;
        }
        if self.tail.len() == LOG_TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }
}

/// The server process and where it is reached.
struct Server {
    child: tokio::process::Child,
    pid: u32,
    base: String,
    mcp: String,
    log: Arc<Mutex<Log>>,
    reader: tokio::task::JoinHandle<()>,
}

/// A free loopback port: the development tokens' audience is the MCP URL,
/// so the port must be known before the server starts.
fn free_port() -> u16 {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    probe.local_addr().expect("its address").port()
}

/// The settings file: what the scenario needs, then the user's extra TOML.
/// Every key of ours is top-level (`egress.allow_private` is a dotted
/// key), so the appended text may start with keys or with a table.
fn settings_file(extra: &str) -> String {
    let mut text = String::from("max_connections = 8192\nrequest_timeout_ms = 120000\negress.allow_private = true\n");
    if !extra.trim().is_empty() {
        text.push_str(extra);
        text.push('\n');
    }
    text
}

/// Starts `pilotage serve` and waits for the line saying where MCP is
/// served; the log is then read to its end, so the server never blocks
/// on a full pipe.
async fn start_server(scenario: &Scenario, data_dir: &Path, port: u16) -> Result<Server, String> {
    std::fs::create_dir_all(data_dir).map_err(|e| format!("the data folder: {e}"))?;
    let config = data_dir.join("capacity.toml");
    std::fs::write(&config, settings_file(&scenario.extra_toml)).map_err(|e| format!("the settings file: {e}"))?;
    let mut child = tokio::process::Command::new(&scenario.binary)
        .arg("serve")
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--admin-token", ADMIN_TOKEN, "--demo-postgres", "off"])
        .arg("--config")
        .arg(&config)
        .args(&scenario.serve_args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{} does not start: {e}", scenario.binary.display()))?;
    let pid = child.id().ok_or("the server has no pid")?;
    let mut lines = tokio::io::BufReader::new(child.stderr.take().ok_or("no stderr pipe")?).lines();
    let log = Arc::new(Mutex::new(Log::default()));
    let started = Instant::now();
    let mcp = loop {
        let line = tokio::time::timeout(Duration::from_secs(180), lines.next_line()).await;
        match line {
            Ok(Ok(Some(line))) => {
                if let Some(url) = line.strip_prefix("Pilotage Platform: MCP at ") {
                    let url = url.trim().to_owned();
                    log.lock().expect("the log lock").note(line);
                    break url;
                }
                log.lock().expect("the log lock").note(line);
            }
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => {
                let tail: Vec<String> = log.lock().expect("the log lock").tail.iter().cloned().collect();
                return Err(format!(
                    "the server did not say where it listens within {:.0} s; its last lines:\n  {}",
                    started.elapsed().as_secs_f64(),
                    tail.join("\n  ")
                ));
            }
        }
    };
    let seen = log.clone();
    let reader = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.lock().expect("the log lock").note(line);
        }
    });
    Ok(Server { child, pid, base: format!("http://127.0.0.1:{port}"), mcp, log, reader })
}

/// Waits for `/readyz` to answer 200 (the store is migrated, the
/// Languages are loaded).
async fn ready(http: &reqwest::Client, base: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(response) = http.get(format!("{base}/readyz")).send().await
            && response.status() == 200
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("/readyz did not answer 200 within 60 s".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops the server with SIGTERM (it drains and exits), killing it after
/// 30 s, then lets the log reader take the last lines (a panic while
/// stopping counts too).
async fn stop_server(server: &mut Server) -> String {
    let signalled = std::process::Command::new("kill").args(["-TERM", &server.pid.to_string()]).status();
    let stopping = Instant::now();
    let status = match tokio::time::timeout(Duration::from_secs(30), server.child.wait()).await {
        Ok(Ok(status)) => format!("{status} after {:.1} s", stopping.elapsed().as_secs_f64()),
        Ok(Err(error)) => format!("unknown ({error})"),
        Err(_) => {
            let _ = server.child.start_kill();
            let _ = server.child.wait().await;
            format!("still running 30 s after SIGTERM ({signalled:?}); killed")
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), &mut server.reader).await;
    status
}

// ---------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------

/// The memory and threads of a process, from `/proc/PID/status`.
#[derive(Clone, Copy, Debug, Default)]
struct ProcStatus {
    rss_kib: u64,
    anon_kib: u64,
    threads: u64,
}

/// Reads `VmRSS`, `RssAnon` (the heap and stacks: what waiting Runs cost,
/// without the mapped binary) and `Threads` of `pid`.
fn proc_status(pid: u32) -> Option<ProcStatus> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|line| line.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some(ProcStatus { rss_kib: field("VmRSS:")?, anon_kib: field("RssAnon:")?, threads: field("Threads:")? })
}

// ---------------------------------------------------------------------------
// The admin API
// ---------------------------------------------------------------------------

/// An admin request's body.
enum AdminBody {
    Json(Value),
    Wasm(Vec<u8>),
}

/// One admin API request; its JSON answer, or what went wrong.
async fn admin(
    http: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: AdminBody,
) -> Result<Value, String> {
    let request = http.request(method.clone(), format!("{base}/admin/v1{path}")).bearer_auth(ADMIN_TOKEN);
    let request = match body {
        AdminBody::Json(value) => request.json(&value),
        AdminBody::Wasm(bytes) => request.header("content-type", "application/wasm").body(bytes),
    };
    let response = request.send().await.map_err(|e| format!("{method} {path}: {}", chain(&e)))?;
    let status = response.status();
    let text = response.text().await.map_err(|e| format!("{method} {path}: {}", chain(&e)))?;
    if !status.is_success() {
        return Err(format!("{method} {path}: HTTP {status}: {}", excerpt(&text)));
    }
    Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A catalog entry bound to one of the services: read-only, any object as
/// input.
fn entry(id: &str, url: &str, wait_ms: u64) -> Value {
    json!({
        "id": id,
        "kind": "capability",
        "name": id,
        "description": "A capability of the capacity scenario, served by the bench process.",
        "input_schema": {"type": "object"},
        "output_schema": {"type": "object", "properties": {"ok": {"type": "boolean"}, "waited_ms": {"type": "integer"}}},
        "risk": "safe",
        "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false},
        "tags": ["capacity"],
        // Beyond the wait, so the binding's own timeout is never what ends
        // a slow call (the platform caps it at its invocation timeout).
        "binding": {"url": url, "timeout_ms": wait_ms + 5_000}
    })
}

/// What every tenant's set-up shares.
struct Setup {
    http: reqwest::Client,
    base: String,
    component: Vec<u8>,
    entries: Vec<Value>,
    quotas: Option<Value>,
    tokens: pilotage_server::auth::dev::DevTokens,
    mcp: Arc<Mcp>,
}

/// Creates `tenant` with the component, the entries and the quotas, and
/// opens its MCP session.
async fn prepare_tenant(setup: &Setup, tenant: &str) -> Result<Session, String> {
    use reqwest::Method;
    let (http, base) = (&setup.http, setup.base.as_str());
    admin(http, base, Method::POST, "/tenants", AdminBody::Json(json!({"id": tenant}))).await?;
    let languages = format!("/tenants/{tenant}/languages");
    admin(http, base, Method::POST, &languages, AdminBody::Wasm(setup.component.clone())).await?;
    for entry in &setup.entries {
        let path = format!("/tenants/{tenant}/catalog/entries/{}", entry["id"].as_str().unwrap_or_default());
        admin(http, base, Method::PUT, &path, AdminBody::Json(entry.clone())).await?;
    }
    if let Some(quotas) = &setup.quotas {
        let body = AdminBody::Json(json!({"quotas": quotas}));
        admin(http, base, Method::PATCH, &format!("/tenants/{tenant}"), body).await?;
    }
    let token = setup.tokens.mint(tenant, "capacity", &[], 3_600).map_err(|e| format!("a token for {tenant}: {e}"))?;
    setup.mcp.open(token).await.map_err(|e| format!("{tenant}'s session: {e}"))
}

// ---------------------------------------------------------------------------
// MCP over HTTP
// ---------------------------------------------------------------------------

/// One tenant's MCP session.
struct Session {
    token: String,
    id: String,
}

/// The raw JSON-RPC client: every call shares one connection pool.
struct Mcp {
    http: reqwest::Client,
    url: String,
    next_id: AtomicU64,
    /// The Language the calls are in.
    dialect: Dialect,
}

impl Mcp {
    /// The next JSON-RPC id.
    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// POSTs one JSON-RPC message as the token's tenant (in `session` when
    /// some); the status, the session header and the body.
    async fn post(
        &self,
        token: &str,
        session: Option<&str>,
        body: String,
    ) -> Result<(u16, Option<String>, String), String> {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            // JSON only: the server then answers plain JSON, no event stream.
            .header("accept", "application/json")
            .body(body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session).header("mcp-protocol-version", PROTOCOL);
        }
        let response = request.send().await.map_err(|e| format!("transport: {}", chain(&e)))?;
        let status = response.status().as_u16();
        let session = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let text = response.text().await.map_err(|e| format!("transport (reading the answer): {}", chain(&e)))?;
        Ok((status, session, text))
    }

    /// Opens a session: `initialize`, then `notifications/initialized`.
    async fn open(&self, token: String) -> Result<Session, String> {
        let body = json!({"jsonrpc": "2.0", "id": self.id(), "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "pilotage-capacity", "version": "1"}}});
        let (status, session, text) = self.post(&token, None, body.to_string()).await?;
        if status != 200 {
            return Err(format!("initialize: HTTP {status}: {}", excerpt(&text)));
        }
        let id = session.ok_or_else(|| format!("initialize: no Mcp-Session-Id: {}", excerpt(&text)))?;
        let (status, _, text) = self.post(&token, Some(&id), INITIALIZED.to_owned()).await?;
        if status != 202 {
            return Err(format!("notifications/initialized: HTTP {status}: {}", excerpt(&text)));
        }
        Ok(Session { token, id })
    }

    /// Sends `ping` in `session`: what an agent's next message does to its
    /// session on the server.
    async fn ping(&self, session: &Session) -> Result<(), String> {
        let body = json!({"jsonrpc": "2.0", "id": self.id(), "method": "ping"});
        let (status, _, text) = self.post(&session.token, Some(&session.id), body.to_string()).await?;
        if status == 200 { Ok(()) } else { Err(format!("ping: HTTP {status}: {}", excerpt(&text))) }
    }

    /// Calls `tool`; the JSON-RPC result (it has `structuredContent`), or
    /// a failure's description.
    async fn call(&self, session: &Session, tool: &str, arguments: &Value) -> Result<Value, String> {
        let id = self.id();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}});
        let (status, _, text) = self.post(&session.token, Some(&session.id), body.to_string()).await?;
        if status != 200 {
            return Err(format!("HTTP {status}: {}", excerpt(&text)));
        }
        let mut answer: Value =
            serde_json::from_str(&text).map_err(|e| format!("not JSON ({e}): {}", excerpt(&text)))?;
        if let Some(error) = answer.get("error") {
            return Err(format!("JSON-RPC error {}: {}", error["code"], text_of(&error["message"])));
        }
        if answer["id"] != id {
            return Err(format!("the answer to id {id} has id {}", answer["id"]));
        }
        match answer.get_mut("result").map(Value::take) {
            Some(result) if result.get("structuredContent").is_some() => Ok(result),
            _ => Err(format!("no structuredContent: {}", excerpt(&text))),
        }
    }
}

// ---------------------------------------------------------------------------
// Programs and classes
// ---------------------------------------------------------------------------

/// One call to `cap_slow`: the Run waits on the slow service.
fn slow_program(dialect: Dialect) -> Value {
    if dialect == Dialect::Recipe {
        return json!({"steps": [{"id": "wait", "call": "cap_slow", "with": {"run": "$input.run"}}],
                      "output": {"waited_ms": "$wait.waited_ms"}});
    }
    json!({
        "steps": [{"id": "wait", "kind": "call", "capability": "cap_slow", "with": {"run": "$.input.run"}}],
        "output": {"waited_ms": "$.steps.wait.output.waited_ms"}
    })
}

/// One call to `cap_fast`; `nonce` (when some) is a string literal of the
/// call's input, so the text is new to the validation cache.
fn fast_program(dialect: Dialect, nonce: Option<u64>) -> Value {
    let with = nonce.map_or_else(|| json!({}), |n| json!({"nonce": format!("n{n}")}));
    if dialect == Dialect::Recipe {
        return json!({"steps": [{"id": "ping", "call": "cap_fast", "with": with}]});
    }
    json!({
        "steps": [{"id": "ping", "kind": "call", "capability": "cap_fast", "with": with}],
        "output": {"ok": "$.steps.ping.output.ok"}
    })
}

/// What one call came to.
enum Class {
    /// The validation is valid; the Run's outcome is ok.
    Ok,
    /// Refused by a tenant quota (its name).
    Quota(String),
    /// Refused for want of server capacity, with the retry hint.
    Capacity(u64),
    /// Anything else.
    Failure(String),
}

/// Classifies a request error (`isError: true`).
fn refusal(content: &Value) -> Class {
    let kind = content["error"]["kind"].as_str().unwrap_or("(no kind)");
    let message = content["error"]["message"].as_str().unwrap_or_default();
    if kind == "bounds_exceeded" && message.starts_with("quota ") {
        // "quota max_concurrent_runs (36) of tenant …" → the quota's name.
        let name = message.split(" (").next().unwrap_or(message);
        return Class::Quota(name.to_owned());
    }
    if kind == "bounds_exceeded"
        && let Some(retry) = content["retry_after_ms"].as_u64()
    {
        return Class::Capacity(retry);
    }
    Class::Failure(format!("request error {kind}: {}", excerpt(message)))
}

/// Classifies a `run_workflow` answer.
fn classify_run(answer: Result<Value, String>) -> Class {
    let result = match answer {
        Ok(result) => result,
        Err(failure) => return Class::Failure(failure),
    };
    let content = &result["structuredContent"];
    if result["isError"] == true {
        return refusal(content);
    }
    let outcome = &content["outcome"];
    if outcome["ok"] == true {
        return Class::Ok;
    }
    let status = outcome["status"].as_str().unwrap_or("(no status)");
    if status == "resource_exhausted"
        && let Some(retry) = content["retry_after_ms"].as_u64()
    {
        return Class::Capacity(retry);
    }
    Class::Failure(format!("outcome {status}: {}", excerpt(&text_of(&outcome["error"]))))
}

/// Classifies a `validate_workflow` answer: the program is valid.
fn classify_validation(answer: Result<Value, String>) -> Class {
    let result = match answer {
        Ok(result) => result,
        Err(failure) => return Class::Failure(failure),
    };
    let content = &result["structuredContent"];
    if result["isError"] == true {
        return refusal(content);
    }
    if content["valid"] == true {
        Class::Ok
    } else {
        Class::Failure(format!("valid {}: {}", content["valid"], excerpt(&content["diagnostics"].to_string())))
    }
}

/// The calls of one kind, by class, and the latency of the `ok` ones.
#[derive(Default)]
struct Tally {
    ok: u64,
    ok_micros: Vec<u64>,
    quota: BTreeMap<String, u64>,
    capacity_retry_ms: Vec<u64>,
    failures: u64,
    samples: Vec<String>,
}

impl Tally {
    /// Counts one call; refusals are not timed (they say nothing of how
    /// long the work takes).
    fn add(&mut self, class: Class, took: Duration) {
        match class {
            Class::Ok => {
                self.ok += 1;
                self.ok_micros.push(took.as_micros() as u64);
            }
            Class::Quota(name) => *self.quota.entry(name).or_default() += 1,
            Class::Capacity(retry) => self.capacity_retry_ms.push(retry),
            Class::Failure(message) => {
                self.failures += 1;
                if self.samples.len() < SAMPLES && !self.samples.contains(&message) {
                    self.samples.push(message);
                }
            }
        }
    }

    /// Calls refused by a quota.
    fn quota_total(&self) -> u64 {
        self.quota.values().sum()
    }

    /// All calls counted.
    fn calls(&self) -> u64 {
        self.ok + self.quota_total() + self.capacity_retry_ms.len() as u64 + self.failures
    }

    /// The `ok` latencies, sorted.
    fn sorted(&self) -> Vec<u64> {
        let mut sorted = self.ok_micros.clone();
        sorted.sort_unstable();
        sorted
    }

    /// One line: calls per class.
    fn classes(&self) -> String {
        format!(
            "ok {}, quota {}, capacity {}, failure {}",
            self.ok,
            self.quota_total(),
            self.capacity_retry_ms.len(),
            self.failures
        )
    }
}

// ---------------------------------------------------------------------------
// The quiet tenant
// ---------------------------------------------------------------------------

/// The quiet tenant's two operations.
#[derive(Clone, Copy)]
enum Op {
    /// An uncached validation.
    Validate,
    /// A Run of the fast program.
    Execute,
}

/// The quiet tenant's calls, by operation.
#[derive(Default)]
struct Quiet {
    validate: Tally,
    execute: Tally,
}

impl Quiet {
    /// Makes one call of `op` and counts it.
    async fn call(&mut self, mcp: &Mcp, session: &Session, op: Op) {
        let started = Instant::now();
        match op {
            Op::Validate => {
                let nonce = NONCE.fetch_add(1, Ordering::Relaxed);
                let dialect = mcp.dialect;
                let arguments = json!({dialect.argument(): fast_program(dialect, Some(nonce))});
                let class = classify_validation(mcp.call(session, dialect.validate_tool(), &arguments).await);
                self.validate.add(class, started.elapsed());
            }
            Op::Execute => {
                let dialect = mcp.dialect;
                let arguments = json!({dialect.argument(): fast_program(dialect, None), "input": {}, "store": false});
                let class = classify_run(mcp.call(session, dialect.run_tool(), &arguments).await);
                self.execute.add(class, started.elapsed());
            }
        }
    }

    /// Failed calls of either operation.
    fn failures(&self) -> u64 {
        self.validate.failures + self.execute.failures
    }
}

/// The idle baseline: `IDLE_CALLS` of each operation, alternating, one at
/// a time.
async fn quiet_idle(mcp: &Mcp, session: &Session) -> Quiet {
    let mut quiet = Quiet::default();
    for _ in 0..IDLE_CALLS {
        quiet.call(mcp, session, Op::Validate).await;
        quiet.call(mcp, session, Op::Execute).await;
    }
    quiet
}

/// Alternates the two operations until `done` (the burst's last answer).
async fn quiet_during(mcp: Arc<Mcp>, session: Arc<Session>, done: Arc<AtomicBool>) -> Quiet {
    let mut quiet = Quiet::default();
    let mut op = Op::Validate;
    while !done.load(Ordering::SeqCst) {
        quiet.call(&mcp, &session, op).await;
        op = match op {
            Op::Validate => Op::Execute,
            Op::Execute => Op::Validate,
        };
    }
    quiet
}

// ---------------------------------------------------------------------------
// The burst
// ---------------------------------------------------------------------------

/// The highest memory seen during the burst.
#[derive(Default)]
struct Peak {
    status: ProcStatus,
    /// Seconds after the release.
    at_secs: f64,
    /// Requests `/slow` held at that moment.
    held: u64,
    threads: u64,
    samples: u64,
}

/// Reads the server's memory every `SAMPLE_EVERY` until `done`.
async fn sample(pid: u32, holding: Arc<Holding>, done: Arc<AtomicBool>, released: Instant) -> Peak {
    let mut peak = Peak::default();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    loop {
        tick.tick().await;
        let finished = done.load(Ordering::SeqCst);
        if let Some(status) = proc_status(pid) {
            peak.samples += 1;
            peak.threads = peak.threads.max(status.threads);
            if status.rss_kib > peak.status.rss_kib {
                peak.status = status;
                peak.at_secs = released.elapsed().as_secs_f64();
                peak.held = holding.held.load(Ordering::SeqCst);
            }
        }
        if finished {
            return peak;
        }
    }
}

/// What the burst came to.
struct Burst {
    runs: Tally,
    quiet: Quiet,
    peak: Peak,
    /// From the release to the first and the last answer.
    first: Duration,
    last: Duration,
    /// When the last answer arrived.
    ended: Instant,
    warm_connections: usize,
    warm_failures: usize,
}

/// Opens `count` connections to the server before the burst (a cheap
/// `/healthz` each, all at once, so each needs its own connection): the
/// burst then measures how the server holds Runs, not its accept queue.
async fn prewarm(http: &reqwest::Client, base: &str, count: usize) -> usize {
    let url = format!("{base}/healthz");
    let answers = futures::future::join_all((0..count).map(|_| http.get(&url).send())).await;
    answers.iter().filter(|answer| !answer.as_ref().is_ok_and(|response| response.status().is_success())).count()
}

/// Sends every tenant's Runs of the slow program at once, with the quiet
/// tenant and the sampler alongside, until the last answer.
async fn burst(
    scenario: &Scenario,
    mcp: Arc<Mcp>,
    sessions: Vec<Arc<Session>>,
    quiet: Arc<Session>,
    services: &Services,
    server: &Server,
) -> Burst {
    let (go, gate) = tokio::sync::watch::channel(false);
    let mut calls = Vec::with_capacity(scenario.total());
    for session in &sessions {
        for run in 0..scenario.runs {
            let (mcp, session, mut gate) = (mcp.clone(), session.clone(), gate.clone());
            let dialect = scenario.dialect;
            let arguments = json!({dialect.argument(): slow_program(dialect), "input": {"run": run}, "store": false});
            calls.push(tokio::spawn(async move {
                // Every call is ready before any is sent: one release, no
                // ramp.
                let _ = gate.wait_for(|released| *released).await;
                let started = Instant::now();
                let class = classify_run(mcp.call(&session, dialect.run_tool(), &arguments).await);
                (class, started.elapsed(), Instant::now())
            }));
        }
    }
    // The calls, the quiet tenant and a few spare connections.
    let warm_connections = scenario.total() + 16;
    let warm_failures = prewarm(&mcp.http, &server.base, warm_connections).await;

    let done = Arc::new(AtomicBool::new(false));
    let released = Instant::now();
    go.send_replace(true);
    let sampler = tokio::spawn(sample(server.pid, services.holding.clone(), done.clone(), released));
    let quiet_task = tokio::spawn(quiet_during(mcp.clone(), quiet, done.clone()));

    let mut runs = Tally::default();
    let mut first: Option<Duration> = None;
    let mut ended = released;
    for call in calls {
        match call.await {
            Ok((class, took, at)) => {
                runs.add(class, took);
                let since = at.duration_since(released);
                first = Some(first.map_or(since, |first| first.min(since)));
                ended = ended.max(at);
            }
            Err(error) => runs.add(Class::Failure(format!("the call's task: {error}")), Duration::ZERO),
        }
    }
    done.store(true, Ordering::SeqCst);
    let quiet = quiet_task.await.expect("the quiet tenant's task ends");
    let peak = sampler.await.expect("the sampler's task ends");
    Burst {
        runs,
        quiet,
        peak,
        first: first.unwrap_or_default(),
        last: ended.duration_since(released),
        ended,
        warm_connections,
        warm_failures,
    }
}

// ---------------------------------------------------------------------------
// Figures
// ---------------------------------------------------------------------------

/// The `q` quantile of sorted micros (0 when empty).
fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// Micros as milliseconds.
fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

/// KiB as MiB.
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A JSON value as text: a string without its quotes.
fn text_of(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

/// The first `EXCERPT_CHARS` characters of `text`, on one line.
fn excerpt(text: &str) -> String {
    let mut cut: String = text.chars().take(EXCERPT_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut.replace('\n', " ")
}

/// An error with its causes (reqwest's own text rarely says why).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Prints the class counts of `tally`, with the refusals' details and the
/// failures' samples.
fn print_classes(indent: &str, tally: &Tally) {
    println!("{indent}ok        {:>7}", tally.ok);
    let by_quota: Vec<String> = tally.quota.iter().map(|(name, count)| format!("{name}: {count}")).collect();
    let by_quota = if by_quota.is_empty() { String::new() } else { format!("   ({})", by_quota.join(", ")) };
    println!("{indent}quota     {:>7}{by_quota}", tally.quota_total());
    let mut retry = tally.capacity_retry_ms.clone();
    retry.sort_unstable();
    let retry = if retry.is_empty() {
        String::new()
    } else {
        format!(
            "   retry_after_ms min {} / median {} / max {}",
            retry[0],
            percentile(&retry, 0.5),
            retry[retry.len() - 1]
        )
    };
    println!("{indent}capacity  {:>7}{retry}", tally.capacity_retry_ms.len());
    println!("{indent}failure   {:>7}", tally.failures);
    for sample in &tally.samples {
        println!("{indent}    e.g. {sample}");
    }
}

/// Prints one quiet operation: idle and during the burst, and the p99
/// ratio.
fn print_quiet(name: &str, idle: &Tally, during: &Tally) {
    let (idle_sorted, during_sorted) = (idle.sorted(), during.sorted());
    let (idle_p99, during_p99) = (percentile(&idle_sorted, 0.99), percentile(&during_sorted, 0.99));
    println!(
        "  {name:<8} idle   p50 {:>8.2} ms  p99 {:>8.2} ms   ({})",
        ms(percentile(&idle_sorted, 0.5)),
        ms(idle_p99),
        idle.classes()
    );
    println!(
        "  {name:<8} burst  p50 {:>8.2} ms  p99 {:>8.2} ms   ({})",
        ms(percentile(&during_sorted, 0.5)),
        ms(during_p99),
        during.classes()
    );
    if idle_p99 > 0 && during_p99 > 0 {
        println!("  {name:<8} p99 during ÷ idle: {:.2} (target ≤ 2)", during_p99 as f64 / idle_p99 as f64);
    } else {
        println!("  {name:<8} p99 during ÷ idle: n/a (no ok call in one phase)");
    }
    for (phase, tally) in [("idle", idle), ("burst", during)] {
        for sample in &tally.samples {
            println!("    {phase} failure e.g. {sample}");
        }
    }
}

/// Prints one `/proc` reading.
fn print_status(label: &str, status: Option<ProcStatus>, before: Option<ProcStatus>) {
    match status {
        Some(status) => {
            let ratio = before
                .filter(|before| before.rss_kib > 0)
                .map(|before| format!(" (× {:.2} of before)", status.rss_kib as f64 / before.rss_kib as f64))
                .unwrap_or_default();
            println!(
                "  {label:<10} VmRSS {:>8.1} MiB{ratio}, RssAnon {:>8.1} MiB, {} threads",
                mib(status.rss_kib),
                mib(status.anon_kib),
                status.threads
            );
        }
        None => println!("  {label:<10} (the server's /proc status is not readable)"),
    }
}

// ---------------------------------------------------------------------------
// The scenario
// ---------------------------------------------------------------------------

fn main() {
    let scenario = Scenario::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let clean = runtime.block_on(run(scenario));
    if !clean {
        std::process::exit(1);
    }
}

/// Runs the scenario in a fresh data folder; true when everything that
/// must hold held.
async fn run(scenario: Scenario) -> bool {
    pilotage_client::install_crypto_provider();
    let data_dir = std::env::temp_dir().join(format!("pilotage-capacity-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data_dir);
    let clean = match scenario_in(&scenario, &data_dir).await {
        Ok(clean) => clean,
        Err(error) => {
            println!("capacity: the scenario could not be set up: {error}");
            false
        }
    };
    let _ = std::fs::remove_dir_all(&data_dir);
    clean
}

/// Sets up, measures and reports; `Err` when the scenario cannot be set
/// up (the server stops on drop then).
async fn scenario_in(scenario: &Scenario, data_dir: &Path) -> Result<bool, String> {
    let services = start_services(scenario.wait_ms);
    let port = free_port();
    let mut server = start_server(scenario, data_dir, port).await?;
    // One pool for everything: the burst needs one connection per call in
    // flight, and they must all stay idle in the pool between uses.
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(scenario.total() + 64)
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| format!("the HTTP client: {e}"))?;
    ready(&http, &server.base).await?;
    println!(
        "capacity: {} tenants × {} Runs = {} Runs at once, /slow waits {} ms, quotas {}; server pid {} at {} ({})",
        scenario.tenants,
        scenario.runs,
        scenario.total(),
        scenario.wait_ms,
        if scenario.raise_quotas { "raised" } else { "default" },
        server.pid,
        server.mcp,
        scenario.binary.display()
    );
    let mcp = Arc::new(Mcp {
        http: http.clone(),
        url: server.mcp.clone(),
        next_id: AtomicU64::new(1),
        dialect: scenario.dialect,
    });
    let (quiet, sessions) = set_up_tenants(scenario, &server, &services, &mcp, data_dir, port).await?;

    // A few calls first, so the idle figures are not the first calls'
    // (compiled code and caches loaded, connections open); not timed, but
    // a failure still counts.
    let mut warm_up = Quiet::default();
    for _ in 0..WARM_UP_CALLS {
        warm_up.call(&mcp, &quiet, Op::Validate).await;
        warm_up.call(&mcp, &quiet, Op::Execute).await;
    }

    // Idle baseline.
    tokio::time::sleep(IDLE_WAIT).await;
    let before = proc_status(server.pid);
    let idle = quiet_idle(&mcp, &quiet).await;

    // Burst.
    let everyone: Vec<Arc<Session>> = std::iter::once(quiet.clone()).chain(sessions.iter().cloned()).collect();
    let burst = burst(scenario, mcp.clone(), sessions, quiet.clone(), &services, &server).await;

    // Settling; meanwhile, once, every session sends a `ping`: agents go on
    // talking, and the server drops a session's cached answers of
    // completed requests when the session next hears from its client.
    let touch = (scenario.touch_secs > 0).then(|| {
        let (mcp, at) = (mcp.clone(), burst.ended + Duration::from_secs(scenario.touch_secs));
        tokio::spawn(async move {
            tokio::time::sleep_until(at.into()).await;
            let pings = everyone.iter().map(|session| mcp.ping(session));
            futures::future::join_all(pings).await.into_iter().filter(Result::is_err).count()
        })
    });
    let mut settled = Vec::new();
    for point in scenario.settle_points() {
        tokio::time::sleep_until((burst.ended + Duration::from_secs(point)).into()).await;
        settled.push((point, proc_status(server.pid)));
    }
    if let Some(touch) = touch {
        let failed = touch.await.map_err(|e| format!("the pings' task: {e}"))?;
        if failed > 0 {
            return Err(format!("{failed} sessions' ping after the burst failed"));
        }
    }
    // The sessions end with the server; closing them one by one would
    // measure nothing.
    let stopped = stop_server(&mut server).await;
    let log = server.log.lock().expect("the log lock");
    let figures = Figures { warm_up, idle, before, burst, settled, stopped, log: &log };
    Ok(report(scenario, &services.holding, &figures))
}

/// Creates the quiet tenant and the burst's tenants through the admin API
/// and opens their sessions; the quiet one first, then the others.
async fn set_up_tenants(
    scenario: &Scenario,
    server: &Server,
    services: &Services,
    mcp: &Arc<Mcp>,
    data_dir: &Path,
    port: u16,
) -> Result<(Arc<Session>, Vec<Arc<Session>>), String> {
    // Development tokens name the MCP URL as their audience.
    let tokens = pilotage_server::auth::dev::DevTokens::load(data_dir, format!("http://127.0.0.1:{port}/mcp"))
        .map_err(|e| format!("the development secret: {e}"))?;
    let quotas = scenario
        .raise_quotas
        .then(|| json!({"max_concurrent_runs": scenario.runs + 10, "requests_per_second": 100_000}));
    let setup = Setup {
        http: mcp.http.clone(),
        base: server.base.clone(),
        component: scenario.component.clone(),
        entries: vec![
            entry("cap_slow", &services.slow_url, scenario.wait_ms),
            entry("cap_fast", &services.fast_url, scenario.wait_ms),
        ],
        quotas,
        tokens,
        mcp: mcp.clone(),
    };
    let setting_up = Instant::now();
    let quiet = Arc::new(prepare_tenant(&setup, QUIET).await?);
    let names: Vec<String> = (0..scenario.tenants).map(|n| format!("t{n}")).collect();
    let prepared: Vec<Result<Session, String>> =
        futures::stream::iter(names.iter().map(|name| prepare_tenant(&setup, name)))
            .buffer_unordered(SETUP_PARALLEL)
            .collect()
            .await;
    let sessions: Vec<Arc<Session>> =
        prepared.into_iter().map(|session| session.map(Arc::new)).collect::<Result<_, _>>()?;
    println!(
        "setup: {} tenants with the component, 2 entries and a session each in {:.1} s",
        sessions.len() + 1,
        setting_up.elapsed().as_secs_f64()
    );
    Ok((quiet, sessions))
}

/// Everything measured, for the report.
struct Figures<'a> {
    warm_up: Quiet,
    idle: Quiet,
    before: Option<ProcStatus>,
    burst: Burst,
    /// (seconds after the burst, the reading).
    settled: Vec<(u64, Option<ProcStatus>)>,
    /// How the server stopped.
    stopped: String,
    log: &'a Log,
}

/// Prints the figures; true when everything that must hold held.
fn report(scenario: &Scenario, holding: &Holding, figures: &Figures) -> bool {
    let Figures { warm_up, idle, before, burst, settled, stopped, log } = figures;
    let before = *before;
    println!(
        "\nburst: {} Runs answered, the first after {:.2} s, the last after {:.2} s ({} connections opened beforehand, {} failed)",
        burst.runs.calls(),
        burst.first.as_secs_f64(),
        burst.last.as_secs_f64(),
        burst.warm_connections,
        burst.warm_failures
    );
    print_classes("  ", &burst.runs);
    let ok_sorted = burst.runs.sorted();
    if !ok_sorted.is_empty() {
        println!(
            "  ok Runs' latency: p50 {:.2} s, max {:.2} s (the slow service waits {:.2} s)",
            ms(percentile(&ok_sorted, 0.5)) / 1000.0,
            ms(ok_sorted[ok_sorted.len() - 1]) / 1000.0,
            scenario.wait_ms as f64 / 1000.0
        );
    }
    let max_held = holding.max_held.load(Ordering::SeqCst);
    println!(
        "  /slow held at most {max_held} requests at once (the Runs really waiting); {} answered in all",
        holding.served.load(Ordering::SeqCst)
    );

    println!(
        "\nquiet tenant ({} idle calls, {} during the burst; latency of ok calls):",
        idle.validate.calls() + idle.execute.calls(),
        burst.quiet.validate.calls() + burst.quiet.execute.calls()
    );
    print_quiet("validate", &idle.validate, &burst.quiet.validate);
    print_quiet("execute", &idle.execute, &burst.quiet.execute);
    for sample in warm_up.validate.samples.iter().chain(&warm_up.execute.samples) {
        println!("    warm-up failure e.g. {sample}");
    }
    let quiet_failures = warm_up.failures() + idle.failures() + burst.quiet.failures();
    println!("  failures: {quiet_failures} (must be 0)");

    println!(
        "\nmemory (before: after {} s of quiet; {} samples every {} ms during the burst):",
        IDLE_WAIT.as_secs(),
        burst.peak.samples,
        SAMPLE_EVERY.as_millis()
    );
    print_status("before", before, None);
    println!(
        "  peak       VmRSS {:>8.1} MiB at +{:.1} s, RssAnon {:>8.1} MiB, {} Runs held at that moment",
        mib(burst.peak.status.rss_kib),
        burst.peak.at_secs,
        mib(burst.peak.status.anon_kib),
        burst.peak.held
    );
    match before {
        Some(before) if max_held > 0 => {
            // Signed: the peak can sit below a baseline taken before the
            // idle calls' allocations were returned.
            let growth = burst.peak.status.rss_kib as f64 - before.rss_kib as f64;
            println!(
                "  (peak − before) ÷ most Runs held: {:+.1} MiB ÷ {max_held} = {:+.0} KiB per waiting Run (target ≤ 1024)",
                growth / 1024.0,
                growth / max_held as f64
            );
        }
        _ => println!("  (peak − before) ÷ most Runs held: n/a"),
    }
    for (point, status) in settled {
        print_status(&format!("+{point} s"), *status, before);
    }
    println!("  (target: VmRSS ≤ 1.10 × before at +60 s)");
    let after = settled.last().and_then(|(_, status)| *status);
    println!(
        "  threads: before {}, peak {}, after {}",
        before.map_or_else(|| "?".to_owned(), |s| s.threads.to_string()),
        burst.peak.threads,
        after.map_or_else(|| "?".to_owned(), |s| s.threads.to_string())
    );

    println!(
        "\nserver: stopped with SIGTERM: {stopped}; log: {} lines with `panicked`, {} ERROR, {} WARN",
        log.panics.len(),
        log.errors,
        log.warnings
    );
    for line in log.panics.iter().take(SAMPLES) {
        println!("  {line}");
    }
    for line in &log.error_samples {
        println!("  {line}");
    }

    let mut broken = Vec::new();
    if quiet_failures > 0 {
        broken.push(format!("{quiet_failures} quiet-tenant calls failed"));
    }
    if burst.runs.failures > 0 {
        broken.push(format!("{} burst calls failed", burst.runs.failures));
    }
    if !log.panics.is_empty() {
        broken.push("the server panicked".to_owned());
    }
    if broken.is_empty() {
        println!("capacity: everything that must hold held");
    } else {
        println!("capacity: FAILED: {}", broken.join("; "));
    }
    broken.is_empty()
}
