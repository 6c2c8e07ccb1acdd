//! What the host can stand behind about a Run's trace (Part II §5.8.4):
//! whether the calls a trace claims are the invocations and statements the
//! host performed (`calls_mismatch`), and the trace it builds from those
//! alone when the component's own is missing or untrustworthy
//! (`host_trace`).

use pilotage_protocol::outcome::{ERROR, Outcome};
use pilotage_protocol::trace::{Trace, TraceLevel, TraceStep};
use serde_json::Value;

use crate::effects::{Invocation, StatementRun};

/// Differences between the calls a trace claims and the invocations the
/// host performed: a hidden call, an invented call, or a call attributed to
/// another step (matched as multisets of (step id, entry)).
///
/// A data-source Language names the relations a statement reads or
/// changes in reference sub-steps (`stmt-2.ref-1`, Part IV §7): such a
/// step, whose id is `<statement step>.<suffix>`, is backed by the
/// statement the host ran for `<statement step>` (its `calls` must still
/// match the plan: the correspondence check sees to that).
pub(crate) fn calls_mismatch(
    steps: &[TraceStep],
    invocations: &[Invocation],
    statements: &[StatementRun],
) -> Vec<String> {
    let mut performed: Vec<(&str, &str)> =
        invocations.iter().map(|i| (i.step_id.as_str(), i.entry_id.as_str())).collect();
    let mut problems = Vec::new();
    for step in steps {
        let Some(calls) = step.calls.as_deref() else { continue };
        // A step that names a call but was never invoked is allowed only
        // when it failed before invoking (its outcome says so).
        match performed.iter().position(|(id, entry)| *id == step.id && *entry == calls) {
            Some(index) => {
                performed.remove(index);
            }
            None if !step.outcome.ok && step.output.as_ref().is_none_or(Value::is_null) => {}
            None if step
                .id
                .split_once('.')
                .is_some_and(|(statement, _)| statements.iter().any(|run| run.step_id == statement)) => {}
            None => problems
                .push(format!("its trace claims step '{}' called '{calls}', which the host never invoked", step.id)),
        }
    }
    for (id, entry) in performed {
        problems.push(format!("it invoked '{entry}' for step '{id}' and its trace does not show it"));
    }
    problems
}

/// The trace the host can vouch for when the component's own trace is
/// missing or untrustworthy: one entry per invocation it performed and per
/// statement it ran, in the order it did them. A statement's entry has the
/// component's step id, `input` `{"statement", "params"}` and `output`
/// `{"rows_matched"}` (`null` when it failed).
pub(crate) fn host_trace(run_id: &str, invocations: &[Invocation], statements: &[StatementRun]) -> Trace {
    let invocation_step = |invocation: &Invocation| TraceStep {
        id: invocation.step_id.clone(),
        calls: Some(invocation.entry_id.clone()),
        input: Some(invocation.input.clone()),
        output: Some(invocation.result.clone().unwrap_or(Value::Null)),
        outcome: match &invocation.result {
            Ok(_) => Outcome::success(),
            Err(error) => Outcome::failure(ERROR, error.to_string()),
        },
        t_ms: Some(invocation.t_ms),
        decisions: Vec::new(),
        simulated: invocation.simulated.then_some(true),
    };
    let statement_step = |run: &StatementRun| TraceStep {
        id: run.step_id.clone(),
        calls: None,
        input: Some(serde_json::json!({"statement": run.statement, "params": run.params})),
        output: Some(match &run.result {
            Ok(rows_matched) => serde_json::json!({"rows_matched": rows_matched}),
            Err(_) => Value::Null,
        }),
        outcome: match &run.result {
            Ok(_) => Outcome::success(),
            Err(error) => Outcome::failure(ERROR, error.to_string()),
        },
        t_ms: Some(run.t_ms),
        decisions: Vec::new(),
        simulated: None,
    };
    let mut steps = Vec::with_capacity(invocations.len() + statements.len());
    let mut pending = statements.iter().peekable();
    for (index, invocation) in invocations.iter().enumerate() {
        while let Some(run) = pending.next_if(|run| run.after_invocations <= index) {
            steps.push(statement_step(run));
        }
        steps.push(invocation_step(invocation));
    }
    steps.extend(pending.map(statement_step));
    Trace {
        run_id: run_id.to_owned(),
        level: TraceLevel::Full,
        steps,
        stats: Some(serde_json::json!({"recorded_by": "host"})),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::effects::SqlError;

    fn invocation(step: &str, entry: &str) -> Invocation {
        Invocation {
            step_id: step.into(),
            entry_id: entry.into(),
            input: Value::Null,
            result: Ok(Value::Null),
            t_ms: 0,
            simulated: false,
        }
    }

    fn step(id: &str, calls: Option<&str>) -> TraceStep {
        TraceStep {
            id: id.into(),
            calls: calls.map(Into::into),
            input: None,
            output: Some(Value::Null),
            outcome: Outcome::success(),
            t_ms: None,
            decisions: vec![],
            simulated: None,
        }
    }

    #[test]
    fn matching_calls_pass() {
        assert!(
            calls_mismatch(
                &[step("a", Some("x")), step("b#1", Some("y"))],
                &[invocation("a", "x"), invocation("b#1", "y")],
                &[]
            )
            .is_empty()
        );
    }

    #[test]
    fn hidden_and_invented_calls_are_found() {
        let hidden = calls_mismatch(&[], &[invocation("a", "x")], &[]);
        assert_eq!(hidden.len(), 1);
        assert!(hidden[0].contains("does not show"));
        let invented = calls_mismatch(&[step("a", Some("x"))], &[], &[]);
        assert!(invented[0].contains("never invoked"));
        let moved = calls_mismatch(&[step("b", Some("x"))], &[invocation("a", "x")], &[]);
        assert_eq!(moved.len(), 2);
    }

    #[test]
    fn a_step_that_failed_before_invoking_may_name_its_call() {
        let mut failed = step("a", Some("x"));
        failed.outcome = Outcome::failure("error", "input resolved to nothing");
        failed.output = None;
        assert!(calls_mismatch(&[failed], &[], &[]).is_empty());
    }

    #[test]
    fn the_host_trace_shows_statements_and_invocations_in_the_order_they_ran() {
        let ran = |step: &str, after_invocations: usize, result: Result<u64, SqlError>| StatementRun {
            step_id: step.into(),
            statement: format!("SELECT '{step}'"),
            params: json!([1]),
            result,
            t_ms: 3,
            after_invocations,
        };
        let statements = [ran("stmt-1", 0, Ok(2)), ran("stmt-3", 1, Err(SqlError::Statement("canceled".into())))];
        let trace = host_trace("run_x", &[invocation("call-2", "x")], &statements);
        let ids: Vec<&str> = trace.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["stmt-1", "call-2", "stmt-3"]);
        assert_eq!(trace.steps[0].input, Some(json!({"statement": "SELECT 'stmt-1'", "params": [1]})));
        assert_eq!(trace.steps[0].output, Some(json!({"rows_matched": 2})));
        assert_eq!(trace.steps[2].output, Some(Value::Null));
        assert_eq!(trace.steps[2].outcome, Outcome::failure(ERROR, "canceled"));
    }

    #[test]
    fn reference_sub_steps_are_backed_by_their_statement() {
        let ran = StatementRun {
            step_id: "stmt-1".into(),
            statement: "SELECT 1".into(),
            params: json!([]),
            result: Ok(1),
            t_ms: 0,
            after_invocations: 0,
        };
        let reference = step("stmt-1.ref-1", Some("s.customers"));
        assert!(calls_mismatch(std::slice::from_ref(&reference), &[], std::slice::from_ref(&ran)).is_empty());
        // Without the statement having run, the claim is invented.
        assert_eq!(calls_mismatch(&[reference], &[], &[]).len(), 1);
        let unrelated = step("stmt-2.ref-1", Some("s.customers"));
        assert_eq!(calls_mismatch(&[unrelated], &[], &[ran]).len(), 1);
    }
}
