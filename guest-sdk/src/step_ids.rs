//! Program step identifiers (Part II §3.4): unique within a program, and
//! free of `#` and `/`, which trace ids reserve for loop iterations and
//! nesting (§5.8.2). [`StepIds`] checks each id as a validator meets it.
//!
//! ```
//! use pilotage_guest_sdk::pointer::At;
//! use pilotage_guest_sdk::step_ids::StepIds;
//! let (root, mut ids, mut found) = (At::root(), StepIds::new(), Vec::new());
//! ids.check("profile", &root.at("steps").index(0).at("id"), &mut found);
//! ids.check("profile", &root.at("steps").index(1).at("id"), &mut found);
//! assert_eq!(found[0].message, "step id 'profile' is used twice");
//! ```

use crate::findings::Findings;
use crate::pointer::At;

/// The code of a step id holding `#` or `/`.
pub const RESERVED_CHARACTER: &str = "reserved_character";
/// The code of a step id used by an earlier step.
pub const DUPLICATE_STEP_ID: &str = "duplicate_step_id";

/// The step ids met so far, in order.
#[derive(Clone, Debug, Default)]
pub struct StepIds {
    seen: Vec<String>,
}

impl StepIds {
    /// No ids yet.
    pub fn new() -> StepIds {
        StepIds::default()
    }

    /// Records `id`, found at `at` (its `id` member), and reports what is
    /// wrong with it: [`RESERVED_CHARACTER`] (`step id 'ID' contains '#' or
    /// '/'`, hint `rename it, e.g. 'ID_WITH_UNDERSCORES'`), then
    /// [`DUPLICATE_STEP_ID`] (`step id 'ID' is used twice`) when an earlier
    /// step has it. Both are errors; list the codes among the Language's.
    pub fn check(&mut self, id: &str, at: &At<'_>, found: &mut impl Findings) {
        if id.contains(['#', '/']) {
            let fixed = id.replace(['#', '/'], "_");
            let message = format!("step id '{id}' contains '#' or '/'");
            found.error(RESERVED_CHARACTER, at, message).hint(format!("rename it, e.g. '{fixed}'"));
        }
        if self.contains(id) {
            found.error(DUPLICATE_STEP_ID, at, format!("step id '{id}' is used twice"));
        }
        self.seen.push(id.to_owned());
    }

    /// Whether an earlier step has `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.seen.iter().any(|seen| seen == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Locator;

    #[test]
    fn distinct_plain_ids_pass() {
        let (mut ids, mut found) = (StepIds::new(), Vec::new());
        for id in ["profile", "flag", "step-2", "a.b"] {
            ids.check(id, &At::root().at(id), &mut found);
        }
        assert!(found.is_empty(), "{found:?}");
        assert!(ids.contains("flag") && !ids.contains("gold"));
    }

    #[test]
    fn reserved_characters_and_repeats_are_errors_at_the_id() {
        let (mut ids, mut found) = (StepIds::new(), Vec::new());
        let root = At::root();
        let at = root.at("steps");
        ids.check("p#1", &at.index(0).at("id"), &mut found);
        ids.check("p#1", &at.index(1).at("id"), &mut found);
        let codes: Vec<_> = found.iter().map(|d| d.code.as_str()).collect();
        assert_eq!(codes, [RESERVED_CHARACTER, RESERVED_CHARACTER, DUPLICATE_STEP_ID]);
        assert_eq!(found[0].hint.as_deref(), Some("rename it, e.g. 'p_1'"));
        assert_eq!(found[2].path, Locator::Pointer("/steps/1/id".into()));
        assert_eq!(found[2].hint, None);
    }
}
