//! A trace builder for the flat execution log of Part II §5.8.2: every
//! executed step appended once, in the order execution reached it, with
//! ids qualified `#n` for each enclosing loop (outermost first, 1-based,
//! restarting for each activation) and control-flow entries carrying their
//! decisions.
//!
//! ```
//! use pilotage_guest_sdk::trace::TraceBuilder;
//! use pilotage_guest_sdk::diag::success;
//! let mut trace = TraceBuilder::new();
//! let each = trace.enter_loop("each");
//! for _ in 0..2 {
//!     trace.next_iteration(each, "items remain");
//!     let id = trace.id("fetch");
//!     trace.step(id, Some("cap_fetch".into()), None, None, success(), None);
//! }
//! trace.exit_loop(each, "no items remain");
//! let ids: Vec<_> = trace.steps().iter().map(|s| s.id.clone()).collect();
//! assert_eq!(ids, ["each", "fetch#1", "fetch#2"]);
//! ```

use crate::{Decision, Outcome, TraceStep};

/// Identifies an open loop activation inside a [`TraceBuilder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopHandle {
    entry: usize,
    depth: usize,
}

impl LoopHandle {
    /// The index of the loop's own entry in the trace.
    pub fn index(&self) -> usize {
        self.entry
    }
}

/// Builds the flat trace of one Run.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    steps: Vec<TraceStep>,
    /// Current iteration of each open loop, outermost first.
    iterations: Vec<u32>,
}

impl TraceBuilder {
    /// An empty trace.
    pub fn new() -> TraceBuilder {
        TraceBuilder::default()
    }

    /// The trace id of program step `base` at the current position: `base`
    /// followed by `#n` for each open loop.
    pub fn id(&self, base: &str) -> String {
        let mut id = base.to_owned();
        for n in &self.iterations {
            id.push('#');
            id.push_str(&n.to_string());
        }
        id
    }

    /// Appends a non-control-flow step with its full input and output
    /// (JSON text). Returns its index.
    pub fn step(
        &mut self,
        id: String,
        calls: Option<String>,
        input: Option<String>,
        output: Option<String>,
        outcome: Outcome,
        t_ms: Option<u64>,
    ) -> usize {
        self.steps.push(TraceStep { id, calls, input, output, outcome, t_ms, decisions: Vec::new() });
        self.steps.len() - 1
    }

    /// Appends a branch entry for program step `base` at the current
    /// position, with its one decision: the arm label taken and why.
    pub fn branch(&mut self, base: &str, took: &str, because: impl Into<String>) -> usize {
        let id = self.id(base);
        let decision = Decision { at: id.clone(), took: took.to_owned(), because: because.into() };
        self.steps.push(TraceStep {
            id,
            calls: None,
            input: None,
            output: None,
            outcome: crate::diag::success(),
            t_ms: None,
            decisions: vec![decision],
        });
        self.steps.len() - 1
    }

    /// Appends the entry of a loop activation for program step `base` and
    /// opens it. Its decisions are added by [`next_iteration`] and
    /// [`exit_loop`]; a loop that never iterates carries exactly one `exit`.
    ///
    /// [`next_iteration`]: TraceBuilder::next_iteration
    /// [`exit_loop`]: TraceBuilder::exit_loop
    pub fn enter_loop(&mut self, base: &str) -> LoopHandle {
        let id = self.id(base);
        self.steps.push(TraceStep {
            id,
            calls: None,
            input: None,
            output: None,
            outcome: crate::diag::success(),
            t_ms: None,
            decisions: Vec::new(),
        });
        self.iterations.push(0);
        LoopHandle { entry: self.steps.len() - 1, depth: self.iterations.len() }
    }

    /// Records a `continue` decision and moves the loop to its next
    /// iteration; ids built afterwards carry the new iteration number.
    pub fn next_iteration(&mut self, handle: LoopHandle, because: impl Into<String>) {
        self.iterations.truncate(handle.depth);
        if let Some(current) = self.iterations.last_mut() {
            *current += 1;
        }
        self.decide(handle, "continue", because.into());
    }

    /// Records the `exit` decision and closes the loop.
    pub fn exit_loop(&mut self, handle: LoopHandle, because: impl Into<String>) {
        self.decide(handle, "exit", because.into());
        self.iterations.truncate(handle.depth - 1);
    }

    /// Closes the loop without an `exit` decision: execution stopped inside
    /// it (a failed step). The trace so far stays as it is.
    pub fn abandon_loop(&mut self, handle: LoopHandle) {
        self.iterations.truncate(handle.depth - 1);
    }

    /// Sets the outcome of an appended entry (for example a loop that
    /// stopped on a failed body step).
    pub fn set_outcome(&mut self, index: usize, outcome: Outcome) {
        if let Some(step) = self.steps.get_mut(index) {
            step.outcome = outcome;
        }
    }

    fn decide(&mut self, handle: LoopHandle, took: &str, because: String) {
        if let Some(step) = self.steps.get_mut(handle.entry) {
            let at = step.id.clone();
            step.decisions.push(Decision { at, took: took.to_owned(), because });
        }
    }

    /// The entries so far, in execution order.
    pub fn steps(&self) -> &[TraceStep] {
        &self.steps
    }

    /// The finished trace.
    pub fn finish(self) -> Vec<TraceStep> {
        self.steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::success;

    fn ids(trace: &TraceBuilder) -> Vec<String> {
        trace.steps().iter().map(|s| s.id.clone()).collect()
    }

    #[test]
    fn nested_loops_restart_inner_counters() {
        let mut trace = TraceBuilder::new();
        let outer = trace.enter_loop("outer");
        for _ in 0..2 {
            trace.next_iteration(outer, "more");
            let inner_id = trace.id("inner");
            let inner = trace.enter_loop("inner");
            for _ in 0..2 {
                trace.next_iteration(inner, "more");
                let id = trace.id("work");
                trace.step(id, None, None, None, success(), None);
            }
            trace.exit_loop(inner, "done");
            assert!(inner_id.starts_with("inner#"));
        }
        trace.exit_loop(outer, "done");
        assert_eq!(ids(&trace), ["outer", "inner#1", "work#1#1", "work#1#2", "inner#2", "work#2#1", "work#2#2"]);
        let outer_decisions: Vec<_> = trace.steps()[0].decisions.iter().map(|d| d.took.as_str()).collect();
        assert_eq!(outer_decisions, ["continue", "continue", "exit"]);
    }

    #[test]
    fn a_zero_iteration_loop_has_one_exit() {
        let mut trace = TraceBuilder::new();
        let each = trace.enter_loop("each");
        trace.exit_loop(each, "list is empty");
        let steps = trace.finish();
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].decisions.len(), 1);
        assert_eq!(steps[0].decisions[0].took, "exit");
    }

    #[test]
    fn branches_carry_their_decision_and_qualified_id() {
        let mut trace = TraceBuilder::new();
        let each = trace.enter_loop("each");
        trace.next_iteration(each, "more");
        trace.branch("gate", "then", "x > 1 was true");
        trace.abandon_loop(each);
        assert_eq!(ids(&trace), ["each", "gate#1"]);
        assert_eq!(trace.steps()[1].decisions[0].at, "gate#1");
        assert_eq!(trace.id("after"), "after");
    }
}
