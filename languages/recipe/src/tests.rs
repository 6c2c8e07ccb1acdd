//! Native tests of recipe/v1 over a small in-memory catalog: every
//! diagnostic code with a good and a bad case, plans, input binding and
//! traces.

use serde_json::{Value, json};

use super::*;

/// Two entries like the demo catalog's, and the calls made.
struct Fake {
    calls: Vec<(String, String, Value)>,
    fail: Option<&'static str>,
}

impl Catalog for Fake {
    fn entry(&self, id: &str) -> Option<CatalogEntry> {
        let (kind, hints, input, output) = match id {
            "cap_read_user_profile" => (
                "capability",
                diag::SAFE,
                json!({"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"], "additionalProperties": false}),
                json!({"type": "object", "properties": {"name": {"type": "string"}, "tier": {"type": "string"}}}),
            ),
            "cap_flag_order" => (
                "capability",
                diag::WRITE,
                json!({"type": "object", "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}}, "required": ["order_id", "reason"], "additionalProperties": false}),
                json!({"type": "object"}),
            ),
            "report_table" => ("table", diag::SAFE, json!({}), json!({})),
            _ => return None,
        };
        Some(CatalogEntry {
            id: id.into(),
            kind: kind.into(),
            name: id.into(),
            description: None,
            input_schema: Some(input.to_string()),
            output_schema: Some(output.to_string()),
            risk: risk_label(hints).into(),
            risk_hints: hints,
            tags: Vec::new(),
        })
    }
    fn ids(&self) -> Vec<String> {
        vec!["cap_flag_order".into(), "cap_read_user_profile".into(), "report_table".into()]
    }
}

impl Effects for Fake {
    fn now(&self) -> u64 {
        0
    }
    fn invoke(&mut self, step: &str, entry: &str, input: &Value) -> Result<Value, InvokeError> {
        self.calls.push((step.into(), entry.into(), input.clone()));
        match (self.fail, entry) {
            (Some(failing), _) if failing == step => Err(InvokeError::Failed("HTTP 404".into())),
            (_, "cap_read_user_profile") => Ok(json!({"name": "Amira", "tier": "gold"})),
            _ => Ok(json!({"flagged": true})),
        }
    }
}

fn fake() -> Fake {
    Fake { calls: Vec::new(), fail: None }
}

const PROFILE: &str = r#"{"id": "profile", "call": "cap_read_user_profile", "with": {"user_id": "$input.userId"}}"#;
const FLAG: &str =
    r#"{"id": "flag", "call": "cap_flag_order", "with": {"order_id": "o-1", "reason": "$profile.tier"}}"#;

fn recipe(steps: &[&str]) -> String {
    format!(r#"{{"steps": [{}], "output": {{"name": "$profile.name"}}}}"#, steps.join(","))
}

/// The (severity, code, path) of each diagnostic of `program`.
fn findings(program: &str) -> Vec<(Severity, String, String)> {
    Recipe::validate(program, None, &fake())
        .diagnostics
        .into_iter()
        .map(|d| {
            let Locator::Pointer(path) = d.path else { panic!("recipe/v1 uses json-pointer") };
            (d.severity, d.code, path)
        })
        .collect()
}

/// Executes `program` with `input` through the trait, as the host does.
fn run(program: &str, input: Option<&str>, host: &mut Fake) -> RunResult {
    let request = RunRequest {
        program: program.to_owned(),
        input: input.map(str::to_owned),
        context: None,
        test_run: false,
        deploy: false,
    };
    Recipe::execute(&request, host)
}

fn codes(program: &str) -> Vec<String> {
    findings(program).into_iter().map(|(_, code, _)| code).collect()
}

#[test]
fn every_code_has_a_bad_and_a_good_case() {
    let guard = |condition: &str| format!(r#"{{"id": "gold", "if": {condition}, "then": [{FLAG}]}}"#);
    let cases: Vec<(&str, String, String)> = vec![
        ("malformed_program", r#"{"step": []}"#.into(), r#"{"steps": []}"#.into()),
        ("malformed_step", recipe(&[PROFILE, r#"{"id": "x", "cal": "cap_flag_order"}"#]), recipe(&[PROFILE])),
        ("duplicate_step_id", recipe(&[PROFILE, PROFILE]), recipe(&[PROFILE])),
        ("reserved_character", recipe(&[&PROFILE.replace("\"profile\"", "\"p#1\""), PROFILE]), recipe(&[PROFILE])),
        ("unknown_entry", recipe(&[&PROFILE.replace("profile\"", "profil\"")]), recipe(&[PROFILE])),
        ("not_callable", recipe(&[PROFILE, r#"{"id": "t", "call": "report_table"}"#]), recipe(&[PROFILE])),
        ("argument_mismatch", recipe(&[&PROFILE.replace("\"$input.userId\"", "42")]), recipe(&[PROFILE])),
        (
            "bad_condition",
            recipe(&[PROFILE, &guard(r#"{"is": "$profile.tier", "eq": "gold"}"#)]),
            recipe(&[PROFILE, &guard(r#"{"is": "$profile.tier", "equals": "gold"}"#)]),
        ),
        ("unknown_reference", recipe(&[PROFILE, &FLAG.replace("$profile", "$profle")]), recipe(&[PROFILE, FLAG])),
        ("unknown_field", recipe(&[PROFILE, &FLAG.replace(".tier", ".tierr")]), recipe(&[PROFILE, FLAG])),
    ];
    assert_eq!(cases.len(), CODES.len());
    for (code, bad, good) in cases {
        assert!(codes(&bad).contains(&code.to_owned()), "{code}: {bad} gave {:?}", codes(&bad));
        assert_eq!(codes(&good), Vec::<String>::new(), "{code}: {good}");
    }
}

#[test]
fn diagnostics_point_at_the_fault_and_hint_at_visible_names() {
    let typo = recipe(&[&PROFILE.replace("profile\"", "profil\"")]);
    let validation = Recipe::validate(&typo, None, &fake());
    assert_eq!(validation.diagnostics[0].path, Locator::Pointer("/steps/0/call".into()));
    assert_eq!(validation.diagnostics[0].hint.as_deref(), Some("close match: cap_read_user_profile"));
    assert!(validation.plan.is_none());
    let extra = recipe(&[&PROFILE.replace("user_id", "userid")]);
    assert!(findings(&extra).contains(&(Severity::Error, "argument_mismatch".into(), "/steps/0/with/userid".into())));
    // A warning keeps the recipe valid.
    let warned = Recipe::validate(&recipe(&[PROFILE, &FLAG.replace(".tier", ".tierr")]), None, &fake());
    assert_eq!(warned.diagnostics[0].severity, Severity::Warning);
    assert!(warned.plan.is_some());
}

#[test]
fn arm_steps_are_not_visible_after_their_guard() {
    let guard = format!(r#"{{"id": "gold", "if": {{"is": "$profile.tier", "equals": "gold"}}, "then": [{FLAG}]}}"#);
    let after = r#"{"id": "again", "call": "cap_flag_order", "with": {"order_id": "$flag.order_id", "reason": "x"}}"#;
    assert_eq!(codes(&recipe(&[PROFILE, &guard, after])), ["unknown_reference"]);
    let nested = format!(r#"{{"id": "g", "if": {{"is": 1, "equals": 1}}, "then": [{guard}]}}"#);
    assert!(codes(&recipe(&[PROFILE, &nested])).contains(&"malformed_step".to_owned()));
}

#[test]
fn the_plan_lists_arm_steps_with_their_arm_and_the_highest_risk() {
    let guard = format!(r#"{{"id": "gold", "if": {{"is": "$profile.tier", "equals": "gold"}}, "then": [{FLAG}]}}"#);
    let plan = Recipe::validate(&recipe(&[PROFILE, &guard]), None, &fake()).plan.unwrap();
    let ids: Vec<_> = plan.steps.iter().map(|s| (s.id.as_str(), s.calls.as_deref(), s.risk.as_str())).collect();
    assert_eq!(
        ids,
        [
            ("profile", Some("cap_read_user_profile"), "safe"),
            ("gold", None, "safe"),
            ("flag", Some("cap_flag_order"), "write")
        ]
    );
    assert_eq!(plan.steps[2].arm, Some(Arm { branch: "gold".into(), label: "then".into() }));
    assert_eq!(plan.max_risk, "write");
}

#[test]
fn input_binding_names_each_missing_member() {
    let program = recipe(&[PROFILE]);
    assert!(Recipe::bind_input(&program, Some(r#"{"userId": "42"}"#)).is_empty());
    let missing = Recipe::bind_input(&program, Some("{}"));
    assert_eq!((missing[0].code.as_str(), &missing[0].path), ("input_binding", &Locator::Pointer("/userId".into())));
    assert_eq!(Recipe::bind_input(&program, None)[0].path, Locator::Pointer(String::new()));
    assert!(Recipe::bind_input(r#"{"steps": []}"#, None).is_empty());
}

#[test]
fn execution_follows_the_guard_and_records_its_decision() {
    let guard = format!(r#"{{"id": "gold", "if": {{"is": "$profile.tier", "equals": "gold"}}, "then": [{FLAG}]}}"#);
    let mut host = fake();
    let result = run(&recipe(&[PROFILE, &guard]), Some(r#"{"userId": "42"}"#), &mut host);
    assert_eq!(result.outcome, diag::success());
    assert_eq!(result.output.as_deref(), Some(r#"{"name":"Amira"}"#));
    let ids: Vec<_> = result.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["profile", "gold", "flag"]);
    assert_eq!(result.steps[1].decisions[0].took, "then");
    assert_eq!(result.steps[1].decisions[0].because, r#""$profile.tier" ("gold") equals "gold": true"#);
    assert_eq!(host.calls[1], ("flag".into(), "cap_flag_order".into(), json!({"order_id": "o-1", "reason": "gold"})));
    // The other arm: nothing inside `then` runs.
    let silver = guard.replace("\"gold\"}", "\"silver\"}");
    let result = run(&recipe(&[PROFILE, &silver]), Some(r#"{"userId": "42"}"#), &mut fake());
    assert_eq!(result.steps.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["profile", "gold"]);
    assert_eq!(result.steps[1].decisions[0].took, "else");
}

#[test]
fn failures_are_partial_after_an_invocation_and_error_before() {
    let mut host = Fake { calls: Vec::new(), fail: Some("flag") };
    let result = run(&recipe(&[PROFILE, FLAG]), Some(r#"{"userId": "42"}"#), &mut host);
    assert_eq!((result.outcome.ok, result.outcome.status.as_str()), (false, "partial"));
    assert_eq!(result.steps.len(), 2);
    assert!(result.output.is_none());
    let deep = PROFILE.replace("$input.userId", "$input.user.id");
    let result = run(&recipe(&[&deep]), Some(r#"{"user": "42"}"#), &mut fake());
    assert_eq!(result.outcome.status, "error");
    assert!(result.outcome.error.unwrap().contains("no field 'id'"));
}

#[test]
fn the_description_declares_what_the_code_emits() {
    let info = Recipe::describe();
    for (code, _) in CODES {
        assert!(info.diagnostic_codes.iter().any(|c| c.code == code));
    }
    let closed = info.guides.iter().find(|g| g.topics.iter().any(|t| t == "closed-sets")).unwrap();
    assert!(closed.body.contains("`unknown_field`") && closed.body.contains("`partial`"));
    let core = info.guides.iter().find(|g| g.level == GuideLevel::Core).unwrap();
    assert!(core.body.len() <= 8192);
    // The core guide's example is valid against a catalog like the demo's.
    let example = core.body.split("```json recipe").nth(1).and_then(|rest| rest.split("```").next()).unwrap();
    assert!(Recipe::validate(example, None, &fake()).diagnostics.is_empty());
}
