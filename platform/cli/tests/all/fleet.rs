//! Replicas on one PostgreSQL behind a real load balancer (haproxy, round
//! robin per request) behave as one server (issue: run as a fleet):
//! the conformance suite and the SDK interop clients pass through the
//! balancer; a change made through one replica's admin API is seen through
//! the other within a second, with `tools/list_changed` and one
//! `catalog_version`; killing the replica that opened a session does not
//! end it; concurrent identical idempotent executes spread over replicas
//! make one execution; a deployed per-second schedule fires each tick once
//! (one firing, one invocation) and goes on from the survivor when the
//! replica that fired last is killed; a signed webhook delivery sent to
//! both replicas fires once (issue 15).
//!
//! haproxy is the Debian package (`.ci/run` installs it; README, "What the
//! tests need"); when it is missing the tests fail naming it.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pilotage_client::conformance::{Operator, OperatorError, OperatorFuture, Runner};
use pilotage_client::{Connection, Reply};
use pilotage_server::start::Server;
use serde_json::{Value, json};

use crate::endpoint::{Backend, server, settings, unique};
use crate::language_loop::{listening_client, tool_names};
use crate::support::schema_document;

pub(crate) const ADMIN_TOKEN: &str = "fleet-operator-token";

/// How long a change may take to reach every replica (the issue's bound).
const PROPAGATION_BOUND: Duration = Duration::from_secs(1);

/// How long a set-up edit is waited for before the test goes on.
const OPERATOR_WAIT: Duration = Duration::from_secs(10);

/// The haproxy binary (Debian's `haproxy`; the test fails, saying how to
/// install it, when it is missing).
fn haproxy() -> std::path::PathBuf {
    pilotage_test_support::required_program("haproxy", "haproxy")
}

/// A free loopback port (bound and released; haproxy binds it next).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// haproxy in front of replicas: round robin per request, health checks on
/// `/readyz`, a failed connection retried on another replica, and the
/// serving replica named in `x-served-by` (`r0`, `r1`, …).
struct Balancer {
    child: std::process::Child,
    base: String,
    _folder: PathBuf,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Balancer {
    async fn start(replicas: &[SocketAddr]) -> Balancer {
        let program = tokio::task::spawn_blocking(haproxy).await.unwrap();
        let folder = std::env::temp_dir().join(unique("pilotage-haproxy"));
        std::fs::create_dir_all(&folder).unwrap();
        let port = free_port();
        let servers: String = replicas
            .iter()
            .enumerate()
            .map(|(index, addr)| format!("    server r{index} {addr} check inter 200ms fall 1 rise 1\n"))
            .collect();
        let config = format!(
            "global\n    maxconn 512\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 120s\n    timeout server 120s\n    \
             timeout tunnel 10m\n    option redispatch\n    retries 3\n\
             frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\
             backend replicas\n    balance roundrobin\n    option httpchk GET /readyz\n    \
             http-response set-header x-served-by %s\n{servers}"
        );
        let path = folder.join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = std::process::Command::new(program)
            .arg("-f")
            .arg(&path)
            .arg("-db")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("haproxy starts");
        let base = format!("http://127.0.0.1:{port}");
        let balancer = Balancer { child, base, _folder: folder };
        // Up when every replica has passed a health check.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = BTreeSet::new();
        while seen.len() < replicas.len() {
            assert!(Instant::now() < deadline, "haproxy did not serve every replica: {seen:?}");
            if let Ok(response) = reqwest::get(format!("{}/healthz", balancer.base)).await
                && response.status().is_success()
                && let Some(name) = response.headers().get("x-served-by")
            {
                seen.insert(name.to_str().unwrap_or_default().to_owned());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        balancer
    }

    fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }
}

/// In-process replicas on one fresh PostgreSQL schema, sharing a data
/// folder (the development token secret and the secret key), each with its
/// own demo capability service.
struct Fleet {
    replicas: Vec<Server>,
    balancer: Balancer,
}

impl Fleet {
    async fn start(count: usize, retention: &str) -> Fleet {
        Fleet::start_with(count, retention, |_| {}).await
    }

    /// [`Fleet::start`] with every replica's settings edited by `edit`.
    async fn start_with(
        count: usize,
        retention: &str,
        edit: impl Fn(&mut pilotage_server::settings::Settings),
    ) -> Fleet {
        pilotage_client::install_crypto_provider();
        let mut first = settings(Backend::Postgres).await;
        edit(&mut first);
        first.retention = retention.to_owned();
        first.admin_token = Some(ADMIN_TOKEN.to_owned());
        first.bounds.execution.wall_time_ms = 1_500;
        first.request_timeout_ms = 12_000;
        let mut replicas = Vec::new();
        for _ in 0..count {
            replicas.push(server(first.clone()).await);
        }
        let addrs: Vec<SocketAddr> = replicas.iter().map(|replica| replica.addr).collect();
        let balancer = Balancer::start(&addrs).await;
        Fleet { replicas, balancer }
    }

    fn base(&self, replica: usize) -> String {
        format!("http://{}", self.replicas[replica].addr)
    }

    /// Demo capability calls over every replica's service.
    fn effects(&self) -> u64 {
        self.replicas
            .iter()
            .filter_map(|replica| replica.demo_world.as_ref())
            .map(|(_, world)| world.calls().values().sum::<u64>())
            .sum()
    }

    async fn stop(self) {
        drop(self.balancer);
        for replica in self.replicas {
            replica.stop().await;
        }
    }
}

/// A demo-tenant catalog entry as replica `replica` holds it, in the admin
/// API's shape.
fn admin_entry(server: &Server, id: &str) -> Option<Value> {
    let tenant = server.platform.tenant("demo")?;
    let stored = tenant.with_catalog(|catalog| catalog.stored(id).map(|s| s.as_ref().clone()))?;
    let mut value = serde_json::to_value(&stored.entry).ok()?;
    value["visibility"] = json!(stored.visibility);
    if let Some(binding) = &stored.binding {
        value["binding"] = serde_json::to_value(binding).ok()?;
    }
    Some(value)
}

/// Polls `done` until it holds, failing with `what` past
/// [`PROPAGATION_BOUND`].
async fn within_bound(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + PROPAGATION_BOUND;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {PROPAGATION_BOUND:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// An admin API request through replica `through`, its status.
async fn admin(fleet: &Fleet, through: usize, method: reqwest::Method, path: &str, body: Option<Value>) -> u16 {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}/admin/v1{path}", fleet.base(through)))
        .bearer_auth(ADMIN_TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap().status().as_u16()
}

/// PUTs `entry` through replica `through`'s admin API.
async fn put_entry(fleet: &Fleet, through: usize, entry: &Value) -> Result<(), String> {
    let id = entry["id"].as_str().ok_or("an entry without id")?;
    let response = reqwest::Client::new()
        .put(format!("{}/admin/v1/tenants/demo/catalog/entries/{id}", fleet.base(through)))
        .bearer_auth(ADMIN_TOKEN)
        .json(entry)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("PUT {id}: {} {}", response.status(), response.text().await.unwrap_or_default()));
    }
    Ok(())
}

/// Waits until every replica holds `entry` (as [`admin_entry`] shows it);
/// returns how long the slowest took, or an error past `bound`.
async fn until_everywhere(fleet: &Fleet, entry: &Value, started: Instant, bound: Duration) -> Result<Duration, String> {
    let id = entry["id"].as_str().unwrap_or_default();
    loop {
        let held = fleet.replicas.iter().all(|replica| admin_entry(replica, id).as_ref() == Some(entry));
        if held {
            return Ok(started.elapsed());
        }
        if started.elapsed() > bound {
            return Err(format!("'{id}' did not reach every replica within {bound:?}"));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The conformance operator for a fleet: catalog edits through the first
/// replica's admin API, waited for on every replica; side effects summed
/// over every replica's capability service.
struct FleetOperator<'f> {
    fleet: &'f Fleet,
    edits: AtomicU64,
}

impl FleetOperator<'_> {
    async fn edit(&self, id: &str, change: impl FnOnce(&mut Value, u64)) -> Result<(), OperatorError> {
        let mut entry = admin_entry(&self.fleet.replicas[0], id)
            .ok_or_else(|| OperatorError::NotFound { what: "no such entry".to_owned() })?;
        change(&mut entry, self.edits.fetch_add(1, Ordering::SeqCst));
        let started = Instant::now();
        put_entry(self.fleet, 0, &entry).await.map_err(|e| OperatorError::Failed(e.into()))?;
        // The operator's edit is done when every replica serves it (the
        // one-second bound is the propagation test's; here a loaded machine
        // may take longer without the vectors being wrong).
        until_everywhere(self.fleet, &entry, started, OPERATOR_WAIT)
            .await
            .map(|_| ())
            .map_err(|what| OperatorError::NotObserved { what })
    }
}

impl Operator for FleetOperator<'_> {
    fn change_description<'a>(&'a self, _language: &'a str, id: &'a str) -> OperatorFuture<'a, ()> {
        Box::pin(self.edit(id, |entry, n| {
            let description = entry["description"].as_str().unwrap_or_default().to_owned();
            entry["description"] = json!(format!("{description} (edit {n})"));
        }))
    }

    fn change_load_bearing<'a>(&'a self, _language: &'a str, id: &'a str) -> OperatorFuture<'a, ()> {
        Box::pin(self.edit(id, |entry, n| {
            if entry["input_schema"].is_object() {
                entry["input_schema"]["properties"][format!("added_{n}")] = json!({"type": "string"});
            }
        }))
    }

    fn foreign_run<'a>(&'a self, language: &'a str) -> OperatorFuture<'a, String> {
        Box::pin(crate::conformance::insert_foreign_run(&self.fleet.replicas[0], "demo", language))
    }

    fn effects(&self) -> u64 {
        self.fleet.effects()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_through_a_balancer_in_front_of_two_replicas() {
    let fleet = Fleet::start(2, "PT1H").await;
    let operator = FleetOperator { fleet: &fleet, edits: AtomicU64::new(0) };
    let connection = Connection::http(&fleet.balancer.mcp_url(), None).await.unwrap();
    let binding = crate::conformance::binding("workflow.json");
    let runner = Runner::new(&connection, &binding, schema_document(), Some(&operator)).await.unwrap();
    let results = runner.run_all(&crate::conformance::vectors()).await;
    crate::conformance::assert_results(Backend::Postgres, &results, 44);
    connection.close().await;
    // Round robin spread the Runs: each replica's own capability service
    // was called.
    for (index, replica) in fleet.replicas.iter().enumerate() {
        let (_, world) = replica.demo_world.as_ref().unwrap();
        assert!(world.calls().values().sum::<u64>() > 0, "replica {index} ran nothing");
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_clients_pass_through_a_balancer_in_front_of_two_replicas() {
    let node = tokio::task::spawn_blocking(crate::interop::typescript_sdk).await.unwrap();
    let python = tokio::task::spawn_blocking(crate::interop::python_sdk).await.unwrap();
    let fleet = Fleet::start(2, "PT1H").await;
    crate::interop::sdk_passes(node.to_owned(), "tests/interop/ts/client.mjs", fleet.balancer.mcp_url()).await;
    crate::interop::sdk_passes(python, "tests/interop/py/client.py", fleet.balancer.mcp_url()).await;
    // One Run of the TypeScript client, two of the Python one, each calling
    // the profile capability once, wherever they ran.
    let profile: u64 = fleet
        .replicas
        .iter()
        .map(|replica| replica.demo_world.as_ref().unwrap().1.calls().get("/users/profile").copied().unwrap_or(0))
        .sum();
    assert_eq!(profile, 3);
    fleet.stop().await;
}

async fn catalog_version(url: &str) -> String {
    let connection = Connection::http(url, None).await.unwrap();
    let reply = connection.call("pilotage_catalog", json!({"language": "workflow/v1", "verb": "list"})).await.unwrap();
    connection.close().await;
    match reply {
        Reply::Result(value) => value["catalog_version"].as_str().unwrap().to_owned(),
        Reply::RequestError(error) => panic!("{error:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_replica_reaches_the_other_within_a_second() {
    let fleet = Fleet::start(2, "PT1H").await;
    let url = |replica: usize| format!("{}/mcp", fleet.base(replica));
    assert_eq!(catalog_version(&url(0)).await, catalog_version(&url(1)).await);

    // Catalog edits through replica 0, seen on replica 1.
    let mut delays = Vec::new();
    let mut entry = admin_entry(&fleet.replicas[0], "cap_read_outbox").unwrap();
    for n in 0..20 {
        entry["description"] = json!(format!("Reads the outbox (edit {n})."));
        let started = Instant::now();
        put_entry(&fleet, 0, &entry).await.unwrap();
        let put = started.elapsed();
        let seen = until_everywhere(&fleet, &entry, started, PROPAGATION_BOUND).await.unwrap();
        delays.push(seen.saturating_sub(put));
    }
    delays.sort();
    eprintln!("propagation after the admin answer: p50 {:?}, max {:?}", delays[delays.len() / 2], delays.last());
    // The same caller sees one catalog_version on every replica.
    assert_eq!(catalog_version(&url(0)).await, catalog_version(&url(1)).await);
    // A deleted entry goes everywhere too (the polarity of the put).
    let status = admin(&fleet, 0, reqwest::Method::DELETE, "/tenants/demo/catalog/entries/cap_read_outbox", None);
    assert_eq!(status.await, 204);
    within_bound("the deletion reaches replica 1", || admin_entry(&fleet.replicas[1], "cap_read_outbox").is_none())
        .await;
    assert_eq!(catalog_version(&url(0)).await, catalog_version(&url(1)).await);

    // A tenant created through replica 1 is served by replica 0.
    let status = admin(&fleet, 1, reqwest::Method::POST, "/tenants", Some(json!({"id": "fleet-second"})));
    assert_eq!(status.await, 201);
    within_bound("the new tenant reaches replica 0", || fleet.replicas[0].platform.tenant("fleet-second").is_some())
        .await;

    // A Language retired through replica 0: a session held by replica 1
    // hears tools/list_changed, and its tools/list no longer offers it.
    let (client, seen) = listening_client(&url(1)).await;
    let before = tool_names(&client).await;
    assert!(before.contains("run_workflow"));
    let status = admin(&fleet, 0, reqwest::Method::DELETE, "/tenants/demo/languages/workflow/v1", None);
    assert_eq!(status.await, 204);
    within_bound("tools/list_changed reaches the session on replica 1", || seen.load(Ordering::SeqCst) > 0).await;
    let after = tool_names(&client).await;
    assert!(!after.contains("run_workflow"), "{after:?}");
    let _ = client.cancel().await;
    fleet.stop().await;
}

/// A counting capability: each call waits `hold` (so concurrent Runs
/// overlap) and counts one effect.
async fn counting_service(hold: Duration) -> (String, Arc<AtomicU64>) {
    let calls = Arc::new(AtomicU64::new(0));
    let counter = calls.clone();
    let router = axum::Router::new().route(
        "/effect",
        axum::routing::post(move || {
            let counter = counter.clone();
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(hold).await;
                axum::Json(json!({"effect": n}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/effect", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_idempotent_executes_spread_over_replicas_make_one_execution() {
    let fleet = Fleet::start(2, "PT1H").await;
    let (url, calls) = counting_service(Duration::from_millis(400)).await;
    let entry = json!({"id": "cap_count_effect", "kind": "capability", "name": "Count an effect",
        "description": "Records one effect.",
        "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "output_schema": {"type": "object", "properties": {"effect": {"type": "integer"}}},
        "risk": "write", "risk_hints": {"readOnly": false, "destructive": false, "openWorld": false},
        "languages": ["workflow/v1"], "visibility": [],
        "binding": {"url": url, "timeout_ms": 9000}});
    let started = Instant::now();
    put_entry(&fleet, 0, &entry).await.unwrap();
    until_everywhere(&fleet, &entry, started, OPERATOR_WAIT).await.unwrap();
    let key = unique("fleet-key");
    let request = json!({"workflow": {"steps": [{"id": "effect", "kind": "call", "capability": "cap_count_effect",
                                                 "with": {"n": 1}}]},
                         "idempotency_key": key, "trace_level": "summary"});
    let mut calls_in_flight = Vec::new();
    for _ in 0..8 {
        let url = fleet.balancer.mcp_url();
        let request = request.clone();
        calls_in_flight.push(tokio::spawn(async move {
            let connection = Connection::http(&url, None).await.unwrap();
            let reply = connection.call("run_workflow", request).await.unwrap();
            connection.close().await;
            reply
        }));
    }
    let mut run_ids = BTreeSet::new();
    for call in calls_in_flight {
        match call.await.unwrap() {
            Reply::Result(value) => {
                run_ids.insert(value["run_id"].as_str().unwrap_or_default().to_owned());
            }
            // A key held by a Run still in flight is a request error the
            // caller retries later (Part II §6.5.6); it is not a second
            // execution either.
            Reply::RequestError(error) => assert!(format!("{error:?}").contains("idempotency"), "{error:?}"),
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "exactly one execution");
    assert!(run_ids.len() <= 1, "one Run answered every caller: {run_ids:?}");
    fleet.stop().await;
}

/// A `pilotage serve` process, one replica of a fleet.
pub(crate) struct Process {
    pub(crate) child: tokio::process::Child,
    pub(crate) addr: SocketAddr,
}

/// A `pilotage serve` replica on `database_url` sharing `data_dir`, with
/// the operator token [`ADMIN_TOKEN`] and the further flags `args`.
pub(crate) async fn replica_process(data_dir: &std::path::Path, database_url: &str, args: &[&str]) -> Process {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--demo-postgres", "off", "--admin-token", ADMIN_TOKEN])
        .args(["--database-url", database_url])
        .args(args)
        .arg("--data-dir")
        .arg(data_dir);
    let (child, url) = crate::support::spawn_serving(&mut command).await;
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").parse().unwrap();
    Process { child, addr }
}

/// One raw Streamable HTTP exchange: the status, the replica that served
/// it, the session header, and the JSON-RPC message (from JSON or SSE).
async fn exchange(url: &str, session: Option<&str>, body: Value) -> (u16, String, Option<String>, Option<Value>) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_string());
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.send().await.expect("the balancer answers");
    let status = response.status().as_u16();
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let served_by = header("x-served-by").unwrap_or_default();
    let session = header("mcp-session-id");
    let text = response.text().await.unwrap_or_default();
    let message = serde_json::from_str(&text).ok().or_else(|| {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message.get("id").is_some())
    });
    (status, served_by, session, message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_replica_that_opened_a_session_does_not_end_it() {
    pilotage_client::install_crypto_provider();
    let database_url = crate::endpoint::postgres_schema().await;
    let data_dir = std::env::temp_dir().join(unique("pilotage-fleet"));
    // One after the other: the first creates the shared secrets.
    let session = ["--retention", "session"];
    let mut processes = vec![replica_process(&data_dir, &database_url, &session).await];
    processes.push(replica_process(&data_dir, &database_url, &session).await);
    let balancer = Balancer::start(&processes.iter().map(|p| p.addr).collect::<Vec<_>>()).await;
    let url = balancer.mcp_url();

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fleet-test", "version": "1"}}});
    let (status, opener, session, _) = exchange(&url, None, initialize).await;
    assert_eq!(status, 200);
    let session = session.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(exchange(&url, Some(&session), initialized).await.0, 202);

    // A session-retained Run, then calls that land on both replicas.
    let run = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_workflow",
        "arguments": {"workflow": {"steps": [{"id": "outbox", "kind": "call", "capability": "cap_read_outbox", "with": {}}]},
                      "store": true, "trace_level": "full"}}});
    let (status, _, _, message) = exchange(&url, Some(&session), run).await;
    assert_eq!(status, 200);
    let message = message.expect("an answer");
    let run_id =
        message["result"]["structuredContent"]["run_id"].as_str().unwrap_or_else(|| panic!("{message}")).to_owned();
    let list = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
    let mut served = BTreeSet::new();
    for id in 10..16 {
        let (status, by, _, message) = exchange(&url, Some(&session), list(id)).await;
        assert_eq!(status, 200, "{message:?}");
        assert!(message.unwrap()["result"]["tools"].is_array());
        served.insert(by);
    }
    assert_eq!(served.len(), 2, "round robin reached both replicas: {served:?}");

    // The replica that opened the session dies without a goodbye.
    let index: usize = opener.trim_start_matches('r').parse().unwrap();
    processes[index].child.start_kill().unwrap();
    processes[index].child.wait().await.unwrap();
    let survivor = format!("r{}", 1 - index);
    for id in 20..26 {
        let (status, by, _, message) = exchange(&url, Some(&session), list(id)).await;
        assert_eq!(status, 200, "the session lives on: {message:?}");
        assert_eq!(by, survivor);
        assert!(message.unwrap()["result"]["tools"].is_array());
    }
    // Its session-retained Run is still the session's.
    let fetch = json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {"name": "trace_workflow",
        "arguments": {"run_id": run_id}}});
    let (status, _, _, message) = exchange(&url, Some(&session), fetch).await;
    assert_eq!(status, 200);
    let message = message.unwrap();
    assert_eq!(message["result"]["isError"], false, "{message}");
    assert_eq!(message["result"]["structuredContent"]["run_id"], run_id.as_str());

    // Polarity: a DELETE ends it for the fleet, runs included.
    let response = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let (status, _, _, _) = exchange(&url, Some(&session), list(40)).await;
    assert_eq!(status, 404, "an ended session is unknown");
    let pool = sqlx::PgPool::connect(&database_url).await.unwrap();
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM runs WHERE session_id = $1")
        .bind(&session)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "the session's runs ended with it");
    drop(balancer);
}

// ---------------------------------------------------------------------------
// Deployments across replicas (issue 15): a schedule tick and a webhook
// delivery fire once fleet-wide.
// ---------------------------------------------------------------------------

const DEPLOYER: &str = "deployer/v1";

/// The signing key of the webhook source `hooks` in the webhook test.
const HOOKS_KEY: &str = "fleet-hooks-signing-key";

fn now_ms() -> i64 {
    pilotage_engine::clock::system_now_ms()
}

/// What a recording capability received: each invocation's input and when
/// it arrived (ms since the Unix epoch), in arrival order.
#[derive(Clone, Default)]
struct Recorded(Arc<std::sync::Mutex<Vec<(Value, i64)>>>);

impl Recorded {
    fn all(&self) -> Vec<(Value, i64)> {
        self.0.lock().unwrap().clone()
    }

    /// Invocations per value of the firing's `event[field]` (a schedule
    /// tick's `due`, a webhook body's `n`).
    fn by_event(&self, field: &str) -> std::collections::BTreeMap<String, u64> {
        let mut counts = std::collections::BTreeMap::new();
        for (input, _) in self.all() {
            *counts.entry(input["input"]["event"][field].to_string()).or_default() += 1;
        }
        counts
    }
}

/// A capability service that records every invocation ([`Recorded`]); its
/// URL (POST).
async fn recording_service() -> (String, Recorded) {
    let recorded = Recorded::default();
    let recorder = recorded.clone();
    let router = axum::Router::new().route(
        "/record",
        axum::routing::post(move |axum::Json(input): axum::Json<Value>| {
            let recorder = recorder.clone();
            async move {
                let mut calls = recorder.0.lock().unwrap();
                calls.push((input, now_ms()));
                axum::Json(json!({"recorded": calls.len()}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/record", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, recorded)
}

/// An admin API request to `base` (a replica or the balancer), its status
/// and JSON answer.
pub(crate) async fn admin_at(base: &str, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{base}/admin/v1{path}")).bearer_auth(ADMIN_TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Installs deployer/v1 in the demo tenant through `base`, with a write
/// capability `cap_record` bound to `record_url`.
async fn install_deployer(base: &str, record_url: &str) {
    let deployer = pilotage_test_support::DEPLOYER.to_vec();
    let response = reqwest::Client::new()
        .post(format!("{base}/admin/v1/tenants/demo/languages"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/wasm")
        .body(deployer)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    let record = json!({"id": "cap_record", "kind": "capability", "name": "cap_record",
        "description": "Records that a deployment fired.", "input_schema": {"type": "object"}, "risk": "write",
        "risk_hints": {"readOnly": false, "destructive": false, "openWorld": false},
        "binding": {"url": record_url, "timeout_ms": 5000}});
    let (status, report) =
        admin_at(base, reqwest::Method::POST, "/tenants/demo/catalog/apply", Some(json!({"entries": [record]}))).await;
    assert_eq!(status, 200, "{report}");
}

/// Waits until the replica at `mcp_url` validates `program` (it holds
/// deployer/v1 and `cap_record`), so a firing there finds both.
async fn until_valid(mcp_url: &str, program: &Value) {
    let deadline = Instant::now() + OPERATOR_WAIT;
    loop {
        if let Ok(connection) = Connection::http(mcp_url, None).await
            && let Ok(client) = pilotage_client::PilotageClient::discover(connection).await
            && let Ok(validation) = client.validate(DEPLOYER, program, None).await
            && validation.valid
        {
            client.close().await;
            return;
        }
        assert!(Instant::now() < deadline, "{mcp_url} does not validate {program} within {OPERATOR_WAIT:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deploys `program` through `mcp_url` (the balancer).
async fn deploy(mcp_url: &str, program: &Value) -> Value {
    let connection = Connection::http(mcp_url, None).await.unwrap();
    let client = pilotage_client::PilotageClient::discover(connection).await.unwrap();
    let deployed = client.execute_raw(DEPLOYER, json!({"program": program, "mode": "deploy"})).await.unwrap();
    client.close().await;
    assert!(deployed.outcome.ok, "{:?}", deployed.outcome);
    deployed.output.unwrap()
}

/// The tick (ms) of a schedule firing's instance `schedule:<ms>`.
fn tick(firing: &pilotage_store::FiringRow) -> i64 {
    firing.instance.strip_prefix("schedule:").and_then(|ms| ms.parse().ok()).unwrap_or_else(|| panic!("{firing:?}"))
}

/// The due instant a schedule firing's event carries, as the recorder
/// keys it.
fn due_key(tick_ms: i64) -> String {
    Value::String(pilotage_engine::clock::rfc3339(tick_ms)).to_string()
}

/// Polls the store until `name` has at least `count` firings satisfying
/// `counted`; all its firings, newest first.
async fn until_firings(
    store: &pilotage_store::Store,
    name: &str,
    count: usize,
    counted: impl Fn(&pilotage_store::FiringRow) -> bool,
) -> Vec<pilotage_store::FiringRow> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let firings = store.firings_of("demo", name, 10_000).await.unwrap();
        if firings.iter().filter(|firing| counted(firing)).count() >= count {
            return firings;
        }
        assert!(Instant::now() < deadline, "{name}: fewer than {count} firings in 30 s: {firings:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every tick of `firings` but those in `lost` reached the
/// recorder, then checks nothing was invoked twice and nothing was invoked
/// without a firing.
async fn invoked_once_each(
    store: &pilotage_store::Store,
    name: &str,
    firings: &[pilotage_store::FiringRow],
    recorded: &Recorded,
    lost: &BTreeSet<i64>,
) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let calls = recorded.by_event("due");
        let missing: Vec<i64> =
            firings.iter().map(tick).filter(|t| !lost.contains(t) && !calls.contains_key(&due_key(*t))).collect();
        if missing.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "ticks claimed but never invoked: {missing:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let calls = recorded.by_event("due");
    // Read after the calls: every invoked tick has its firing by now.
    let claimed: BTreeSet<String> =
        store.firings_of("demo", name, 10_000).await.unwrap().iter().map(|f| due_key(tick(f))).collect();
    for (due, count) in &calls {
        assert_eq!(*count, 1, "the tick {due} invoked the capability {count} times");
        assert!(claimed.contains(due), "the tick {due} invoked the capability without a firing");
    }
}

/// A `pilotage serve` replica and its instance id (the `owner` of the
/// firings it claims), read from its start-up log.
async fn named_replica(data_dir: &std::path::Path, database_url: &str) -> (Process, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
        .args(["serve", "--listen", "127.0.0.1:0", "--demo-postgres", "off", "--admin-token", ADMIN_TOKEN])
        .args(["--database-url", database_url])
        .arg("--data-dir")
        .arg(data_dir)
        // Info everywhere: with a per-target directive
        // (`warn,pilotage_server::start=info`) a second replica on the
        // same database was seen not to log its instance line.
        .env("PILOTAGE_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    // The log line and the announcement are written by different writers:
    // either may come first.
    let (mut instance, mut url): (Option<String>, Option<String>) = (None, None);
    let mut seen = Vec::new();
    while instance.is_none() || url.is_none() {
        let wait = if url.is_some() { Duration::from_secs(10) } else { Duration::from_secs(120) };
        let line = tokio::time::timeout(wait, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("the replica starts and logs its instance id: {seen:?}"))
            .expect("stderr is readable")
            .unwrap_or_else(|| panic!("the replica says where it listens and logs its instance id: {seen:?}"));
        seen.push(line.clone());
        if let Some(at) = line.find("inst_") {
            instance = Some(line[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect());
        }
        if let Some(announced) = line.strip_prefix("Pilotage Platform: MCP at ") {
            url = Some(announced.to_owned());
        }
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let addr = url.unwrap_or_default().trim_start_matches("http://").trim_end_matches("/mcp").parse().unwrap();
    (Process { child, addr }, instance.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_second_schedule_fires_each_tick_once_across_replicas_and_goes_on_when_one_is_killed() {
    pilotage_client::install_crypto_provider();
    let database_url = crate::endpoint::postgres_schema().await;
    let data_dir = std::env::temp_dir().join(unique("pilotage-fleet"));
    // One after the other: the first creates the shared secrets.
    let mut processes = vec![named_replica(&data_dir, &database_url).await];
    processes.push(named_replica(&data_dir, &database_url).await);
    let instances: Vec<String> = processes.iter().map(|(_, instance)| instance.clone()).collect();
    assert_ne!(instances[0], instances[1]);
    let balancer = Balancer::start(&processes.iter().map(|(p, _)| p.addr).collect::<Vec<_>>()).await;
    let (record_url, recorded) = recording_service().await;
    install_deployer(&balancer.base, &record_url).await;
    let name = "every-second";
    let program = json!({"name": name, "steps": [{"id": "record", "calls": "cap_record"}],
        "triggers": [{"schedule": {"cron": "* * * * * *", "time_zone": "UTC"}}]});
    for (process, _) in &processes {
        until_valid(&format!("http://{}/mcp", process.addr), &program).await;
    }
    let store = pilotage_store::Store::connect(&database_url).await.unwrap();

    // Deployed through the balancer; no tick before the deploy fires.
    let deploying = now_ms();
    let output = deploy(&balancer.mcp_url(), &program).await;
    assert_eq!(output["deployment"], name);
    let firings = until_firings(&store, name, 5, |_| true).await;
    for firing in &firings {
        assert!(tick(firing) > deploying, "a tick before the deploy fired: {firing:?}");
        assert_eq!(tick(firing) % 1000, 0, "{firing:?}");
        assert!(instances.contains(&firing.owner), "{firing:?}");
    }
    invoked_once_each(&store, name, &firings, &recorded, &BTreeSet::new()).await;
    let owners: BTreeSet<&str> = firings.iter().map(|f| f.owner.as_str()).collect();
    eprintln!("{} ticks before the kill, claimed by {owners:?}", firings.len());

    // SIGKILL the replica that claimed the newest tick.
    let newest = store.firings_of("demo", name, 1).await.unwrap().remove(0);
    let killed = instances.iter().position(|instance| *instance == newest.owner).unwrap();
    processes[killed].0.child.start_kill().unwrap();
    processes[killed].0.child.wait().await.unwrap();
    let killed_at = now_ms();
    let survivor = &instances[1 - killed];

    // Later ticks fire, each once, from the survivor.
    let firings = until_firings(&store, name, 3, |firing| tick(firing) > killed_at).await;
    for firing in firings.iter().filter(|firing| firing.claimed_at > killed_at) {
        assert_eq!(&firing.owner, survivor, "a firing claimed after the kill: {firing:?}");
    }
    // A tick the killed replica had claimed but not yet run is lost (the
    // documented cost of a kill), never run twice.
    let lost: BTreeSet<i64> = firings
        .iter()
        .filter(|firing| firing.owner == instances[killed] && firing.claimed_at > killed_at - 2_000)
        .map(tick)
        .filter(|t| !recorded.by_event("due").contains_key(&due_key(*t)))
        .collect();
    assert!(lost.len() <= 1, "{lost:?}");

    // Disabled through the balancer's admin API: no later tick fires.
    let path = format!("/tenants/demo/deployments/{name}/disable");
    let (status, view) = admin_at(&balancer.base, reqwest::Method::POST, &path, None).await;
    assert_eq!(status, 200, "{view}");
    let disabled_at = now_ms();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let firings = store.firings_of("demo", name, 10_000).await.unwrap();
    assert!(firings.iter().all(|firing| tick(firing) <= disabled_at), "a disabled deployment fired: {firings:?}");
    invoked_once_each(&store, name, &firings, &recorded, &lost).await;
    assert_eq!(recorded.all().len() + lost.len(), firings.len(), "one invocation per firing");
    eprintln!("{} ticks in all, {} lost to the kill", firings.len(), lost.len());
    drop(balancer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_webhook_delivery_sent_to_both_replicas_fires_once() {
    let fleet = Fleet::start(2, "PT1H").await;
    let (record_url, recorded) = recording_service().await;
    install_deployer(&fleet.balancer.base, &record_url).await;
    // The source is registered as the secret `webhook:hooks`; a name the
    // admin API does not take is refused.
    let (status, answer) = admin_at(
        &fleet.balancer.base,
        reqwest::Method::PUT,
        "/tenants/demo/secrets/webhook:hooks",
        Some(json!({"value": HOOKS_KEY})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let (status, _) = admin_at(
        &fleet.balancer.base,
        reqwest::Method::PUT,
        "/tenants/demo/secrets/webhook%20hooks",
        Some(json!({"value": HOOKS_KEY})),
    )
    .await;
    assert!((400..500).contains(&status), "{status}");
    let name = "on-hook";
    let program =
        json!({"name": name, "steps": [{"id": "record", "calls": "cap_record"}], "triggers": [{"webhook": "hooks"}]});
    for replica in 0..2 {
        until_valid(&format!("{}/mcp", fleet.base(replica)), &program).await;
    }
    let output = deploy(&fleet.balancer.mcp_url(), &program).await;
    assert_eq!(output["deployment"], name);
    let store = fleet.replicas[0].platform.store();

    let delivery = |base: String, body: &'static str, timestamp: i64, key: &'static str| async move {
        let signature = pilotage_server::deploy::webhook::sign(key.as_bytes(), timestamp, body.as_bytes());
        reqwest::Client::new()
            .post(format!("{base}/events/demo/hooks"))
            .header("content-type", "application/json")
            .header(pilotage_server::deploy::webhook::TIMESTAMP_HEADER, timestamp.to_string())
            .header(pilotage_server::deploy::webhook::SIGNATURE_HEADER, signature)
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    // The same delivery to both replicas at once: one accepts it, the other
    // refuses it as a replay.
    let sent = now_ms() / 1000;
    let (first, second) = tokio::join!(
        delivery(fleet.base(0), r#"{"n": 1}"#, sent, HOOKS_KEY),
        delivery(fleet.base(1), r#"{"n": 1}"#, sent, HOOKS_KEY)
    );
    let mut statuses = [first, second];
    statuses.sort();
    assert_eq!(statuses, [202, 409]);
    until_firings(store, name, 1, |_| true).await;
    // Sent again later, through the balancer: still a replay.
    assert_eq!(delivery(fleet.balancer.base.clone(), r#"{"n": 1}"#, sent, HOOKS_KEY).await, 409);
    // Polarities: a wrong key, a stale timestamp, an unregistered source.
    assert_eq!(delivery(fleet.base(0), r#"{"n": 9}"#, sent, "another key").await, 401);
    assert_eq!(delivery(fleet.base(1), r#"{"n": 9}"#, sent - 400, HOOKS_KEY).await, 401);
    let unregistered = reqwest::Client::new()
        .post(format!("{}/events/demo/elsewhere", fleet.base(0)))
        .header(pilotage_server::deploy::webhook::TIMESTAMP_HEADER, sent.to_string())
        .header(pilotage_server::deploy::webhook::SIGNATURE_HEADER, "sha256=00")
        .body(r#"{"n": 9}"#)
        .send()
        .await
        .unwrap();
    // Answered like a wrong key (an unauthenticated endpoint names no
    // source): "sha256=00" is not even a signature.
    assert_eq!(unregistered.status(), 401);
    // Another delivery fires again, once.
    assert_eq!(delivery(fleet.balancer.base.clone(), r#"{"n": 2}"#, now_ms() / 1000, HOOKS_KEY).await, 202);
    let firings = until_firings(store, name, 2, |_| true).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while recorded.all().len() < 2 {
        assert!(Instant::now() < deadline, "the firings did not invoke cap_record: {firings:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nothing more arrives: one invocation per accepted delivery.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let firings = store.firings_of("demo", name, 100).await.unwrap();
    assert_eq!(firings.len(), 2, "{firings:?}");
    assert!(firings.iter().all(|firing| firing.instance.starts_with("webhook:")), "{firings:?}");
    let expected: std::collections::BTreeMap<String, u64> = [("1".to_owned(), 1), ("2".to_owned(), 1)].into();
    assert_eq!(recorded.by_event("n"), expected, "{:?}", recorded.all());
    fleet.stop().await;
}

/// Issue 27 item 9 across replicas: the quotas are counted and claimed in
/// one step in the shared store. Six deploys of new names at once, spread
/// over both replicas, under `max_deployments` = 2, store two; twelve
/// signed deliveries at once, spread over both, under
/// `max_firings_per_minute` = 3, fire three times and invoke three times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_hold_fleet_wide_under_concurrent_bursts() {
    let fleet = Fleet::start(2, "PT1H").await;
    let (record_url, recorded) = recording_service().await;
    install_deployer(&fleet.balancer.base, &record_url).await;
    let (status, answer) = admin_at(
        &fleet.balancer.base,
        reqwest::Method::PUT,
        "/tenants/demo/secrets/webhook:hooks",
        Some(json!({"value": HOOKS_KEY})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let quotas = json!({"quotas": {"max_deployments": 2, "max_firings_per_minute": 3}});
    let (status, answer) = admin_at(&fleet.balancer.base, reqwest::Method::PATCH, "/tenants/demo", Some(quotas)).await;
    assert_eq!(status, 200, "{answer}");
    let program = |name: String| json!({"name": name, "steps": [{"id": "record", "calls": "cap_record"}], "triggers": [{"webhook": "hooks"}]});
    for replica in 0..2 {
        until_valid(&format!("{}/mcp", fleet.base(replica)), &program("probe".into())).await;
        within_bound("the quotas reach every replica", || {
            fleet.replicas[replica].platform.tenant("demo").is_some_and(|t| t.quotas().max_firings_per_minute == 3)
        })
        .await;
    }
    let mut clients = Vec::new();
    for replica in 0..2 {
        let connection = Connection::http(&format!("{}/mcp", fleet.base(replica)), None).await.unwrap();
        clients.push(pilotage_client::PilotageClient::discover(connection).await.unwrap());
    }
    let deploys = (0..6).map(|n| {
        clients[n % 2].execute_raw(DEPLOYER, json!({"program": program(format!("burst-{n}")), "mode": "deploy"}))
    });
    let outcomes: Vec<_> = futures::future::join_all(deploys).await.into_iter().map(|r| r.unwrap().outcome).collect();
    assert_eq!(outcomes.iter().filter(|outcome| outcome.ok).count(), 2, "{outcomes:?}");
    assert!(
        outcomes.iter().filter(|o| !o.ok).all(|o| o.error.as_deref().unwrap_or_default().contains("max_deployments"))
    );
    for client in clients {
        client.close().await;
    }
    let store = fleet.replicas[0].platform.store();
    let names: Vec<String> =
        store.deployments_of_tenant("demo").await.unwrap().into_iter().map(|row| row.name).collect();
    assert_eq!(names.len(), 2, "{names:?}");

    // One deployment left, so every firing invokes cap_record once.
    let (status, _) = admin_at(
        &fleet.balancer.base,
        reqwest::Method::DELETE,
        &format!("/tenants/demo/deployments/{}", names[1]),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let sent = now_ms() / 1000;
    let deliveries = (0..12).map(|n| {
        let base = fleet.base(n % 2);
        async move {
            let body = json!({"n": n}).to_string();
            let signature = pilotage_server::deploy::webhook::sign(HOOKS_KEY.as_bytes(), sent, body.as_bytes());
            reqwest::Client::new()
                .post(format!("{base}/events/demo/hooks"))
                .header("content-type", "application/json")
                .header(pilotage_server::deploy::webhook::TIMESTAMP_HEADER, sent.to_string())
                .header(pilotage_server::deploy::webhook::SIGNATURE_HEADER, signature)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    });
    let statuses = futures::future::join_all(deliveries).await;
    assert!(statuses.iter().all(|status| *status == 202), "{statuses:?}");
    until_firings(store, &names[0], 3, |_| true).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while recorded.all().len() < 3 {
        assert!(Instant::now() < deadline, "the firings did not invoke cap_record");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(store.firings_of("demo", &names[0], 100).await.unwrap().len(), 3, "the quota holds fleet-wide");
    assert_eq!(recorded.all().len(), 3, "{:?}", recorded.all());
    fleet.stop().await;
}

/// Issue 27 item 8 across replicas: the session ceiling is counted per
/// replica (documented), and a session closed at the ceiling to make room
/// ends fleet-wide: no other replica restores it, while the principal's
/// other sessions are served by either replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_closed_at_the_ceiling_ends_on_every_replica() {
    let fleet = Fleet::start_with(2, "PT1H", |settings| settings.max_sessions_per_principal = 2).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fleet", "version": "1"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let on = |replica: usize| format!("{}/mcp", fleet.base(replica));
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let (status, _, session, _) = exchange(&on(0), None, initialize.clone()).await;
        assert_eq!(status, 200, "never locked out");
        let session = session.expect("a session id");
        assert_eq!(exchange(&on(0), Some(&session), initialized.clone()).await.0, 202);
        sessions.push(session);
    }
    // The first, least recently used, was closed; the other two are served
    // by either replica (the second restores them from the store).
    for replica in [0, 1] {
        assert_eq!(exchange(&on(replica), Some(&sessions[0]), list.clone()).await.0, 404, "replica {replica}");
    }
    for session in &sessions[1..] {
        for replica in [1, 0] {
            let (status, _, _, message) = exchange(&on(replica), Some(session), list.clone()).await;
            assert_eq!(status, 200, "replica {replica}");
            assert!(message.is_some_and(|m| m["result"]["tools"].is_array()));
        }
    }
    let stored = fleet.replicas[0].platform.store().session_get(&sessions[0]).await.unwrap();
    assert!(stored.is_none(), "the closed session is gone from the shared store");
    fleet.stop().await;
}
