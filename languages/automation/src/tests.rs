//! Native tests of automation/1 over a small device registry: every
//! diagnostic code with a bad and a good case, the near misses, plans and
//! risk, input binding, executions at chosen instants (daytime, night, a
//! window across midnight, daylight-saving changes), traces held to the
//! plan by the platform's own correspondence checker, and deploys.

use pilotage_protocol::correspondence;
use serde_json::{Value, json};

use super::*;

/// A device registry and the calls made through it.
struct Fake {
    /// The host clock, milliseconds since the Unix epoch.
    now: u64,
    /// Whether the porch light is on (what `porch_light.state` answers).
    light_on: bool,
    /// A step whose invocation fails.
    fail: Option<&'static str>,
    calls: Vec<(String, String, Value)>,
}

impl Catalog for Fake {
    fn entry(&self, id: &str) -> Option<CatalogEntry> {
        let (kind, hints, input, output) = match id {
            "porch_light.turn_on" => (
                "action",
                diag::WRITE,
                json!({"type": "object", "properties": {"brightness": {"type": "integer"}}, "additionalProperties": false}),
                json!({"type": "object"}),
            ),
            "porch_light.turn_off" => (
                "action",
                diag::WRITE,
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
                json!({"type": "object"}),
            ),
            "front_door.unlock" => (
                "action",
                diag::DESTRUCTIVE,
                json!({"type": "object", "properties": {}, "additionalProperties": false}),
                json!({"type": "object"}),
            ),
            "front_door.state" => ("sensor", diag::SAFE, json!({"type": "object"}), json!({"type": "object"})),
            "porch_light.state" => ("sensor", diag::SAFE, json!({"type": "object"}), json!({"type": "object"})),
            "living_room" => ("area", diag::SAFE, json!({}), json!({})),
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
        ["front_door.state", "front_door.unlock", "living_room", "porch_light.state", "porch_light.turn_off"]
            .into_iter()
            .chain(["porch_light.turn_on"])
            .map(String::from)
            .collect()
    }
}

impl Effects for Fake {
    fn now(&self) -> u64 {
        self.now
    }
    fn invoke(&mut self, step: &str, entry: &str, input: &Value) -> Result<Value, InvokeError> {
        self.calls.push((step.into(), entry.into(), input.clone()));
        match (self.fail, entry) {
            (Some(failing), _) if failing == step => Err(InvokeError::Failed("the device did not answer".into())),
            (_, "porch_light.state") => Ok(json!({"on": self.light_on})),
            (_, "front_door.state") => Ok(json!({"state": "open"})),
            _ => Ok(json!({"done": true})),
        }
    }
}

/// The registry at the instant `at` (RFC 3339), the porch light off.
fn fake_at(at: &str) -> Fake {
    Fake { now: ms(at), light_on: false, fail: None, calls: Vec::new() }
}

fn ms(at: &str) -> u64 {
    u64::try_from(chrono::DateTime::parse_from_rfc3339(at).unwrap().timestamp_millis()).unwrap()
}

/// The story's rule: light the porch when the front door opens after 22:00.
fn porch() -> Value {
    json!({
        "rule": "porch-at-night",
        "trigger": {"webhook": "home"},
        "conditions": [
            {"id": "door-opened", "event": "/state", "equals": "open"},
            {"id": "after-22", "time": {"after": "22:00", "before": "06:00", "time_zone": "Europe/Paris"}},
            {"id": "light-is-off", "read": "porch_light.state", "field": "/on", "equals": false}
        ],
        "actions": [
            {"id": "light-on", "call": "porch_light.turn_on", "with": {"brightness": 80}}
        ],
        "otherwise": []
    })
}

/// The porch rule changed by `change`, as program text.
fn variant(change: impl FnOnce(&mut Value)) -> String {
    let mut rule = porch();
    change(&mut rule);
    rule.to_string()
}

fn validate(program: &str) -> Validation {
    Automation::validate(program, None, &fake_at("2026-07-14T12:00:00Z"))
}

/// (code, path, hint) of each diagnostic of `program`.
fn findings(program: &str) -> Vec<(String, String, Option<String>)> {
    validate(program)
        .diagnostics
        .into_iter()
        .map(|d| {
            assert_eq!(d.severity, Severity::Error);
            let Locator::Pointer(path) = d.path else { panic!("automation/1 uses json-pointer") };
            (d.code, path, d.hint)
        })
        .collect()
}

fn codes(program: &str) -> Vec<String> {
    findings(program).into_iter().map(|(code, _, _)| code).collect()
}

/// The one finding of `program`.
fn only(program: &str) -> (String, String, Option<String>) {
    let mut found = findings(program);
    assert_eq!(found.len(), 1, "{program}: {found:?}");
    found.remove(0)
}

/// Executes `program` as the host does, with `input`, and checks the trace
/// against the plan with the platform's correspondence checker. Outside a
/// test run, what runs is the deployed body (the rule without its
/// trigger), as at a firing.
fn run(program: &str, input: Value, test_run: bool, host: &mut Fake) -> RunResult {
    let request = RunRequest {
        program: if test_run { program.to_owned() } else { run::body(program) },
        input: Some(input.to_string()),
        context: None,
        test_run,
        deploy: false,
    };
    let result = Automation::execute(&request, host);
    let plan = validate(program).plan.expect("a valid rule");
    let mismatches = correspondence::check(&protocol_plan(&plan), &protocol_trace(&result.steps), result.outcome.ok);
    assert!(mismatches.is_empty(), "{mismatches:?}");
    result
}

fn protocol_plan(plan: &Plan) -> pilotage_protocol::plan::Plan {
    let hints = |h: RiskHints| pilotage_protocol::risk::RiskHints {
        read_only: h.read_only,
        destructive: h.destructive,
        open_world: h.open_world,
    };
    let steps = plan
        .steps
        .iter()
        .map(|step| pilotage_protocol::plan::PlanStep {
            id: step.id.clone(),
            calls: step.calls.clone(),
            arm: step
                .arm
                .as_ref()
                .map(|arm| pilotage_protocol::plan::Arm { branch: arm.branch.clone(), label: arm.label.clone() }),
            loop_id: step.loop_.clone(),
            risk: step.risk.clone(),
            risk_hints: hints(step.risk_hints),
        })
        .collect();
    pilotage_protocol::plan::Plan::new(steps, plan.max_risk.clone())
}

fn protocol_trace(steps: &[TraceStep]) -> Vec<pilotage_protocol::trace::TraceStep> {
    steps
        .iter()
        .map(|step| {
            serde_json::from_value(json!({
                "id": step.id,
                "calls": step.calls,
                "input": step.input.as_deref().map(|text| serde_json::from_str::<Value>(text).unwrap()),
                "output": step.output.as_deref().map(|text| serde_json::from_str::<Value>(text).unwrap()),
                "outcome": {"ok": step.outcome.ok, "status": step.outcome.status, "error": step.outcome.error},
                "decisions": step.decisions.iter().map(|d| json!({"at": d.at, "took": d.took, "because": d.because})).collect::<Vec<_>>(),
            }))
            .unwrap()
        })
        .collect()
}

fn ids(result: &RunResult) -> Vec<&str> {
    result.steps.iter().map(|step| step.id.as_str()).collect()
}

fn output(result: &RunResult) -> Value {
    serde_json::from_str(result.output.as_deref().expect("an output")).unwrap()
}

fn door_open_at(at: &str) -> Value {
    json!({"trigger": {"kind": "webhook", "source": "home"}, "event": {"state": "open"}, "at": at})
}

#[test]
fn the_porch_rule_plans_its_read_its_branch_and_its_action_in_arm_then() {
    let validation = validate(&porch().to_string());
    assert_eq!(validation.diagnostics, Vec::new());
    let plan = validation.plan.unwrap();
    let steps: Vec<_> = plan
        .steps
        .iter()
        .map(|s| (s.id.as_str(), s.calls.as_deref(), s.arm.as_ref().map(|a| (a.branch.as_str(), a.label.as_str()))))
        .collect();
    assert_eq!(
        steps,
        [
            ("light-is-off", Some("porch_light.state"), None),
            ("when", None, None),
            ("light-on", Some("porch_light.turn_on"), Some(("when", "then"))),
        ]
    );
    assert_eq!(plan.steps[1].risk, "safe");
    assert_eq!(plan.max_risk, "write");
    assert_eq!(validation.references, ["porch_light.state", "porch_light.turn_on"]);
}

#[test]
fn unlocking_the_door_makes_the_plan_destructive() {
    let unlocking = variant(|rule| {
        rule["actions"].as_array_mut().unwrap().push(json!({"id": "unlock", "call": "front_door.unlock"}))
    });
    let plan = validate(&unlocking).plan.unwrap();
    assert_eq!(plan.max_risk, "destructive");
    let unlock = plan.steps.iter().find(|s| s.id == "unlock").unwrap();
    assert_eq!((unlock.risk.as_str(), unlock.risk_hints.destructive), ("destructive", true));
    // In `otherwise` too: the plan holds every arm.
    let otherwise =
        variant(|rule| rule["otherwise"] = json!([{"id": "unlock", "call": "front_door.unlock", "with": {}}]));
    let plan = validate(&otherwise).plan.unwrap();
    assert_eq!(plan.max_risk, "destructive");
    assert_eq!(plan.steps.last().unwrap().arm, Some(Arm { branch: "when".into(), label: "else".into() }));
}

#[test]
fn every_code_has_a_bad_and_a_good_case() {
    let action = |extra: Value| variant(move |rule| rule["actions"].as_array_mut().unwrap().push(extra));
    let condition = |extra: Value| variant(move |rule| rule["conditions"].as_array_mut().unwrap().push(extra));
    let cases: Vec<(&str, String)> = vec![
        ("malformed_rule", "[]".into()),
        ("bad_name", variant(|rule| rule["rule"] = json!("Porch At Night"))),
        ("bad_trigger", variant(|rule| rule["trigger"] = json!({"sms": "+33600000000"}))),
        ("one_trigger", variant(|rule| rule["triggers"] = json!([{"webhook": "home"}]))),
        (
            "bad_cron",
            variant(|rule| rule["trigger"] = json!({"schedule": {"cron": "30 22 * *", "time_zone": "Europe/Paris"}})),
        ),
        ("unknown_time_zone", variant(|rule| rule["conditions"][1]["time"]["time_zone"] = json!("Europe/Pariss"))),
        ("bad_time", variant(|rule| rule["conditions"][1]["time"]["after"] = json!("10pm"))),
        ("malformed_condition", variant(|rule| rule["conditions"][0]["event"] = json!("state"))),
        ("malformed_action", action(json!({"id": "x", "with": {}}))),
        ("duplicate_step_id", action(json!({"id": "light-on", "call": "porch_light.turn_off"}))),
        ("reserved_character", action(json!({"id": "off#1", "call": "porch_light.turn_off"}))),
        ("unknown_entry", action(json!({"id": "off", "call": "porch_light.turnoff"}))),
        ("not_callable", action(json!({"id": "room", "call": "living_room"}))),
        ("not_read_only", condition(json!({"id": "open", "read": "front_door.unlock", "equals": {}}))),
        ("argument_mismatch", variant(|rule| rule["actions"][0]["with"]["brightness"] = json!("high"))),
        ("no_delay", action(json!({"id": "wait", "delay": "5m"}))),
        ("conditions_not_if", variant(|rule| rule["if"] = json!({"event": "/state", "equals": "open"}))),
        ("otherwise_not_else", variant(|rule| rule["else"] = json!([]))),
        ("actions_not_then", variant(|rule| rule["then"] = json!([]))),
        ("trigger_in_actions", action(json!({"id": "t", "trigger": {"webhook": "home"}}))),
        ("no_alternatives", condition(json!({"id": "either", "or": [{"event": "/state", "equals": "ajar"}]}))),
    ];
    // `trigger_needs_deploy` and `deploy_needs_trigger` are found at
    // execution, not by the validator (see
    // `a_rule_with_a_trigger_is_refused_in_an_immediate_run` and
    // `a_rule_without_a_trigger_is_not_deployed`).
    let at_execution = [run::TRIGGER_NEEDS_DEPLOY, run::DEPLOY_NEEDS_TRIGGER];
    let validator_codes: Vec<_> = CODES.iter().filter(|(code, _)| !at_execution.contains(code)).collect();
    assert_eq!(cases.len(), validator_codes.len());
    for ((code, bad), &(declared, _)) in cases.iter().zip(validator_codes) {
        assert_eq!(*code, declared, "cases follow CODES");
        let found = codes(bad);
        assert!(found.contains(&code.to_string()), "{code}: {bad} gave {found:?}");
        assert!(validate(bad).plan.is_none());
    }
    assert_eq!(codes(&porch().to_string()), Vec::<String>::new());
}

#[test]
fn near_misses_are_refused_alone_with_a_hint_naming_the_mechanism_to_use() {
    let cases = [
        (
            variant(|rule| rule["actions"].as_array_mut().unwrap().push(json!({"id": "wait", "delay": "PT5M"}))),
            "no_delay",
            "/actions/1/delay",
            "schedule",
        ),
        (variant(|rule| rule["actions"][0]["wait"] = json!(300)), "no_delay", "/actions/0/wait", "no delays"),
        (variant(|rule| rule["conditions"][0]["for"] = json!("5m")), "no_delay", "/conditions/0/for", "tested once"),
        (
            variant(|rule| rule["triggers"] = json!([{"webhook": "home"}, {"webhook": "garage"}])),
            "one_trigger",
            "/triggers",
            "second rule",
        ),
        (variant(|rule| rule["trigger"] = json!([{"webhook": "home"}])), "one_trigger", "/trigger", "exactly one"),
        (
            variant(|rule| rule["trigger"]["mqtt"] = json!({"broker": "home", "topic": "door"})),
            "one_trigger",
            "/trigger",
            "second rule",
        ),
        (variant(|rule| rule["when"] = json!([])), "conditions_not_if", "/when", "\"conditions\""),
        (variant(|rule| rule["actions"][0]["if"] = json!({})), "conditions_not_if", "/actions/0/if", "`conditions`"),
        (
            variant(|rule| rule["else"] = json!([{"id": "off", "call": "porch_light.turn_off"}])),
            "otherwise_not_else",
            "/else",
            "\"otherwise\"",
        ),
        (variant(|rule| rule["do"] = json!([])), "actions_not_then", "/do", "\"actions\""),
        (
            variant(|rule| rule["actions"][0]["schedule"] = json!({"cron": "0 22 * * *"})),
            "trigger_in_actions",
            "/actions/0/schedule",
            "top level",
        ),
        (
            variant(|rule| rule["conditions"][0]["not"] = json!(true)),
            "no_alternatives",
            "/conditions/0/not",
            "second rule",
        ),
        (
            variant(|rule| rule["conditions"][0]["above"] = json!(3)),
            "malformed_condition",
            "/conditions/0/above",
            "`equals` only",
        ),
        (variant(|rule| rule["webhook"] = json!("home")), "bad_trigger", "/webhook", "inside `trigger`"),
        (variant(|rule| rule["name"] = json!("porch")), "bad_name", "/name", "`rule`"),
    ];
    for (program, code, path, hint) in cases {
        let (found, at, found_hint) = only(&program);
        assert_eq!((found.as_str(), at.as_str()), (code, path), "{program}");
        let found_hint = found_hint.unwrap_or_default();
        assert!(found_hint.contains(hint), "{code} at {path}: hint {found_hint:?} lacks {hint:?}");
    }
    // An item that is only a near miss is reported for it alone.
    let (code, path, _) =
        only(&variant(|rule| rule["actions"].as_array_mut().unwrap().push(json!({"webhook": "home"}))));
    assert_eq!((code.as_str(), path.as_str()), ("trigger_in_actions", "/actions/1/webhook"));
    // The bare keys are not refused where they belong.
    assert!(
        codes(&variant(|rule| rule["otherwise"] = json!([{"id": "off", "call": "porch_light.turn_off"}]))).is_empty()
    );
}

#[test]
fn names_and_unknown_members_get_hints() {
    let (code, path, hint) = only(&variant(|rule| rule["rule"] = json!("Porch At Night")));
    assert_eq!((code.as_str(), path.as_str(), hint.as_deref()), ("bad_name", "/rule", Some("e.g. porch-at-night")));
    assert_eq!(codes(&variant(|rule| rule["rule"] = json!("x".repeat(65)))), ["bad_name"]);
    assert!(codes(&variant(|rule| rule["rule"] = json!("x".repeat(64)))).is_empty());
    let (code, path, hint) = only(&variant(|rule| rule["condition"] = json!([])));
    assert_eq!((code.as_str(), path.as_str()), ("conditions_not_if", "/condition"));
    assert!(hint.is_some());
    let (code, path, hint) = only(&variant(|rule| rule["actionz"] = json!([])));
    assert_eq!(
        (code.as_str(), path.as_str(), hint.as_deref()),
        ("malformed_rule", "/actionz", Some("close match: actions"))
    );
    let (code, _, _) = only(&variant(|rule| rule.as_object_mut().unwrap().remove("actions").map(drop).unwrap()));
    assert_eq!(code, "malformed_rule");
    // `otherwise` and `conditions` are optional.
    assert!(
        codes(&variant(|rule| {
            let rule = rule.as_object_mut().unwrap();
            rule.remove("otherwise");
            rule.remove("conditions");
        }))
        .is_empty()
    );
}

#[test]
fn unknown_entries_get_close_matches_among_visible_ids() {
    let typo = variant(|rule| rule["actions"][0]["call"] = json!("porch_light.turnon"));
    let (code, path, hint) = only(&typo);
    assert_eq!((code.as_str(), path.as_str()), ("unknown_entry", "/actions/0/call"));
    assert!(hint.unwrap().contains("porch_light.turn_on"));
    let read = variant(|rule| rule["conditions"][2]["read"] = json!("porch_light.stat"));
    let (code, path, hint) = only(&read);
    assert_eq!(
        (code.as_str(), path.as_str(), hint.as_deref()),
        ("unknown_entry", "/conditions/2/read", Some("close match: porch_light.state"))
    );
    assert_eq!(only(&variant(|rule| rule["actions"][0]["call"] = json!("garage.open"))).2, None);
}

#[test]
fn a_read_of_an_entry_that_changes_a_device_is_refused() {
    let unlock =
        variant(|rule| rule["conditions"][2] = json!({"id": "unlocked", "read": "front_door.unlock", "equals": {}}));
    let (code, path, hint) = only(&unlock);
    assert_eq!((code.as_str(), path.as_str()), ("not_read_only", "/conditions/2/read"));
    assert!(hint.unwrap().contains("`actions`"));
    let sensor = variant(|rule| {
        rule["conditions"][2] = json!({"id": "door", "read": "front_door.state", "field": "/state", "equals": "open"})
    });
    assert!(codes(&sensor).is_empty());
    // A sensor's input is checked like an action's.
    let with = variant(|rule| rule["conditions"][2]["with"] = json!([]));
    assert_eq!(codes(&with), ["malformed_condition"]);
}

#[test]
fn arguments_are_checked_against_the_entry_schema() {
    let extra = variant(|rule| rule["actions"][0]["with"] = json!({"brightnes": 80}));
    let (code, path, hint) = only(&extra);
    assert_eq!(
        (code.as_str(), path.as_str(), hint.as_deref()),
        ("argument_mismatch", "/actions/0/with/brightnes", Some("close match: brightness"))
    );
    assert_eq!(codes(&variant(|rule| rule["actions"][0]["with"] = json!("bright"))), ["malformed_action"]);
}

#[test]
fn time_zones_must_be_iana_names() {
    let zone = |name: Value| variant(move |rule| rule["conditions"][1]["time"]["time_zone"] = name);
    let (code, path, hint) = only(&zone(json!("Europe/Pariss")));
    assert_eq!((code.as_str(), path.as_str()), ("unknown_time_zone", "/conditions/1/time/time_zone"));
    assert!(hint.unwrap().contains("Europe/Paris"));
    assert_eq!(only(&zone(json!("Paris"))).2.as_deref(), Some("close match: Europe/Paris"));
    assert_eq!(only(&zone(json!("CEST+2"))).0, "unknown_time_zone");
    assert_eq!(only(&zone(json!(1))).0, "unknown_time_zone");
    for good in ["America/New_York", "UTC", "Asia/Kolkata", "Pacific/Chatham"] {
        assert!(codes(&zone(json!(good))).is_empty(), "{good}");
    }
    let missing =
        variant(|rule| rule["conditions"][1]["time"].as_object_mut().unwrap().remove("time_zone").map(drop).unwrap());
    assert_eq!(only(&missing).0, "unknown_time_zone");
    let schedule =
        |zone: &str| variant(|rule| rule["trigger"] = json!({"schedule": {"cron": "0 22 * * *", "time_zone": zone}}));
    assert_eq!(only(&schedule("Mars/Olympus")).1, "/trigger/schedule/time_zone");
    assert!(codes(&schedule("Europe/Paris")).is_empty());
}

#[test]
fn cron_expressions_get_a_light_syntax_check() {
    let cron =
        |cron: &str| variant(|rule| rule["trigger"] = json!({"schedule": {"cron": cron, "time_zone": "Europe/Paris"}}));
    for good in ["30 22 * * *", "0 30 22 * * *", "*/15 6-9 * * MON-FRI", "0 0 1,15 * ?", "0 22 * * 7"] {
        assert!(codes(&cron(good)).is_empty(), "{good}");
    }
    for bad in [
        "30 22 * *",
        "1 2 3 4 5 6 7",
        "@daily",
        "60 22 * * *",
        "0 24 * * *",
        "0 22 * 13 *",
        "0 22 * * * ;",
        "0 22 $ * *",
        "",
    ] {
        let (code, path, hint) = only(&cron(bad));
        assert_eq!((code.as_str(), path.as_str()), ("bad_cron", "/trigger/schedule/cron"), "{bad}");
        assert!(hint.unwrap().contains("30 22 * * *"));
    }
}

#[test]
fn triggers_map_to_the_platform_vocabulary() {
    let mqtt = |topic: &str| variant(|rule| rule["trigger"] = json!({"mqtt": {"broker": "home", "topic": topic}}));
    for good in ["zigbee/front_door", "home/+/door", "home/#", "#", "+", "+/+/state"] {
        assert!(codes(&mqtt(good)).is_empty(), "{good}");
    }
    for bad in ["home/#/door", "home/door#", "home/+door", "", "home/do+or/#"] {
        let (code, path, _) = only(&mqtt(bad));
        assert_eq!((code.as_str(), path.as_str()), ("bad_trigger", "/trigger/mqtt/topic"), "{bad}");
    }
    let (code, path, _) = only(&variant(|rule| rule["trigger"] = json!({"mqtt": {"topic": "home/#"}})));
    assert_eq!((code.as_str(), path.as_str()), ("bad_trigger", "/trigger/mqtt/broker"));
    assert_eq!(only(&variant(|rule| rule["trigger"] = json!({"webhook": ""}))).0, "bad_trigger");
    assert_eq!(only(&variant(|rule| rule["trigger"] = json!({}))).0, "bad_trigger");
    assert_eq!(
        only(&variant(|rule| rule["trigger"] = json!({"webhok": "home"}))).2.as_deref(),
        Some("close match: webhook")
    );
    // Without a trigger a rule is a body: valid, run once (see
    // `a_rule_with_a_trigger_is_refused_in_an_immediate_run`).
    assert!(codes(&variant(|rule| rule.as_object_mut().unwrap().remove("trigger").map(drop).unwrap())).is_empty());
    // The firing's `kind` shape, and a bare cron, get the rule's shape.
    let (code, path, hint) = only(&variant(|rule| rule["trigger"] = json!({"kind": "webhook", "source": "home"})));
    assert_eq!(
        (code.as_str(), path.as_str(), hint.as_deref()),
        ("bad_trigger", "/trigger", Some(r#"write {"webhook": "SOURCE"}"#))
    );
    let (code, _, hint) = only(&variant(|rule| rule["trigger"] = json!({"type": "schedule", "cron": "0 22 * * *"})));
    assert_eq!(code, "bad_trigger");
    assert!(hint.unwrap().contains(r#"{"schedule": {"cron""#));
    let (_, _, hint) = only(&variant(|rule| rule["trigger"] = json!({"cron": "0 22 * * *", "time_zone": "UTC"})));
    assert!(hint.unwrap().contains(r#"{"schedule""#));
}

#[test]
fn time_windows_are_hh_mm_and_not_empty() {
    let window = |after: &str, before: &str| {
        variant(|rule| {
            rule["conditions"][1]["time"]["after"] = json!(after);
            rule["conditions"][1]["time"]["before"] = json!(before);
        })
    };
    for (after, before) in [("22:00", "06:00"), ("00:00", "23:59"), ("06:30", "07:00")] {
        assert!(codes(&window(after, before)).is_empty(), "{after}-{before}");
    }
    for (after, before, path) in [
        ("10pm", "06:00", "/conditions/1/time/after"),
        ("22:00", "6:00", "/conditions/1/time/before"),
        ("24:00", "06:00", "/conditions/1/time/after"),
        ("22:60", "06:00", "/conditions/1/time/after"),
        ("22:00", "22:00", "/conditions/1/time"),
    ] {
        let (code, at, hint) = only(&window(after, before));
        assert_eq!((code.as_str(), at.as_str()), ("bad_time", path), "{after}-{before}");
        assert!(hint.is_some());
    }
    assert_eq!(only(&variant(|rule| rule["conditions"][1]["time"]["days"] = json!(["mon"]))).0, "malformed_condition");
}

#[test]
fn step_ids_are_unique_and_free_of_reserved_characters() {
    let (code, path, _) = only(&variant(|rule| rule["actions"][0]["id"] = json!("door-opened")));
    assert_eq!((code.as_str(), path.as_str()), ("duplicate_step_id", "/actions/0/id"));
    assert_eq!(only(&variant(|rule| rule["actions"][0]["id"] = json!("when"))).0, "duplicate_step_id");
    let (code, _, hint) = only(&variant(|rule| rule["conditions"][0]["id"] = json!("door/opened")));
    assert_eq!((code.as_str(), hint.as_deref()), ("reserved_character", Some("rename it, e.g. 'door-opened'")));
    assert_eq!(
        only(&variant(|rule| rule["conditions"][0].as_object_mut().unwrap().remove("id").map(drop).unwrap())).0,
        "malformed_condition"
    );
}

#[test]
fn a_daytime_test_run_skips_and_says_it_is_14_03() {
    let at = "2026-07-14T14:03:00+02:00";
    let mut host = fake_at(at);
    let result = run(&porch().to_string(), door_open_at(at), true, &mut host);
    assert_eq!(result.outcome, diag::success());
    assert_eq!(ids(&result), ["light-is-off", "when"]);
    let decisions = &result.steps[1].decisions;
    assert_eq!((decisions[0].at.as_str(), decisions[0].took.as_str()), ("when", "else"));
    assert_eq!(
        decisions[0].because,
        "after-22 is false: it is 14:03 in Europe/Paris (2026-07-14, UTC+02:00); the window opens at 22:00 and closes at 06:00"
    );
    let conditions: Vec<_> = decisions[1..].iter().map(|d| (d.at.as_str(), d.took.as_str())).collect();
    assert_eq!(conditions, [("door-opened", "true"), ("after-22", "false")]);
    assert_eq!(decisions[1].because, r#"event /state is "open"; expected "open""#);
    // Only the sensor was called; the light was not touched.
    assert_eq!(host.calls, [("light-is-off".to_owned(), "porch_light.state".to_owned(), json!({}))]);
    assert_eq!(output(&result), json!({"rule": "porch-at-night", "took": "else", "actions": [], "test_run": true}));
}

#[test]
fn at_22_30_the_porch_lights_up() {
    let at = "2026-07-14T22:30:00+02:00";
    let mut host = fake_at(at);
    let result = run(&porch().to_string(), door_open_at(at), false, &mut host);
    assert_eq!(result.outcome, diag::success());
    assert_eq!(ids(&result), ["light-is-off", "when", "light-on"]);
    let decisions: Vec<_> =
        result.steps[1].decisions.iter().map(|d| (d.at.as_str(), d.took.as_str(), d.because.as_str())).collect();
    assert_eq!(decisions[0], ("when", "then", "every condition holds"));
    assert_eq!(decisions[3], ("light-is-off", "true", "porch_light.state /on is false; expected false"));
    assert!(decisions[2].2.starts_with("it is 22:30 in Europe/Paris"));
    assert_eq!(host.calls[1], ("light-on".to_owned(), "porch_light.turn_on".to_owned(), json!({"brightness": 80})));
    assert_eq!(output(&result), json!({"rule": "porch-at-night", "took": "then", "actions": ["light-on"]}));
    let light = &result.steps[2];
    assert_eq!(
        (light.calls.as_deref(), light.input.as_deref()),
        (Some("porch_light.turn_on"), Some(r#"{"brightness":80}"#))
    );
}

#[test]
fn evaluation_stops_at_the_first_false_condition_but_every_read_runs() {
    let at = "2026-07-14T22:30:00+02:00";
    let mut host = fake_at(at);
    let closed = json!({"event": {"state": "closed"}, "at": at});
    let result = run(&porch().to_string(), closed, false, &mut host);
    let decisions = &result.steps[1].decisions;
    assert_eq!(decisions.len(), 2);
    assert_eq!(decisions[0].because, r#"door-opened is false: event /state is "closed"; expected "open""#);
    assert_eq!(host.calls.len(), 1, "the read ran, the action did not");
    // The light already on: the read decides.
    let mut lit = Fake { light_on: true, ..fake_at(at) };
    let result = run(&porch().to_string(), door_open_at(at), false, &mut lit);
    assert_eq!(
        result.steps[1].decisions[0].because,
        "light-is-off is false: porch_light.state /on is true; expected false"
    );
    // No event at all: the member is missing.
    let result = run(&porch().to_string(), json!({}), false, &mut fake_at(at));
    assert!(result.steps[1].decisions[1].because.contains("event /state is missing"));
}

#[test]
fn otherwise_runs_in_arm_else() {
    let program = variant(|rule| rule["otherwise"] = json!([{"id": "off", "call": "porch_light.turn_off"}]));
    let at = "2026-07-14T14:03:00+02:00";
    let mut host = fake_at(at);
    let result = run(&program, door_open_at(at), false, &mut host);
    assert_eq!(ids(&result), ["light-is-off", "when", "off"]);
    assert_eq!(output(&result)["actions"], json!(["off"]));
}

#[test]
fn a_window_across_midnight_holds_from_after_until_before() {
    let window = clock::Window { after: 22 * 60, before: 6 * 60, zone: chrono_tz::Europe::Paris };
    for (at, inside) in [
        ("2026-07-15T05:00:00+02:00", true),
        ("2026-07-15T07:00:00+02:00", false),
        ("2026-07-14T22:00:00+02:00", true),
        ("2026-07-14T21:59:59+02:00", false),
        ("2026-07-15T05:59:59+02:00", true),
        ("2026-07-15T06:00:00+02:00", false),
        ("2026-07-15T00:00:00+02:00", true),
    ] {
        assert_eq!(window.check(ms(at)).0, inside, "{at}");
    }
    // Through a whole run: 05:00 lights the porch, 07:00 does not.
    let five = run(
        &porch().to_string(),
        door_open_at("2026-07-15T05:00:00+02:00"),
        false,
        &mut fake_at("2026-07-15T05:00:00+02:00"),
    );
    assert_eq!(output(&five)["took"], "then");
    let seven = run(
        &porch().to_string(),
        door_open_at("2026-07-15T07:00:00+02:00"),
        false,
        &mut fake_at("2026-07-15T07:00:00+02:00"),
    );
    assert_eq!(output(&seven)["took"], "else");
    // A window within one day.
    let day = clock::Window { after: 9 * 60, before: 17 * 60, zone: chrono_tz::UTC };
    assert!(day.check(ms("2026-07-14T12:00:00Z")).0);
    assert!(!day.check(ms("2026-07-14T17:00:00Z")).0);
    assert!(!day.check(ms("2026-07-14T03:00:00Z")).0);
}

#[test]
fn windows_read_local_time_across_daylight_saving_changes() {
    let paris = chrono_tz::Europe::Paris;
    let two_to_three = clock::Window { after: 2 * 60, before: 3 * 60, zone: paris };
    let three_to_four = clock::Window { after: 3 * 60, before: 4 * 60, zone: paris };
    // 2026-03-29: at 02:00 CET the clocks jump to 03:00 CEST; 02:30 never
    // happens in Paris. 00:59 UTC is 01:59 CET; 01:00 UTC is already 03:00.
    let (inside, because) = two_to_three.check(ms("2026-03-29T00:59:00Z"));
    assert!(!inside);
    assert!(because.starts_with("it is 01:59 in Europe/Paris (2026-03-29, UTC+01:00)"), "{because}");
    let (inside, because) = two_to_three.check(ms("2026-03-29T01:00:00Z"));
    assert!(!inside);
    assert!(because.starts_with("it is 03:00 in Europe/Paris (2026-03-29, UTC+02:00)"), "{because}");
    assert!(three_to_four.check(ms("2026-03-29T01:30:00Z")).0, "02:30 local does not exist: 01:30 UTC is 03:30");
    // 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice,
    // and both are inside the window.
    let (first, because) = two_to_three.check(ms("2026-10-25T00:30:00Z"));
    assert!(first && because.contains("02:30 in Europe/Paris (2026-10-25, UTC+02:00)"), "{because}");
    let (second, because) = two_to_three.check(ms("2026-10-25T01:30:00Z"));
    assert!(second && because.contains("02:30 in Europe/Paris (2026-10-25, UTC+01:00)"), "{because}");
    // The same instant in a zone without DST is unchanged.
    let utc = clock::Window { after: 60, before: 2 * 60, zone: chrono_tz::UTC };
    assert!(utc.check(ms("2026-03-29T01:30:00Z")).0);
    // Through a run, with the clock given as in a test run.
    let rule = variant(|rule| {
        rule["conditions"][1]["time"]["after"] = json!("02:00");
        rule["conditions"][1]["time"]["before"] = json!("03:00");
    });
    let at = "2026-03-29T03:30:00+02:00";
    let result = run(&rule, door_open_at(at), true, &mut fake_at(at));
    assert_eq!(output(&result)["took"], "else");
    assert!(result.steps[1].decisions[0].because.contains("03:30"));
}

#[test]
fn failures_are_error_before_an_action_ran_and_partial_after() {
    let at = "2026-07-14T22:30:00+02:00";
    let mut sensor_down = Fake { fail: Some("light-is-off"), ..fake_at(at) };
    let result = run(&porch().to_string(), door_open_at(at), false, &mut sensor_down);
    assert_eq!((result.outcome.ok, result.outcome.status.as_str()), (false, "error"));
    assert_eq!(ids(&result), ["light-is-off"]);
    assert!(result.output.is_none());
    let two = variant(|rule| {
        rule["actions"].as_array_mut().unwrap().push(json!({"id": "off", "call": "porch_light.turn_off"}))
    });
    let mut second_fails = Fake { fail: Some("off"), ..fake_at(at) };
    let result = run(&two, door_open_at(at), false, &mut second_fails);
    assert_eq!((result.outcome.ok, result.outcome.status.as_str()), (false, "partial"));
    assert_eq!(ids(&result), ["light-is-off", "when", "light-on", "off"]);
    assert_eq!(result.steps[3].outcome.status, "error");
    assert_eq!(result.steps[1].decisions.len(), 4, "the branch keeps its decisions");
    let mut first_fails = Fake { fail: Some("light-on"), ..fake_at(at) };
    let result = run(&two, door_open_at(at), false, &mut first_fails);
    assert_eq!(result.outcome.status, "error");
    assert_eq!(ids(&result), ["light-is-off", "when", "light-on"]);
}

#[test]
fn execute_never_claims_an_installation() {
    let request =
        RunRequest { program: porch().to_string(), input: None, context: None, test_run: false, deploy: true };
    let mut host = fake_at("2026-07-14T22:30:00+02:00");
    let result = Automation::execute(&request, &mut host);
    assert_eq!((result.outcome.ok, result.outcome.status.as_str()), (false, "error"));
    assert!(result.outcome.error.unwrap().contains("installs nothing"));
    assert!(result.steps.is_empty() && host.calls.is_empty());
}

#[test]
fn a_rule_without_conditions_takes_then() {
    let program = variant(|rule| rule["conditions"] = json!([]));
    let result = run(&program, json!({}), false, &mut fake_at("2026-07-14T12:00:00Z"));
    assert_eq!(ids(&result), ["when", "light-on"]);
    assert_eq!(result.steps[0].decisions[0].because, "the rule has no conditions");
}

#[test]
fn deploy_installs_the_trigger_with_the_program_as_body() {
    let program = porch().to_string();
    let request = RunRequest { program: program.clone(), input: None, context: None, test_run: false, deploy: true };
    let mut host = fake_at("2026-07-14T12:00:00Z");
    let deployed = Automation::deploy(&request, &mut host);
    assert_eq!(deployed.result.outcome, diag::success());
    let installation = deployed.installation.unwrap();
    assert_eq!(installation.name, "porch-at-night");
    assert_eq!(installation.triggers, [Trigger::Webhook("home".into())]);
    // The body is the rule without its trigger: it validates as the
    // rule does, and runs as the firing's immediate Run.
    let body: Value = serde_json::from_str(&installation.body).unwrap();
    let mut expected = porch();
    expected.as_object_mut().unwrap().remove("trigger");
    assert_eq!(body, expected);
    assert!(validate(&installation.body).diagnostics.is_empty());
    let at = "2026-07-14T22:30:00+02:00";
    let firing = RunRequest {
        program: installation.body.clone(),
        input: Some(door_open_at(at).to_string()),
        context: None,
        test_run: false,
        deploy: false,
    };
    let mut night = fake_at(at);
    let fired = Automation::execute(&firing, &mut night);
    assert_eq!(fired.outcome, diag::success());
    assert_eq!(output(&fired)["actions"], json!(["light-on"]));
    assert_eq!(deployed.result.steps.len(), 1);
    assert_eq!((deployed.result.steps[0].id.as_str(), deployed.result.steps[0].calls.as_deref()), ("install", None));
    let output: Value = serde_json::from_str(deployed.result.output.as_deref().unwrap()).unwrap();
    assert_eq!(output, json!({"deployment": "porch-at-night", "trigger": {"webhook": "home"}}));
    assert!(host.calls.is_empty(), "installing calls no device");

    let scheduled = variant(|rule| {
        rule["trigger"] = json!({"schedule": {"cron": "30 22 * * *", "time_zone": "Europe/Paris"}});
    });
    let request = RunRequest { program: scheduled, ..request };
    let installation = Automation::deploy(&request, &mut host).installation.unwrap();
    assert_eq!(
        installation.triggers,
        [Trigger::Schedule(Schedule { cron: "30 22 * * *".into(), time_zone: "Europe/Paris".into() })]
    );
    let mqtt = variant(|rule| rule["trigger"] = json!({"mqtt": {"broker": "home", "topic": "zigbee/+/door"}}));
    let request = RunRequest { program: mqtt, ..request };
    let installation = Automation::deploy(&request, &mut host).installation.unwrap();
    assert_eq!(
        installation.triggers,
        [Trigger::Mqtt(MqttSubscription { broker: "home".into(), topic: "zigbee/+/door".into() })]
    );
}

#[test]
fn an_invalid_rule_installs_nothing() {
    let mut host = fake_at("2026-07-14T12:00:00Z");
    for program in [
        variant(|rule| rule["actions"][0]["call"] = json!("garage.open")),
        "{".to_owned(),
        variant(|rule| rule["delay"] = json!(5)),
    ] {
        let request = RunRequest { program, input: None, context: None, test_run: false, deploy: true };
        let deployed = Automation::deploy(&request, &mut host);
        assert!(!deployed.result.outcome.ok);
        assert!(deployed.result.outcome.error.unwrap().contains("nothing was installed"));
        assert!(deployed.installation.is_none());
    }
}

#[test]
fn input_binding_takes_the_firing_shape() {
    let program = porch().to_string();
    let bind = |input: Option<&str>| -> Vec<(String, String)> {
        Automation::bind_input(&program, input)
            .into_iter()
            .map(|d| {
                let Locator::Pointer(path) = d.path else { panic!() };
                (d.code, path)
            })
            .collect()
    };
    for good in [
        None,
        Some("null"),
        Some("{}"),
        Some(r#"{"event": {"state": "open"}, "at": "2026-07-14T22:30:00+02:00"}"#),
        Some(r#"{"trigger": {"kind": "webhook"}, "event": "raw", "at": "2026-07-14T20:30:00Z"}"#),
    ] {
        assert_eq!(bind(good), Vec::new(), "{good:?}");
    }
    let binding = |path: &str| vec![("input_binding".to_owned(), path.to_owned())];
    assert_eq!(bind(Some("[]")), binding(""));
    assert_eq!(bind(Some(r#""open""#)), binding(""));
    assert_eq!(bind(Some("{")), binding(""));
    assert_eq!(bind(Some(r#"{"at": 1784061000000}"#)), binding("/at"));
    assert_eq!(bind(Some(r#"{"at": "22:30"}"#)), binding("/at"));
    assert_eq!(bind(Some(r#"{"at": "2026-07-14 22:30"}"#)), binding("/at"));
    assert_eq!(bind(Some(r#"{"trigger": "webhook"}"#)), binding("/trigger"));
    assert_eq!(bind(Some(r#"{"events": {}}"#)), binding("/events"));
    let hint = Automation::bind_input(&program, Some(r#"{"events": {}}"#)).remove(0).hint;
    assert_eq!(hint.as_deref(), Some("close match: event"));
}

#[test]
fn the_description_declares_what_the_code_emits() {
    let info = Automation::describe();
    assert_eq!(info.name, "automation/1");
    assert_eq!(info.program_argument, "rule");
    assert_eq!(info.execution, ExecutionMode::Both);
    assert!(info.features.test_run && !info.features.promotion);
    for (code, _) in CODES {
        assert!(info.diagnostic_codes.iter().any(|c| c.code == code), "{code}");
    }
    for (_, _, code, _) in rule::NEAR_MISSES {
        assert!(CODES.iter().any(|(declared, _)| *declared == code), "near miss {code} is declared");
    }
    let closed = info.guides.iter().find(|g| g.topics.iter().any(|t| t == "closed-sets")).unwrap();
    for needle in ["`no_delay`", "`sensor`", "`partial`", "`when`", "`at`", "## Decisions"] {
        assert!(closed.body.contains(needle), "closed-sets guide lacks {needle}");
    }
    let core = info.guides.iter().find(|g| g.level == GuideLevel::Core).unwrap();
    assert!(core.body.len() <= 8192, "{} bytes", core.body.len());
    // The core guide's example is the story's rule, and valid.
    let example = core.body.split("```json rule").nth(1).and_then(|rest| rest.split("```").next()).unwrap();
    assert!(validate(example).diagnostics.is_empty());
    let mut example: Value = serde_json::from_str(example).unwrap();
    example["otherwise"] = json!([]);
    assert_eq!(example, porch());
}

#[test]
fn a_rule_with_a_trigger_is_refused_in_an_immediate_run() {
    let at = "2026-07-14T22:30:00+02:00";
    let immediate = |program: String, test_run: bool| RunRequest {
        program,
        input: Some(door_open_at(at).to_string()),
        context: None,
        test_run,
        deploy: false,
    };
    // Bad: mode immediate, not a test run, and a trigger. Refused before
    // anything runs, with the code, the pointer and a hint naming the
    // mechanisms to use instead.
    let mut host = fake_at(at);
    let refused = Automation::execute(&immediate(porch().to_string(), false), &mut host);
    assert_eq!((refused.outcome.ok, refused.outcome.status.as_str()), (false, "validation_error"));
    assert!(refused.steps.is_empty() && host.calls.is_empty(), "nothing ran");
    let findings: Value = serde_json::from_str(refused.output.as_deref().expect("the diagnostics")).unwrap();
    assert_eq!(findings.as_array().map(Vec::len), Some(1), "{findings}");
    assert_eq!(findings[0]["code"], run::TRIGGER_NEEDS_DEPLOY);
    assert_eq!(findings[0]["severity"], "error");
    assert_eq!(findings[0]["path"], "/trigger");
    let hint = findings[0]["hint"].as_str().unwrap();
    for words in ["mode \"deploy\"", "test_run", "input.at", "remove `trigger`"] {
        assert!(hint.contains(words), "the hint lacks {words}: {hint}");
    }
    // Every trigger kind is refused alike.
    let scheduled = variant(|rule| rule["trigger"] = json!({"schedule": {"cron": "30 22 * * *", "time_zone": "UTC"}}));
    assert_eq!(Automation::execute(&immediate(scheduled, false), &mut fake_at(at)).outcome.status, "validation_error");

    // Good: the same rule as a test run runs (the host simulates), and the
    // rule without its trigger runs once, for real.
    let mut host = fake_at(at);
    let tested = Automation::execute(&immediate(porch().to_string(), true), &mut host);
    assert_eq!(tested.outcome, diag::success());
    assert_eq!(output(&tested)["took"], "then");
    let once = variant(|rule| drop(rule.as_object_mut().unwrap().remove("trigger")));
    let mut host = fake_at(at);
    let ran = Automation::execute(&immediate(once, false), &mut host);
    assert_eq!(ran.outcome, diag::success());
    assert_eq!(host.calls.len(), 2, "the read and the action ran");
}

#[test]
fn a_rule_without_a_trigger_is_not_deployed() {
    // Bad: a deploy of a rule without a trigger is a validation refusal
    // (Part II §5.7), with the code, the pointer and a hint; nothing is
    // installed.
    let once = variant(|rule| drop(rule.as_object_mut().unwrap().remove("trigger")));
    let request = RunRequest { program: once, input: None, context: None, test_run: false, deploy: true };
    let mut host = fake_at("2026-07-14T12:00:00Z");
    let deployed = Automation::deploy(&request, &mut host);
    assert!(deployed.installation.is_none() && host.calls.is_empty());
    assert_eq!((deployed.result.outcome.ok, deployed.result.outcome.status.as_str()), (false, "validation_error"));
    assert!(deployed.result.steps.is_empty());
    let findings: Value = serde_json::from_str(deployed.result.output.as_deref().expect("the diagnostics")).unwrap();
    assert_eq!(findings.as_array().map(Vec::len), Some(1), "{findings}");
    assert_eq!((&findings[0]["code"], &findings[0]["path"]), (&json!(run::DEPLOY_NEEDS_TRIGGER), &json!("")));
    let hint = findings[0]["hint"].as_str().unwrap();
    for words in ["`trigger`", "webhook", "schedule", "mode \"immediate\""] {
        assert!(hint.contains(words), "the hint lacks {words}: {hint}");
    }
    // Good: the same rule with its trigger is installed.
    let request = RunRequest { program: porch().to_string(), ..request };
    let deployed = Automation::deploy(&request, &mut fake_at("2026-07-14T12:00:00Z"));
    assert_eq!(deployed.result.outcome, diag::success());
    assert!(deployed.installation.is_some());
}
