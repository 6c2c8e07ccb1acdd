//! The deployment artefacts: the Helm chart (`helm/pilotage`) and the image
//! (`Dockerfile`), held to what the `pilotage` binary really reads.
//!
//! `helm/tests/check_chart.py` does the Kubernetes side with Helm's own
//! engine (helm-python-sdk, a binding of Helm's Go library: no helm binary)
//! and kubernetes-validate: `helm lint --strict` clean, the default and
//! `ci/production-values.yaml` renders valid for Kubernetes 1.30 (the
//! ServiceMonitor, a custom resource, against a hand-written schema), and
//! values that break `values.schema.json` refused. This module runs it and
//! then checks its renders against the server: the settings file parses as
//! [`Settings`] and passes its checks, every `PILOTAGE_*` variable the chart
//! sets is one the binary reads, the migration Job's command migrates with
//! only the Job's environment, and the image's default command gets past the
//! settings checks with the variables the Dockerfile documents.
//!
//! The Python packages are installed on first use, into the checkout only:
//! a virtual environment at `target/helm-py` from
//! `helm/tests/requirements.txt` (as `interop.rs` does for the MCP SDK).
//! Python 3 with `venv` and the PyPI registry are needed once; when the
//! install fails the test fails and says why.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use pilotage_server::auth::{AuthMode, IssuerConfig};
use pilotage_server::settings::{ConfigError, Settings};
use serde_json::Value;

use crate::endpoint::unique;
use crate::support::repository;

/// The Python of the virtual environment at `target/helm-py`, created and
/// filled from `helm/tests/requirements.txt` when it cannot import the
/// checker's packages.
fn checker_python() -> String {
    crate::support::python_venv(
        "target/helm-py",
        "helm/tests/requirements.txt",
        "helm_python, kubernetes_validate, jsonschema, yaml",
        "helm-python-sdk and kubernetes-validate",
    )
}

/// The JSON report of `helm/tests/check_chart.py` (its last line), run once
/// per test process; the script's own lines are echoed into the test log.
fn chart_report() -> &'static Value {
    static REPORT: OnceLock<Value> = OnceLock::new();
    REPORT.get_or_init(|| {
        let python = checker_python();
        let output = Command::new(&python)
            .arg("helm/tests/check_chart.py")
            .current_dir(repository())
            .output()
            .unwrap_or_else(|error| panic!("cannot run {python} helm/tests/check_chart.py: {error}"));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("{stdout}");
        let line = stdout.lines().rev().find(|line| line.starts_with('{')).unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|error| {
            panic!("check_chart.py printed no JSON report ({error}; {}):\n{stdout}\n{stderr}", output.status)
        })
    })
}

/// One render of the report: `default` or `production`.
fn render(name: &str) -> &'static Value {
    let render = &chart_report()["renders"][name];
    assert!(render.is_object(), "the report has no '{name}' render: {}", chart_report());
    render
}

/// Strings of a JSON array in the report.
fn strings(value: &Value) -> Vec<&str> {
    value.as_array().expect("an array").iter().map(|item| item.as_str().expect("a string")).collect()
}

/// The settings file a render's ConfigMap holds, read as the server reads
/// `--config` (unknown keys are refused, as at start).
fn rendered_settings(name: &str) -> Settings {
    let text = render(name)["settings_toml"].as_str().expect("the settings file");
    toml::from_str(text).unwrap_or_else(|error| panic!("the {name} settings file is not Settings: {error}\n{text}"))
}

#[test]
fn the_chart_lints_renders_and_validates_for_kubernetes() {
    let report = chart_report();
    assert_eq!(report["ok"].as_bool(), Some(true), "check_chart.py found problems: {:#}", report["failed"]);
    assert_eq!(report["failed"].as_array().map(Vec::len), Some(0));
    // Two lints, two renders of about twenty checks each, six refusals:
    // far fewer means the script skipped something.
    assert!(report["passed"].as_u64().unwrap_or(0) >= 50, "too few checks ran: {report}");
    let production = strings(&render("production")["kinds"]);
    for kind in ["HorizontalPodAutoscaler", "PodDisruptionBudget", "Ingress", "ServiceMonitor", "Job"] {
        assert!(production.contains(&kind), "the production render lacks a {kind}: {production:?}");
    }
}

#[test]
fn the_chart_settings_file_is_one_the_server_accepts() {
    // Production values name their issuers in the file: it passes every check
    // the server makes at start, on all interfaces, with JWT authentication.
    let production = rendered_settings("production");
    production.check().unwrap_or_else(|error| panic!("the server would refuse the production settings: {error}"));
    assert!(production.listen.ip().is_unspecified(), "{}", production.listen);
    assert_eq!(production.auth.mode, AuthMode::Jwt);
    assert!(!production.demo);
    assert_eq!(production.resource(), "https://pilotage.example.com/mcp");
    // A customer's issuer reached the file tied to its tenant, with its
    // audience and the scopes it may grant.
    let customer = &production.auth.issuers[1];
    assert_eq!(
        (customer.tenants.as_slice(), customer.audience.as_deref()),
        (&["acme".to_owned()][..], Some("api://pilotage-acme"))
    );
    assert_eq!(customer.scopes.as_deref(), Some(&["pilotage:mcp".to_owned(), "pilotage:approve".to_owned()][..]));
    // Its app roles reached the file as the scopes they grant.
    assert_eq!(customer.roles_claim.as_deref(), Some("roles"));
    assert_eq!(customer.role_scopes.get("Pilotage.Approvers"), Some(&vec!["pilotage:approve".to_owned()]));
    assert_eq!(customer.role_scopes.len(), 2);
    assert!(!customer.is_operators() && production.auth.issuers[0].is_operators());
    // The production values' policy of tenant acme reached the file as
    // `[policies.acme]` and reads as the server's policy.
    let acme = production.policies.get("acme").expect("acme's policy in the settings file");
    assert_eq!(acme.rules[0].decision, pilotage_server::policy::Ruling::Approve);
    assert_eq!((acme.budgets[0].runs, acme.budgets[0].window_s), (20, 3600));

    // Default values take the issuers from a Secret (PILOTAGE_JWT_ISSUERS):
    // the file alone is refused for want of one, and accepted once the
    // environment supplies it, as in the pod.
    let mut default = rendered_settings("default");
    assert!(matches!(default.check(), Err(ConfigError::Invalid { field: "auth", .. })), "{:?}", default.check());
    default.auth.issuers.push(IssuerConfig {
        algorithms: vec!["RS256".into()],
        ..IssuerConfig::new("https://issuer.example/", "https://issuer.example/jwks.json")
    });
    default.check().unwrap_or_else(|error| panic!("the server would refuse the default settings: {error}"));
    assert!(default.listen.ip().is_unspecified(), "{}", default.listen);
}

/// Every `PILOTAGE_*` name the binary's sources mention as a string (the
/// settings are a folder: every file of it).
fn variables_read_by_the_binary() -> String {
    let settings = repository().join("platform/server/src/settings");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&settings)
        .expect("the settings' folder")
        .map(|entry| entry.expect("a settings file").path())
        .collect();
    assert!(files.len() > 1, "no settings files under {}", settings.display());
    files.extend(
        [
            "platform/cli/src/main.rs",
            "platform/cli/src/commands/serve.rs",
            "platform/store/src/sealing.rs",
            "platform/server/src/telemetry/logs.rs",
        ]
        .iter()
        .map(|file| repository().join(file)),
    );
    files.iter().map(|file| std::fs::read_to_string(file).expect("the binary's sources")).collect()
}

#[test]
fn the_chart_sets_only_variables_the_binary_reads() {
    let sources = variables_read_by_the_binary();
    for render_name in ["default", "production"] {
        let render = render(render_name);
        for list in ["server_env", "migration_env"] {
            for name in strings(&render[list]).into_iter().filter(|name| name.starts_with("PILOTAGE_")) {
                assert!(
                    sources.contains(&format!("\"{name}\"")),
                    "the {render_name} render sets {name} ({list}), which the binary does not read"
                );
            }
        }
    }
    let server = strings(&render("default")["server_env"]);
    for name in ["PILOTAGE_DATABASE_URL", "PILOTAGE_SECRET_KEY", "PILOTAGE_ADMIN_TOKEN", "PILOTAGE_JWT_ISSUERS"] {
        assert!(server.contains(&name), "the server pod lacks {name}: {server:?}");
    }
}

/// Runs the `pilotage` binary with `args` and exactly the `PILOTAGE_*`
/// variables given (none inherited from the test's environment).
fn pilotage(args: &[&str], variables: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pilotage"));
    command.args(args).stdin(std::process::Stdio::null());
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("PILOTAGE_")) {
        command.env_remove(name);
    }
    command.envs(variables.iter().copied());
    command.output().expect("the pilotage binary runs")
}

/// A fresh folder under the system's temporary directory.
fn scratch(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique(prefix));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

#[test]
fn the_migration_job_command_migrates_with_only_the_jobs_environment() {
    // The hook runs before the ConfigMap exists, so `pilotage migrate` must
    // work from the Job's variables alone. Here the database is a SQLite file
    // rather than the Secret's PostgreSQL: the command and the settings checks
    // are the same.
    let render = render("production");
    let args = strings(&render["migration_args"]);
    let variables = strings(&render["migration_env"]);
    assert_eq!(variables, ["PILOTAGE_DATABASE_URL", "PILOTAGE_DATA_DIR"], "the Job's environment changed");
    let dir = scratch("helm-migrate");
    let data_dir = dir.display().to_string();
    let database_url = format!("sqlite:{}", dir.join("pilotage.db").display());
    let output =
        pilotage(&args, &[("PILOTAGE_DATA_DIR", data_dir.as_str()), ("PILOTAGE_DATABASE_URL", database_url.as_str())]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "pilotage {args:?} failed: {stderr}");
    assert!(stderr.contains("migrations applied"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The JSON array of the Dockerfile instruction `instruction` (exec form).
fn dockerfile_exec_form(dockerfile: &str, instruction: &str) -> Vec<String> {
    let array = dockerfile
        .lines()
        .find_map(|line| line.strip_prefix(instruction).filter(|rest| rest.starts_with(" [")))
        .unwrap_or_else(|| panic!("the Dockerfile has no exec-form {instruction}"));
    serde_json::from_str(array).unwrap_or_else(|error| panic!("{instruction}{array}: {error}"))
}

#[test]
fn the_image_command_passes_the_servers_settings_checks() {
    let dockerfile = std::fs::read_to_string(repository().join("Dockerfile")).expect("the Dockerfile");
    assert_eq!(dockerfile_exec_form(&dockerfile, "ENTRYPOINT"), ["pilotage"]);
    let command = dockerfile_exec_form(&dockerfile, "CMD");
    let args: Vec<&str> = command.iter().map(String::as_str).collect();
    assert_eq!(args.first(), Some(&"serve"), "{args:?}");
    let dir = scratch("helm-image");
    let data_dir = dir.display().to_string();
    // A database URL no backend takes: the start fails right after the
    // settings checks, so nothing listens on all interfaces here.
    let base = [("PILOTAGE_DATA_DIR", data_dir.as_str()), ("PILOTAGE_DATABASE_URL", "nosuch://x")];

    let with_issuer = [
        ("PILOTAGE_JWT_ISSUERS", "https://issuer.example/"),
        ("PILOTAGE_JWT_JWKS_URLS", "https://issuer.example/jwks.json"),
    ];
    let variables: Vec<(&str, &str)> = base.iter().chain(&with_issuer).copied().collect();
    let output = pilotage(&args, &variables);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("unsupported database URL 'nosuch://x'"), "the settings were refused: {stderr}");

    // Without an issuer the JWT mode is refused, and it names what is missing.
    let output = pilotage(&args, &base);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("--auth jwt needs at least one --jwt-issuer"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
