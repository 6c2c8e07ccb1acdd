//! Long Runs as MCP tasks beyond one process (issue 30 item 2;
//! docs/architecture.md, "Long Runs as MCP tasks"): on two `pilotage serve`
//! replicas over one PostgreSQL store, a task started through one replica
//! is polled and cancelled through the other (the cancel crosses through
//! the store to the runner's heartbeat), and a task whose replica is
//! killed is reported `failed`, never `completed`; and a 60-second SQL Run
//! waiting on a lock completes as a task while the client polls, while the
//! same Run without a task is bounded by the execution wall time as today.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{CancelTaskParams, TaskPayload, TaskStatus};
use serde_json::{Value, json};

use crate::endpoint::{Backend, postgres_url, unique};
use crate::fleet::{Process, admin_at, free_port, replica_process};
use crate::sql_endpoint::{acme_world, postgres, scalar};
use crate::tasks::{
    Client, completed_result, connect, get, rpc_message, slow_entry, slow_run, slow_service, start_task, until_terminal,
};

/// How long each call of the slow capability is held.
const HOLD: Duration = Duration::from_millis(800);

/// The server's `LOST_AFTER_MS` (`mcp::tasks`): a working task whose
/// runner has not beaten for this long is lost.
const LOST_AFTER: Duration = Duration::from_secs(10);

/// The server's heartbeat (`mcp::tasks::HEARTBEAT`): how often a runner
/// beats and reads a cancellation asked through another replica.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Two replicas on one fresh PostgreSQL schema, addressed directly (A is
/// `processes[0]`, B `processes[1]`), with the slow capability on the
/// demo tenant and one principal's token good on both.
struct TwoReplicas {
    processes: Vec<Process>,
    /// The owner's token.
    token: String,
    calls: Arc<AtomicU32>,
    data_dir: PathBuf,
    /// The public URL both replicas take as theirs.
    public: String,
}

impl TwoReplicas {
    async fn start() -> TwoReplicas {
        pilotage_client::install_crypto_provider();
        let database_url = crate::endpoint::postgres_schema().await;
        let data_dir = std::env::temp_dir().join(unique("pilotage-tasks-fleet"));
        // Both take one public URL as theirs (where a balancer would
        // answer), so a development token's audience is good on either.
        let public = format!("http://127.0.0.1:{}", free_port());
        let args = ["--public-url", public.as_str()];
        // One after the other: the first creates the shared secrets.
        let mut processes = vec![replica_process(&data_dir, &database_url, &args).await];
        processes.push(replica_process(&data_dir, &database_url, &args).await);
        let (url, calls) = slow_service(HOLD).await;
        let base = format!("http://{}", processes[0].addr);
        let path = "/tenants/demo/catalog/entries/cap_slow_effect";
        let (status, body) = admin_at(&base, reqwest::Method::PUT, path, Some(slow_entry(&url))).await;
        assert!(status < 300, "{status} {body}");
        let mut fleet = TwoReplicas { processes, token: String::new(), calls, data_dir, public };
        fleet.token = fleet.token_of("fleet-task-owner");
        fleet
    }

    /// A development token of the demo tenant's `subject`, good on both.
    fn token_of(&self, subject: &str) -> String {
        let audience = format!("{}/mcp", self.public);
        let dev = pilotage_server::auth::dev::DevTokens::load(&self.data_dir, audience).unwrap();
        dev.mint("demo", subject, &["pilotage:mcp".to_owned()], 600).unwrap()
    }

    /// A client of replica `replica` (0 is A, 1 is B) declaring the Tasks
    /// extension, as `token`'s principal.
    async fn client(&self, replica: usize, token: &str) -> Client {
        connect(&format!("http://{}/mcp", self.processes[replica].addr), Some(token), true, false).await
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Waits until the slow capability was called `count` times.
    async fn until_calls(&self, count: u32) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.calls() < count {
            assert!(Instant::now() < deadline, "the Run made {} calls, not {count}", self.calls());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The run id a task's status message names (`… (run_id <id>) …`).
fn run_id_of(message: &str) -> String {
    message.split("run_id ").nth(1).and_then(|rest| rest.split(')').next()).expect("the run id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_created_on_one_replica_is_polled_and_cancelled_through_the_other() {
    let fleet = TwoReplicas::start().await;
    let a = fleet.client(0, &fleet.token).await;
    let b = fleet.client(1, &fleet.token).await;
    let task_id = start_task(&a, "run_workflow", slow_run(20)).await;

    // B reads the task A runs: working, while the calls go on.
    let mut seen = Vec::new();
    while fleet.calls() < 2 {
        seen.push(get(&b, &task_id).await.expect("B answers for A's task").task.status());
        assert!(seen.len() < 100, "the Run did not call: {seen:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!seen.is_empty() && seen.iter().all(|status| *status == TaskStatus::Working), "{seen:?}");
    let working = get(&b, &task_id).await.unwrap();
    assert_eq!(working.task.payload, TaskPayload::Working);
    assert_eq!(working.task.task.status_message.as_deref(), Some("the Run is running"));

    // Another principal gets through B what an unknown id gets.
    let other = fleet.client(1, &fleet.token_of("mallory")).await;
    let unknown = rpc_message(get(&other, "task_00000000000000000000000000000000").await.unwrap_err());
    assert_eq!(unknown.0, -32602);
    assert_eq!(rpc_message(get(&other, &task_id).await.unwrap_err()), unknown);
    assert_eq!(rpc_message(other.cancel_task(CancelTaskParams::new(&task_id)).await.unwrap_err()), unknown);
    assert_eq!(get(&b, &task_id).await.unwrap().task.status(), TaskStatus::Working, "mallory's cancel did nothing");

    // Cancelled through B: A reads the request at its next heartbeat and
    // the Run stops at the invocation after the one in flight.
    let before = fleet.calls();
    let asked = Instant::now();
    b.cancel_task(CancelTaskParams::new(&task_id)).await.expect("tasks/cancel through B acknowledges");
    let (done, _) = until_terminal(&b, &task_id, Duration::from_secs(10)).await;
    let took = asked.elapsed();
    assert_eq!(done.task.status(), TaskStatus::Cancelled, "{:?}", done.task);
    assert_eq!(done.task.payload, TaskPayload::Cancelled);
    // One heartbeat to arrive, the call in flight to end, a poll to see it.
    let bound = HEARTBEAT + HOLD * 2 + Duration::from_millis(1_500);
    assert!(took < bound, "the cancel took {took:?} (bound {bound:?})");
    let made = fleet.calls();
    assert!(made <= before + 2 && made < 20, "{before} calls when cancelled, {made} in all");
    tokio::time::sleep(HEARTBEAT + HOLD).await;
    assert_eq!(fleet.calls(), made, "nothing is invoked after the task ended");
    let message = done.task.task.status_message.clone().unwrap();
    assert!(message.contains("cancelled") && message.ends_with("outcome partial"), "{message}");
    // A, which ran it, says the same.
    assert_eq!(get(&a, &task_id).await.unwrap().task.status(), TaskStatus::Cancelled);

    // The Run's record, fetched through B: partial, cancelled, the calls
    // that ran before the boundary all there.
    let run_id = run_id_of(&message);
    let fetched = crate::endpoint::ok(&b, "trace_workflow", json!({"run_id": run_id})).await;
    assert_eq!(fetched["outcome"]["status"], "partial", "{fetched}");
    assert!(fetched["outcome"]["error"].as_str().unwrap().starts_with("cancelled"), "{fetched}");
    let effects = fetched["trace"]["steps"].as_array().unwrap().iter().filter(|s| s["calls"] == "cap_slow_effect");
    assert_eq!(effects.filter(|s| s["outcome"]["ok"] == true).count() as u32, made, "{fetched}");
    // A second cancel of an ended task changes nothing.
    b.cancel_task(CancelTaskParams::new(&task_id)).await.unwrap();
    assert_eq!(get(&a, &task_id).await.unwrap().task.status(), TaskStatus::Cancelled);
    for client in [a, b, other] {
        let _ = client.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_replica_running_a_task_reports_it_failed_not_completed() {
    let mut fleet = TwoReplicas::start().await;
    let a = fleet.client(0, &fleet.token).await;
    let b = fleet.client(1, &fleet.token).await;
    // 30 calls of 800 ms: far longer than the kill and the wait after it.
    let task_id = start_task(&a, "run_workflow", slow_run(30)).await;
    fleet.until_calls(2).await;
    assert_eq!(get(&b, &task_id).await.unwrap().task.status(), TaskStatus::Working);

    // A dies without a goodbye.
    fleet.processes[0].child.start_kill().unwrap();
    fleet.processes[0].child.wait().await.unwrap();
    let killed = Instant::now();
    let calls_at_kill = fleet.calls();

    // Through B: working until A's last heartbeat is LOST_AFTER old, then
    // failed; never completed.
    let bound = LOST_AFTER + HEARTBEAT + Duration::from_secs(4);
    let mut seen = Vec::new();
    let (failed, failed_after) = loop {
        let polled = get(&b, &task_id).await.expect("B answers for the lost task");
        seen.push(polled.task.status());
        assert_ne!(polled.task.status(), TaskStatus::Completed, "a Run that did not finish is not done: {seen:?}");
        if polled.task.status().is_terminal() {
            break (polled, killed.elapsed());
        }
        assert!(killed.elapsed() < bound, "not reported lost within {bound:?}: {seen:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(failed.task.status(), TaskStatus::Failed, "{:?}", failed.task);
    assert!(seen[0] == TaskStatus::Working && seen.len() > 10, "working first, for a while: {seen:?}");
    // A beat at most a heartbeat before it died: not lost any earlier.
    assert!(failed_after >= LOST_AFTER - HEARTBEAT - Duration::from_millis(500), "lost after {failed_after:?}");
    let message = failed.task.task.status_message.clone().unwrap();
    assert!(message.contains("stopped before its Run finished"), "{message}");
    assert!(message.contains("nothing is reported as done"), "{message}");
    let TaskPayload::Failed { error } = &failed.task.payload else { panic!("{:?}", failed.task.payload) };
    assert_eq!(error.get("code"), Some(&json!(-32603)), "{error:?}");
    assert_eq!(error.get("message").and_then(Value::as_str), Some(message.as_str()), "{error:?}");
    assert!(!error.contains_key("result") && !Value::Object(error.clone()).to_string().contains("success"));

    // It stays failed; a cancel of it changes nothing; nothing ran after.
    b.cancel_task(CancelTaskParams::new(&task_id)).await.unwrap();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let again = get(&b, &task_id).await.unwrap();
        assert_eq!((again.task.status(), again.task.task.status_message), (TaskStatus::Failed, Some(message.clone())));
    }
    assert_eq!(fleet.calls(), calls_at_kill, "the killed replica invoked nothing after its death");
    eprintln!("lost {failed_after:?} after the kill, {} polls, {calls_at_kill} calls", seen.len());
    let _ = b.cancel().await;
    drop(a);
}

/// How long the test holds the lock the SQL Run waits on.
const LOCKED_FOR: Duration = Duration::from_secs(60);

/// `table` locked `ACCESS EXCLUSIVE` in an open transaction of the test's
/// own connection: every statement reading it waits until the commit.
async fn lock(table: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(&postgres_url()).await.unwrap();
    let mut transaction = pool.begin().await.unwrap();
    let statement = format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE");
    sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut *transaction).await.unwrap();
    transaction
}

/// Lock requests on `table` not granted now: statements of other
/// sessions waiting for the test's lock.
async fn waiting_on(table: &str) -> i64 {
    scalar(&format!("SELECT count(*) FROM pg_locks WHERE relation = '{table}'::regclass AND NOT granted")).await
}

/// The issue's check: "A 60-second SQL Run as a task completes while the
/// client polls, and the same Run without a task is bounded as today".
///
/// The data source's own `statement_timeout_ms` (5 s by default) bounds
/// every statement, a task's too: it is raised to 90 s here so only the
/// Run's wall time (5 s for an ordinary call in the tests, the tenant's
/// `task_wall_time_ms`, 10 min, for a task) decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sixty_second_sql_run_completes_as_a_task_and_is_bounded_without_one() {
    let schema = unique("pilotage_task_sql");
    let table = format!("{schema}.waiting");
    postgres(&format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {table} (id integer PRIMARY KEY, label text NOT NULL);
         INSERT INTO {table} VALUES (1, 'one'), (2, 'two'), (3, 'three');"
    ))
    .await;
    let (world, _) = acme_world(Backend::Postgres, &[&schema], json!({})).await;
    let url = world.server.mcp_url();
    let token = world.acme_token("ann", &[]);
    let plain = connect(&url, Some(&token), false, false).await;
    let tasks = connect(&url, Some(&token), true, false).await;
    let query = json!({"query": format!("SELECT id, label FROM {table} ORDER BY id")});
    let rows = json!([{"id": 1, "label": "one"}, {"id": 2, "label": "two"}, {"id": 3, "label": "three"}]);

    // With the data source's default bounds, its 5 s statement timeout
    // stops a task's statement too: a task lengthens the Run's wall time,
    // not the operator's other bounds.
    let held = lock(&table).await;
    let started = Instant::now();
    let task_id = start_task(&tasks, "run_sql", query.clone()).await;
    let (done, _) = until_terminal(&tasks, &task_id, Duration::from_secs(20)).await;
    let stopped = completed_result(&done);
    assert_eq!(stopped["outcome"]["ok"], false, "{stopped}");
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}: {stopped}", started.elapsed());
    held.commit().await.unwrap();

    // The operator raises the statement timeout above the Run's length.
    let (status, body) = crate::tenancy::admin(
        &world.server,
        reqwest::Method::PUT,
        "/tenants/acme/data-sources/ledger",
        Some(json!({"url": postgres_url(), "schemas": [schema], "bounds": {"statement_timeout_ms": 90_000}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Without a task: bounded by the execution wall time, as today.
    let held = lock(&table).await;
    let started = Instant::now();
    let bounded = crate::endpoint::ok(&plain, "run_sql", query.clone()).await;
    let bounded_took = started.elapsed();
    assert_eq!(bounded["outcome"]["status"], "timeout", "{bounded}");
    assert!(bounded_took < Duration::from_secs(15), "the bounded Run took {bounded_took:?}");

    // As a task: working all the while it waits, polled every half second,
    // and done with the rows once the lock is released after 60 s.
    let started = Instant::now();
    let task_id = start_task(&tasks, "run_sql", query.clone()).await;
    let mut polls = Vec::new();
    let mut waited = 0;
    while started.elapsed() < LOCKED_FOR {
        polls.push(get(&tasks, &task_id).await.expect("tasks/get answers").task.status());
        if polls.len() % 20 == 10 {
            waited = waited.max(waiting_on(&table).await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(polls.len() > 60 && polls.iter().all(|status| *status == TaskStatus::Working), "{polls:?}");
    assert!(waited >= 1, "the task's statement was seen waiting on the lock");
    held.commit().await.unwrap();
    let (done, _) = until_terminal(&tasks, &task_id, Duration::from_secs(15)).await;
    let finished = completed_result(&done);
    assert_eq!(finished["outcome"]["status"], "success", "{finished}");
    assert_eq!(finished["output"], rows, "{finished}");
    let took = started.elapsed();
    assert!(took >= LOCKED_FOR, "{took:?}");
    eprintln!("the task Run took {took:?} over {} polls; without a task, {bounded_took:?}", polls.len());
    for client in [plain, tasks] {
        let _ = client.cancel().await;
    }
    world.server.stop().await;
}
