//! Footprint benchmarks (issue: performance): what the platform costs while
//! it does nothing, per idle session and per tenant, and how long a node
//! with many tenants takes to become ready. Run with
//! `cargo bench --bench footprint`.
//!
//! Every figure is read off a real `pilotage serve` process (the binary
//! this benchmark is built with, `CARGO_BIN_EXE_pilotage`, so the release
//! build), started on loopback in a fresh data folder with the SQLite
//! store; resident memory is `VmRSS` of `/proc/PID/status`, sampled after
//! the process has settled (`PILOTAGE_FOOTPRINT_SETTLE_SECS`, default 5 s).
//!
//! - `idle, demo without PostgreSQL`: the embedded default (the demo
//!   tenant, the bundled Languages, the demo capability service) with
//!   `--demo-postgres off`;
//! - `idle, demo with PostgreSQL`: the same with the demo's sales database
//!   and sql/postgres-15 on the machine's PostgreSQL (skipped when
//!   127.0.0.1:5432 does not answer);
//! - `per idle session`: `PILOTAGE_FOOTPRINT_SESSIONS` (default 500) MCP
//!   sessions opened (initialize, initialized) and left open; the growth
//!   of RSS divided by their number;
//! - `tenants`: `PILOTAGE_FOOTPRINT_TENANTS` (default 10,000) tenants
//!   written to the store, each serving both bundled Languages (workflow/v1
//!   and sql/postgres-15, uploaded versions as an operator's upload makes
//!   them), no demo tenant. A node with one such tenant is started twice
//!   (the first start fills the compiled-code cache) and its RSS is the
//!   baseline; then the other tenants are written and the node started
//!   again: its time from spawn to ready (the line naming its MCP URL,
//!   printed once the tenants are loaded and the listener is bound) is the
//!   warm start-up figure, and its RSS above the baseline, divided by the
//!   added tenants, the cost per tenant.
//!
//! Clients and the server share the machine; the figures vary with it
//! (compare within one run).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pilotage_store::{LanguageRow, Store, TenantRow};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A `pilotage serve` child process and its MCP URL.
struct Serving {
    child: Child,
    url: String,
    started: Duration,
}

impl Serving {
    /// Starts the server with `args` (after `serve`) and waits for the line
    /// naming its MCP URL.
    fn start(data_dir: &Path, args: &[&str]) -> Serving {
        let began = Instant::now();
        let mut child = Command::new(pilotage_test_support::pilotage_binary())
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("pilotage serve starts");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr is piped")).lines();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("Pilotage Platform: MCP at ") {
                        break url.to_owned();
                    }
                }
                _ => panic!("pilotage serve exited before it was ready"),
            }
        };
        let started = began.elapsed();
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Serving { child, url, started }
    }

    /// Resident memory now, in bytes.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("the process lives");
        let kilobytes = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmRSS in /proc/PID/status");
        kilobytes * 1024
    }

    /// Resident memory once the process has settled.
    fn settled_rss(&self) -> u64 {
        std::thread::sleep(settle());
        self.rss()
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn settle() -> Duration {
    Duration::from_secs(env_number("PILOTAGE_FOOTPRINT_SETTLE_SECS", 5))
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn fresh_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pilotage-bench-footprint-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

fn postgres_answers() -> bool {
    std::net::TcpStream::connect_timeout(&"127.0.0.1:5432".parse().expect("an address"), Duration::from_secs(1)).is_ok()
}

/// Opens an MCP session (2025-11-25 handshake) and leaves it open.
async fn open_session(http: &reqwest::Client, url: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "pilotage-footprint", "version": "1.0"}}});
    let reply = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .expect("initialize is answered");
    assert!(reply.status().is_success(), "initialize: {}", reply.status());
    let session =
        reply.headers().get("mcp-session-id").and_then(|value| value.to_str().ok()).expect("a session id").to_owned();
    let _ = reply.bytes().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let reply = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&initialized)
        .send()
        .await
        .expect("initialized is accepted");
    assert!(reply.status().is_success(), "initialized: {}", reply.status());
    session
}

/// A settings file raising the session caps (64 per principal by default;
/// every session here is the same development principal's).
fn session_caps(dir: &Path, sessions: u64) -> String {
    let path = dir.join("footprint.toml");
    let caps = sessions.max(64);
    std::fs::write(&path, format!("max_sessions_per_principal = {caps}\nmax_sessions_per_tenant = {caps}\n"))
        .expect("the settings file is written");
    path.display().to_string()
}

fn idle(runtime: &tokio::runtime::Runtime) {
    let dir = fresh_dir("idle");
    let sessions = env_number("PILOTAGE_FOOTPRINT_SESSIONS", 500);
    let config = session_caps(&dir, sessions);
    let args = ["--demo-postgres", "off", "--config", config.as_str()];
    // The first start compiles the bundled Languages into the cache; the
    // figures are a warm start's, as on a node that has run before.
    Serving::start(&dir, &args).stop();
    let server = Serving::start(&dir, &args);
    let rss = server.settled_rss();
    println!(
        "idle, demo without PostgreSQL: RSS {:.1} MB (ready in {:.2} s)",
        megabytes(rss),
        server.started.as_secs_f64()
    );

    // Sessions on the same server.
    let before = server.rss();
    let opened = runtime.block_on(async {
        let http = reqwest::Client::new();
        let mut ids = Vec::new();
        for _ in 0..sessions {
            ids.push(open_session(&http, &server.url).await);
        }
        ids.len()
    });
    let after = server.settled_rss();
    println!(
        "per idle session: {opened} sessions, RSS {:.1} MB -> {:.1} MB = {:.1} KB each",
        megabytes(before),
        megabytes(after),
        (after.saturating_sub(before)) as f64 / opened as f64 / 1024.0
    );
    server.stop();

    if postgres_answers() {
        let dir = fresh_dir("idle-postgres");
        Serving::start(&dir, &[]).stop();
        let server = Serving::start(&dir, &[]);
        println!(
            "idle, demo with PostgreSQL: RSS {:.1} MB (ready in {:.2} s)",
            megabytes(server.settled_rss()),
            server.started.as_secs_f64()
        );
        server.stop();
        let _ = std::fs::remove_dir_all(dir);
    } else {
        println!("idle, demo with PostgreSQL: skipped (127.0.0.1:5432 does not answer)");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Writes `count` tenants serving both bundled Languages into the SQLite
/// store of `dir`, as the admin API's tenant creation and uploads do.
async fn write_tenants(dir: &Path, from: u64, count: u64) {
    let store =
        Store::connect(&format!("sqlite:{}", dir.join("pilotage.db").display())).await.expect("the store opens");
    store.migrate().await.expect("the store's tables exist");
    let bundled: Vec<(&str, &[u8], String)> =
        [("workflow/v1", pilotage_bundled::WORKFLOW), ("sql/postgres-15", pilotage_bundled::SQL)]
            .into_iter()
            .map(|(name, bytes)| (name, bytes, hex::encode(Sha256::digest(bytes))))
            .collect();
    for index in from..from + count {
        let id = format!("t{index:05}");
        let row = TenantRow {
            id: id.clone(),
            name: id.clone(),
            disabled: false,
            quotas: Value::Object(Default::default()).to_string(),
            egress: "{}".to_owned(),
            policy: "{}".to_owned(),
            issuers: "[]".to_owned(),
            created_at: 0,
        };
        store.tenant_insert(&row).await.expect("a tenant is stored");
        for (name, bytes, sha256) in &bundled {
            let language = LanguageRow {
                tenant: id.clone(),
                name: (*name).to_owned(),
                sha256: sha256.clone(),
                lint: "[]".to_owned(),
                active: true,
                uploaded_by: "footprint".to_owned(),
                created_at: 0,
            };
            store.language_insert(&language, bytes).await.expect("a Language is stored");
        }
    }
    drop(store);
}

fn tenants(runtime: &tokio::runtime::Runtime) {
    let count = env_number("PILOTAGE_FOOTPRINT_TENANTS", 10_000).max(2);
    let dir = fresh_dir("tenants");
    // The baseline: a node with one such tenant (the components loaded
    // once, as on any node serving them), warm.
    runtime.block_on(write_tenants(&dir, 0, 1));
    Serving::start(&dir, &["--demo=false"]).stop();
    let one = Serving::start(&dir, &["--demo=false"]);
    let baseline = one.settled_rss();
    one.stop();

    let began = Instant::now();
    runtime.block_on(write_tenants(&dir, 1, count - 1));
    println!("tenants: {} more written to the store in {:.1} s", count - 1, began.elapsed().as_secs_f64());
    let warm = Serving::start(&dir, &["--demo=false"]);
    let rss = warm.settled_rss();
    println!(
        "tenants: {count} tenants with both bundled Languages: ready in {:.2} s (warm code cache), \
         RSS {:.1} MB (one tenant: {:.1} MB) = {:.1} KB per additional tenant",
        warm.started.as_secs_f64(),
        megabytes(rss),
        megabytes(baseline),
        rss.saturating_sub(baseline) as f64 / (count - 1) as f64 / 1024.0
    );
    warm.stop();
    let _ = std::fs::remove_dir_all(dir);
}

fn main() {
    // `cargo bench` passes `--bench`; this benchmark takes no arguments.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    pilotage_client::install_crypto_provider();
    let only = std::env::var("PILOTAGE_FOOTPRINT_ONLY").unwrap_or_default();
    if only.is_empty() || only.contains("idle") {
        idle(&runtime);
    }
    if only.is_empty() || only.contains("tenants") {
        tenants(&runtime);
    }
}
