//! Native tests of workflow/v1 over the demo catalog: every diagnostic code
//! with a program that earns it and one that does not, plan derivation,
//! input binding, and interpretation with a scripted world.

use std::collections::BTreeMap;

use pilotage_guest_sdk::{
    Catalog, CatalogEntry, Effects, InvokeError, Language, Locator, RiskHints, RunRequest, Severity,
};
use serde_json::{Value, json};

use crate::Workflow;
use crate::execute::execute;
use crate::validate::{bind_input, validate};

struct DemoCatalog(BTreeMap<String, CatalogEntry>);

fn demo_catalog() -> DemoCatalog {
    let file: Value = serde_json::from_str(include_str!("../../../platform/server/demo/catalog.json")).unwrap();
    let mut entries = BTreeMap::new();
    for entry in file["entries"].as_array().unwrap() {
        let hints = &entry["risk_hints"];
        let id = entry["id"].as_str().unwrap().to_owned();
        entries.insert(
            id.clone(),
            CatalogEntry {
                id,
                kind: entry["kind"].as_str().unwrap().to_owned(),
                name: entry["name"].as_str().unwrap().to_owned(),
                description: entry["description"].as_str().map(str::to_owned),
                input_schema: entry.get("input_schema").map(Value::to_string),
                output_schema: entry.get("output_schema").map(Value::to_string),
                risk: entry["risk"].as_str().unwrap().to_owned(),
                risk_hints: RiskHints {
                    read_only: hints["readOnly"].as_bool().unwrap(),
                    destructive: hints["destructive"].as_bool().unwrap(),
                    open_world: hints["openWorld"].as_bool().unwrap(),
                },
                tags: vec![],
            },
        );
    }
    // A non-callable kind, for `not_callable`.
    entries.insert(
        "doc_refund_policy".into(),
        CatalogEntry {
            id: "doc_refund_policy".into(),
            kind: "document".into(),
            name: "Refund policy".into(),
            description: None,
            input_schema: None,
            output_schema: None,
            risk: "safe".into(),
            risk_hints: pilotage_guest_sdk::diag::SAFE,
            tags: vec![],
        },
    );
    DemoCatalog(entries)
}

impl Catalog for DemoCatalog {
    fn entry(&self, id: &str) -> Option<CatalogEntry> {
        self.0.get(id).cloned()
    }
    fn ids(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

/// (code, pointer, severity) of every finding.
fn findings(program: Value) -> Vec<(String, String, Severity)> {
    validate(&program.to_string(), &demo_catalog())
        .diagnostics
        .into_iter()
        .map(|d| {
            let pointer = match d.path {
                Locator::Pointer(p) => p,
                Locator::Range(_) => panic!("workflow/v1 uses json-pointer"),
            };
            (d.code, pointer, d.severity)
        })
        .collect()
}

fn codes(program: Value) -> Vec<String> {
    findings(program).into_iter().map(|(code, _, _)| code).collect()
}

fn profile_call(id: &str, capability: &str) -> Value {
    json!({"id": id, "kind": "call", "capability": capability, "with": {"user_id": "$.input.userId"}})
}

#[test]
fn spec_example_9_3_gets_the_close_match_hint() {
    let validation = validate(
        &json!({"steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profil"}]}).to_string(),
        &demo_catalog(),
    );
    let unknown = validation.diagnostics.iter().find(|d| d.code == "unknown_capability").unwrap();
    assert_eq!(unknown.path, Locator::Pointer("/steps/0/capability".into()));
    assert_eq!(unknown.hint.as_deref(), Some("close match: cap_read_user_profile"));
    assert!(validation.plan.is_none());
}

#[test]
fn spec_example_9_4_is_valid_and_planned() {
    let validation = validate(
        &json!({
            "steps": [profile_call("profile", "cap_read_user_profile")],
            "output": {"name": "$.steps.profile.output.name"}
        })
        .to_string(),
        &demo_catalog(),
    );
    assert!(validation.diagnostics.is_empty(), "{:?}", validation.diagnostics);
    let plan = validation.plan.unwrap();
    assert_eq!(plan.steps.len(), 1);
    assert_eq!(plan.steps[0].calls.as_deref(), Some("cap_read_user_profile"));
    assert_eq!(plan.max_risk, "safe");
    assert_eq!(validation.references, ["cap_read_user_profile"]);
}

#[test]
fn every_code_has_a_bad_and_a_good_program() {
    // (code, program that earns it, corrected program that does not)
    let cases: Vec<(&str, Value, Value)> = vec![
        ("malformed_program", json!({"step": []}), json!({"steps": []})),
        (
            "malformed_step",
            json!({"steps": [{"id": "a", "kind": "set"}]}),
            json!({"steps": [{"id": "a", "kind": "set", "value": 1}], "output": "$.steps.a.output"}),
        ),
        (
            "unknown_kind",
            json!({"steps": [{"id": "a", "kind": "sett", "value": 1}]}),
            json!({"steps": [{"id": "a", "kind": "set", "value": 1}], "output": "$.steps.a.output"}),
        ),
        (
            "duplicate_step_id",
            json!({"steps": [profile_call("p", "cap_read_user_profile"), profile_call("p", "cap_list_orders")]}),
            json!({"steps": [profile_call("p", "cap_read_user_profile"), profile_call("q", "cap_list_orders")]}),
        ),
        (
            "reserved_character",
            json!({"steps": [profile_call("p#1", "cap_read_user_profile")]}),
            json!({"steps": [profile_call("p1", "cap_read_user_profile")]}),
        ),
        (
            "unknown_capability",
            json!({"steps": [profile_call("p", "cap_read_user_profil")]}),
            json!({"steps": [profile_call("p", "cap_read_user_profile")]}),
        ),
        (
            "not_callable",
            json!({"steps": [{"id": "p", "kind": "call", "capability": "doc_refund_policy"}]}),
            json!({"steps": [{"id": "p", "kind": "call", "capability": "cap_read_outbox"}]}),
        ),
        (
            "argument_mismatch",
            json!({"steps": [{"id": "p", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": 42}}]}),
            json!({"steps": [{"id": "p", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "42"}}]}),
        ),
        (
            "bad_expression",
            json!({"steps": [profile_call("p", "cap_read_user_profile")], "output": "$.steps.p.result"}),
            json!({"steps": [profile_call("p", "cap_read_user_profile")], "output": "$.steps.p.output"}),
        ),
        (
            "bad_condition",
            json!({"steps": [{"id": "b", "kind": "branch", "if": {"equals": [1, 1]}, "then": []}]}),
            json!({"steps": [{"id": "b", "kind": "branch", "if": {"eq": [1, 1]}, "then": []}]}),
        ),
        (
            "unknown_step_reference",
            json!({"steps": [profile_call("p", "cap_read_user_profile")], "output": "$.steps.profle.output"}),
            json!({"steps": [profile_call("p", "cap_read_user_profile")], "output": "$.steps.p.output"}),
        ),
        (
            "scope_violation",
            json!({"steps": [
                {"id": "each", "kind": "for_each", "over": "$.input.list", "do": [profile_call("p", "cap_read_user_profile")]}
            ], "output": "$.steps.p.output"}),
            json!({"steps": [
                {"id": "each", "kind": "for_each", "over": "$.input.list", "do": [profile_call("p", "cap_read_user_profile")],
                 "collect": "$.steps.p.output"}
            ], "output": "$.steps.each.output"}),
        ),
        (
            "undeclared_input",
            json!({"input": {"userId": "string"}, "steps": [{"id": "p", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "$.input.user"}}]}),
            json!({"input": {"userId": "string"}, "steps": [profile_call("p", "cap_read_user_profile")]}),
        ),
        (
            "bad_input_declaration",
            json!({"input": {"userId": "text"}, "steps": []}),
            json!({"input": {"userId": "string"}, "steps": []}),
        ),
        (
            "unknown_output_field",
            json!({"steps": [profile_call("p", "cap_read_user_profile")], "output": "$.steps.p.output.nmae"}),
            json!({"steps": [profile_call("p", "cap_read_user_profile")], "output": "$.steps.p.output.name"}),
        ),
        (
            "unused_value",
            json!({"steps": [{"id": "v", "kind": "set", "value": 1}]}),
            json!({"steps": [{"id": "v", "kind": "set", "value": 1}], "output": "$.steps.v.output"}),
        ),
    ];
    let declared: Vec<&str> = crate::codes::OWN_CODES.iter().map(|(code, _)| *code).collect();
    for (code, bad, good) in &cases {
        assert!(declared.contains(code), "{code} is not declared");
        assert!(
            codes(bad.clone()).contains(&code.to_string()),
            "{code}: bad program did not earn it: {:?}",
            codes(bad.clone())
        );
        assert_eq!(codes(good.clone()), Vec::<String>::new(), "{code}: good program has findings");
    }
    for code in declared {
        assert!(cases.iter().any(|(c, _, _)| *c == code), "{code} has no case");
    }
}

#[test]
fn warnings_only_program_is_valid_with_a_plan() {
    let validation = validate(
        &json!({"steps": [profile_call("p", "cap_read_user_profile")], "output": "$.steps.p.output.nmae"}).to_string(),
        &demo_catalog(),
    );
    assert!(!validation.diagnostics.is_empty());
    assert!(validation.diagnostics.iter().all(|d| d.severity == Severity::Warning));
    assert_eq!(validation.diagnostics[0].hint.as_deref(), Some("close match: name"));
    assert!(validation.plan.is_some());
}

#[test]
fn arm_values_are_not_addressable_after_the_branch_but_are_inside_it() {
    let after = json!({"steps": [
        {"id": "check", "kind": "branch", "if": true, "then": [{"id": "inside", "kind": "set", "value": 1}]},
        {"id": "after", "kind": "set", "value": "$.steps.inside.output"}
    ], "output": "$.steps.after.output"});
    assert_eq!(
        findings(after),
        vec![
            ("scope_violation".into(), "/steps/1/value".into(), Severity::Error),
            // The arm's value is read only where it is not addressable.
            ("unused_value".into(), "/steps/0/then/0".into(), Severity::Warning),
        ]
    );
    let inside = json!({"steps": [
        {"id": "check", "kind": "branch", "if": true, "then": [
            {"id": "inside", "kind": "set", "value": 1},
            {"id": "next", "kind": "set", "value": "$.steps.inside.output"}]}
    ]});
    assert_eq!(codes(inside), vec!["unused_value"]);
    let forward = json!({"steps": [
        {"id": "a", "kind": "set", "value": "$.steps.b.output"},
        {"id": "b", "kind": "set", "value": 1}
    ], "output": "$.steps.a.output"});
    // `b` is read only before it exists, so it is also unused.
    assert_eq!(codes(forward), vec!["scope_violation", "unused_value"]);
    let loop_var_outside = json!({"steps": [
        {"id": "each", "kind": "for_each", "over": "$.input.xs", "do": []},
        {"id": "v", "kind": "set", "value": "$.item"}
    ], "output": "$.steps.v.output"});
    assert_eq!(codes(loop_var_outside), vec!["scope_violation"]);
}

#[test]
fn plan_marks_arms_and_loops_and_aggregates_risk() {
    let program = json!({"input": {"userId": "string"}, "steps": [
        {"id": "orders", "kind": "call", "capability": "cap_list_orders", "with": {"user_id": "$.input.userId"}},
        {"id": "each", "kind": "for_each", "over": "$.steps.orders.output.orders", "as": "order", "do": [
            {"id": "gate", "kind": "branch", "if": {"eq": ["$.order.status", "pending"]},
             "then": [{"id": "cancel", "kind": "call", "capability": "cap_cancel_order", "with": {"order_id": "$.order.id"}}],
             "else": [{"id": "flag", "kind": "call", "capability": "cap_flag_order", "with": {"order_id": "$.order.id", "reason": "x"}}]}
        ]}
    ]});
    let validation = validate(&program.to_string(), &demo_catalog());
    assert!(validation.diagnostics.is_empty(), "{:?}", validation.diagnostics);
    let plan = validation.plan.unwrap();
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["orders", "each", "gate", "cancel", "flag"]);
    let cancel = &plan.steps[3];
    assert_eq!(cancel.arm.as_ref().map(|a| (a.branch.as_str(), a.label.as_str())), Some(("gate", "then")));
    assert_eq!(cancel.loop_.as_deref(), Some("each"));
    assert_eq!(plan.steps[2].loop_.as_deref(), Some("each"));
    assert!(plan.steps[2].arm.is_none());
    assert_eq!(plan.max_risk, "destructive");
    assert!(cancel.risk_hints.destructive);
}

#[test]
fn input_binding_points_into_input() {
    let program = json!({"input": {"userId": "string", "limit": "integer?"}, "steps": []}).to_string();
    assert!(bind_input(&program, Some(&json!({"userId": "42"}))).is_empty());
    assert!(bind_input(&program, Some(&json!({"userId": "42", "limit": 3}))).is_empty());
    let wrong_type = bind_input(&program, Some(&json!({"userId": 42})));
    assert_eq!(wrong_type.len(), 1);
    assert_eq!(wrong_type[0].code, "input_binding");
    assert_eq!(wrong_type[0].path, Locator::Pointer("/userId".into()));
    let extra = bind_input(&program, Some(&json!({"userId": "42", "usrId": "1"})));
    assert_eq!(extra[0].path, Locator::Pointer("/usrId".into()));
    assert_eq!(bind_input(&program, None).len(), 1);
    assert_eq!(bind_input(&program, Some(&json!([1]))).len(), 1);
    // Undeclared input: any object is accepted, non-objects are not.
    let free = json!({"steps": []}).to_string();
    assert!(bind_input(&free, Some(&json!({"anything": 1}))).is_empty());
    assert!(bind_input(&free, None).is_empty());
    assert_eq!(bind_input(&free, Some(&json!("text"))).len(), 1);
}

/// A scripted world: answers by entry id and records every call.
struct World {
    calls: Vec<(String, String, Value)>,
    fail: Option<&'static str>,
}

impl Effects for World {
    fn invoke(&mut self, step_id: &str, entry_id: &str, input: &Value) -> Result<Value, InvokeError> {
        self.calls.push((step_id.into(), entry_id.into(), input.clone()));
        if self.fail == Some(entry_id) {
            return Err(InvokeError::Failed("HTTP 404: no such user".into()));
        }
        Ok(match entry_id {
            "cap_read_user_profile" => json!({"id": input["user_id"], "name": "Amira Hassan", "tier": "gold"}),
            "cap_list_orders" => {
                json!({"orders": [{"id": "o-1", "status": "pending"}, {"id": "o-2", "status": "shipped"}]})
            }
            _ => json!({"ok": true}),
        })
    }
    fn now(&self) -> u64 {
        1_000
    }
}

/// The world's catalog is empty: execution never reads it.
impl Catalog for World {
    fn entry(&self, _id: &str) -> Option<CatalogEntry> {
        None
    }
    fn ids(&self) -> Vec<String> {
        Vec::new()
    }
}

fn world() -> World {
    World { calls: Vec::new(), fail: None }
}

/// The exports as the host calls them, through the SDK's `Language`:
/// input arrives as JSON text, and text that is not JSON is a finding at
/// binding and an empty object at execution.
#[test]
fn the_exports_read_input_as_json_text() {
    let program = json!({"input": {"userId": "string"}, "steps": [], "output": "$.input.userId"}).to_string();
    assert!(Workflow::bind_input(&program, Some(r#"{"userId": "42"}"#)).is_empty());
    let broken = Workflow::bind_input(&program, Some("{not json"));
    assert_eq!((broken.len(), broken[0].code.as_str()), (1, "input_binding"));
    assert_eq!(broken[0].path, Locator::Pointer(String::new()));
    assert!(broken[0].message.starts_with("input is not JSON: "), "{}", broken[0].message);
    let run = |input: Option<&str>| {
        let request = RunRequest {
            program: program.clone(),
            input: input.map(str::to_owned),
            context: None,
            test_run: false,
            deploy: false,
        };
        Workflow::execute(&request, &mut world())
    };
    assert_eq!(run(Some(r#"{"userId": "42"}"#)).output.as_deref(), Some(r#""42""#));
    for input in [None, Some("{not json")] {
        let result = run(input);
        assert_eq!(result.outcome.status, "error", "{input:?}");
        assert_eq!(result.outcome.error.as_deref(), Some("output mapping: $.input.userId resolved to nothing"));
    }
    assert_eq!(Workflow::describe(), crate::describe::language_info());
}

#[test]
fn executes_the_spec_example_with_a_full_trace() {
    let program = json!({
        "steps": [profile_call("profile", "cap_read_user_profile")],
        "output": {"name": "$.steps.profile.output.name"}
    });
    let mut world = world();
    let result = execute(&program.to_string(), Some(json!({"userId": "42"})), &mut world);
    assert!(result.outcome.ok, "{:?}", result.outcome);
    assert_eq!(result.output.as_deref(), Some(r#"{"name":"Amira Hassan"}"#));
    assert_eq!(result.steps.len(), 1);
    assert_eq!(result.steps[0].calls.as_deref(), Some("cap_read_user_profile"));
    assert_eq!(result.steps[0].input.as_deref(), Some(r#"{"user_id":"42"}"#));
    assert_eq!(world.calls.len(), 1);
}

#[test]
fn loops_and_branches_trace_ids_and_decisions() {
    let program = json!({"steps": [
        {"id": "orders", "kind": "call", "capability": "cap_list_orders", "with": {"user_id": "42"}},
        {"id": "each", "kind": "for_each", "over": "$.steps.orders.output.orders", "as": "order", "do": [
            {"id": "gate", "kind": "branch", "if": {"eq": ["$.order.status", "pending"]},
             "then": [{"id": "flag", "kind": "call", "capability": "cap_flag_order", "with": {"order_id": "$.order.id", "reason": "x"}}]}
        ], "collect": "$.order.id"}
    ], "output": "$.steps.each.output"});
    let mut world = world();
    let result = execute(&program.to_string(), None, &mut world);
    assert!(result.outcome.ok, "{:?}", result.outcome);
    let ids: Vec<&str> = result.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["orders", "each", "gate#1", "flag#1", "gate#2"]);
    let loop_decisions: Vec<&str> = result.steps[1].decisions.iter().map(|d| d.took.as_str()).collect();
    assert_eq!(loop_decisions, ["continue", "continue", "exit"]);
    assert_eq!(result.steps[2].decisions[0].took, "then");
    assert_eq!(result.steps[4].decisions[0].took, "else");
    assert!(result.steps[4].decisions[0].because.contains("\"shipped\""));
    assert_eq!(result.output.as_deref(), Some(r#"["o-1","o-2"]"#));
    assert_eq!(world.calls[1].0, "flag#1");
}

#[test]
fn zero_iteration_loop_has_one_exit() {
    let program = json!({"steps": [
        {"id": "each", "kind": "for_each", "over": "$.input.xs", "do": [{"id": "v", "kind": "set", "value": "$.item"}]}
    ], "output": "$.steps.each.output"});
    let result = execute(&program.to_string(), Some(json!({"xs": []})), &mut world());
    assert!(result.outcome.ok);
    assert_eq!(result.steps.len(), 1);
    assert_eq!(result.steps[0].decisions.len(), 1);
    assert_eq!(result.steps[0].decisions[0].took, "exit");
    assert_eq!(result.output.as_deref(), Some("[]"));
}

#[test]
fn failure_after_an_invocation_is_partial_with_the_trace_so_far() {
    let program = json!({"steps": [
        profile_call("profile", "cap_read_user_profile"),
        profile_call("orders", "cap_list_orders"),
        profile_call("again", "cap_read_user_profile")
    ]});
    let mut world = World { calls: Vec::new(), fail: Some("cap_list_orders") };
    let result = execute(&program.to_string(), Some(json!({"userId": "42"})), &mut world);
    assert!(!result.outcome.ok);
    assert_eq!(result.outcome.status, "partial");
    assert_eq!(result.steps.len(), 2);
    assert_eq!(result.steps[1].outcome.status, "error");
    assert!(result.output.is_none());
    assert_eq!(world.calls.len(), 2);
}

#[test]
fn failure_before_any_invocation_is_error() {
    let program =
        json!({"steps": [{"id": "v", "kind": "set", "value": "$.input.missing"}], "output": "$.steps.v.output"});
    let result = execute(&program.to_string(), Some(json!({})), &mut world());
    assert_eq!(result.outcome.status, "error");
    assert_eq!(result.outcome.error.as_deref(), Some("$.input.missing resolved to nothing"));
    assert_eq!(result.steps.len(), 1);
}

#[test]
fn guide_programs_validate_as_the_guides_say() {
    let info = crate::describe::language_info();
    let mut checked = 0;
    for guide in &info.guides {
        for (fence, program) in fenced_programs(&guide.body) {
            let found = codes(serde_json::from_str(&program).unwrap_or_else(|e| panic!("{}: {e}", guide.id)));
            let words: Vec<&str> = fence.split_whitespace().collect();
            if words.get(2) == Some(&"invalid") {
                let code = words.get(3).expect("an invalid example names its code");
                assert!(found.iter().any(|c| c == code), "{}: expected {code}, got {found:?}", guide.id);
            } else {
                let errors: Vec<_> = findings(serde_json::from_str(&program).unwrap())
                    .into_iter()
                    .filter(|(_, _, severity)| *severity == Severity::Error)
                    .collect();
                assert!(errors.is_empty(), "{}: {errors:?}", guide.id);
            }
            checked += 1;
        }
    }
    assert!(checked >= 6, "only {checked} guide programs found");
}

/// The ```json workflow blocks of a guide: (fence line, body).
pub fn fenced_programs(body: &str) -> Vec<(String, String)> {
    let mut programs = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in body.lines() {
        match &mut current {
            None if line.starts_with("```json workflow") => current = Some((line.to_owned(), String::new())),
            Some((_, text)) if line.starts_with("```") => {
                let _ = text;
                programs.push(current.take().unwrap());
            }
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    programs
}
