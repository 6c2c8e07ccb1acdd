//! Risk hints and risk aggregation (Part II §5.3).

use serde::{Deserialize, Serialize};

/// Generic, comparable risk booleans that a Host gate can act on without
/// understanding the Language (Part II §5.3).
///
/// Wire names are camelCase (`readOnly`, `destructive`, `openWorld`), as in
/// the schema's `RiskHints`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RiskHints {
    /// No persistent state change and no change observable outside the Run.
    #[serde(rename = "readOnly")]
    pub read_only: bool,
    /// May delete state or alter it irreversibly.
    pub destructive: bool,
    /// May reach a system outside the Server's own domain.
    #[serde(rename = "openWorld")]
    pub open_world: bool,
}

impl RiskHints {
    /// Reads only, inside the Server's domain.
    pub const SAFE: RiskHints = RiskHints { read_only: true, destructive: false, open_world: false };
    /// Writes, reversibly, inside the Server's domain.
    pub const WRITE: RiskHints = RiskHints { read_only: false, destructive: false, open_world: false };
    /// May delete or irreversibly alter state.
    pub const DESTRUCTIVE: RiskHints = RiskHints { read_only: false, destructive: true, open_world: false };

    /// Whether the Host gate of Part II §7.3 must ask for approval before a
    /// Run with this (aggregate) risk: destructive or open-world.
    pub fn requires_approval(&self) -> bool {
        self.destructive || self.open_world
    }

    /// The mismatch between an engine-defined risk label and these hints
    /// (Part II §5.3: "the engine-defined `risk` value MUST be consistent
    /// with `risk_hints`"), `None` when consistent:
    /// - hints that say both `readOnly` and `destructive` contradict
    ///   themselves (deleting or irreversibly altering state is a change);
    /// - a label that [`label_reads_only`] says reads only carries
    ///   `readOnly: true` and `destructive: false`; one it says changes
    ///   state does not carry `readOnly: true`; the standard `destructive`
    ///   label carries `destructive: true`.
    ///
    /// Other engine-defined labels are the engine's to mean.
    pub fn inconsistency_with(&self, risk: &str) -> Option<String> {
        let said = || format!("risk_hints say readOnly={}, destructive={}", self.read_only, self.destructive);
        if self.read_only && self.destructive {
            return Some(format!("risk '{risk}': {} (a destructive operation is not read-only)", said()));
        }
        match label_reads_only(risk) {
            Some(true) if self.destructive || !self.read_only => {
                Some(format!("risk '{risk}' presents as read-only but {}", said()))
            }
            Some(false) if self.read_only => Some(format!("risk '{risk}' changes state but {}", said())),
            _ if risk == "destructive" && !self.destructive => Some(format!("risk 'destructive' but {}", said())),
            _ => None,
        }
    }
}

/// What a standard or conventional risk label says about state changes:
/// `Some(true)` for a label that presents as reading only (`safe`, `read`,
/// `read_only`, `readonly`, `none`, `external_read`), `Some(false)` for one
/// that changes state (`write`, `external_write`, `destructive`), `None`
/// for an engine-defined label this crate cannot read (Part II §5.3).
pub fn label_reads_only(risk: &str) -> Option<bool> {
    match risk {
        "safe" | "read" | "read_only" | "readonly" | "none" | "external_read" => Some(true),
        "write" | "external_write" | "destructive" => Some(false),
        _ => None,
    }
}

/// The maximum risk of several steps, computed from hints, never from risk
/// labels (Part II §5.3): `readOnly` is the AND, `destructive` and
/// `openWorld` the OR. The aggregate of nothing is [`RiskHints::SAFE`].
pub fn aggregate<I>(hints: I) -> RiskHints
where
    I: IntoIterator<Item = RiskHints>,
{
    hints.into_iter().fold(RiskHints::SAFE, |max, step| RiskHints {
        read_only: max.read_only && step.read_only,
        destructive: max.destructive || step.destructive,
        open_world: max.open_world || step.open_world,
    })
}

/// Whether `claimed` is at least as restrictive as `actual`: every risk the
/// actual hints carry is also carried by the claim. Used for promoted
/// programs, whose entry must not look safer than their body (Part II §5.4).
pub fn at_least_as_restrictive(claimed: RiskHints, actual: RiskHints) -> bool {
    (!actual.destructive || claimed.destructive)
        && (!actual.open_world || claimed.open_world)
        && (actual.read_only || !claimed.read_only)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_is_and_for_read_only_and_or_for_the_rest() {
        let open = RiskHints { read_only: true, destructive: false, open_world: true };
        let max = aggregate([RiskHints::SAFE, RiskHints::WRITE, open]);
        assert_eq!(max, RiskHints { read_only: false, destructive: false, open_world: true });
        assert!(max.requires_approval());
    }

    #[test]
    fn aggregate_of_nothing_is_safe_and_needs_no_approval() {
        let max = aggregate([]);
        assert_eq!(max, RiskHints::SAFE);
        assert!(!max.requires_approval());
    }

    #[test]
    fn destructive_anywhere_makes_the_aggregate_destructive() {
        assert!(aggregate([RiskHints::SAFE, RiskHints::DESTRUCTIVE]).destructive);
        assert!(!aggregate([RiskHints::SAFE, RiskHints::WRITE]).destructive);
    }

    #[test]
    fn wire_names_are_camel_case() {
        let text = serde_json::to_string(&RiskHints::SAFE).unwrap();
        assert_eq!(text, r#"{"readOnly":true,"destructive":false,"openWorld":false}"#);
    }

    #[test]
    fn safe_label_with_destructive_hints_is_inconsistent() {
        assert!(RiskHints::DESTRUCTIVE.inconsistency_with("safe").is_some());
        assert!(RiskHints::SAFE.inconsistency_with("safe").is_none());
        assert!(RiskHints::DESTRUCTIVE.inconsistency_with("destructive").is_none());
    }

    #[test]
    fn every_standard_label_and_hint_pair_is_judged() {
        let contradictory = RiskHints { read_only: true, destructive: true, open_world: false };
        for label in ["safe", "write", "destructive", "engine_defined"] {
            assert!(contradictory.inconsistency_with(label).is_some(), "{label}");
        }
        assert!(RiskHints::SAFE.inconsistency_with("destructive").is_some());
        assert!(RiskHints::WRITE.inconsistency_with("destructive").is_some());
        assert!(RiskHints::SAFE.inconsistency_with("write").is_some());
        assert!(RiskHints::WRITE.inconsistency_with("write").is_none());
        assert!(RiskHints::DESTRUCTIVE.inconsistency_with("write").is_none());
        assert!(RiskHints::WRITE.inconsistency_with("engine_defined").is_none());
        let external = RiskHints { read_only: true, destructive: false, open_world: true };
        assert!(external.inconsistency_with("external_read").is_none());
        assert!(external.inconsistency_with("external_write").is_some());
        assert!(RiskHints::WRITE.inconsistency_with("external_read").is_some());
        assert_eq!((label_reads_only("read"), label_reads_only("write")), (Some(true), Some(false)));
        assert_eq!(label_reads_only("engine_defined"), None);
    }

    #[test]
    fn restrictiveness_compares_every_hint() {
        assert!(at_least_as_restrictive(RiskHints::DESTRUCTIVE, RiskHints::SAFE));
        assert!(at_least_as_restrictive(RiskHints::WRITE, RiskHints::WRITE));
        assert!(!at_least_as_restrictive(RiskHints::SAFE, RiskHints::WRITE));
        assert!(!at_least_as_restrictive(RiskHints::WRITE, RiskHints::DESTRUCTIVE));
    }
}
