//! Assertions (`x-assertions`, docs/assertions.md): postconditions an
//! agent sends with an execute, read here, checked against the plan before
//! anything runs, and evaluated against the Run's trace and output after
//! it ends, whatever the Language.
//!
//! Invariant: evaluation reads only what the Run already produced (its
//! output and its trace at the level it is recorded); it runs nothing and
//! changes nothing the Run did. It only turns a successful outcome into
//! `assertion_failed` when an assertion fails.

use std::cmp::Ordering;

use serde_json::Value;

use pilotage_protocol::assertions::{ASSERTION_FAILED, MAX_ASSERTIONS, MEMBER, Report, Verdict};
use pilotage_protocol::diagnostic::{CONSTRAINT, Diagnostic};
use pilotage_protocol::outcome::Outcome;
use pilotage_protocol::plan::Plan;
use pilotage_protocol::trace::{Trace, TraceStep};

/// The assertions of one request, read and checked.
pub(crate) struct Assertions {
    list: Vec<Assertion>,
    /// As the request sent them: what a deployment keeps.
    raw: Value,
}

/// The input `equals_input` pointers are checked against when the
/// assertions are read.
#[derive(Clone, Copy)]
pub(crate) enum InputAt<'a> {
    /// The Run's own input (absent: `{}`).
    Given(Option<&'a Value>),
    /// Not known yet: a deployment's (each firing's input, checked then)
    /// or a validate's (the Run's, checked when it comes).
    Later,
}

struct Assertion {
    id: String,
    target: Target,
    check: Check,
    message: Option<String>,
}

/// Where an assertion reads its value.
enum Target {
    /// A JSON Pointer into the Run's output.
    Output(String),
    /// A member of a step's trace entries: `step` is a base step id (the
    /// last entry with that base id, or all of them for `invocations`) or
    /// a complete trace id (`fetch#2`: that entry).
    Step { step: String, member: StepMember, pointer: String },
}

#[derive(Clone, Copy, PartialEq)]
enum StepMember {
    Invocations,
    Outcome,
    Output,
    Input,
    TMs,
}

impl StepMember {
    const NAMES: [&str; 5] = ["invocations", "outcome", "output", "input", "t_ms"];

    fn parse(name: &str) -> Option<StepMember> {
        Some(match name {
            "invocations" => StepMember::Invocations,
            "outcome" => StepMember::Outcome,
            "output" => StepMember::Output,
            "input" => StepMember::Input,
            "t_ms" => StepMember::TMs,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy)]
enum Operator {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Operator {
    const NAMES: [&str; 6] = ["eq", "ne", "lt", "le", "gt", "ge"];

    fn parse(name: &str) -> Option<Operator> {
        Some(match name {
            "eq" => Operator::Eq,
            "ne" => Operator::Ne,
            "lt" => Operator::Lt,
            "le" => Operator::Le,
            "gt" => Operator::Gt,
            "ge" => Operator::Ge,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        Operator::NAMES[self as usize]
    }

    /// Whether `observed` relates to `expected` so. Numbers compare as
    /// numbers (1 equals 1.0), strings by their bytes (RFC 3339 times in
    /// one zone order as they read); other pairs are only (un)equal.
    fn holds(self, observed: &Value, expected: &Value) -> bool {
        let order = match (observed, expected) {
            (Value::Number(a), Value::Number(b)) => a.as_f64().zip(b.as_f64()).and_then(|(a, b)| a.partial_cmp(&b)),
            (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
            (a, b) => (a == b).then_some(Ordering::Equal),
        };
        match self {
            Operator::Eq => order == Some(Ordering::Equal),
            Operator::Ne => order != Some(Ordering::Equal),
            Operator::Lt => order == Some(Ordering::Less),
            Operator::Le => matches!(order, Some(Ordering::Less | Ordering::Equal)),
            Operator::Gt => order == Some(Ordering::Greater),
            Operator::Ge => matches!(order, Some(Ordering::Greater | Ordering::Equal)),
        }
    }
}

/// What an assertion requires of its target's value.
enum Check {
    Exists(bool),
    Compare(Operator, Value),
    /// The number of elements of an array (rows), members of an object or
    /// characters of a string.
    Count(Operator, Value),
    /// Equal to the value at this pointer in the Run's input.
    EqualsInput(String),
    /// Valid against a JSON Schema fragment.
    Schema(Box<jsonschema::Validator>),
}

const CHECKS: &str = "exists, eq, ne, lt, le, gt, ge, count, equals_input or schema";

/// A diagnostic at `pointer` inside the request's `x-assertions`.
fn finding(pointer: &str, message: String, hint: &str) -> Diagnostic {
    Diagnostic::error(CONSTRAINT, &format!("/{MEMBER}{pointer}"), message).with_hint(hint)
}

fn pointer_ok(pointer: &str) -> bool {
    pointer.is_empty() || pointer.starts_with('/')
}

impl Assertions {
    /// Reads `raw` (the request's `x-assertions`), checking each assertion
    /// against `plan` (its step must be one the program can run) and
    /// `input` (an `equals_input` pointer must resolve in it, when the
    /// input is known). `None` when the request carries none.
    ///
    /// # Errors
    /// Every finding, as `constraint` diagnostics whose path points into
    /// the request's `x-assertions` (docs/assertions.md).
    pub(crate) fn read(
        raw: Option<&Value>,
        plan: Option<&Plan>,
        input: InputAt<'_>,
    ) -> Result<Option<Assertions>, Vec<Diagnostic>> {
        let Some(raw) = raw else { return Ok(None) };
        let Some(items) = raw.as_array() else {
            return Err(vec![finding(
                "",
                format!("{MEMBER} must be an array of assertions"),
                "send [] or leave it out",
            )]);
        };
        if items.len() > MAX_ASSERTIONS {
            return Err(vec![finding(
                "",
                format!("{MEMBER} holds {} assertions; at most {MAX_ASSERTIONS} are allowed", items.len()),
                "keep the ones that prove the result",
            )]);
        }
        let mut findings = Vec::new();
        let mut list = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match read_one(&format!("/{index}"), item, plan, input) {
                Ok(assertion) => {
                    if list.iter().any(|a: &Assertion| a.id == assertion.id) {
                        findings.push(finding(
                            &format!("/{index}/id"),
                            format!("assertion id '{}' is used twice", assertion.id),
                            "give each assertion its own id",
                        ));
                    }
                    list.push(assertion);
                }
                Err(mut found) => findings.append(&mut found),
            }
        }
        if findings.is_empty() { Ok(Some(Assertions { list, raw: raw.clone() })) } else { Err(findings) }
    }

    /// The assertions as they were sent, to keep with a deployment.
    pub(crate) fn raw(&self) -> &Value {
        &self.raw
    }

    /// Evaluates every assertion against the Run's `output` (when it
    /// succeeded), `trace` (as recorded) and `input`, and turns a
    /// successful `outcome` into `assertion_failed` when one fails; the
    /// output then moves into the report (Part II §6.5: `output` only on
    /// an ok outcome).
    pub(crate) fn evaluate(
        &self,
        outcome: &mut Outcome,
        output: &mut Option<Value>,
        trace: &Trace,
        input: Option<&Value>,
    ) -> Report {
        let verdicts: Vec<Verdict> = self
            .list
            .iter()
            .map(|assertion| assertion.evaluate(output.as_ref().filter(|_| outcome.ok), trace, input))
            .collect();
        let failed: Vec<String> = verdicts.iter().filter(|v| v.verdict == "failed").map(|v| v.id.clone()).collect();
        let mut report = Report { passed: verdicts.len() - failed.len(), failed: failed.len(), verdicts, output: None };
        if outcome.ok && !failed.is_empty() {
            *outcome = Outcome::failure(
                ASSERTION_FAILED,
                format!(
                    "{} of {} assertions failed ({}); the program ran to its end and its effects stand",
                    failed.len(),
                    report.verdicts.len(),
                    failed.join(", ")
                ),
            );
            report.output = output.take();
        }
        report
    }
}

fn read_one(at: &str, item: &Value, plan: Option<&Plan>, input: InputAt<'_>) -> Result<Assertion, Vec<Diagnostic>> {
    let Some(object) = item.as_object() else {
        return Err(vec![finding(at, "an assertion is an object".into(), "{\"id\": …, \"target\": …, \"check\": …}")]);
    };
    let mut findings = Vec::new();
    let id = match object.get("id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() && id.len() <= 64 => id.to_owned(),
        _ => {
            findings.push(finding(
                &format!("{at}/id"),
                "an assertion needs an id: a string of 1 to 64 characters".into(),
                "name what it proves, e.g. \"some-rows\"",
            ));
            String::new()
        }
    };
    let message = match object.get("message") {
        None => None,
        Some(Value::String(text)) if text.len() <= 500 => Some(text.clone()),
        Some(_) => {
            findings.push(finding(
                &format!("{at}/message"),
                "message is a string of at most 500 characters".into(),
                "say what a failure means",
            ));
            None
        }
    };
    let target = read_target(&format!("{at}/target"), object.get("target"), plan);
    let check = read_check(&format!("{at}/check"), object.get("check"), input);
    let (target, check) = (kept(target, &mut findings), kept(check, &mut findings));
    match (target, check) {
        (Some(target), Some(check)) if findings.is_empty() => Ok(Assertion { id, target, check, message }),
        _ => Err(findings),
    }
}

/// `result`'s value, or `None` with its finding added to `findings`.
fn kept<T>(result: Result<T, Diagnostic>, findings: &mut Vec<Diagnostic>) -> Option<T> {
    result.map_err(|finding| findings.push(finding)).ok()
}

fn read_target(at: &str, raw: Option<&Value>, plan: Option<&Plan>) -> Result<Target, Diagnostic> {
    let shape = "{\"output\": \"/pointer\"} or {\"step\": \"id\", \"member\": \"output\", \"pointer\": \"/rows\"}";
    let Some(object) = raw.and_then(Value::as_object) else {
        return Err(finding(at, "target must be an object".into(), shape));
    };
    match (object.get("output"), object.get("step")) {
        (Some(pointer), None) => match pointer.as_str() {
            Some(pointer) if pointer_ok(pointer) => Ok(Target::Output(pointer.to_owned())),
            _ => Err(finding(&format!("{at}/output"), "output is a JSON Pointer (\"\" or /…)".into(), shape)),
        },
        (None, Some(step)) => {
            let Some(step) = step.as_str().filter(|s| !s.is_empty()) else {
                return Err(finding(&format!("{at}/step"), "step is a step id".into(), shape));
            };
            let member = object.get("member").and_then(Value::as_str).and_then(StepMember::parse).ok_or_else(|| {
                finding(
                    &format!("{at}/member"),
                    format!("member is one of {}", StepMember::NAMES.join(", ")),
                    "invocations counts the step's trace entries; output reads its last one",
                )
            })?;
            let pointer = match object.get("pointer") {
                None => String::new(),
                Some(Value::String(p)) if pointer_ok(p) => p.clone(),
                Some(_) => return Err(finding(&format!("{at}/pointer"), "pointer is a JSON Pointer".into(), shape)),
            };
            if !pointer.is_empty() && !matches!(member, StepMember::Output | StepMember::Input) {
                return Err(finding(
                    &format!("{at}/pointer"),
                    "a pointer applies only to a step's output or input".into(),
                    "leave pointer out, or use member output",
                ));
            }
            // A step the plan does not have can never run (Part II §5.8.4:
            // the trace corresponds to the plan); one in an untaken arm
            // simply reads as absent.
            let base = base_id(step);
            if let Some(plan) = plan
                && !plan.steps.iter().any(|s| s.id == base)
            {
                let known: Vec<&str> = plan.steps.iter().take(20).map(|s| s.id.as_str()).collect();
                return Err(finding(
                    &format!("{at}/step"),
                    format!("step '{base}' is not in the program's plan, so it can never run"),
                    &format!("the plan's steps: {}", known.join(", ")),
                ));
            }
            Ok(Target::Step { step: step.to_owned(), member, pointer })
        }
        _ => Err(finding(at, "target names either output or step".into(), shape)),
    }
}

fn read_check(at: &str, raw: Option<&Value>, input: InputAt<'_>) -> Result<Check, Diagnostic> {
    let hint =
        "{\"count\": {\"gt\": 0}}, {\"eq\": 3}, {\"exists\": true}, {\"equals_input\": \"/id\"}, {\"schema\": {…}}";
    let Some(object) = raw.and_then(Value::as_object).filter(|o| o.len() == 1) else {
        return Err(finding(at, format!("check is an object with exactly one of {CHECKS}"), hint));
    };
    let (name, value) = object.iter().next().expect("one member");
    let at = format!("{at}/{name}");
    if let Some(operator) = Operator::parse(name) {
        return Ok(Check::Compare(operator, value.clone()));
    }
    match name.as_str() {
        "exists" => {
            value.as_bool().map(Check::Exists).ok_or_else(|| finding(&at, "exists is true or false".into(), hint))
        }
        "count" => {
            let comparison = value.as_object().filter(|o| o.len() == 1);
            match comparison.and_then(|o| o.iter().next()) {
                Some((operator, Value::Number(n))) if Operator::parse(operator).is_some() => {
                    Ok(Check::Count(Operator::parse(operator).expect("parsed"), Value::Number(n.clone())))
                }
                _ => Err(finding(
                    &at,
                    format!("count holds one comparison ({}) with a number", Operator::NAMES.join(", ")),
                    "{\"count\": {\"ge\": 1}}",
                )),
            }
        }
        "equals_input" => {
            let Some(pointer) = value.as_str().filter(|p| pointer_ok(p)) else {
                return Err(finding(&at, "equals_input is a JSON Pointer into the Run's input".into(), hint));
            };
            let empty = Value::Object(Default::default());
            if let InputAt::Given(input) = input
                && input.unwrap_or(&empty).pointer(pointer).is_none()
            {
                return Err(finding(
                    &at,
                    format!("the input has nothing at '{pointer}'"),
                    "point at a member of the input you send",
                ));
            }
            Ok(Check::EqualsInput(pointer.to_owned()))
        }
        "schema" => jsonschema::validator_for(value)
            .map(|validator| Check::Schema(Box::new(validator)))
            .map_err(|error| finding(&at, format!("the schema does not compile: {error}"), "a JSON Schema object")),
        other => Err(finding(&at, format!("unknown check '{other}'; the checks are {CHECKS}"), hint)),
    }
}

/// The base program step id of a trace or assertion step id (Part II
/// §5.8.2: the segment after the last `/`, without `#` suffixes).
fn base_id(id: &str) -> &str {
    let last = id.rsplit('/').next().unwrap_or(id);
    last.split('#').next().unwrap_or(last)
}

impl Assertion {
    fn evaluate(&self, output: Option<&Value>, trace: &Trace, input: Option<&Value>) -> Verdict {
        let (observed, absent) = match &self.target {
            Target::Output(pointer) => match output {
                Some(output) => (output.pointer(pointer).cloned(), "the output has nothing there"),
                None => (None, "the Run produced no output"),
            },
            Target::Step { step, member, pointer } => {
                // Entries of the caller's own steps only: expanded
                // sub-program entries (with `/`) belong to another program.
                let entries: Vec<&TraceStep> = trace
                    .steps
                    .iter()
                    .filter(|entry| !entry.id.contains('/'))
                    .filter(|entry| if step.contains('#') { entry.id == *step } else { base_id(&entry.id) == step })
                    .collect();
                let last = entries.last();
                match member {
                    StepMember::Invocations => (Some(Value::from(entries.len())), ""),
                    _ if last.is_none() => (None, "the step did not run"),
                    StepMember::Outcome => (last.map(|e| Value::String(e.outcome.status.clone())), ""),
                    StepMember::TMs => (last.and_then(|e| e.t_ms).map(Value::from), "the trace has no t_ms for it"),
                    StepMember::Output => (
                        last.and_then(|e| e.output.as_ref()).and_then(|v| v.pointer(pointer)).cloned(),
                        "the step's recorded output has nothing there",
                    ),
                    StepMember::Input => (
                        last.and_then(|e| e.input.as_ref()).and_then(|v| v.pointer(pointer)).cloned(),
                        "the step's recorded input has nothing there",
                    ),
                }
            }
        };
        let (observed, failure) = self.check.apply(observed, absent, input);
        Verdict {
            id: self.id.clone(),
            verdict: if failure.is_none() { "passed" } else { "failed" }.to_owned(),
            observed,
            message: failure.map(|why| match &self.message {
                Some(message) => format!("{message} ({why})"),
                None => why,
            }),
        }
    }
}

impl Check {
    /// The value to report and, when the check fails, why.
    fn apply(&self, observed: Option<Value>, absent: &str, input: Option<&Value>) -> (Option<Value>, Option<String>) {
        let Some(value) = observed else {
            return match self {
                Check::Exists(false) => (None, None),
                _ => (None, Some(format!("expected a value, but {absent}"))),
            };
        };
        let failure = match self {
            Check::Exists(true) => None,
            Check::Exists(false) => Some("expected nothing there".to_owned()),
            Check::Compare(operator, expected) => (!operator.holds(&value, expected))
                .then(|| format!("expected {} {expected}, observed {value}", operator.name())),
            Check::Count(operator, expected) => {
                let count = match &value {
                    Value::Array(items) => items.len(),
                    Value::Object(members) => members.len(),
                    Value::String(text) => text.chars().count(),
                    other => {
                        return (
                            Some(other.clone()),
                            Some(format!("count needs an array, object or string, observed {other}")),
                        );
                    }
                };
                let count = Value::from(count);
                let failure = (!operator.holds(&count, expected))
                    .then(|| format!("expected a count {} {expected}, counted {count}", operator.name()));
                return (Some(count), failure);
            }
            Check::EqualsInput(pointer) => {
                let wanted = input.and_then(|i| i.pointer(pointer));
                match wanted {
                    Some(wanted) if Operator::Eq.holds(&value, wanted) => None,
                    Some(wanted) => Some(format!("expected the input's {pointer} ({wanted}), observed {value}")),
                    None => Some(format!("the input has nothing at {pointer}")),
                }
            }
            Check::Schema(validator) => {
                validator.iter_errors(&value).next().map(|error| format!("does not fit the schema: {error}"))
            }
        };
        (Some(value), failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trace(steps: Value) -> Trace {
        serde_json::from_value(json!({"run_id": "run_1", "level": "full", "steps": steps})).unwrap()
    }

    #[test]
    fn counts_a_loop_and_reads_a_missing_arm_as_absent() {
        let raw = json!([
            {"id": "three", "target": {"step": "fetch", "member": "invocations"}, "check": {"eq": 3}},
            {"id": "second", "target": {"step": "fetch#2", "member": "output", "pointer": "/n"}, "check": {"eq": 2}},
            {"id": "untaken", "target": {"step": "alert", "member": "outcome"}, "check": {"exists": false}},
            {"id": "ran", "target": {"step": "alert", "member": "outcome"}, "check": {"eq": "success"}, "message": "the alert must go out"}
        ]);
        let assertions = Assertions::read(Some(&raw), None, InputAt::Given(None)).unwrap().unwrap();
        let ok = json!({"ok": true, "status": "success", "error": null});
        let steps = (1..=3).map(|n| json!({"id": format!("fetch#{n}"), "outcome": ok, "output": {"n": n}})).collect();
        let mut outcome = Outcome::success();
        let mut output = Some(json!({"done": true}));
        let report = assertions.evaluate(&mut outcome, &mut output, &trace(Value::Array(steps)), None);
        assert_eq!((report.passed, report.failed), (3, 1));
        assert_eq!(report.verdicts[0].observed, Some(json!(3)));
        assert_eq!(report.verdicts[3].observed, None);
        assert!(report.verdicts[3].message.as_deref().unwrap().starts_with("the alert must go out ("));
        assert_eq!(outcome.status, ASSERTION_FAILED);
        assert_eq!(report.output, Some(json!({"done": true})));
        assert_eq!(output, None);
    }

    #[test]
    fn refuses_malformed_assertions_with_a_path_into_the_member() {
        let raw = json!([
            {"id": "a", "target": {"step": "s"}, "check": {"eq": 1}},
            {"id": "a", "target": {"output": "rows"}, "check": {"between": [1, 2]}},
            {"target": {"output": ""}, "check": {"count": {"gt": "x"}}},
            {"id": "b", "target": {"output": ""}, "check": {"equals_input": "/missing"}},
            {"id": "c", "target": {"output": ""}, "check": {"schema": {"type": 12}}}
        ]);
        let findings = Assertions::read(Some(&raw), None, InputAt::Given(Some(&json!({"id": 1})))).err().unwrap();
        let paths: Vec<String> = findings.iter().map(|f| serde_json::to_value(&f.path).unwrap().to_string()).collect();
        for expected in [
            "/x-assertions/0/target/member",
            "/x-assertions/1/target/output",
            "/x-assertions/1/check/between",
            "/x-assertions/2/id",
            "/x-assertions/2/check/count",
            "/x-assertions/3/check/equals_input",
            "/x-assertions/4/check/schema",
        ] {
            assert!(paths.iter().any(|p| p.contains(expected)), "{expected} in {paths:?}");
        }
        assert!(Assertions::read(Some(&json!({})), None, InputAt::Later).is_err());
        assert!(Assertions::read(None, None, InputAt::Later).unwrap().is_none());
        // A deployment's input is known only at each firing.
        let later = json!([{"id": "b", "target": {"output": ""}, "check": {"equals_input": "/event/id"}}]);
        assert!(Assertions::read(Some(&later), None, InputAt::Later).unwrap().is_some());
    }

    #[test]
    fn compares_numbers_as_numbers_and_strings_by_bytes() {
        assert!(Operator::Eq.holds(&json!(1), &json!(1.0)));
        assert!(Operator::Lt.holds(&json!("2026-01-01T00:00:00Z"), &json!("2026-02-01T00:00:00Z")));
        assert!(!Operator::Lt.holds(&json!("1"), &json!(2)));
        assert!(Operator::Ne.holds(&json!("1"), &json!(1)));
    }
}
