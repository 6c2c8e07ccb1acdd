//! Validation through a Language component, with the guarantees the host
//! enforces instead of trusting the component (ARCHITECTURE.md,
//! "Guarantees the host enforces"; Part II §5.5, §5.6, §6.4).
//!
//! Invariant: validation never invokes a catalog entry; the component's
//! `invoke` import is refused during validation.

use serde_json::Value;

use crate::catalog::CatalogSnapshot;
use crate::error::CallError;
use crate::host::{CallContext, diagnostic_from_wit, plan_step_from_wit};
use crate::runtime::{CallKind, Component};
use pilotage_protocol::diagnostic::{CONSTRAINT, CONTEXT_BINDING, Diagnostic, INPUT_BINDING, Locator, is_valid};
use pilotage_protocol::plan::Plan;
use pilotage_protocol::requests::ValidateResponse;
use pilotage_protocol::trace_identity::is_valid_step_id;
use pilotage_telemetry::metrics::{BoundKind, CallLabel, GuaranteeKind};

use super::description::ProgramKind;

/// A program as it reaches the host: the JSON value of the tool argument.
/// For text Languages it must be a string.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    text: String,
}

/// Why a program could not be validated at all (as opposed to being
/// invalid, which is a diagnostic).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationFailure {
    /// Occurs when a validation bound was exceeded: program size, nesting,
    /// fuel, memory, stack, wall time or result size (request error
    /// `bounds_exceeded`, Part II §10.1).
    #[error("{0}")]
    BoundsExceeded(String),
    /// Occurs when the validator itself failed: a trap, or a result that
    /// breaks the platform's contract beyond repair (request error
    /// `internal`).
    #[error("{0}")]
    Internal(String),
    /// Occurs when the node's validation pool had no instance free: the
    /// validator did not run (request error `bounds_exceeded`, retryable).
    #[error("{0}")]
    Capacity(String),
}

impl Program {
    /// The program from its tool-argument value, checked against the
    /// host-side bounds before any component runs.
    ///
    /// # Errors
    /// [`ValidationFailure::BoundsExceeded`] when the program's text is
    /// larger than `max_bytes` or a JSON program nests deeper than
    /// `max_depth`. A text Language given a non-string gets the program's
    /// JSON text, which its validator reports as malformed.
    pub fn from_argument(
        kind: ProgramKind,
        value: &Value,
        max_bytes: u64,
        max_depth: u32,
    ) -> Result<Program, ValidationFailure> {
        let text = match (kind, value) {
            (ProgramKind::Text, Value::String(text)) => text.clone(),
            _ => value.to_string(),
        };
        if text.len() as u64 > max_bytes {
            return Err(ValidationFailure::BoundsExceeded(format!(
                "the program is {} bytes; the bound is {max_bytes} bytes",
                text.len()
            )));
        }
        if kind == ProgramKind::Json {
            let depth = json_depth(value);
            if depth > max_depth as usize {
                return Err(ValidationFailure::BoundsExceeded(format!(
                    "the program nests {depth} levels deep; the bound is {max_depth}"
                )));
            }
        }
        Ok(Program { text })
    }

    /// The text handed to the component.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The SHA-256 of this program's text: what a cache of validation
    /// results keys it by (Part IV §6).
    pub fn digest(&self) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        Sha256::digest(self.text.as_bytes()).into()
    }

    /// The SHA-256 of the text [`Program::from_argument`] would build from
    /// `value` for a Language of `kind`, equal to that program's
    /// [`Program::digest`], without building the text: the JSON is written
    /// straight into the hash. A validation cache asks this first, so a
    /// hit never builds the program (issue: performance, round two). No
    /// bound is checked: a hit is a program that passed them on its miss.
    pub fn digest_of_argument(kind: ProgramKind, value: &Value) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        /// The hash as an `io::Write`, for serde_json's writer.
        struct Hashing(Sha256);
        impl std::io::Write for Hashing {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.update(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        match (kind, value) {
            (ProgramKind::Text, Value::String(text)) => Sha256::digest(text.as_bytes()).into(),
            _ => {
                let mut hashing = Hashing(Sha256::new());
                // Writing a `Value` into a sink that never fails cannot fail.
                let _ = serde_json::to_writer(&mut hashing, value);
                hashing.0.finalize().into()
            }
        }
    }
}

/// Nesting depth of a JSON value (a scalar is depth 0), computed without
/// recursion so a hostile program cannot overflow the host's stack.
pub(crate) fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|item| (item, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// Something the component did that the host had to correct: logged as an
/// engine defect and counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineDefect(pub String);

/// A validation result and the defects corrected on the way.
#[derive(Clone, Debug, PartialEq)]
pub struct Validated {
    /// The response as the spec defines it.
    pub response: ValidateResponse,
    /// The plan, also when the Language declares no plan (kept for
    /// containment at execution).
    pub plan: Option<Plan>,
    /// Entries the program references, as the component reported them and
    /// restricted to visible ones.
    pub references: Vec<String>,
    /// Statements the program may run through the `sql` import.
    pub statements: Vec<String>,
    /// What the host corrected.
    pub defects: Vec<EngineDefect>,
    /// The response as JSON and as JSON text, made on first use.
    pub rendered: RenderedResponse,
}

impl Validated {
    /// [`Validated::response`] as a JSON value and as its JSON text (the
    /// tool result's `structuredContent` and text block, Part III §6),
    /// serialized once per result: a validation the cache answers is not
    /// serialized again (issue: performance).
    pub fn rendered(&self) -> &(Value, String) {
        self.rendered.0.get_or_init(|| {
            let value = serde_json::to_value(&self.response).unwrap_or(Value::Null);
            let text = value.to_string();
            (value, text)
        })
    }
}

/// The serialized forms of a [`Validated`]'s response, kept beside it.
/// Not part of the result's identity: any two compare equal, and a clone
/// starts empty (it is made again from the clone's own response).
#[derive(Debug, Default)]
pub struct RenderedResponse(std::sync::OnceLock<(Value, String)>);

impl Clone for RenderedResponse {
    fn clone(&self) -> Self {
        RenderedResponse::default()
    }
}

impl PartialEq for RenderedResponse {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

fn bound_or_internal(error: CallError) -> ValidationFailure {
    if let CallError::Capacity(_) = error {
        ValidationFailure::Capacity(error.to_string())
    } else if error.is_bound() {
        ValidationFailure::BoundsExceeded(format!("validation stopped: {error}"))
    } else {
        ValidationFailure::Internal(format!("the Language's validator failed: {error}"))
    }
}

/// Validates `program` with optional `context` against `catalog` (the
/// caller's visible snapshot), enforcing: `valid` computed from severities;
/// undeclared codes rewritten to `constraint`; plan only when valid, with
/// `max_risk_hints` recomputed; plan step ids free of `#` and `/`; plan
/// `calls` naming visible entries; context binding per Part II §6.4.
///
/// # Errors
/// [`ValidationFailure`] when a bound is exceeded or the validator fails.
pub async fn validate(
    component: &Component,
    program: &Program,
    context: Option<&Value>,
    catalog: &CatalogSnapshot,
) -> Result<Validated, ValidationFailure> {
    let description = component.description();
    let context_text = context.map(Value::to_string);
    let result = async {
        let mut call = component.start(CallKind::Validation, CallContext::validation(catalog.clone())).await?;
        let result = call.validate(program.text(), context_text.as_deref()).await;
        call.finish();
        result
    }
    .await
    .map_err(bound_or_internal)?;
    let limit = component.engine().bounds().result_bytes;
    let size = validation_size(&result);
    if size > limit {
        component.engine().metrics().bound_trip(CallLabel::Validation, BoundKind::ResultBytes);
        return Err(bound_or_internal(CallError::ResultTooLarge { size, limit }));
    }

    let mut defects = Vec::new();
    let mut diagnostics: Vec<Diagnostic> = result
        .diagnostics
        .into_iter()
        .map(diagnostic_from_wit)
        .map(|mut diagnostic| {
            if !description.declares_code(&diagnostic.code) {
                defects.push(EngineDefect(format!(
                    "undeclared diagnostic code '{}' rewritten to 'constraint'",
                    diagnostic.code
                )));
                diagnostic.code = CONSTRAINT.to_owned();
            }
            diagnostic
        })
        .collect();
    diagnostics.extend(context_binding(description.context_schema.as_ref(), context));

    let mut plan =
        result.plan.map(|plan| Plan::new(plan.steps.into_iter().map(plan_step_from_wit).collect(), plan.max_risk));
    if let Some(plan) = &plan {
        for step in &plan.steps {
            if !is_valid_step_id(&step.id) {
                defects.push(EngineDefect(format!("plan step id '{}' is empty or contains '#' or '/'", step.id)));
                diagnostics.push(Diagnostic::error(
                    CONSTRAINT,
                    "",
                    format!("the Language planned a step with id '{}', which is empty or contains a reserved character ('#' or '/')", step.id),
                ));
            }
            if let Some(calls) = &step.calls
                && catalog.get(calls).is_none()
            {
                defects.push(EngineDefect(format!(
                    "plan step '{}' calls '{calls}', which the caller cannot see",
                    step.id
                )));
                diagnostics.push(Diagnostic::error(
                    CONSTRAINT,
                    "",
                    format!("the Language planned step '{}' to call an entry that does not exist", step.id),
                ));
            }
        }
    }
    let valid = is_valid(&diagnostics);
    if !valid && plan.is_some() && description.features.plan {
        // A plan alongside an error is a claim of validity the host does
        // not accept (Part II §5.5).
        plan = None;
    }
    if valid && description.features.plan && plan.is_none() {
        return Err(ValidationFailure::Internal("the Language returned no plan for a valid program".into()));
    }
    let references: Vec<String> = result.references.into_iter().filter(|id| catalog.get(id).is_some()).collect();
    let statements = result.statements;
    let response = ValidateResponse {
        valid,
        diagnostics,
        catalog_version: description.features.catalog.then(|| catalog.catalog_version().to_owned()),
        plan: if description.features.plan { plan.clone().filter(|_| valid) } else { None },
        references: (description.features.catalog && !description.features.plan && valid).then(|| references.clone()),
    };
    for defect in &defects {
        tracing::warn!(language = %description.name, defect = %defect.0, "engine defect corrected by the host");
    }
    if !defects.is_empty() {
        component.engine().metrics().guarantee_violation(GuaranteeKind::ValidationDefect);
    }
    Ok(Validated {
        response,
        plan: plan.filter(|_| valid),
        references,
        statements,
        defects,
        rendered: RenderedResponse::default(),
    })
}

fn validation_size(result: &crate::wit::Validation) -> u64 {
    let diagnostics: usize = result
        .diagnostics
        .iter()
        .map(|d| d.code.len() + d.message.len() + d.hint.as_ref().map_or(0, String::len) + 64)
        .sum();
    let plan: usize = result.plan.as_ref().map_or(0, |p| p.steps.iter().map(|s| s.id.len() + s.risk.len() + 64).sum());
    let references: usize = result.references.iter().chain(&result.statements).map(String::len).sum();
    (diagnostics + plan + references) as u64
}

/// Context binding done by the host (Part II §6.4): without a
/// `context_schema`, any supplied context is a `context_binding` finding;
/// with one, a missing context or each schema violation is, with a
/// pointer into `context`.
pub fn context_binding(schema: Option<&Value>, context: Option<&Value>) -> Vec<Diagnostic> {
    match (schema, context) {
        (None, None) => Vec::new(),
        (None, Some(_)) => {
            vec![Diagnostic::error(CONTEXT_BINDING, "", "this Language takes no validation context; remove 'context'")]
        }
        (Some(_), None) => {
            vec![Diagnostic::error(CONTEXT_BINDING, "", "this Language requires a 'context' (see its context_schema)")]
        }
        (Some(schema), Some(context)) => match jsonschema::validator_for(schema) {
            Ok(validator) => validator
                .iter_errors(context)
                .map(|error| Diagnostic::error(CONTEXT_BINDING, &error.instance_path().to_string(), error.to_string()))
                .collect(),
            Err(error) => vec![Diagnostic::error(
                CONTEXT_BINDING,
                "",
                format!("the Language's context_schema does not compile: {error}"),
            )],
        },
    }
}

/// Checks an inline program's `input` through the component's
/// `bind-input` (Part II §6.5.5). Every finding is an `input_binding`
/// diagnostic whose path points into `input`; another code from the
/// component is rewritten to `input_binding` and counted as a defect.
///
/// # Errors
/// [`ValidationFailure`] when a bound is exceeded or the component fails.
pub async fn bind_input(
    component: &Component,
    program: &Program,
    input: Option<&Value>,
) -> Result<Vec<Diagnostic>, ValidationFailure> {
    let input_text = input.map(Value::to_string);
    let findings = async {
        let mut call = component.start(CallKind::Validation, CallContext::describe()).await?;
        let findings = call.bind_input(program.text(), input_text.as_deref()).await;
        call.finish();
        findings
    }
    .await
    .map_err(bound_or_internal)?;
    Ok(findings
        .into_iter()
        .map(diagnostic_from_wit)
        .map(|mut diagnostic| {
            if diagnostic.code != INPUT_BINDING {
                tracing::warn!(language = %component.description().name, code = %diagnostic.code, "bind-input finding rewritten to input_binding");
                diagnostic.code = INPUT_BINDING.to_owned();
            }
            if let Locator::Range(_) = diagnostic.path {
                diagnostic.path = Locator::Pointer(String::new());
            }
            diagnostic
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_counts_nesting_without_recursion() {
        assert_eq!(json_depth(&json!(1)), 0);
        assert_eq!(json_depth(&json!({"a": [1, {"b": 2}]})), 3);
        // serde_json refuses to parse deeper than 128 levels, so values
        // from the wire stay shallow enough to drop safely.
        let mut deep = json!(0);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        assert_eq!(json_depth(&deep), 100);
        let text = format!("{}0{}", "[".repeat(200), "]".repeat(200));
        assert!(serde_json::from_str::<Value>(&text).is_err());
    }

    /// The digest a cache asks first is the digest of the very text the
    /// program is built with, for every kind and shape of argument; other
    /// programs differ.
    #[test]
    fn the_digest_of_an_argument_is_the_digest_of_its_program() {
        let arguments = [
            json!({"steps": [{"id": "a", "value": [1, -2.5e-7, null, true, "é\"\n\u{1}"]}], "k": {}}),
            json!("SELECT 1 -- é"),
            json!(""),
            json!([]),
            json!(12345678901234567890u64),
        ];
        let mut seen = std::collections::HashSet::new();
        for value in &arguments {
            for kind in [ProgramKind::Json, ProgramKind::Text] {
                let program = Program::from_argument(kind, value, 1 << 20, 64).unwrap();
                assert_eq!(Program::digest_of_argument(kind, value), program.digest(), "{kind:?} {value}");
                seen.insert(program.digest());
            }
        }
        // A string is its own text for a text Language and a JSON string
        // for a JSON one; the rest are the same JSON either way.
        assert_eq!(seen.len(), arguments.len() + 2);
    }

    #[test]
    fn host_bounds_refuse_large_and_deep_programs() {
        let big = json!("x".repeat(100));
        assert!(matches!(
            Program::from_argument(ProgramKind::Text, &big, 10, 64),
            Err(ValidationFailure::BoundsExceeded(_))
        ));
        assert!(Program::from_argument(ProgramKind::Text, &big, 1000, 64).is_ok());
        let deep = json!({"a": {"b": {"c": 1}}});
        assert!(matches!(
            Program::from_argument(ProgramKind::Json, &deep, 1000, 2),
            Err(ValidationFailure::BoundsExceeded(_))
        ));
        assert_eq!(Program::from_argument(ProgramKind::Json, &deep, 1000, 3).unwrap().text(), r#"{"a":{"b":{"c":1}}}"#);
    }

    #[test]
    fn context_is_bound_by_the_host_in_both_polarities() {
        assert!(context_binding(None, None).is_empty());
        let unexpected = context_binding(None, Some(&json!({"any": "value"})));
        assert_eq!(unexpected.len(), 1);
        assert_eq!(unexpected[0].code, CONTEXT_BINDING);
        assert_eq!(unexpected[0].path, Locator::Pointer(String::new()));
        let schema = json!({"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]});
        assert_eq!(context_binding(Some(&schema), None).len(), 1);
        assert!(context_binding(Some(&schema), Some(&json!({"tz": "UTC"}))).is_empty());
        let wrong = context_binding(Some(&schema), Some(&json!({"tz": 3})));
        assert_eq!(wrong[0].path, Locator::Pointer("/tz".into()));
    }
}
