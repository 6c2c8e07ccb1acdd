//! Execution: each validated statement, in order, through the host's `sql`
//! import, with the flat trace of Part II §5.8.2 (`stmt-k` and its
//! `stmt-k.ref-j` reference sub-steps, exactly as planned).
//!
//! The host runs only statements the validation returned, inside one
//! transaction per Run (read-only when the plan only reads), and commits
//! only a Run it judges a success.

use pilotage_guest_sdk::diag::{ERROR, failure, success};
use pilotage_guest_sdk::trace::TraceBuilder;
use pilotage_guest_sdk::{Catalog, Effects, Outcome, QueryResult, RunResult, Severity, SqlError};
use serde_json::{Map, Value, json};

use crate::codes;
use crate::params::bind;
use crate::validate::{check, reference_id, statement_id};

fn stopped(message: impl Into<String>) -> RunResult {
    RunResult { outcome: failure(ERROR, message), output: None, steps: Vec::new(), stats: None }
}

/// Runs `text` (already validated by the host) with `input`, resolving
/// names against `host`'s catalog exactly as validation did, each
/// statement through [`Effects::query`] (the host's `sql` import).
pub fn execute(text: &str, input: Option<&Value>, host: &mut (impl Catalog + Effects)) -> RunResult {
    let (checked, diagnostics) = check(text, &*host);
    let Some(checked) = checked.filter(|_| !diagnostics.iter().any(|d| d.severity == Severity::Error)) else {
        return stopped("the program is not valid; validate it first");
    };
    let params = match bind(checked.parameters, input) {
        Ok(params) => params,
        Err(_) => return stopped("the input does not bind to the program's parameters"),
    };
    let mut trace = TraceBuilder::new();
    let mut last: Option<QueryResult> = None;
    let mut summary = Vec::new();
    for (index, analysis) in checked.analyses.iter().enumerate() {
        let Some(statement) = checked.runnable[index].as_deref() else {
            return stopped("the program is not valid; validate it first");
        };
        let id = statement_id(index);
        let bound = Value::Array(params[..checked.needed[index] as usize].to_vec());
        let input = json!({"statement": statement, "params": bound});
        let result = host.query(&id, statement, &bound);
        let (outcome, output, t_ms) = match &result {
            Ok(result) => (success(), Some(statement_output(result).to_string()), Some(result.elapsed_ms)),
            Err(SqlError::Failed(message) | SqlError::Refused(message)) => {
                (failure(ERROR, message.clone()), None, None)
            }
        };
        trace.step(id.clone(), None, Some(input.to_string()), output, outcome.clone(), t_ms);
        for (position, (entry, access)) in analysis.references.iter().enumerate() {
            let input = json!({"relation": entry, "access": access.word()});
            let output =
                outcome.ok.then(|| json!({"relation": entry, "access": access.word(), "statement": id}).to_string());
            trace.step(
                reference_id(index, position),
                Some(entry.clone()),
                Some(input.to_string()),
                output,
                outcome.clone(),
                None,
            );
        }
        match result {
            Ok(result) => {
                summary.push(json!({
                    "step": id,
                    "rows_matched": result.rows_matched,
                    "rows_returned": rows_of(&result).len(),
                    "truncated": result.truncated,
                    "elapsed_ms": result.elapsed_ms,
                }));
                last = Some(result);
            }
            Err(error) => {
                let outcome = run_outcome(&id, &error);
                let stats = Some(json!({"statements": summary}).to_string());
                return RunResult { outcome, output: None, steps: trace.finish(), stats };
            }
        }
    }
    let output = last.as_ref().map(|result| rows_as_objects(result).to_string());
    RunResult {
        outcome: success(),
        output,
        steps: trace.finish(),
        stats: Some(json!({"statements": summary}).to_string()),
    }
}

fn run_outcome(step: &str, error: &SqlError) -> Outcome {
    match error {
        SqlError::Failed(message) => {
            failure(codes::ROLLED_BACK, format!("{step} failed and the Run's transaction was rolled back: {message}"))
        }
        SqlError::Refused(message) => failure(ERROR, format!("{step} was refused by the platform: {message}")),
    }
}

fn rows_of(result: &QueryResult) -> Vec<Value> {
    match serde_json::from_str(&result.rows) {
        Ok(Value::Array(rows)) => rows,
        _ => Vec::new(),
    }
}

/// A statement step's output. The counts come first so a `summary`
/// trace's truncation preview still shows them.
fn statement_output(result: &QueryResult) -> Value {
    let rows = rows_of(result);
    json!({
        "rows_matched": result.rows_matched,
        "rows_returned": rows.len(),
        "truncated": result.truncated,
        "columns": result.columns.iter().map(|c| json!({"name": c.name, "type": c.type_name})).collect::<Vec<_>>(),
        "rows": rows,
    })
}

/// The Run's output: the last statement's rows as objects keyed by column
/// name; a repeated name gets `_2`, `_3`, … in column order.
pub fn rows_as_objects(result: &QueryResult) -> Value {
    let mut names: Vec<String> = Vec::new();
    for column in &result.columns {
        let mut name = column.name.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{}_{n}", column.name);
            n += 1;
        }
        names.push(name);
    }
    let rows = rows_of(result)
        .into_iter()
        .map(|row| {
            let values = match row {
                Value::Array(values) => values,
                other => vec![other],
            };
            let object: Map<String, Value> = names.iter().cloned().zip(values).collect();
            Value::Object(object)
        })
        .collect();
    Value::Array(rows)
}
