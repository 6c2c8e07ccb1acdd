//! What a Language author meets (docs/writing-a-language.md): lint findings
//! that name their spec section and say how to fix them, in `language check`,
//! in an upload's refusal and in the CLI; and `pilotage language new`, whose
//! crate builds for wasm32-wasip2, passes its own tests, the lint, and the
//! conformance vectors through the real endpoint, and whose JavaScript
//! (`--lang js`) and Python (`--lang python`) packages build and pass the
//! same.

use std::path::{Path, PathBuf};
use std::process::Command;

use pilotage_client::conformance::binding::Binding;
use pilotage_engine::lint::{LintSeverity, fix_for, has_errors, lint};
use serde_json::Value;

use crate::conformance::run_language_file_vectors_under;
use crate::endpoint::{Backend, server, settings};
use crate::support::{engine, test_bounds};
use crate::tenancy::{ADMIN_TOKEN, admin};
use pilotage_engine::{Bounds, Engine};

const PILOTAGE: &str = env!("CARGO_BIN_EXE_pilotage");

fn unfit() -> Vec<u8> {
    pilotage_test_support::UNFIT.to_vec()
}

#[test]
fn every_lint_finding_names_its_section_and_a_fix_of_its_own() {
    let component = engine().load(&unfit()).unwrap();
    let findings = lint(component.description());
    assert!(has_errors(&findings) && findings.len() >= 5, "{findings:?}");
    let generic = fix_for("no such rule");
    for finding in &findings {
        assert!(finding.message.contains("(Part "), "no spec section: {finding}");
        assert!(finding.fix != generic && !finding.fix.is_empty(), "no specific fix: {finding}");
        assert!(finding.to_string().contains("\n    fix: "), "{finding}");
    }
    // The bundled example has none: the control for the check above.
    let recipe = engine().load(&std::fs::read(crate::conformance::recipe_component()).unwrap()).unwrap();
    assert_eq!(lint(recipe.description()), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upload_shows_each_finding_with_its_fix_in_the_api_and_the_cli() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.admin_token = Some(ADMIN_TOKEN.into());
    let server = server(settings).await;
    // Through the admin API: 422 with the findings, each with its fix.
    let url = format!("http://{}/admin/v1/tenants/demo/languages", server.addr);
    let response = reqwest::Client::new()
        .post(&url)
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/wasm")
        .body(unfit())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    let findings = body["error"]["findings"].as_array().expect("the refusal carries the findings");
    assert!(!findings.is_empty());
    assert!(findings.iter().all(|f| f["fix"].as_str().is_some_and(|fix| !fix.is_empty())), "{body}");
    // Through the CLI: one line per finding and its fix, not nested JSON.
    let server_url = format!("http://{}", server.addr);
    let unfit_file = std::env::temp_dir().join(format!("pilotage-unfit-{}.wasm", std::process::id()));
    std::fs::write(&unfit_file, unfit()).unwrap();
    let output = tokio::process::Command::new(PILOTAGE)
        .args(["language", "publish", "demo"])
        .arg(&unfit_file)
        .args(["--server", &server_url, "--admin-token", ADMIN_TOKEN])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("error [reserved-codes]") && stderr.contains("fix: build `diagnostic-codes`"), "{stderr}");
    assert_eq!(stderr.matches("\n    fix: ").count(), findings.len(), "{stderr}");
    // The good polarity, from the author's loop: the example Language is
    // published by one command; published again unchanged, nothing is sent.
    let publish = || {
        tokio::process::Command::new(PILOTAGE)
            .args(["language", "publish", "demo"])
            .arg(crate::conformance::recipe_component())
            .args(["--server", &server_url, "--admin-token", ADMIN_TOKEN])
            .output()
    };
    let first = publish().await.unwrap();
    let said = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success() && said.contains("uploading") && said.contains("done in"), "{said}");
    let (status, listed) = admin(&server, reqwest::Method::GET, "/tenants/demo/languages", None).await;
    assert_eq!(status, 200);
    assert!(listed.to_string().contains("recipe/v1"), "{listed}");
    let second = publish().await.unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{said}");
    assert!(said.contains("recipe/v1 already serves tenant demo") && !said.contains("uploading"), "{said}");
    let (_, audit) = admin(&server, reqwest::Method::GET, "/audit", None).await;
    let uploads = audit.to_string().matches("\"language.upload\"").count();
    assert_eq!(uploads, 1, "one upload audited: {audit}");
    let _ = std::fs::remove_file(unfit_file);
    server.stop().await;
}

/// Runs `cargo` in `dir` for a crate made by `language new`, with the
/// outer build's variables removed (they would aim it at this workspace's
/// target folder and flags) and a target folder kept across runs.
fn cargo(dir: &Path, args: &[&str]) {
    let target = crate::support::repository().join("target/language-new");
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(dir).args(args).env("CARGO_TARGET_DIR", &target);
    for variable in ["CARGO_ENCODED_RUSTFLAGS", "RUSTFLAGS", "CARGO_BUILD_TARGET", "RUSTC_WORKSPACE_WRAPPER"] {
        command.env_remove(variable);
    }
    let output = command.output().expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo {args:?} in {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs `program args` in `dir`, failing the test with its output.
fn run_in(dir: &Path, program: &str, args: &[&str]) {
    let output = Command::new(program)
        .current_dir(dir)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("{program} cannot start (is it installed?): {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?} in {} failed:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `pilotage language new greet --lang LANG` into a fresh folder under a
/// fresh root: the root, the folder, and what the command printed (its
/// next steps).
fn new_greet(lang: &str) -> (PathBuf, PathBuf, String) {
    let root = std::env::temp_dir().join(format!("pilotage-new-{lang}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("greet");
    let made =
        Command::new(PILOTAGE).args(["language", "new", "greet", "--lang", lang, "--dir"]).arg(&dir).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let said = String::from_utf8_lossy(&made.stdout).into_owned();
    assert!(said.contains("created greet/v1"), "{said}");
    (root, dir, said)
}

/// The built greet/v1 `component` loads on `engine`, has no lint error, and
/// passes the vectors of the binding in `dir` through the endpoint, served
/// from its file with the `core_instances_per_component` bound given.
async fn greet_passes_the_lint_and_the_vectors(engine: &Engine, dir: &Path, component: PathBuf) {
    let loaded = engine.load(&std::fs::read(&component).unwrap()).unwrap();
    assert_eq!(loaded.description().name, "greet/v1");
    let findings = lint(loaded.description());
    assert!(findings.iter().all(|f| f.severity == LintSeverity::Warning), "{findings:?}");
    let binding = Binding::from_file(&dir.join("conformance.json")).unwrap();
    assert_eq!(binding.language, "greet/v1");
    let core_instances = engine.bounds().core_instances_per_component;
    run_language_file_vectors_under(component, &binding, 40, |bounds| {
        bounds.core_instances_per_component = core_instances
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_language_builds_passes_its_tests_the_lint_and_the_vectors() {
    // A bad name is refused with the rule, and writes nothing.
    let nowhere = std::env::temp_dir().join(format!("pilotage-new-refused-{}", std::process::id()));
    let refused = Command::new(PILOTAGE).args(["language", "new", "Greet/v1", "--dir"]).arg(&nowhere).output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot name a Language"));
    assert!(!nowhere.exists());
    let (root, dir, _) = new_greet("rust");

    let dir_for_build = dir.clone();
    tokio::task::spawn_blocking(move || {
        cargo(&dir_for_build, &["test", "--quiet"]);
        cargo(&dir_for_build, &["build", "--quiet", "--release", "--target", "wasm32-wasip2"]);
    })
    .await
    .unwrap();
    let component: PathBuf = crate::support::repository().join("target/language-new/wasm32-wasip2/release/greet.wasm");
    // Copied out of the shared target folder, so a concurrent build cannot
    // change the file the server watches.
    let served = root.join("greet.wasm");
    std::fs::copy(&component, &served).unwrap();
    greet_passes_the_lint_and_the_vectors(engine(), &dir, served).await;
    std::fs::remove_dir_all(&root).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_javascript_language_installs_builds_passes_the_lint_and_the_vectors() {
    // An unknown source language is refused by the CLI, and writes nothing.
    let nowhere = std::env::temp_dir().join(format!("pilotage-new-cobol-{}", std::process::id()));
    let refused =
        Command::new(PILOTAGE).args(["language", "new", "greet", "--lang", "cobol", "--dir"]).arg(&nowhere).output();
    let refused = refused.unwrap();
    assert!(!refused.status.success() && !nowhere.exists());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("possible values: rust, js, python"));
    let (root, dir, said) = new_greet("js");
    assert!(said.contains("node build.mjs greet.wasm"), "{said}");

    // What its README says: install componentize-js, build.
    let dir_for_build = dir.clone();
    tokio::task::spawn_blocking(move || {
        run_in(&dir_for_build, "npm", &["ci", "--no-audit", "--no-fund"]);
        run_in(&dir_for_build, "node", &["build.mjs", "greet.wasm"]);
    })
    .await
    .unwrap();
    greet_passes_the_lint_and_the_vectors(engine(), &dir, dir.join("greet.wasm")).await;
    std::fs::remove_dir_all(&root).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_python_language_builds_passes_the_lint_and_the_vectors() {
    let (root, dir, said) = new_greet("python");
    assert!(said.contains("build.py greet.wasm") && said.contains("--core-instances-per-component 64"), "{said}");

    // Built as its README says, with the Python that has componentize-py
    // from the same pinned requirements (the Python twin's environment,
    // installed on first use, instead of a second download).
    let dir_for_build = dir.clone();
    tokio::task::spawn_blocking(move || {
        let python = crate::language_py::install_dependencies().unwrap_or_else(|error| panic!("{error}"));
        run_in(&dir_for_build, &python, &["build.py", "greet.wasm"]);
    })
    .await
    .unwrap();
    let component = dir.join("greet.wasm");
    // `language check` as the README says, with the bound raised; with the
    // default it is refused, saying why.
    let check = |raise: bool| {
        let mut command = Command::new(PILOTAGE);
        command.args(["language", "check"]);
        if raise {
            command.args(["--core-instances-per-component", "64"]);
        }
        command.arg(&component).output().unwrap()
    };
    let checked = check(true);
    assert!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    let refused = check(false);
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && why.contains("38 core module instances"), "{why}");
    let bounds = Bounds { core_instances_per_component: crate::language_py::CORE_INSTANCES, ..test_bounds() };
    greet_passes_the_lint_and_the_vectors(&Engine::new(bounds, None).unwrap(), &dir, component).await;
    std::fs::remove_dir_all(&root).unwrap();
}
