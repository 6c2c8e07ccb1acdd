//! A binding: what the engine-neutral placeholders of the conformance
//! vectors (`<valid-program>`, `<branching-program>`, …) mean for one
//! Language of one server, and the good and bad case of every closed-set
//! member (Part IV §4.2). Bindings are JSON files; a `{"$repeat": …}` object
//! stands for a long generated string (see [`Binding::from_file`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// A program with the input it runs with.
#[derive(Clone, Debug, Deserialize)]
pub struct Sample {
    /// The program (the value of the Language's program argument).
    pub program: Value,
    /// Its input.
    #[serde(default)]
    pub input: Option<Value>,
}

/// The expected branch decision of the branching sample.
#[derive(Clone, Debug, Deserialize)]
pub struct ExpectedDecision {
    /// The branch's step id.
    pub at: String,
    /// The arm label taken.
    pub took: String,
}

/// How to promote a program on this server (promotion is engine-specific).
#[derive(Clone, Debug, Deserialize)]
pub struct Promotion {
    /// The promote tool.
    pub tool: String,
    /// Its arguments; the result must carry `program_ref`.
    pub arguments: Value,
    /// Input that satisfies the promoted entry's `input_schema`.
    pub input: Value,
    /// Input that violates it.
    pub bad_input: Value,
    /// An entry the body references, whose load-bearing field the operator
    /// changes to cause `promotion_drift`.
    pub referenced_entry: String,
}

/// One side of a closed-set case: a request and what it must produce.
#[derive(Clone, Debug, Deserialize)]
pub struct Case {
    /// The tool to call; defaults to the Language's validate tool for
    /// diagnostic codes and its execute tool for statuses.
    #[serde(default)]
    pub tool: Option<String>,
    /// The full arguments, when not just a program.
    #[serde(default)]
    pub arguments: Option<Value>,
    /// The program (put under the Language's program argument).
    #[serde(default)]
    pub program: Option<Value>,
    /// The input, for execute.
    #[serde(default)]
    pub input: Option<Value>,
    /// An operator action to perform first (`stale_catalog`,
    /// `change_load_bearing:<entry id>` after promoting).
    #[serde(default)]
    pub setup: Option<String>,
}

/// The good and bad case of one closed-set member, or why it cannot be
/// reached through this server.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum MemberCases {
    /// Both polarities.
    Cases {
        /// A request that must produce the member.
        bad: Box<Case>,
        /// A corrected request that must not.
        good: Box<Case>,
    },
    /// Not reachable, and why.
    Unreachable {
        /// The reason.
        unreachable: String,
    },
}

/// Cases of every closed-set member.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ClosedSetCases {
    /// Diagnostic code → cases.
    #[serde(default)]
    pub diagnostic_codes: BTreeMap<String, MemberCases>,
    /// Run status → cases.
    #[serde(default)]
    pub run_statuses: BTreeMap<String, MemberCases>,
    /// Request-error kind → cases.
    #[serde(default)]
    pub request_errors: BTreeMap<String, MemberCases>,
}

/// A binding for one Language.
#[derive(Clone, Debug, Deserialize)]
pub struct Binding {
    /// The Language.
    pub language: String,
    /// Members added to every execute request the runner sends (an
    /// object), e.g. `{"mode": "immediate"}` for a Language whose
    /// `execution` is `both`, where `mode` is required (Part III §4.4).
    /// A closed-set case's own `arguments` win over them;
    /// PIL-EXECUTE-MODE-MISSING-B sends the valid sample without `mode`.
    #[serde(default)]
    pub execute_arguments: Option<Value>,
    /// A program valid at the current catalog, with its input.
    pub valid: Sample,
    /// An invalid program.
    pub invalid: Sample,
    /// A program naming something the catalog does not have.
    pub unknown_name: Sample,
    /// A program with warnings only.
    pub warnings_only: Sample,
    /// A program whose step id has a reserved character (structured
    /// Languages); absent when the grammar has no step ids.
    #[serde(default)]
    pub reserved_character: Option<Sample>,
    /// A branching program and the decision it must record; absent when
    /// the grammar has no branches (PIL-TRACE-BRANCH-DECISION-G is then
    /// listed in `unreachable`).
    #[serde(default)]
    pub branching: Option<Sample>,
    /// The expected decision.
    #[serde(default)]
    pub branch: Option<ExpectedDecision>,
    /// A program whose loop runs zero times; absent when the grammar has
    /// no loops.
    #[serde(default)]
    pub zero_iteration_loop: Option<Sample>,
    /// The loop's step id.
    #[serde(default)]
    pub loop_step: Option<String>,
    /// A program whose second step fails deterministically.
    pub mid_run_failure: Sample,
    /// A program that fails cleanly with the reserved `error` status;
    /// absent when every clean failure the endpoint can cause has a more
    /// specific status (PIL-EXECUTE-ENGINE-ERROR-B is then listed in
    /// `unreachable`, with the reason).
    #[serde(default)]
    pub clean_failure: Option<Sample>,
    /// A program exceeding a validation bound.
    pub pathological: Sample,
    /// A program whose validation crashes the validator (test builds).
    #[serde(default)]
    pub internal_fault: Option<Sample>,
    /// How to promote, when promoted programs exist.
    #[serde(default)]
    pub promotion: Option<Promotion>,
    /// An entry that exists but the caller cannot see.
    #[serde(default)]
    pub invisible_entry: Option<String>,
    /// A program naming a near miss of the invisible entry, whose
    /// diagnostics must not name it (Part II §6.3 authorization scope,
    /// §10.3). Without it, the runner derives one from `unknown_name` by
    /// replacing its first quoted name, which only works for structured
    /// programs.
    #[serde(default)]
    pub invisible_probe: Option<Sample>,
    /// A visible entry whose description the operator may change.
    #[serde(default)]
    pub changeable_entry: Option<String>,
    /// Vectors that cannot be reached for this Language, with the reason.
    #[serde(default)]
    pub unreachable: BTreeMap<String, String>,
    /// The completeness gate's cases.
    #[serde(default)]
    pub closed_sets: ClosedSetCases,
    /// Remarks for readers of the binding (why a sample was chosen, what
    /// an operator must set up); the runner does not read them.
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
}

impl Binding {
    /// Reads a binding file.
    ///
    /// # Errors
    /// [`BindingError::Read`] when the file cannot be read,
    /// [`BindingError::Json`] when it is not JSON,
    /// [`BindingError::Repeat`] for a malformed `$repeat`, and
    /// [`BindingError::Shape`] when it is not a binding; each names the
    /// file and the problem.
    pub fn from_file(path: &Path) -> Result<Binding, BindingError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| BindingError::Read { path: path.to_owned(), source })?;
        let mut value: Value =
            serde_json::from_str(&text).map_err(|source| BindingError::Json { path: path.to_owned(), source })?;
        expand_repeats(&mut value).map_err(|source| BindingError::Repeat { path: path.to_owned(), source })?;
        serde_json::from_value(value).map_err(|source| BindingError::Shape { path: path.to_owned(), source })
    }
}

/// Why a binding file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BindingError {
    /// Occurs when the file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Occurs when the file is not JSON.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Where the JSON breaks.
        source: serde_json::Error,
    },
    /// Occurs when a `{"$repeat": …}` object of the file is malformed.
    #[error("{path}: {source}")]
    Repeat {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: RepeatError,
    },
    /// Occurs when the file is JSON but not a binding (a member missing or
    /// of the wrong type).
    #[error("{path}: {source}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// The member and the problem.
        source: serde_json::Error,
    },
}

/// What is wrong with a `{"$repeat": …}` object of a binding (see
/// [`Binding::from_file`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RepeatError {
    /// Occurs when `head`, `unit` or `tail` is missing or not a string.
    #[error("$repeat needs a string '{member}'")]
    NotAString {
        /// The member.
        member: &'static str,
    },
    /// Occurs when `times` is missing or not a non-negative integer.
    #[error("$repeat needs an integer 'times'")]
    NoTimes,
    /// Occurs when the object has members beside `$repeat`.
    #[error("$repeat stands alone and builds at most {MAX_REPEAT_BYTES} bytes")]
    NotAlone,
    /// Occurs when the text would be longer than 8 MiB.
    #[error("$repeat stands alone and builds at most {MAX_REPEAT_BYTES} bytes")]
    TooLarge {
        /// How many bytes it would build.
        bytes: u64,
    },
    /// Occurs when `json` is `true` and the built text is not JSON.
    #[error("$repeat with json builds no JSON: {source}")]
    NotJson {
        /// Where the JSON breaks.
        source: serde_json::Error,
    },
    /// Occurs when `json` is given and is not a boolean.
    #[error("$repeat's 'json' is a boolean")]
    JsonNotBoolean,
}

/// The largest text a `$repeat` may build, in bytes (a pathological
/// program need only pass the 1 MiB program bound a little).
const MAX_REPEAT_BYTES: usize = 8 << 20;

/// Replaces every `{"$repeat": {"head": H, "unit": U, "times": N, "tail": T}}`
/// in a binding with the string `H + U×N + T`, so a binding can name a
/// program too large to write out (a sample over a size or memory bound)
/// in a few bytes. With `"json": true` the built text is parsed, so the
/// sample is that JSON value (a long program of a JSON Language).
///
/// # Errors
/// A [`RepeatError`] when a `$repeat` lacks a member, has one of the wrong
/// type, does not stand alone, would build more than 8 MiB, or builds text
/// that is not JSON under `"json": true`.
fn expand_repeats(value: &mut Value) -> Result<(), RepeatError> {
    match value {
        Value::Object(object) => {
            if let Some(spec) = object.get("$repeat") {
                let text = |member: &'static str| {
                    spec.get(member).and_then(Value::as_str).ok_or(RepeatError::NotAString { member })
                };
                let (head, unit, tail) = (text("head")?, text("unit")?, text("tail")?);
                let times = spec.get("times").and_then(Value::as_u64).ok_or(RepeatError::NoTimes)?;
                let bytes = (unit.len() as u64).saturating_mul(times).saturating_add((head.len() + tail.len()) as u64);
                if object.len() != 1 {
                    return Err(RepeatError::NotAlone);
                }
                if bytes > MAX_REPEAT_BYTES as u64 {
                    return Err(RepeatError::TooLarge { bytes });
                }
                let built = format!("{head}{}{tail}", unit.repeat(times as usize));
                *value = match spec.get("json") {
                    Some(Value::Bool(true)) => {
                        serde_json::from_str(&built).map_err(|source| RepeatError::NotJson { source })?
                    }
                    None | Some(Value::Bool(false)) => Value::String(built),
                    Some(_) => return Err(RepeatError::JsonNotBoolean),
                };
                return Ok(());
            }
            object.values_mut().try_for_each(expand_repeats)
        }
        Value::Array(items) => items.iter_mut().try_for_each(expand_repeats),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn repeats_expand_and_bad_ones_are_named() {
        let mut value = json!({"a": [{"$repeat": {"head": "(", "unit": "1,", "times": 3, "tail": "1)"}}], "b": "x"});
        expand_repeats(&mut value).unwrap();
        assert_eq!(value, json!({"a": ["(1,1,1,1)"], "b": "x"}));
        let mut value = json!({"$repeat": {"head": "[", "unit": "1,", "times": 2, "tail": "3]", "json": true}});
        expand_repeats(&mut value).unwrap();
        assert_eq!(value, json!([1, 1, 3]));
        for (bad, message) in [
            (
                json!({"$repeat": {"head": "[", "unit": "1,", "times": 2, "tail": "", "json": true}}),
                "$repeat with json builds no JSON: EOF while parsing",
            ),
            (
                json!({"$repeat": {"head": "", "unit": "1", "times": 2, "tail": "", "json": "yes"}}),
                "$repeat's 'json' is a boolean",
            ),
            (json!({"$repeat": {"head": "", "unit": "x", "tail": ""}}), "$repeat needs an integer 'times'"),
            (json!({"$repeat": {"head": "", "unit": 1, "times": 1, "tail": ""}}), "$repeat needs a string 'unit'"),
            (
                json!({"$repeat": {"head": "", "unit": "xx", "times": 8 << 20, "tail": ""}}),
                "$repeat stands alone and builds at most 8388608 bytes",
            ),
            (
                json!({"$repeat": {"head": "", "unit": "x", "times": 1, "tail": ""}, "other": 1}),
                "$repeat stands alone and builds at most 8388608 bytes",
            ),
        ] {
            let mut value = bad.clone();
            let error = expand_repeats(&mut value).expect_err(&bad.to_string());
            // serde_json words the parse error; the prefix is ours.
            assert!(error.to_string().starts_with(message), "{bad}: {error}");
        }
    }

    #[test]
    fn binding_file_errors_name_the_file() {
        let missing = std::path::Path::new("/nonexistent/binding.json");
        let error = Binding::from_file(missing).unwrap_err();
        assert!(matches!(error, BindingError::Read { .. }));
        assert!(error.to_string().starts_with("cannot read /nonexistent/binding.json: "), "{error}");
    }
}
