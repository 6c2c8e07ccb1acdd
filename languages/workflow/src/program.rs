//! The workflow/v1 document: parsing a JSON program into steps, with a
//! diagnostic for every malformed part (the parser keeps going, so one
//! validation reports every finding).

use pilotage_guest_sdk::Diagnostic;
use pilotage_guest_sdk::diag::{error_at, with_hint};
use pilotage_guest_sdk::hints::hint;
use pilotage_guest_sdk::pointer::{Path, push_token};
use std::borrow::Cow;
use std::rc::Rc;

use crate::doc::{Doc, get};

use crate::codes;
use crate::expr::{Condition, NULL, ParseProblem, PathExpr, Template, parse_condition, parse_path, parse_template};

/// A parsed workflow document. Names, paths and literals borrow from the
/// decoded document (`'d`), which outlives the program.
#[derive(Clone, Debug, Default)]
pub struct Program<'d> {
    /// The declared input parameters, when the program declares `input`.
    pub input: Option<Vec<InputParam<'d>>>,
    /// Top-level steps.
    pub steps: Vec<Step<'d>>,
    /// The output mapping (member `output` of the document).
    pub output: Option<Template<'d>>,
}

/// One declared input parameter: `"name": "type"` or `"name": "type?"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputParam<'d> {
    /// Member name in `input`.
    pub name: &'d str,
    /// One of [`INPUT_TYPES`].
    pub type_name: &'d str,
    /// False when declared with a trailing `?`.
    pub required: bool,
}

/// The closed set of input parameter types.
pub const INPUT_TYPES: [&str; 7] = ["string", "number", "integer", "boolean", "object", "array", "any"];

/// Where a value sits in the document: the document itself, or a step
/// object (by where its list sits, the member holding the list and its
/// index). Kept as a chain so parsing makes one small node per step; the
/// pointer text is built only for a finding.
#[derive(Debug, PartialEq, Eq)]
pub enum Location {
    /// The whole document.
    Root,
    /// A step object.
    Step {
        /// Where the value holding the step list sits.
        parent: Rc<Location>,
        /// The member holding the list: `steps`, `then`, `else` or `do`.
        list: &'static str,
        /// The step's index in that list.
        index: usize,
    },
}

impl Location {
    /// The pointer path to this value.
    pub fn path(&self) -> Path {
        match self {
            Location::Root => Path::root(),
            Location::Step { parent, list, index } => parent.path().at(list).at(index),
        }
    }

    /// The RFC 6901 pointer text to this value.
    pub fn pointer(&self) -> String {
        let mut text = String::with_capacity(32);
        self.write(&mut text);
        text
    }

    /// The pointer text to member `member` of this value.
    pub fn at(&self, member: &str) -> String {
        let mut text = String::with_capacity(32);
        self.write(&mut text);
        push_token(&mut text, member);
        text
    }

    /// Appends this value's pointer text (list names and indexes need no
    /// escaping).
    fn write(&self, text: &mut String) {
        if let Location::Step { parent, list, index } = self {
            parent.write(text);
            text.push('/');
            text.push_str(list);
            text.push('/');
            text.push_str(&index.to_string());
        }
    }
}

/// One step.
#[derive(Clone, Debug)]
pub struct Step<'d> {
    /// Program step identifier (empty when the step has none).
    pub id: &'d str,
    /// Where the step object sits.
    pub location: Rc<Location>,
    /// What the step does.
    pub kind: StepKind<'d>,
}

/// The closed set of step kinds.
pub const STEP_KINDS: [&str; 4] = ["call", "set", "branch", "for_each"];

/// What a step does.
#[derive(Clone, Debug)]
pub enum StepKind<'d> {
    /// Invoke a callable catalog entry.
    Call {
        /// The entry id (empty when the step names none).
        capability: &'d str,
        /// The argument template (absent means `{}`).
        with: Option<Template<'d>>,
    },
    /// Compute a pure value.
    Set {
        /// The value template.
        value: Template<'d>,
    },
    /// Choose an arm.
    Branch {
        /// The condition.
        condition: Condition<'d>,
        /// Steps run when the condition holds (arm `then`).
        then_steps: Vec<Step<'d>>,
        /// Steps run otherwise (arm `else`).
        else_steps: Vec<Step<'d>>,
    },
    /// Run a body once per element of a list.
    ForEach {
        /// The list.
        over: Option<PathExpr<'d>>,
        /// The loop variable's name (default `item`).
        var: &'d str,
        /// The body.
        body: Vec<Step<'d>>,
        /// Collected per iteration into the loop's output (default: the
        /// element itself).
        collect: Option<Template<'d>>,
    },
}

/// Members each kind accepts, besides `id`, `kind` and `description`.
fn members_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "call" => &["capability", "with"],
        "set" => &["value"],
        "branch" => &["if", "then", "else"],
        "for_each" => &["over", "as", "do", "collect"],
        _ => &[],
    }
}

const COMMON_MEMBERS: [&str; 3] = ["id", "kind", "description"];
const PROGRAM_MEMBERS: [&str; 4] = ["input", "steps", "output", "description"];

/// Reads a program from its decoded document (`Doc::parse` of the
/// program text, or the decoding error). Returns the program and the
/// findings; the program is usable for further checks even with findings.
pub fn parse<'d>(document: Result<&'d Doc<'d>, &serde_json::Error>) -> (Program<'d>, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let value = match document {
        Ok(value) => value,
        Err(error) => {
            diagnostics.push(error_at(codes::MALFORMED_PROGRAM, "", format!("the program is not JSON: {error}")));
            return (Program::default(), diagnostics);
        }
    };
    let Some(map) = value.as_object() else {
        diagnostics.push(error_at(
            codes::MALFORMED_PROGRAM,
            "",
            "a workflow is a JSON object with 'steps' (and optionally 'input' and 'output')",
        ));
        return (Program::default(), diagnostics);
    };
    let root = Rc::new(Location::Root);
    for (key, _) in map {
        if !PROGRAM_MEMBERS.contains(&key.as_ref()) {
            let diagnostic = error_at(
                codes::MALFORMED_PROGRAM,
                root.at(key),
                format!("'{key}' is not a member of a workflow (members: input, steps, output, description)"),
            );
            diagnostics.push(with_hint(diagnostic, hint(key, PROGRAM_MEMBERS)));
        }
    }
    let input = get(map, "input").and_then(|declaration| parse_input(declaration, &mut diagnostics));
    let steps = match get(map, "steps") {
        Some(Doc::Array(items)) => parse_steps(items, &root, "steps", &mut diagnostics),
        Some(_) => {
            diagnostics.push(error_at(codes::MALFORMED_PROGRAM, "/steps", "'steps' must be an array of step objects"));
            Vec::new()
        }
        None => {
            diagnostics.push(error_at(
                codes::MALFORMED_PROGRAM,
                "",
                "a workflow needs 'steps', an array of step objects",
            ));
            Vec::new()
        }
    };
    let output = get(map, "output").map(|value| template(value, &root, "output", &mut diagnostics));
    (Program { input, steps, output }, diagnostics)
}

fn parse_input<'d>(declaration: &'d Doc<'d>, diagnostics: &mut Vec<Diagnostic>) -> Option<Vec<InputParam<'d>>> {
    let path = Path::root().at("input");
    let Some(map) = declaration.as_object() else {
        diagnostics.push(error_at(
            codes::BAD_INPUT_DECLARATION,
            path.pointer(),
            "'input' declares parameters as an object: {\"name\": \"type\"}, with '?' after the type for optional ones",
        ));
        return None;
    };
    let mut params = Vec::with_capacity(map.len());
    for (name, type_value) in map {
        let declared = type_value.as_str().unwrap_or("");
        let (type_name, required) = match declared.strip_suffix('?') {
            Some(base) => (base, false),
            None => (declared, true),
        };
        if !INPUT_TYPES.contains(&type_name) {
            let diagnostic = error_at(
                codes::BAD_INPUT_DECLARATION,
                path.at(name).pointer(),
                format!(
                    "input '{name}' has type {type_value}; types are string, number, integer, boolean, object, array, any (add '?' for optional)"
                ),
            );
            diagnostics.push(with_hint(diagnostic, hint(type_name, INPUT_TYPES)));
            continue;
        }
        params.push(InputParam { name, type_name, required });
    }
    Some(params)
}

/// Parses the template at member `member` of the value at `location`.
fn template<'d>(
    value: &'d Doc<'d>,
    location: &Location,
    member: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Template<'d> {
    let mut problems = Vec::new();
    let parsed = parse_template(value, &mut problems);
    report(problems, location, member, codes::BAD_EXPRESSION, diagnostics);
    parsed
}

/// Reports `problems` found in member `member` of the value at `location`.
fn report(
    problems: Vec<ParseProblem>,
    location: &Location,
    member: &str,
    code: &str,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if problems.is_empty() {
        return;
    }
    let path = location.path().at(member);
    for ParseProblem { at, message } in problems {
        let pointer = at.iter().fold(path.clone(), |path, token| path.at(token)).pointer();
        diagnostics.push(error_at(code, pointer, message));
    }
}

/// The steps of the list at member `list` of the value at `parent`.
fn parse_steps<'d>(
    items: &'d [Doc<'d>],
    parent: &Rc<Location>,
    list: &'static str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Step<'d>> {
    let mut steps = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let location = Rc::new(Location::Step { parent: Rc::clone(parent), list, index });
        steps.extend(parse_step(item, location, diagnostics));
    }
    steps
}

fn string_member<'d>(
    map: &'d [(Cow<'d, str>, Doc<'d>)],
    name: &str,
    location: &Location,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<&'d str> {
    match get(map, name) {
        Some(Doc::String(text)) => Some(text),
        Some(_) => {
            diagnostics.push(error_at(codes::MALFORMED_STEP, location.at(name), format!("'{name}' must be a string")));
            None
        }
        None => {
            diagnostics.push(error_at(codes::MALFORMED_STEP, location.pointer(), format!("the step needs '{name}'")));
            None
        }
    }
}

fn step_list<'d>(
    map: &'d [(Cow<'d, str>, Doc<'d>)],
    name: &'static str,
    required: bool,
    location: &Rc<Location>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Step<'d>> {
    match get(map, name) {
        Some(Doc::Array(items)) => parse_steps(items, location, name, diagnostics),
        Some(_) => {
            diagnostics.push(error_at(
                codes::MALFORMED_STEP,
                location.at(name),
                format!("'{name}' must be an array of steps"),
            ));
            Vec::new()
        }
        None if required => {
            diagnostics.push(error_at(
                codes::MALFORMED_STEP,
                location.pointer(),
                format!("the step needs '{name}', an array of steps"),
            ));
            Vec::new()
        }
        None => Vec::new(),
    }
}

fn parse_step<'d>(value: &'d Doc<'d>, location: Rc<Location>, diagnostics: &mut Vec<Diagnostic>) -> Option<Step<'d>> {
    let path = &*location;
    let Some(map) = value.as_object() else {
        diagnostics.push(error_at(codes::MALFORMED_STEP, path.pointer(), "a step is an object with 'id' and 'kind'"));
        return None;
    };
    let id = string_member(map, "id", path, diagnostics).unwrap_or("");
    let kind_name = string_member(map, "kind", path, diagnostics)?;
    if !STEP_KINDS.contains(&kind_name) {
        let diagnostic = error_at(
            codes::UNKNOWN_KIND,
            path.at("kind"),
            format!("unknown step kind '{kind_name}' (kinds: call, set, branch, for_each)"),
        );
        diagnostics.push(with_hint(diagnostic, hint(kind_name, STEP_KINDS)));
        return None;
    }
    let own = members_of(kind_name);
    for (key, _) in map {
        if !COMMON_MEMBERS.contains(&key.as_ref()) && !own.contains(&key.as_ref()) {
            let allowed: Vec<&str> = COMMON_MEMBERS.iter().chain(own).copied().collect();
            let diagnostic = error_at(
                codes::MALFORMED_STEP,
                path.at(key),
                format!("'{key}' is not a member of a '{kind_name}' step (members: {})", allowed.join(", ")),
            );
            diagnostics.push(with_hint(diagnostic, hint(key, allowed.iter().copied())));
        }
    }
    if get(map, "description").is_some_and(|d| !d.is_string()) {
        diagnostics.push(error_at(codes::MALFORMED_STEP, path.at("description"), "'description' must be a string"));
    }
    let kind = match kind_name {
        "call" => {
            let capability = string_member(map, "capability", path, diagnostics).unwrap_or("");
            let with = match get(map, "with") {
                Some(value @ Doc::Object(_)) => Some(template(value, path, "with", diagnostics)),
                Some(_) => {
                    diagnostics.push(error_at(
                        codes::MALFORMED_STEP,
                        path.at("with"),
                        "'with' must be an object of arguments",
                    ));
                    None
                }
                None => None,
            };
            StepKind::Call { capability, with }
        }
        "set" => match get(map, "value") {
            Some(value) => StepKind::Set { value: template(value, path, "value", diagnostics) },
            None => {
                diagnostics.push(error_at(codes::MALFORMED_STEP, path.pointer(), "the step needs 'value'"));
                StepKind::Set { value: Template::Literal(&NULL) }
            }
        },
        "branch" => {
            let condition = match get(map, "if") {
                Some(value) => {
                    let mut problems = Vec::new();
                    let condition = parse_condition(value, &mut problems);
                    report(problems, path, "if", codes::BAD_CONDITION, diagnostics);
                    condition
                }
                None => {
                    diagnostics.push(error_at(
                        codes::MALFORMED_STEP,
                        path.pointer(),
                        "the step needs 'if', a condition",
                    ));
                    Condition::Constant(false)
                }
            };
            let then_steps = step_list(map, "then", true, &location, diagnostics);
            let else_steps = step_list(map, "else", false, &location, diagnostics);
            StepKind::Branch { condition, then_steps, else_steps }
        }
        _ => {
            let over = match get(map, "over") {
                Some(Doc::String(text)) => match parse_path(text) {
                    Ok(path_expr) => Some(path_expr),
                    Err(message) => {
                        diagnostics.push(error_at(codes::BAD_EXPRESSION, path.at("over"), message));
                        None
                    }
                },
                Some(_) => {
                    diagnostics.push(error_at(
                        codes::BAD_EXPRESSION,
                        path.at("over"),
                        "'over' must be a path expression naming a list, such as '$.steps.orders.output.items'",
                    ));
                    None
                }
                None => {
                    diagnostics.push(error_at(
                        codes::MALFORMED_STEP,
                        path.pointer(),
                        "the step needs 'over', a path expression naming a list",
                    ));
                    None
                }
            };
            let var = match get(map, "as") {
                None => "item",
                Some(Doc::String(name)) if is_variable_name(name) => name,
                Some(other) => {
                    diagnostics.push(error_at(
                        codes::MALFORMED_STEP,
                        path.at("as"),
                        format!("'as' names the loop variable: letters, digits, '_' or '-', not 'input' or 'steps'; found {other}"),
                    ));
                    "item"
                }
            };
            let body = step_list(map, "do", true, &location, diagnostics);
            let collect = get(map, "collect").map(|value| template(value, path, "collect", diagnostics));
            StepKind::ForEach { over, var, body, collect }
        }
    };
    Some(Step { id, location, kind })
}

fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && name != "input"
        && name != "steps"
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Every step, depth first, in document order.
pub fn walk<'p, 'd>(steps: &'p [Step<'d>]) -> Vec<&'p Step<'d>> {
    let mut all = Vec::new();
    fn visit<'p, 'd>(steps: &'p [Step<'d>], all: &mut Vec<&'p Step<'d>>) {
        for step in steps {
            all.push(step);
            match &step.kind {
                StepKind::Branch { then_steps, else_steps, .. } => {
                    visit(then_steps, all);
                    visit(else_steps, all);
                }
                StepKind::ForEach { body, .. } => visit(body, all),
                StepKind::Call { .. } | StepKind::Set { .. } => {}
            }
        }
    }
    visit(steps, &mut all);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes_of(document: &str) -> Vec<(String, String)> {
        let (_, diagnostics) = parse(Doc::parse(document).as_ref());
        diagnostics
            .into_iter()
            .map(|d| {
                let pointer = match d.path {
                    pilotage_guest_sdk::Locator::Pointer(p) => p,
                    pilotage_guest_sdk::Locator::Range(_) => String::new(),
                };
                (d.code, pointer)
            })
            .collect()
    }

    #[test]
    fn the_spec_example_parses_cleanly() {
        let doc = Doc::parse(
            r#"{"steps":[{"id":"profile","kind":"call","capability":"cap_read_user_profile","with":{"user_id":"$.input.userId"}}],
                "output":{"name":"$.steps.profile.output.name"}}"#,
        );
        let (program, diagnostics) = parse(doc.as_ref());
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(program.steps.len(), 1);
        assert!(program.output.is_some());
    }

    #[test]
    fn structural_faults_are_located() {
        assert_eq!(codes_of("[1]"), vec![("malformed_program".into(), "".into())]);
        assert_eq!(codes_of("{\"steps\": 3}"), vec![("malformed_program".into(), "/steps".into())]);
        assert_eq!(codes_of("not json"), vec![("malformed_program".into(), "".into())]);
        assert_eq!(
            codes_of(r#"{"steps":[{"id":"a","kind":"call","capabilty":"x"}]}"#),
            vec![("malformed_step".into(), "/steps/0/capabilty".into()), ("malformed_step".into(), "/steps/0".into())]
        );
        assert_eq!(
            codes_of(r#"{"steps":[{"id":"a","kind":"loop"}]}"#),
            vec![("unknown_kind".into(), "/steps/0/kind".into())]
        );
        // Member names are escaped per RFC 6901 in pointers.
        assert_eq!(
            codes_of(r#"{"steps":[{"id":"a","kind":"set","value":1,"a/b~":2}]}"#),
            vec![("malformed_step".into(), "/steps/0/a~1b~0".into())]
        );
    }

    #[test]
    fn nested_problems_point_into_arms_and_bodies() {
        let found = codes_of(
            r#"{"steps":[{"id":"b","kind":"branch","if":{"eq":[1]},"then":[{"id":"s","kind":"set","value":"$.steps.x"}]}]}"#,
        );
        assert_eq!(
            found,
            vec![
                ("bad_condition".into(), "/steps/0/if/eq".into()),
                ("bad_expression".into(), "/steps/0/then/0/value".into())
            ]
        );
    }

    #[test]
    fn input_declarations_are_checked() {
        let doc = Doc::parse(r#"{"input":{"userId":"string","limit":"integer?","bad":"str"},"steps":[]}"#);
        let (program, diagnostics) = parse(doc.as_ref());
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].code, "bad_input_declaration");
        assert_eq!(diagnostics[0].hint.as_deref(), Some("close match: string"));
        let params = program.input.unwrap();
        assert_eq!(params.len(), 2);
        assert!(!params.iter().find(|p| p.name == "limit").unwrap().required);
    }
}
