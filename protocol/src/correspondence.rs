//! Plan–trace correspondence (Part II §5.8.4) as a checker that returns
//! every mismatch, so the host can refuse a component's trace that does not
//! tell the truth about its plan.
//!
//! Only unprefixed trace entries (no `/`) take part. A branch is a plan step
//! named by some step's `arm.branch`; a loop is a plan step named by some
//! step's `loop`. An activation of a branch or loop is one trace entry whose
//! base id is that construct; entries inside it are matched to their
//! activation through iteration suffixes: an arm step's suffixes start with
//! its branch entry's suffixes, and a loop-body step's suffixes are its loop
//! entry's suffixes plus the iteration number.

use std::collections::{BTreeMap, BTreeSet};

use super::plan::{Plan, PlanStep};
use super::trace::TraceStep;
use super::trace_identity::{base_id, is_prefixed, iterations};

/// One way a trace fails to correspond to its plan.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// Occurs when an entry's base id is not a plan step at all.
    NotInPlan {
        /// The trace entry id.
        trace_id: String,
    },
    /// Occurs when the same trace id appears more than once.
    Duplicate {
        /// The repeated id.
        trace_id: String,
    },
    /// Occurs when an id carries a malformed iteration suffix.
    MalformedId {
        /// The trace entry id.
        trace_id: String,
    },
    /// Occurs when an arm or loop-body step appears without an activation
    /// of its branch or loop.
    NoActivation {
        /// The trace entry id.
        trace_id: String,
        /// The branch or loop it belongs to.
        construct: String,
    },
    /// Occurs when a step of an arm that was not selected appears.
    UnselectedArm {
        /// The trace entry id.
        trace_id: String,
        /// The branch.
        branch: String,
        /// The step's arm label.
        label: String,
        /// The label the branch took (empty when it recorded no decision).
        took: String,
    },
    /// Occurs when a loop-body entry's iteration exceeds the iterations
    /// its loop activation recorded.
    IterationNotRecorded {
        /// The trace entry id.
        trace_id: String,
        /// The loop.
        loop_id: String,
    },
    /// Occurs when a control-flow entry carries no decision.
    MissingDecision {
        /// The trace entry id.
        trace_id: String,
    },
    /// Occurs when an entry's `calls` differs from its plan step's.
    CallsDiffer {
        /// The trace entry id.
        trace_id: String,
        /// What the plan said.
        planned: Option<String>,
        /// What the trace said.
        traced: Option<String>,
    },
    /// Occurs (successful Runs only) when an expected plan step never
    /// appears.
    MissingExpected {
        /// The plan step id.
        step_id: String,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::NotInPlan { trace_id } => write!(f, "trace entry '{trace_id}' is not a step of the plan"),
            Mismatch::Duplicate { trace_id } => write!(f, "trace entry '{trace_id}' appears more than once"),
            Mismatch::MalformedId { trace_id } => {
                write!(f, "trace entry '{trace_id}' has a malformed iteration suffix")
            }
            Mismatch::NoActivation { trace_id, construct } => {
                write!(f, "trace entry '{trace_id}' appears without an activation of '{construct}'")
            }
            Mismatch::UnselectedArm { trace_id, branch, label, took } => {
                write!(f, "trace entry '{trace_id}' belongs to arm '{label}' of '{branch}', which took '{took}'")
            }
            Mismatch::IterationNotRecorded { trace_id, loop_id } => {
                write!(f, "trace entry '{trace_id}' is an iteration loop '{loop_id}' did not record")
            }
            Mismatch::MissingDecision { trace_id } => write!(f, "control-flow entry '{trace_id}' carries no decision"),
            Mismatch::CallsDiffer { trace_id, planned, traced } => {
                write!(f, "trace entry '{trace_id}' calls {traced:?} but the plan says {planned:?}")
            }
            Mismatch::MissingExpected { step_id } => {
                write!(f, "plan step '{step_id}' was expected in a successful Run's trace but is absent")
            }
        }
    }
}

struct Activation<'t> {
    iterations: Vec<u32>,
    entry: &'t TraceStep,
}

impl Activation<'_> {
    fn took(&self) -> &str {
        self.entry.decisions.first().map_or("", |d| d.took.as_str())
    }

    fn continues(&self) -> u32 {
        self.entry.decisions.iter().filter(|d| d.took == "continue").count() as u32
    }
}

/// Checks `trace` against `plan` (Part II §5.8.4). `succeeded` is true for
/// a Run with outcome `success`, when every expected step must appear; for
/// a started Run that did not complete, steps not reached may be absent.
/// Returns every mismatch; empty means the trace corresponds.
pub fn check(plan: &Plan, trace: &[TraceStep], succeeded: bool) -> Vec<Mismatch> {
    let mut mismatches = Vec::new();
    let plan_steps: BTreeMap<&str, &PlanStep> = plan.steps.iter().map(|step| (step.id.as_str(), step)).collect();
    let branches: BTreeSet<&str> =
        plan.steps.iter().filter_map(|step| step.arm.as_ref().map(|arm| arm.branch.as_str())).collect();
    let loops: BTreeSet<&str> = plan.steps.iter().filter_map(|step| step.loop_id.as_deref()).collect();

    // Activations of branches and loops, keyed by construct id.
    let mut activations: BTreeMap<&str, Vec<Activation<'_>>> = BTreeMap::new();
    let mut seen_ids = BTreeSet::new();
    let mut seen_bases = BTreeSet::new();
    let entries: Vec<&TraceStep> = trace.iter().filter(|step| !is_prefixed(&step.id)).collect();
    for entry in &entries {
        if !seen_ids.insert(entry.id.as_str()) {
            mismatches.push(Mismatch::Duplicate { trace_id: entry.id.clone() });
        }
        let base = base_id(&entry.id);
        seen_bases.insert(base);
        let Some(suffixes) = iterations(&entry.id) else {
            mismatches.push(Mismatch::MalformedId { trace_id: entry.id.clone() });
            continue;
        };
        if branches.contains(base) || loops.contains(base) {
            if entry.decisions.is_empty() {
                mismatches.push(Mismatch::MissingDecision { trace_id: entry.id.clone() });
            }
            activations.entry(base).or_default().push(Activation { iterations: suffixes, entry });
        }
    }

    for entry in &entries {
        let base = base_id(&entry.id);
        let Some(step) = plan_steps.get(base) else {
            mismatches.push(Mismatch::NotInPlan { trace_id: entry.id.clone() });
            continue;
        };
        let Some(suffixes) = iterations(&entry.id) else { continue };
        if entry.calls.is_some() && entry.calls != step.calls {
            mismatches.push(Mismatch::CallsDiffer {
                trace_id: entry.id.clone(),
                planned: step.calls.clone(),
                traced: entry.calls.clone(),
            });
        }
        if let Some(arm) = &step.arm {
            let activation = activations
                .get(arm.branch.as_str())
                .into_iter()
                .flatten()
                .filter(|a| suffixes.starts_with(&a.iterations))
                .max_by_key(|a| a.iterations.len());
            match activation {
                None => mismatches
                    .push(Mismatch::NoActivation { trace_id: entry.id.clone(), construct: arm.branch.clone() }),
                Some(activation) if activation.took() != arm.label => mismatches.push(Mismatch::UnselectedArm {
                    trace_id: entry.id.clone(),
                    branch: arm.branch.clone(),
                    label: arm.label.clone(),
                    took: activation.took().to_owned(),
                }),
                Some(_) => {}
            }
        }
        if let Some(loop_id) = &step.loop_id {
            let Some((iteration, outer)) = suffixes.split_last() else {
                mismatches.push(Mismatch::NoActivation { trace_id: entry.id.clone(), construct: loop_id.clone() });
                continue;
            };
            let activation =
                activations.get(loop_id.as_str()).into_iter().flatten().find(|a| a.iterations.as_slice() == outer);
            match activation {
                None => {
                    mismatches.push(Mismatch::NoActivation { trace_id: entry.id.clone(), construct: loop_id.clone() })
                }
                Some(activation) if *iteration > activation.continues() => mismatches
                    .push(Mismatch::IterationNotRecorded { trace_id: entry.id.clone(), loop_id: loop_id.clone() }),
                Some(_) => {}
            }
        }
    }

    if succeeded {
        let iterated =
            |loop_id: &str| activations.get(loop_id).is_some_and(|list| list.iter().any(|a| a.continues() > 0));
        for step in &plan.steps {
            let expected = match (&step.arm, &step.loop_id) {
                (None, None) => true,
                (Some(arm), loop_id) => {
                    let selected = activations
                        .get(arm.branch.as_str())
                        .is_some_and(|list| list.iter().any(|a| a.took() == arm.label));
                    selected && loop_id.as_deref().is_none_or(iterated)
                }
                (None, Some(loop_id)) => iterated(loop_id),
            };
            if expected && !seen_bases.contains(step.id.as_str()) {
                mismatches.push(Mismatch::MissingExpected { step_id: step.id.clone() });
            }
        }
    }
    mismatches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;
    use crate::plan::Arm;
    use crate::risk::RiskHints;
    use crate::trace::Decision;

    fn plan_step(id: &str, calls: Option<&str>, arm: Option<(&str, &str)>, loop_id: Option<&str>) -> PlanStep {
        PlanStep {
            id: id.into(),
            calls: calls.map(Into::into),
            arm: arm.map(|(branch, label)| Arm { branch: branch.into(), label: label.into() }),
            loop_id: loop_id.map(Into::into),
            risk: "safe".into(),
            risk_hints: RiskHints::SAFE,
        }
    }

    fn entry(id: &str, calls: Option<&str>) -> TraceStep {
        TraceStep {
            id: id.into(),
            calls: calls.map(Into::into),
            input: None,
            output: None,
            outcome: Outcome::success(),
            t_ms: None,
            decisions: vec![],
            simulated: None,
        }
    }

    fn decided(id: &str, took: &[&str]) -> TraceStep {
        let mut step = entry(id, None);
        step.decisions = took
            .iter()
            .map(|t| Decision {
                at: crate::trace_identity::base_id(id).into(),
                took: (*t).into(),
                because: "test".into(),
            })
            .collect();
        step
    }

    /// fetch; check (then: notify / else: skip); each (body: item); done
    fn plan() -> Plan {
        Plan::new(
            vec![
                plan_step("fetch", Some("cap_fetch"), None, None),
                plan_step("check", None, None, None),
                plan_step("notify", Some("cap_notify"), Some(("check", "then")), None),
                plan_step("skip", None, Some(("check", "else")), None),
                plan_step("each", None, None, None),
                plan_step("item", Some("cap_item"), None, Some("each")),
                plan_step("done", None, None, None),
            ],
            "safe".into(),
        )
    }

    #[test]
    fn a_faithful_trace_corresponds() {
        let trace = vec![
            entry("fetch", Some("cap_fetch")),
            decided("check", &["then"]),
            entry("notify", Some("cap_notify")),
            decided("each", &["continue", "continue", "exit"]),
            entry("item#1", Some("cap_item")),
            entry("item#2", Some("cap_item")),
            entry("done", None),
        ];
        assert_eq!(check(&plan(), &trace, true), vec![]);
    }

    #[test]
    fn a_zero_iteration_loop_needs_no_body() {
        let trace = vec![
            entry("fetch", Some("cap_fetch")),
            decided("check", &["else"]),
            entry("skip", None),
            decided("each", &["exit"]),
            entry("done", None),
        ];
        assert_eq!(check(&plan(), &trace, true), vec![]);
    }

    #[test]
    fn unselected_arm_steps_are_refused() {
        let trace = vec![
            entry("fetch", Some("cap_fetch")),
            decided("check", &["else"]),
            entry("notify", Some("cap_notify")),
            decided("each", &["exit"]),
            entry("done", None),
        ];
        let found = check(&plan(), &trace, false);
        assert!(found.iter().any(
            |m| matches!(m, Mismatch::UnselectedArm { trace_id, took, .. } if trace_id == "notify" && took == "else")
        ));
    }

    #[test]
    fn missing_expected_steps_fail_only_successful_runs() {
        let prefix = vec![entry("fetch", Some("cap_fetch"))];
        assert_eq!(check(&plan(), &prefix, false), vec![]);
        let found = check(&plan(), &prefix, true);
        assert!(found.contains(&Mismatch::MissingExpected { step_id: "check".into() }));
        assert!(found.contains(&Mismatch::MissingExpected { step_id: "done".into() }));
    }

    #[test]
    fn invented_and_duplicated_entries_are_refused() {
        let trace = vec![entry("fetch", Some("cap_fetch")), entry("fetch", Some("cap_fetch")), entry("ghost", None)];
        let found = check(&plan(), &trace, false);
        assert!(found.contains(&Mismatch::Duplicate { trace_id: "fetch".into() }));
        assert!(found.contains(&Mismatch::NotInPlan { trace_id: "ghost".into() }));
    }

    #[test]
    fn loop_body_needs_a_recorded_iteration() {
        let trace = vec![
            entry("fetch", Some("cap_fetch")),
            decided("each", &["continue", "exit"]),
            entry("item#2", Some("cap_item")),
        ];
        let found = check(&plan(), &trace, false);
        assert!(found.contains(&Mismatch::IterationNotRecorded { trace_id: "item#2".into(), loop_id: "each".into() }));
        let orphan = vec![entry("item#1", Some("cap_item"))];
        assert!(check(&plan(), &orphan, false).iter().any(|m| matches!(m, Mismatch::NoActivation { .. })));
    }

    #[test]
    fn calls_must_match_the_plan_and_control_flow_needs_decisions() {
        let trace = vec![entry("fetch", Some("cap_other")), entry("check", None)];
        let found = check(&plan(), &trace, false);
        assert!(found.iter().any(|m| matches!(m, Mismatch::CallsDiffer { trace_id, .. } if trace_id == "fetch")));
        assert!(found.contains(&Mismatch::MissingDecision { trace_id: "check".into() }));
    }

    #[test]
    fn branch_inside_a_loop_is_matched_per_activation() {
        let plan = Plan::new(
            vec![
                plan_step("each", None, None, None),
                plan_step("gate", None, None, Some("each")),
                plan_step("yes", Some("cap_yes"), Some(("gate", "then")), Some("each")),
                plan_step("no", Some("cap_no"), Some(("gate", "else")), Some("each")),
            ],
            "safe".into(),
        );
        let trace = vec![
            decided("each", &["continue", "continue", "exit"]),
            decided("gate#1", &["then"]),
            entry("yes#1", Some("cap_yes")),
            decided("gate#2", &["else"]),
            entry("no#2", Some("cap_no")),
        ];
        assert_eq!(check(&plan, &trace, true), vec![]);
        let wrong =
            vec![decided("each", &["continue", "exit"]), decided("gate#1", &["then"]), entry("no#1", Some("cap_no"))];
        assert!(check(&plan, &wrong, false).iter().any(|m| matches!(m, Mismatch::UnselectedArm { .. })));
    }

    #[test]
    fn expanded_entries_take_no_part() {
        let trace = vec![entry("fetch", Some("cap_fetch")), entry("fetch/inner#3", Some("anything"))];
        assert_eq!(check(&plan(), &trace, false), vec![]);
    }
}
