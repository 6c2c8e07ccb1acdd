//! Deployment runtime figures (issue 14). Run with
//! `cargo bench --bench deployments`; about a minute.
//!
//! The real server runs in-process as in the endpoint benchmark
//! (`server::start`: SQLite in a fresh data folder, the demo tenant,
//! development authentication on loopback, no demo PostgreSQL), with the
//! demo tenant's quotas raised so `max_firings_per_minute` never drops a
//! firing. deployer/v1 (`test-programs/deployer`) is uploaded through the
//! admin API and deploys programs whose one step calls `cap_record`, a
//! capability served by this process: it timestamps each invocation on
//! arrival (monotonic clock and wall clock) and hands it to the driver.
//! Printed, one line each:
//!
//! 1. `webhook`: a signed `POST /events/demo/bench` sent → the firing's
//!    invocation reaching `cap_record`, p50/p99/max over
//!    `PILOTAGE_BENCH_DELIVERIES` (default 200) sequential deliveries on
//!    loopback (each waited for before the next; the 202 answer's own
//!    latency is printed too);
//! 2. `mqtt`: a QoS 1 publish on the broker of `PILOTAGE_BENCH_MQTT`
//!    (default `mqtt://127.0.0.1:1883`, the machine's mosquitto) → the
//!    invocation, over as many messages (skipped, saying why, when the
//!    broker does not answer);
//! 3. `schedule`: for a `* * * * * *` UTC schedule, how long after its due
//!    second each firing's invocation arrives (wall clock), over
//!    `PILOTAGE_BENCH_TICKS` (default 30) ticks;
//! 4. `deployments_due`: the time of `Store::deployments_due` (the
//!    scheduler's read) with 10,000 deployments in one tenant of which 1,
//!    10, 100, 1,000 and all are due, on SQLite and on PostgreSQL
//!    (`PILOTAGE_TEST_POSTGRES`, default the machine's; skipped when it
//!    does not answer), median and p99 of 50 reads, beside a read of all
//!    10,000 rows for scale and 10 due among 1,000 installed; and each
//!    backend's query plan (`EXPLAIN`),
//!    which must use the `deployments_due` index on `next_due`
//!    (PostgreSQL's generic plan too: the store's statements are prepared).
//!
//! These are figures, not assertions: a run fails only when something does
//! not work (an invocation that never arrives, a refused delivery).

use std::time::{Duration, Instant};

use axum::Json;
use pilotage_server::settings::Settings;
use pilotage_server::start::{Server, start};
use pilotage_server::tenancy::Quotas;
use pilotage_store::{DeploymentRow, Store};
use serde_json::{Value, json};
use tokio::sync::mpsc;

mod pg_schema;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ADMIN_TOKEN: &str = "bench-deployments-operator";
const DEPLOYER: &str = "deployer/v1";
const WEBHOOK_KEY: &str = "bench-webhook-signing-key";

/// How many deployments `deployments_due` is timed among.
const INSTALLED: i64 = 10_000;

/// Reads timed per figure of `deployments_due`.
const READS: usize = 50;

/// One invocation of `cap_record`: its input and when it arrived.
struct Arrival {
    input: Value,
    at: Instant,
    wall_ms: i64,
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    runtime.block_on(run());
}

async fn run() {
    pilotage_client::install_crypto_provider();
    let deliveries = env_number("PILOTAGE_BENCH_DELIVERIES", 200);
    let ticks = env_number("PILOTAGE_BENCH_TICKS", 30);
    let (record_url, mut arrivals) = recording_service().await;
    let server = start_server().await;
    let base = format!("http://{}", server.addr);
    install(&base, &record_url).await;
    println!("deployments bench: in-process server on SQLite, loopback; latencies in ms");

    webhook(&server, &base, &mut arrivals, deliveries).await;
    mqtt(&server, &mut arrivals, deliveries).await;
    schedule(&server, &mut arrivals, ticks).await;
    server.stop().await;
    let _ = std::fs::remove_dir_all(data_dir());

    due_cost().await;
}

// ---------------------------------------------------------------------------
// The server, the recording capability and the deployments
// ---------------------------------------------------------------------------

fn data_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("pilotage-bench-deployments-{}", std::process::id()))
}

async fn start_server() -> Server {
    let data_dir = data_dir();
    let _ = std::fs::remove_dir_all(&data_dir);
    let settings = Settings {
        listen: "127.0.0.1:0".parse().expect("an address"),
        data_dir,
        demo_postgres: "off".to_owned(),
        admin_token: Some(ADMIN_TOKEN.to_owned()),
        ..Settings::default()
    };
    let mut settings = settings;
    // A bench server's Runs' pool: small, whatever the node (4 GiB of
    // address space per slot; docs/architecture.md, "Capacity").
    if settings.capacity.run_instances == 0 {
        settings.capacity.run_instances = 512;
    }
    let server = start(settings, &pilotage_bundled::ALL).await.expect("the server starts");
    let tenant = server.platform.tenant("demo").expect("the demo tenant");
    tenant.set_quotas(Quotas {
        requests_per_second: 1_000_000,
        max_firings_per_minute: 1_000_000,
        max_concurrent_runs: 256,
        ..Quotas::default()
    });
    server
}

/// `cap_record`: answers at once and sends each invocation to the driver.
async fn recording_service() -> (String, mpsc::UnboundedReceiver<Arrival>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let router = axum::Router::new().route(
        "/record",
        axum::routing::post(move |Json(input): Json<Value>| {
            let arrival = Arrival { input, at: Instant::now(), wall_ms: pilotage_engine::clock::system_now_ms() };
            let _ = sender.send(arrival);
            async { Json(json!({"recorded": true})) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let url = format!("http://{}/record", listener.local_addr().expect("its address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, receiver)
}

async fn admin(base: &str, method: reqwest::Method, path: &str, body: Value) {
    let response = reqwest::Client::new()
        .request(method, format!("{base}/admin/v1{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .expect("the admin API answers");
    assert!(
        response.status().is_success(),
        "{path}: {} {}",
        response.status(),
        response.text().await.unwrap_or_default()
    );
}

/// deployer/v1, `cap_record` and the trigger sources' secrets, through the
/// admin API.
async fn install(base: &str, record_url: &str) {
    let deployer = pilotage_test_support::DEPLOYER.to_vec();
    let response = reqwest::Client::new()
        .post(format!("{base}/admin/v1/tenants/demo/languages"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/wasm")
        .body(deployer)
        .send()
        .await
        .expect("the admin API answers");
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap_or_default());
    let record = json!({"id": "cap_record", "kind": "capability", "name": "cap_record",
        "description": "Records that a deployment fired.", "input_schema": {"type": "object"}, "risk": "write",
        "risk_hints": {"readOnly": false, "destructive": false, "openWorld": false},
        "binding": {"url": record_url, "timeout_ms": 5000}});
    admin(base, reqwest::Method::POST, "/tenants/demo/catalog/apply", json!({"entries": [record]})).await;
    admin(base, reqwest::Method::PUT, "/tenants/demo/secrets/webhook:bench", json!({"value": WEBHOOK_KEY})).await;
    admin(
        base,
        reqwest::Method::PUT,
        "/tenants/demo/secrets/mqtt:bench",
        json!({"value": json!({"url": mqtt_url()}).to_string()}),
    )
    .await;
}

fn mqtt_url() -> String {
    std::env::var("PILOTAGE_BENCH_MQTT").unwrap_or_else(|_| "mqtt://127.0.0.1:1883".to_owned())
}

/// Deploys a deployer/v1 program named `name` with `triggers`, its one step
/// calling `cap_record`.
async fn deploy(server: &Server, name: &str, triggers: Value) {
    let connection = pilotage_client::Connection::http(&server.mcp_url(), None).await.expect("a connection");
    let client = pilotage_client::PilotageClient::discover(connection).await.expect("the manifest");
    let program = json!({"name": name, "steps": [{"id": "record", "calls": "cap_record"}], "triggers": triggers});
    let deployed =
        client.execute_raw(DEPLOYER, json!({"program": program, "mode": "deploy"})).await.expect("an answer");
    assert!(deployed.outcome.ok, "{name}: {:?}", deployed.outcome);
    client.close().await;
}

/// The next invocation whose event satisfies `wanted` (others, late ones of
/// an earlier phase, are dropped), within 10 s.
async fn next_arrival(arrivals: &mut mpsc::UnboundedReceiver<Arrival>, wanted: impl Fn(&Value) -> bool) -> Arrival {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let arrival = tokio::time::timeout_at(deadline, arrivals.recv())
            .await
            .expect("the firing's invocation arrives within 10 s")
            .expect("the recording service runs");
        if wanted(&arrival.input["input"]["event"]) {
            return arrival;
        }
    }
}

/// p50, p99 and max of `samples` (ms), as a line.
fn summary(samples: &mut [f64]) -> String {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    format!("p50 {:>7.2}  p99 {:>7.2}  max {:>7.2}  (n={})", at(0.5), at(0.99), at(1.0), samples.len())
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

// ---------------------------------------------------------------------------
// 1. Webhook delivery → first invocation
// ---------------------------------------------------------------------------

async fn webhook(server: &Server, base: &str, arrivals: &mut mpsc::UnboundedReceiver<Arrival>, count: usize) {
    deploy(server, "bench-webhook", json!([{"webhook": "bench"}])).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/events/demo/bench");
    let mut to_invocation = Vec::new();
    let mut to_answer = Vec::new();
    // Five unmeasured deliveries warm the connection and the caches.
    for n in 0..count + 5 {
        let body = json!({"n": n}).to_string();
        let timestamp = pilotage_engine::clock::system_now_ms() / 1000;
        let signature = pilotage_server::deploy::webhook::sign(WEBHOOK_KEY.as_bytes(), timestamp, body.as_bytes());
        let sent = Instant::now();
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .header(pilotage_server::deploy::webhook::TIMESTAMP_HEADER, timestamp.to_string())
            .header(pilotage_server::deploy::webhook::SIGNATURE_HEADER, signature)
            .body(body)
            .send()
            .await
            .expect("the event endpoint answers");
        let answered = sent.elapsed();
        assert_eq!(response.status(), 202, "{}", response.text().await.unwrap_or_default());
        let arrival = next_arrival(arrivals, |event| event["n"] == json!(n)).await;
        if n >= 5 {
            to_answer.push(ms(answered));
            to_invocation.push(ms(arrival.at - sent));
        }
    }
    println!("webhook   sent → 202 answer           {}", summary(&mut to_answer));
    println!("webhook   sent → first invocation     {}", summary(&mut to_invocation));
}

// ---------------------------------------------------------------------------
// 2. MQTT publish → first invocation
// ---------------------------------------------------------------------------

async fn mqtt(server: &Server, arrivals: &mut mpsc::UnboundedReceiver<Arrival>, count: usize) {
    let url = mqtt_url();
    let topic_root = format!("pilotage-bench/{}", std::process::id());
    let mut options =
        match rumqttc::MqttOptions::parse_url(format!("{url}?client_id=pilotage-bench-{}", std::process::id())) {
            Ok(options) => options,
            Err(error) => {
                println!("mqtt      skipped: {url} is not an MQTT URL: {error}");
                return;
            }
        };
    options.set_keep_alive(Duration::from_secs(30));
    let (publisher, mut events) = rumqttc::AsyncClient::new(options, 64);
    let (connected_tx, connected_rx) = tokio::sync::oneshot::channel();
    let poller = tokio::spawn(async move {
        let mut connected = Some(connected_tx);
        loop {
            match events.poll().await {
                Ok(rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(_))) => {
                    if let Some(connected) = connected.take() {
                        let _ = connected.send(Ok(()));
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    if let Some(connected) = connected.take() {
                        let _ = connected.send(Err(error.to_string()));
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    });
    match tokio::time::timeout(Duration::from_secs(5), connected_rx).await {
        Ok(Ok(Ok(()))) => {}
        other => {
            println!("mqtt      skipped: the broker at {url} does not answer: {other:?}");
            poller.abort();
            return;
        }
    }
    deploy(server, "bench-mqtt", json!([{"mqtt": {"broker": "bench", "topic": format!("{topic_root}/+")}}])).await;
    // Subscribed when a message comes through (the platform subscribes
    // after the deploy; its SUBACK is not visible from here).
    let topic = format!("{topic_root}/sensor");
    let ready = Instant::now() + Duration::from_secs(10);
    'subscribed: loop {
        assert!(Instant::now() < ready, "the platform did not subscribe to {topic_root}/+ within 10 s");
        publisher
            .publish(&topic, rumqttc::QoS::AtLeastOnce, false, json!({"probe": true}).to_string())
            .await
            .expect("published");
        let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
        while let Ok(Some(arrival)) = tokio::time::timeout_at(deadline, arrivals.recv()).await {
            if arrival.input["input"]["event"]["payload"]["probe"] == json!(true) {
                break 'subscribed;
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    while arrivals.try_recv().is_ok() {}
    let mut to_invocation = Vec::new();
    for n in 0..count + 5 {
        let sent = Instant::now();
        publisher
            .publish(&topic, rumqttc::QoS::AtLeastOnce, false, json!({"n": n}).to_string())
            .await
            .expect("published");
        let arrival = next_arrival(arrivals, |event| event["payload"]["n"] == json!(n)).await;
        if n >= 5 {
            to_invocation.push(ms(arrival.at - sent));
        }
    }
    println!("mqtt      publish → first invocation  {}", summary(&mut to_invocation));
    let _ = publisher.disconnect().await;
    poller.abort();
}

// ---------------------------------------------------------------------------
// 3. Schedule precision
// ---------------------------------------------------------------------------

async fn schedule(server: &Server, arrivals: &mut mpsc::UnboundedReceiver<Arrival>, ticks: usize) {
    while arrivals.try_recv().is_ok() {}
    deploy(server, "bench-schedule", json!([{"schedule": {"cron": "* * * * * *", "time_zone": "UTC"}}])).await;
    let mut after_due = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    while after_due.len() < ticks {
        let arrival = next_arrival(arrivals, |event| event["due"].is_string()).await;
        let due = arrival.input["input"]["event"]["due"].as_str().and_then(pilotage_engine::clock::parse_rfc3339);
        let due = due.expect("an RFC 3339 due instant");
        assert!(seen.insert(due), "the tick {due} was invoked twice");
        after_due.push((arrival.wall_ms - due) as f64);
    }
    pilotage_server::deploy::manage::set_enabled(&server.platform, "demo", "bench-schedule", false)
        .await
        .expect("disabled");
    println!("schedule  due second → invocation     {}", summary(&mut after_due));
}

// ---------------------------------------------------------------------------
// 4. The cost of finding due deployments
// ---------------------------------------------------------------------------

/// The store's `deployments_due` statement with literals (the store binds
/// them), for `EXPLAIN`.
fn due_statement(now: i64, limit: i64) -> String {
    format!(
        "SELECT tenant, name, language, version, subject, scopes, body, context, triggers, baseline, risk, risk_hints, \
         enabled, run_id, created_at, updated_at, next_due FROM deployments \
         WHERE next_due IS NOT NULL AND next_due <= {now} ORDER BY next_due LIMIT {limit}"
    )
}

async fn due_cost() {
    let folder = std::env::temp_dir().join(format!("pilotage-bench-due-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    let sqlite = format!("sqlite:{}", folder.join("due.db").display());
    due_cost_on("sqlite", &sqlite).await;
    let _ = std::fs::remove_dir_all(&folder);
    match pg_schema::fresh("due").await {
        Ok((url, schema)) => {
            due_cost_on("postgres", &url).await;
            pg_schema::drop(&schema).await;
        }
        Err(error) => println!("deployments_due on postgres skipped: {error}"),
    }
}

/// A stored deployment with a daily schedule, as the store keeps one.
fn row(index: i64, next_due: i64) -> DeploymentRow {
    DeploymentRow {
        tenant: "bench".to_owned(),
        name: format!("d{index:05}"),
        language: DEPLOYER.to_owned(),
        version: 0,
        issuer: String::new(),
        subject: "bench".to_owned(),
        scopes: "[]".to_owned(),
        body: json!({"name": format!("d{index:05}"), "steps": [{"id": "record", "calls": "cap_record"}],
                     "triggers": [{"schedule": {"cron": "0 3 * * *", "time_zone": "UTC"}}]})
        .to_string(),
        context: None,
        triggers: r#"[{"kind":"schedule","cron":"0 3 * * *","time_zone":"UTC"}]"#.to_owned(),
        baseline: r#"{"cap_record":{}}"#.to_owned(),
        risk: "write".to_owned(),
        risk_hints: r#"{"readOnly":false,"destructive":false,"openWorld":false}"#.to_owned(),
        enabled: true,
        run_id: format!("run_{index}"),
        assertions: None,
        created_at: 0,
        updated_at: 0,
        next_due: Some(next_due),
    }
}

async fn due_cost_on(backend: &str, url: &str) {
    let store = Store::connect(url).await.expect("the store connects");
    store.migrate().await.expect("the migrations apply");
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.expect("a pool");
    let now = pilotage_engine::clock::system_now_ms();
    let filled = Instant::now();
    // Installed through the store, as deploys install them; concurrently
    // on PostgreSQL, one by one on SQLite (one writer).
    let writers = if backend == "postgres" { 8 } else { 1 };
    let per_writer = INSTALLED / writers;
    let mut tasks = Vec::new();
    for writer in 0..writers {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for index in writer * per_writer..(writer + 1) * per_writer {
                store.deployment_put(&row(index, now + 3_600_000 + index)).await.expect("stored");
            }
        }));
    }
    for task in tasks {
        task.await.expect("the writer finished");
    }
    let fill = filled.elapsed();
    if backend == "postgres" {
        // What autovacuum does after a bulk change.
        sqlx::query("ANALYZE deployments").execute(&pool).await.expect("analysed");
    }
    println!("deployments_due on {backend}: {INSTALLED} deployments installed in {:.1} s", fill.as_secs_f64());
    for due in [1, 10, 100, 1_000, INSTALLED] {
        // The first `due` names are due a second ago, the rest in an hour.
        let make_due = format!(
            "UPDATE deployments SET next_due = CASE WHEN name < 'd{due:05}' THEN {} ELSE {} END",
            now - 1_000,
            now + 3_600_000
        );
        sqlx::query(sqlx::AssertSqlSafe(make_due)).execute(&pool).await.expect("updated");
        if backend == "postgres" {
            sqlx::query("ANALYZE deployments").execute(&pool).await.expect("analysed");
        }
        let (median, p99) = time_due(&store, now, due).await;
        println!(
            "  {due:>5} due of {INSTALLED}: median {median:>8.0} µs  p99 {p99:>8.0} µs  ({:.1} µs per due row)",
            median / due as f64
        );
    }
    // For scale: reading every installed deployment.
    let mut samples = Vec::with_capacity(10);
    for _ in 0..10 {
        let started = Instant::now();
        let rows = store.deployments_of_tenant("bench").await.expect("read");
        samples.push(started.elapsed().as_secs_f64() * 1e6);
        assert_eq!(rows.len() as i64, INSTALLED);
    }
    samples.sort_by(f64::total_cmp);
    println!("  for scale, all {INSTALLED} rows read: median {:>8.0} µs", samples[samples.len() / 2]);
    // With 10 due, the plan.
    let make_due = format!(
        "UPDATE deployments SET next_due = CASE WHEN name < 'd00010' THEN {} ELSE {} END",
        now - 1_000,
        now + 3_600_000
    );
    sqlx::query(sqlx::AssertSqlSafe(make_due)).execute(&pool).await.expect("updated");
    if backend == "postgres" {
        sqlx::query("ANALYZE deployments").execute(&pool).await.expect("analysed");
    }
    let plan = explain(backend, &pool, now).await;
    let uses_index = plan.iter().all(|(_, lines)| lines.iter().any(|line| line.contains("deployments_due")));
    for (which, lines) in plan {
        println!("  plan ({which}):");
        for line in lines {
            println!("    {line}");
        }
    }
    println!("  uses the next_due index (deployments_due): {}", if uses_index { "yes" } else { "NO" });
    // The same 10 due among a tenth of the deployments: the read should
    // cost the same.
    sqlx::query("DELETE FROM deployments WHERE name >= 'd01000'").execute(&pool).await.expect("deleted");
    if backend == "postgres" {
        sqlx::query("ANALYZE deployments").execute(&pool).await.expect("analysed");
    }
    let (median, p99) = time_due(&store, now, 10).await;
    println!("  {:>5} due of {}: median {median:>8.0} µs  p99 {p99:>8.0} µs", 10, INSTALLED / 10);
    pool.close().await;
}

/// Median and p99 (µs) of [`READS`] `deployments_due` reads at `now`
/// (after three unmeasured ones), each finding `due` rows.
async fn time_due(store: &Store, now: i64, due: i64) -> (f64, f64) {
    let mut samples = Vec::with_capacity(READS);
    for _ in 0..READS + 3 {
        let started = Instant::now();
        let rows = store.deployments_due(now, INSTALLED).await.expect("read");
        samples.push(started.elapsed().as_secs_f64() * 1e6);
        assert_eq!(rows.len() as i64, due);
    }
    samples.drain(..3);
    samples.sort_by(f64::total_cmp);
    (samples[samples.len() / 2], samples[samples.len() * 99 / 100])
}

/// The query plans of the due read: with literals, and on PostgreSQL the
/// generic plan of the prepared statement (what repeated reads run).
async fn explain(backend: &str, pool: &sqlx::AnyPool, now: i64) -> Vec<(&'static str, Vec<String>)> {
    use sqlx::Row;
    let statement = due_statement(now, 256);
    if backend == "sqlite" {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {statement}")))
            .fetch_all(pool)
            .await
            .expect("explained");
        let lines = rows.iter().map(|row| row.try_get::<String, _>("detail").unwrap_or_default()).collect();
        return vec![("with literals", lines)];
    }
    let read = |rows: Vec<sqlx::any::AnyRow>| -> Vec<String> {
        rows.iter().map(|row| row.try_get::<String, _>(0).unwrap_or_default()).collect()
    };
    let literal =
        sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {statement}"))).fetch_all(pool).await.expect("explained");
    let mut connection = pool.acquire().await.expect("a connection");
    sqlx::query("SET plan_cache_mode = force_generic_plan").execute(&mut *connection).await.expect("set");
    let prepare = due_statement(0, 0).replace("<= 0", "<= $1").replace("LIMIT 0", "LIMIT $2");
    // The simple query protocol: `$1` and `$2` are the prepared
    // statement's parameters, not this request's.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("PREPARE due_read (BIGINT, BIGINT) AS {prepare}")))
        .execute(&mut *connection)
        .await
        .expect("prepared");
    let generic = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("EXPLAIN EXECUTE due_read ({now}, 256)")))
        .fetch_all(&mut *connection)
        .await
        .expect("explained");
    sqlx::query("DEALLOCATE due_read").execute(&mut *connection).await.expect("deallocated");
    sqlx::query("RESET plan_cache_mode").execute(&mut *connection).await.expect("reset");
    vec![("with literals", read(literal)), ("generic, as prepared", read(generic))]
}
