//! Findings: the diagnostics a validator gathers as it walks a program,
//! each at its [`At`] locator, with its hint (Part II §5.5). [`Findings`]
//! is implemented by `Vec<Diagnostic>` and by
//! [`ValidationBuilder`](crate::validation::ValidationBuilder).

use serde_json::{Map, Value};

use crate::diag::{error_at, warning_at};
use crate::pointer::At;
use crate::{CatalogEntry, Diagnostic};

/// Where a validator puts its diagnostics (Part II §5.5): a
/// `Vec<Diagnostic>`, or a [`ValidationBuilder`](crate::validation::ValidationBuilder).
/// `at` is a JSON Pointer: an [`At`] (`&at`) or pointer
/// text. Each call appends one diagnostic, or one per argument mismatch,
/// and hands back the [`Finding`] to add a hint to.
///
/// ```
/// use pilotage_guest_sdk::findings::Findings;
/// use pilotage_guest_sdk::pointer::At;
/// let (root, mut found) = (At::root(), Vec::new());
/// let steps = root.at("steps");
/// let first = steps.index(0);
/// found.error("unknown_entry", &first.at("call"), "no catalog entry 'cap_read_user_profil'")
///     .close_to("cap_read_user_profil", ["cap_read_user_profile", "cap_send_email"]);
/// assert_eq!(found[0].hint.as_deref(), Some("close match: cap_read_user_profile"));
/// ```
pub trait Findings {
    /// Appends `diagnostic`; the finding it became.
    fn push_finding(&mut self, diagnostic: Diagnostic) -> Finding<'_>;

    /// Appends an error `code` at `at` (the program is invalid).
    fn error(&mut self, code: &str, at: impl Into<String>, message: impl Into<String>) -> Finding<'_> {
        self.push_finding(error_at(code, at, message))
    }

    /// Appends a warning `code` at `at` (the program stays valid).
    fn warning(&mut self, code: &str, at: impl Into<String>, message: impl Into<String>) -> Finding<'_> {
        self.push_finding(warning_at(code, at, message))
    }

    /// Appends an error `code` for each of
    /// [`argument_mismatches`](crate::language::argument_mismatches) of
    /// `arguments` (the `with` object at `with_at`) against `entry`'s
    /// `input_schema`: at `with_at` for a missing required argument, at its
    /// member otherwise, with the hint of close property names for one the
    /// schema refuses. `is_literal` tells values the Language resolves at
    /// run time (not type-checked) from literals.
    fn arguments(
        &mut self,
        code: &str,
        with_at: &At<'_>,
        entry: &CatalogEntry,
        arguments: &Map<String, Value>,
        is_literal: impl Fn(&Value) -> bool,
    ) {
        for mismatch in crate::language::argument_mismatches(entry, arguments, is_literal) {
            let at = match &mismatch.argument {
                Some(argument) => with_at.at(argument).pointer(),
                None => with_at.pointer(),
            };
            self.error(code, at, mismatch.message).hint(mismatch.hint);
        }
    }
}

impl Findings for Vec<Diagnostic> {
    fn push_finding(&mut self, diagnostic: Diagnostic) -> Finding<'_> {
        self.push(diagnostic);
        let last = self.len() - 1;
        Finding(&mut self[last])
    }
}

/// A diagnostic just appended by [`Findings`], to give a hint. Dropping it
/// leaves the diagnostic without one.
#[derive(Debug)]
pub struct Finding<'a>(&'a mut Diagnostic);

impl Finding<'_> {
    /// Sets the hint, when there is one (`String` or `Option<String>`).
    pub fn hint(self, hint: impl Into<Option<String>>) {
        self.0.hint = hint.into();
    }

    /// Hints at the names among `visible` close to `name`, the unknown one
    /// ([`hints::hint`](crate::hints::hint): `close match: X`); no hint
    /// when none is close. Pass only what the caller may see (Part II
    /// §10.3).
    pub fn close_to<'c>(self, name: &str, visible: impl IntoIterator<Item = &'c str>) {
        self.0.hint = crate::hints::hint(name, visible);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::diag::SAFE;
    use crate::{Locator, Severity};

    fn entry() -> CatalogEntry {
        let schema = json!({"type": "object", "properties": {"user_id": {"type": "string"}},
                            "required": ["user_id"], "additionalProperties": false});
        crate::language::test_entry("cap", Some(schema), None, SAFE)
    }

    #[test]
    fn findings_land_at_their_pointer_with_their_hint() {
        let (root, mut found) = (At::root(), Vec::new());
        let steps = root.at("steps");
        let second = steps.index(1);
        let id = second.at("id");
        found
            .error("reserved_character", &id, "step id 'a/b' contains '#' or '/'")
            .hint("rename it, e.g. 'a_b'".to_owned());
        found.warning("unknown_field", "/output", "no field").close_to("tierr", ["name", "tier"]);
        found.error("malformed_program", &root, "not an object");
        assert_eq!(
            (found[0].path.clone(), found[0].severity),
            (Locator::Pointer("/steps/1/id".into()), Severity::Error)
        );
        assert_eq!(found[0].hint.as_deref(), Some("rename it, e.g. 'a_b'"));
        assert_eq!((found[1].severity, found[1].hint.as_deref()), (Severity::Warning, Some("close match: tier")));
        assert_eq!((found[2].path.clone(), found[2].hint.clone()), (Locator::Pointer(String::new()), None));
    }

    #[test]
    fn an_unknown_name_far_from_every_visible_one_gets_no_hint() {
        let mut found = Vec::new();
        found
            .error("unknown_entry", "/steps/0/call", "no catalog entry 'zzz'")
            .close_to("zzz", ["cap_read_user_profile"]);
        assert_eq!(found[0].hint, None);
    }

    #[test]
    fn argument_mismatches_point_at_the_argument_or_at_with() {
        let (root, mut found) = (At::root(), Vec::new());
        let steps = root.at("steps");
        let first = steps.index(0);
        let with = first.at("with");
        let literal = |value: &Value| !value.as_str().is_some_and(|s| s.starts_with('$'));
        found.arguments("argument_mismatch", &with, &entry(), json!({"user_id": "42"}).as_object().unwrap(), literal);
        found.arguments(
            "argument_mismatch",
            &with,
            &entry(),
            json!({"user_id": "$input.id"}).as_object().unwrap(),
            literal,
        );
        assert!(found.is_empty(), "good arguments and references give nothing: {found:?}");
        found.arguments("argument_mismatch", &with, &entry(), json!({"userid": 1}).as_object().unwrap(), literal);
        let places: Vec<_> = found.iter().map(|d| (d.path.clone(), d.message.as_str(), d.hint.as_deref())).collect();
        assert_eq!(
            places,
            [
                (Locator::Pointer("/steps/0/with".into()), "'cap' requires 'user_id'", None),
                (
                    Locator::Pointer("/steps/0/with/userid".into()),
                    "'cap' takes no 'userid'",
                    Some("close match: user_id")
                ),
            ]
        );
    }
}
