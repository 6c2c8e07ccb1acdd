//! Plans and plan steps (Part II §5.6).

use serde::{Deserialize, Serialize};

use super::risk::{RiskHints, aggregate};

/// The branch arm containing a plan step.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Arm {
    /// The enclosing branch's step id.
    pub branch: String,
    /// The arm's label, matched by trace decisions' `took`.
    pub label: String,
}

/// One plan step (Part II §5.6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    /// Program step identifier.
    pub id: String,
    /// The invoked entry or promoted reference; iff the step invokes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<String>,
    /// Present iff the step is inside a branch arm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<Arm>,
    /// Innermost enclosing loop; iff inside a loop body.
    #[serde(rename = "loop", default, skip_serializing_if = "Option::is_none")]
    pub loop_id: Option<String>,
    /// Engine-defined risk of this use.
    pub risk: String,
    /// Risk hints of this use.
    pub risk_hints: RiskHints,
}

/// A statically derived execution preview (Part II §5.6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Steps in expected execution order.
    pub steps: Vec<PlanStep>,
    /// Engine-defined maximum risk level.
    pub max_risk: String,
    /// Aggregate of every step's hints (Part II §5.3).
    pub max_risk_hints: RiskHints,
}

impl Plan {
    /// Builds a plan whose `max_risk_hints` is the aggregate of the steps'
    /// hints, never a value supplied by the engine (Part II §5.3).
    pub fn new(steps: Vec<PlanStep>, max_risk: String) -> Plan {
        let max_risk_hints = aggregate(steps.iter().map(|step| step.risk_hints));
        Plan { steps, max_risk, max_risk_hints }
    }

    /// Every entry the plan calls, in plan order, without repeats.
    pub fn calls(&self) -> Vec<&str> {
        let mut seen = std::collections::BTreeSet::new();
        self.steps.iter().filter_map(|step| step.calls.as_deref()).filter(|id| seen.insert(*id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: &str, hints: RiskHints) -> PlanStep {
        PlanStep {
            id: id.into(),
            calls: Some(format!("cap_{id}")),
            arm: None,
            loop_id: None,
            risk: "x".into(),
            risk_hints: hints,
        }
    }

    #[test]
    fn max_risk_hints_is_recomputed_from_steps() {
        let plan = Plan::new(vec![step("a", RiskHints::SAFE), step("b", RiskHints::DESTRUCTIVE)], "safe".into());
        assert!(plan.max_risk_hints.destructive);
        assert_eq!(plan.calls(), vec!["cap_a", "cap_b"]);
    }

    #[test]
    fn loop_member_uses_the_wire_name() {
        let mut s = step("a", RiskHints::SAFE);
        s.loop_id = Some("each".into());
        let value = serde_json::to_value(&s).unwrap();
        assert_eq!(value["loop"], "each");
    }
}
