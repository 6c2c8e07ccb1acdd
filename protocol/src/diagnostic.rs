//! Diagnostics, locators, reserved codes and the validity rule
//! (Part II §5.5).

use serde::{Deserialize, Serialize};

/// Catch-all code for a finding that cannot be classified more precisely.
pub const CONSTRAINT: &str = "constraint";
/// Code for a failure involving the request's `input`.
pub const INPUT_BINDING: &str = "input_binding";
/// Code for a failure involving the request's `context`.
pub const CONTEXT_BINDING: &str = "context_binding";
/// The reserved codes every closed diagnostic set contains (Part II §5.5).
pub const RESERVED_CODES: [&str; 3] = [CONSTRAINT, INPUT_BINDING, CONTEXT_BINDING];

/// Severity of a finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Makes the program invalid.
    Error,
    /// Informative; the program stays valid.
    Warning,
}

/// A 1-based line/column position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TextPosition {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

/// A 1-based text range `{start, end}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TextRange {
    /// First position.
    pub start: TextPosition,
    /// Last position.
    pub end: TextPosition,
}

/// Where a finding points: a JSON Pointer string or a text range
/// (Part II §5.5 locator dialects).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Locator {
    /// RFC 6901 JSON Pointer (program, `input` or `context`); `""` is the
    /// whole document.
    Pointer(String),
    /// A range in a text program.
    Range(TextRange),
}

/// One validation finding (Part II §5.5).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Diagnostic {
    /// `error` or `warning`.
    pub severity: Severity,
    /// Member of the Language's closed set.
    pub code: String,
    /// Locator in the Language's dialect.
    pub path: Locator,
    /// Position inside a string addressed by a pointer `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<TextRange>,
    /// Server-authored explanation.
    pub message: String,
    /// Server-authored suggested correction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Diagnostic {
    /// An error finding with a JSON Pointer locator.
    pub fn error(code: &str, pointer: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code: code.to_owned(),
            path: Locator::Pointer(pointer.to_owned()),
            range: None,
            message: message.into(),
            hint: None,
        }
    }

    /// The same finding with a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }
}

/// The validity rule (Part II §5.5): valid iff no finding has severity
/// `error`. Warnings never make a program invalid.
pub fn is_valid(diagnostics: &[Diagnostic]) -> bool {
    !diagnostics.iter().any(|d| d.severity == Severity::Error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_follows_severity_only() {
        let warning = Diagnostic { severity: Severity::Warning, ..Diagnostic::error("x", "", "w") };
        assert!(is_valid(&[]));
        assert!(is_valid(std::slice::from_ref(&warning)));
        assert!(!is_valid(&[warning, Diagnostic::error("x", "/a", "e")]));
    }

    #[test]
    fn locators_round_trip_in_both_dialects() {
        let pointer: Locator = serde_json::from_str("\"/steps/0/capability\"").unwrap();
        assert_eq!(pointer, Locator::Pointer("/steps/0/capability".into()));
        let range: Locator =
            serde_json::from_str(r#"{"start":{"line":1,"column":8},"end":{"line":1,"column":12}}"#).unwrap();
        assert!(matches!(range, Locator::Range(r) if r.start.column == 8));
    }
}
