//! Path expressions, value templates and conditions of workflow/v1: their
//! parsing (with diagnostics) and their evaluation.
//!
//! A path expression is a string starting with `$.`:
//! `$.input.userId`, `$.steps.profile.output.name`, `$.item.id`,
//! `$.steps.list.output.items[0]`. A template is any JSON value in which
//! every string starting with `$.` is a path expression; `{"$literal": v}`
//! stands for `v` unevaluated. A condition is `true`/`false`, a comparison
//! `{"eq"|"ne"|"lt"|"le"|"gt"|"ge": [a, b]}`, `{"and": [..]}`,
//! `{"or": [..]}`, `{"not": c}` or `{"exists": "$.path"}`.

//! Parsed forms borrow their names and literals from the program document
//! (`'d`): a validation parses every program once inside a fresh component
//! instance, and copying each name was a large share of its cost.

use serde_json::Value;

use std::borrow::Cow;

use crate::doc::Doc;

/// Where a path expression starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root<'d> {
    /// `$.input`
    Input,
    /// `$.steps.<id>.output`
    Step(&'d str),
    /// `$.<name>`: a loop variable.
    Var(&'d str),
}

/// One member access after the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment<'d> {
    /// `.name`
    Field(&'d str),
    /// `[n]`
    Index(usize),
}

/// A parsed path expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathExpr<'d> {
    /// The root.
    pub root: Root<'d>,
    /// Accesses after the root (after `.output` for step roots).
    pub segments: Vec<Segment<'d>>,
    /// The source text.
    pub text: &'d str,
}

/// The literal `null`, for templates that stand in for a malformed part.
pub static NULL: Doc<'static> = Doc::Null;

/// A value template.
#[derive(Clone, Debug, PartialEq)]
pub enum Template<'d> {
    /// A literal JSON value, as written in the document.
    Literal(&'d Doc<'d>),
    /// A path expression.
    Path(PathExpr<'d>),
    /// An object whose members are templates.
    Object(Vec<(&'d str, Template<'d>)>),
    /// An array of templates.
    Array(Vec<Template<'d>>),
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// equal
    Eq,
    /// not equal
    Ne,
    /// less than
    Lt,
    /// less than or equal
    Le,
    /// greater than
    Gt,
    /// greater than or equal
    Ge,
}

impl CompareOp {
    /// Every operator with its JSON name.
    pub const ALL: [(&'static str, CompareOp); 6] = [
        ("eq", CompareOp::Eq),
        ("ne", CompareOp::Ne),
        ("lt", CompareOp::Lt),
        ("le", CompareOp::Le),
        ("gt", CompareOp::Gt),
        ("ge", CompareOp::Ge),
    ];

    fn name(self) -> &'static str {
        CompareOp::ALL.iter().find(|(_, op)| *op == self).map_or("?", |(name, _)| name)
    }
}

/// A condition.
#[derive(Clone, Debug, PartialEq)]
pub enum Condition<'d> {
    /// `true` / `false`
    Constant(bool),
    /// `{"eq": [a, b]}` and friends.
    Compare(CompareOp, Template<'d>, Template<'d>),
    /// `{"and": [..]}`
    And(Vec<Condition<'d>>),
    /// `{"or": [..]}`
    Or(Vec<Condition<'d>>),
    /// `{"not": c}`
    Not(Box<Condition<'d>>),
    /// `{"exists": "$.path"}`: the path resolves to a non-null value.
    Exists(PathExpr<'d>),
}

/// A problem found while parsing, with the JSON Pointer suffix (relative
/// to the parsed value) where it lies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseProblem {
    /// Tokens from the parsed value to the offending member.
    pub at: Vec<String>,
    /// What is wrong.
    pub message: String,
}

/// The tokens from a parsed value to a member; member names borrow from
/// the document, so walking a valid program allocates nothing for them.
type At<'d> = Vec<Cow<'d, str>>;

fn problem(at: &At<'_>, message: impl Into<String>) -> ParseProblem {
    ParseProblem { at: at.iter().map(|token| token.to_string()).collect(), message: message.into() }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Parses a path expression (`$.` followed by segments).
pub fn parse_path(text: &str) -> Result<PathExpr<'_>, String> {
    let Some(rest) = text.strip_prefix("$.") else {
        return Err(format!("'{text}' is not a path expression: it must start with '$.'"));
    };
    // Scanned bytewise over borrowed slices (names are ASCII) into the one
    // vector the expression keeps; the root's segments are removed after.
    let bytes = rest.as_bytes();
    let name_end = |from: usize| from + bytes[from..].iter().take_while(|b| is_name_byte(**b)).count();
    let mut scanned = Vec::with_capacity(6);
    let mut at = 0;
    while at < bytes.len() {
        let first = at == 0;
        match bytes[at] {
            b'.' if !first => {
                let end = name_end(at + 1);
                if end == at + 1 {
                    return Err(format!("'{text}': empty member name after '.'"));
                }
                scanned.push(Segment::Field(&rest[at + 1..end]));
                at = end;
            }
            b'[' => {
                let Some(close) = rest[at + 1..].find(']') else {
                    return Err(format!("'{text}': '[' without a closing ']'"));
                };
                let digits = &rest[at + 1..at + 1 + close];
                let index =
                    digits.parse::<usize>().map_err(|_| format!("'{text}': '[{digits}]' is not an array index"))?;
                scanned.push(Segment::Index(index));
                at += close + 2;
            }
            byte if first && is_name_byte(byte) => {
                let end = name_end(at);
                scanned.push(Segment::Field(&rest[at..end]));
                at = end;
            }
            _ => {
                let c = rest[at..].chars().next().unwrap_or('?');
                return Err(format!("'{text}': unexpected character '{c}'"));
            }
        }
    }
    let (root, root_segments) = match scanned.as_slice() {
        [Segment::Field("input"), ..] => (Root::Input, 1),
        [Segment::Field("steps"), Segment::Field(id), Segment::Field("output"), ..] => (Root::Step(id), 3),
        [Segment::Field("steps"), Segment::Field(id), ..] => {
            return Err(format!("'{text}': a step is read through '.output', as in '$.steps.{id}.output'"));
        }
        [Segment::Field("steps"), ..] => return Err(format!("'{text}': expected '$.steps.<step id>.output'")),
        [Segment::Field(name), ..] => (Root::Var(name), 1),
        _ => return Err(format!("'{text}': expected '$.input', '$.steps.<id>.output' or a loop variable")),
    };
    let mut segments = scanned;
    segments.drain(..root_segments);
    Ok(PathExpr { root, segments, text })
}

/// Parses a template, collecting every malformed path expression.
pub fn parse_template<'d>(value: &'d Doc<'d>, problems: &mut Vec<ParseProblem>) -> Template<'d> {
    parse_template_at(value, &mut Vec::new(), problems)
}

fn parse_template_at<'d>(value: &'d Doc<'d>, at: &mut At<'d>, problems: &mut Vec<ParseProblem>) -> Template<'d> {
    match value {
        Doc::String(text) if text.starts_with("$.") || text == "$" => match parse_path(text) {
            Ok(path) => Template::Path(path),
            Err(message) => {
                problems.push(problem(at, message));
                Template::Literal(&NULL)
            }
        },
        Doc::Object(map) if map.len() == 1 && map[0].0 == "$literal" => Template::Literal(&map[0].1),
        Doc::Object(map) => Template::Object(
            map.iter()
                .map(|(key, member)| {
                    at.push(Cow::Borrowed(key));
                    let template = parse_template_at(member, at, problems);
                    at.pop();
                    (key.as_ref(), template)
                })
                .collect(),
        ),
        Doc::Array(items) => Template::Array(
            items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    at.push(Cow::Owned(index.to_string()));
                    let template = parse_template_at(item, at, problems);
                    at.pop();
                    template
                })
                .collect(),
        ),
        other => Template::Literal(other),
    }
}

/// The closed set of condition operators, for hints.
pub const CONDITION_OPERATORS: [&str; 10] = ["eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "exists"];

/// Parses a condition, collecting every problem.
pub fn parse_condition<'d>(value: &'d Doc<'d>, problems: &mut Vec<ParseProblem>) -> Condition<'d> {
    parse_condition_at(value, &mut Vec::new(), problems)
}

fn parse_condition_at<'d>(value: &'d Doc<'d>, at: &mut At<'d>, problems: &mut Vec<ParseProblem>) -> Condition<'d> {
    let fallback = Condition::Constant(false);
    let map = match value {
        Doc::Bool(b) => return Condition::Constant(*b),
        Doc::Object(map) if map.len() == 1 => map,
        _ => {
            problems.push(problem(
                at,
                "a condition is true, false, or an object with exactly one operator: eq, ne, lt, le, gt, ge, and, or, not, exists",
            ));
            return fallback;
        }
    };
    let Some((operator, operand)) = map.iter().next() else { return fallback };
    at.push(Cow::Borrowed(operator));
    let condition = if let Some((_, op)) = CompareOp::ALL.iter().find(|(name, _)| name == operator) {
        match operand.as_array() {
            Some([left, right]) => {
                at.push(Cow::Borrowed("0"));
                let left = parse_template_at(left, at, problems);
                at.pop();
                at.push(Cow::Borrowed("1"));
                let right = parse_template_at(right, at, problems);
                at.pop();
                Condition::Compare(*op, left, right)
            }
            _ => {
                problems.push(problem(at, format!("'{operator}' takes an array of exactly two operands")));
                fallback
            }
        }
    } else {
        match operator.as_ref() {
            "and" | "or" => match operand.as_array() {
                Some(items) if !items.is_empty() => {
                    let parts = items
                        .iter()
                        .enumerate()
                        .map(|(index, item)| {
                            at.push(Cow::Owned(index.to_string()));
                            let part = parse_condition_at(item, at, problems);
                            at.pop();
                            part
                        })
                        .collect();
                    if operator == "and" { Condition::And(parts) } else { Condition::Or(parts) }
                }
                _ => {
                    problems.push(problem(at, format!("'{operator}' takes a non-empty array of conditions")));
                    fallback
                }
            },
            "not" => Condition::Not(Box::new(parse_condition_at(operand, at, problems))),
            "exists" => match operand.as_str().map(parse_path) {
                Some(Ok(path)) => Condition::Exists(path),
                Some(Err(message)) => {
                    problems.push(problem(at, message));
                    fallback
                }
                None => {
                    problems.push(problem(at, "'exists' takes one path expression string"));
                    fallback
                }
            },
            unknown => {
                let hint = pilotage_guest_sdk::hints::hint(unknown, CONDITION_OPERATORS);
                let mut message = format!("unknown condition operator '{unknown}'");
                if let Some(hint) = hint {
                    message.push_str(&format!(" ({hint})"));
                }
                problems.push(problem(at, message));
                fallback
            }
        }
    };
    at.pop();
    condition
}

/// Every path expression in a template, in document order.
pub fn template_paths<'t, 'd>(template: &'t Template<'d>) -> Vec<&'t PathExpr<'d>> {
    let mut paths = Vec::new();
    collect_template_paths(template, &mut paths);
    paths
}

fn collect_template_paths<'t, 'd>(template: &'t Template<'d>, paths: &mut Vec<&'t PathExpr<'d>>) {
    match template {
        Template::Literal(_) => {}
        Template::Path(path) => paths.push(path),
        Template::Object(members) => members.iter().for_each(|(_, member)| collect_template_paths(member, paths)),
        Template::Array(items) => items.iter().for_each(|item| collect_template_paths(item, paths)),
    }
}

/// Every path expression in a condition, in document order.
pub fn condition_paths<'c, 'd>(condition: &'c Condition<'d>) -> Vec<&'c PathExpr<'d>> {
    let mut paths = Vec::new();
    collect_condition_paths(condition, &mut paths);
    paths
}

fn collect_condition_paths<'c, 'd>(condition: &'c Condition<'d>, paths: &mut Vec<&'c PathExpr<'d>>) {
    match condition {
        Condition::Constant(_) => {}
        Condition::Compare(_, left, right) => {
            collect_template_paths(left, paths);
            collect_template_paths(right, paths);
        }
        Condition::And(parts) | Condition::Or(parts) => {
            parts.iter().for_each(|part| collect_condition_paths(part, paths))
        }
        Condition::Not(inner) => collect_condition_paths(inner, paths),
        Condition::Exists(path) => paths.push(path),
    }
}

/// What a path's root is bound to at run time.
pub trait Scope {
    /// The value of a root, or `None` when it is not bound.
    fn root(&self, root: Root<'_>) -> Option<&Value>;
}

/// Resolves a path; `None` when any access finds nothing.
pub fn resolve<'v>(path: &PathExpr, scope: &'v dyn Scope) -> Option<&'v Value> {
    let mut value = scope.root(path.root)?;
    for segment in &path.segments {
        value = match segment {
            Segment::Field(name) => value.as_object()?.get(*name)?,
            Segment::Index(index) => value.as_array()?.get(*index)?,
        };
    }
    Some(value)
}

/// Evaluates a template.
///
/// # Errors
/// A message naming the first path that resolves to nothing.
pub fn evaluate(template: &Template, scope: &dyn Scope) -> Result<Value, String> {
    Ok(match template {
        Template::Literal(value) => value.to_value(),
        Template::Path(path) => {
            resolve(path, scope).cloned().ok_or_else(|| format!("{} resolved to nothing", path.text))?
        }
        Template::Object(members) => Value::Object(
            members
                .iter()
                .map(|(key, member)| Ok(((*key).to_owned(), evaluate(member, scope)?)))
                .collect::<Result<_, String>>()?,
        ),
        Template::Array(items) => {
            Value::Array(items.iter().map(|item| evaluate(item, scope)).collect::<Result<_, _>>()?)
        }
    })
}

/// Evaluates a condition to its truth value and the evaluated reason
/// recorded in the decision's `because`.
///
/// # Errors
/// A message when an operand resolves to nothing or an ordering compares
/// values that are not both numbers or both strings.
pub fn decide(condition: &Condition, scope: &dyn Scope) -> Result<(bool, String), String> {
    match condition {
        Condition::Constant(b) => Ok((*b, format!("constant {b}"))),
        Condition::Exists(path) => {
            let found = resolve(path, scope).is_some_and(|v| !v.is_null());
            Ok((found, format!("{} {}", path.text, if found { "exists" } else { "does not exist" })))
        }
        Condition::Not(inner) => {
            let (truth, because) = decide(inner, scope)?;
            Ok((!truth, format!("not ({because})")))
        }
        Condition::And(parts) | Condition::Or(parts) => {
            let is_and = matches!(condition, Condition::And(_));
            let mut reasons = Vec::new();
            for part in parts {
                let (truth, because) = decide(part, scope)?;
                reasons.push(because);
                // Short-circuit: the deciding part ends the evaluation.
                if truth != is_and {
                    return Ok((truth, reasons.join(if is_and { " and " } else { " or " })));
                }
            }
            Ok((is_and, reasons.join(if is_and { " and " } else { " or " })))
        }
        Condition::Compare(op, left, right) => {
            let a = evaluate(left, scope)?;
            let b = evaluate(right, scope)?;
            let truth = compare(*op, &a, &b)?;
            Ok((truth, format!("{} {} {} is {truth}", describe(left, &a), op.name(), describe(right, &b))))
        }
    }
}

fn describe(template: &Template, value: &Value) -> String {
    let mut shown = value.to_string();
    if shown.len() > 80 {
        shown = format!("{}…", shown.chars().take(77).collect::<String>());
    }
    match template {
        Template::Path(path) => format!("{} ({shown})", path.text),
        _ => shown,
    }
}

fn compare(op: CompareOp, a: &Value, b: &Value) -> Result<bool, String> {
    if matches!(op, CompareOp::Eq | CompareOp::Ne) {
        let equal = match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
            _ => a == b,
        };
        return Ok(if op == CompareOp::Eq { equal } else { !equal });
    }
    let ordering = match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64().partial_cmp(&y.as_f64()),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
    .ok_or_else(|| format!("'{}' compares {a} with {b}: both must be numbers or both strings", op.name()))?;
    Ok(match op {
        CompareOp::Lt => ordering.is_lt(),
        CompareOp::Le => ordering.is_le(),
        CompareOp::Gt => ordering.is_gt(),
        CompareOp::Ge => ordering.is_ge(),
        CompareOp::Eq | CompareOp::Ne => unreachable!("handled above"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // The parsers read a program document; these tests write JSON values.
    // The parsed forms borrow the document; a test's documents live as
    // long as the test.
    fn parse_template(value: &Value, problems: &mut Vec<ParseProblem>) -> Template<'static> {
        super::parse_template(Box::leak(Box::new(crate::doc::from_value(value))), problems)
    }

    fn parse_condition(value: &Value, problems: &mut Vec<ParseProblem>) -> Condition<'static> {
        super::parse_condition(Box::leak(Box::new(crate::doc::from_value(value))), problems)
    }

    struct Fixed(Value, Value);
    impl Scope for Fixed {
        fn root(&self, root: Root<'_>) -> Option<&Value> {
            match root {
                Root::Input => Some(&self.0),
                Root::Step("profile") => Some(&self.1),
                _ => None,
            }
        }
    }

    #[test]
    fn parses_every_root_and_segment() {
        let path = parse_path("$.steps.profile.output.addresses[1].city").unwrap();
        assert_eq!(path.root, Root::Step("profile"));
        assert_eq!(path.segments, vec![Segment::Field("addresses"), Segment::Index(1), Segment::Field("city")]);
        assert_eq!(parse_path("$.input.userId").unwrap().root, Root::Input);
        assert_eq!(parse_path("$.item").unwrap().root, Root::Var("item"));
    }

    #[test]
    fn rejects_malformed_paths() {
        for bad in [
            "$.",
            "$.steps.profile",
            "$.steps.profile.result",
            "$.input..x",
            "$.input[x]",
            "$.input[1",
            "input.x",
            "$.a b",
        ] {
            assert!(parse_path(bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn templates_evaluate_recursively() {
        let mut problems = Vec::new();
        let template = parse_template(
            &json!({"id": "$.input.userId", "tags": ["x", "$.steps.profile.output.tier"], "raw": {"$literal": "$.input"}}),
            &mut problems,
        );
        assert!(problems.is_empty());
        let scope = Fixed(json!({"userId": "42"}), json!({"tier": "gold"}));
        assert_eq!(evaluate(&template, &scope).unwrap(), json!({"id": "42", "tags": ["x", "gold"], "raw": "$.input"}));
        let missing = parse_template(&json!("$.input.nope"), &mut problems);
        assert_eq!(evaluate(&missing, &scope).unwrap_err(), "$.input.nope resolved to nothing");
    }

    #[test]
    fn malformed_template_paths_are_reported_with_their_place() {
        let mut problems = Vec::new();
        parse_template(&json!({"a": ["ok", "$.steps.x"]}), &mut problems);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].at, vec!["a", "1"]);
    }

    #[test]
    fn conditions_decide_with_reasons() {
        let mut problems = Vec::new();
        let condition = parse_condition(
            &json!({"and": [{"eq": ["$.steps.profile.output.tier", "gold"]}, {"exists": "$.input.userId"}]}),
            &mut problems,
        );
        assert!(problems.is_empty());
        let scope = Fixed(json!({"userId": "42"}), json!({"tier": "gold"}));
        let (truth, because) = decide(&condition, &scope).unwrap();
        assert!(truth);
        assert!(because.contains("$.steps.profile.output.tier (\"gold\") eq \"gold\" is true"), "{because}");
        let ordered = parse_condition(&json!({"gt": [3, 2]}), &mut problems);
        assert!(decide(&ordered, &scope).unwrap().0);
        let mixed = parse_condition(&json!({"lt": [3, "2"]}), &mut problems);
        assert!(decide(&mixed, &scope).is_err());
    }

    #[test]
    fn malformed_conditions_are_reported() {
        for bad in [
            json!({"equals": [1, 1]}),
            json!({"eq": [1]}),
            json!({"and": []}),
            json!(3),
            json!({"eq": [1, 1], "ne": [1, 2]}),
            json!({"exists": 5}),
        ] {
            let mut problems = Vec::new();
            parse_condition(&bad, &mut problems);
            assert_eq!(problems.len(), 1, "{bad}");
        }
        let mut problems = Vec::new();
        parse_condition(&json!({"equ": [1, 1]}), &mut problems);
        assert!(problems[0].message.contains("close match: eq"), "{}", problems[0].message);
    }
}
