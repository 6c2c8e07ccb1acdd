//! What a tenant's policy on risk costs (issue 28). Run with
//! `cargo bench -p pilotage-benches --bench policy`.
//!
//! Starts the real server on loopback as the endpoint benchmark does
//! (SQLite, the demo tenant and its capability service) and prints:
//!
//! - **Policy evaluation on an allowed execute**: `run_workflow` of the
//!   10-step program (three HTTP invocations, `store: false`), interleaved
//!   round by round under three policies of the demo tenant, set in
//!   process between calls: none (`{}`, the gate returns at once), rules
//!   that are evaluated and allow (a destructive rule the safe plan does
//!   not meet), and a budget the Run counts against (one conditional
//!   upsert in the store per Run). Medians and their ratios to the first.
//! - **From Approve to the answer**: an MCP session client that declares
//!   URL-mode elicitation calls a destructive workflow the policy holds;
//!   its elicitation handler answers `accept`, and 300 ms later the
//!   approval is decided in the store (what the page and the admin API
//!   write). Printed: the time from that write to the call's answer
//!   (the server's wait reads the store every 200 ms, then runs the
//!   execute once more), and the time of the same execute answered at
//!   once (approval already made), to tell the wait from the Run.

/// The allocator the `pilotage` binary runs with (see its `main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod workload;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pilotage_client::{Connection, Reply};
use pilotage_server::settings::Settings;
use pilotage_server::start::Server;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ExtensionCapabilities, Implementation, UrlElicitationCapability,
};
use serde_json::{Value, json};

const ROUNDS: usize = 300;
const APPROVALS: usize = 20;

fn median(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

async fn execute(connection: &Connection) -> Value {
    let args = json!({"workflow": workload::ten_step_program(0), "input": workload::input(), "store": false});
    match connection.call("run_workflow", args).await.expect("the server answers") {
        Reply::Result(value) => value,
        Reply::RequestError(error) => panic!("{error:?}"),
    }
}

fn policy(value: Value) -> pilotage_server::policy::Policy {
    serde_json::from_value(value).expect("a policy")
}

async fn evaluation(server: &Server, connection: &Connection) {
    let tenant = server.platform.tenant("demo").expect("the demo tenant");
    let policies = [
        ("none ({})", policy(json!({}))),
        (
            "rules, allowed",
            policy(json!({"rules": [
            {"risk": "destructive", "decision": "approve"},
            {"risk": "write", "decision": "deny", "scopes": ["intern"]}]})),
        ),
        (
            "a budget counted",
            policy(json!({"budgets": [{"risk": "read_only", "runs": 1_000_000_000u64, "window_s": 86400}]})),
        ),
    ];
    // The figures are of the 10-step program the endpoint bench uses.
    let validation = match connection
        .call("validate_workflow", json!({"workflow": workload::ten_step_program(0)}))
        .await
        .expect("the server answers")
    {
        Reply::Result(value) => value,
        Reply::RequestError(error) => panic!("{error:?}"),
    };
    assert_eq!(validation["plan"]["steps"].as_array().map(Vec::len), Some(workload::STEPS), "{validation}");
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); policies.len()];
    for (_, chosen) in &policies {
        tenant.set_policy(chosen.clone());
        assert_eq!(execute(connection).await["outcome"]["status"], "success");
    }
    for _ in 0..ROUNDS {
        for (index, (_, chosen)) in policies.iter().enumerate() {
            tenant.set_policy(chosen.clone());
            let started = Instant::now();
            std::hint::black_box(execute(connection).await);
            samples[index].push(started.elapsed());
        }
    }
    tenant.set_policy(policy(json!({})));
    let medians: Vec<f64> = samples.iter_mut().map(|s| median(s)).collect();
    println!(
        "policy evaluation on an allowed execute (10 steps, 3 HTTP invocations, unstored), {ROUNDS} interleaved rounds:"
    );
    for ((name, _), value) in policies.iter().zip(&medians) {
        println!("  {name:<18} median {value:>8.1} µs, ratio to none {:.3}", value / medians[0]);
    }
}

/// Answers every URL elicitation with `accept` and, 300 ms later, decides
/// the approval in the store, recording when.
struct Reviewer {
    info: ClientConfig,
    server_store: pilotage_store::Store,
    decided_at: Arc<Mutex<Option<Instant>>>,
}

impl rmcp::ClientHandler for Reviewer {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if let ElicitRequestParams::UrlElicitationParams { elicitation_id, .. } = request {
            let store = self.server_store.clone();
            let decided_at = self.decided_at.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let now = pilotage_engine::clock::system_now_ms();
                let decision =
                    pilotage_store::ApprovalDecision { state: "approved", by: "bench", from: "127.0.0.1", now_ms: now };
                *decided_at.lock().expect("the lock") = Some(Instant::now());
                assert!(store.approval_decide("demo", &elicitation_id, &decision).await.expect("the store answers"));
            });
        }
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }
}

fn cancel(step: &str) -> serde_json::Map<String, Value> {
    json!({"workflow": {"steps": [{"id": step, "kind": "call", "capability": "cap_cancel_order", "with": {"order_id": "o-1001"}}],
                        "output": format!("$.steps.{step}.output.status")}})
    .as_object()
    .expect("an object")
    .clone()
}

async fn approve_to_answer(server: &Server, connection: &Connection) {
    let tenant = server.platform.tenant("demo").expect("the demo tenant");
    tenant.set_policy(policy(json!({"rules": [{"risk": "destructive", "decision": "approve"}]})));
    let mut capabilities = ClientCapabilities::default();
    let mut extensions = ExtensionCapabilities::new();
    extensions.insert(pilotage_protocol::EXTENSION_ID.to_owned(), serde_json::Map::new());
    capabilities.extensions = Some(extensions);
    capabilities.elicitation = Some(ElicitationCapability::new().with_url(UrlElicitationCapability::new()));
    let decided_at = Arc::new(Mutex::new(None));
    let reviewer = Reviewer {
        info: ClientConfig::new(capabilities, Implementation::new("pilotage-bench-policy", "1.0")),
        server_store: server.platform.store().clone(),
        decided_at: decided_at.clone(),
    };
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(server.mcp_url());
    let client = reviewer.serve(transport).await.expect("a session");
    let (mut waits, mut direct) = (Vec::new(), Vec::new());
    for round in 0..APPROVALS {
        let step = format!("wait_{round}");
        let answer = client
            .call_tool(CallToolRequestParams::new("run_workflow").with_arguments(cancel(&step)))
            .await
            .expect("an answer");
        let answered = Instant::now();
        let status = answer.structured_content.as_ref().map(|s| s["outcome"]["status"].clone());
        assert_eq!(status, Some(json!("success")), "{answer:?}");
        let decided = decided_at.lock().expect("the lock").take().expect("a decision was made");
        waits.push(answered - decided);
        // The same kind of request from a client that cannot be shown
        // the page: held, approved in the store, sent again: the Run alone.
        let step = format!("direct_{round}");
        let arguments = Value::Object(cancel(&step));
        let held = match connection.call("run_workflow", arguments.clone()).await.expect("an answer") {
            Reply::Result(value) => value,
            Reply::RequestError(error) => panic!("{error:?}"),
        };
        let id = held["approval"]["id"].as_str().expect("held for approval").to_owned();
        let now = pilotage_engine::clock::system_now_ms();
        let decision =
            pilotage_store::ApprovalDecision { state: "approved", by: "bench", from: "127.0.0.1", now_ms: now };
        assert!(server.platform.store().approval_decide("demo", &id, &decision).await.expect("the store answers"));
        let started = Instant::now();
        let again = connection.call("run_workflow", arguments).await.expect("an answer");
        direct.push(started.elapsed());
        assert!(matches!(&again, Reply::Result(value) if value["outcome"]["status"] == "success"), "{again:?}");
    }
    tenant.set_policy(policy(json!({})));
    let _ = client.cancel().await;
    println!(
        "from Approve to the waiting call's answer, {APPROVALS} approvals: median {:.1} ms (the same execute, already approved: median {:.1} ms)",
        median(&mut waits) / 1000.0,
        median(&mut direct) / 1000.0
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let settings = Settings {
        listen: "127.0.0.1:0".parse().expect("an address"),
        data_dir: std::env::temp_dir().join(format!("pilotage-bench-policy-{}", std::process::id())),
        demo_postgres: "off".to_owned(),
        ..Settings::default()
    };
    let data_dir = settings.data_dir.clone();
    let server = runtime.block_on(workload::start_demo_server(settings));
    let connection = runtime.block_on(Connection::http(&server.mcp_url(), None)).expect("connects");
    runtime.block_on(evaluation(&server, &connection));
    runtime.block_on(approve_to_answer(&server, &connection));
    runtime.block_on(async {
        connection.close().await;
        server.stop().await;
    });
    let _ = std::fs::remove_dir_all(data_dir);
}
