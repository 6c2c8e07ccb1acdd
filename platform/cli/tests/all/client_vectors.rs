//! The two client-target conformance vectors, run against the reference
//! client: PIL-CLIENT-GATE-DESTRUCTIVE-B against the real server, and
//! PIL-CLIENT-VALUES-NOT-FAILURES-G against a scripted server that answers
//! with invalid programs, failed Runs, an unknown status and an unknown
//! request-error kind.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pilotage_client::gate::Refuse;
use pilotage_client::{ClientError, Connection, KNOWN_STATUSES, PilotageClient, RunOptions};
use pilotage_protocol::request_error::RequestErrorKind;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::endpoint::{Backend, server, settings};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pil_client_gate_destructive_b() {
    let server = server(settings(Backend::Sqlite).await).await;
    let connection = Connection::http(&server.mcp_url(), None).await.unwrap();
    let mut client = PilotageClient::discover(connection).await.unwrap();
    let program = json!({"steps": [{"id": "cancel", "kind": "call", "capability": "cap_cancel_order", "with": {"order_id": "o-1001"}}]});
    let report = client.run("workflow/v1", program, None, &RunOptions::default(), &Refuse).await.unwrap();
    let approval = report.approval.expect("approval was requested outside the Model");
    assert!(approval.risk.hints().unwrap().destructive);
    assert!(!report.approved);
    assert!(report.executions.is_empty(), "the Host transmitted the execute request");
    let (_, world) = server.demo_world.as_ref().unwrap();
    assert!(!world.calls().contains_key("/orders/cancel"));
    client.close().await;
    server.stop().await;
}

/// A server that answers from a script: the first validation finds an
/// error, later ones pass; execute fails with a status no client knows;
/// the trace tool answers a request-error kind no client knows.
#[derive(Clone, Default)]
struct Scripted {
    validations: Arc<AtomicU32>,
    executions: Arc<AtomicU32>,
}

fn object(value: Value) -> Arc<rmcp::model::JsonObject> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

fn declared(name: &str) -> Tool {
    let mut meta = MetaObject::new();
    meta.insert("io.github.jafarsa0/pilotage".into(), json!({"argument": "workflow", "language": "toy/v1"}));
    Tool::new(name.to_owned(), "scripted", object(json!({"type": "object"}))).with_meta(meta)
}

impl ServerHandler for Scripted {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let plain = |name: &str| Tool::new(name.to_owned(), "scripted", object(json!({"type": "object"})));
        Ok(ListToolsResult::with_all_items(vec![
            plain("pilotage_manifest"),
            plain("pilotage_get_guide"),
            declared("validate_toy"),
            declared("run_toy"),
            plain("trace_toy"),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let result = match request.name.as_ref() {
            "pilotage_manifest" => CallToolResult::structured(json!({"pilotage": "1.1", "languages": [{
                "name": "toy/v1", "title": "Toy", "guides": "pilotage_get_guide",
                "loop": {"validate": "validate_toy", "execute": "run_toy", "trace": "trace_toy"},
                "capabilities": {"guides": true, "validate": true, "plan": true, "execute": true, "trace_fetch": true},
                "locator": "json-pointer", "execution": "immediate", "trace": "full", "retention": "PT1H",
                "future_member": {"ignored": true}
            }]})),
            "validate_toy" => {
                let n = self.validations.fetch_add(1, Ordering::SeqCst);
                if n == 0 {
                    CallToolResult::structured(json!({"valid": false, "diagnostics": [
                        {"severity": "error", "code": "toy_error", "path": "/steps", "message": "fix me"}]}))
                } else {
                    CallToolResult::structured(json!({"valid": true, "diagnostics": [], "plan": {"steps": [],
                        "max_risk": "safe", "max_risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}}}))
                }
            }
            "run_toy" => {
                self.executions.fetch_add(1, Ordering::SeqCst);
                CallToolResult::structured(
                    json!({"run_id": "run_toy_1", "outcome": {"ok": false, "status": "melted", "error": "the toy melted"},
                    "trace": {"run_id": "run_toy_1", "level": "full", "steps": []}}),
                )
            }
            "trace_toy" => {
                CallToolResult::structured_error(json!({"error": {"kind": "rate_limited", "message": "slow down"}}))
            }
            other => return Err(McpError::invalid_params(format!("Unknown tool: {other}"), None)),
        };
        Ok(result.into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pil_client_values_not_failures_g() {
    let scripted = Scripted::default();
    let factory = scripted.clone();
    let service = StreamableHttpService::new(
        move || Ok(factory.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = axum::Router::new().route_service("/mcp", service);
    let serving = tokio::spawn(async move { axum::serve(listener, router).await });

    let connection = Connection::http(&format!("http://{addr}/mcp"), None).await.unwrap();
    let mut client = PilotageClient::discover(connection).await.unwrap();
    // valid:false is a value: the loop hands the findings back for
    // revision, with no transport-level retry.
    let report = client.run("toy/v1", json!({"steps": []}), None, &RunOptions::default(), &Refuse).await.unwrap();
    assert_eq!(report.validations.len(), 1);
    assert!(!report.validations[0].valid);
    assert!(report.executions.is_empty());
    assert_eq!(scripted.validations.load(Ordering::SeqCst), 1, "no automatic retry");
    // The revised program is valid; the Run fails with a status no client
    // knows, which reads as partial; the loop completes.
    let report =
        client.run("toy/v1", json!({"steps": ["revised"]}), None, &RunOptions::default(), &Refuse).await.unwrap();
    let execution = report.execution.expect("the Run was executed");
    assert!(!execution.outcome.ok);
    assert_eq!(execution.outcome.effective_status(&KNOWN_STATUSES), "partial");
    assert_eq!(scripted.executions.load(Ordering::SeqCst), 1, "no automatic retry of a failed Run");
    // An unknown request-error kind reads as internal.
    match client.trace("toy/v1", "run_toy_1", None).await {
        Err(ClientError::Request(error)) => assert_eq!(error.error.kind, RequestErrorKind::Internal),
        other => panic!("expected a request error, got {other:?}"),
    }
    client.close().await;
    serving.abort();
}
