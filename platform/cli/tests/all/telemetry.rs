//! Telemetry through the real endpoints: `/metrics` scraped before and
//! after real MCP calls (validate, execute, a tool error, a carrier error,
//! bound trips and host-guarantee breaches of the hostile component), the
//! exposition checked by `promtool check metrics` and scraped by a real
//! Prometheus server; `/metrics` protected by its token and absent when
//! off; and OpenTelemetry spans exported over OTLP/HTTP by a spawned
//! `pilotage serve` to a receiver here that decodes them with the
//! protocol's own protobuf messages.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use pilotage_server::settings::Settings;
use prost::Message;
use rmcp::model::{CallToolRequestParams, JsonObject, RequestMetaObject};
use serde_json::{Value, json};

use crate::endpoint::{Backend, call, client, ok, request_error, server, settings, spec_program};
use crate::support::HOSTILE;

/// A metrics token long enough for the settings check.
const TOKEN: &str = "scrape-token-0123456789";

/// `GET url` with an optional bearer token: status and body.
async fn get(url: &str, token: Option<&str>) -> (u16, String) {
    pilotage_client::install_crypto_provider();
    let mut request = reqwest::Client::new().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a text body"))
}

/// The value of the sample of `name` whose labels include every pair of
/// `labels`, summed over the samples that match (0 when none does).
fn sample(exposition: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            let series = line.rsplit_once(' ').map_or("", |(series, _)| series);
            let (metric, label_text) = series.split_once('{').unwrap_or((series, ""));
            metric == name && labels.iter().all(|(key, value)| label_text.contains(&format!("{key}=\"{value}\"")))
        })
        .filter_map(|line| line.rsplit_once(' ').and_then(|(_, value)| value.parse::<f64>().ok()))
        .sum()
}

/// `promtool check metrics` on `exposition`: `Err` with its output when it
/// finds a problem. A missing promtool fails the test, naming its package.
fn promtool_check(exposition: &str) -> Result<bool, String> {
    use std::io::Write;
    let child = std::process::Command::new(pilotage_test_support::required_program("promtool", "prometheus"))
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(error) => return Err(format!("promtool cannot start: {error}")),
    };
    child.stdin.take().expect("stdin").write_all(exposition.as_bytes()).map_err(|e| e.to_string())?;
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if output.status.success() && said.trim().is_empty() { Ok(true) } else { Err(said) }
}

/// Settings of a server whose metrics have a listener of their own.
async fn metrics_settings() -> Settings {
    let mut settings = settings(Backend::Sqlite).await;
    settings.metrics_listen = Some("127.0.0.1:0".parse().expect("an address"));
    settings
}

/// The demo tenant's loop tool of `language` whose name starts with
/// `prefix` (`validate`, `execute`).
async fn tool_of(
    client: &rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>,
    prefix: &str,
    language_word: &str,
) -> String {
    let tools = client.list_all_tools().await.expect("tools/list");
    tools
        .iter()
        .map(|tool| tool.name.to_string())
        .find(|name| name.starts_with(prefix) && name.contains(language_word))
        .unwrap_or_else(|| panic!("no {prefix} tool of {language_word}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_move_with_real_calls_and_pass_promtool() {
    let server = server(metrics_settings().await).await;
    let metrics_url = format!("http://{}/metrics", server.metrics_addr.expect("a metrics listener"));
    let hostile = server.platform.engine().load(HOSTILE).expect("the hostile component loads");
    server.platform.install_language("demo", hostile).await;
    let client = client(&server.mcp_url()).await;
    let validate_hostile = tool_of(&client, "validate", "hostile").await;

    let (status, before) = get(&metrics_url, None).await;
    assert_eq!(status, 200, "{before}");
    promtool_check(&before).unwrap_or_else(|problems| panic!("promtool rejects the exposition: {problems}\n{before}"));

    // A valid program validated twice (the second from the cache), run
    // once (three invocations, a retained Run), a request error, a
    // carrier error.
    ok(&client, "validate_workflow", json!({"workflow": spec_program()})).await;
    ok(&client, "validate_workflow", json!({"workflow": spec_program()})).await;
    let run = ok(&client, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}})).await;
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    request_error(&client, "run_workflow", json!({"workflow": spec_program(), "trace_level": "loud"})).await;
    assert!(call(&client, "no_such_tool", json!({})).await.is_err(), "an unknown tool is a JSON-RPC error");
    // The hostile component: the stack and memory bounds, a trap, and a
    // validation defect the host corrects.
    for (program, kind) in
        [("validate:recurse", "bounds_exceeded"), ("validate:alloc", "bounds_exceeded"), ("validate:trap", "internal")]
    {
        let error = request_error(&client, &validate_hostile, json!({"program": program})).await;
        assert_eq!(error["error"]["kind"], kind, "{program}: {error}");
    }
    ok(&client, &validate_hostile, json!({"program": "validate:undeclared_code"})).await;

    let (status, after) = get(&metrics_url, None).await;
    assert_eq!(status, 200);
    promtool_check(&after).unwrap_or_else(|problems| panic!("promtool rejects the exposition: {problems}\n{after}"));

    let moved = |name: &str, labels: &[(&str, &str)]| sample(&after, name, labels) - sample(&before, name, labels);
    let validate_ok = [("method", "tools/call"), ("tool", "validate_workflow"), ("outcome", "ok")];
    assert_eq!(moved("pilotage_mcp_requests_total", &validate_ok), 2.0);
    assert_eq!(moved("pilotage_mcp_request_duration_seconds_count", &validate_ok), 2.0);
    let execute_error = [("method", "tools/call"), ("tool", "run_workflow"), ("outcome", "tool_error")];
    assert_eq!(moved("pilotage_mcp_requests_total", &execute_error), 1.0);
    let unknown = [("method", "tools/call"), ("tool", "_unknown"), ("outcome", "rpc_error")];
    assert_eq!(moved("pilotage_mcp_requests_total", &unknown), 1.0);
    assert!(!after.contains("no_such_tool"), "a name the client made up labels nothing");
    assert_eq!(
        moved("pilotage_validations_total", &[("language", "workflow/v1"), ("result", "valid")]),
        3.0,
        "two validate calls and the execute's revalidation"
    );
    assert!(moved("pilotage_validation_cache_hits_total", &[]) >= 2.0);
    assert!(moved("pilotage_validation_cache_misses_total", &[]) >= 1.0);
    assert_eq!(moved("pilotage_runs_total", &[("language", "workflow/v1"), ("status", "success")]), 1.0);
    assert!(moved("pilotage_wasm_fuel_used_total", &[("call", "validation")]) > 0.0);
    assert!(moved("pilotage_wasm_fuel_used_total", &[("call", "execution")]) > 0.0);
    assert!(moved("pilotage_wasm_call_duration_seconds_count", &[("call", "execution")]) >= 1.0);
    assert_eq!(moved("pilotage_bound_trips_total", &[("call", "validation"), ("bound", "stack")]), 1.0);
    assert_eq!(moved("pilotage_bound_trips_total", &[("call", "validation"), ("bound", "memory")]), 1.0);
    assert_eq!(moved("pilotage_validations_total", &[("language", "hostile/v1"), ("result", "bounds_exceeded")]), 2.0);
    assert_eq!(moved("pilotage_host_guarantee_violations_total", &[("kind", "trap")]), 1.0);
    assert_eq!(moved("pilotage_host_guarantee_violations_total", &[("kind", "validation_defect")]), 1.0);
    assert!(moved("pilotage_invocation_duration_seconds_count", &[("outcome", "ok")]) >= 1.0);
    assert_eq!(moved("pilotage_store_operation_duration_seconds_count", &[("operation", "run_insert")]), 1.0);
    assert!(sample(&after, "pilotage_mcp_sessions_open", &[]) >= 1.0);
    assert!(sample(&after, "pilotage_tenants", &[]) >= 1.0);
    // No series is labelled by session, run or subject; only the
    // `pilotage_tenant_*` families (capacity and usage, each over at most
    // 256 tenants) by tenant, and the usage counters counted this Run.
    for forbidden in ["session=", "session_id=", "run_id=", "subject="] {
        assert!(!after.contains(forbidden), "the exposition holds '{forbidden}'");
    }
    for line in after.lines().filter(|line| !line.starts_with('#')) {
        assert!(
            !(line.contains("tenant=") || line.contains("=\"demo\"")) || line.starts_with("pilotage_tenant_"),
            "a series outside pilotage_tenant_* is labelled by tenant: {line}"
        );
    }
    assert_eq!(moved("pilotage_tenant_runs_total", &[("kind", "immediate"), ("tenant", "demo")]), 1.0);
    drop(client);
    server.stop().await;
}

#[test]
fn promtool_rejects_a_malformed_exposition() {
    // The check the test above relies on can fail: an unterminated label
    // set is refused.
    match promtool_check("# HELP pilotage_x A.\n# TYPE pilotage_x gauge\npilotage_x{a=\"1\" 1\n") {
        Err(_) => {}
        Ok(_) => panic!("promtool accepted a malformed exposition"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_on_the_main_listener_need_the_token() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.metrics_token = Some(TOKEN.to_owned());
    let server = server(settings).await;
    let url = format!("http://{}/metrics", server.addr);
    assert_eq!(get(&url, None).await.0, 401, "no token");
    assert_eq!(get(&url, Some("scrape-token-wrong-value")).await.0, 401, "a wrong token");
    let (status, text) = get(&url, Some(TOKEN)).await;
    assert_eq!(status, 200);
    assert!(text.contains("# TYPE pilotage_mcp_requests_total counter"), "{text}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_metrics_listener_with_a_token_asks_for_it_and_the_main_one_serves_none() {
    let mut settings = metrics_settings().await;
    settings.metrics_token = Some(TOKEN.to_owned());
    let server = server(settings).await;
    let own = format!("http://{}/metrics", server.metrics_addr.expect("a metrics listener"));
    assert_eq!(get(&own, None).await.0, 401);
    assert_eq!(get(&own, Some(TOKEN)).await.0, 200);
    assert_eq!(get(&format!("http://{}/metrics", server.addr), Some(TOKEN)).await.0, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_off_by_default() {
    let server = server(settings(Backend::Sqlite).await).await;
    assert!(server.metrics_addr.is_none());
    assert_eq!(get(&format!("http://{}/metrics", server.addr), None).await.0, 404);
    assert_eq!(get(&format!("http://{}/metrics", server.addr), Some(TOKEN)).await.0, 404);
    server.stop().await;
}

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("its address").port()
}

/// `GET {prometheus}/api/v1/query?query=…`: the first result's value.
async fn prometheus_value(prometheus: &str, query: &str) -> Option<f64> {
    let url = format!("{prometheus}/api/v1/query?query={}", query.replace(' ', "%20"));
    let answer: Value = reqwest::get(&url).await.ok()?.json().await.ok()?;
    answer["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prometheus_server_scrapes_a_running_server() {
    let prometheus_binary = pilotage_test_support::required_program("prometheus", "prometheus");
    pilotage_client::install_crypto_provider();
    let server = server(metrics_settings().await).await;
    let target: SocketAddr = server.metrics_addr.expect("a metrics listener");
    let client = client(&server.mcp_url()).await;
    ok(&client, "validate_workflow", json!({"workflow": spec_program()})).await;

    let folder = std::env::temp_dir().join(crate::endpoint::unique("pilotage-prometheus"));
    std::fs::create_dir_all(&folder).expect("a temporary folder");
    let config = folder.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: pilotage\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .expect("the configuration is written");
    let port = free_port();
    let mut prometheus = tokio::process::Command::new(prometheus_binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", folder.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("prometheus starts");
    let base = format!("http://127.0.0.1:{port}");
    // Scrapes every second; wait (at most two minutes) for the first ones.
    let mut up = None;
    let mut requests = None;
    for _ in 0..240 {
        up = prometheus_value(&base, "up{job=\"pilotage\"}").await;
        requests = prometheus_value(
            &base,
            "sum(pilotage_mcp_requests_total{method=\"tools/call\",tool=\"validate_workflow\",outcome=\"ok\"})",
        )
        .await;
        if up == Some(1.0) && requests.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(up, Some(1.0), "Prometheus scraped the target");
    assert_eq!(requests, Some(1.0), "the validate call is in Prometheus");
    let tenants = prometheus_value(&base, "pilotage_tenants").await;
    assert!(tenants.is_some_and(|tenants| tenants >= 1.0), "{tenants:?}");
    let _ = prometheus.kill().await;
    let _ = std::fs::remove_dir_all(&folder);
    drop(client);
    server.stop().await;
}

/// The spans an OTLP/HTTP receiver got, decoded.
#[derive(Clone, Default)]
struct Received {
    spans: Arc<Mutex<Vec<opentelemetry_proto::tonic::trace::v1::Span>>>,
    services: Arc<Mutex<Vec<String>>>,
}

/// `POST /v1/traces` (protobuf): every span of the request is kept.
async fn traces_post(
    axum::extract::State(received): axum::extract::State<Received>,
    body: axum::body::Bytes,
) -> impl axum::response::IntoResponse {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (axum::http::StatusCode::BAD_REQUEST, Vec::new());
    };
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|resource| resource.attributes.iter())
            .find(|attribute| attribute.key == "service.name")
            .and_then(|attribute| string_value(attribute.value.as_ref()));
        if let Some(service) = service {
            received.services.lock().expect("services").push(service);
        }
        for scope_spans in resource_spans.scope_spans {
            received.spans.lock().expect("spans").extend(scope_spans.spans);
        }
    }
    (axum::http::StatusCode::OK, ExportTraceServiceResponse::default().encode_to_vec())
}

fn string_value(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> Option<String> {
    match value?.value.as_ref()? {
        any_value::Value::StringValue(text) => Some(text.clone()),
        any_value::Value::IntValue(number) => Some(number.to_string()),
        any_value::Value::BoolValue(flag) => Some(flag.to_string()),
        _ => None,
    }
}

fn attributes(span: &opentelemetry_proto::tonic::trace::v1::Span) -> BTreeMap<String, String> {
    span.attributes
        .iter()
        .filter_map(|attribute| string_value(attribute.value.as_ref()).map(|value| (attribute.key.clone(), value)))
        .collect()
}

/// A tools/call carrying `traceparent` in `params._meta`.
async fn traced_call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>,
    name: &str,
    arguments: Value,
    traceparent: &str,
) -> Result<rmcp::model::CallToolResult, rmcp::ServiceError> {
    let mut meta = RequestMetaObject::new();
    meta.set_traceparent(traceparent);
    meta.set_tracestate("pilotage=tests");
    let arguments: JsonObject = match arguments {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
    params.meta = Some(meta);
    client.call_tool(params).await
}

#[tokio::test(flavor = "multi_thread")]
async fn spans_reach_an_otlp_receiver_parented_on_the_clients_traceparent() {
    use tokio::io::AsyncBufReadExt;
    // The receiver.
    let received = Received::default();
    let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let receiver_addr = receiver.local_addr().expect("its address");
    let app = axum::Router::new().route("/v1/traces", axum::routing::post(traces_post)).with_state(received.clone());
    tokio::spawn(async move { axum::serve(receiver, app).await });

    // A real `pilotage serve`, exporting to it, logging JSON, serving the
    // hostile component too (its defects are logged inside a span).
    let data_dir = std::env::temp_dir().join(crate::endpoint::unique("pilotage-otlp"));
    let hostile = pilotage_test_support::guest_file("hostile.wasm").display().to_string();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
        .args(["serve", "--listen", "127.0.0.1:0", "--demo-postgres", "off", "--language", &hostile])
        .arg("--data-dir")
        .arg(&data_dir)
        .arg("--otlp-endpoint")
        .arg(format!("http://{receiver_addr}"))
        .args(["--log-format", "json"])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("PILOTAGE_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("pilotage serve starts");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = crate::support::mcp_url_announced(&mut lines).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let collected = log.clone();
    let draining = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            collected.lock().expect("log").push(line);
        }
    });

    let client = client(&url).await;
    let validate_hostile = tool_of(&client, "validate", "hostile").await;
    let validate_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let execute_trace = "0af7651916cd43dd8448eb211c80319c";
    let error_trace = "5b8efff798038103d269b633813fc60c";
    let defect_trace = "6e0c63257de34c92bf9efcd03927272e";
    let parent = "00f067aa0ba902b7";
    let calls = [
        ("validate_workflow", json!({"workflow": spec_program()}), validate_trace, false),
        ("run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}}), execute_trace, false),
        ("run_workflow", json!({"workflow": spec_program(), "trace_level": "loud"}), error_trace, true),
        (validate_hostile.as_str(), json!({"program": "validate:undeclared_code"}), defect_trace, false),
    ];
    for (tool, arguments, trace, is_error) in calls {
        let answer = traced_call(&client, tool, arguments, &format!("00-{trace}-{parent}-01"))
            .await
            .unwrap_or_else(|error| panic!("{tool} answers: {error}"));
        assert_eq!(answer.is_error, Some(is_error), "{tool} in trace {trace}");
    }
    assert!(call(&client, "no_such_tool", json!({})).await.is_err());
    drop(client);

    // SIGTERM: a graceful stop, which flushes the spans still queued.
    let pid = child.id().expect("the server runs").to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the server stops within a minute")
        .expect("its status");
    assert!(status.success(), "{status}");
    let _ = draining.await;
    let _ = std::fs::remove_dir_all(&data_dir);

    let spans = received.spans.lock().expect("spans").clone();
    assert!(received.services.lock().expect("services").iter().any(|service| service == "pilotage"));
    let trace_of =
        |trace: &str| -> Vec<_> { spans.iter().filter(|span| hex::encode(&span.trace_id) == trace).collect() };
    let server_span = |trace: &str| {
        let found: Vec<_> = trace_of(trace).into_iter().filter(|span| span.kind == SpanKind::Server as i32).collect();
        assert_eq!(
            found.len(),
            1,
            "one server span in trace {trace}: {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        found[0].clone()
    };

    // validate: parented on the client's span, with the MCP and Pilotage
    // attributes, and a validation child.
    let validate = server_span(validate_trace);
    assert_eq!(validate.name, "tools/call validate_workflow");
    assert_eq!(hex::encode(&validate.parent_span_id), parent);
    let attrs = attributes(&validate);
    assert_eq!(attrs["mcp.method.name"], "tools/call");
    assert_eq!(attrs["gen_ai.tool.name"], "validate_workflow");
    assert_eq!(attrs["gen_ai.operation.name"], "execute_tool");
    assert!(!attrs["mcp.session.id"].is_empty());
    assert!(attrs.contains_key("jsonrpc.request.id"));
    assert!(attrs.contains_key("mcp.protocol.version"));
    assert_eq!(attrs["pilotage.language"], "workflow/v1");
    assert_eq!(attrs["pilotage.tenant"], "demo");
    assert!(!attrs["pilotage.catalog_version"].is_empty());
    assert!(!attrs.contains_key("error.type"));
    let validation = trace_of(validate_trace)
        .into_iter()
        .find(|span| span.name == "validate workflow/v1")
        .expect("a validation span");
    assert_eq!(validation.parent_span_id, validate.span_id);
    assert_eq!(attributes(validation)["pilotage.cache"], "miss");

    // execute: run id and outcome status on the server span; the Run and
    // each invocation as children.
    let execute = server_span(execute_trace);
    let attrs = attributes(&execute);
    assert!(attrs["pilotage.run_id"].starts_with("run_"), "{attrs:?}");
    assert_eq!(attrs["pilotage.outcome.status"], "success");
    let run = trace_of(execute_trace).into_iter().find(|span| span.name == "run workflow/v1").expect("a Run span");
    assert_eq!(run.parent_span_id, execute.span_id);
    assert_eq!(attributes(run)["pilotage.run_id"], attrs["pilotage.run_id"]);
    let invocations: Vec<_> =
        trace_of(execute_trace).into_iter().filter(|span| span.name.starts_with("invoke ")).collect();
    assert!(!invocations.is_empty(), "invocation spans");
    for invocation in &invocations {
        assert_eq!(invocation.parent_span_id, run.span_id);
        assert_eq!(invocation.kind, SpanKind::Client as i32);
        assert!(attributes(invocation).contains_key("pilotage.entry.kind"));
    }

    // A request error: error.type tool_error, status error.
    let failed = server_span(error_trace);
    assert_eq!(attributes(&failed)["error.type"], "tool_error");
    assert_eq!(failed.status.as_ref().map(|status| status.code), Some(StatusCode::Error as i32));

    // A carrier error (no traceparent: a trace of its own): the code.
    let rpc_error = spans
        .iter()
        .find(|span| {
            span.kind == SpanKind::Server as i32 && attributes(span).get("error.type").is_some_and(|t| t == "-32602")
        })
        .expect("the unknown tool's span");
    assert_eq!(attributes(rpc_error)["rpc.response.status_code"], "-32602");
    assert!(rpc_error.parent_span_id.is_empty(), "no traceparent, no parent");

    // The host's warning about the hostile validation is logged with the
    // trace id of the request it happened in.
    let log = log.lock().expect("log").clone();
    let defect = log
        .iter()
        .find(|line| line.contains("engine defect corrected by the host"))
        .unwrap_or_else(|| panic!("the defect is logged: {log:?}"));
    let line: Value = serde_json::from_str(defect).expect("a JSON log line");
    assert_eq!(line["trace_id"], defect_trace, "{defect}");
}
