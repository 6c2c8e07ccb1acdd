//! Traces, trace levels and decisions (Part II §5.8, §5.8.1), and the
//! host's derivation of `summary` traces from full ones.

use serde::{Deserialize, Serialize};

use super::outcome::Outcome;

/// A requested trace level (Part II §5.8.1), ordered `none < summary <
/// full`. `none` is a request value only; a trace object never carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceLevel {
    /// Return no trace.
    None,
    /// Ids, outcomes, decisions, truncated outputs; no inputs.
    Summary,
    /// Everything.
    Full,
}

impl TraceLevel {
    /// Parses a wire value; `None` for anything unrecognized (an
    /// `invalid_request` on execute, Part III §7.2).
    pub fn parse(text: &str) -> Option<TraceLevel> {
        match text {
            "none" => Some(TraceLevel::None),
            "summary" => Some(TraceLevel::Summary),
            "full" => Some(TraceLevel::Full),
            _ => None,
        }
    }

    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceLevel::None => "none",
            TraceLevel::Summary => "summary",
            TraceLevel::Full => "full",
        }
    }
}

/// The effective trace level: the lower of the requested level and the
/// Language's ceiling; an absent request asks for the ceiling
/// (Part II §5.8.1).
pub fn effective_level(requested: Option<TraceLevel>, ceiling: TraceLevel) -> TraceLevel {
    requested.map_or(ceiling, |level| level.min(ceiling))
}

/// One control-flow decision (Part II §5.8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The branch or loop's step id.
    pub at: String,
    /// The arm label, or `continue` / `exit` for loops.
    pub took: String,
    /// The evaluated reason.
    pub because: String,
}

/// One executed step, in flat execution order (Part II §5.8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceStep {
    /// Trace step identifier (Part II §5.8.2).
    pub id: String,
    /// The invoked entry or program reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<String>,
    /// Step input; at `full` for non-control-flow steps only.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::present")]
    pub input: Option<serde_json::Value>,
    /// Step output; at `full`, or truncated at `summary`; never for
    /// control-flow steps.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::present")]
    pub output: Option<serde_json::Value>,
    /// Step outcome.
    pub outcome: Outcome,
    /// Duration in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ms: Option<u64>,
    /// Decisions; required for control-flow steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Decision>,
    /// `true` on a step of a test run whose invocation the host answered
    /// itself without calling the entry (the entry is not read-only; Part
    /// II §6.5.7 "Test run": no side effects). A platform member; absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<bool>,
}

impl TraceStep {
    /// Whether this is a control-flow entry (a branch or loop): it carries
    /// decisions.
    pub fn is_control_flow(&self) -> bool {
        !self.decisions.is_empty()
    }
}

/// A recorded account of a Run (Part II §5.8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The Run's identifier.
    pub run_id: String,
    /// `summary` or `full`.
    pub level: TraceLevel,
    /// Steps in flat execution order.
    pub steps: Vec<TraceStep>,
    /// Engine-specific statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<serde_json::Value>,
}

/// At `summary`, a step output whose JSON text is at most this many bytes
/// is kept whole; a longer one is replaced by a [truncation
/// marker](summarize_output).
pub const SUMMARY_OUTPUT_MAX_BYTES: usize = 256;

/// Characters of the JSON text kept in a truncation marker's `preview`.
pub const SUMMARY_PREVIEW_CHARS: usize = 120;

/// At `summary`, the outputs a trace keeps are bounded in total: once the
/// next step's (possibly truncated) output would take the outputs kept past
/// this many bytes of compact JSON, that step and every later one carry no
/// `output` (Part II §5.8.1: `output` is optional at `summary`). A Run of a
/// thousand steps then summarizes to its steps' ids, outcomes and decisions
/// plus at most this much output.
pub const SUMMARY_OUTPUTS_MAX_BYTES: usize = 16 * 1024;

/// The documented `summary` truncation of one step output: the value
/// itself when its compact JSON text is at most
/// [`SUMMARY_OUTPUT_MAX_BYTES`] bytes, otherwise the object
/// `{"truncated": true, "bytes": N, "preview": "<first 120 characters of
/// the JSON text>…"}` where `N` is the byte length of the full JSON text.
/// When the output is an object, the marker also carries `scalars`: its
/// top-level members whose values are numbers, booleans or null, so counts
/// and flags (such as a statement's `rows_matched`) stay fields at
/// `summary`.
pub fn summarize_output(output: &serde_json::Value) -> serde_json::Value {
    let text = output.to_string();
    if text.len() <= SUMMARY_OUTPUT_MAX_BYTES {
        return output.clone();
    }
    let preview: String = text.chars().take(SUMMARY_PREVIEW_CHARS).collect();
    let mut marker = serde_json::json!({ "truncated": true, "bytes": text.len(), "preview": format!("{preview}…") });
    if let Some(members) = output.as_object() {
        let scalars: serde_json::Map<String, serde_json::Value> = members
            .iter()
            .filter(|(_, value)| value.is_number() || value.is_boolean() || value.is_null())
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        if !scalars.is_empty() {
            marker["scalars"] = serde_json::Value::Object(scalars);
        }
    }
    marker
}

/// Derives a trace at `level` from a full one (Part II §5.8.1): at
/// `summary`, inputs are dropped, outputs truncated per
/// [`summarize_output`] and bounded in total per
/// [`SUMMARY_OUTPUTS_MAX_BYTES`]; control-flow entries never carry input or
/// output. Returns `None` at level `none`. A level above the recorded one
/// is not invented: the result's level is the lower of the two.
pub fn at_level(full: &Trace, level: TraceLevel) -> Option<Trace> {
    let level = level.min(full.level);
    if level == TraceLevel::None {
        return None;
    }
    let mut kept = 0usize;
    let mut spent = false;
    let steps = full
        .steps
        .iter()
        .map(|step| {
            let mut step = step.clone();
            if step.is_control_flow() {
                step.input = None;
                step.output = None;
            } else if level == TraceLevel::Summary {
                step.input = None;
                if full.level == TraceLevel::Full {
                    step.output = step.output.as_ref().map(summarize_output);
                }
                if let Some(output) = &step.output {
                    let bytes = output.to_string().len();
                    spent = spent || kept + bytes > SUMMARY_OUTPUTS_MAX_BYTES;
                    if spent {
                        step.output = None;
                    } else {
                        kept += bytes;
                    }
                }
            }
            step
        })
        .collect();
    Some(Trace { run_id: full.run_id.clone(), level, steps, stats: full.stats.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_trace() -> Trace {
        Trace {
            run_id: "run_1".into(),
            level: TraceLevel::Full,
            steps: vec![
                TraceStep {
                    id: "a".into(),
                    calls: Some("cap".into()),
                    input: Some(serde_json::json!({"x": 1})),
                    output: Some(serde_json::json!("y".repeat(400))),
                    outcome: Outcome::success(),
                    t_ms: Some(3),
                    decisions: vec![],
                    simulated: None,
                },
                TraceStep {
                    id: "b".into(),
                    calls: None,
                    input: None,
                    output: None,
                    outcome: Outcome::success(),
                    t_ms: None,
                    decisions: vec![Decision { at: "b".into(), took: "then".into(), because: "x".into() }],
                    simulated: None,
                },
            ],
            stats: None,
        }
    }

    #[test]
    fn effective_level_is_the_lower_and_defaults_to_the_ceiling() {
        assert_eq!(effective_level(None, TraceLevel::Full), TraceLevel::Full);
        assert_eq!(effective_level(Some(TraceLevel::Summary), TraceLevel::Full), TraceLevel::Summary);
        assert_eq!(effective_level(Some(TraceLevel::Full), TraceLevel::Summary), TraceLevel::Summary);
        assert_eq!(effective_level(Some(TraceLevel::None), TraceLevel::Full), TraceLevel::None);
    }

    #[test]
    fn unknown_level_does_not_parse() {
        assert_eq!(TraceLevel::parse("verbose"), None);
        assert_eq!(TraceLevel::parse("summary"), Some(TraceLevel::Summary));
    }

    #[test]
    fn summary_drops_inputs_and_truncates_long_outputs() {
        let summary = at_level(&full_trace(), TraceLevel::Summary).unwrap();
        assert_eq!(summary.level, TraceLevel::Summary);
        assert!(summary.steps[0].input.is_none());
        let output = summary.steps[0].output.as_ref().unwrap();
        assert_eq!(output["truncated"], true);
        assert_eq!(output["bytes"], 402);
        assert!(summary.steps[1].decisions.len() == 1);
    }

    #[test]
    fn a_long_object_keeps_its_scalar_members_at_summary() {
        let long = serde_json::json!({"rows_matched": 240, "truncated": false, "note": null,
                                      "rows": vec!["row"; 100], "label": "a string is not kept"});
        let marker = summarize_output(&long);
        assert_eq!(marker["truncated"], true);
        assert_eq!(marker["scalars"], serde_json::json!({"rows_matched": 240, "truncated": false, "note": null}));
        // A long array or string has no scalars member.
        assert!(summarize_output(&serde_json::json!(vec![1; 200])).get("scalars").is_none());
        assert!(summarize_output(&serde_json::json!("y".repeat(400))).get("scalars").is_none());
    }

    #[test]
    fn a_summary_keeps_a_bounded_total_of_outputs() {
        let step = full_trace().steps[0].clone();
        let mut trace = full_trace();
        trace.steps = (0..1000).map(|n| TraceStep { id: format!("each[{n}].a"), ..step.clone() }).collect();
        let full_bytes = serde_json::to_string(&trace).unwrap().len();
        let summary = at_level(&trace, TraceLevel::Summary).unwrap();
        assert_eq!(summary.steps.len(), 1000, "every step stays");
        let kept: Vec<usize> = summary
            .steps
            .iter()
            .filter_map(|step| step.output.as_ref())
            .map(|output| output.to_string().len())
            .collect();
        assert!(kept.iter().sum::<usize>() <= SUMMARY_OUTPUTS_MAX_BYTES);
        assert!(!kept.is_empty() && kept.len() < 1000);
        // The outputs kept are the first ones; every later step has none.
        assert!(summary.steps[..kept.len()].iter().all(|step| step.output.is_some()));
        assert!(summary.steps[kept.len()..].iter().all(|step| step.output.is_none()));
        let summary_bytes = serde_json::to_string(&summary).unwrap().len();
        assert!(summary_bytes * 4 < full_bytes, "summary {summary_bytes} bytes, full {full_bytes}");
    }

    #[test]
    fn short_outputs_survive_summary_whole() {
        let mut trace = full_trace();
        trace.steps[0].output = Some(serde_json::json!({"name": "Amira"}));
        let summary = at_level(&trace, TraceLevel::Summary).unwrap();
        assert_eq!(summary.steps[0].output, Some(serde_json::json!({"name": "Amira"})));
    }

    #[test]
    fn none_gives_no_trace_and_levels_are_never_raised() {
        assert!(at_level(&full_trace(), TraceLevel::None).is_none());
        let summary = at_level(&full_trace(), TraceLevel::Summary).unwrap();
        assert_eq!(at_level(&summary, TraceLevel::Full).unwrap().level, TraceLevel::Summary);
    }

    #[test]
    fn present_null_output_is_kept() {
        let step: TraceStep =
            serde_json::from_str(r#"{"id":"a","output":null,"outcome":{"ok":true,"status":"success","error":null}}"#)
                .unwrap();
        assert_eq!(step.output, Some(serde_json::Value::Null));
        assert!(serde_json::to_string(&step).unwrap().contains("\"output\":null"));
    }
}
