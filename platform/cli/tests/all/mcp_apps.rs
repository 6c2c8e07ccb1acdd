//! MCP Apps (SEP-1865, specification 2026-01-26) through the real endpoint
//! and a real browser: every Language's validate tool declares the plan
//! view and its run and trace tools the Run view (`_meta.ui.resourceUri`,
//! and the deprecated `ui/resourceUri`), their program declarations kept;
//! both `ui://` views list and read as `text/html;profile=mcp-app` with a
//! CSP that allows no domain; then a host page built on the official SDK's
//! `AppBridge` (`tests/interop/apps`, bundled by esbuild into
//! `target/interop-apps/host.js`) renders each view in a sandboxed frame in
//! headless Chromium with real results of the real server, and the test
//! reads what the view shows: the plan's steps, risks and arms, the
//! diagnostics of an invalid program, the trace's steps and a decision's
//! reason, the plan the Run view obtained by calling validate through the
//! host (relayed here to the server: neither page nor view holds a
//! credential), and the sizes the view reported.
//!
//! The SDK and esbuild are installed on first use with `npm ci` from
//! `tests/interop/apps/package-lock.json` (Node.js and npm must be on the
//! machine), as the interop tests install theirs.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::response::{Html, IntoResponse};
use axum::routing::{get, post};
use pilotage_test_support::browser::Browser;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};

use crate::endpoint::{Backend, call, client, envelope_agrees, server, settings};
use crate::interop::npm_installed;
use crate::support::{repository, run};

const PLAN_VIEW: &str = "ui://pilotage/plan-view";
const RUN_VIEW: &str = "ui://pilotage/run-view";
const MIME_TYPE: &str = "text/html;profile=mcp-app";
const PILOTAGE: &str = "io.github.jafarsa0/pilotage";

/// The test's host page: the bundled host script and a place for the
/// view's frame.
const HOST_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>MCP Apps test host</title></head>
<body><main><h1>MCP Apps test host</h1><div id="views"></div></main>
<script src="/host.js"></script></body></html>"#;

/// A workflow/v1 program with a branch on the demo's gold customer: a read,
/// then a write on the taken arm and a read on the other.
fn branching_program() -> Value {
    json!({
        "steps": [
            {"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "42"}},
            {"id": "tier", "kind": "branch", "if": {"eq": ["$.steps.profile.output.tier", "gold"]},
             "then": [{"id": "flag", "kind": "call", "capability": "cap_flag_order",
                       "with": {"order_id": "o-1003", "reason": "gold customer"}}],
             "else": [{"id": "outbox", "kind": "call", "capability": "cap_read_outbox"}]}
        ],
        "output": {"name": "$.steps.profile.output.name"}
    })
}

/// The host script, bundled once per test process from
/// `tests/interop/apps/host.mjs` after the SDK is installed.
fn host_bundle() -> PathBuf {
    static BUNDLE: OnceLock<PathBuf> = OnceLock::new();
    BUNDLE
        .get_or_init(|| {
            npm_installed("tests/interop/apps", "@modelcontextprotocol/ext-apps", "the MCP Apps SDK and esbuild");
            let root = repository();
            let esbuild = root.join("tests/interop/apps/node_modules/.bin/esbuild");
            let bundle = root.join("target/interop-apps/host.js");
            run(
                esbuild.to_str().expect("a UTF-8 path"),
                &[
                    "tests/interop/apps/host.mjs",
                    "--bundle",
                    "--format=iife",
                    "--log-level=warning",
                    &format!("--outfile={}", bundle.display()),
                ],
            )
            .unwrap_or_else(|error| panic!("bundling the host page failed: {error}"));
            bundle
        })
        .clone()
}

/// The test host's state: the MCP client it relays the view's `tools/call`
/// through, and the names of the tools relayed.
#[derive(Clone)]
struct Host {
    peer: rmcp::Peer<RoleClient>,
    script: Arc<String>,
    relayed: Arc<Mutex<Vec<String>>>,
}

/// `POST /relay {method, params}`: a view's `tools/call`, made on the real
/// server by the test's own client; `{result}` or `{error: {message}}`.
async fn relay(State(host): State<Host>, Json(body): Json<Value>) -> Json<Value> {
    let answer = match body["method"].as_str() {
        Some("tools/call") => match serde_json::from_value::<CallToolRequestParams>(body["params"].clone()) {
            Ok(params) => {
                host.relayed.lock().unwrap().push(params.name.to_string());
                match host.peer.call_tool(params).await {
                    Ok(result) => Ok(serde_json::to_value(result).unwrap()),
                    Err(error) => Err(error.to_string()),
                }
            }
            Err(error) => Err(format!("bad tools/call params: {error}")),
        },
        other => Err(format!("the test host relays tools/call only, not {other:?}")),
    };
    Json(match answer {
        Ok(result) => json!({"result": result}),
        Err(message) => json!({"error": {"message": message}}),
    })
}

/// Serves the host page, its script and the relay on a loopback port;
/// returns the page's URL and the relayed tool names.
async fn serve_host(peer: rmcp::Peer<RoleClient>) -> (String, Arc<Mutex<Vec<String>>>) {
    let script = std::fs::read_to_string(host_bundle()).expect("the bundled host script");
    let relayed = Arc::new(Mutex::new(Vec::new()));
    let host = Host { peer, script: Arc::new(script), relayed: relayed.clone() };
    let app = axum::Router::new()
        .route("/", get(|| async { Html(HOST_PAGE) }))
        .route(
            "/host.js",
            get(|State(host): State<Host>| async move {
                ([("content-type", "text/javascript; charset=utf-8")], host.script.as_str().to_owned()).into_response()
            }),
        )
        .route("/relay", post(relay))
        .with_state(host);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, relayed)
}

/// The text of `selector` once it contains `want` (the view renders after
/// messages cross the bridge): retried for 15 s, then a failure naming what
/// was shown.
async fn shown(browser: &Browser, selector: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = browser.text(selector).await;
        match text {
            Ok(text) if text.contains(want) => return text,
            other if Instant::now() > deadline => panic!("{selector} never showed {want:?}: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// What the view shows of each element matching `selector`: its
/// `data-step`, its rendered text, and whether it is greyed as not taken.
async fn rows(browser: &Browser, selector: &str) -> Vec<(String, String, bool)> {
    let found = browser
        .script(
            "return Array.from(document.querySelectorAll(arguments[0])).map(function (row) {\
               return [row.getAttribute('data-step'), row.innerText, row.classList.contains('pv-untaken')];\
             });",
            vec![json!(selector)],
        )
        .await
        .expect("the rows are read");
    serde_json::from_value(found).expect("rows of [id, text, untaken]")
}

/// Renders `html` in the host page with `tool`'s call: the host sends
/// `input` and `result` once the view is initialized.
async fn mount(browser: &Browser, html: &str, resource_meta: &Value, tool: &Value, input: Value, result: &Value) {
    browser.leave_frames().await.expect("the top-level page");
    let mounted = browser
        .script(
            "return window.pilotageHost.mount(arguments[0]);",
            vec![json!({"html": html, "resourceMeta": resource_meta, "tool": tool,
                        "toolInput": input, "toolResult": result})],
        )
        .await
        .expect("the host mounts the view");
    assert_eq!(mounted, json!(true), "the host delivered the tool result");
    browser.enter_frame("#view").await.expect("the view's frame");
}

/// A tool call's whole result as JSON, after checking its envelope (the
/// text block is the JSON of structuredContent: unchanged by the views).
async fn tool_result(
    client: &rmcp::service::RunningService<RoleClient, rmcp::model::ClientConfig>,
    name: &str,
    args: Value,
) -> (Value, Value) {
    let result = call(client, name, args).await.unwrap_or_else(|error| panic!("{name}: {error}"));
    assert_eq!(result.is_error, Some(false), "{name}: {:?}", result.structured_content);
    let structured = envelope_agrees(&result);
    (serde_json::to_value(&result).unwrap(), structured)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_apps_show_the_real_plan_and_run_in_a_browser() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;

    // Every Language's loop tools declare their view; nothing else does,
    // and the program declarations are unchanged.
    let tools: Vec<Value> =
        client.list_all_tools().await.unwrap().iter().map(|tool| serde_json::to_value(tool).unwrap()).collect();
    let (_, manifest) = tool_result(&client, "pilotage_manifest", json!({})).await;
    let mut expected = std::collections::BTreeMap::new();
    for language in manifest["languages"].as_array().expect("languages") {
        let loop_tools = &language["loop"];
        expected.insert(loop_tools["validate"].as_str().unwrap().to_owned(), PLAN_VIEW);
        for name in [&loop_tools["execute"], &loop_tools["trace"]].into_iter().filter_map(Value::as_str) {
            expected.insert(name.to_owned(), RUN_VIEW);
        }
    }
    assert!(expected.len() >= 6, "two Languages' loop tools at least: {expected:?}");
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        let meta = &tool["_meta"];
        match expected.get(name) {
            Some(view) => {
                assert_eq!(meta["ui"]["resourceUri"], *view, "{name}: {meta}");
                assert_eq!(meta["ui/resourceUri"], *view, "{name}: the deprecated key too");
            }
            None => assert!(meta.get("ui").is_none() && meta.get("ui/resourceUri").is_none(), "{name}: {meta}"),
        }
    }
    let tool = |name: &str| tools.iter().find(|tool| tool["name"] == name).unwrap_or_else(|| panic!("{name}")).clone();
    let (validate_tool, run_tool, trace_tool) =
        (tool("validate_workflow"), tool("run_workflow"), tool("trace_workflow"));
    for declared in [&validate_tool, &run_tool] {
        assert_eq!(declared["_meta"][PILOTAGE], json!({"argument": "workflow", "language": "workflow/v1"}));
    }

    // Both views list and read as MCP App HTML under a CSP of no domain.
    let listed = client.list_all_resources().await.unwrap();
    let mut views = std::collections::BTreeMap::new();
    for uri in [PLAN_VIEW, RUN_VIEW] {
        let entry = listed.iter().find(|resource| resource.uri == uri).unwrap_or_else(|| panic!("{uri} listed"));
        assert_eq!(entry.mime_type.as_deref(), Some(MIME_TYPE), "{uri}");
        let listed_meta = serde_json::to_value(&entry.meta).unwrap();
        let read = client.read_resource(ReadResourceRequestParams::new(uri)).await.unwrap();
        let [ResourceContents::TextResourceContents { uri: read_uri, mime_type, text, meta }] = &read.contents[..]
        else {
            panic!("{uri}: one text content, not {:?}", read.contents);
        };
        assert_eq!((read_uri.as_str(), mime_type.as_deref()), (uri, Some(MIME_TYPE)));
        let meta = serde_json::to_value(meta).unwrap();
        assert_eq!(meta, listed_meta, "{uri}: the listing and the content agree");
        let csp = &meta["ui"]["csp"];
        for key in ["connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"] {
            assert_eq!(csp[key], json!([]), "{uri}: {key} in {meta}");
        }
        assert_eq!(meta["ui"]["prefersBorder"], true, "{uri}");
        assert!(text.starts_with("<!doctype html>") && text.contains("PilotageView"), "{uri}");
        assert!(!text.contains("http://") && !text.contains("https://"), "{uri} names no origin");
        views.insert(uri, (text.clone(), meta));
    }
    // Another ui:// URI is no resource.
    match client.read_resource(ReadResourceRequestParams::new("ui://pilotage/other")).await {
        Err(rmcp::ServiceError::McpError(error)) => assert_eq!(error.code.0, -32002, "{error:?}"),
        other => panic!("an unknown view must be resource-not-found: {other:?}"),
    }

    // Real results: a valid program with a branch, an invalid one, a Run
    // with its full trace, and the Run's trace fetched.
    let program = branching_program();
    let (validated, validated_value) = tool_result(&client, "validate_workflow", json!({"workflow": program})).await;
    assert_eq!(validated_value["valid"], true, "{validated_value}");
    let plan_steps = validated_value["plan"]["steps"].as_array().unwrap().clone();
    let mut bad = program.clone();
    bad["steps"][0]["capability"] = json!("cap_read_user_profil");
    let (invalid, invalid_value) = tool_result(&client, "validate_workflow", json!({"workflow": bad})).await;
    assert_eq!(invalid_value["valid"], false, "{invalid_value}");
    let diagnostic = invalid_value["diagnostics"][0].clone();
    let run_input = json!({"workflow": program, "trace_level": "full"});
    let (executed, executed_value) = tool_result(&client, "run_workflow", run_input.clone()).await;
    assert_eq!(executed_value["outcome"]["ok"], true, "{executed_value}");
    let run_id = executed_value["run_id"].as_str().unwrap().to_owned();
    let trace_steps: Vec<&str> =
        executed_value["trace"]["steps"].as_array().unwrap().iter().map(|step| step["id"].as_str().unwrap()).collect();
    assert_eq!(trace_steps, ["profile", "tier", "flag"]);
    let decision = executed_value["trace"]["steps"][1]["decisions"][0].clone();
    assert_eq!(decision["took"], "then", "{decision}");
    let because = decision["because"].as_str().unwrap().to_owned();
    let (fetched, _) = tool_result(&client, "trace_workflow", json!({"run_id": run_id})).await;

    let (host_url, relayed) = serve_host(client.peer().clone()).await;
    let browser = Browser::start().await.unwrap_or_else(|error| panic!("{error}"));
    browser.goto(&host_url).await.expect("the host page loads");
    assert_eq!(browser.title().await.unwrap(), "MCP Apps test host");

    // The plan view of the valid program: every step with its risk and arm.
    let (plan_html, plan_meta) = &views[PLAN_VIEW];
    mount(&browser, plan_html, plan_meta, &validate_tool, json!({"workflow": program}), &validated).await;
    shown(&browser, "#pv-status", "The program is valid.").await;
    shown(&browser, "#pv-validity", "The program is valid.").await;
    assert_eq!(browser.text("h1").await.unwrap(), "Plan of the program");
    let plan_rows = rows(&browser, "tr.pv-step").await;
    assert_eq!(plan_rows.len(), plan_steps.len(), "{plan_rows:?}");
    for ((id, text, untaken), step) in plan_rows.iter().zip(&plan_steps) {
        assert_eq!(id, step["id"].as_str().unwrap());
        assert!(text.contains(step["risk"].as_str().unwrap()), "{id}: {text} shows its risk {}", step["risk"]);
        assert!(!untaken, "a plan alone greys nothing: {id}");
    }
    let row = |id: &str| plan_rows.iter().find(|row| row.0 == id).unwrap().1.clone();
    assert!(row("flag").contains("tier → then") && row("flag").contains("write"), "{}", row("flag"));
    assert!(row("outbox").contains("tier → else") && row("outbox").contains("safe"), "{}", row("outbox"));
    assert!(browser.text("#pv-max-risk").await.unwrap().contains("write"));

    // The other polarity: an invalid program's diagnostics, and no plan.
    mount(&browser, plan_html, plan_meta, &validate_tool, json!({"workflow": bad}), &invalid).await;
    shown(&browser, "#pv-status", "The program is not valid").await;
    shown(&browser, "#pv-validity", "The program is not valid.").await;
    let diagnostics = browser.text(".pv-diagnostics").await.expect("the diagnostics are shown");
    assert!(diagnostics.contains(diagnostic["code"].as_str().unwrap()), "{diagnostics} / {diagnostic}");
    assert!(diagnostics.contains(diagnostic["message"].as_str().unwrap()), "{diagnostics} / {diagnostic}");
    if let Some(hint) = diagnostic["hint"].as_str() {
        assert!(diagnostics.contains(hint), "{diagnostics} / {hint}");
    }
    assert!(rows(&browser, "tr.pv-step").await.is_empty(), "no plan for an invalid program");

    // The Run view of the Run: the trace, the decision's reason, and the
    // plan it had the host obtain from validate, the arm not taken greyed.
    let (run_html, run_meta) = &views[RUN_VIEW];
    mount(&browser, run_html, run_meta, &run_tool, run_input.clone(), &executed).await;
    shown(&browser, "#pv-status", "Plan from validate_workflow").await;
    assert_eq!(browser.text("h1").await.unwrap(), "Run of the program");
    shown(&browser, "#pv-outcome", executed_value["outcome"]["status"].as_str().unwrap()).await;
    let shown_trace = rows(&browser, ".pv-trace-step").await;
    let shown_ids: Vec<&str> = shown_trace.iter().map(|row| row.0.as_str()).collect();
    assert_eq!(shown_ids, trace_steps, "{shown_trace:?}");
    assert!(shown_trace[0].1.contains("cap_read_user_profile"), "{:?}", shown_trace[0]);
    let shown_because = browser.text(".pv-because").await.expect("the decision is shown");
    assert!(shown_because.contains(&because), "{shown_because:?} / {because:?}");
    assert!(browser.text(".pv-decision").await.unwrap().contains("then"));
    let run_plan = rows(&browser, "tr.pv-step").await;
    assert_eq!(run_plan.len(), plan_steps.len(), "the plan is drawn above the trace: {run_plan:?}");
    let outbox = run_plan.iter().find(|row| row.0 == "outbox").unwrap();
    assert!(outbox.2 && outbox.1.contains("not taken"), "{outbox:?}");
    assert!(run_plan.iter().filter(|row| row.0 != "outbox").all(|row| !row.2), "{run_plan:?}");
    assert_eq!(*relayed.lock().unwrap(), ["pilotage_manifest", "validate_workflow"], "through the host only");
    // The view cannot reach the network under the CSP of its declaration.
    let fetched_from_view = browser
        .script(
            "return fetch(arguments[0]).then(function () { return 'fetched'; }, function () { return 'blocked'; });",
            vec![json!(host_url)],
        )
        .await
        .unwrap();
    assert_eq!(fetched_from_view, "blocked");
    browser.leave_frames().await.unwrap();
    let host_state = browser.script("return window.pilotageHost;", vec![]).await.unwrap();
    let csp = host_state["csp"].as_str().unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'none'"), "{csp}");
    let heights = host_state["heights"].as_array().unwrap();
    assert!(heights.last().and_then(Value::as_f64).is_some_and(|height| height > 300.0), "sizes {heights:?}");
    let calls: Vec<&str> = host_state["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["method"] == "tools/call")
        .filter_map(|entry| entry["name"].as_str())
        .collect();
    assert_eq!(calls, ["pilotage_manifest", "validate_workflow"]);
    browser.screenshot("mcp-app-run-view").await.expect("a screenshot");

    // The trace fetched later: the same trace; no program, so no plan asked.
    mount(&browser, run_html, run_meta, &trace_tool, json!({"run_id": run_id}), &fetched).await;
    shown(&browser, "#pv-status", "when the call carries the program").await;
    let fetched_ids: Vec<String> = rows(&browser, ".pv-trace-step").await.into_iter().map(|row| row.0).collect();
    assert_eq!(fetched_ids, trace_steps);
    assert!(browser.text(".pv-because").await.unwrap().contains(&because));
    assert!(rows(&browser, "tr.pv-step").await.is_empty());
    assert_eq!(relayed.lock().unwrap().len(), 2, "nothing more was called");

    browser.close().await.expect("the session ends");
    let _ = client.cancel().await;
    server.stop().await;
}
