//! A Language written in JavaScript: recipe/v1's twin in
//! `languages/recipe-js`, built by componentize-js (docs/writing-a-language.md,
//! "In another source language: JavaScript"). Built here from its sources,
//! it is served from its file as an author's component is (`serve
//! --language`, which lints it on load) and passes the conformance vectors
//! and the completeness gate with the Rust recipe's own binding
//! (`tests/conformance/recipe.json`); and it declares, validates, binds and
//! runs exactly as the Rust component does, program for program.
//!
//! The build's npm dependencies are installed on first use, into the
//! checkout only: `npm ci` from `languages/recipe-js/package-lock.json`
//! (again when the lock file is newer than the install). The component is
//! built into `target/recipe-js/recipe.wasm` when it is missing or older
//! than its sources, its build script, the core guide, the WIT or the lock
//! file. Node.js and npm must be on the machine; when the install or the
//! build fails the test fails and says why (never a silent skip).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use pilotage_client::conformance::binding::{Binding, MemberCases, Sample};
use pilotage_engine::Component;
use pilotage_engine::catalog::{CatalogSnapshot, TenantCatalog};
use pilotage_engine::effects::Invoker;
use pilotage_engine::execution::{self, Execution, ExecutionRequest};
use pilotage_engine::lint::lint;
use pilotage_engine::validation::{self, Program};
use pilotage_protocol::catalog::CatalogEntry;
use serde_json::{Value, json};

use crate::conformance::{recipe_component, run_language_file_vectors};
use crate::support::{FnInvoker, engine, repository, run};

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time of a file, or of any file under a folder.
fn newest(path: &Path) -> Option<SystemTime> {
    if !path.is_dir() {
        return modified(path);
    }
    std::fs::read_dir(path).ok()?.filter_map(Result::ok).filter_map(|entry| newest(&entry.path())).max()
}

/// componentize-js and its dependencies, installed with `npm ci` when
/// missing or older than the lock file.
fn install_dependencies() -> Result<(), String> {
    let folder = repository().join("languages/recipe-js");
    let stale = match (
        modified(&folder.join("node_modules/.package-lock.json")),
        modified(&folder.join("package-lock.json")),
    ) {
        (Some(install), Some(lock)) => lock > install,
        _ => true,
    };
    let componentize = folder.join("node_modules/@bytecodealliance/componentize-js/package.json");
    if stale || !componentize.is_file() {
        run("npm", &["ci", "--prefix", "languages/recipe-js", "--no-audit", "--no-fund"])
            .map_err(|error| format!("installing componentize-js failed: {error} (needs Node.js and npm)"))?;
    }
    Ok(())
}

/// The JavaScript recipe component, `target/recipe-js/recipe.wasm`, built
/// once per test process when it is missing or older than its inputs.
fn component() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        install_dependencies()?;
        let output = repository().join("target/recipe-js/recipe.wasm");
        let inputs = [
            "languages/recipe-js/src",
            "languages/recipe-js/build.mjs",
            "languages/recipe-js/package-lock.json",
            "languages/recipe/guides/core.md",
            "guest-sdk/wit",
        ];
        let stale = match modified(&output) {
            Some(built) => inputs.iter().any(|input| newest(&repository().join(input)).is_none_or(|time| time > built)),
            None => true,
        };
        if stale {
            run("node", &["languages/recipe-js/build.mjs", "target/recipe-js/recipe.wasm"])
                .map_err(|error| format!("building the JavaScript recipe failed: {error}"))?;
        }
        Ok(output)
    });
    built.clone().unwrap_or_else(|error| panic!("{error}"))
}

/// A copy of the component for one test, so a concurrent rebuild cannot
/// change the file a server watches.
fn private_copy(component: &Path, test: &str) -> PathBuf {
    let copy = std::env::temp_dir().join(format!("pilotage-recipe-js-{test}-{}.wasm", std::process::id()));
    std::fs::copy(component, &copy).expect("the component can be copied");
    copy
}

fn recipe_binding() -> Binding {
    Binding::from_file(&repository().join("tests/conformance/recipe.json")).expect("the binding parses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_recipe_passes_the_vectors_served_from_its_file() {
    let built = tokio::task::spawn_blocking(component).await.unwrap();
    let served = private_copy(&built, "vectors");
    run_language_file_vectors(served.clone(), &recipe_binding(), 40).await;
    let _ = std::fs::remove_file(served);
}

/// The demo catalog offered to recipe/v1, as the demo principal sees it.
fn demo_snapshot() -> CatalogSnapshot {
    let entries = pilotage_server::demo::tenant::demo_entries("http://127.0.0.1:9", &["recipe/v1".to_owned()])
        .expect("the demo catalog parses");
    let mut catalog = TenantCatalog::new();
    catalog.apply(entries, &[]);
    catalog.snapshot(&Default::default(), "recipe/v1")
}

/// Answers like the demo capability service, deterministically: user 42's
/// profile, its orders, an error for an unknown user.
fn invoker() -> Arc<dyn Invoker> {
    Arc::new(FnInvoker(|entry: &CatalogEntry, input: &Value| match entry.id.as_str() {
        "cap_read_user_profile" if input["user_id"] == "42" => {
            Ok(json!({"id": "42", "name": "Amira Hassan", "email": "amira.hassan@example.com", "tier": "gold"}))
        }
        "cap_read_user_profile" | "cap_list_orders" if input["user_id"] != "42" => {
            Err(pilotage_engine::effects::InvokeError::Failed("HTTP 404: no such user".to_owned()))
        }
        "cap_list_orders" => Ok(json!({"orders": [{"id": "o-1003", "total": 410.0, "status": "pending"}]})),
        "cap_wait" => Ok(json!({"waited_ms": input["ms"]})),
        _ => Ok(json!({"ok": true})),
    }))
}

/// Every program of the binding with its input, and programs reaching the
/// corners the binding does not (hints among several names, escaped
/// pointer tokens, nested guards, shapes refused at each place).
fn programs(binding: &Binding) -> Vec<(String, Value, Option<Value>)> {
    let mut all = Vec::new();
    let mut sample =
        |name: &str, sample: &Sample| all.push((name.to_owned(), sample.program.clone(), sample.input.clone()));
    for (name, found) in [
        ("valid", Some(&binding.valid)),
        ("invalid", Some(&binding.invalid)),
        ("unknown_name", Some(&binding.unknown_name)),
        ("warnings_only", Some(&binding.warnings_only)),
        ("reserved_character", binding.reserved_character.as_ref()),
        ("branching", binding.branching.as_ref()),
        ("mid_run_failure", Some(&binding.mid_run_failure)),
        ("clean_failure", binding.clean_failure.as_ref()),
        ("invisible_probe", binding.invisible_probe.as_ref()),
    ] {
        sample(name, found.expect("the recipe binding has every sample"));
    }
    for (set, members) in
        [("code", &binding.closed_sets.diagnostic_codes), ("status", &binding.closed_sets.run_statuses)]
    {
        for (member, cases) in members {
            if let MemberCases::Cases { bad, good } = cases {
                for (polarity, case) in [("bad", bad), ("good", good)] {
                    if let Some(program) = &case.program {
                        all.push((format!("{set} {member} {polarity}"), program.clone(), case.input.clone()));
                    }
                }
            }
        }
    }
    let profile = json!({"id": "profile", "call": "cap_read_user_profile", "with": {"user_id": "$input.userId"}});
    let input = Some(json!({"userId": "42"}));
    let corners = [
        json!({"steps": [profile, {"id": "orders", "call": "cap_list_orders", "with": {"user_id": "$profile.id"}},
            {"id": "o", "call": "cap_flag_order", "with": {"order_id": "$order.id", "reason": "$profil.tier"}}]}),
        json!({"steps": [profile], "output": {"a/b": "$profile.nam", "c~d": ["$profile.tier", "$input", "$", "$profile..x"]}}),
        json!({"steps": [profile, {"id": "g", "if": {"is": "$profile.tier", "equals": "gold"}, "then": [
            {"id": "inner", "if": {"is": 1, "equals": 1}, "then": []},
            {"id": "flag", "call": "cap_flag_order", "with": {"order_id": "o-1", "reason": "$profile.tier"}},
            {"id": "again", "call": "cap_flag_order", "with": {"order_id": "$flag.id", "reason": "x", "extra": 1}}]},
            {"id": "after", "call": "cap_flag_order", "with": {"order_id": "$flag.id", "reason": "$again"}}]}),
        json!({"steps": [7, {"call": "cap_read_outbox"}, {"id": "w", "call": "cap_read_outbox", "with": []},
            {"id": "c", "if": {"is": 1}, "then": {}}, {"id": "a/b#c", "call": "cap_red_outbox"}, {"id": "x", "cal": 1}]}),
        json!({"steps": [{"id": "profile", "call": "cap_read_user_profile", "with": {"user_id": 42, "userid": "42"}}]}),
        json!({"steps": {}, "output": 1}),
        json!([]),
        json!({"steps": [], "extra": true}),
        json!({"steps": [profile, {"id": "gold", "if": {"is": "$profile.tier", "equals": "silver"}, "then": [
            {"id": "flag", "call": "cap_flag_order", "with": {"order_id": "o-1", "reason": "$profile.tier"}}]}],
            "output": {"profile": "$profile", "tier": ["$profile.tier", 1, null, {"n": "$input.userId"}]}}),
        json!({"steps": [profile, {"id": "gold", "if": {"is": "$profile.missing", "equals": null}, "then": [
            {"id": "flag", "call": "cap_flag_order", "with": {"order_id": "o-1", "reason": "$profile.email"}}]}],
            "output": "$profile.missing"}),
        json!({"steps": [profile], "output": "$profile.name.first"}),
        json!({"steps": [], "output": ["$input.a", "$input.a", {"k": "$input.userId"}, "$input.a.b", ["$input.c"]]}),
    ];
    for (i, program) in corners.into_iter().enumerate() {
        all.push((format!("corner {i}"), program, input.clone()));
    }
    all
}

fn program(component: &Component, value: &Value) -> Program {
    let bounds = component.engine().bounds();
    Program::from_argument(component.description().program_kind, value, bounds.program_bytes, bounds.nesting_depth)
        .expect("within the host bounds")
}

/// `value` with every number as a float: JavaScript has one number type,
/// so the JavaScript recipe writes the entry's `410.0` back as `410` (the
/// same JSON number; serde_json tells them apart).
fn numbers_as_floats(value: &mut Value) {
    match value {
        Value::Number(number) => {
            if let Some(float) = number.as_f64().and_then(serde_json::Number::from_f64) {
                *number = float;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(numbers_as_floats),
        Value::Object(members) => members.values_mut().for_each(numbers_as_floats),
        _ => {}
    }
}

/// What a Run did, without its timings and fuel (which differ by engine),
/// numbers compared as JSON numbers.
fn comparable(mut execution: Execution) -> Execution {
    execution.fuel = 0;
    for step in &mut execution.trace.steps {
        step.t_ms = None;
        step.input.iter_mut().chain(step.output.iter_mut()).for_each(numbers_as_floats);
    }
    for invocation in &mut execution.invocations {
        invocation.t_ms = 0;
        numbers_as_floats(&mut invocation.input);
        invocation.result.iter_mut().for_each(numbers_as_floats);
    }
    execution.output.iter_mut().for_each(numbers_as_floats);
    execution
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_recipe_declares_validates_and_runs_as_the_rust_one_does() {
    let built = tokio::task::spawn_blocking(component).await.unwrap();
    let javascript = engine().load(&std::fs::read(built).unwrap()).expect("the JavaScript recipe loads");
    let rust = engine().load(&std::fs::read(recipe_component()).unwrap()).expect("the Rust recipe loads");

    // The same name, closed sets, guides (bodies and versions) and features.
    assert_eq!(javascript.description(), rust.description());
    assert_eq!(lint(javascript.description()), Vec::new(), "the JavaScript recipe has lint findings");

    let snapshot = demo_snapshot();
    let invoker = invoker();
    let programs = programs(&recipe_binding());
    let mut compared = 0;
    for (name, value, input) in &programs {
        let input = input.clone();
        let (js_program, rust_program) = (program(&javascript, value), program(&rust, value));
        let js = validation::validate(&javascript, &js_program, None, &snapshot).expect("validates");
        let expected = validation::validate(&rust, &rust_program, None, &snapshot).expect("validates");
        assert_eq!(js.response, expected.response, "{name}: validate differs for {value}");
        assert_eq!(js.references, expected.references, "{name}: references differ");
        let js_binding = validation::bind_input(&javascript, &js_program, input.as_ref()).expect("binds");
        let rust_binding = validation::bind_input(&rust, &rust_program, input.as_ref()).expect("binds");
        assert_eq!(js_binding, rust_binding, "{name}: bind-input differs for {input:?}");
        // Runs of valid programs with a fitting input, except the one whose
        // output outgrows the bounds (the engines stop it at different
        // places, both `resource_exhausted`, which the vectors check).
        if !expected.response.valid || !rust_binding.is_empty() || rust_program.text().len() > 100_000 {
            continue;
        }
        let run = |component: &Component, program: &Program, validated: &validation::Validated| {
            comparable(execution::execute(
                component,
                ExecutionRequest {
                    program,
                    input: input.as_ref(),
                    context: None,
                    plan: validated.plan.as_ref(),
                    references: &validated.references,
                    catalog: snapshot.clone(),
                    invoker: invoker.clone(),
                    statements: &validated.statements,
                    data_source: None,
                    test_run: false,
                    deploy: false,
                    clock_ms: None,
                    run_id: "run_twin",
                },
            ))
        };
        let js_run = run(&javascript, &js_program, &js);
        assert_eq!(js_run, run(&rust, &rust_program, &expected), "{name}: the Run differs");
        assert!(js_run.faults.is_empty(), "{name}: {:?}", js_run.faults);
        compared += 1;
    }
    eprintln!("{} programs validated and bound alike, {compared} Runs alike", programs.len());
    assert!(compared >= 15, "only {compared} Runs were compared");
}
