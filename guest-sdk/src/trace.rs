//! A trace builder for the flat execution log of Part II §5.8.2: every
//! executed step appended once, in the order execution reached it, with
//! ids qualified `#n` for each enclosing loop (outermost first, 1-based,
//! restarting for each activation) and control-flow entries carrying their
//! decisions. [`TraceBuilder::invoke`] makes a call through the effects
//! and records it; [`TraceBuilder::run_result`] ends the Run.
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

use serde_json::Value;

use crate::diag::{ERROR, PARTIAL, failure, success};
use crate::language::Effects;
use crate::{Decision, InvokeError, Outcome, RunResult, TraceStep};

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
    /// Whether [`invoke`](TraceBuilder::invoke) has called an entry.
    invoked: bool,
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

    /// Adds `decisions` to the appended entry at `index` (for example one
    /// decision per condition after a branch's own).
    pub fn add_decisions(&mut self, index: usize, decisions: impl IntoIterator<Item = Decision>) {
        if let Some(step) = self.steps.get_mut(index) {
            step.decisions.extend(decisions);
        }
    }

    /// Invokes `entry` with `input` through `host` for program step `base`
    /// (its trace id qualified by the open loops) and appends the call's
    /// step with [`call`](TraceBuilder::call). A failure's message is
    /// `failed(host's message)`, e.g. `step 'flag': HTTP 404`; whether
    /// refused or failed, the Run should stop (Part II §6.5).
    ///
    /// # Errors
    /// The entry failed or the host refused the call: the message.
    pub fn invoke(
        &mut self,
        host: &mut impl Effects,
        base: &str,
        entry: &str,
        input: &Value,
        failed: impl FnOnce(&str) -> String,
    ) -> Result<Value, String> {
        self.invoked = true;
        let result = host.invoke(&self.id(base), entry, input);
        let result = result.map_err(|(InvokeError::Refused(message) | InvokeError::Failed(message))| failed(&message));
        self.call(base, entry, input, result)
    }

    /// Appends the step of a call to `entry` for program step `base` at
    /// the current position (Part II §5.8): `calls`, the JSON text of
    /// `input`, and either the entry's output with outcome `success` or a
    /// `null` output with outcome `error` carrying the message. A step
    /// that failed before invoking (its input could not be evaluated) is
    /// recorded this way too, with a `null` input. Hands `result` back.
    ///
    /// # Errors
    /// `result`'s error, unchanged.
    pub fn call(
        &mut self,
        base: &str,
        entry: &str,
        input: &Value,
        result: Result<Value, String>,
    ) -> Result<Value, String> {
        let (outcome, output) = match &result {
            Ok(output) => (success(), output.to_string()),
            Err(message) => (failure(ERROR, message.clone()), Value::Null.to_string()),
        };
        let id = self.id(base);
        self.step(id, Some(entry.to_owned()), Some(input.to_string()), Some(output), outcome, None);
        result
    }

    /// The Run's result (Part II §5.7) with this trace: outcome `success`
    /// and `output` as JSON text (`None`: the Run has none), or, for a Run
    /// that stopped with a message, `partial` once
    /// [`invoke`](TraceBuilder::invoke) called an entry (effects may
    /// remain) and `error` before, without output.
    pub fn run_result(self, result: Result<Option<Value>, String>) -> RunResult {
        let outcome = match &result {
            Ok(_) => success(),
            Err(message) => failure(if self.invoked { PARTIAL } else { ERROR }, message.clone()),
        };
        RunResult {
            outcome,
            output: result.ok().flatten().map(|output| output.to_string()),
            steps: self.steps,
            stats: None,
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
    use serde_json::json;

    use super::*;

    /// Answers every entry with `{"ok": true}`, but fails `cap_fail` and
    /// refuses `cap_refused`; keeps the step ids it heard.
    struct Host(Vec<String>);

    impl Effects for Host {
        fn invoke(&mut self, step_id: &str, entry_id: &str, _input: &Value) -> Result<Value, InvokeError> {
            self.0.push(step_id.to_owned());
            match entry_id {
                "cap_fail" => Err(InvokeError::Failed("HTTP 404".into())),
                "cap_refused" => Err(InvokeError::Refused("not in the plan".into())),
                _ => Ok(json!({"ok": true})),
            }
        }
        fn now(&self) -> u64 {
            0
        }
    }

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

    #[test]
    fn calls_record_input_output_and_outcome() {
        let (mut trace, mut host) = (TraceBuilder::new(), Host(Vec::new()));
        let each = trace.enter_loop("each");
        trace.next_iteration(each, "more");
        let good = trace.invoke(&mut host, "read", "cap_read", &json!({"id": 1}), |m| format!("step 'read': {m}"));
        assert_eq!(good, Ok(json!({"ok": true})));
        trace.exit_loop(each, "done");
        let bad = trace.invoke(&mut host, "drop", "cap_fail", &json!({}), |m| format!("step 'drop': {m}"));
        assert_eq!(bad, Err("step 'drop': HTTP 404".into()));
        let refused = trace.invoke(&mut host, "x", "cap_refused", &json!({}), |m| format!("x: {m}"));
        assert_eq!(refused, Err("x: not in the plan".into()));
        assert_eq!(host.0, ["read#1", "drop", "x"], "the host hears the qualified trace id");
        let steps = trace.steps();
        assert_eq!((steps[1].id.as_str(), steps[1].input.as_deref()), ("read#1", Some(r#"{"id":1}"#)));
        assert_eq!((steps[1].output.as_deref(), &steps[1].outcome), (Some(r#"{"ok":true}"#), &success()));
        assert_eq!(steps[2].calls.as_deref(), Some("cap_fail"));
        assert_eq!((steps[2].output.as_deref(), steps[2].outcome.status.as_str()), (Some("null"), "error"));
    }

    #[test]
    fn a_run_fails_partial_after_an_invocation_and_error_before() {
        let mut before = TraceBuilder::new();
        let failed = before.call("flag", "cap_flag", &Value::Null, Err("step 'flag': 'x' has no value".into()));
        assert!(failed.is_err());
        let result = before.run_result(Err("step 'flag': 'x' has no value".into()));
        assert_eq!((result.outcome.status.as_str(), result.output, result.steps.len()), ("error", None, 1));
        let mut after = TraceBuilder::new();
        let _ = after.invoke(&mut Host(Vec::new()), "flag", "cap_fail", &json!({}), |m| m.to_owned());
        assert_eq!(after.run_result(Err("HTTP 404".into())).outcome, failure(PARTIAL, "HTTP 404"));
        let done = TraceBuilder::new().run_result(Ok(Some(json!({"name": "Amira"}))));
        assert_eq!((done.outcome, done.output.as_deref()), (success(), Some(r#"{"name":"Amira"}"#)));
        assert_eq!(TraceBuilder::new().run_result(Ok(None)).output, None);
    }

    #[test]
    fn added_decisions_follow_the_branch_own() {
        let mut trace = TraceBuilder::new();
        let when = trace.branch("when", "else", "door is false");
        trace.add_decisions(when, [Decision { at: "door".into(), took: "false".into(), because: "closed".into() }]);
        let took: Vec<_> = trace.steps()[0].decisions.iter().map(|d| d.took.as_str()).collect();
        assert_eq!(took, ["else", "false"]);
    }
}
