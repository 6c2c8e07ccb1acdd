//! Interoperability with real MCP clients: the official TypeScript SDK
//! (`tests/interop/ts`) and Python SDK (`tests/interop/py`) clients drive
//! the real server over Streamable HTTP through the Part III §9.3–9.4
//! scenario, and must accept every result, request errors included,
//! against the tools' declared `outputSchema` (Part III §6, §7.2). The
//! Python client runs the scenario twice: over the initialize handshake
//! (MCP 2025-11-25) and over `server/discover` (MCP 2026-07-28).
//!
//! The SDKs are installed on first use, into the checkout only: the
//! TypeScript SDK with `npm ci` from `tests/interop/ts/package-lock.json`
//! (again when the lock file is newer than the install), the Python SDK
//! into a virtual environment at `target/interop-py` from
//! `tests/interop/py/requirements.txt`. Node.js, npm and Python 3 must be
//! on the machine; when an install fails the test fails and says why
//! (never a silent skip).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::endpoint::{Backend, server, settings};
use crate::support::{repository, run};

/// Longest time one client script may take; each normally finishes in a
/// few seconds.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

/// The TypeScript SDK client's dependencies, installed with `npm ci` when
/// missing or older than the lock file. Returns the program to run it.
pub fn typescript_sdk() -> &'static str {
    npm_installed("tests/interop/ts", "@modelcontextprotocol/sdk", "the TypeScript MCP SDK");
    "node"
}

/// The npm packages of `folder` (in the checkout), installed with `npm ci`
/// when `package` is missing or the install is older than the lock file.
pub fn npm_installed(folder: &str, package: &str, what: &str) {
    let root = repository().join(folder);
    let installed = root.join("node_modules/.package-lock.json");
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let stale = match (modified(&installed), modified(&root.join("package-lock.json"))) {
        (Some(install), Some(lock)) => lock > install,
        _ => true,
    };
    if stale || !root.join("node_modules").join(package).join("package.json").is_file() {
        run("npm", &["ci", "--prefix", folder, "--no-audit", "--no-fund"])
            .unwrap_or_else(|error| panic!("installing {what} failed: {error} (needs Node.js and npm)"));
    }
}

/// The Python of a virtual environment at `target/interop-py` holding the
/// Python SDK (and PyYAML, for the skills' frontmatter), created and filled
/// from `requirements.txt` when it lacks either.
pub fn python_sdk() -> String {
    crate::support::python_venv(
        "target/interop-py",
        "tests/interop/py/requirements.txt",
        "mcp.client.streamable_http, yaml",
        "the Python MCP SDK",
    )
}

/// What a client script reported.
pub(crate) struct Report {
    pub(crate) status: std::process::ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

fn read_all(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Runs `program script args…` from the repository root, killing it
/// after [`SCRIPT_TIMEOUT`].
pub(crate) fn run_script(program: &str, script: &Path, args: &[String]) -> Report {
    let mut child = Command::new(program)
        .arg(script)
        .args(args)
        .current_dir(repository())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {program} {}: {error}", script.display()));
    let stdout = read_all(child.stdout.take().expect("piped stdout"));
    let stderr = read_all(child.stderr.take().expect("piped stderr"));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the script can be waited for") {
            break status;
        }
        if started.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{program} {} did not finish within {SCRIPT_TIMEOUT:?}; stderr: {}",
                script.display(),
                stderr.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Report { status, stdout: stdout.join().unwrap_or_default(), stderr: stderr.join().unwrap_or_default() }
}

/// Runs `script` with `program` against the MCP endpoint `url` and asserts
/// that every check of the SDK client passed (at least 30 of them: the
/// main scenario).
pub async fn sdk_passes(program: String, script: &'static str, url: String) {
    sdk_passes_checks(program, script, url, 30).await;
}

/// [`sdk_passes`] for a script of at least `at_least` checks.
pub async fn sdk_passes_checks(program: String, script: &'static str, url: String, at_least: u64) {
    sdk_passes_with(program, script, vec![url], at_least).await;
}

/// [`sdk_passes_checks`] for a script taking the arguments `args`.
pub async fn sdk_passes_with(program: String, script: &'static str, args: Vec<String>, at_least: u64) {
    let script = repository().join(script);
    let report = {
        let program = program.clone();
        tokio::task::spawn_blocking(move || run_script(&program, &script, &args))
    }
    .await
    .expect("the script runs");
    let line = report.stdout.lines().rev().find(|line| line.starts_with('{')).unwrap_or_default();
    let parsed: Value = serde_json::from_str(line).unwrap_or_else(|error| {
        panic!(
            "{program} printed no JSON report ({error}; exit {}):\nstdout: {}\nstderr: {}",
            report.status, report.stdout, report.stderr
        )
    });
    assert!(
        report.status.success() && parsed["ok"] == true,
        "{} failed (exit {}): {}\nstdout: {}\nstderr: {}",
        parsed["sdk"],
        report.status,
        serde_json::to_string_pretty(&parsed["failed"]).unwrap_or_default(),
        report.stdout,
        report.stderr
    );
    assert!(parsed["passed"].as_u64().unwrap_or(0) >= at_least, "too few checks ran: {parsed}");
}

/// Starts a server, runs the client script against it, and asserts that
/// every check passed and the script's `runs` Runs really reached the demo
/// capability service.
async fn sdk_scenario(program: String, script: &'static str, runs: u64) {
    let server = server(settings(Backend::Sqlite).await).await;
    sdk_passes(program, script, server.mcp_url()).await;
    let (_, world) = server.demo_world.as_ref().expect("the demo capability service");
    assert_eq!(
        world.calls().get("/users/profile"),
        Some(&runs),
        "each Run of the SDK client called the capability once"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_client_accepts_every_result() {
    let node = tokio::task::spawn_blocking(typescript_sdk).await.expect("the install runs");
    sdk_scenario(node.to_owned(), "tests/interop/ts/client.mjs", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_accepts_every_result() {
    let python = tokio::task::spawn_blocking(python_sdk).await.expect("the install runs");
    // Once over the initialize handshake, once over server/discover.
    sdk_scenario(python, "tests/interop/py/client.py", 2).await;
}

/// What the MCP Inspector's CLI mode printed for `method` against `url`.
async fn inspector(url: &str, method: &str, extra: &[&str]) -> Value {
    let launcher = repository()
        .join("tests/interop/inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let mut args = vec!["--cli".to_owned(), url.to_owned(), "--method".to_owned(), method.to_owned()];
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    let report = tokio::task::spawn_blocking(move || run_script("node", &launcher, &args)).await.unwrap();
    assert!(report.status.success(), "inspector {method}: {}\n{}", report.stdout, report.stderr);
    serde_json::from_str(&report.stdout)
        .unwrap_or_else(|error| panic!("inspector {method} printed no JSON ({error}): {}", report.stdout))
}

/// The MCP Inspector's CLI mode (`tests/interop/inspector`, installed like
/// the TypeScript SDK) against the real endpoint: it lists the resources
/// and the three resource templates and reads the manifest resource
/// (Part III §8.3; issue 30 item 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_inspector_cli_lists_resources_and_templates() {
    npm_installed("tests/interop/inspector", "@modelcontextprotocol/inspector", "the MCP Inspector");
    let server = server(settings(Backend::Sqlite).await).await;
    let url = server.mcp_url();
    let listed = inspector(&url, "resources/list", &[]).await;
    let uris: Vec<&str> =
        listed["resources"].as_array().expect("resources").iter().filter_map(|r| r["uri"].as_str()).collect();
    for expected in ["pilotage://manifest", "pilotage://guides/workflow%2Fv1", "pilotage://catalog/workflow%2Fv1"] {
        assert!(uris.contains(&expected), "{expected} not listed: {uris:?}");
    }
    let templates = inspector(&url, "resources/templates/list", &[]).await;
    let templates: Vec<&str> = templates["resourceTemplates"]
        .as_array()
        .expect("resourceTemplates")
        .iter()
        .filter_map(|t| t["uriTemplate"].as_str())
        .collect();
    assert_eq!(templates.len(), 3, "{templates:?}");
    assert!(templates.iter().all(|t| t.starts_with("pilotage://")), "{templates:?}");
    let read = inspector(&url, "resources/read", &["--uri", "pilotage://manifest"]).await;
    let text = read["contents"][0]["text"].as_str().expect("the manifest's text");
    let manifest: Value = serde_json::from_str(text).unwrap();
    assert!(manifest["languages"].as_array().is_some_and(|l| !l.is_empty()), "{manifest}");
    server.stop().await;
}

/// Approvals through a real SDK client's URL-mode elicitation (issue 28):
/// the demo tenant's policy holds destructive plans; the Python SDK's
/// elicitation callback plays the person (approve, reject, decline) on the
/// 2025-11-25 revision (the server asks over the session) and on
/// 2026-07-28 (an `InputRequiredResult`, answered and retried). Only the
/// two approved cancellations reach the demo capability service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_approves_in_the_call_through_url_elicitation() {
    let python = tokio::task::spawn_blocking(python_sdk).await.expect("the install runs");
    let mut configured = settings(Backend::Sqlite).await;
    configured.admin_token = Some(crate::tenancy::ADMIN_TOKEN.into());
    let server = server(configured).await;
    let policy = serde_json::json!({"rules": [{"risk": "destructive", "decision": "approve"}]});
    let (status, body) =
        crate::tenancy::admin(&server, reqwest::Method::PUT, "/tenants/demo/policy", Some(policy)).await;
    assert_eq!(status, 200, "{body}");
    sdk_passes_with(
        python,
        "tests/interop/py/approval.py",
        vec![server.mcp_url(), crate::tenancy::ADMIN_TOKEN.to_owned()],
        20,
    )
    .await;
    let (_, world) = server.demo_world.as_ref().expect("the demo capability service");
    assert_eq!(world.calls().get("/orders/cancel"), Some(&2), "only the approved Runs cancelled an order");
    server.stop().await;
}
