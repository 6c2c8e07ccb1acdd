//! automation/1: home-automation rules over a device registry.
//!
//! A rule is one JSON object: a deployment name (`rule`), one `trigger` (a
//! schedule in an IANA zone, a webhook source, or an MQTT subscription;
//! needed to deploy), `conditions` that must all hold (a member of the firing's
//! event, a local-time window, a read of a sensor), and the `actions` run
//! when they do (`otherwise` when they do not). The catalog is the device
//! registry: `action` entries change a device, `sensor` entries read one.
//!
//! A rule runs three ways: immediately, when it has no trigger (its
//! conditions evaluated once, now, against the given input; a rule with a
//! trigger is refused there with `trigger_needs_deploy`, Part IV §9), as a
//! test run (the host simulates every entry that is not read-only, and
//! answers `effects.now` with the input's `at`), or deployed (`deploy`
//! hands the host the trigger and the rule without it as the body it runs
//! at each firing).
//!
//! - [`rule`]: the grammar and every finding that needs no catalog;
//! - [`clock`]: zones, time windows, cron and topic checks;
//! - [`run`]: execution and installation.

use pilotage_guest_sdk::closed_sets::{ClosedSets, Prose, guide};
use pilotage_guest_sdk::diag::{INPUT_BINDING, error_at, with_hint};
use pilotage_guest_sdk::findings::Findings;
use pilotage_guest_sdk::hints::hint;
use pilotage_guest_sdk::language::*;
use pilotage_guest_sdk::pointer::At;
use pilotage_guest_sdk::validation::{ValidationBuilder, arm};
use pilotage_guest_sdk::*;
use serde_json::{Map, Value};

pub mod clock;
pub mod rule;
pub mod run;

#[cfg(test)]
mod tests;

use rule::{BRANCH, Test, child};

pilotage_guest_sdk::use_language_allocator!();

/// Diagnostic codes besides the reserved three (Part II §5.5), with meanings.
pub const CODES: [(&str, &str); 23] = [
    (
        "malformed_rule",
        "Error. The program is not an object of `rule`, `description`, `trigger`, `conditions`, `actions` and `otherwise`, or `actions` is missing.",
    ),
    (
        "bad_name",
        "Error. `rule`, the deployment name, is missing or not 1 to 64 lowercase letters, digits, `-` or `_`.",
    ),
    (
        "bad_trigger",
        "Error. `trigger` is not one of {schedule: {cron, time_zone}}, {webhook: SOURCE}, {mqtt: {broker, topic}}, or the MQTT topic filter is malformed.",
    ),
    (
        "one_trigger",
        "Error. More than one trigger (a `triggers` member, a list, or two kinds in `trigger`): a rule has exactly one; write one rule per trigger.",
    ),
    ("bad_cron", "Error. A schedule's `cron` is not 5 (or 6, seconds first) well-formed fields."),
    ("unknown_time_zone", "Error. A `time_zone` is not an IANA time zone name; the hint names close ones."),
    ("bad_time", "Error. A time window's `after` or `before` is not a 24-hour \"HH:MM\", or the two are equal."),
    (
        "malformed_condition",
        "Error. A condition is not {id, event, equals}, {id, time: {after, before, time_zone}} or {id, read, field, equals, with?}.",
    ),
    ("malformed_action", "Error. An action is not {id, call, with?} with `with` an object."),
    ("duplicate_step_id", "Error. Two conditions or actions share an `id`, or one is named `when`, the rule's branch."),
    ("reserved_character", "Error. A step `id` contains `#` or `/`, which Pilotage reserves for trace ids."),
    ("unknown_entry", "Error. `call` or `read` names no catalog entry visible to you; the hint names close ones."),
    ("not_callable", "Error. `call` or `read` names an entry whose kind cannot be called."),
    ("not_read_only", "Error. A `read` condition names an entry that is not read-only; put it in `actions` instead."),
    (
        "argument_mismatch",
        "Error. `with` lacks a property the entry requires, has one it refuses, or a value of the wrong type.",
    ),
    (
        "no_delay",
        "Error. A `delay`, `wait` or similar member: automation/1 has no delays; actions run when the rule fires. Write a second rule with a schedule trigger.",
    ),
    ("conditions_not_if", "Error. An `if` or `when` member: write the tests as `conditions` of the whole rule."),
    ("otherwise_not_else", "Error. An `else` member: write the other arm as `otherwise`."),
    ("actions_not_then", "Error. A `then` or `do` member: write the arm as `actions`."),
    (
        "trigger_in_actions",
        "Error. A trigger (`trigger`, `schedule`, `webhook`, `mqtt`) inside an action: the rule's one trigger is its top-level `trigger`.",
    ),
    (
        "trigger_needs_deploy",
        "Error, at execution: an immediate Run (mode `immediate`, not a test run) of a rule that has a `trigger`. It would ignore the trigger and install nothing, so it is refused (outcome `validation_error`) before anything runs: deploy the rule (mode `deploy`), test it (`test_run: true` with `input.at`), or remove `trigger` to run the actions once now.",
    ),
    (
        "deploy_needs_trigger",
        "Error, at execution: a deploy (mode `deploy`) of a rule without a `trigger`. The deployment would never run, so it is refused (outcome `validation_error`) and nothing is installed: add a `trigger`, or run the actions once with mode `immediate`.",
    ),
    (
        "no_alternatives",
        "Error. An `or`, `any` or `not` member: every condition must hold; write a second rule for an alternative.",
    ),
];

/// Catalog entry kinds (Part II §5.2).
pub const KINDS: [(&str, bool, &str); 2] = [
    ("action", true, "Changes a device (turn a light on, unlock a door); `call` it in `actions` or `otherwise`."),
    ("sensor", true, "Reads a device's state without changing it; `read` it in a condition."),
];

const STEP_STATUSES: [(&str, bool, bool, &str); 2] = [
    ("success", true, true, "The step completed: the entry answered, or the branch decided."),
    ("error", false, true, "The entry was called and failed, or the host refused the call."),
];

const SCOPE: &str = "No value flows between steps. A `read` condition's output is compared only by that condition (its `field` against its `equals`); actions take literal `with` arguments. `actions` run only when every condition holds, `otherwise` only when one does not; neither arm sees the other.";
const BINDING: &str = "`input` is optional; when given it is an object with at most `trigger` (an object), `event` (any JSON, read by `event` conditions) and `at` (an RFC 3339 instant such as \"2026-07-14T22:30:00+02:00\"), exactly what the host passes at a firing. Any other member, a non-object input or an `at` that is not RFC 3339 is an `input_binding` finding pointing into `input`. In a test run the host answers the clock with `at`, so time windows are evaluated at that instant. No `context` is taken.";
const STEP_IDS: &str = "Plan and trace ids are the conditions' and actions' own `id`s, plus `when`, the branch that decides between `actions` (arm `then`) and `otherwise` (arm `else`). Only `read` conditions are steps of their own (they call a sensor); `event` and `time` conditions are decided inside `when`. The installation Run of a deploy has one step, `install`.";
const DECISIONS: &str = "The `when` entry carries the branch decision first, `{at: \"when\", took: \"then\" | \"else\", because}` (`because` is `every condition holds`, or names the failing condition and why), then one decision per condition evaluated, in order, `{at: CONDITION_ID, took: \"true\" | \"false\", because}`, where `because` names the values compared and, for a window, the local clock, date and UTC offset. Evaluation stops at the first false condition. Every `read` runs before `when` decides, whatever the conditions find.";
const OUTPUT: &str = "An execution's output is `{\"rule\": NAME, \"took\": \"then\" | \"else\", \"actions\": [ids of the actions run]}`, with `\"test_run\": true` in a test run; absent when the Run failed. A failed `read` or a first failed action makes the Run `error`; an action failing after another ran makes it `partial`. An immediate Run installs nothing, so a rule with a `trigger` is refused in mode `immediate` (`trigger_needs_deploy`, outcome `validation_error`, nothing run) unless it is a test run; a rule without `trigger` runs once. Only a deploy (mode `deploy`) installs the trigger, and a deploy of a rule without one is refused (`deploy_needs_trigger`, outcome `validation_error`, nothing installed); a deploy's output is `{\"deployment\": NAME, \"trigger\": TRIGGER}`, and what it installs as the body is the rule without its `trigger`, run at each firing.";

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
        step_ids: Some(STEP_IDS),
        output: Some(OUTPUT),
        decisions: Some(DECISIONS),
    },
};

const CORE: &str = include_str!("../guides/core.md");

/// automation/1, exported as the component by [`export!`] below.
pub struct Automation;

pilotage_guest_sdk::export!(Automation);

impl Language for Automation {
    /// The self-description (Part II §5.1, §5.2); the closed-sets guide is
    /// rendered from the same tables the code emits.
    fn describe() -> LanguageInfo {
        let mut info = LanguageInfo {
            name: "automation/1".into(),
            title: "Home-automation rules: one trigger, conditions, actions on a device registry".into(),
            program_argument: "rule".into(),
            execution: ExecutionMode::Both,
            features: Features { plan: true, catalog: true, execute: true, test_run: true, promotion: false },
            ..CLOSED_SETS.language_info()
        };
        let closed = CLOSED_SETS.guide("automation-closed-sets", &info);
        let topics = ["grammar", "triggers", "conditions", "actions", "input", "test-runs", "deploy", "example"];
        let core = guide(
            "automation-core",
            "automation/1: a rule, its trigger, conditions and actions",
            GuideLevel::Core,
            &topics,
            CORE,
        );
        info.guides = vec![core, closed];
        info
    }

    /// Validates a rule against the caller's catalog (Part II §6.4): the
    /// grammar's findings, then every entry it names, and the plan when no
    /// error was found (Part II §5.6).
    fn validate(program: &str, _context: Option<&str>, catalog: &impl Catalog) -> Validation {
        let (rule, diagnostics) = rule::parse(program);
        let mut check =
            Check { catalog, out: ValidationBuilder { diagnostics, ..ValidationBuilder::new() }, ids: None };
        for condition in &rule.conditions {
            let Test::Read { entry, with, .. } = &condition.test else { continue };
            let at = child(&condition.at, "read");
            if let Some(found) = check.entry(entry, &at, with, &child(&condition.at, "with")) {
                if !found.risk_hints.read_only {
                    let hint = format!(
                        "a `read` names a read-only entry (kind sensor), e.g. one ending in `.state`; to change a device, call '{entry}' in `actions`"
                    );
                    let message = format!("'{entry}' is {} and changes the device; a `read` must not", found.risk);
                    check.out.error("not_read_only", at, message).hint(hint);
                }
                check.out.call(&condition.id, &found, None);
            }
        }
        check.out.control(BRANCH, None);
        for (label, actions) in [("then", &rule.actions), ("else", &rule.otherwise)] {
            for action in actions {
                let at = child(&action.at, "call");
                if let Some(found) = check.entry(&action.call, &at, &action.with, &child(&action.at, "with")) {
                    check.out.call(&action.id, &found, Some(arm(BRANCH, label)));
                }
            }
        }
        check.out.finish()
    }

    /// Checks `input` against the firing convention (Part II §6.5.5): an
    /// optional object of `trigger`, `event` and an RFC 3339 `at`.
    fn bind_input(_program: &str, input: Option<&str>) -> Vec<Diagnostic> {
        let Some(text) = input else { return Vec::new() };
        let shape = "{\"event\": …, \"at\": \"2026-07-14T22:30:00+02:00\"}";
        let members = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(members)) => members,
            Ok(Value::Null) => return Vec::new(),
            Ok(other) => {
                let message = format!("input is an object of `trigger`, `event` and `at`, not {other}");
                return vec![with_hint(error_at(INPUT_BINDING, "", message), Some(format!("e.g. {shape}")))];
            }
            Err(error) => return vec![error_at(INPUT_BINDING, "", format!("input is not JSON: {error}"))],
        };
        input_findings(&members)
    }

    /// Runs the rule once (Part II §6.5): its reads, the branch with one
    /// decision per condition, then the selected arm's actions.
    fn execute(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> RunResult {
        run::execute(request, host)
    }

    /// Installs the rule (Part II §6.5.7): its trigger, and the rule
    /// without it as the body the host runs at each firing.
    fn deploy(request: &RunRequest, host: &mut (impl Catalog + Effects)) -> DeployResult {
        let validation = Automation::validate(&request.program, request.context.as_deref(), &*host);
        run::deploy(request, &validation)
    }
}

const INPUT_MEMBERS: [&str; 3] = ["trigger", "event", "at"];

fn input_findings(members: &Map<String, Value>) -> Vec<Diagnostic> {
    let mut found = Vec::new();
    for key in members.keys().filter(|key| !INPUT_MEMBERS.contains(&key.as_str())) {
        let close = hint(key, INPUT_MEMBERS).unwrap_or_else(|| "the members are `trigger`, `event` and `at`".into());
        let message = format!("input has no member `{key}`");
        found.push(with_hint(error_at(INPUT_BINDING, child("", key), message), Some(close)));
    }
    if let Some(trigger) = members.get("trigger").filter(|trigger| !trigger.is_object()) {
        found.push(error_at(INPUT_BINDING, "/trigger", format!("`trigger` is an object, not {trigger}")));
    }
    match members.get("at") {
        Some(Value::String(at)) if chrono::DateTime::parse_from_rfc3339(at).is_ok() => {}
        Some(at) => found.push(with_hint(
            error_at(INPUT_BINDING, "/at", format!("`at` is an RFC 3339 instant, not {at}")),
            Some("e.g. \"2026-07-14T22:30:00+02:00\" or \"2026-07-14T20:30:00Z\"".into()),
        )),
        None => {}
    }
    found
}

/// The catalog checks of `validate`.
struct Check<'c, C> {
    catalog: &'c C,
    out: ValidationBuilder,
    /// Every visible id, fetched on the first unknown entry.
    ids: Option<Vec<String>>,
}

impl<C: Catalog> Check<'_, C> {
    /// The entry `id` named at `at` and called with `with` (at `with_at`),
    /// when it exists and is callable; its arguments checked.
    fn entry(&mut self, id: &str, at: &str, with: &Map<String, Value>, with_at: &str) -> Option<CatalogEntry> {
        let Some(entry) = self.catalog.entry(id) else {
            let ids = self.ids.get_or_insert_with(|| self.catalog.ids());
            let message = format!("no catalog entry '{id}' is visible");
            self.out.error("unknown_entry", at, message).close_to(id, ids.iter().map(String::as_str));
            return None;
        };
        self.out.reference(id);
        if !CLOSED_SETS.is_callable(&entry.kind) {
            self.out.error(
                "not_callable",
                at,
                format!("'{id}' is a {} and cannot be called; only action and sensor entries can", entry.kind),
            );
            return None;
        }
        self.out.arguments("argument_mismatch", &At::under(with_at), &entry, with, |_| true);
        Some(entry)
    }
}
