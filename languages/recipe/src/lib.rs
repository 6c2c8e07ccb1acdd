//! recipe/v1, the example Language of `docs/writing-a-language.md`.
//!
//! A recipe is a JSON object with `steps` and an optional `output`. A step
//! calls a catalog entry (`{"id", "call", "with"}`) or guards calls with a
//! condition (`{"id", "if": {"is", "equals"}, "then": [calls]}`). A string
//! that starts with `$` reads a value: `$input.NAME…` or `$STEP.FIELD…`.
//! The logic is plain Rust over the guest SDK's [`Catalog`] and
//! [`Effects`], so it is tested natively; [`export!`] makes it the
//! component's exports, with the host's imports behind those traits.

use std::collections::BTreeMap;

use pilotage_guest_sdk::closed_sets::{self, Prose, guide};
use pilotage_guest_sdk::diag::{self, error_at, failure, success, warning_at, with_hint};
use pilotage_guest_sdk::hints::hint;
use pilotage_guest_sdk::language::{STANDARD_RISK_LEVELS, argument_mismatches, risk_label};
use pilotage_guest_sdk::pointer::push_token;
use pilotage_guest_sdk::trace::TraceBuilder;
use pilotage_guest_sdk::*;
use serde_json::{Value, json};

#[cfg(test)]
mod tests;

pilotage_guest_sdk::use_language_allocator!();

/// Diagnostic codes besides the reserved three (Part II §5.5), with meanings.
pub const CODES: [(&str, &str); 10] = [
    ("malformed_program", "Error. The program is not a JSON object with `steps` (an array) and an optional `output`."),
    ("malformed_step", "Error. A step is not `{id, call, with}` or `{id, if, then}`; a `then` holds call steps only."),
    ("duplicate_step_id", "Error. Two steps share an `id`."),
    ("reserved_character", "Error. A step `id` contains `#` or `/`, which Pilotage reserves for trace ids."),
    ("unknown_entry", "Error. `call` names no catalog entry visible to you; the hint names close ones."),
    ("not_callable", "Error. `call` names an entry whose kind cannot be called."),
    (
        "argument_mismatch",
        "Error. `with` lacks a property the entry requires, has one it refuses, or a literal of the wrong type.",
    ),
    ("bad_condition", "Error. An `if` is not `{\"is\": VALUE, \"equals\": VALUE}`."),
    ("unknown_reference", "Error. A `$` reference is malformed or names no call step visible at that place."),
    ("unknown_field", "Warning. `$STEP.FIELD` reads a field the entry's `output_schema` does not list."),
];
const KINDS: [(&str, bool, &str); 1] =
    [("capability", true, "An action or query over HTTP; `call` it with a `with` that fits its `input_schema`.")];
const STEP_STATUSES: [(&str, bool, bool, &str); 2] = [
    ("success", true, true, "The step completed; a call's entry was invoked."),
    ("error", false, true, "The entry failed (effects possible) or a `$` reference could not be read (nothing ran)."),
];
const SCOPE: &str = "A `$STEP` reference reads a call step before it: a top-level one, or an earlier one of the same `then`. Steps inside a `then` are not visible after their `if` (it may not have run).";
const BINDING: &str = "`input` is an object holding every `NAME` the recipe reads as `$input.NAME`; a missing one is an `input_binding` diagnostic at `/NAME`. A recipe that reads no input accepts any. No `context` is taken.";
const DECISIONS: &str = "An `if` entry carries one decision: `took` is `then` or `else`; `because` shows the value read, e.g. `$profile.tier (\"gold\") equals \"gold\": true`. A field that is missing reads as `null` in a condition.";
const OUTPUT: &str = "`output` is the recipe's `output` with each `$` reference replaced by its value, absent when the recipe has none or the Run failed. A Run that fails is `partial` once an entry was invoked, `error` before.";

/// recipe/v1, exported as the component by [`export!`] below.
pub struct Recipe;

pilotage_guest_sdk::export!(Recipe);

impl Language for Recipe {
    /// The self-description (Part II §5.1, §5.2); the closed-sets guide is
    /// rendered from the same tables the code emits.
    fn describe() -> LanguageInfo {
        let mut info = LanguageInfo {
            name: "recipe/v1".into(),
            title: "Recipes: calls to catalog entries, guarded by conditions".into(),
            program_kind: ProgramKind::Json,
            program_argument: "recipe".into(),
            locator: LocatorDialect::JsonPointer,
            execution: ExecutionMode::Immediate,
            trace: TraceCeiling::Full,
            trace_subprogram: SubprogramTracing::Opaque,
            context_schema: None,
            features: Features { plan: true, catalog: true, execute: true, test_run: false, promotion: false },
            diagnostic_codes: closed_sets::diagnostic_codes(&CODES),
            run_statuses: closed_sets::run_statuses(&[]),
            step_statuses: closed_sets::step_statuses(&STEP_STATUSES),
            entry_kinds: closed_sets::entry_kinds(&KINDS),
            risk_levels: closed_sets::risk_levels(&STANDARD_RISK_LEVELS),
            guides: Vec::new(),
        };
        let prose = Prose {
            scope_rules: Some(SCOPE),
            parameter_binding: Some(BINDING),
            decisions: Some(DECISIONS),
            output: Some(OUTPUT),
            step_ids: None,
        };
        let closed = closed_sets::render("recipe-closed-sets", &info, &prose);
        let topics = ["grammar", "references", "conditions", "example"];
        let core = guide("recipe-core", "recipe/v1: steps, references, conditions", GuideLevel::Core, &topics, CORE);
        info.guides = vec![core, closed];
        info
    }

    /// Validates `program` against the caller's catalog (Part II §6.4): the
    /// diagnostics, and the plan when no error was found (Part II §5.6).
    fn validate(program: &str, _context: Option<&str>, catalog: &impl Catalog) -> Validation {
        let mut check =
            Check { catalog, diagnostics: Vec::new(), plan: Vec::new(), references: Vec::new(), ids: Vec::new() };
        match serde_json::from_str::<Value>(program) {
            Ok(Value::Object(doc))
                if doc.keys().all(|k| k == "steps" || k == "output") && doc.contains_key("steps") =>
            {
                let mut scope = Scope::new();
                match doc["steps"].as_array() {
                    Some(steps) => steps
                        .iter()
                        .enumerate()
                        .for_each(|(i, s)| check.step(s, format!("/steps/{i}"), None, &mut scope)),
                    None => check.error("malformed_program", "/steps", "`steps` is an array".into(), None),
                }
                if let Some(output) = doc.get("output") {
                    check.reads(output, "/output".into(), &scope);
                }
            }
            _ => check.error(
                "malformed_program",
                "",
                "a recipe is an object with `steps` and an optional `output`".into(),
                Some("start from {\"steps\": []}".into()),
            ),
        }
        let valid = check.diagnostics.iter().all(|d| d.severity == Severity::Warning);
        let max_risk = risk_label(diag::aggregate(check.plan.iter().map(|step| step.risk_hints))).to_owned();
        Validation {
            plan: valid.then_some(Plan { steps: check.plan, max_risk }),
            diagnostics: check.diagnostics,
            references: check.references,
            statements: Vec::new(),
        }
    }

    /// Checks `input` (JSON text) against the names `program` reads as
    /// `$input.NAME` (Part II §6.5.5): `input_binding` findings pointing into
    /// `input`.
    fn bind_input(program: &str, input: Option<&str>) -> Vec<Diagnostic> {
        fn names(value: &Value, out: &mut Vec<String>) {
            match value {
                Value::String(text) => out.extend(
                    text.strip_prefix("$input.").map(|rest| rest.split('.').next().unwrap_or_default().to_owned()),
                ),
                Value::Array(items) => items.iter().for_each(|item| names(item, out)),
                Value::Object(members) => members.values().for_each(|member| names(member, out)),
                _ => {}
            }
        }
        let mut read = Vec::new();
        names(&parse(Some(program)), &mut read);
        let input = parse(input);
        if read.is_empty() {
            return Vec::new();
        }
        let Some(members) = input.as_object() else {
            return vec![error_at(
                diag::INPUT_BINDING,
                "",
                format!("input must be an object holding {}", read.join(", ")),
            )];
        };
        read.into_iter()
            .filter(|name| !members.contains_key(name))
            .map(|name| {
                error_at(
                    diag::INPUT_BINDING,
                    format!("/{}", name.replace('~', "~0").replace('/', "~1")),
                    format!("input lacks '{name}'"),
                )
            })
            .collect()
    }

    /// Runs a validated `program` with `input` (Part II §6.5): each call through
    /// `host`, a flat trace with one decision per `if` (Part II §5.8).
    fn execute(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> RunResult {
        let (program, input) = (request.program.as_str(), request.input.as_deref());
        let doc = parse(Some(program));
        let mut run = Run {
            values: BTreeMap::from([("input".to_owned(), parse(input))]),
            trace: TraceBuilder::new(),
            invoked: false,
        };
        let mut result = Ok(None);
        for step in doc["steps"].as_array().into_iter().flatten() {
            if let Err(message) = run.step(step, host) {
                result = Err(message);
                break;
            }
        }
        if let (Ok(_), Some(output)) = (&result, doc.get("output")) {
            result = run.resolve(output).map(Some);
        }
        let outcome = match &result {
            Ok(_) => success(),
            Err(message) => failure(if run.invoked { diag::PARTIAL } else { diag::ERROR }, message.clone()),
        };
        RunResult {
            outcome,
            output: result.ok().flatten().map(|o| o.to_string()),
            steps: run.trace.finish(),
            stats: None,
        }
    }
}

const CORE: &str = include_str!("../guides/core.md");

/// Call steps visible at a place: id → the entry's output schema.
type Scope = BTreeMap<String, Value>;

struct Check<'c, C> {
    catalog: &'c C,
    diagnostics: Vec<Diagnostic>,
    plan: Vec<PlanStep>,
    references: Vec<String>,
    ids: Vec<String>,
}

impl<C: Catalog> Check<'_, C> {
    fn error(&mut self, code: &str, at: &str, message: String, hint: Option<String>) {
        self.diagnostics.push(with_hint(error_at(code, at, message), hint));
    }

    fn step(&mut self, step: &Value, at: String, arm: Option<&str>, scope: &mut Scope) {
        let Some(id) = step.get("id").and_then(Value::as_str) else {
            return self.error("malformed_step", &at, "a step is an object with a string `id`".into(), None);
        };
        if id.contains(['#', '/']) {
            let fixed = id.replace(['#', '/'], "_");
            self.error(
                "reserved_character",
                &format!("{at}/id"),
                format!("step id '{id}' contains '#' or '/'"),
                Some(format!("rename it, e.g. '{fixed}'")),
            );
        }
        if self.ids.iter().any(|seen| seen == id) {
            self.error("duplicate_step_id", &format!("{at}/id"), format!("step id '{id}' is used twice"), None);
        }
        self.ids.push(id.to_owned());
        let only = |names: &[&str]| step.as_object().is_some_and(|o| o.keys().all(|k| names.contains(&k.as_str())));
        if step.get("call").is_some() && only(&["id", "call", "with"]) {
            self.call(step, id, &at, arm, scope);
        } else if step.get("if").is_some() && arm.is_none() && only(&["id", "if", "then"]) {
            self.guard(step, id, &at, scope);
        } else {
            let shape = if arm.is_some() {
                "a `then` step is {id, call, with}"
            } else {
                "a step is {id, call, with} or {id, if, then}"
            };
            self.error("malformed_step", &at, format!("step '{id}': {shape}"), None);
        }
    }

    fn call(&mut self, step: &Value, id: &str, at: &str, arm: Option<&str>, scope: &mut Scope) {
        let with = step.get("with").cloned().unwrap_or(json!({}));
        if !with.is_object() {
            return self.error(
                "malformed_step",
                &format!("{at}/with"),
                "`with` is an object of arguments".into(),
                None,
            );
        }
        self.reads(&with, format!("{at}/with"), scope);
        let name = step["call"].as_str().unwrap_or_default();
        let Some(entry) = self.catalog.entry(name) else {
            let ids = self.catalog.ids();
            let close = hint(name, ids.iter().map(String::as_str));
            return self.error("unknown_entry", &format!("{at}/call"), format!("no catalog entry '{name}'"), close);
        };
        if !KINDS.iter().any(|(kind, callable, _)| *kind == entry.kind && *callable) {
            return self.error(
                "not_callable",
                &format!("{at}/call"),
                format!("'{name}' is a {} and cannot be called", entry.kind),
                None,
            );
        }
        let arguments = with.as_object().cloned().unwrap_or_default();
        for mismatch in argument_mismatches(&entry, &arguments, |value| !is_reference(value)) {
            let mut here = format!("{at}/with");
            mismatch.argument.inspect(|argument| push_token(&mut here, argument));
            self.error("argument_mismatch", &here, mismatch.message, mismatch.hint);
        }
        if !self.references.iter().any(|seen| seen == name) {
            self.references.push(name.to_owned());
        }
        let arm = arm.map(|branch| Arm { branch: branch.to_owned(), label: "then".to_owned() });
        let risk = risk_label(entry.risk_hints).to_owned();
        self.plan.push(PlanStep {
            id: id.into(),
            calls: Some(name.into()),
            arm,
            loop_: None,
            risk,
            risk_hints: entry.risk_hints,
        });
        scope.insert(id.to_owned(), parse(entry.output_schema.as_deref()));
    }

    fn guard(&mut self, step: &Value, id: &str, at: &str, scope: &Scope) {
        match step["if"].as_object() {
            Some(c) if c.len() == 2 && c.contains_key("is") && c.contains_key("equals") => {
                self.reads(&step["if"], format!("{at}/if"), scope)
            }
            _ => self.error(
                "bad_condition",
                &format!("{at}/if"),
                "a condition is {\"is\": VALUE, \"equals\": VALUE}".into(),
                None,
            ),
        }
        self.plan.push(PlanStep {
            id: id.into(),
            calls: None,
            arm: None,
            loop_: None,
            risk: "safe".into(),
            risk_hints: diag::SAFE,
        });
        let Some(then) = step["then"].as_array() else {
            return self.error(
                "malformed_step",
                &format!("{at}/then"),
                "`then` is an array of call steps".into(),
                None,
            );
        };
        // Arm steps see what the `if` sees; nothing they add outlives it.
        let mut inner = scope.clone();
        for (i, arm_step) in then.iter().enumerate() {
            self.step(arm_step, format!("{at}/then/{i}"), Some(id), &mut inner);
        }
    }

    /// Checks every `$` reference inside `value`, found at pointer `at`.
    fn reads(&mut self, value: &Value, at: String, scope: &Scope) {
        match value {
            Value::String(text) if is_reference(value) => {
                let path: Vec<&str> = text[1..].split('.').collect();
                if path.iter().any(|part| part.is_empty()) || (path[0] == "input" && path.len() < 2) {
                    return self.error(
                        "unknown_reference",
                        &at,
                        format!("'{text}' is not $input.NAME… or $STEP.FIELD…"),
                        None,
                    );
                }
                match (path[0], scope.get(path[0])) {
                    ("input", _) => {}
                    (root, None) => {
                        let close = hint(root, scope.keys().map(String::as_str));
                        self.error(
                            "unknown_reference",
                            &at,
                            format!("'{text}': no call step '{root}' is visible here"),
                            close,
                        );
                    }
                    (root, Some(schema)) => {
                        if let (Some(field), Some(fields)) = (path.get(1), schema["properties"].as_object())
                            && !fields.contains_key(*field)
                        {
                            let close = hint(field, fields.keys().map(String::as_str));
                            let message = format!("'{root}' lists no output field '{field}'");
                            self.diagnostics.push(with_hint(warning_at("unknown_field", at, message), close));
                        }
                    }
                }
            }
            Value::Array(items) => {
                items.iter().enumerate().for_each(|(i, item)| self.reads(item, format!("{at}/{i}"), scope))
            }
            Value::Object(members) => {
                for (name, member) in members {
                    let mut here = at.clone();
                    push_token(&mut here, name);
                    self.reads(member, here, scope);
                }
            }
            _ => {}
        }
    }
}

fn parse(schema: Option<&str>) -> Value {
    schema.and_then(|text| serde_json::from_str(text).ok()).unwrap_or(Value::Null)
}

fn is_reference(value: &Value) -> bool {
    value.as_str().is_some_and(|text| text.starts_with('$'))
}

struct Run {
    values: BTreeMap<String, Value>,
    trace: TraceBuilder,
    invoked: bool,
}

impl Run {
    fn step(&mut self, step: &Value, host: &mut impl Effects) -> Result<(), String> {
        let id = step["id"].as_str().unwrap_or_default();
        if let Some(condition) = step.get("if") {
            let is = self.resolve(&condition["is"]).unwrap_or(Value::Null);
            let took = is == condition["equals"];
            let because = format!("{} ({is}) equals {}: {took}", condition["is"], condition["equals"]);
            self.trace.branch(id, if took { "then" } else { "else" }, because);
            let then = if took { step["then"].as_array() } else { None };
            return then.into_iter().flatten().try_for_each(|arm_step| self.step(arm_step, host));
        }
        let entry = step["call"].as_str().unwrap_or_default();
        let (input, result) = match self.resolve(step.get("with").unwrap_or(&json!({}))) {
            Err(message) => (Value::Null, Err(format!("step '{id}': {message}"))),
            Ok(input) => {
                self.invoked = true;
                let result = host
                    .invoke(id, entry, &input)
                    .map_err(|(InvokeError::Refused(m) | InvokeError::Failed(m))| format!("step '{id}': {m}"));
                (input, result)
            }
        };
        let (outcome, output) = match &result {
            Ok(output) => (success(), output.clone()),
            Err(message) => (failure(diag::ERROR, message.clone()), Value::Null),
        };
        self.trace.step(
            id.into(),
            Some(entry.into()),
            Some(input.to_string()),
            Some(output.to_string()),
            outcome,
            None,
        );
        self.values.insert(id.to_owned(), result?);
        Ok(())
    }

    /// `template` with every `$` reference replaced by the value it reads.
    fn resolve(&self, template: &Value) -> Result<Value, String> {
        match template {
            Value::String(text) if is_reference(template) => {
                let mut parts = text[1..].split('.');
                let root = parts.next().unwrap_or_default();
                let mut value = self.values.get(root).ok_or(format!("'{root}' has no value"))?;
                for field in parts {
                    value = value.get(field).ok_or(format!("'{text}': no field '{field}' in {value}"))?;
                }
                Ok(value.clone())
            }
            Value::Array(items) => items.iter().map(|item| self.resolve(item)).collect(),
            Value::Object(members) => members.iter().map(|(k, v)| Ok((k.clone(), self.resolve(v)?))).collect(),
            other => Ok(other.clone()),
        }
    }
}
