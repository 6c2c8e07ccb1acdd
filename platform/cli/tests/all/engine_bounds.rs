//! The host against a hostile component: every misbehaviour gets the
//! spec's answer (a request error during validation, an outcome with
//! `ok: false` during execution), and the next call is served.

use std::sync::{Arc, OnceLock};

use futures::executor::block_on;
use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::description::ProgramKind;
use pilotage_engine::execution::{self, Execution, ExecutionRequest};
use pilotage_engine::lint::{has_errors, lint};
use pilotage_engine::validation::{self, Program, ValidationFailure};
use pilotage_engine::{Bounds, CallBounds, CallError, CallKind, Component, Engine};
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_protocol::diagnostic::CONSTRAINT;
use pilotage_protocol::risk::RiskHints;
use serde_json::{Value, json};

use crate::support::{FnInvoker, HOSTILE, engine, test_bounds};

fn hostile() -> &'static Component {
    static COMPONENT: OnceLock<Component> = OnceLock::new();
    COMPONENT.get_or_init(|| engine().load(HOSTILE).expect("the hostile component loads"))
}

fn capability(id: &str) -> CatalogEntry {
    serde_json::from_value(json!({
        "id": id, "kind": "capability", "name": id, "input_schema": {"type": "object"},
        "risk": "safe", "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}
    }))
    .unwrap()
}

fn catalog() -> CatalogSnapshot {
    CatalogSnapshot::hashed(vec![capability("cap_a"), capability("cap_b")])
}

fn program(text: &str) -> Program {
    Program::from_argument(ProgramKind::Text, &Value::String(text.into()), 1 << 20, 64).unwrap()
}

fn validate(component: &Component, text: &str) -> Result<validation::Validated, ValidationFailure> {
    block_on(validation::validate(component, &program(text), None, &catalog()))
}

fn execute_on(component: &Component, text: &str) -> Execution {
    let program = program(text);
    let validated = block_on(validation::validate(component, &program, None, &catalog())).expect("validates");
    assert!(validated.response.valid, "{:?}", validated.response);
    block_on(execution::execute(
        component,
        ExecutionRequest {
            program: &program,
            input: None,
            context: None,
            plan: validated.plan.as_ref(),
            references: &validated.references,
            catalog: catalog(),
            invoker: Arc::new(FnInvoker(|_: &CatalogEntry, _: &Value| Ok(json!({"ok": true})))),
            statements: &validated.statements,
            data_source: None,
            test_run: false,
            deploy: false,
            clock_ms: None,
            run_id: "run_test",
        },
    ))
}

fn execute(text: &str) -> Execution {
    execute_on(hostile(), text)
}

/// The component still answers a well-behaved call.
fn next_call_is_served(component: &Component) {
    let validated = validate(component, "fine").expect("the next validation is served");
    assert!(validated.response.valid);
    let execution = execute_on(component, "fine");
    assert!(execution.outcome.ok, "{:?}", execution.outcome);
}

#[test]
fn the_hostile_component_passes_the_lint_so_it_can_be_loaded() {
    let findings = lint(hostile().description());
    assert!(!has_errors(&findings), "{findings:?}");
}

#[test]
fn validation_that_spins_is_bounds_exceeded() {
    let failure = validate(hostile(), "validate:spin").unwrap_err();
    assert!(matches!(failure, ValidationFailure::BoundsExceeded(_)), "{failure:?}");
    next_call_is_served(hostile());
}

#[test]
fn validation_that_allocates_without_bound_is_bounds_exceeded() {
    let failure = validate(hostile(), "validate:alloc").unwrap_err();
    assert!(matches!(failure, ValidationFailure::BoundsExceeded(ref m) if m.contains("memory")), "{failure:?}");
    next_call_is_served(hostile());
}

#[test]
fn validation_that_recurses_without_bound_is_bounds_exceeded() {
    let failure = validate(hostile(), "validate:recurse").unwrap_err();
    assert!(matches!(failure, ValidationFailure::BoundsExceeded(ref m) if m.contains("stack")), "{failure:?}");
    next_call_is_served(hostile());
}

#[test]
fn validation_with_a_huge_result_is_bounds_exceeded() {
    let failure = validate(hostile(), "validate:huge").unwrap_err();
    assert!(matches!(failure, ValidationFailure::BoundsExceeded(_)), "{failure:?}");
    next_call_is_served(hostile());
}

#[test]
fn a_validator_that_traps_is_an_internal_error() {
    let failure = validate(hostile(), "validate:trap").unwrap_err();
    assert!(matches!(failure, ValidationFailure::Internal(_)), "{failure:?}");
    next_call_is_served(hostile());
}

#[test]
fn an_undeclared_code_is_rewritten_to_constraint() {
    let validated = validate(hostile(), "validate:undeclared_code").unwrap();
    assert_eq!(validated.response.diagnostics[0].code, CONSTRAINT);
    assert!(!validated.response.valid);
    assert_eq!(validated.defects.len(), 1);
}

#[test]
fn a_plan_beside_an_error_does_not_make_the_program_valid() {
    let validated = validate(hostile(), "validate:claims_valid").unwrap();
    assert!(!validated.response.valid);
    assert!(validated.response.plan.is_none());
}

#[test]
fn a_plan_step_id_with_a_reserved_character_is_rejected() {
    let validated = validate(hostile(), "validate:bad_step_id").unwrap();
    assert!(!validated.response.valid);
    assert!(validated.response.diagnostics.iter().any(|d| d.code == CONSTRAINT && d.message.contains("reserved")));
}

#[test]
fn an_execution_that_spins_stops_with_resource_exhausted_or_timeout() {
    let execution = execute("execute:spin");
    assert!(!execution.outcome.ok);
    assert!(["resource_exhausted", "timeout"].contains(&execution.outcome.status.as_str()), "{:?}", execution.outcome);
    next_call_is_served(hostile());
}

#[test]
fn an_execution_that_allocates_or_recurses_is_resource_exhausted() {
    for mode in ["execute:alloc", "execute:recurse", "execute:huge"] {
        let execution = execute(mode);
        assert_eq!(execution.outcome.status, "resource_exhausted", "{mode}: {:?}", execution.outcome);
        assert!(execution.output.is_none());
    }
    next_call_is_served(hostile());
}

#[test]
fn an_execution_that_traps_is_an_engine_fault() {
    let execution = execute("execute:trap");
    assert_eq!(execution.outcome.status, "engine_fault");
    assert!(execution.outcome.error.is_some());
    next_call_is_served(hostile());
}

#[test]
fn invoking_outside_the_plan_is_refused_and_fails_the_run() {
    let execution = execute("execute:outside_plan");
    assert_eq!(execution.outcome.status, "engine_fault", "{:?}", execution.outcome);
    assert!(execution.invocations.is_empty(), "cap_b must never be invoked");
}

#[test]
fn a_trace_that_hides_a_call_fails_the_run_and_the_host_trace_shows_it() {
    let execution = execute("execute:hide_call");
    assert_eq!(execution.outcome.status, "engine_fault");
    assert_eq!(execution.invocations.len(), 1);
    assert_eq!(execution.trace.steps.len(), 1);
    assert_eq!(execution.trace.steps[0].calls.as_deref(), Some("cap_a"));
}

#[test]
fn a_trace_that_invents_a_call_fails_the_run() {
    let execution = execute("execute:invent_call");
    assert_eq!(execution.outcome.status, "engine_fault");
    assert!(execution.invocations.is_empty());
}

#[test]
fn a_trace_that_breaks_correspondence_fails_the_run() {
    let execution = execute("execute:wrong_branch");
    assert_eq!(execution.outcome.status, "engine_fault");
    assert!(execution.outcome.error.as_deref().unwrap_or("").contains("correspondence"));
}

#[test]
fn an_honest_execution_succeeds_with_its_trace() {
    let execution = execute("fine");
    assert!(execution.outcome.ok);
    assert_eq!(execution.trace.steps.len(), 1);
    assert_eq!(execution.invocations.len(), 1);
}

#[test]
fn a_wall_time_bound_stops_a_spin_near_its_deadline() {
    let bounds = Bounds {
        validation: CallBounds { fuel: u64::MAX / 4, wall_time_ms: 300 },
        execution: CallBounds { fuel: u64::MAX / 4, wall_time_ms: 300 },
        ..test_bounds()
    };
    let engine = Engine::new(bounds, None).unwrap();
    let component = engine.load(HOSTILE).unwrap();
    let started = std::time::Instant::now();
    let error = block_on(async {
        let mut call =
            component.start(CallKind::Validation, pilotage_engine::host::CallContext::validation(catalog())).await?;
        call.validate("validate:spin", None).await
    })
    .unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(error, CallError::Timeout(300));
    assert!(elapsed.as_millis() >= 290 && elapsed.as_millis() < 2_000, "stopped after {elapsed:?}");
    let execution = execute_on(&component, "execute:spin");
    assert_eq!(execution.outcome.status, "timeout");
    next_call_is_served(&component);
}

#[test]
fn compiled_code_is_cached_on_disk_and_reused() {
    let dir = std::env::temp_dir().join(format!("pilotage-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let first = Engine::new(test_bounds(), Some(dir.clone())).unwrap().load(HOSTILE).unwrap();
    assert!(!first.loaded_from_cache());
    let restarted = Engine::new(test_bounds(), Some(dir.clone())).unwrap();
    let second = restarted.load(HOSTILE).unwrap();
    assert!(second.loaded_from_cache());
    assert_eq!(first.sha256(), second.sha256());
    next_call_is_served(&second);
    // Code compiled under other settings is never reused: a memory size
    // changes the compilation key (bounds checks are compiled in), a stack
    // size does not (it is a runtime limit).
    let stack = Engine::new(Bounds { wasm_stack_bytes: 256 << 10, ..test_bounds() }, Some(dir.clone())).unwrap();
    assert_eq!(stack.config_key(), restarted.config_key());
    assert!(stack.load(HOSTILE).unwrap().loaded_from_cache());
    let memory = Engine::new(Bounds { memory_bytes: 1 << 30, ..test_bounds() }, Some(dir.clone())).unwrap();
    let reused = memory.load(HOSTILE).unwrap().loaded_from_cache();
    assert_eq!(reused, memory.config_key() == restarted.config_key());
    // A corrupt artifact is replaced, not trusted. (Live components map
    // their artifact; the file is unlinked and recreated, never truncated in
    // place, exactly as the cache itself writes.)
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"not a compiled component").unwrap();
    }
    let repaired = Engine::new(test_bounds(), Some(dir.clone())).unwrap().load(HOSTILE).unwrap();
    assert!(!repaired.loaded_from_cache());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bytes_that_are_not_a_component_are_refused() {
    let error = engine().load(b"\0asm\x01\0\0\0").unwrap_err();
    assert!(error.to_string().contains("component") || error.to_string().contains("compile"), "{error}");
    assert!(engine().load(b"hello").is_err());
}

#[test]
fn risk_labels_that_look_safe_but_are_not_are_lint_errors() {
    let mut description = hostile().description().clone();
    description.risk_levels[0].hints = RiskHints::DESTRUCTIVE;
    assert!(has_errors(&lint(&description)));
}
