//! Long Runs as MCP tasks through the real endpoint (issue 30 item 2; the
//! Tasks extension `io.modelcontextprotocol/tasks`, declared by the client
//! at initialize on 2025-11-25 or in each request's `_meta` on the
//! stateless 2026-07-28 revision; Part II §10.1 for the bounds).
//!
//! A Run longer than the execution wall-time bound times out as an
//! ordinary call and completes as a task while the client polls, its
//! result the ordinary execute result; without the extension nothing
//! changes; a task is its creator's alone; `tasks/cancel` stops the Run at
//! its next invocation boundary with what ran in the trace; a 60-second
//! SQL Run completes as a task on PostgreSQL; and on two replicas over one
//! PostgreSQL any replica answers for a task, and a task whose replica is
//! killed is reported failed, never done.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig, ExtensionCapabilities,
    GetTaskParams, GetTaskResult, Implementation, JsonObject, ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::endpoint::{Backend, server, settings};
use crate::support::assert_schema;
use crate::tenancy::{ADMIN_TOKEN, admin};

pub(crate) type Client = RunningService<RoleClient, ClientConfig>;

/// Client capabilities: Pilotage, and the Tasks extension when `tasks`.
fn capabilities(tasks: bool) -> ClientCapabilities {
    let mut extensions = ExtensionCapabilities::new();
    extensions.insert(pilotage_protocol::EXTENSION_ID.to_owned(), JsonObject::new());
    if tasks {
        extensions.insert(rmcp::model::TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
    }
    let mut capabilities = ClientCapabilities::default();
    capabilities.extensions = Some(extensions);
    capabilities
}

/// An rmcp client of `url`: a 2025-11-25 session, or stateless
/// (2026-07-28, capabilities in every request's `_meta`).
pub(crate) async fn connect(url: &str, token: Option<&str>, tasks: bool, stateless: bool) -> Client {
    pilotage_client::install_crypto_provider();
    let mut config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
    let client = ClientConfig::new(capabilities(tasks), Implementation::new("pilotage-task-tests", "1.0"));
    if stateless {
        client
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
            )
            .await
            .expect("a 2026-07-28 client connects")
    } else {
        client.serve(transport).await.expect("a 2025-11-25 client connects")
    }
}

fn params(tool: &str, args: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = args else { panic!("arguments are an object") };
    CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments)
}

/// Starts `tool` as a task; its id.
pub(crate) async fn start_task(client: &Client, tool: &str, args: Value) -> String {
    match client.call_tool_once(params(tool, args)).await.expect("tools/call answers") {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            assert!(created.task.task_id.starts_with("task_") && created.task.task_id.len() == 37);
            assert!(created.task.poll_interval_ms.is_some() && created.task.ttl_ms.is_some());
            created.task.task_id
        }
        other => panic!("a task handle expected, got {other:?}"),
    }
}

pub(crate) async fn get(client: &Client, task_id: &str) -> Result<GetTaskResult, rmcp::ServiceError> {
    client.get_task(GetTaskParams::new(task_id)).await
}

/// Polls until the task ends (within `bound`); every state seen.
pub(crate) async fn until_terminal(
    client: &Client,
    task_id: &str,
    bound: Duration,
) -> (GetTaskResult, Vec<TaskStatus>) {
    let deadline = Instant::now() + bound;
    let mut seen = Vec::new();
    loop {
        let result = get(client, task_id).await.expect("tasks/get answers");
        seen.push(result.task.status());
        if result.task.status().is_terminal() {
            return (result, seen);
        }
        assert!(Instant::now() < deadline, "the task did not end within {bound:?}: {seen:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The execute result a completed task carries.
pub(crate) fn completed_result(result: &GetTaskResult) -> Value {
    match &result.task.payload {
        TaskPayload::Completed { result } => {
            let structured = result.get("structuredContent").cloned().expect("structuredContent");
            let text = result["content"][0]["text"].as_str().expect("a text block");
            assert_eq!(serde_json::from_str::<Value>(text).unwrap(), structured, "the text block is its JSON");
            structured
        }
        other => panic!("completed expected, got {other:?}"),
    }
}

/// The JSON-RPC error message of `error`.
pub(crate) fn rpc_message(error: rmcp::ServiceError) -> (i32, String) {
    match error {
        rmcp::ServiceError::McpError(error) => (error.code.0, error.message.to_string()),
        other => panic!("a JSON-RPC error expected, got {other:?}"),
    }
}

/// A loopback capability service holding each request for `hold`,
/// counting the requests that reached it.
pub(crate) async fn slow_service(hold: Duration) -> (String, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let router = axum::Router::new().route(
        "/slow",
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
    let url = format!("http://{}/slow", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, calls)
}

pub(crate) fn slow_entry(url: &str) -> Value {
    json!({"id": "cap_slow_effect", "kind": "capability", "name": "Slow effect",
           "description": "Records one effect, slowly.",
           "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
           "output_schema": {"type": "object", "properties": {"effect": {"type": "integer"}}},
           "risk": "write", "risk_hints": {"readOnly": false, "destructive": false, "openWorld": false},
           "binding": {"url": url, "timeout_ms": 9000}})
}

/// A workflow calling the slow capability once per item of `input.items`.
pub(crate) fn slow_run(items: usize) -> Value {
    json!({"workflow": {
        "input": {"items": "array"},
        "steps": [{"id": "each", "kind": "for_each", "over": "$.input.items", "as": "item",
                   "do": [{"id": "effect", "kind": "call", "capability": "cap_slow_effect", "with": {"n": "$.item"}}]}],
        "output": {"done": true}},
        "input": {"items": (1..=items).collect::<Vec<_>>()}, "store": true})
}

/// A server whose ordinary Runs are bounded at 1.5 s, with the slow
/// capability registered on the demo tenant; the service's call count and
/// the server's data folder.
async fn slow_server(
    backend: Backend,
    hold: Duration,
) -> (pilotage_server::start::Server, Arc<AtomicU32>, std::path::PathBuf) {
    let mut configured = settings(backend).await;
    let data_dir = configured.data_dir.clone();
    configured.admin_token = Some(ADMIN_TOKEN.to_owned());
    configured.bounds.execution.wall_time_ms = 1_500;
    configured.request_timeout_ms = 12_000;
    let server = server(configured).await;
    let (url, calls) = slow_service(hold).await;
    let (status, body) =
        admin(&server, reqwest::Method::PUT, "/tenants/demo/catalog/entries/cap_slow_effect", Some(slow_entry(&url)))
            .await;
    assert!(status < 300, "{status} {body}");
    (server, calls, data_dir)
}

async fn a_long_run_completes_as_a_task(backend: Backend) {
    let (server, calls, data_dir) = slow_server(backend, Duration::from_millis(600)).await;
    for stateless in [false, true] {
        calls.store(0, Ordering::SeqCst);
        // Without the extension: exactly today's bounded call.
        let plain = connect(&server.mcp_url(), None, false, stateless).await;
        let bounded = plain.call_tool(params("run_workflow", slow_run(4))).await.expect("an ordinary result");
        let bounded = bounded.structured_content.expect("structuredContent");
        assert_eq!(bounded["outcome"]["status"], "timeout", "{bounded}");
        assert!(bounded["outcome"]["error"].as_str().unwrap().contains("1500 ms"), "{bounded}");
        assert!(
            rpc_message(plain.get_task(GetTaskParams::new("task_x")).await.unwrap_err()).0 != 0,
            "tasks/get needs the extension declared"
        );

        // With it: a task at once, working while polled, then the
        // ordinary execute result of a Run that really finished.
        let client = connect(&server.mcp_url(), None, true, stateless).await;
        let started = Instant::now();
        let task_id = start_task(&client, "run_workflow", slow_run(4)).await;
        assert!(started.elapsed() < Duration::from_millis(1_000), "the handle comes at once: {:?}", started.elapsed());
        let (done, seen) = until_terminal(&client, &task_id, Duration::from_secs(20)).await;
        assert!(seen.contains(&TaskStatus::Working), "{seen:?}");
        assert_eq!(done.task.status(), TaskStatus::Completed);
        let result = completed_result(&done);
        assert_schema("ExecuteResponse", &result);
        assert_eq!(result["outcome"]["status"], "success", "{result}");
        assert_eq!(result["output"], json!({"done": true}));
        let run_id = result["run_id"].as_str().unwrap().to_owned();
        assert!(done.task.task.status_message.as_deref().unwrap().contains(&run_id), "{:?}", done.task.task);
        // 4 calls by the task, and up to 3 by the bounded call before it.
        assert!(calls.load(Ordering::SeqCst) >= 4, "{}", calls.load(Ordering::SeqCst));
        // Polling again answers the same; the Run's record is the trace's.
        assert_eq!(completed_result(&get(&client, &task_id).await.unwrap()), result);
        assert!(started.elapsed() > Duration::from_millis(2_400), "4 calls of 600 ms ran: {:?}", started.elapsed());

        // Unknown ids and another principal's id answer alike.
        let (code, unknown) = rpc_message(get(&client, "task_00000000000000000000000000000000").await.unwrap_err());
        assert_eq!(code, -32602);
        let audience = format!("http://{}/mcp", server.addr);
        let dev = pilotage_server::auth::dev::DevTokens::load(&data_dir, audience).unwrap();
        let token = dev.mint("demo", "mallory", &["pilotage:mcp".to_owned()], 600).unwrap();
        let other = connect(&server.mcp_url(), Some(&token), true, stateless).await;
        assert_eq!(rpc_message(get(&other, &task_id).await.unwrap_err()), (code, unknown.clone()));
        let cancel = other.cancel_task(CancelTaskParams::new(&task_id)).await.unwrap_err();
        assert_eq!(rpc_message(cancel), (code, unknown));
        for client in [plain, client, other] {
            let _ = client.cancel().await;
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_completes_as_a_task_on_sqlite() {
    a_long_run_completes_as_a_task(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_completes_as_a_task_on_postgres() {
    a_long_run_completes_as_a_task(Backend::Postgres).await;
}

/// `tasks/cancel` stops the Run before its next invocation: the task ends
/// `cancelled`, the service saw only the calls made before, and the Run's
/// stored trace holds them with the `partial` outcome that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_stops_at_the_next_invocation_boundary() {
    let (server, calls, _) = slow_server(Backend::Sqlite, Duration::from_millis(400)).await;
    let client = connect(&server.mcp_url(), None, true, false).await;
    let task_id = start_task(&client, "run_workflow", slow_run(10)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while calls.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "the Run did not start calling");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.cancel_task(CancelTaskParams::new(&task_id)).await.expect("tasks/cancel acknowledges");
    let (done, _) = until_terminal(&client, &task_id, Duration::from_secs(10)).await;
    assert_eq!(done.task.status(), TaskStatus::Cancelled, "{:?}", done.task);
    let made = calls.load(Ordering::SeqCst);
    assert!((2..=3).contains(&made), "the Run stopped at the next boundary: {made} calls");
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(calls.load(Ordering::SeqCst), made, "nothing is invoked after the task ended");
    let message = done.task.task.status_message.clone().unwrap();
    let run_id =
        message.split("run_id ").nth(1).and_then(|rest| rest.split(')').next()).expect("the run id").to_owned();
    let fetched = crate::endpoint::ok(&client, "trace_workflow", json!({"run_id": run_id})).await;
    assert_eq!(fetched["outcome"]["status"], "partial", "{fetched}");
    assert!(fetched["outcome"]["error"].as_str().unwrap().starts_with("cancelled"), "{fetched}");
    let effects = fetched["trace"]["steps"].as_array().unwrap().iter().filter(|s| s["calls"] == "cap_slow_effect");
    assert_eq!(effects.filter(|s| s["outcome"]["ok"] == true).count() as u32, made, "{fetched}");
    // A second cancel of an ended task changes nothing.
    client.cancel_task(CancelTaskParams::new(&task_id)).await.unwrap();
    assert_eq!(get(&client, &task_id).await.unwrap().task.status(), TaskStatus::Cancelled);
    let _ = client.cancel().await;
    server.stop().await;
}

/// The official TypeScript SDK client in the 2025-11-25 task form
/// (`params.task`, the `tasks` capability, `execution.taskSupport`,
/// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`): one task
/// driven to completion, one cancelled at its next invocation boundary
/// (tests/interop/ts/tasks.mjs has the checks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_drives_tasks_to_completion_and_to_cancellation() {
    let node = tokio::task::spawn_blocking(crate::interop::typescript_sdk).await.expect("the install runs");
    let (server, calls, _) = slow_server(Backend::Sqlite, Duration::from_millis(400)).await;
    crate::interop::sdk_passes_checks(node.to_owned(), "tests/interop/ts/tasks.mjs", server.mcp_url(), 20).await;
    // Three effects of the completed task, and of the cancelled one at
    // least the first but never all ten.
    let made = calls.load(Ordering::SeqCst);
    assert!((4..13).contains(&made), "{made} effects");
    server.stop().await;
}

/// The official Python SDK drives one task to completion and one to
/// cancellation on the stateless revision: mcp 2.3.0 has no task client,
/// so tests/interop/py/tasks.py claims the Tasks extension's
/// `resultType: "task"` through the SDK's own extension interface and polls
/// `tasks/get` through its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_drives_tasks_to_completion_and_to_cancellation() {
    let python = tokio::task::spawn_blocking(crate::interop::python_sdk).await.expect("the install runs");
    let (server, calls, _) = slow_server(Backend::Sqlite, Duration::from_millis(400)).await;
    crate::interop::sdk_passes_checks(python, "tests/interop/py/tasks.py", server.mcp_url(), 13).await;
    let made = calls.load(Ordering::SeqCst);
    assert!((4..13).contains(&made), "{made} effects");
    server.stop().await;
}
