//! Running a rule once (a firing, an immediate Run, a test run) and
//! installing it (a deploy).
//!
//! The trace follows the plan exactly (Part II §5.8.4): every `read`
//! condition is an unarmed plan step, so each runs before `when` decides,
//! even past a false condition (reads change nothing); `when` then decides
//! with one decision per condition evaluated; only the selected arm's
//! actions appear.

use std::collections::BTreeMap;

use pilotage_guest_sdk::diag::{self, failure, success};
use pilotage_guest_sdk::trace::TraceBuilder;
use pilotage_guest_sdk::{
    Catalog, Decision, DeployResult, Effects, Installation, RunRequest, RunResult, Severity, TraceStep, Validation,
};
use serde_json::{Map, Value, json};

use crate::rule::{self, Action, BRANCH, Condition, Test};

/// Runs `request.program` (already validated) once.
pub fn execute(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> RunResult {
    if request.deploy {
        // Installing goes through the export `deploy`; answering it here
        // with a success would claim an installation nobody made.
        let message = "a deploy-mode Run installs through `deploy`; `execute` runs the rule once and installs nothing";
        return failed(Vec::new(), diag::ERROR, message.into());
    }
    let (rule, _) = rule::parse(&request.program);
    if rule.trigger.is_some() && !request.test_run {
        return immediate_with_trigger();
    }
    let input: Value = request.input.as_deref().and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default();
    let event = input.get("event");
    let mut trace = TraceBuilder::new();

    // The reads, in order: each is a plan step outside the arms.
    let mut outputs = BTreeMap::new();
    for condition in &rule.conditions {
        let Test::Read { entry, with, .. } = &condition.test else { continue };
        match call(&mut trace, host, &condition.id, entry, with) {
            Ok(output) => {
                outputs.insert(condition.id.as_str(), output);
            }
            Err(message) => return failed(trace.finish(), diag::ERROR, message),
        }
    }

    // The branch: conditions in order, up to the first false one.
    let now = host.now();
    let mut decisions = Vec::new();
    let mut failing = None;
    for condition in &rule.conditions {
        let (holds, because) = evaluate(condition, event, &outputs, now);
        decisions.push(Decision {
            at: condition.id.clone(),
            took: if holds { "true" } else { "false" }.into(),
            because: because.clone(),
        });
        if !holds {
            failing = Some(format!("{} is false: {because}", condition.id));
            break;
        }
    }
    let (took, because, arm) = match failing {
        None if rule.conditions.is_empty() => ("then", "the rule has no conditions".to_owned(), &rule.actions),
        None => ("then", "every condition holds".to_owned(), &rule.actions),
        Some(because) => ("else", because, &rule.otherwise),
    };
    let branch = trace.branch(BRANCH, took, because);

    let mut ran = Vec::new();
    for Action { id, call: entry, with, .. } in arm {
        if let Err(message) = call(&mut trace, host, id, entry, with) {
            let status = if ran.is_empty() { diag::ERROR } else { diag::PARTIAL };
            return failed(with_decisions(trace, branch, decisions), status, message);
        }
        ran.push(id.as_str());
    }

    let mut output = json!({"rule": rule.name, "took": took, "actions": ran});
    if request.test_run {
        output["test_run"] = json!(true);
    }
    RunResult {
        outcome: success(),
        output: Some(output.to_string()),
        steps: with_decisions(trace, branch, decisions),
        stats: None,
    }
}

/// The hint of [`TRIGGER_NEEDS_DEPLOY`]: what to do instead.
pub const DEPLOY_HINT: &str = "a rule with a trigger runs when deployed: execute with mode \"deploy\", or test it with test_run and input.at (e.g. {\"event\": {\"state\": \"open\"}, \"at\": \"2026-07-14T22:30:00+02:00\"}); to run the actions once now, remove `trigger`";

/// The diagnostic code of an immediate Run of a rule with a trigger.
pub const TRIGGER_NEEDS_DEPLOY: &str = "trigger_needs_deploy";

/// The refusal of an immediate Run (not a test run) of a rule that has a
/// trigger: running it once would ignore the trigger and install nothing,
/// which an agent reads as "deployed" (Part IV §9, "Refuse near-miss
/// mechanisms loudly"). It is a validation refusal (Part II §6.5.2: outcome
/// `validation_error` with its diagnostic, nothing run), not a request
/// error: `mode` itself is valid for automation/1 (Part III §4.4), only
/// this program cannot run in it.
fn immediate_with_trigger() -> RunResult {
    let finding = diag::error_at(
        TRIGGER_NEEDS_DEPLOY,
        "/trigger",
        "this rule has a trigger, so an immediate Run would ignore it and install nothing; nothing ran",
    );
    diag::refusal(
        "a rule with a trigger is not run immediately; nothing ran",
        &[diag::with_hint(finding, Some(DEPLOY_HINT.into()))],
    )
}

/// The hint of [`DEPLOY_NEEDS_TRIGGER`]: what to do instead.
pub const TRIGGER_HINT: &str = "a deployment runs when its trigger fires: add a top-level `trigger` (e.g. {\"webhook\": \"home\"}, {\"schedule\": {\"cron\": \"30 22 * * *\", \"time_zone\": \"Europe/Paris\"}} or {\"mqtt\": {\"broker\": \"home\", \"topic\": \"zigbee/+/door\"}}), or run the actions once now with mode \"immediate\"";

/// The diagnostic code of a deploy of a rule without a trigger.
pub const DEPLOY_NEEDS_TRIGGER: &str = "deploy_needs_trigger";

/// The refusal of a deploy (mode `deploy`) of a rule without a trigger:
/// the installation would never fire. Like [`immediate_with_trigger`], the
/// program cannot run in this mode, which Part II §5.7 answers with
/// `validation_error` and a diagnostic, nothing installed; `error` would
/// tell the agent that something may have happened.
fn deploy_without_trigger() -> RunResult {
    let finding = diag::error_at(
        DEPLOY_NEEDS_TRIGGER,
        "",
        "this rule has no `trigger`, so a deployment of it would never run; nothing was installed",
    );
    diag::refusal(
        "a rule without a trigger is not deployed; nothing was installed",
        &[diag::with_hint(finding, Some(TRIGGER_HINT.into()))],
    )
}

/// The branch entry's decisions: the arm taken (first, as the plan–trace
/// correspondence reads it), then each condition's.
fn with_decisions(mut trace: TraceBuilder, branch: usize, decisions: Vec<Decision>) -> Vec<TraceStep> {
    trace.add_decisions(branch, decisions);
    trace.finish()
}

fn failed(steps: Vec<TraceStep>, status: &str, message: String) -> RunResult {
    RunResult { outcome: failure(status, message), output: None, steps, stats: None }
}

/// Invokes `entry` for step `id` and traces it; the output, or why the
/// Run must stop.
fn call(
    trace: &mut TraceBuilder,
    host: &mut impl Effects,
    id: &str,
    entry: &str,
    with: &Map<String, Value>,
) -> Result<Value, String> {
    trace.invoke(host, id, entry, &Value::Object(with.clone()), |m| format!("step '{id}' ({entry}): {m}"))
}

/// Whether `condition` holds, and why, in words naming what was compared.
fn evaluate(condition: &Condition, event: Option<&Value>, outputs: &BTreeMap<&str, Value>, now: u64) -> (bool, String) {
    match &condition.test {
        Test::Event { pointer, equals } => {
            let found = event.and_then(|event| event.pointer(pointer));
            compare(&format!("event {}", shown(pointer)), found, equals)
        }
        Test::Time(window) => window.check(now),
        Test::Read { entry, field, equals, .. } => {
            let found = outputs.get(condition.id.as_str()).and_then(|output| output.pointer(field));
            compare(&format!("{entry} {}", shown(field)), found, equals)
        }
    }
}

fn shown(pointer: &str) -> &str {
    if pointer.is_empty() { "(whole value)" } else { pointer }
}

fn compare(what: &str, found: Option<&Value>, equals: &Value) -> (bool, String) {
    match found {
        Some(found) => (found == equals, format!("{what} is {found}; expected {equals}")),
        None => (false, format!("{what} is missing; expected {equals}")),
    }
}

/// The installation of a rule `validation` found valid: one trace step,
/// `install`, and the trigger with the rule without it as the body.
pub fn deploy(request: &RunRequest, validation: &Validation) -> DeployResult {
    let errors: Vec<&str> =
        validation.diagnostics.iter().filter(|d| d.severity == Severity::Error).map(|d| d.message.as_str()).collect();
    let (rule, _) = rule::parse(&request.program);
    let trigger = match (errors.first(), rule.trigger) {
        (None, Some(trigger)) => trigger,
        (None, None) => return DeployResult { result: deploy_without_trigger(), installation: None },
        (Some(why), _) => {
            return DeployResult {
                result: RunResult {
                    outcome: failure(diag::ERROR, format!("the rule is invalid, nothing was installed: {why}")),
                    output: None,
                    steps: Vec::new(),
                    stats: None,
                },
                installation: None,
            };
        }
    };
    let output = json!({"deployment": rule.name, "trigger": rule::trigger_json(&trigger)});
    let install = TraceStep {
        id: "install".into(),
        calls: None,
        input: Some(json!({"rule": rule.name}).to_string()),
        output: Some(output.to_string()),
        outcome: success(),
        t_ms: None,
        decisions: Vec::new(),
    };
    DeployResult {
        result: RunResult { outcome: success(), output: Some(output.to_string()), steps: vec![install], stats: None },
        installation: Some(Installation { name: rule.name, triggers: vec![trigger], body: body(&request.program) }),
    }
}

/// What a deployment runs at each firing: the rule without its `trigger`
/// (the platform holds the trigger), so the body runs as an immediate Run
/// without being refused as one that should have been deployed.
pub fn body(program: &str) -> String {
    match serde_json::from_str::<Value>(program) {
        Ok(Value::Object(mut rule)) => {
            rule.remove("trigger");
            Value::Object(rule).to_string()
        }
        _ => program.to_owned(),
    }
}
