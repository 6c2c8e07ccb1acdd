//! The local loop of a Language author (`pilotage serve --language PATH`,
//! `Settings::languages`): a file's Language served for the demo tenant
//! over MCP, reloaded when the file changes (with
//! `notifications/tools/list_changed`, Part III §4.7), a bad version
//! refused while the previous one keeps serving, and a bad file stopping
//! the start with the lint's findings (Part II §5).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use pilotage_engine::lint::{LintSeverity, lint};
use pilotage_server::language_watch::{LanguageFileError, LanguageFileStatus};
use pilotage_server::settings::{ConfigError, Settings};
use pilotage_server::start::{Server, StartError, start};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::endpoint::{Backend, ok, server, settings, spec_program, unique};
use crate::support::HOSTILE;

/// How long a change may take to serve: two polls, then the compilation of
/// the component in a debug build on a busy two-core machine. Loops end as
/// soon as the change shows.
const RELOAD_WITHIN: Duration = Duration::from_secs(60);

/// The component that fails the conformance lint.
fn unfit() -> Vec<u8> {
    pilotage_test_support::UNFIT.to_vec()
}

/// `bytes` with a custom section appended: the same Language, other bytes
/// (another SHA-256), as an author's rebuild gives.
fn with_custom_section(bytes: &[u8], payload: &[u8]) -> Vec<u8> {
    fn leb128(mut value: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"pilotage-language-loop";
    let mut content = Vec::new();
    leb128(name.len(), &mut content);
    content.extend_from_slice(name);
    content.extend_from_slice(payload);
    let mut out = bytes.to_vec();
    out.push(0);
    leb128(content.len(), &mut out);
    out.extend_from_slice(&content);
    out
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A fresh folder for this test's Language files.
fn files_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(unique("pilotage-language-loop"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Replaces `path` the way cargo does: a new file moved over the old one.
fn replace_file(path: &Path, bytes: &[u8]) {
    let next = path.with_extension("wasm.next");
    std::fs::write(&next, bytes).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// Settings serving `files` for the demo tenant.
async fn serving(files: Vec<PathBuf>) -> Settings {
    let mut settings = settings(Backend::Sqlite).await;
    settings.languages = files;
    settings
}

/// Counts the `notifications/tools/list_changed` a client receives.
#[derive(Clone)]
pub struct Listener(Arc<AtomicU32>);

impl rmcp::ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub async fn listening_client(url: &str) -> (RunningService<RoleClient, Listener>, Arc<AtomicU32>) {
    pilotage_client::install_crypto_provider();
    let seen = Arc::new(AtomicU32::new(0));
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned());
    let client = rmcp::ServiceExt::serve(Listener(seen.clone()), transport).await.expect("the client connects");
    (client, seen)
}

pub async fn tool_names(client: &RunningService<RoleClient, Listener>) -> BTreeSet<String> {
    client.list_all_tools().await.expect("tools/list answers").into_iter().map(|tool| tool.name.to_string()).collect()
}

/// Lists the tools until `wanted` holds of their names, within
/// [`RELOAD_WITHIN`].
async fn tools_until(
    client: &RunningService<RoleClient, Listener>,
    what: &str,
    wanted: impl Fn(&BTreeSet<String>) -> bool,
) -> BTreeSet<String> {
    let deadline = Instant::now() + RELOAD_WITHIN;
    loop {
        let names = tool_names(client).await;
        if wanted(&names) {
            return names;
        }
        assert!(Instant::now() < deadline, "{what}: not within {RELOAD_WITHIN:?}; tools are {names:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the server's only Language file's status satisfies
/// `wanted`, within [`RELOAD_WITHIN`].
async fn status_until(server: &Server, what: &str, wanted: impl Fn(&LanguageFileStatus) -> bool) -> LanguageFileStatus {
    let deadline = Instant::now() + RELOAD_WITHIN;
    loop {
        let status = server.language_files().into_iter().next().expect("one Language file");
        if wanted(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "{what}: not within {RELOAD_WITHIN:?}; status {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Each error finding of the lint of `bytes`, as `[rule] message`.
fn lint_errors_of(bytes: &[u8]) -> Vec<String> {
    let component = crate::support::engine().load(bytes).expect("the component loads");
    let findings = lint(component.description());
    let errors: Vec<String> = findings
        .iter()
        .filter(|finding| finding.severity == LintSeverity::Error)
        .map(|finding| format!("[{}] {}", finding.rule, finding.message))
        .collect();
    assert!(!errors.is_empty(), "the component fails the lint");
    errors
}

async fn start_error(settings: Settings) -> StartError {
    match start(settings, &pilotage_bundled::ALL).await {
        Ok(server) => {
            server.stop().await;
            panic!("the server started")
        }
        Err(error) => error,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_language_file_is_served_and_reloaded_when_it_changes_and_a_bad_version_leaves_the_last_good_one() {
    let dir = files_dir();
    let file = dir.join("language.wasm");
    std::fs::write(&file, pilotage_bundled::SQL).unwrap();
    let server = server(serving(vec![file.clone()]).await).await;
    // The one capability hostile/v1's programs call.
    server.platform.tenant("demo").expect("the demo tenant").put_entries(vec![
        pilotage_engine::catalog::StoredEntry::new(
            serde_json::from_value(json!({"id": "cap_a", "kind": "capability", "name": "A",
                "input_schema": {"type": "object"}, "risk": "safe",
                "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}}))
            .unwrap(),
            vec![],
            None,
        ),
    ]);
    let (client, seen) = listening_client(&server.mcp_url()).await;

    // The file's Language serves, beside the bundled one.
    let names = tool_names(&client).await;
    assert!(names.contains("validate_sql"), "{names:?}");
    assert!(names.contains("validate_workflow"), "the bundled Language still serves: {names:?}");
    assert!(!names.contains("validate_hostile"), "{names:?}");
    let status = &server.language_files()[0];
    assert_eq!(
        (status.name.as_str(), status.sha256.as_str()),
        ("sql/postgres-15", sha256(pilotage_bundled::SQL).as_str())
    );

    // A rebuild with another Language: its tools replace the old ones, and
    // the session is told.
    replace_file(&file, HOSTILE);
    tools_until(&client, "the reloaded Language's tools", |names| {
        names.contains("validate_hostile") && !names.contains("validate_sql")
    })
    .await;
    let deadline = Instant::now() + RELOAD_WITHIN;
    while seen.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no notifications/tools/list_changed arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = &server.language_files()[0];
    assert_eq!((status.name.as_str(), status.reloads, status.refusals), ("hostile/v1", 1, 0));
    assert_eq!(status.sha256, sha256(HOSTILE));
    let fine = ok_listening(&client, "validate_hostile", json!({"program": "fine"})).await;
    assert_eq!(fine["valid"], true);

    // The same bytes written again (a rebuild that changed nothing): seen,
    // not reloaded, nothing announced.
    let announced = seen.load(Ordering::SeqCst);
    replace_file(&file, HOSTILE);
    let status = status_until(&server, "the unchanged rewrite seen", |status| status.unchanged == 1).await;
    assert_eq!((status.reloads, status.refusals), (1, 0), "{status:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(seen.load(Ordering::SeqCst), announced, "no list_changed for an unchanged file");

    // Garbage written in place: refused, the last good version serves.
    std::fs::write(&file, b"\0asm, or rather not: half a build").unwrap();
    let status = status_until(&server, "the garbage refused", |status| status.refusals == 1).await;
    assert_eq!((status.name.as_str(), status.reloads), ("hostile/v1", 1));
    let why = status.last_refusal.unwrap();
    assert!(why.contains("not loadable") && why.contains("language.wasm"), "{why}");
    let fine = ok_listening(&client, "validate_hostile", json!({"program": "fine"})).await;
    assert_eq!(fine["valid"], true, "the previous version still serves");

    // A component failing the lint: refused with its findings.
    let unfit = unfit();
    replace_file(&file, &unfit);
    let status = status_until(&server, "the unfit component refused", |status| status.refusals == 2).await;
    let why = status.last_refusal.unwrap();
    assert!(why.contains("unfit/v1") && why.contains("does not pass the conformance lint"), "{why}");
    for finding in lint_errors_of(&unfit) {
        assert!(why.contains(&finding), "the refusal names {finding}: {why}");
    }
    let names = tool_names(&client).await;
    assert!(names.contains("validate_hostile") && !names.contains("validate_unfit"), "{names:?}");

    client.cancel().await.unwrap();
    // The watcher ends with the server.
    tokio::time::timeout(Duration::from_secs(90), server.stop()).await.expect("the server stops");
    let _ = std::fs::remove_dir_all(dir);
}

/// [`ok`] for the listening client.
async fn ok_listening(
    client: &RunningService<RoleClient, Listener>,
    name: &str,
    args: serde_json::Value,
) -> serde_json::Value {
    let arguments = args.as_object().cloned().unwrap_or_default();
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(result.is_error, Some(false), "{name}: {:?}", result.structured_content);
    crate::endpoint::envelope_agrees(&result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_language_file_named_like_a_bundled_one_replaces_it_until_it_declares_another_name() {
    let dir = files_dir();
    let file = dir.join("workflow-fork.wasm");
    let fork = with_custom_section(pilotage_bundled::WORKFLOW, b"an author's fork");
    std::fs::write(&file, &fork).unwrap();
    let server = server(serving(vec![file.clone()]).await).await;
    let demo = server.platform.tenant("demo").expect("the demo tenant");
    assert_eq!(demo.language("workflow/v1").unwrap().component.sha256(), sha256(&fork), "the fork serves");
    let client = crate::endpoint::client(&server.mcp_url()).await;
    let valid = ok(&client, "validate_workflow", json!({"workflow": spec_program()})).await;
    assert_eq!(valid["valid"], true);

    // A rebuild with other bytes but the same functions (as a
    // componentize-js build of unchanged sources is): compiled from the
    // functions the engine already holds, and the time reported.
    let before = server.platform.engine().function_cache_stats().expect("a server with Language files has one");
    let rebuilt = with_custom_section(pilotage_bundled::WORKFLOW, b"the same fork, built again");
    replace_file(&file, &rebuilt);
    let status = status_until(&server, "the rebuilt fork", |status| status.reloads == 1).await;
    assert_eq!(status.sha256, sha256(&rebuilt));
    let after = server.platform.engine().function_cache_stats().unwrap();
    let (hits, misses) = (after.hits - before.hits, after.misses - before.misses);
    // Seen here: 814 reused, 31 compiled; and 757 reused, 88 compiled in
    // a fresh clone's run on a busy machine (which functions miss varies
    // between runs, for reasons not yet pinned down): at least four in
    // five reused is what the point needs.
    assert!(hits > 100 && misses * 4 < hits, "the rebuild reused its functions: {hits} reused, {misses} compiled");
    let valid = ok(&client, "validate_workflow", json!({"workflow": spec_program()})).await;
    assert_eq!(valid["valid"], true);

    // The file now declares another Language: the bundled version serves
    // again beside it.
    replace_file(&file, HOSTILE);
    status_until(&server, "the renamed Language", |status| status.name == "hostile/v1").await;
    assert_eq!(
        demo.language("workflow/v1").unwrap().component.sha256(),
        sha256(pilotage_bundled::WORKFLOW),
        "the bundled workflow/v1 is back"
    );
    let names: BTreeSet<String> =
        client.list_all_tools().await.unwrap().into_iter().map(|tool| tool.name.to_string()).collect();
    assert!(names.contains("validate_hostile") && names.contains("validate_workflow"), "{names:?}");
    let valid = ok(&client, "validate_workflow", json!({"workflow": spec_program()})).await;
    assert_eq!(valid["valid"], true);

    client.cancel().await.unwrap();
    server.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_language_file_stops_the_start_with_a_clear_error() {
    let dir = files_dir();

    // Failing the lint: every error finding, rule and message.
    let unfit = unfit();
    let unfit_file = dir.join("unfit.wasm");
    std::fs::write(&unfit_file, &unfit).unwrap();
    let error = start_error(serving(vec![unfit_file.clone()]).await).await;
    assert!(
        matches!(&error, StartError::LanguageFile(LanguageFileError::LintFailed { name, .. }) if name == "unfit/v1"),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains(&unfit_file.display().to_string()), "{message}");
    for finding in lint_errors_of(&unfit) {
        assert!(message.contains(&finding), "the error names {finding}: {message}");
    }

    // Not a component.
    let garbage = dir.join("garbage.wasm");
    std::fs::write(&garbage, b"not a component").unwrap();
    let error = start_error(serving(vec![garbage.clone()]).await).await;
    assert!(matches!(&error, StartError::LanguageFile(LanguageFileError::NotLoadable { .. })), "{error:?}");
    assert!(error.to_string().contains(&garbage.display().to_string()), "{error}");

    // Missing.
    let missing = dir.join("missing.wasm");
    let error = start_error(serving(vec![missing]).await).await;
    assert!(matches!(&error, StartError::LanguageFile(LanguageFileError::Read { .. })), "{error:?}");

    // Two files declaring one Language.
    let (first, second) = (dir.join("one.wasm"), dir.join("two.wasm"));
    std::fs::write(&first, HOSTILE).unwrap();
    std::fs::write(&second, with_custom_section(HOSTILE, b"another build")).unwrap();
    let error = start_error(serving(vec![first, second]).await).await;
    assert!(
        matches!(&error, StartError::LanguageFile(LanguageFileError::DuplicateName { name, .. }) if name == "hostile/v1"),
        "{error:?}"
    );

    // Without the demo tenant.
    let mut settings = serving(vec![dir.join("one.wasm")]).await;
    settings.demo = false;
    let error = start_error(settings).await;
    assert!(matches!(&error, StartError::Config(ConfigError::Invalid { field: "languages", .. })), "{error:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pilotage_serve_language_serves_a_file_and_refuses_a_bad_one_at_start() {
    let dir = files_dir();
    let hostile = dir.join("hostile.wasm");
    std::fs::write(&hostile, HOSTILE).unwrap();
    let unfit_file = dir.join("unfit.wasm");
    std::fs::write(&unfit_file, unfit()).unwrap();
    let serve = |data: &str| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--demo-postgres", "off", "--data-dir"])
            .arg(dir.join(data))
            .env_remove("PILOTAGE_LANGUAGES")
            .kill_on_drop(true);
        command
    };

    // --language: its tools over MCP.
    let mut command = serve("good");
    command.arg("--language").arg(&hostile);
    let (mut child, url) = crate::support::spawn_serving(&mut command).await;
    let (client, _) = listening_client(&url).await;
    let names = tool_names(&client).await;
    assert!(names.contains("validate_hostile") && names.contains("validate_workflow"), "{names:?}");
    client.cancel().await.unwrap();
    child.kill().await.unwrap();

    // PILOTAGE_LANGUAGES, comma-separated: the unfit file stops the start
    // with its findings, and no panic.
    let mut command = serve("bad");
    command.env("PILOTAGE_LANGUAGES", format!("{},{}", hostile.display(), unfit_file.display()));
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("the server gives up within 2 minutes")
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "an error exit");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("error: the Language file") && !stderr.contains("panicked"), "{stderr}");
    for finding in lint_errors_of(&unfit()) {
        assert!(stderr.contains(&finding), "stderr names {finding}: {stderr}");
    }

    // --demo=false: refused, naming the setting.
    let mut command = serve("nodemo");
    command.arg("--demo=false").arg("--language").arg(&hostile);
    let output = tokio::time::timeout(Duration::from_secs(120), command.output()).await.unwrap().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("setting 'languages'"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
