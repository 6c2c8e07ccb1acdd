//! Endpoint benchmarks (issue: MCP server). Run with
//! `cargo bench --bench endpoint`.
//!
//! Starts the real server on loopback the way the tests do
//! (`server::start`: SQLite in a fresh data folder, the demo tenant with its
//! capability service, development authentication, production bounds) and
//! speaks MCP over Streamable HTTP with the project's client
//! (`client::Connection`). Figures, all per call in µs (median, with
//! criterion's spread):
//!
//! - `endpoint/ping`: MCP `ping` (rmcp's client: `Connection` has no ping);
//! - `endpoint/manifest`: `pilotage_manifest`, the cheapest tool call;
//! - `endpoint/validate_10_step_uncached`: `validate_workflow` of the 10-step
//!   program of `workload/mod.rs`, a distinct program text on every call so
//!   the platform's validation cache never answers;
//! - `endpoint/validate_sql_3_join_uncached`: `validate_sql` of a 3-join
//!   query over the demo sales tables (sql/postgres-15, its data source on
//!   the machine's PostgreSQL; skipped when that is unreachable), a distinct
//!   text on every call;
//! - `endpoint/validate_10_step_cached`: the same program every call (the
//!   validation cache answers after the first);
//! - `endpoint/execute_10_step_3_http_unstored`: `run_workflow` of that
//!   program with `store: false` (validation answered by the cache, as after
//!   a validate), which makes three HTTP invocations of the demo capability
//!   service;
//! - `endpoint/execute_10_step_3_http`: the same with the retention default,
//!   so the Run record is stored (the stored-run count before and after is
//!   printed). The stored-bytes quota check reads one per-tenant total, so
//!   the cost must not grow with the runs kept: after the interleaved
//!   ratios, execute stored ÷ unstored is measured again once
//!   `PILOTAGE_BENCH_STORED_RUNS` (20,000) more runs are stored.
//!
//! Then where a single-client execute's time goes (`execute_breakdown`):
//! the platform's own histograms, on for that loop only, split the mean
//! execute into the server's handling, the `bind_input` and execution
//! component calls, and the three HTTP invocations inside the latter.
//!
//! The ratio figures (validate ÷ manifest, execute ÷ manifest) come from an
//! interleaved loop on the same server and connection, so every kind of
//! call sees the same conditions; min/p10/median/p90/max are printed.
//!
//! Load: 32 tasks, each with its own connection (its own MCP session),
//! loop `validate_workflow` for a fixed time (`PILOTAGE_BENCH_LOAD_SECS`,
//! default 10 s), uncached then cached; printed as calls/s and p50/p99/max
//! latency. The tenant's request quota (200/s by default) is raised for the
//! run, or it would cap the load. Clients and server share the machine.

/// The allocator the `pilotage` binary runs with (see its `main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod workload;

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;
use pilotage_client::{Connection, Reply};
use pilotage_server::settings::Settings;
use pilotage_server::start::Server;
use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, ClientRequest, Implementation, PingRequest};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

const CLIENTS: usize = 32;

/// Distinct program texts for uncached validations.
static NONCE: AtomicU64 = AtomicU64::new(1);

/// The 3-join query of the SQL figure (issue sql/postgres-15), over the
/// demo sales tables; a distinct comment per call keeps the validation
/// cache from answering (comments are parsed and dropped).
fn three_join_query() -> Value {
    let nonce = NONCE.fetch_add(1, Ordering::Relaxed);
    json!({"query": format!("/* {nonce} */ SELECT c.name, o.id, l.product, l.quantity * l.unit_price AS amount
FROM customers c
JOIN orders o ON o.customer_id = c.id
JOIN order_lines l ON l.order_id = o.id
WHERE c.country = $1 AND o.status <> 'cancelled'
ORDER BY amount DESC
LIMIT 10")})
}

fn next_program() -> Value {
    workload::ten_step_program(NONCE.fetch_add(1, Ordering::Relaxed))
}

async fn tool(connection: &Connection, name: &str, args: Value) -> Value {
    match connection.call(name, args).await {
        Ok(Reply::Result(value)) => value,
        Ok(Reply::RequestError(error)) => panic!("{name}: request error {error:?}"),
        Err(error) => panic!("{name}: {error}"),
    }
}

async fn ping(raw: &RunningService<rmcp::RoleClient, ClientConfig>) {
    raw.send_request(ClientRequest::PingRequest(PingRequest::default())).await.expect("ping is answered");
}

fn validate_args(program: Value) -> Value {
    json!({"workflow": program})
}

/// Execute arguments; `store: None` leaves the Run to the retention
/// default (stored), `Some(false)` asks for an unstored Run.
fn execute_args(store: Option<bool>) -> Value {
    let mut args = json!({"workflow": workload::ten_step_program(0), "input": workload::input()});
    if let Some(store) = store {
        args["store"] = json!(store);
    }
    args
}

async fn stored_runs(server: &Server) -> i64 {
    server.platform.store().runs_count().await.expect("the store answers")
}

async fn start_server() -> Server {
    let settings = Settings {
        listen: "127.0.0.1:0".parse().expect("an address"),
        data_dir: std::env::temp_dir().join(format!("pilotage-bench-endpoint-{}", std::process::id())),
        // The demo tenant with its sql/postgres-15 data source on the
        // machine's PostgreSQL when it answers (the SQL figure is skipped
        // otherwise); `PILOTAGE_BENCH_SQL=off` leaves it out.
        demo_postgres: match std::env::var("PILOTAGE_BENCH_SQL").as_deref() {
            Ok("off") => "off".to_owned(),
            _ => Settings::default().demo_postgres,
        },
        ..Settings::default()
    };
    workload::start_demo_server(settings).await
}

/// Checks the workload does what the figures claim: the program is valid,
/// and one execute succeeds with exactly three HTTP invocations.
async fn check_workload(server: &Server, connection: &Connection) {
    let validation = tool(connection, "validate_workflow", validate_args(workload::ten_step_program(0))).await;
    assert_eq!(validation["valid"], json!(true), "{validation}");
    assert_eq!(validation["plan"]["steps"].as_array().map(Vec::len), Some(workload::STEPS), "{validation}");
    let world = &server.demo_world.as_ref().expect("the demo capability service").1;
    let before: u64 = world.calls().values().sum();
    let execution = tool(connection, "run_workflow", execute_args(None)).await;
    assert_eq!(execution["outcome"]["ok"], json!(true), "{execution}");
    let after: u64 = world.calls().values().sum();
    assert_eq!(after - before, 3, "one execute makes three HTTP invocations");
}

/// Times `iterations` sequential calls of `call` on `runtime`.
fn timed<F, Fut>(bencher: &mut criterion::Bencher<'_>, runtime: &Runtime, call: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    bencher.iter_custom(|iterations| {
        runtime.block_on(async {
            let started = Instant::now();
            for _ in 0..iterations {
                call().await;
            }
            started.elapsed()
        })
    })
}

fn criterion_benches(
    criterion: &mut Criterion,
    runtime: &Runtime,
    server: &Server,
    connection: &Connection,
    raw: &RunningService<rmcp::RoleClient, ClientConfig>,
) {
    let mut group = criterion.benchmark_group("endpoint");
    group.bench_function("ping", |b| timed(b, runtime, || ping(raw)));
    group.bench_function("manifest", |b| {
        timed(b, runtime, || async {
            black_box(tool(connection, "pilotage_manifest", json!({})).await);
        })
    });
    group.bench_function("validate_10_step_uncached", |b| {
        timed(b, runtime, || async {
            black_box(tool(connection, "validate_workflow", validate_args(next_program())).await);
        })
    });
    let sql = runtime.block_on(connection.tools()).is_ok_and(|tools| tools.iter().any(|t| t.name == "validate_sql"));
    if sql {
        let first = runtime.block_on(tool(connection, "validate_sql", three_join_query()));
        assert_eq!(first["valid"], json!(true), "{first}");
        group.bench_function("validate_sql_3_join_uncached", |b| {
            timed(b, runtime, || async {
                black_box(tool(connection, "validate_sql", three_join_query()).await);
            })
        });
    } else {
        eprintln!(
            "validate_sql_3_join_uncached skipped: the demo tenant has no sql/postgres-15 (PostgreSQL unreachable?)"
        );
    }
    group.bench_function("validate_10_step_cached", |b| {
        timed(b, runtime, || async {
            black_box(tool(connection, "validate_workflow", validate_args(workload::ten_step_program(0))).await);
        })
    });
    group.bench_function("execute_10_step_3_http_unstored", |b| {
        timed(b, runtime, || async {
            black_box(tool(connection, "run_workflow", execute_args(Some(false))).await);
        })
    });
    let before = runtime.block_on(stored_runs(server));
    group.bench_function("execute_10_step_3_http", |b| {
        timed(b, runtime, || async {
            black_box(tool(connection, "run_workflow", execute_args(None)).await);
        })
    });
    group.finish();
    println!(
        "stored runs of the tenant: {before} before endpoint/execute_10_step_3_http, {} after",
        runtime.block_on(stored_runs(server))
    );
}

/// min, p10, p50, p90, p99, max of `samples` (sorted in place).
fn spread(samples: &mut [Duration]) -> [Duration; 6] {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    [samples[0], at(0.10), at(0.50), at(0.90), at(0.99), samples[samples.len() - 1]]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

async fn interleaved_ratios(
    server: &Server,
    connection: &Connection,
    raw: &RunningService<rmcp::RoleClient, ClientConfig>,
) {
    const ROUNDS: usize = 400;
    let mut samples: [Vec<Duration>; 6] = Default::default();
    let names = ["ping", "manifest", "validate_uncached", "validate_cached", "execute_unstored", "execute_stored"];
    let runs_before = stored_runs(server).await;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        ping(raw).await;
        samples[0].push(started.elapsed());
        let started = Instant::now();
        black_box(tool(connection, "pilotage_manifest", json!({})).await);
        samples[1].push(started.elapsed());
        let started = Instant::now();
        black_box(tool(connection, "validate_workflow", validate_args(next_program())).await);
        samples[2].push(started.elapsed());
        let started = Instant::now();
        black_box(tool(connection, "validate_workflow", validate_args(workload::ten_step_program(0))).await);
        samples[3].push(started.elapsed());
        let started = Instant::now();
        black_box(tool(connection, "run_workflow", execute_args(Some(false))).await);
        samples[4].push(started.elapsed());
        let started = Instant::now();
        black_box(tool(connection, "run_workflow", execute_args(None)).await);
        samples[5].push(started.elapsed());
    }
    println!(
        "interleaved, {ROUNDS} rounds (stored runs of the tenant {runs_before} -> {}), µs: min / p10 / median / p90 / max",
        stored_runs(server).await
    );
    let mut medians = [0.0; 6];
    for (index, name) in names.iter().enumerate() {
        let [min, p10, p50, p90, _, max] = spread(&mut samples[index]);
        medians[index] = micros(p50);
        println!(
            "  {name:<18} {:>8.1} / {:>8.1} / {:>8.1} / {:>8.1} / {:>8.1}",
            micros(min),
            micros(p10),
            micros(p50),
            micros(p90),
            micros(max)
        );
    }
    println!(
        "ratios of medians: validate_uncached/manifest = {:.2}, validate_cached/manifest = {:.2}, \
         execute_unstored/manifest = {:.2}, execute_stored/manifest = {:.2}, manifest/ping = {:.2}",
        medians[2] / medians[1],
        medians[3] / medians[1],
        medians[4] / medians[1],
        medians[5] / medians[1],
        medians[1] / medians[0]
    );
}

/// The sum and count of the Prometheus histogram `name` over the series
/// whose labels contain every one of `labels` (`key="value"`), read from
/// the platform's exposition text.
fn histogram(text: &str, name: &str, labels: &[&str]) -> (f64, f64) {
    let read = |suffix: &str| -> f64 {
        let series = format!("{name}_{suffix}");
        text.lines()
            .filter(|line| line.starts_with(&series))
            .filter(|line| labels.iter().all(|label| line.contains(label)))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (read("sum"), read("count"))
}

/// Where one single-client execute's time goes: `CALLS` unstored executes
/// (validation answered by the cache), with the platform's own metrics on
/// for the loop only, which time every MCP request, component call and
/// invocation where it happens. Printed as means per execute, in µs:
/// what the client waited, the server's handling of the request, the
/// `bind_input` call (a validation-kind component call, the only one when
/// the cache answers), the execution call and, inside it, the three HTTP
/// invocations; the rest of the server's time is the platform's own code
/// and the hand-offs to the blocking threads the component calls run on.
async fn execute_breakdown(server: &Server, connection: &Connection) {
    const CALLS: usize = 400;
    let metrics = server.platform.engine().metrics();
    metrics.set_enabled(true);
    let before = metrics.encode();
    let started = Instant::now();
    for _ in 0..CALLS {
        black_box(tool(connection, "run_workflow", execute_args(Some(false))).await);
    }
    let waited = started.elapsed();
    let after = metrics.encode();
    metrics.set_enabled(false);
    let per_execute = |name: &str, labels: &[&str]| {
        let (sum_before, count_before) = histogram(&before, name, labels);
        let (sum_after, count_after) = histogram(&after, name, labels);
        ((sum_after - sum_before) * 1e6 / CALLS as f64, (count_after - count_before) / CALLS as f64)
    };
    let (request, requests) = per_execute("pilotage_mcp_request_duration_seconds", &["tool=\"run_workflow\""]);
    let (bind, binds) = per_execute("pilotage_wasm_call_duration_seconds", &["call=\"validation\""]);
    let (execution, executions) = per_execute("pilotage_wasm_call_duration_seconds", &["call=\"execution\""]);
    let (invocations, invoked) = per_execute("pilotage_invocation_duration_seconds", &[]);
    let client = micros(waited) / CALLS as f64;
    println!(
        "execute unstored, single client, means of {CALLS} in µs: client {client:.0}; server request {request:.0} \
         ({requests:.1} a call); bind_input call {bind:.0} ({binds:.1}); execution call {execution:.0} ({executions:.1}), \
         of which invocations {invocations:.0} ({invoked:.1}, {:.0} each) and the rest {:.0}; the platform's own code and \
         the hand-offs {:.0}; the client and transport {:.0}",
        invocations / invoked.max(1.0),
        execution - invocations,
        request - bind - execution,
        client - request
    );
}

/// Adds `count` stored runs to the demo tenant (records of about 2 KB,
/// written through the store as a retained execute writes them).
async fn add_stored_runs(server: &Server, count: usize) {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_millis() as i64;
    let record = json!({"run_id": "filler", "outcome": {"ok": true, "status": "success", "error": null},
                        "output": {"text": "x".repeat(2_000)}, "trace": {"steps": []}})
    .to_string();
    for index in 0..count {
        let row = pilotage_store::RunRow {
            run_id: format!("filler-{}-{index}", std::process::id()),
            tenant: "demo".to_owned(),
            issuer: String::new(),
            subject: "filler".to_owned(),
            language: "workflow/v1".to_owned(),
            session_id: None,
            recorded_level: "full".to_owned(),
            record: record.clone(),
            status: "success".to_owned(),
            created_at: now,
            expires_at: Some(now + 3_600_000),
        };
        server.platform.store().run_insert(&row).await.expect("a run is stored");
    }
}

/// Execute stored ÷ execute unstored, interleaved, at the tenant's current
/// number of stored runs and again after `PILOTAGE_BENCH_STORED_RUNS`
/// (default 20,000) more: the stored-bytes quota check must not grow with
/// the runs a tenant keeps (issue: performance).
async fn stored_ratio_by_runs(server: &Server, connection: &Connection) {
    const ROUNDS: usize = 200;
    let more = std::env::var("PILOTAGE_BENCH_STORED_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    for pass in 0..2 {
        if pass == 1 {
            add_stored_runs(server, more).await;
        }
        let runs = stored_runs(server).await;
        let mut unstored = Vec::with_capacity(ROUNDS);
        let mut stored = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let started = Instant::now();
            black_box(tool(connection, "run_workflow", execute_args(Some(false))).await);
            unstored.push(started.elapsed());
            let started = Instant::now();
            black_box(tool(connection, "run_workflow", execute_args(None)).await);
            stored.push(started.elapsed());
        }
        let unstored = spread(&mut unstored)[2];
        let stored = spread(&mut stored)[2];
        println!(
            "execute at {runs} stored runs, medians: unstored {:.1} µs, stored {:.1} µs, stored/unstored = {:.2}",
            micros(unstored),
            micros(stored),
            stored.as_secs_f64() / unstored.as_secs_f64()
        );
    }
}

async fn load(url: &str, duration: Duration, uncached: bool) {
    let mut connections = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        connections.push(Arc::new(Connection::http(url, None).await.expect("connects")));
    }
    let start_line = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(CLIENTS);
    for connection in &connections {
        let connection = connection.clone();
        let start_line = start_line.clone();
        let errors = errors.clone();
        tasks.push(tokio::spawn(async move {
            start_line.wait().await;
            let began = Instant::now();
            let mut latencies = Vec::new();
            while began.elapsed() < duration {
                let program = if uncached { next_program() } else { workload::ten_step_program(0) };
                let started = Instant::now();
                let answer = connection.call("validate_workflow", validate_args(program)).await;
                latencies.push(started.elapsed());
                match answer {
                    Ok(Reply::Result(value)) if value["valid"] == json!(true) => {}
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            (latencies, began.elapsed())
        }));
    }
    let mut all = Vec::new();
    let mut longest = Duration::ZERO;
    for task in tasks {
        let (latencies, elapsed) = task.await.expect("a load task");
        all.extend(latencies);
        longest = longest.max(elapsed);
    }
    for connection in connections {
        if let Ok(connection) = Arc::try_unwrap(connection) {
            connection.close().await;
        }
    }
    let calls = all.len();
    let [_, _, p50, _, p99, max] = spread(&mut all);
    println!(
        "load, {CLIENTS} clients, validate {}: {calls} calls in {:.2} s = {:.0} calls/s; latency p50 {:.0} µs, \
         p99 {:.0} µs, max {:.0} µs; errors {}",
        if uncached { "uncached" } else { "cached" },
        longest.as_secs_f64(),
        calls as f64 / longest.as_secs_f64(),
        micros(p50),
        micros(p99),
        micros(max),
        errors.load(Ordering::Relaxed)
    );
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let server = runtime.block_on(start_server());
    let url = server.mcp_url();
    let connection = runtime.block_on(Connection::http(&url, None)).expect("connects");
    let raw = runtime.block_on(async {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("pilotage-bench", "1.0"))
            .serve(StreamableHttpClientTransport::from_uri(url.clone()))
            .await
            .expect("the rmcp client connects")
    });
    runtime.block_on(check_workload(&server, &connection));

    criterion_benches(&mut criterion, &runtime, &server, &connection, &raw);
    runtime.block_on(interleaved_ratios(&server, &connection, &raw));
    runtime.block_on(execute_breakdown(&server, &connection));
    runtime.block_on(stored_ratio_by_runs(&server, &connection));
    let seconds = std::env::var("PILOTAGE_BENCH_LOAD_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    runtime.block_on(load(&url, Duration::from_secs(seconds), true));
    runtime.block_on(load(&url, Duration::from_secs(seconds), false));

    runtime.block_on(async {
        connection.close().await;
        let _ = raw.cancel().await;
    });
    let data_dir = std::env::temp_dir().join(format!("pilotage-bench-endpoint-{}", std::process::id()));
    runtime.block_on(server.stop());
    let _ = std::fs::remove_dir_all(data_dir);
    criterion.final_summary();
}
