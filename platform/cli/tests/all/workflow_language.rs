//! workflow/v1 through the real component and the host's guarantees: the
//! lint, the spec's own examples (Part III §9.3, §9.4), every program in
//! its guides, plans, traces and failures.

use std::sync::Arc;

use futures::executor::block_on;
use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::description::{Exposure, ProgramKind};
use pilotage_engine::effects::Invoker;
use pilotage_engine::execution::{self, Execution, ExecutionRequest};
use pilotage_engine::lint::lint;
use pilotage_engine::validation::{self, Program, Validated};
use pilotage_protocol::diagnostic::{Locator, Severity};
use pilotage_protocol::manifest::{Manifest, check_manifest};
use pilotage_protocol::retention::Retention;
use pilotage_protocol::trace::{TraceLevel, at_level};
use serde_json::{Value, json};

use crate::support::{FnInvoker, assert_schema, demo_catalog, demo_invoker, workflow};

fn program(value: Value) -> Program {
    Program::from_argument(ProgramKind::Json, &value, 1 << 20, 64).unwrap()
}

fn validate(value: Value) -> Validated {
    let validated =
        block_on(validation::validate(workflow(), &program(value), None, &demo_catalog())).expect("validation runs");
    assert_schema("ValidateResponse", &serde_json::to_value(&validated.response).unwrap());
    validated
}

fn run_with(value: Value, input: Option<Value>, invoker: Arc<dyn Invoker>) -> Execution {
    let program = program(value);
    let validated = block_on(validation::validate(workflow(), &program, None, &demo_catalog())).unwrap();
    assert!(validated.response.valid, "{:?}", validated.response.diagnostics);
    let execution = block_on(execution::execute(
        workflow(),
        ExecutionRequest {
            program: &program,
            input: input.as_ref(),
            context: None,
            plan: validated.plan.as_ref(),
            references: &validated.references,
            catalog: demo_catalog(),
            invoker,
            statements: &validated.statements,
            data_source: None,
            test_run: false,
            deploy: false,
            clock_ms: None,
            run_id: "run_test",
        },
    ));
    assert_schema("Trace", &serde_json::to_value(&execution.trace).unwrap());
    execution
}

fn run(value: Value, input: Option<Value>) -> Execution {
    run_with(value, input, demo_invoker())
}

#[test]
fn the_workflow_component_lints_clean() {
    let findings = lint(workflow().description());
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn its_manifest_entry_is_conformant() {
    let description = workflow().description();
    let retention = Retention::parse("PT1H").unwrap();
    let exposure = Exposure { loop_tools: description.default_loop_tools(&retention), retention, idempotency: true };
    let entry = description.language_entry(&exposure);
    assert_eq!(entry.loop_tools.validate, "validate_workflow");
    assert_eq!(entry.loop_tools.execute.as_deref(), Some("run_workflow"));
    assert_eq!(entry.loop_tools.trace.as_deref(), Some("trace_workflow"));
    let manifest = Manifest { pilotage: "1.1".into(), languages: vec![entry], capabilities: None };
    assert_schema("Manifest", &serde_json::to_value(&manifest).unwrap());
    assert_eq!(check_manifest(&manifest, |_| true), vec![]);
}

#[test]
fn spec_example_9_3_is_invalid_with_the_close_match_hint() {
    let validated =
        validate(json!({"steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profil"}]}));
    assert!(!validated.response.valid);
    let diagnostic = &validated.response.diagnostics[0];
    assert_eq!(diagnostic.code, "unknown_capability");
    assert_eq!(diagnostic.path, Locator::Pointer("/steps/0/capability".into()));
    assert_eq!(diagnostic.hint.as_deref(), Some("close match: cap_read_user_profile"));
    assert_eq!(validated.response.catalog_version.as_deref(), Some(demo_catalog().catalog_version()));
    assert!(validated.response.plan.is_none());
}

fn spec_9_4() -> Value {
    json!({
        "steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "$.input.userId"}}],
        "output": {"name": "$.steps.profile.output.name"}
    })
}

#[test]
fn spec_example_9_4_is_valid_planned_and_runs() {
    let validated = validate(spec_9_4());
    assert!(validated.response.valid);
    let plan = validated.response.plan.as_ref().unwrap();
    assert_eq!(plan.max_risk, "safe");
    assert!(plan.max_risk_hints.read_only);
    let execution = run(spec_9_4(), Some(json!({"userId": "42"})));
    assert!(execution.outcome.ok, "{:?}", execution.outcome);
    assert_eq!(execution.output, Some(json!({"name": "Amira Hassan"})));
    let step = &execution.trace.steps[0];
    assert_eq!(step.id, "profile");
    assert_eq!(step.calls.as_deref(), Some("cap_read_user_profile"));
    assert_eq!(step.input, Some(json!({"user_id": "42"})));
    let summary = at_level(&execution.trace, TraceLevel::Summary).unwrap();
    assert!(summary.steps[0].input.is_none());
    assert_schema("Trace", &serde_json::to_value(&summary).unwrap());
}

#[test]
fn supplied_context_is_a_context_binding_finding() {
    let validated = block_on(validation::validate(
        workflow(),
        &program(spec_9_4()),
        Some(&json!({"any": "value"})),
        &demo_catalog(),
    ))
    .unwrap();
    assert!(!validated.response.valid);
    assert!(
        validated
            .response
            .diagnostics
            .iter()
            .any(|d| d.code == "context_binding" && d.path == Locator::Pointer(String::new()))
    );
}

#[test]
fn a_warnings_only_program_is_valid_with_a_plan() {
    let mut program = spec_9_4();
    program["output"] = json!({"name": "$.steps.profile.output.nmae"});
    let validated = validate(program);
    assert!(validated.response.valid);
    assert!(!validated.response.diagnostics.is_empty());
    assert!(validated.response.diagnostics.iter().all(|d| d.severity == Severity::Warning));
    assert!(validated.response.plan.is_some());
}

#[test]
fn invisible_entries_are_never_named_in_hints() {
    // The snapshot the validator sees is the only vocabulary it has.
    let visible: Vec<_> =
        crate::support::demo_entries().into_iter().filter(|e| e.id != "cap_read_user_profile").collect();
    let catalog = CatalogSnapshot::hashed(visible);
    let validated = block_on(validation::validate(
        workflow(),
        &program(json!({"steps": [{"id": "p", "kind": "call", "capability": "cap_read_user_profil", "with": {"user_id": "1"}}]})),
        None,
        &catalog,
    ))
    .unwrap();
    let text = serde_json::to_string(&validated.response).unwrap();
    assert!(!text.contains("cap_read_user_profile"), "{text}");
    assert!(!validated.response.valid);
}

#[test]
fn every_program_in_the_guides_validates_as_documented() {
    let description = workflow().description();
    let mut checked = 0;
    for guide in &description.guides {
        let mut fence: Option<String> = None;
        let mut body = String::new();
        for line in guide.body.lines() {
            match &fence {
                None if line.starts_with("```json workflow") => {
                    fence = Some(line.to_owned());
                    body.clear();
                }
                Some(header) if line.starts_with("```") => {
                    let value: Value =
                        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{}: {e}\n{body}", guide.guide.id));
                    let validated = validate(value);
                    let words: Vec<&str> = header.split_whitespace().collect();
                    if words.get(2) == Some(&"invalid") {
                        let code = words[3];
                        assert!(!validated.response.valid, "{}: expected invalid", guide.guide.id);
                        assert!(
                            validated.response.diagnostics.iter().any(|d| d.code == code),
                            "{}: expected {code}",
                            guide.guide.id
                        );
                    } else {
                        assert!(validated.response.valid, "{}: {:?}", guide.guide.id, validated.response.diagnostics);
                    }
                    checked += 1;
                    fence = None;
                }
                Some(_) => {
                    body.push_str(line);
                    body.push('\n');
                }
                None => {}
            }
        }
    }
    assert!(checked >= 7, "only {checked} programs found in the guides");
}

#[test]
fn the_core_example_runs() {
    let description = workflow().description();
    let core = description.guides.iter().find(|g| g.guide.id == "workflow-core").unwrap();
    let start = core.body.find("```json workflow").unwrap();
    let rest = &core.body[start..];
    let body_start = rest.find('\n').unwrap() + 1;
    let body_end = rest[body_start..].find("```").unwrap() + body_start;
    let example: Value = serde_json::from_str(&rest[body_start..body_end]).unwrap();
    let execution = run(example, Some(json!({"userId": "42"})));
    assert!(execution.outcome.ok, "{:?}", execution.outcome);
    assert_eq!(execution.output.as_ref().unwrap()["name"], "Amira Hassan");
}

#[test]
fn a_branch_records_its_decision_and_skips_the_other_arm() {
    let program = json!({"steps": [
        {"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "42"}},
        {"id": "tier", "kind": "branch", "if": {"eq": ["$.steps.profile.output.tier", "gold"]},
         "then": [{"id": "gold", "kind": "call", "capability": "cap_flag_order", "with": {"order_id": "o-1", "reason": "vip"}}],
         "else": [{"id": "plain", "kind": "call", "capability": "cap_read_outbox"}]}
    ]});
    let validated = validate(program.clone());
    let plan = validated.response.plan.unwrap();
    assert_eq!(plan.steps.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["profile", "tier", "gold", "plain"]);
    let execution = run(program, None);
    assert!(execution.outcome.ok, "{:?}", execution.outcome);
    let ids: Vec<&str> = execution.trace.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["profile", "tier", "gold"]);
    let decision = &execution.trace.steps[1].decisions[0];
    assert_eq!(decision.took, "then");
    assert!(decision.because.contains("\"gold\""));
    assert!(execution.trace.steps[1].input.is_none() && execution.trace.steps[1].output.is_none());
}

#[test]
fn a_zero_iteration_loop_is_traced_with_one_exit() {
    let program = json!({"steps": [
        {"id": "orders", "kind": "call", "capability": "cap_list_orders", "with": {"user_id": "7"}},
        {"id": "each", "kind": "for_each", "over": "$.steps.orders.output.orders", "do": [
            {"id": "flag", "kind": "call", "capability": "cap_flag_order", "with": {"order_id": "$.item.id", "reason": "x"}}]}
    ]});
    let empty: Arc<dyn Invoker> = Arc::new(FnInvoker(|_: &_, _: &Value| Ok(json!({"orders": []}))));
    let execution = run_with(program, None, empty);
    assert!(execution.outcome.ok, "{:?}", execution.outcome);
    assert_eq!(execution.trace.steps.len(), 2);
    assert_eq!(execution.trace.steps[1].decisions.len(), 1);
    assert_eq!(execution.trace.steps[1].decisions[0].took, "exit");
}

#[test]
fn a_mid_run_failure_is_partial_with_the_trace_so_far() {
    let program = json!({"steps": [
        {"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "42"}},
        {"id": "orders", "kind": "call", "capability": "cap_list_orders", "with": {"user_id": "42"}},
        {"id": "flag", "kind": "call", "capability": "cap_flag_order", "with": {"order_id": "o-1", "reason": "x"}}
    ]});
    let failing: Arc<dyn Invoker> =
        Arc::new(FnInvoker(|entry: &pilotage_protocol::catalog::CatalogEntry, _: &Value| {
            if entry.id == "cap_list_orders" {
                Err(pilotage_engine::effects::InvokeError::Failed("HTTP 503 from the orders service".into()))
            } else {
                Ok(json!({"name": "A", "tier": "gold"}))
            }
        }));
    let execution = run_with(program, None, failing);
    assert!(!execution.outcome.ok);
    assert_eq!(execution.outcome.status, "partial");
    assert_eq!(execution.trace.steps.len(), 2);
    assert_eq!(execution.trace.steps[1].outcome.status, "error");
    assert!(execution.output.is_none());
    assert_eq!(execution.invocations.len(), 2);
}

#[test]
fn a_failure_before_any_invocation_is_error() {
    let program =
        json!({"steps": [{"id": "v", "kind": "set", "value": "$.input.missing"}], "output": "$.steps.v.output"});
    let execution = run(program, Some(json!({})));
    assert_eq!(execution.outcome.status, "error");
    assert!(execution.invocations.is_empty());
}

#[test]
fn input_is_bound_with_pointers_into_input() {
    let program = program(json!({"input": {"userId": "string"}, "steps": []}));
    let good = block_on(validation::bind_input(workflow(), &program, Some(&json!({"userId": "42"})))).unwrap();
    assert!(good.is_empty());
    let bad = block_on(validation::bind_input(workflow(), &program, Some(&json!({"userId": 42})))).unwrap();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].code, "input_binding");
    assert_eq!(bad[0].path, Locator::Pointer("/userId".into()));
}

/// A component built against the previous minor version of the WIT
/// package (`pilotage:language@1.1.0`, before `deploy`) still loads and
/// serves: the host's linker matches its `@1.1.0` imports and finds its
/// `@1.1.0` exports (semver-compatible names). The
/// 1.1.0 component is the bundled workflow/v1 with every version suffix
/// of the package rewritten, byte for byte, which is what a 1.1.0 build
/// names; the unchanged component is the control.
#[test]
fn a_component_of_the_previous_minor_version_still_loads_and_validates() {
    let current = pilotage_bundled::WORKFLOW;
    let needle = b"pilotage:language/";
    let mut older = current.to_vec();
    let mut renamed = 0;
    let mut at = 0;
    while let Some(found) = older[at..].windows(needle.len()).position(|window| window == needle) {
        let start = at + found + needle.len();
        let end = start + older[start..].iter().position(|&byte| byte == b'@').unwrap_or(0);
        if older[end..].starts_with(b"@1.2.0") {
            older[end..end + 6].copy_from_slice(b"@1.1.0");
            renamed += 1;
        }
        at = start;
    }
    assert!(renamed >= 4, "the bundled component names the package's interfaces at 1.2.0 ({renamed} found)");
    assert!(!older.windows(6).any(|window| window == b"@1.2.0"), "every 1.2.0 name was rewritten");
    for bytes in [current, older.as_slice()] {
        let component = crate::support::engine().load(bytes).expect("the component loads");
        assert_eq!(component.description().name, "workflow/v1");
        if bytes == current {
            assert!(component.exports_deploy(), "the guest SDK exports deploy");
        }
        let program = program(json!({"steps": [{"id": "p", "kind": "call", "capability": "cap_read_user_profile",
            "with": {"user_id": "$.input.userId"}}]}));
        let validated = block_on(validation::validate(&component, &program, None, &demo_catalog())).unwrap();
        assert!(validated.response.valid, "{:?}", validated.response.diagnostics);
    }
}
