//! The main job (`pilotage demo`) runs in the test suite too, as a user
//! runs it: the binary, the same scenarios, the same checks, on both
//! backends.

use crate::endpoint::{Backend, postgres_schema, postgres_url, settings, unique};

/// What one run of `pilotage demo` printed and how it ended.
struct DemoRun {
    /// Its standard output: the story.
    text: String,
    /// The checks that passed (`✓` lines).
    passed: Vec<String>,
    /// The checks that failed (`✗` lines).
    failed: Vec<String>,
    /// Whether it exited with 0.
    succeeded: bool,
}

/// Runs `pilotage demo` on a fresh data folder (and a fresh PostgreSQL
/// schema for `Backend::Postgres`), its SQL part on `demo_postgres`.
async fn run_demo(backend: Backend, demo_postgres: &str) -> DemoRun {
    let data_dir = std::env::temp_dir().join(unique("pilotage-demo"));
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"));
    command.arg("demo").arg("--data-dir").arg(&data_dir).args(["--demo-postgres", demo_postgres]);
    if backend == Backend::Postgres {
        command.args(["--database-url", &postgres_schema().await]);
    }
    let output = command.output().await.expect("pilotage demo runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let lines = |mark: &str| -> Vec<String> {
        text.lines().filter_map(|line| line.trim_start().strip_prefix(mark)).map(str::to_owned).collect()
    };
    let _ = std::fs::remove_dir_all(&data_dir);
    DemoRun {
        passed: lines("✓ "),
        failed: lines("✗ "),
        succeeded: output.status.success(),
        text: format!("{text}\n--- stderr ---\n{}", String::from_utf8_lossy(&output.stderr)),
    }
}

async fn demo_passes(backend: Backend) {
    let report = run_demo(backend, &postgres_url()).await;
    let text = &report.text;
    assert!(report.succeeded && report.failed.is_empty(), "the demo failed:\n{text}");
    assert!(report.passed.len() >= 28, "only {} checks ran:\n{text}", report.passed.len());
    let summary = format!("{} checks passed, 0 failed.", report.passed.len());
    assert!(text.contains(&summary), "the demo does not end with '{summary}':\n{text}");
    for words in [
        "close match: cap_read_user_profile",
        "catalog_drift",
        "took 'then'",
        "claims made by the server",
        "close match: total_amount",
        "rows_matched",
    ] {
        assert!(text.contains(words), "the story never says '{words}':\n{text}");
    }
    automation_story_happened(&report, text);
    // Part I's zero-row result that looks fine, caught by assertions
    // (issue 49 item 3).
    for check in [
        "the misspelt filter runs successfully and returns no rows",
        "the same Run with assertions ends assertion_failed, has-rows observed 0",
        "spelled right, both assertions hold and the Run succeeds",
        // The guides as Agent Skills (issue 49 item 2).
        "the core guide is also the workflow-v1 skill's SKILL.md",
    ] {
        assert!(report.passed.iter().any(|passed| passed.contains(check)), "never passed '{check}':\n{text}");
    }
}

/// The automation story of issue 14 happened, each check passed: the
/// destructive draft stopped at the gate, then held by the tenant's policy
/// and rejected on the approval page, the immediate Run refused, the
/// test runs at 14:03 and 22:30, the deploy, the door opening at night
/// delivered and firing the rule, the light really on, the firing's trace
/// fetched.
fn automation_story_happened(report: &DemoRun, text: &str) {
    for check in [
        "front_door.unlock is destructive",
        "the destructive plan (front_door.unlock) needed approval and was not sent",
        "the tenant's policy is set: destructive plans need a human's approval",
        "the platform held the destructive plan (approval_required, the approval page named) and ran nothing",
        "the approval page showed the plan, front_door.unlock destructive, and took the rejection",
        "the agent is told the human rejected exactly this request (approval_rejected)",
        "an immediate Run of a rule with a trigger is refused",
        "at 14:03 the rule skips, and the decision names the clock",
        "the narration answers from the recorded decision, labelled as interpretation",
        "at 22:30 the light would turn on: the step is marked simulated and the home is unchanged",
        "the rule is installed behind its webhook trigger",
        "the platform accepted the signed delivery (202) and it fires the rule",
        "the rule fired and the porch light is really on (brightness 80)",
        "the fetched trace shows the decision at 22:41 and the real call of porch_light.turn_on",
        "the deployment's page lists the firing and links to its Run page, which holds the decision at 22:41",
    ] {
        assert!(
            report.passed.iter().any(|passed| passed.contains(check)),
            "the automation story never passed '{check}':\n{text}"
        );
    }
    for words in [
        "automation/1",
        "trigger_needs_deploy",
        "because after-22 is false: it is 14:03 in Europe/Paris",
        "simulated true",
        "22:41 in Paris",
        "\"porch-at-night\"",
    ] {
        assert!(text.contains(words), "the automation story never says '{words}':\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_passes_on_sqlite() {
    demo_passes(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_passes_on_postgres() {
    demo_passes(Backend::Postgres).await;
}

/// Without PostgreSQL the demo says so and runs everything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_postgres_the_demo_says_so_and_runs_the_rest() {
    let report = run_demo(Backend::Sqlite, "postgres://postgres@127.0.0.1:1/test").await;
    let text = &report.text;
    assert!(report.succeeded && report.failed.is_empty(), "{text}");
    assert!(text.contains("PostgreSQL is unreachable at 127.0.0.1:1"), "{text}");
    assert!(text.contains("the SQL story is skipped"), "{text}");
    assert!(report.passed.len() >= 23, "{text}");
    automation_story_happened(&report, text);
}

fn pilotage(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_pilotage")).args(args).output().expect("the pilotage binary runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_commands_drive_a_server() {
    let server = crate::endpoint::server(settings(Backend::Sqlite).await).await;
    let url = server.mcp_url();
    let dir = std::env::temp_dir().join(crate::endpoint::unique("client-cli"));
    std::fs::create_dir_all(&dir).unwrap();
    let safe = dir.join("safe.json");
    std::fs::write(&safe, crate::endpoint::spec_program().to_string()).unwrap();
    let destructive = dir.join("destructive.json");
    std::fs::write(
        &destructive,
        serde_json::json!({"steps": [{"id": "cancel", "kind": "call", "capability": "cap_cancel_order", "with": {"order_id": "o-1001"}}]}).to_string(),
    )
    .unwrap();
    let url_arg = url.as_str();
    let tools = tokio::task::spawn_blocking({
        let url = url.clone();
        move || pilotage(&["client", "tools", &url])
    })
    .await
    .unwrap();
    assert!(tools.status.success(), "{}", String::from_utf8_lossy(&tools.stderr));
    assert!(String::from_utf8_lossy(&tools.stdout).contains("pilotage_manifest"));

    let (safe_arg, destructive_arg) = (safe.display().to_string(), destructive.display().to_string());
    // `client run` of the safe program for user 42, with `extra` arguments.
    let run_safe = |extra: &[&str]| {
        let mut args: Vec<String> =
            ["client", "run", url_arg, "workflow/v1", &safe_arg, "--input", r#"{"userId": "42"}"#]
                .map(str::to_owned)
                .to_vec();
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        tokio::task::spawn_blocking(move || pilotage(&args.iter().map(String::as_str).collect::<Vec<_>>()))
    };
    let run = run_safe(&["--store"]).await.unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let response: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(response["output"]["name"], "Amira Hassan");
    let trace = {
        let args = ["client".to_owned(), "trace".into(), url_arg.into(), response["run_id"].as_str().unwrap().into()];
        tokio::task::spawn_blocking(move || pilotage(&args.iter().map(String::as_str).collect::<Vec<_>>()))
            .await
            .unwrap()
    };
    assert!(trace.status.success());

    // --assertions sends x-assertions: a failed one is exit code 5 (the
    // outcome is not ok) with the verdicts in the printed response; a
    // malformed value is refused before connecting to anything.
    let someone_else = r#"[{"id": "someone-else", "target": {"output": "/name"}, "check": {"ne": "Amira Hassan"}}]"#;
    let failed = run_safe(&["--assertions", someone_else]).await.unwrap();
    assert_eq!(failed.status.code(), Some(5), "{}", String::from_utf8_lossy(&failed.stderr));
    let response: serde_json::Value = serde_json::from_slice(&failed.stdout).unwrap();
    assert_eq!(response["outcome"]["status"], "assertion_failed");
    assert_eq!(response["x-assertions"]["verdicts"][0]["observed"], "Amira Hassan");
    let malformed = run_safe(&["--assertions", "[{"]).await.unwrap();
    assert_eq!(malformed.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&malformed.stderr).contains("--assertions is neither a JSON file nor JSON text"));

    // Not interactive and no --approve: the destructive plan is refused.
    let refused = {
        let args = ["client".to_owned(), "run".into(), url_arg.into(), "workflow/v1".into(), destructive_arg.clone()];
        tokio::task::spawn_blocking(move || pilotage(&args.iter().map(String::as_str).collect::<Vec<_>>()))
            .await
            .unwrap()
    };
    assert_eq!(refused.status.code(), Some(4), "{}", String::from_utf8_lossy(&refused.stderr));
    let (_, world) = server.demo_world.as_ref().unwrap();
    assert!(!world.calls().contains_key("/orders/cancel"), "the gate let a destructive Run through");
    let approved = {
        let args = [
            "client".to_owned(),
            "run".into(),
            url_arg.into(),
            "workflow/v1".into(),
            destructive_arg,
            "--approve".into(),
            "destructive".into(),
        ];
        tokio::task::spawn_blocking(move || pilotage(&args.iter().map(String::as_str).collect::<Vec<_>>()))
            .await
            .unwrap()
    };
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    assert_eq!(world.calls().get("/orders/cancel"), Some(&1));
    server.stop().await;
}

/// `pilotage serve` stops on SIGTERM: a Run in flight finishes and its
/// client gets the answer, then the process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_shuts_down_gracefully_on_sigterm() {
    let dir = std::env::temp_dir().join(crate::endpoint::unique("graceful"));
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"));
    command.args(["serve", "--listen", "127.0.0.1:0", "--demo-postgres", "off", "--data-dir"]).arg(&dir);
    let (mut child, url) = crate::support::spawn_serving(&mut command).await;
    let connection = pilotage_client::Connection::http(&url, None).await.unwrap();
    let waiting =
        serde_json::json!({"steps": [{"id": "w", "kind": "call", "capability": "cap_wait", "with": {"ms": 1500}}]});
    let run = tokio::spawn(async move {
        let reply = connection.call("run_workflow", serde_json::json!({"workflow": waiting})).await;
        connection.close().await;
        reply
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let reply = run.await.unwrap().expect("the Run in flight is answered");
    let pilotage_client::Reply::Result(value) = reply else { panic!("{reply:?}") };
    assert_eq!(value["outcome"]["status"], "success", "{value}");
    let status = tokio::time::timeout(std::time::Duration::from_secs(15), child.wait())
        .await
        .expect("the server exits within 15 s of SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pilotage serve` on a free loopback port and the data folder `dir`, its
/// stdout and stderr piped: the child, its log lines (after the line
/// announcing `/mcp`) and the MCP URL.
async fn serve_with_its_log(
    dir: &std::path::Path,
) -> (tokio::process::Child, tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
        .args(["serve", "--listen", "127.0.0.1:0", "--demo-postgres", "off", "--data-dir"])
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = crate::support::mcp_url_announced(&mut lines).await;
    (child, lines, url)
}

/// `pilotage serve` whose stderr reader is gone (a log shipper that died,
/// `serve 2>&1 | head -2`) still stops on SIGTERM, exiting 0; before, the
/// line it writes on its way down panicked the task that stops it, and it
/// ran on until SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stops_on_sigterm_after_its_log_reader_is_gone() {
    let dir = std::env::temp_dir().join(crate::endpoint::unique("orphaned-log"));
    let (mut child, lines, url) = serve_with_its_log(&dir).await;
    // The readers go away; the server is still serving.
    drop(lines);
    drop(child.stdout.take());
    let health = url.replace("/mcp", "/healthz");
    assert!(reqwest::get(&health).await.unwrap().status().is_success());
    let pid = child.id().unwrap().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let status = tokio::time::timeout(std::time::Duration::from_secs(15), child.wait())
        .await
        .expect("the server exits within 15 s of SIGTERM, its log reader gone")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 2026-07-28 request to `url` for `method` with `params`, as a client of
/// that revision sends it (no session; the revision and client in `_meta`).
fn request_2026(url: &str, id: u64, method: &str, mut params: serde_json::Value) -> reqwest::RequestBuilder {
    params["_meta"] = serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "closing-client", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .body(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
}

/// Issue 46 item 11: a 2026-07-28 client ends `subscriptions/listen` by
/// closing its stream; the server's log gets no ERROR line for it (it got
/// "failed to send pending response during drain" each time), while the
/// library's other lines still reach the log (a refused read's WARN).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_closing_its_listen_stream_logs_no_error() {
    pilotage_client::install_crypto_provider();
    let dir = std::env::temp_dir().join(unique("closed-stream"));
    let (mut child, mut lines, url) = serve_with_its_log(&dir).await;
    let logged = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = logged.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            sink.lock().unwrap().push(line);
        }
    });

    for id in 1..=3 {
        let listen = serde_json::json!({"notifications": {"toolsListChanged": true}});
        let mut response = request_2026(&url, id, "subscriptions/listen", listen).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let first = response.chunk().await.unwrap().expect("the acknowledgement");
        assert!(String::from_utf8_lossy(&first).contains("subscriptions/acknowledged"));
        drop(response);
    }
    let unknown = serde_json::json!({"uri": "pilotage://guides/nosuch%2Fv9"});
    let refused = request_2026(&url, 9, "resources/read", unknown)
        .header("mcp-name", "pilotage://guides/nosuch%2Fv9")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(refused.contains("nosuch"), "{refused}");
    // The library drains a closed request for up to 2 s.
    tokio::time::sleep(std::time::Duration::from_millis(3_000)).await;
    let lines = logged.lock().unwrap().clone();
    assert!(lines.iter().any(|line| line.contains("WARN") && line.contains("nosuch")), "{lines:#?}");
    assert!(!lines.iter().any(|line| line.contains("ERROR")), "{lines:#?}");
    let _ = child.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
}
