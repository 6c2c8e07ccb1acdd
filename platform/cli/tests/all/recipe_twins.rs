//! What the tests of recipe/v1's twins in other source languages share
//! (`language_js`, `language_py`): when a built component is stale, the
//! conformance vectors served from its file, and the program-by-program
//! comparison with the Rust recipe (the same name, closed sets and guides;
//! the same diagnostics, references, plan and input findings; the same
//! Runs, trace and output) over every program of the recipe binding and
//! the corners it does not reach.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use futures::executor::block_on;
use pilotage_client::conformance::binding::{Binding, MemberCases, Sample};
use pilotage_engine::catalog::{CatalogSnapshot, TenantCatalog};
use pilotage_engine::effects::Invoker;
use pilotage_engine::execution::{self, Execution, ExecutionRequest};
use pilotage_engine::lint::lint;
use pilotage_engine::validation::{self, Program};
use pilotage_engine::{Bounds, Component, Engine};
use pilotage_protocol::catalog::CatalogEntry;
use serde_json::{Value, json};

use crate::conformance::{recipe_component, run_language_file_vectors_under};
use crate::support::{FnInvoker, repository};

/// When `path` was last modified, if it exists.
pub fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The newest modification time of a file, or of any file under a folder.
fn newest(path: &Path) -> Option<SystemTime> {
    if !path.is_dir() {
        return modified(path);
    }
    std::fs::read_dir(path).ok()?.filter_map(Result::ok).filter_map(|entry| newest(&entry.path())).max()
}

/// Whether `output` is missing or older than any of `inputs` (files or
/// folders, relative to the repository; a missing input counts as newer).
pub fn stale(output: &Path, inputs: &[&str]) -> bool {
    match modified(output) {
        Some(built) => inputs.iter().any(|input| newest(&repository().join(input)).is_none_or(|time| time > built)),
        None => true,
    }
}

/// The Rust recipe's conformance binding, which its twins are held to.
pub fn recipe_binding() -> Binding {
    Binding::from_file(&repository().join("tests/conformance/recipe.json")).expect("the binding parses")
}

/// Serves a copy of the twin `built` from its file (`serve --language`,
/// which lints it on load) on a server whose bounds `operator` sets as an
/// operator would, and asserts that the recipe binding's vectors pass with
/// no failure and that the completeness gate finds no gap. The copy (named
/// after `twin`) keeps a concurrent rebuild from changing the file the
/// server watches.
pub async fn assert_passes_the_vectors(built: &Path, twin: &str, operator: impl FnOnce(&mut Bounds)) {
    let served = std::env::temp_dir().join(format!("pilotage-{twin}-vectors-{}.wasm", std::process::id()));
    std::fs::copy(built, &served).expect("the component can be copied");
    run_language_file_vectors_under(served.clone(), &recipe_binding(), 40, operator).await;
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

/// `value` with every number as a float: a twin's source language may
/// have one number type (JavaScript writes the entry's `410.0` back as
/// `410`: the same JSON number, which serde_json tells apart).
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

/// Asserts that the twin `built` (named `twin` in messages), loaded with
/// the Rust recipe on `engine`, declares, validates, binds and runs as the
/// Rust recipe does, program for program:
/// the same description (guides included, bodies and versions) with no
/// lint finding; for every program of [`programs`], the same validation
/// response and references and the same input findings; and for each
/// valid one with a fitting input, the same Run (outcome, trace, output,
/// invocations), with no fault. At least 15 Runs must be compared.
pub fn assert_runs_as_the_rust_recipe(engine: &Engine, built: &Path, twin: &str) {
    let other = engine.load(&std::fs::read(built).unwrap()).unwrap_or_else(|e| panic!("the {twin} recipe loads: {e}"));
    let rust = engine.load(&std::fs::read(recipe_component()).unwrap()).expect("the Rust recipe loads");

    // The same name, closed sets, guides (bodies and versions) and features.
    assert_eq!(other.description(), rust.description(), "the {twin} recipe describes itself otherwise");
    assert_eq!(lint(other.description()), Vec::new(), "the {twin} recipe has lint findings");

    let snapshot = demo_snapshot();
    let invoker = invoker();
    let programs = programs(&recipe_binding());
    let mut compared = 0;
    for (name, value, input) in &programs {
        let input = input.clone();
        let (other_program, rust_program) = (program(&other, value), program(&rust, value));
        let found = block_on(validation::validate(&other, &other_program, None, &snapshot)).expect("validates");
        let expected = block_on(validation::validate(&rust, &rust_program, None, &snapshot)).expect("validates");
        assert_eq!(found.response, expected.response, "{twin}, {name}: validate differs for {value}");
        assert_eq!(found.references, expected.references, "{twin}, {name}: references differ");
        let other_binding = block_on(validation::bind_input(&other, &other_program, input.as_ref())).expect("binds");
        let rust_binding = block_on(validation::bind_input(&rust, &rust_program, input.as_ref())).expect("binds");
        assert_eq!(other_binding, rust_binding, "{twin}, {name}: bind-input differs for {input:?}");
        // Runs of valid programs with a fitting input, except the one whose
        // output outgrows the bounds (the engines stop it at different
        // places, both `resource_exhausted`, which the vectors check).
        if !expected.response.valid || !rust_binding.is_empty() || rust_program.text().len() > 100_000 {
            continue;
        }
        let run = |component: &Component, program: &Program, validated: &validation::Validated| {
            comparable(block_on(execution::execute(
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
            )))
        };
        let other_run = run(&other, &other_program, &found);
        assert_eq!(other_run, run(&rust, &rust_program, &expected), "{twin}, {name}: the Run differs");
        assert!(other_run.faults.is_empty(), "{twin}, {name}: {:?}", other_run.faults);
        compared += 1;
    }
    eprintln!("{twin}: {} programs validated and bound alike, {compared} Runs alike", programs.len());
    assert!(compared >= 15, "{twin}: only {compared} Runs were compared");
}

#[test]
fn a_build_is_stale_when_missing_or_older_than_an_input() {
    let folder = std::env::temp_dir().join(format!("pilotage-twin-staleness-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    let (input, output) = (folder.join("input.txt"), folder.join("output.wasm"));
    std::fs::write(&input, "source").unwrap();
    // An absolute path joined to the repository stays itself.
    let inputs = [input.to_str().unwrap()];
    assert!(stale(&output, &inputs), "a missing build is stale");
    std::fs::write(&output, "built").unwrap();
    let earlier = SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options().write(true).open(&input).unwrap().set_modified(earlier).unwrap();
    assert!(!stale(&output, &inputs), "a build newer than its inputs is fresh");
    std::fs::File::options()
        .write(true)
        .open(&output)
        .unwrap()
        .set_modified(earlier - std::time::Duration::from_secs(60))
        .unwrap();
    assert!(stale(&output, &inputs), "a build older than an input is stale");
    assert!(stale(&output, &["no/such/input"]), "a missing input counts as newer");
    let _ = std::fs::remove_dir_all(folder);
}
