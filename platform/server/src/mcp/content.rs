//! The text `content` of execute and trace-fetch results (Part III §6):
//! the JSON of `structuredContent` while it is small, and above
//! [`CONTENT_JSON_MAX_BYTES`] a short human-readable summary instead (the
//! outcome, the trace's step counts by status, the first decisions, the
//! output's size, and how to fetch the rest), since MCP hosts cut a long
//! tool result to a preview and a model that sees only `content` would see
//! neither the outcome nor the decisions. `structuredContent` stays whole:
//! it is the contract, and no Client may parse this text for it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CallToolResult};
use serde_json::Value;

use crate::operations::OpError;

/// Above this many bytes of JSON, the text block is a summary.
pub(crate) const CONTENT_JSON_MAX_BYTES: usize = 24 * 1024;

/// Kinds of decision (place and choice) quoted in a summary, at most.
const DECISIONS_SHOWN: usize = 10;

/// Characters of one decision's `because` quoted in a summary, at most.
const BECAUSE_CHARS: usize = 160;

/// The text block for an execute or trace-fetch result `value`, whose
/// compact JSON is `json`: `json` itself when it is at most
/// [`CONTENT_JSON_MAX_BYTES`], else the summary, which names `trace_tool`
/// (the Language's trace-fetch tool, when it has one) for the rest.
pub(crate) fn run_text(value: &Value, json: String, trace_tool: Option<&str>) -> String {
    if json.len() <= CONTENT_JSON_MAX_BYTES {
        return json;
    }
    summary(value, json.len(), trace_tool)
}

fn summary(value: &Value, bytes: usize, trace_tool: Option<&str>) -> String {
    let mut text = String::new();
    let run_id = value["run_id"].as_str().or_else(|| value["trace"]["run_id"].as_str()).unwrap_or("?");
    match value.get("outcome") {
        Some(outcome) => {
            let status = outcome["status"].as_str().unwrap_or("?");
            let ok = if outcome["ok"] == Value::Bool(true) { "ok" } else { "not ok" };
            let _ = write!(text, "Run {run_id}: {status} ({ok})");
            if let Some(error) = outcome["error"].as_str() {
                let _ = write!(text, ": {}", clipped(error, 300));
            }
            text.push('\n');
        }
        None => {
            let _ = writeln!(text, "Trace of Run {run_id}");
        }
    }
    if let Some(output) = value.get("output").filter(|output| !output.is_null()) {
        let _ = writeln!(text, "Output: {} bytes of JSON, in structuredContent.output.", output.to_string().len());
    }
    if let Some(trace) = value.get("trace").filter(|trace| trace.is_object()) {
        let steps = trace["steps"].as_array().map(Vec::as_slice).unwrap_or_default();
        let mut statuses: BTreeMap<&str, usize> = BTreeMap::new();
        for step in steps {
            *statuses.entry(step["outcome"]["status"].as_str().unwrap_or("?")).or_default() += 1;
        }
        let counted: Vec<String> = statuses.iter().map(|(status, n)| format!("{n} {status}")).collect();
        let level = trace["level"].as_str().unwrap_or("?");
        let _ = writeln!(text, "Trace ({level}): {} steps ({}).", steps.len(), counted.join(", "));
        let failed: Vec<&str> = steps
            .iter()
            .filter(|step| step["outcome"]["ok"] == Value::Bool(false))
            .filter_map(|step| step["id"].as_str())
            .take(5)
            .collect();
        if !failed.is_empty() {
            let _ = writeln!(text, "First failed steps: {}.", failed.join(", "));
        }
        // Decisions grouped by where they were taken and what was taken, in
        // the order first seen: a loop's thousand `continue`s are one line.
        let mut groups: Vec<(&str, &str, &str, usize)> = Vec::new();
        let mut total = 0;
        for decision in steps.iter().flat_map(|step| step["decisions"].as_array().into_iter().flatten()) {
            total += 1;
            let at = decision["at"].as_str().unwrap_or("?");
            let took = decision["took"].as_str().unwrap_or("?");
            match groups.iter_mut().find(|(a, t, _, _)| *a == at && *t == took) {
                Some(group) => group.3 += 1,
                None => groups.push((at, took, decision["because"].as_str().unwrap_or(""), 1)),
            }
        }
        if total > 0 {
            let _ = writeln!(text, "Decisions ({total}):");
            for (at, took, because, count) in groups.iter().take(DECISIONS_SHOWN) {
                let because = clipped(because, BECAUSE_CHARS);
                let _ = match count {
                    1 => writeln!(text, "- at {at}: took {took}, because {because}"),
                    n => writeln!(text, "- at {at}: took {took} {n} times (the first because {because})"),
                };
            }
            if groups.len() > DECISIONS_SHOWN {
                let _ = writeln!(text, "- and {} more kinds of decision", groups.len() - DECISIONS_SHOWN);
            }
        }
    }
    let _ = write!(
        text,
        "The whole result ({bytes} bytes of JSON) is in structuredContent; this text is a summary because it is \
         too long to show."
    );
    if let Some(tool) = trace_tool {
        let _ = write!(
            text,
            " Fetch the trace again with {tool} {{\"run_id\": \"{run_id}\", \"trace_level\": \"summary\"}} (step \
             outputs truncated) or \"full\"."
        );
    }
    text
}

/// `text` cut to `chars` characters, with `…` when cut.
fn clipped(text: &str, chars: usize) -> String {
    let mut cut: String = text.chars().take(chars).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// The result envelope of Part III §6: `structuredContent`, one text block
/// with the same JSON, and `isError` per §7.
pub fn envelope(result: Result<Value, OpError>) -> Result<CallToolResult, McpError> {
    match result {
        Ok(value) => Ok(CallToolResult::structured(value)),
        Err(OpError::Request(error)) => {
            Ok(CallToolResult::structured_error(serde_json::to_value(error).unwrap_or(Value::Null)))
        }
        Err(OpError::Structural(message)) => Err(McpError::invalid_params(message, None)),
    }
}

/// [`envelope`] for an execute or trace-fetch result, whose text block is
/// [`content::run_text`]: the JSON while it is small, else a summary that
/// names `trace_tool` for the rest.
pub(super) fn run_envelope(
    result: Result<Value, OpError>,
    trace_tool: Option<&str>,
) -> Result<CallToolResponse, McpError> {
    match result {
        Ok(value) => {
            let text = run_text(&value, value.to_string(), trace_tool);
            Ok(structured_with_text(value, text).into())
        }
        Err(error) => envelope(Err(error)).map(Into::into),
    }
}

/// A successful tool result whose text block is `text`, the JSON text of
/// `value` already serialized (as [`CallToolResult::structured`] would
/// make it).
pub(super) fn structured_with_text(value: Value, text: String) -> CallToolResult {
    let mut result = CallToolResult::structured(Value::Null);
    result.content = vec![rmcp::model::ContentBlock::text(text)];
    result.structured_content = Some(value);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(steps: usize) -> Value {
        let steps: Vec<Value> = (0..steps)
            .map(|n| {
                json!({"id": format!("each[{n}].get"), "calls": "cap", "output": {"blob": "x".repeat(500)},
                       "outcome": {"ok": n != 3, "status": if n == 3 { "error" } else { "success" },
                                   "error": if n == 3 { Value::from("HTTP 500") } else { Value::Null }}})
            })
            .chain((0..3).map(|n| {
                json!({"id": format!("each#{n}"), "outcome": {"ok": true, "status": "success", "error": null},
                          "decisions": [{"at": "each", "took": "continue", "because": format!("item {n}")}]})
            }))
            .chain([json!({"id": "check", "outcome": {"ok": true, "status": "success", "error": null},
                          "decisions": [{"at": "check", "took": "then", "because": "the count 999 is above 10"}]})])
            .collect();
        json!({"run_id": "run_1", "outcome": {"ok": false, "status": "partial", "error": "step each[3].get failed"},
               "output": {"n": 1}, "trace": {"run_id": "run_1", "level": "full", "steps": steps}})
    }

    #[test]
    fn a_small_result_is_its_json() {
        let value = run(2);
        let json = value.to_string();
        assert_eq!(run_text(&value, json.clone(), Some("trace_workflow")), json);
    }

    #[test]
    fn a_large_result_is_summarized_with_the_outcome_counts_decisions_and_the_way_to_the_rest() {
        let value = run(1000);
        let json = value.to_string();
        let text = run_text(&value, json.clone(), Some("trace_workflow"));
        assert!(text.len() < 2048, "{} bytes", text.len());
        for needle in [
            "Run run_1: partial (not ok): step each[3].get failed",
            "Trace (full): 1004 steps (1 error, 1003 success).",
            "Decisions (4):",
            "- at each: took continue 3 times (the first because item 0)",
            "First failed steps: each[3].get.",
            "- at check: took then, because the count 999 is above 10",
            "structuredContent",
            &format!("({} bytes of JSON)", json.len()),
            "trace_workflow {\"run_id\": \"run_1\", \"trace_level\": \"summary\"}",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
        }
        // Without a trace tool, no fetch is suggested.
        assert!(!run_text(&value, json, None).contains("Fetch"));
    }
}
