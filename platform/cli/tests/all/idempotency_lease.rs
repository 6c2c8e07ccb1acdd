//! Idempotency after a crash (Part II §6.5.6, §5.7; Part IV §8): a
//! `pilotage serve` process killed with SIGKILL mid-Run leaves its key's
//! claim unrenewed; a retry on a new process over the same store answers,
//! within about the lease, the interrupted outcome (`partial`, side
//! effects may have occurred) and every later retry replays it. The other
//! polarity: a live slow Run's claim keeps being renewed, and its retry
//! waits for the real answer instead of taking it over.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use pilotage_client::{Connection, Reply};
use serde_json::{Value, json};

use crate::endpoint::{Backend, postgres_schema, unique};

const ADMIN_TOKEN: &str = "lease-test-operator-token";
const LEASE_MS: u64 = 2_000;
const RENEW_MS: u64 = 500;

/// A loopback capability service whose `/slow` holds each request for
/// `hold`, counting the requests that reached it (the side effects).
struct SlowService {
    url: String,
    calls: Arc<AtomicU32>,
    arrived: Arc<tokio::sync::Notify>,
}

async fn slow_service(hold: Duration) -> SlowService {
    let calls = Arc::new(AtomicU32::new(0));
    let arrived = Arc::new(tokio::sync::Notify::new());
    let (counter, signal) = (calls.clone(), arrived.clone());
    let router = axum::Router::new().route(
        "/slow",
        axum::routing::post(move || {
            let (counter, signal) = (counter.clone(), signal.clone());
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                signal.notify_waiters();
                tokio::time::sleep(hold).await;
                axum::Json(json!({"effect": n}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/slow", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    SlowService { url, calls, arrived }
}

fn slow_entry(url: &str) -> Value {
    json!({"id": "cap_slow_effect", "kind": "capability", "name": "Slow effect",
           "description": "Records one effect, slowly.",
           "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
           "output_schema": {"type": "object", "properties": {"effect": {"type": "integer"}}},
           "risk": "write", "risk_hints": {"readOnly": false, "destructive": false, "openWorld": false},
           "binding": {"url": url, "timeout_ms": 9000}})
}

fn slow_request(key: &str, n: i64) -> Value {
    json!({"workflow": {"steps": [{"id": "effect", "kind": "call", "capability": "cap_slow_effect", "with": {"n": n}}]},
           "idempotency_key": key, "trace_level": "summary"})
}

async fn put_entry(base: &str, entry: &Value) {
    pilotage_client::install_crypto_provider();
    let response = reqwest::Client::new()
        .put(format!("{base}/admin/v1/tenants/demo/catalog/entries/cap_slow_effect"))
        .bearer_auth(ADMIN_TOKEN)
        .json(entry)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.text().await.unwrap());
}

/// One `pilotage serve` process on a free loopback port.
struct Process {
    child: tokio::process::Child,
    url: String,
}

impl Process {
    fn base(&self) -> String {
        self.url.trim_end_matches("/mcp").to_owned()
    }
}

async fn serve(data_dir: &std::path::Path, database_url: Option<&str>) -> Process {
    serve_with(data_dir, database_url, &[]).await
}

/// [`serve`] with a lease of `LEASE_MS` unless `extra` sets the lease,
/// renewal and execution flags itself.
async fn serve_with(data_dir: &std::path::Path, database_url: Option<&str>, extra: &[&str]) -> Process {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--demo-postgres", "off", "--admin-token", ADMIN_TOKEN])
        .arg("--data-dir")
        .arg(data_dir);
    if extra.is_empty() {
        command.args([
            "--idempotency-lease-ms",
            &LEASE_MS.to_string(),
            "--idempotency-renew-ms",
            &RENEW_MS.to_string(),
        ]);
    }
    command.args(extra);
    if let Some(url) = database_url {
        command.args(["--database-url", url]);
    }
    let (child, url) = crate::support::spawn_serving(&mut command).await;
    Process { child, url }
}

async fn call(url: &str, args: Value) -> Reply {
    let connection = Connection::http(url, None).await.unwrap();
    let reply = connection.call("run_workflow", args).await.expect("an answer");
    connection.close().await;
    reply
}

fn result(reply: Reply) -> Value {
    match reply {
        Reply::Result(value) => value,
        Reply::RequestError(error) => panic!("a request error: {error:?}"),
    }
}

async fn crash_then_retry(backend: Backend) {
    let service = slow_service(Duration::from_secs(8)).await;
    let data_dir = std::env::temp_dir().join(unique("lease-crash"));
    let database_url = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(postgres_schema().await),
    };
    let mut first = serve(&data_dir, database_url.as_deref()).await;
    put_entry(&first.base(), &slow_entry(&service.url)).await;
    let key = "crash-key";

    // The Run is in flight: its call reached the capability service.
    let arrived = service.arrived.notified();
    let in_flight = tokio::spawn({
        let url = first.url.clone();
        async move {
            let connection = Connection::http(&url, None).await.unwrap();
            connection.call("run_workflow", slow_request(key, 1)).await
        }
    });
    tokio::time::timeout(Duration::from_secs(30), arrived).await.expect("the Run reaches the slow capability");
    first.child.start_kill().unwrap();
    let status = first.child.wait().await.unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status:?}");
    let _ = in_flight.await;

    // A new process on the same store: the retry gets the interrupted
    // outcome once the dead process's lease ran out.
    let second = serve(&data_dir, database_url.as_deref()).await;
    let started = Instant::now();
    let (one, two) = tokio::join!(call(&second.url, slow_request(key, 1)), call(&second.url, slow_request(key, 1)));
    let elapsed = started.elapsed();
    let (one, two) = (result(one), result(two));
    assert!(elapsed < Duration::from_millis(LEASE_MS + 5_000), "the retry took {elapsed:?}");
    assert_eq!(one["outcome"]["ok"], false, "{one}");
    assert_eq!(one["outcome"]["status"], "partial", "{one}");
    let error = one["outcome"]["error"].as_str().unwrap();
    assert!(error.contains("interrupted") && error.contains("side effects may have occurred"), "{error}");
    assert!(one["run_id"].as_str().unwrap().starts_with("run_"), "{one}");
    assert!(one.get("output").is_none(), "{one}");
    assert_eq!(one["trace"]["run_id"], one["run_id"], "{one}");
    assert_eq!(one["trace"]["steps"], json!([]), "{one}");
    crate::support::assert_schema("ExecuteResponse", &one);
    // Two retries racing: one took the claim over, both answer the same.
    assert_eq!(one, two);

    // Every later retry replays that same outcome, and nothing ran again.
    let again = result(call(&second.url, slow_request(key, 1)).await);
    assert_eq!(again, one);
    assert_eq!(service.calls.load(Ordering::SeqCst), 1, "a retry ran the interrupted Run again");
    // The key is still bound to its request.
    let Reply::RequestError(conflict) = call(&second.url, slow_request(key, 2)).await else {
        panic!("a changed input under the same key was accepted")
    };
    assert_eq!(conflict.error.kind.as_str(), "idempotency_conflict");
    drop(second);
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_runs_key_answers_interrupted_on_sqlite() {
    crash_then_retry(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_runs_key_answers_interrupted_on_postgres() {
    crash_then_retry(Backend::Postgres).await;
}

/// A Run that outlives several leases keeps its claim: its process renews
/// it, so the retry waits and gets the Run's own answer.
async fn live_claim_is_not_taken_over(backend: Backend) {
    let hold = Duration::from_millis(3 * LEASE_MS);
    let service = slow_service(hold).await;
    let data_dir = std::env::temp_dir().join(unique("lease-live"));
    let database_url = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(postgres_schema().await),
    };
    let server = serve(&data_dir, database_url.as_deref()).await;
    put_entry(&server.base(), &slow_entry(&service.url)).await;
    let key = "live-key";
    let arrived = service.arrived.notified();
    let url = server.url.clone();
    let original = tokio::spawn(async move { call(&url, slow_request(key, 1)).await });
    tokio::time::timeout(Duration::from_secs(30), arrived).await.expect("the Run reaches the slow capability");
    let started = Instant::now();
    let retry = result(call(&server.url, slow_request(key, 1)).await);
    let original = result(original.await.unwrap());
    assert_eq!(original["outcome"]["status"], "success", "{original}");
    assert_eq!(original["trace"]["steps"][0]["output"], json!({"effect": 1}), "{original}");
    assert_eq!(retry, original, "the retry of a live Run did not wait for its answer");
    assert!(started.elapsed() > Duration::from_millis(LEASE_MS), "the Run did not outlive its first lease");
    assert_eq!(service.calls.load(Ordering::SeqCst), 1);
    drop(server);
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_runs_claim_is_renewed_not_taken_over_on_sqlite() {
    live_claim_is_not_taken_over(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_runs_claim_is_renewed_not_taken_over_on_postgres() {
    live_claim_is_not_taken_over(Backend::Postgres).await;
}

/// Issue 27 item 2: the first retry after a crash gets the recorded
/// outcome even when the lease is longer than the Run's wall time (it
/// waited the wall time out and answered `internal … not finished`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_retry_after_a_crash_waits_out_a_long_lease() {
    let service = slow_service(Duration::from_secs(8)).await;
    let data_dir = std::env::temp_dir().join(unique("lease-long"));
    // The lease outlasts the wall time and the old wait (wall time + 10 s)
    // by more than a process start.
    let flags = ["--idempotency-lease-ms", "20000", "--idempotency-renew-ms", "5000", "--execute-timeout-ms", "1000"];
    let mut first = serve_with(&data_dir, None, &flags).await;
    put_entry(&first.base(), &slow_entry(&service.url)).await;
    let arrived = service.arrived.notified();
    let url = first.url.clone();
    let in_flight = tokio::spawn(async move { call(&url, slow_request("long-lease", 1)).await });
    tokio::time::timeout(Duration::from_secs(30), arrived).await.expect("the Run reaches the slow capability");
    first.child.start_kill().unwrap();
    first.child.wait().await.unwrap();
    let _ = in_flight.await;
    let second = serve_with(&data_dir, None, &flags).await;
    let retry = result(call(&second.url, slow_request("long-lease", 1)).await);
    assert_eq!(retry["outcome"]["status"], "partial", "{retry}");
    assert_eq!(result(call(&second.url, slow_request("long-lease", 1)).await), retry);
    drop(second);
    let _ = std::fs::remove_dir_all(&data_dir);
}

/// Issue 27 item 2 across two replicas: replica 1 holds a key on a slow
/// Run and is paused (SIGSTOP) past its lease; a retry on replica 2 takes
/// the key over and answers `partial`. Resumed, replica 1 finishes the
/// Run, but its claim is fenced: its caller gets the same recorded
/// `partial`, the stored Run says `partial` too (with the step that
/// really ran), and nothing ran twice. One Run, one outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_replica_answers_the_outcome_recorded_for_its_key() {
    let service = slow_service(Duration::from_secs(6)).await;
    let data_dir = std::env::temp_dir().join(unique("lease-paused"));
    let database_url = postgres_schema().await;
    let first = serve(&data_dir, Some(&database_url)).await;
    let second = serve(&data_dir, Some(&database_url)).await;
    put_entry(&first.base(), &slow_entry(&service.url)).await;
    // The entry reaches the second replica through the change log.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let connection = Connection::http(&second.url, None).await.unwrap();
        let program = slow_request("probe", 1)["workflow"].clone();
        let valid = matches!(connection.call("validate_workflow", json!({"workflow": program})).await,
            Ok(Reply::Result(value)) if value["valid"] == true);
        connection.close().await;
        if valid {
            break;
        }
        assert!(Instant::now() < deadline, "the second replica never saw the entry");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let key = "paused-key";
    let arrived = service.arrived.notified();
    let url = first.url.clone();
    let original = tokio::spawn(async move { call(&url, slow_request(key, 1)).await });
    tokio::time::timeout(Duration::from_secs(30), arrived).await.expect("the Run reaches the slow capability");
    let pid = first.child.id().unwrap().to_string();
    let signal = |name: &str| {
        let status = std::process::Command::new("kill").args([name, &pid]).status().expect("kill runs");
        assert!(status.success(), "kill {name}");
    };
    signal("-STOP");
    let retry = result(call(&second.url, slow_request(key, 1)).await);
    signal("-CONT");
    assert_eq!(retry["outcome"]["status"], "partial", "{retry}");
    let original = result(original.await.unwrap());
    assert_eq!(original, retry, "the paused replica's caller got another outcome");
    assert_eq!(result(call(&first.url, slow_request(key, 1)).await), retry);
    // The stored Run has the same outcome, and the step that ran.
    let run_id = retry["run_id"].as_str().unwrap();
    let connection = Connection::http(&second.url, None).await.unwrap();
    let Ok(Reply::Result(fetched)) =
        connection.call("trace_workflow", json!({"run_id": run_id, "trace_level": "full"})).await
    else {
        panic!("the Run is fetchable")
    };
    connection.close().await;
    assert_eq!(fetched["outcome"], retry["outcome"], "{fetched}");
    assert_eq!(fetched["trace"]["steps"][0]["output"], json!({"effect": 1}), "{fetched}");
    assert_eq!(service.calls.load(Ordering::SeqCst), 1, "nothing ran twice");
    drop((first, second));
    let _ = std::fs::remove_dir_all(&data_dir);
}
