//! The answer of `validate` (Part II §6.4) built as a validator walks a
//! program: its diagnostics (§5.5), its plan (§5.6) and the entries it
//! references.
//!
//! ```
//! use pilotage_guest_sdk::diag::{SAFE, WRITE};
//! use pilotage_guest_sdk::findings::Findings;
//! use pilotage_guest_sdk::validation::{ValidationBuilder, arm};
//! # let entry = |id: &str, risk_hints| pilotage_guest_sdk::CatalogEntry { id: id.into(), kind: "capability".into(),
//! #     name: id.into(), description: None, input_schema: None, output_schema: None, risk: String::new(),
//! #     risk_hints, tags: Vec::new() };
//! let mut out = ValidationBuilder::new();
//! out.call("profile", &entry("cap_read_user_profile", SAFE), None);
//! out.control("gold", None);
//! out.call("flag", &entry("cap_flag_order", WRITE), Some(arm("gold", "then")));
//! out.warning("unknown_field", "/output/name", "'profile' lists no output field 'nme'");
//! let validation = out.finish();
//! let plan = validation.plan.expect("a warning keeps the program valid");
//! assert_eq!((plan.steps[2].risk.as_str(), plan.max_risk.as_str()), ("write", "write"));
//! assert_eq!(validation.references, ["cap_read_user_profile", "cap_flag_order"]);
//! ```

use crate::diag::{SAFE, aggregate};
use crate::findings::{Finding, Findings};
use crate::language::risk_label;
use crate::{Arm, CatalogEntry, Diagnostic, Plan, PlanStep, Severity, Validation};

/// Gathers a validation: diagnostics through [`Findings`], plan steps in
/// execution order, and referenced entry ids (each once, in the order
/// first named). Risk labels are the guest SDK's standard levels
/// ([`risk_label`]), read from the entries' `risk_hints`.
#[derive(Debug, Default)]
pub struct ValidationBuilder {
    /// The findings so far.
    pub diagnostics: Vec<Diagnostic>,
    /// The plan steps so far, in expected execution order.
    pub steps: Vec<PlanStep>,
    /// The entries referenced so far.
    pub references: Vec<String>,
}

impl ValidationBuilder {
    /// An empty validation.
    pub fn new() -> ValidationBuilder {
        ValidationBuilder::default()
    }

    /// Records that the program names entry `id` (listed in `references`
    /// once, however often it is named).
    pub fn reference(&mut self, id: &str) {
        if !self.references.iter().any(|seen| seen == id) {
            self.references.push(id.to_owned());
        }
    }

    /// Appends the plan step of program step `id` calling `entry` (Part II
    /// §5.6): `calls` is the entry's id, `risk_hints` the entry's, `risk`
    /// their standard level; `arm` for a step inside a branch arm. Records
    /// the reference too.
    pub fn call(&mut self, id: &str, entry: &CatalogEntry, arm: Option<Arm>) {
        self.reference(&entry.id);
        self.steps.push(PlanStep {
            id: id.to_owned(),
            calls: Some(entry.id.clone()),
            arm,
            loop_: None,
            risk: risk_label(entry.risk_hints).to_owned(),
            risk_hints: entry.risk_hints,
        });
    }

    /// Appends the plan step of control-flow step `id` (a branch, Part II
    /// §5.6): no `calls`, risk `safe`.
    pub fn control(&mut self, id: &str, arm: Option<Arm>) {
        let risk = risk_label(SAFE).to_owned();
        self.steps.push(PlanStep { id: id.to_owned(), calls: None, arm, loop_: None, risk, risk_hints: SAFE });
    }

    /// The validation: the plan only when no diagnostic is an error (Part
    /// II §5.5 "Validity"), its `max_risk` the standard level of the
    /// aggregated hints (§5.3); no `statements` (those are for the `sql`
    /// import).
    pub fn finish(self) -> Validation {
        let valid = self.diagnostics.iter().all(|d| d.severity == Severity::Warning);
        let max_risk = risk_label(aggregate(self.steps.iter().map(|step| step.risk_hints))).to_owned();
        Validation {
            plan: valid.then_some(Plan { steps: self.steps, max_risk }),
            diagnostics: self.diagnostics,
            references: self.references,
            statements: Vec::new(),
        }
    }
}

impl Findings for ValidationBuilder {
    fn push_finding(&mut self, diagnostic: Diagnostic) -> Finding<'_> {
        self.diagnostics.push_finding(diagnostic)
    }
}

/// The `arm` of a plan step inside branch `branch`'s arm `label` (Part II
/// §5.6).
pub fn arm(branch: &str, label: &str) -> Arm {
    Arm { branch: branch.to_owned(), label: label.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::{DESTRUCTIVE, WRITE};

    fn entry(id: &str, risk_hints: crate::RiskHints) -> CatalogEntry {
        crate::language::test_entry(id, None, None, risk_hints)
    }

    #[test]
    fn a_valid_program_has_a_plan_with_the_highest_risk() {
        let mut out = ValidationBuilder::new();
        out.call("read", &entry("cap_read", SAFE), None);
        out.control("gate", None);
        out.call("drop", &entry("cap_drop", DESTRUCTIVE), Some(arm("gate", "then")));
        out.call("again", &entry("cap_read", SAFE), Some(arm("gate", "then")));
        let validation = out.finish();
        let plan = validation.plan.unwrap();
        let steps: Vec<_> = plan.steps.iter().map(|s| (s.id.as_str(), s.calls.as_deref(), s.risk.as_str())).collect();
        assert_eq!(
            steps,
            [
                ("read", Some("cap_read"), "safe"),
                ("gate", None, "safe"),
                ("drop", Some("cap_drop"), "destructive"),
                ("again", Some("cap_read"), "safe")
            ]
        );
        assert_eq!(plan.steps[2].arm, Some(Arm { branch: "gate".into(), label: "then".into() }));
        assert_eq!(plan.max_risk, "destructive");
        assert_eq!(validation.references, ["cap_read", "cap_drop"], "each entry once, first-named first");
    }

    #[test]
    fn an_error_withholds_the_plan_and_a_warning_does_not() {
        let mut out = ValidationBuilder::new();
        out.call("write", &entry("cap_write", WRITE), None);
        out.warning("unknown_field", "/output", "no such field");
        assert!(out.finish().plan.is_some());
        let mut out = ValidationBuilder::new();
        out.reference("cap_missing");
        out.error("unknown_entry", "/steps/0/call", "no catalog entry 'cap_missing'");
        let validation = out.finish();
        assert!(validation.plan.is_none());
        assert_eq!(validation.references, ["cap_missing"]);
    }

    #[test]
    fn an_empty_program_is_valid_and_safe() {
        let plan = ValidationBuilder::new().finish().plan.unwrap();
        assert!(plan.steps.is_empty());
        assert_eq!(plan.max_risk, "safe");
    }
}
