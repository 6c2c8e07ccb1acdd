//! The grammar of a rule: parsing a program into a [`Rule`] and every
//! finding that needs no catalog (shapes, names, the trigger, time windows,
//! step ids, and the keys of mechanisms automation/1 does not have).
//!
//! Parsing goes on after a finding wherever the rest still makes sense, so
//! one validation reports as much as it can; the catalog checks of
//! `validate` then run over whatever parsed.

use pilotage_guest_sdk::diag::{error_at, with_hint};
use pilotage_guest_sdk::hints::hint;
use pilotage_guest_sdk::pointer::push_token;
use pilotage_guest_sdk::{Diagnostic, MqttSubscription, Schedule, Trigger};
use serde_json::{Map, Value, json};

use crate::clock::{self, Window};

/// The id of the rule's one branch: the plan step and trace entry that
/// decides between `actions` (arm `then`) and `otherwise` (arm `else`).
pub const BRANCH: &str = "when";

/// A parsed rule.
#[derive(Debug)]
pub struct Rule {
    /// The deployment name.
    pub name: String,
    /// The trigger, when it parsed; none for a body (a rule run once, or
    /// what a deployment runs at each firing).
    pub trigger: Option<Trigger>,
    /// The conditions, in order.
    pub conditions: Vec<Condition>,
    /// The `then` arm.
    pub actions: Vec<Action>,
    /// The `else` arm.
    pub otherwise: Vec<Action>,
}

/// One condition and where it is in the program.
#[derive(Debug)]
pub struct Condition {
    /// Its step id.
    pub id: String,
    /// JSON Pointer to it in the program.
    pub at: String,
    /// What it tests.
    pub test: Test,
}

/// What a condition tests.
#[derive(Debug)]
pub enum Test {
    /// A member of the firing's `event` equals a value.
    Event {
        /// JSON Pointer into `event`.
        pointer: String,
        /// The expected value.
        equals: Value,
    },
    /// The local time is inside a window.
    Time(Window),
    /// A field of a read-only entry's output equals a value.
    Read {
        /// The entry id.
        entry: String,
        /// The entry's input.
        with: Map<String, Value>,
        /// JSON Pointer into the entry's output.
        field: String,
        /// The expected value.
        equals: Value,
    },
}

/// One action of `actions` or `otherwise`.
#[derive(Debug)]
pub struct Action {
    /// Its step id.
    pub id: String,
    /// JSON Pointer to it in the program.
    pub at: String,
    /// The entry it calls.
    pub call: String,
    /// The entry's input.
    pub with: Map<String, Value>,
}

/// Where a key was found, for the near-miss table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The rule object.
    Rule,
    /// A condition.
    Condition,
    /// An action of `actions` or `otherwise`.
    Action,
    /// Inside a trigger (no near misses of its own).
    Trigger,
}

/// Keys agents write for mechanisms automation/1 does not have, or in the
/// wrong place: (place, keys, code, hint). Each is refused with its own
/// code and a hint naming what to write instead.
pub const NEAR_MISSES: [(Place, &[&str], &str, &str); 13] = [
    (
        Place::Rule,
        &["triggers"],
        "one_trigger",
        "a rule has exactly one `trigger` object; for a second trigger, write a second rule with its own `rule` name and deploy it too",
    ),
    (
        Place::Rule,
        &["if", "when", "condition", "where", "only_if", "and"],
        "conditions_not_if",
        "write the tests as `\"conditions\": [...]`; every condition must hold",
    ),
    (
        Place::Rule,
        &["else", "or_else", "else_actions"],
        "otherwise_not_else",
        "write the arm run when a condition fails as `\"otherwise\": [...]`",
    ),
    (
        Place::Rule,
        &["then", "do", "action", "steps"],
        "actions_not_then",
        "write the arm run when every condition holds as `\"actions\": [...]`",
    ),
    (
        Place::Rule,
        &["delay", "wait", "sleep", "duration", "for"],
        "no_delay",
        "automation/1 has no delays or waits: actions run when the rule fires; for something later, write a second rule with a `schedule` trigger",
    ),
    (
        Place::Rule,
        &["schedule", "webhook", "mqtt", "cron", "on"],
        "bad_trigger",
        "put the trigger inside `trigger`, e.g. `\"trigger\": {\"webhook\": \"home\"}`",
    ),
    (
        Place::Rule,
        &["name", "id"],
        "bad_name",
        "the deployment name is the member `rule`, e.g. `\"rule\": \"porch-at-night\"`",
    ),
    (
        Place::Condition,
        &["or", "any", "any_of", "one_of", "not", "unless", "none_of"],
        "no_alternatives",
        "conditions are all required (AND); there is no or/not: for an alternative write a second rule, for a negation compare with the value you expect in `equals`",
    ),
    (
        Place::Condition,
        &["delay", "wait", "for", "duration", "since"],
        "no_delay",
        "a condition is tested once, when the rule fires; there is no 'for N minutes': for something later, write a second rule with a `schedule` trigger",
    ),
    (
        Place::Condition,
        &["not_equals", "above", "below", "gt", "gte", "lt", "lte", "in", "contains", "matches"],
        "malformed_condition",
        "a condition compares with `equals` only (any JSON value)",
    ),
    (
        Place::Action,
        &["delay", "wait", "sleep", "after", "duration"],
        "no_delay",
        "automation/1 has no delays or waits: actions run one after the other when the rule fires; for something later, write a second rule with a `schedule` trigger",
    ),
    (
        Place::Action,
        &["trigger", "triggers", "schedule", "webhook", "mqtt", "cron"],
        "trigger_in_actions",
        "a trigger is not an action: the rule's one `trigger` goes at the top level of the rule",
    ),
    (
        Place::Action,
        &["if", "when", "condition", "conditions", "unless"],
        "conditions_not_if",
        "conditions belong to the whole rule, in its `conditions`; for an action with other conditions, write a second rule",
    ),
];

const RULE_KEYS: [&str; 6] = ["rule", "description", "trigger", "conditions", "actions", "otherwise"];
const TRIGGER_KINDS: [&str; 3] = ["schedule", "webhook", "mqtt"];
const TRIGGER_SHAPES: &str = "{\"schedule\": {\"cron\": \"30 22 * * *\", \"time_zone\": \"Europe/Paris\"}}, {\"webhook\": \"SOURCE\"} or {\"mqtt\": {\"broker\": \"NAME\", \"topic\": \"home/+/door\"}}";

/// The near-miss code and hint for `key` at `place`, if it is one.
pub fn near_miss(place: Place, key: &str) -> Option<(&'static str, &'static str)> {
    NEAR_MISSES
        .iter()
        .find(|(at, keys, _, _)| *at == place && keys.contains(&key))
        .map(|(_, _, code, hint)| (*code, *hint))
}

/// Findings gathered while parsing.
#[derive(Default)]
struct Parser {
    diagnostics: Vec<Diagnostic>,
    ids: Vec<String>,
}

/// `at` extended by one member name or index.
pub fn child(at: &str, token: &str) -> String {
    let mut pointer = at.to_owned();
    push_token(&mut pointer, token);
    pointer
}

/// Parses `program` (JSON text): the rule as far as it parsed, and every
/// finding that needs no catalog.
pub fn parse(program: &str) -> (Rule, Vec<Diagnostic>) {
    let mut parser = Parser::default();
    let mut rule =
        Rule { name: String::new(), trigger: None, conditions: Vec::new(), actions: Vec::new(), otherwise: Vec::new() };
    let doc = match serde_json::from_str::<Value>(program) {
        Ok(Value::Object(doc)) => doc,
        Ok(_) | Err(_) => {
            parser.error(
                "malformed_rule",
                "",
                "a rule is a JSON object with `rule`, `trigger`, `conditions`, `actions` and optionally `otherwise`"
                    .into(),
                Some(
                    "start from {\"rule\": \"NAME\", \"trigger\": {\"webhook\": \"SOURCE\"}, \"conditions\": [], \"actions\": []}"
                        .into(),
                ),
            );
            return (rule, parser.diagnostics);
        }
    };
    parser.keys(&doc, "", Place::Rule, &RULE_KEYS, "malformed_rule");
    rule.name = parser.name(doc.get("rule"));
    if let Some(text) = doc.get("description").filter(|d| !d.is_string()) {
        parser.error("malformed_rule", "/description", format!("`description` is a string, not {text}"), None);
    }
    rule.trigger = parser.trigger(doc.get("trigger"));
    if let Some(conditions) = parser.list(&doc, "conditions", "malformed_condition", false) {
        for (i, condition) in conditions.iter().enumerate() {
            if let Some(condition) = parser.condition(condition, format!("/conditions/{i}")) {
                rule.conditions.push(condition);
            }
        }
    }
    for (member, arm) in [("actions", &mut rule.actions), ("otherwise", &mut rule.otherwise)] {
        if let Some(actions) = parser.list(&doc, member, "malformed_action", member == "actions") {
            for (i, action) in actions.iter().enumerate() {
                if let Some(action) = parser.action(action, format!("/{member}/{i}")) {
                    arm.push(action);
                }
            }
        }
    }
    (rule, parser.diagnostics)
}

impl Parser {
    fn error(&mut self, code: &str, at: &str, message: String, hint: Option<String>) {
        self.diagnostics.push(with_hint(error_at(code, at, message), hint));
    }

    /// Refuses members of `object` outside `allowed`: a near miss with its
    /// own code and hint, any other with `code` and the close allowed names.
    fn keys(&mut self, object: &Map<String, Value>, at: &str, place: Place, allowed: &[&str], code: &str) {
        for key in object.keys().filter(|key| !allowed.contains(&key.as_str())) {
            let here = child(at, key);
            match near_miss(place, key) {
                Some((miss, hint)) => {
                    self.error(miss, &here, format!("automation/1 has no `{key}` here"), Some(hint.into()))
                }
                None => {
                    let close = hint(key, allowed.iter().copied())
                        .unwrap_or_else(|| format!("the members here are {}", quoted(allowed)));
                    self.error(code, &here, format!("unknown member `{key}`"), Some(close));
                }
            }
        }
    }

    fn name(&mut self, name: Option<&Value>) -> String {
        let Some(name) = name else {
            self.error(
                "bad_name",
                "/rule",
                "a rule needs `rule`, its deployment name".into(),
                Some("e.g. \"rule\": \"porch-at-night\"".into()),
            );
            return String::new();
        };
        let text = name.as_str().unwrap_or_default();
        let well_formed = (1..=64).contains(&text.len())
            && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !well_formed {
            let slug: String = text
                .to_lowercase()
                .chars()
                .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' { c } else { '-' })
                .take(64)
                .collect();
            let slug = slug.trim_matches('-');
            let hint = if slug.is_empty() { "e.g. porch-at-night".to_owned() } else { format!("e.g. {slug}") };
            self.error(
                "bad_name",
                "/rule",
                format!("`rule` is 1 to 64 lowercase letters, digits, `-` or `_`, not {name}"),
                Some(hint),
            );
        }
        text.to_owned()
    }

    fn trigger(&mut self, trigger: Option<&Value>) -> Option<Trigger> {
        let shapes = Some(format!("write one of {TRIGGER_SHAPES}"));
        let trigger = match trigger {
            // A rule without a trigger is a body: it runs once, now (an
            // immediate Run, or a deployment's firing); only deploying it
            // needs a trigger.
            None => return None,
            Some(Value::Array(_)) => {
                self.error(
                    "one_trigger",
                    "/trigger",
                    "`trigger` is one trigger object, not a list".into(),
                    Some("a rule has exactly one trigger; for another trigger, write a second rule".into()),
                );
                return None;
            }
            Some(Value::Object(trigger)) => trigger,
            Some(other) => {
                self.error("bad_trigger", "/trigger", format!("`trigger` is an object, not {other}"), shapes);
                return None;
            }
        };
        let kinds: Vec<&str> = trigger.keys().map(String::as_str).filter(|k| TRIGGER_KINDS.contains(k)).collect();
        if kinds.len() > 1 {
            self.error(
                "one_trigger",
                "/trigger",
                format!("`trigger` holds {}; a rule has exactly one trigger", kinds.join(" and ")),
                Some("keep one here; for the other, write a second rule with its own `rule` name".into()),
            );
            return None;
        }
        // The shape of a firing's `trigger` input (`kind`), or a bare cron:
        // one finding, with the shape this kind takes in a rule.
        let kind = ["kind", "type"].iter().find_map(|key| trigger.get(*key)?.as_str().map(|kind| (*key, kind)));
        if kinds.is_empty()
            && let Some((key, kind)) = kind.filter(|(_, kind)| TRIGGER_KINDS.contains(kind))
        {
            let shape = match kind {
                "schedule" => "{\"schedule\": {\"cron\": \"30 22 * * *\", \"time_zone\": \"Europe/Paris\"}}",
                "webhook" => "{\"webhook\": \"SOURCE\"}",
                _ => "{\"mqtt\": {\"broker\": \"NAME\", \"topic\": \"FILTER\"}}",
            };
            let message = format!("a trigger is named by its kind as the member, not by `{key}`");
            self.error("bad_trigger", "/trigger", message, Some(format!("write {shape}")));
            return None;
        }
        if kinds.is_empty() && trigger.contains_key("cron") {
            let message = "a cron goes inside `schedule`".to_owned();
            let hint = "write {\"schedule\": {\"cron\": \"30 22 * * *\", \"time_zone\": \"Europe/Paris\"}}";
            self.error("bad_trigger", "/trigger", message, Some(hint.into()));
            return None;
        }
        for key in trigger.keys().filter(|k| !TRIGGER_KINDS.contains(&k.as_str())) {
            let close = hint(key, TRIGGER_KINDS).or(shapes.clone());
            self.error("bad_trigger", &child("/trigger", key), format!("`{key}` is not a trigger kind"), close);
        }
        match (kinds.first().copied(), trigger.len()) {
            (Some("schedule"), 1) => self.schedule(&trigger["schedule"]),
            (Some("webhook"), 1) => self.webhook(&trigger["webhook"]),
            (Some("mqtt"), 1) => self.mqtt(&trigger["mqtt"]),
            (None, 0) => {
                self.error("bad_trigger", "/trigger", "`trigger` is empty".into(), shapes);
                None
            }
            _ => None,
        }
    }

    fn schedule(&mut self, schedule: &Value) -> Option<Trigger> {
        let at = "/trigger/schedule";
        let Some(members) = schedule.as_object() else {
            self.error(
                "bad_trigger",
                at,
                "`schedule` is {\"cron\": \"…\", \"time_zone\": \"…\"}".into(),
                Some("e.g. {\"cron\": \"30 22 * * *\", \"time_zone\": \"Europe/Paris\"}".into()),
            );
            return None;
        };
        self.keys(members, at, Place::Trigger, &["cron", "time_zone"], "bad_trigger");
        let cron = match members.get("cron").and_then(Value::as_str) {
            Some(cron) => match clock::cron_problem(cron) {
                None => Some(cron),
                Some((message, hint)) => {
                    self.error("bad_cron", &child(at, "cron"), message, hint);
                    None
                }
            },
            None => {
                self.error(
                    "bad_cron",
                    &child(at, "cron"),
                    "`cron` is a string of 5 or 6 fields".into(),
                    Some("e.g. \"30 22 * * *\" for 22:30 every day".into()),
                );
                None
            }
        };
        let zone = self.zone(members.get("time_zone"), &child(at, "time_zone"));
        Some(Trigger::Schedule(Schedule { cron: cron?.to_owned(), time_zone: zone?.name().to_owned() }))
    }

    fn webhook(&mut self, source: &Value) -> Option<Trigger> {
        match source.as_str() {
            Some(source) if !source.is_empty() && source.len() <= 128 && !source.contains(char::is_whitespace) => {
                Some(Trigger::Webhook(source.to_owned()))
            }
            _ => {
                self.error(
                    "bad_trigger",
                    "/trigger/webhook",
                    format!("`webhook` is the event source's name (a string without spaces), not {source}"),
                    Some("e.g. {\"webhook\": \"home\"}".into()),
                );
                None
            }
        }
    }

    fn mqtt(&mut self, mqtt: &Value) -> Option<Trigger> {
        let at = "/trigger/mqtt";
        let Some(members) = mqtt.as_object() else {
            self.error(
                "bad_trigger",
                at,
                "`mqtt` is {\"broker\": \"NAME\", \"topic\": \"FILTER\"}".into(),
                Some("e.g. {\"broker\": \"home\", \"topic\": \"zigbee/front_door/+\"}".into()),
            );
            return None;
        };
        self.keys(members, at, Place::Trigger, &["broker", "topic"], "bad_trigger");
        let broker = members.get("broker").and_then(Value::as_str).filter(|b| !b.is_empty());
        if broker.is_none() {
            self.error(
                "bad_trigger",
                &child(at, "broker"),
                "`broker` is the name of a broker registered for the tenant".into(),
                None,
            );
        }
        let topic = members.get("topic").and_then(Value::as_str);
        let topic = match topic.map(clock::topic_problem) {
            Some(None) => topic,
            Some(Some(problem)) => {
                self.error(
                    "bad_trigger",
                    &child(at, "topic"),
                    problem,
                    Some("`+` stands for one whole level, `#` for the rest and only last, e.g. home/+/door/#".into()),
                );
                None
            }
            None => {
                self.error("bad_trigger", &child(at, "topic"), "`topic` is an MQTT topic filter".into(), None);
                None
            }
        };
        Some(Trigger::Mqtt(MqttSubscription { broker: broker?.to_owned(), topic: topic?.to_owned() }))
    }

    fn zone(&mut self, zone: Option<&Value>, at: &str) -> Option<chrono_tz::Tz> {
        let name = zone.and_then(Value::as_str).unwrap_or_default();
        match clock::zone(name) {
            Ok(zone) => Some(zone),
            Err(close) => {
                let message = match zone {
                    None => "`time_zone` is missing".to_owned(),
                    Some(zone) => format!("{zone} is not an IANA time zone"),
                };
                let hint = close.unwrap_or_else(|| "an IANA name, e.g. Europe/Paris, America/New_York, UTC".into());
                self.error("unknown_time_zone", at, message, Some(hint));
                None
            }
        }
    }

    /// The array `doc[member]`, or a finding; `None` when absent and not
    /// `required`.
    fn list<'d>(
        &mut self,
        doc: &'d Map<String, Value>,
        member: &str,
        code: &str,
        required: bool,
    ) -> Option<&'d Vec<Value>> {
        match doc.get(member) {
            Some(Value::Array(items)) => Some(items),
            Some(other) => {
                let message = format!("`{member}` is an array, not {other}");
                self.error(code, &format!("/{member}"), message, Some(format!("write \"{member}\": [...]")));
                None
            }
            None if required => {
                let message = format!("a rule needs `{member}`, the actions run when every condition holds");
                self.error(
                    "malformed_rule",
                    &format!("/{member}"),
                    message,
                    Some(format!("write \"{member}\": [...]")),
                );
                None
            }
            None => None,
        }
    }

    /// Checks a step `id`: present, unique, without `#` or `/`, not `when`.
    fn id(&mut self, step: &Map<String, Value>, at: &str, code: &str) -> Option<String> {
        let Some(id) = step.get("id").and_then(Value::as_str).filter(|id| !id.is_empty()) else {
            self.error(code, &child(at, "id"), "every condition and action has a string `id`".into(), None);
            return None;
        };
        let here = child(at, "id");
        if id.contains(['#', '/']) {
            let fixed = id.replace(['#', '/'], "-");
            self.error(
                "reserved_character",
                &here,
                format!("step id '{id}' contains '#' or '/'"),
                Some(format!("rename it, e.g. '{fixed}'")),
            );
        }
        if id == BRANCH {
            self.error(
                "duplicate_step_id",
                &here,
                format!("'{BRANCH}' is the id of the rule's branch (the condition check)"),
                Some("choose another id".into()),
            );
        } else if self.ids.iter().any(|seen| seen == id) {
            self.error("duplicate_step_id", &here, format!("step id '{id}' is used twice"), None);
        }
        self.ids.push(id.to_owned());
        Some(id.to_owned())
    }

    fn condition(&mut self, condition: &Value, at: String) -> Option<Condition> {
        let Some(members) = condition.as_object() else {
            self.error(
                "malformed_condition",
                &at,
                "a condition is an object: {id, event, equals}, {id, time} or {id, read, field, equals}".into(),
                None,
            );
            return None;
        };
        let id = self.id(members, &at, "malformed_condition");
        let kinds: Vec<&str> =
            ["event", "time", "read"].into_iter().filter(|kind| members.contains_key(*kind)).collect();
        let allowed: &[&str] = match kinds.as_slice() {
            ["event"] => &["id", "event", "equals"],
            ["time"] => &["id", "time"],
            ["read"] => &["id", "read", "with", "field", "equals"],
            _ => &["id", "event", "time", "read", "with", "field", "equals"],
        };
        self.keys(members, &at, Place::Condition, allowed, "malformed_condition");
        let test = match kinds.as_slice() {
            ["event"] => {
                let pointer = self.pointer(&members["event"], &child(&at, "event"), "event")?;
                Test::Event { pointer, equals: self.equals(members, &at)? }
            }
            ["time"] => Test::Time(self.window(&members["time"], &child(&at, "time"))?),
            ["read"] => {
                let Some(entry) = members["read"].as_str().filter(|e| !e.is_empty()) else {
                    self.error(
                        "malformed_condition",
                        &child(&at, "read"),
                        "`read` is the id of a read-only catalog entry, e.g. \"front_door.state\"".into(),
                        None,
                    );
                    return None;
                };
                let field = match members.get("field") {
                    None => String::new(),
                    Some(field) => self.pointer(field, &child(&at, "field"), "the entry's output")?,
                };
                let with = self.with(members, &at, "malformed_condition")?;
                Test::Read { entry: entry.to_owned(), with, field, equals: self.equals(members, &at)? }
            }
            [] => {
                if !members.keys().any(|key| near_miss(Place::Condition, key).is_some()) {
                    self.error(
                        "malformed_condition",
                        &at,
                        "a condition tests an `event`, a `time` window or a `read` of a sensor".into(),
                        Some("e.g. {\"id\": \"door-opened\", \"event\": \"/state\", \"equals\": \"open\"}".into()),
                    );
                }
                return None;
            }
            _ => {
                self.error(
                    "malformed_condition",
                    &at,
                    format!("a condition tests one thing, not {}", kinds.join(" and ")),
                    Some("split it into one condition per test; all of them must hold".into()),
                );
                return None;
            }
        };
        Some(Condition { id: id?, at, test })
    }

    fn equals(&mut self, members: &Map<String, Value>, at: &str) -> Option<Value> {
        let equals = members.get("equals").cloned();
        if equals.is_none() {
            self.error(
                "malformed_condition",
                &child(at, "equals"),
                "the condition needs `equals`, the JSON value to compare with".into(),
                None,
            );
        }
        equals
    }

    fn pointer(&mut self, pointer: &Value, at: &str, into: &str) -> Option<String> {
        match pointer.as_str() {
            Some(text) if text.is_empty() || text.starts_with('/') => Some(text.to_owned()),
            _ => {
                let suggestion = pointer
                    .as_str()
                    .map(|text| text.trim_start_matches(['$', '.']).trim_start_matches("event."))
                    .map(|text| format!("/{}", text.replace('.', "/")))
                    .unwrap_or_else(|| "/state".into());
                self.error(
                    "malformed_condition",
                    at,
                    format!("a JSON Pointer into {into} starts with `/`, not {pointer}"),
                    Some(format!("e.g. \"{suggestion}\"")),
                );
                None
            }
        }
    }

    fn window(&mut self, window: &Value, at: &str) -> Option<Window> {
        let Some(members) = window.as_object() else {
            self.error(
                "malformed_condition",
                at,
                "`time` is {\"after\": \"HH:MM\", \"before\": \"HH:MM\", \"time_zone\": \"IANA\"}".into(),
                Some("e.g. {\"after\": \"22:00\", \"before\": \"06:00\", \"time_zone\": \"Europe/Paris\"}".into()),
            );
            return None;
        };
        self.keys(members, at, Place::Condition, &["after", "before", "time_zone"], "malformed_condition");
        let mut clock = |edge: &str| match members.get(edge).and_then(Value::as_str).and_then(clock::minutes) {
            Some(minutes) => Some(minutes),
            None => {
                let found = members.get(edge).map_or("nothing".to_owned(), Value::to_string);
                self.error(
                    "bad_time",
                    &child(at, edge),
                    format!("`{edge}` is a 24-hour \"HH:MM\", not {found}"),
                    Some("e.g. \"22:00\" or \"06:30\"".into()),
                );
                None
            }
        };
        let (after, before) = (clock("after"), clock("before"));
        let zone = self.zone(members.get("time_zone"), &child(at, "time_zone"));
        let (after, before, zone) = (after?, before?, zone?);
        if after == before {
            self.error(
                "bad_time",
                at,
                "`after` and `before` are equal: the window would be empty".into(),
                Some("a window runs from `after` (included) to `before` (excluded); drop the condition to allow any time".into()),
            );
            return None;
        }
        Some(Window { after, before, zone })
    }

    fn with(&mut self, members: &Map<String, Value>, at: &str, code: &str) -> Option<Map<String, Value>> {
        match members.get("with") {
            None => Some(Map::new()),
            Some(Value::Object(with)) => Some(with.clone()),
            Some(other) => {
                self.error(code, &child(at, "with"), format!("`with` is an object of arguments, not {other}"), None);
                None
            }
        }
    }

    fn action(&mut self, action: &Value, at: String) -> Option<Action> {
        let Some(members) = action.as_object() else {
            self.error("malformed_action", &at, "an action is {\"id\", \"call\", \"with\"}".into(), None);
            return None;
        };
        // An action holding only a mechanism automation/1 lacks (a `delay`,
        // a trigger) is reported for that, not also for lacking `call` or
        // `id`.
        let near_only = !members.contains_key("call")
            && members.keys().any(|key| key != "id" && near_miss(Place::Action, key).is_some());
        self.keys(members, &at, Place::Action, &["id", "call", "with"], "malformed_action");
        if near_only && !members.contains_key("id") {
            return None;
        }
        let id = self.id(members, &at, "malformed_action");
        let call = match members.get("call").and_then(Value::as_str).filter(|c| !c.is_empty()) {
            Some(call) => Some(call.to_owned()),
            None if near_only => None,
            None => {
                self.error(
                    "malformed_action",
                    &child(&at, "call"),
                    "an action needs `call`, the id of a catalog entry".into(),
                    Some("e.g. {\"id\": \"light-on\", \"call\": \"porch_light.turn_on\", \"with\": {}}".into()),
                );
                None
            }
        };
        let with = self.with(members, &at, "malformed_action");
        Some(Action { id: id?, at, call: call?, with: with? })
    }
}

fn quoted(names: &[&str]) -> String {
    names.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
}

/// A trigger as the rule writes it, for outputs.
pub fn trigger_json(trigger: &Trigger) -> Value {
    match trigger {
        Trigger::Schedule(Schedule { cron, time_zone }) => {
            json!({"schedule": {"cron": cron, "time_zone": time_zone}})
        }
        Trigger::Webhook(source) => json!({"webhook": source}),
        Trigger::Mqtt(MqttSubscription { broker, topic }) => json!({"mqtt": {"broker": broker, "topic": topic}}),
    }
}
