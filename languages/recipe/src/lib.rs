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

use pilotage_guest_sdk::closed_sets::{ClosedSets, Prose, guide};
use pilotage_guest_sdk::dollar::{self, Scope};
use pilotage_guest_sdk::findings::Findings;
use pilotage_guest_sdk::language::*;
use pilotage_guest_sdk::{pointer::At, step_ids::StepIds, trace::TraceBuilder, validation::ValidationBuilder, *};
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
/// The closed sets the code emits, and the closed-sets guide's prose.
const CLOSED_SETS: ClosedSets = ClosedSets {
    codes: &CODES,
    run_statuses: &[],
    step_statuses: &STEP_STATUSES,
    entry_kinds: &KINDS,
    risk_levels: &STANDARD_RISK_LEVELS,
    prose: Prose {
        scope_rules: Some(SCOPE),
        parameter_binding: Some(BINDING),
        step_ids: None,
        decisions: Some(DECISIONS),
        output: Some(OUTPUT),
    },
};
const SCOPE: &str = "A `$STEP` reference reads a call step before it: a top-level one, or an earlier one of the same `then`. Steps inside a `then` are not visible after their `if` (it may not have run).";
const BINDING: &str = "`input` is an object holding every `NAME` the recipe reads as `$input.NAME`; a missing one is an `input_binding` diagnostic at `/NAME`. A recipe that reads no input accepts any. No `context` is taken.";
const DECISIONS: &str = "An `if` entry carries one decision: `took` is `then` or `else`; `because` shows the value read, e.g. `$profile.tier (\"gold\") equals \"gold\": true`. A field that is missing reads as `null` in a condition.";
const OUTPUT: &str = "`output` is the recipe's `output` with each `$` reference replaced by its value, absent when the recipe has none or the Run failed. A Run that fails is `partial` once an entry was invoked, `error` before.";
const CORE: &str = include_str!("../guides/core.md");

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
            program_argument: "recipe".into(),
            features: Features { plan: true, catalog: true, execute: true, test_run: false, promotion: false },
            ..CLOSED_SETS.language_info()
        };
        let topics = ["grammar", "references", "conditions", "example"];
        let core = guide("recipe-core", "recipe/v1: steps, references, conditions", GuideLevel::Core, &topics, CORE);
        info.guides = vec![core, CLOSED_SETS.guide("recipe-closed-sets", &info)];
        info
    }

    /// Validates `program` against the caller's catalog (Part II §6.4): the
    /// diagnostics, and the plan when no error was found (Part II §5.6).
    fn validate(program: &str, _context: Option<&str>, catalog: &impl Catalog) -> Validation {
        let (mut check, root) = (Check { catalog, out: ValidationBuilder::new(), ids: StepIds::new() }, At::root());
        let doc: Value = serde_json::from_str(program).unwrap_or_default();
        let doc =
            doc.as_object().filter(|d| d.contains_key("steps") && d.keys().all(|k| k == "steps" || k == "output"));
        let Some(doc) = doc else {
            let message = "a recipe is an object with `steps` and an optional `output`";
            check.out.error("malformed_program", &root, message).hint("start from {\"steps\": []}".to_owned());
            return check.out.finish();
        };
        let (mut scope, steps) = (Scope::new(), root.at("steps"));
        if let Some(list) = doc["steps"].as_array() {
            list.iter().enumerate().for_each(|(i, s)| check.step(s, &steps.index(i), None, &mut scope));
        } else {
            check.out.error("malformed_program", &steps, "`steps` is an array");
        }
        if let Some(output) = doc.get("output") {
            scope.check(output, &root.at("output"), &mut check.out);
        }
        check.out.finish()
    }

    /// Checks `input` (JSON text) against the names `program` reads as
    /// `$input.NAME` (Part II §6.5.5), with `input_binding` findings.
    fn bind_input(program: &str, input: Option<&str>) -> Vec<Diagnostic> {
        dollar::bind_input(program, input)
    }

    /// Runs a validated `program` with `input` (Part II §6.5): each call through
    /// `host`, a flat trace with one decision per `if` (Part II §5.8).
    fn execute(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> RunResult {
        let (doc, input) = (json_or_null(Some(&request.program)), json_or_null(request.input.as_deref()));
        let mut run = Run { values: BTreeMap::from([("input".to_owned(), input)]), trace: TraceBuilder::new() };
        let result = doc["steps"].as_array().into_iter().flatten().try_for_each(|step| run.step(step, host));
        let result = result.and_then(|()| doc.get("output").map(|out| dollar::resolve(out, &run.values)).transpose());
        run.trace.run_result(result)
    }
}

/// The checks of one recipe: findings, plan and references in `out`.
struct Check<'c, C> {
    catalog: &'c C,
    out: ValidationBuilder,
    ids: StepIds,
}

impl<C: Catalog> Check<'_, C> {
    fn step(&mut self, step: &Value, at: &At, arm: Option<&str>, scope: &mut Scope) {
        let Some(id) = step.get("id").and_then(Value::as_str) else {
            self.out.error("malformed_step", at, "a step is an object with a string `id`");
            return;
        };
        self.ids.check(id, &at.at("id"), &mut self.out);
        let only = |names: &[&str]| step.as_object().is_some_and(|o| o.keys().all(|k| names.contains(&k.as_str())));
        if step.get("call").is_some() && only(&["id", "call", "with"]) {
            self.call(step, id, at, arm, scope);
        } else if step.get("if").is_some() && arm.is_none() && only(&["id", "if", "then"]) {
            self.guard(step, id, at, scope);
        } else {
            let shape =
                arm.map_or("a step is {id, call, with} or {id, if, then}", |_| "a `then` step is {id, call, with}");
            self.out.error("malformed_step", at, format!("step '{id}': {shape}"));
        }
    }

    fn call(&mut self, step: &Value, id: &str, at: &At, arm: Option<&str>, scope: &mut Scope) {
        let (with, with_at, call_at) = (step.get("with").cloned().unwrap_or(json!({})), at.at("with"), at.at("call"));
        let Some(arguments) = with.as_object() else {
            self.out.error("malformed_step", &with_at, "`with` is an object of arguments");
            return;
        };
        scope.check(&with, &with_at, &mut self.out);
        let name = step["call"].as_str().unwrap_or_default();
        let Some(entry) = self.catalog.entry(name) else {
            let (ids, message) = (self.catalog.ids(), format!("no catalog entry '{name}'"));
            return self.out.error("unknown_entry", &call_at, message).close_to(name, ids.iter().map(String::as_str));
        };
        if !CLOSED_SETS.is_callable(&entry.kind) {
            self.out.error("not_callable", &call_at, format!("'{name}' is a {} and cannot be called", entry.kind));
            return;
        }
        self.out.arguments("argument_mismatch", &with_at, &entry, arguments, |value| !dollar::is_reference(value));
        self.out.call(id, &entry, arm.map(|branch| validation::arm(branch, "then")));
        scope.insert(id, &entry);
    }

    fn guard(&mut self, step: &Value, id: &str, at: &At, scope: &Scope) {
        if step["if"].as_object().is_some_and(|c| c.len() == 2 && c.contains_key("is") && c.contains_key("equals")) {
            scope.check(&step["if"], &at.at("if"), &mut self.out);
        } else {
            self.out.error("bad_condition", &at.at("if"), "a condition is {\"is\": VALUE, \"equals\": VALUE}");
        }
        self.out.control(id, None);
        let Some(then) = step["then"].as_array() else {
            self.out.error("malformed_step", &at.at("then"), "`then` is an array of call steps");
            return;
        };
        // Arm steps see what the `if` sees; nothing they add outlives it.
        let (mut inner, then_at) = (scope.clone(), at.at("then"));
        then.iter().enumerate().for_each(|(i, s)| self.step(s, &then_at.index(i), Some(id), &mut inner));
    }
}

/// One Run: the values `$` references read (`input`, each call's output).
struct Run {
    values: BTreeMap<String, Value>,
    trace: TraceBuilder,
}

impl Run {
    fn step(&mut self, step: &Value, host: &mut impl Effects) -> Result<(), String> {
        let id = step["id"].as_str().unwrap_or_default();
        if let Some(condition) = step.get("if") {
            let is = dollar::resolve(&condition["is"], &self.values).unwrap_or(Value::Null);
            let took = is == condition["equals"];
            let because = format!("{} ({is}) equals {}: {took}", condition["is"], condition["equals"]);
            self.trace.branch(id, if took { "then" } else { "else" }, because);
            return step["then"].as_array().filter(|_| took).into_iter().flatten().try_for_each(|s| self.step(s, host));
        }
        let entry = step["call"].as_str().unwrap_or_default();
        let output = match dollar::resolve(step.get("with").unwrap_or(&json!({})), &self.values) {
            Ok(input) => self.trace.invoke(host, id, entry, &input, |m| format!("step '{id}': {m}")),
            Err(message) => self.trace.call(id, entry, &Value::Null, Err(format!("step '{id}': {message}"))),
        };
        self.values.insert(id.to_owned(), output?);
        Ok(())
    }
}
