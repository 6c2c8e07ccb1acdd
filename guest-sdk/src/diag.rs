//! Small constructors for diagnostics, outcomes and risk hints, so Language
//! code reads as the spec does.

use crate::{DeployResult, Diagnostic, Locator, Outcome, RiskHints, RunResult, Severity, TextPosition, TextRange};

/// The reserved catch-all diagnostic code (Part II §5.5).
pub const CONSTRAINT: &str = "constraint";
/// The reserved code for findings about `input` (Part II §5.5).
pub const INPUT_BINDING: &str = "input_binding";
/// The reserved code for findings about `context` (Part II §5.5).
pub const CONTEXT_BINDING: &str = "context_binding";

/// Reserved run status: completed (Part II §5.7).
pub const SUCCESS: &str = "success";
/// Reserved run status: started, not completed, effects possible.
pub const PARTIAL: &str = "partial";
/// Reserved run status: failed, nothing more specific applies.
pub const ERROR: &str = "error";

/// An error diagnostic at a JSON Pointer.
pub fn error_at(code: &str, pointer: impl Into<String>, message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        code: code.to_owned(),
        path: Locator::Pointer(pointer.into()),
        range: None,
        message: message.into(),
        hint: None,
    }
}

/// A warning diagnostic at a JSON Pointer.
pub fn warning_at(code: &str, pointer: impl Into<String>, message: impl Into<String>) -> Diagnostic {
    Diagnostic { severity: Severity::Warning, ..error_at(code, pointer, message) }
}

/// An error diagnostic over a 1-based text range.
pub fn error_in(code: &str, range: TextRange, message: impl Into<String>) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        code: code.to_owned(),
        path: Locator::Range(range),
        range: None,
        message: message.into(),
        hint: None,
    }
}

/// A 1-based text range from line/column pairs.
pub fn text_range(start: (u32, u32), end: (u32, u32)) -> TextRange {
    TextRange {
        start: TextPosition { line: start.0, column: start.1 },
        end: TextPosition { line: end.0, column: end.1 },
    }
}

/// Adds a hint to a diagnostic.
pub fn with_hint(mut diagnostic: Diagnostic, hint: Option<String>) -> Diagnostic {
    diagnostic.hint = hint;
    diagnostic
}

/// `{ok: true, status: "success", error: null}`.
pub fn success() -> Outcome {
    Outcome { ok: true, status: SUCCESS.to_owned(), error: None }
}

/// A failed outcome.
pub fn failure(status: &str, error: impl Into<String>) -> Outcome {
    Outcome { ok: false, status: status.to_owned(), error: Some(error.into()) }
}

/// The `deploy` answer of a Language whose `execution` is `immediate`: a
/// failed installation Run, nothing installed. The host never calls
/// `deploy` on such a Language; this answers a host that would.
pub fn does_not_deploy() -> DeployResult {
    DeployResult {
        result: RunResult {
            outcome: failure(ERROR, "this Language does not deploy: its execution is immediate"),
            output: None,
            steps: Vec::new(),
            stats: None,
        },
        installation: None,
    }
}

/// The reserved run status of a Run refused before anything ran, its
/// diagnostics attached (Part II §6.5.2 steps 3 and 4).
pub const VALIDATION_ERROR: &str = "validation_error";

/// An execution-time refusal: `execute` found, before invoking anything,
/// that the program cannot run in the mode it was asked to (a check the
/// validator cannot make, since `validate` does not know the mode), e.g. an
/// installable program executed once (Part IV §9 "Refuse near-miss
/// mechanisms loudly"). The outcome is `validation_error` and `output`
/// carries `diagnostics` as a JSON array: the host moves them to the
/// execute response's `diagnostics`, rewrites undeclared codes to
/// `constraint`, and answers a refused Run (nothing stored). A refusal
/// that made an invocation, reports trace steps or carries no error
/// diagnostic is an engine fault.
pub fn refusal(message: impl Into<String>, diagnostics: &[Diagnostic]) -> RunResult {
    let position = |p: &TextPosition| serde_json::json!({"line": p.line, "column": p.column});
    let range = |r: &TextRange| serde_json::json!({"start": position(&r.start), "end": position(&r.end)});
    let findings: Vec<serde_json::Value> = diagnostics
        .iter()
        .map(|d| {
            let mut finding = serde_json::json!({
                "severity": match d.severity { Severity::Error => "error", Severity::Warning => "warning" },
                "code": d.code,
                "path": match &d.path { Locator::Pointer(pointer) => serde_json::json!(pointer), Locator::Range(r) => range(r) },
                "message": d.message,
            });
            if let Some(r) = &d.range {
                finding["range"] = range(r);
            }
            if let Some(hint) = &d.hint {
                finding["hint"] = serde_json::json!(hint);
            }
            finding
        })
        .collect();
    RunResult {
        outcome: failure(VALIDATION_ERROR, message),
        output: Some(serde_json::Value::Array(findings).to_string()),
        steps: Vec::new(),
        stats: None,
    }
}

/// Reads only, inside the Server's domain.
pub const SAFE: RiskHints = RiskHints { read_only: true, destructive: false, open_world: false };
/// Writes reversibly.
pub const WRITE: RiskHints = RiskHints { read_only: false, destructive: false, open_world: false };
/// May delete or irreversibly alter state.
pub const DESTRUCTIVE: RiskHints = RiskHints { read_only: false, destructive: true, open_world: false };

/// Aggregates risk hints per Part II §5.3 (AND of readOnly, OR of the rest).
pub fn aggregate(hints: impl IntoIterator<Item = RiskHints>) -> RiskHints {
    hints.into_iter().fold(SAFE, |max, step| RiskHints {
        read_only: max.read_only && step.read_only,
        destructive: max.destructive || step.destructive,
        open_world: max.open_world || step.open_world,
    })
}
