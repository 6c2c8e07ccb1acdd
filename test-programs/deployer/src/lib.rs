//! `deployer/v1`: a deploying Language (`execution: both`, `test_run`)
//! for the platform's deployment tests, and hostile in one way on purpose:
//! it ignores `test_run` and invokes every step whatever the request says,
//! so the tests prove that the host alone keeps a test run free of side
//! effects (Part II §6.5.7 "Test run").
//!
//! A program is a JSON object:
//! `{"name": "porch", "steps": [{"id": "s1", "calls": "ENTRY"}],
//!   "triggers": [{"schedule": {"cron": "…", "time_zone": "…"}} |
//!                {"webhook": "SOURCE"} | {"mqtt": {"broker": "…", "topic": "…"}}]}`.
//! Executing it invokes each step's entry with `{"input": INPUT, "now": MS}`
//! (the Run's input and the host clock); its output is
//! `{"now": MS, "input": INPUT, "results": [OUTPUT…]}`. Deploying it
//! installs `triggers` with the program itself as the body.

use pilotage_guest_sdk::closed_sets::{self, Prose, guide};
use pilotage_guest_sdk::diag::{self, error_at, failure, success};
use pilotage_guest_sdk::language::{STANDARD_RISK_LEVELS, risk_label};
use pilotage_guest_sdk::*;
use serde_json::{Value, json};

pilotage_guest_sdk::use_language_allocator!();

const CODES: [(&str, &str); 3] = [
    ("malformed_program", "Error. Not an object with `name`, `steps` and `triggers` of the documented shapes."),
    ("unknown_entry", "Error. A step `calls` an entry that is not visible."),
    ("bad_trigger", "Error. A trigger is not one of `schedule`, `webhook`, `mqtt`."),
];
const KINDS: [(&str, bool, &str); 1] = [("capability", true, "An action or query over HTTP.")];
const STEP_STATUSES: [(&str, bool, bool, &str); 2] =
    [("success", true, true, "The entry answered."), ("error", false, true, "The entry failed.")];
const CORE: &str =
    "# deployer/v1\n\nA program names steps that call entries, and the triggers that run them once deployed.\n";

/// deployer/v1.
pub struct Deployer;

pilotage_guest_sdk::export!(Deployer);

struct Parsed {
    name: String,
    steps: Vec<(String, String)>,
    triggers: Vec<Trigger>,
}

fn parse(program: &str) -> Result<Parsed, Diagnostic> {
    let malformed = |pointer: &str, message: &str| error_at("malformed_program", pointer, message);
    let doc: Value = serde_json::from_str(program).map_err(|e| malformed("", &format!("not JSON: {e}")))?;
    let name = doc["name"].as_str().ok_or_else(|| malformed("/name", "`name` is a string"))?.to_owned();
    let steps = doc["steps"]
        .as_array()
        .ok_or_else(|| malformed("/steps", "`steps` is an array"))?
        .iter()
        .enumerate()
        .map(|(i, step)| match (step["id"].as_str(), step["calls"].as_str()) {
            (Some(id), Some(calls)) => Ok((id.to_owned(), calls.to_owned())),
            _ => Err(malformed(&format!("/steps/{i}"), "a step is {\"id\", \"calls\"}")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let triggers = doc
        .get("triggers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, trigger)| {
            let bad = || error_at("bad_trigger", format!("/triggers/{i}"), "schedule, webhook or mqtt");
            if let Some(schedule) = trigger.get("schedule") {
                match (schedule["cron"].as_str(), schedule["time_zone"].as_str()) {
                    (Some(cron), Some(zone)) => {
                        Ok(Trigger::Schedule(Schedule { cron: cron.into(), time_zone: zone.into() }))
                    }
                    _ => Err(bad()),
                }
            } else if let Some(source) = trigger.get("webhook").and_then(Value::as_str) {
                Ok(Trigger::Webhook(source.into()))
            } else if let Some(mqtt) = trigger.get("mqtt") {
                match (mqtt["broker"].as_str(), mqtt["topic"].as_str()) {
                    (Some(broker), Some(topic)) => {
                        Ok(Trigger::Mqtt(MqttSubscription { broker: broker.into(), topic: topic.into() }))
                    }
                    _ => Err(bad()),
                }
            } else {
                Err(bad())
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Parsed { name, steps, triggers })
}

impl Language for Deployer {
    fn describe() -> LanguageInfo {
        let mut info = LanguageInfo {
            name: "deployer/v1".into(),
            title: "Deploys steps behind triggers; ignores test_run (a hostile test Language)".into(),
            program_kind: ProgramKind::Json,
            program_argument: "program".into(),
            locator: LocatorDialect::JsonPointer,
            execution: ExecutionMode::Both,
            trace: TraceCeiling::Full,
            trace_subprogram: SubprogramTracing::Opaque,
            context_schema: None,
            features: Features { plan: true, catalog: true, execute: true, test_run: true, promotion: false },
            diagnostic_codes: closed_sets::diagnostic_codes(&CODES),
            run_statuses: closed_sets::run_statuses(&[]),
            step_statuses: closed_sets::step_statuses(&STEP_STATUSES),
            entry_kinds: closed_sets::entry_kinds(&KINDS),
            risk_levels: closed_sets::risk_levels(&STANDARD_RISK_LEVELS),
            guides: Vec::new(),
        };
        let prose = Prose {
            step_ids: Some("Plan and trace ids are the steps' `id`s."),
            parameter_binding: Some("Any input is accepted and passed to every call."),
            output: Some("`{now, input, results}`."),
            ..Prose::default()
        };
        let closed = closed_sets::render("deployer-closed-sets", &info, &prose);
        info.guides = vec![guide("deployer-core", "deployer/v1", GuideLevel::Core, &["grammar"], CORE), closed];
        info
    }

    fn validate(program: &str, _context: Option<&str>, catalog: &impl Catalog) -> Validation {
        let parsed = match parse(program) {
            Ok(parsed) => parsed,
            Err(diagnostic) => {
                return Validation {
                    diagnostics: vec![diagnostic],
                    plan: None,
                    references: Vec::new(),
                    statements: Vec::new(),
                };
            }
        };
        let mut diagnostics = Vec::new();
        let mut steps = Vec::new();
        for (i, (id, calls)) in parsed.steps.iter().enumerate() {
            match catalog.entry(calls) {
                Some(entry) => steps.push(PlanStep {
                    id: id.clone(),
                    calls: Some(calls.clone()),
                    arm: None,
                    loop_: None,
                    risk: risk_label(entry.risk_hints).into(),
                    risk_hints: entry.risk_hints,
                }),
                None => diagnostics.push(error_at(
                    "unknown_entry",
                    format!("/steps/{i}/calls"),
                    format!("'{calls}' is not visible"),
                )),
            }
        }
        let max_risk = risk_label(diag::aggregate(steps.iter().map(|step| step.risk_hints))).to_owned();
        Validation {
            plan: diagnostics.is_empty().then_some(Plan { steps, max_risk }),
            diagnostics,
            references: parsed.steps.into_iter().map(|(_, calls)| calls).collect(),
            statements: Vec::new(),
        }
    }

    fn bind_input(_program: &str, _input: Option<&str>) -> Vec<Diagnostic> {
        Vec::new()
    }

    /// Invokes every step, test run or not (on purpose, see the crate doc).
    fn execute(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> RunResult {
        let Ok(parsed) = parse(&request.program) else {
            return RunResult { outcome: failure("error", "not a program"), output: None, steps: vec![], stats: None };
        };
        let input: Value =
            request.input.as_deref().and_then(|text| serde_json::from_str(text).ok()).unwrap_or(Value::Null);
        let now = host.now();
        let mut steps = Vec::new();
        let mut results = Vec::new();
        for (id, calls) in &parsed.steps {
            let call_input = json!({"input": input, "now": now});
            let result = host.invoke(id, calls, &call_input);
            let (outcome, output) = match &result {
                Ok(output) => (success(), Some(output.to_string())),
                Err(InvokeError::Refused(message) | InvokeError::Failed(message)) => (failure("error", message), None),
            };
            let failed = !outcome.ok;
            steps.push(TraceStep {
                id: id.clone(),
                calls: Some(calls.clone()),
                input: Some(call_input.to_string()),
                output,
                outcome,
                t_ms: Some(0),
                decisions: Vec::new(),
            });
            if failed {
                let status = if steps.len() > 1 { "partial" } else { "error" };
                return RunResult { outcome: failure(status, "a step failed"), output: None, steps, stats: None };
            }
            results.push(result.unwrap_or(Value::Null));
        }
        let output = json!({"now": now, "input": input, "results": results});
        RunResult { outcome: success(), output: Some(output.to_string()), steps, stats: None }
    }

    fn deploy(request: &RunRequest, _host: &mut (impl Catalog + Effects)) -> DeployResult {
        let Ok(parsed) = parse(&request.program) else {
            return diag::does_not_deploy();
        };
        let step = TraceStep {
            id: "install".into(),
            calls: None,
            input: None,
            output: Some(json!({"name": parsed.name}).to_string()),
            outcome: success(),
            t_ms: Some(0),
            decisions: Vec::new(),
        };
        DeployResult {
            result: RunResult {
                outcome: success(),
                output: Some(json!({"deployment": parsed.name}).to_string()),
                steps: vec![step],
                stats: None,
            },
            installation: Some(Installation {
                name: parsed.name,
                triggers: parsed.triggers,
                body: request.program.clone(),
            }),
        }
    }
}
