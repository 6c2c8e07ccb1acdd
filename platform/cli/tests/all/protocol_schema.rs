//! Every protocol type round-trips through JSON and validates against the
//! matching `$defs` entry of the spec's schema; values the schema rejects
//! are rejected (both polarities, Part IV §4.2).

use pilotage_protocol::catalog::{CatalogChangedResult, CatalogEntry, CatalogGetResult, CatalogListResult};
use pilotage_protocol::diagnostic::Diagnostic;
use pilotage_protocol::guide::{Guide, GuideFetchResult, GuideIndexResult};
use pilotage_protocol::manifest::{LanguageEntry, Manifest};
use pilotage_protocol::outcome::Outcome;
use pilotage_protocol::plan::{Plan, PlanStep};
use pilotage_protocol::request_error::RequestError;
use pilotage_protocol::requests::{
    ExecuteRequest, ExecuteResponse, TraceFetchRequest, TraceFetchResponse, ValidateResponse,
};
use pilotage_protocol::risk::RiskHints;
use pilotage_protocol::trace::{Decision, Trace, TraceStep};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::support::{assert_schema, schema_errors};

/// Parses `value` as `T`, checks it validates as `def`, and that
/// serializing it gives back an equal value.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(def: &str, value: Value) -> T {
    assert_schema(def, &value);
    let parsed: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{def}: {e}"));
    let again = serde_json::to_value(&parsed).unwrap();
    assert_schema(def, &again);
    let reparsed: T = serde_json::from_value(again.clone()).unwrap();
    assert_eq!(parsed, reparsed, "{def} does not round-trip");
    assert_eq!(again, value, "{def} serializes differently from its input");
    parsed
}

fn rejected(def: &str, value: Value) {
    assert!(!schema_errors(def, &value).is_empty(), "{def} should reject {value}");
}

fn language_entry() -> Value {
    json!({
        "name": "workflow/v1", "title": "Workflows", "guides": "pilotage_get_guide", "catalog": "pilotage_catalog",
        "loop": {"validate": "validate_workflow", "execute": "run_workflow", "trace": "trace_workflow"},
        "capabilities": {"guides": true, "catalog": {"search": true, "changed_since": true}, "validate": true,
                         "plan": true, "execute": {"idempotency": true, "test_run": false}, "trace_fetch": true},
        "locator": "json-pointer", "execution": "immediate", "trace": "full", "trace_subprogram": "opaque",
        "retention": "PT1H"
    })
}

fn guide(body: bool) -> Value {
    let mut guide = json!({
        "id": "workflow-core", "title": "Core", "level": "core", "topics": ["grammar"], "language": "workflow/v1",
        "version": "3f2a", "size_bytes": 5, "tokens_estimate": 2, "format": "text/markdown"
    });
    if body {
        guide["body"] = json!("hello");
    }
    guide
}

fn entry() -> Value {
    json!({
        "id": "cap_read_user_profile", "kind": "capability", "name": "Read a profile", "description": "d",
        "input_schema": {"type": "object"}, "output_schema": null, "risk": "safe",
        "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false},
        "tags": ["users"], "languages": ["workflow/v1"], "revision": "r1"
    })
}

fn outcome_ok() -> Value {
    json!({"ok": true, "status": "success", "error": null})
}

fn trace() -> Value {
    json!({"run_id": "run_1", "level": "full", "steps": [
        {"id": "profile", "calls": "cap_read_user_profile", "input": {"user_id": "42"}, "output": {"name": "A"}, "outcome": outcome_ok(), "t_ms": 84},
        {"id": "gate", "outcome": outcome_ok(), "decisions": [{"at": "gate", "took": "then", "because": "x is true"}]}
    ], "stats": {"invocations": 1}})
}

fn plan() -> Value {
    json!({"steps": [
        {"id": "profile", "calls": "cap_read_user_profile", "risk": "safe", "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}},
        {"id": "notify", "calls": "cap_send_email", "arm": {"branch": "gate", "label": "then"}, "loop": "each", "risk": "external_write",
         "risk_hints": {"readOnly": false, "destructive": false, "openWorld": true}}
    ], "max_risk": "external_write", "max_risk_hints": {"readOnly": false, "destructive": false, "openWorld": true}})
}

#[test]
fn manifest_and_language_entry_round_trip() {
    round_trip::<LanguageEntry>("LanguageEntry", language_entry());
    round_trip::<Manifest>("Manifest", json!({"pilotage": "1.1", "languages": [language_entry()]}));
    rejected("Manifest", json!({"pilotage": "1.1", "languages": []}));
    let mut wrong = language_entry();
    wrong["guides"] = json!("get_guide");
    rejected("LanguageEntry", wrong);
}

#[test]
fn guides_round_trip_in_index_and_fetch_forms() {
    round_trip::<Guide>("Guide", guide(false));
    round_trip::<GuideIndexResult>("GuideIndexResult", json!({"guides": [guide(false)]}));
    round_trip::<GuideFetchResult>("GuideFetchResult", json!({"guide": guide(true)}));
    rejected("GuideIndexResult", json!({"guides": [guide(true)]}));
    rejected("GuideFetchResult", json!({"guide": guide(false)}));
}

#[test]
fn catalog_shapes_round_trip() {
    round_trip::<RiskHints>("RiskHints", json!({"readOnly": true, "destructive": false, "openWorld": false}));
    rejected("RiskHints", json!({"readOnly": true, "destructive": false}));
    round_trip::<CatalogEntry>("CatalogEntry", entry());
    round_trip::<CatalogListResult>(
        "CatalogListResult",
        json!({"items": [entry()], "next_cursor": "c1", "catalog_version": "cv_1"}),
    );
    round_trip::<CatalogGetResult>("CatalogGetResult", json!({"entry": entry(), "catalog_version": "cv_1"}));
    round_trip::<CatalogChangedResult>(
        "CatalogChangedResult",
        json!({"catalog_version": "cv_2", "changes": [{"id": "a", "change": "added"}, {"id": "b", "change": "removed"}, {"id": "c", "change": "modified"}]}),
    );
    rejected("CatalogEntry", json!({"id": "a", "kind": "k", "name": "n", "risk": "safe"}));
}

#[test]
fn diagnostics_round_trip_in_both_locator_dialects() {
    round_trip::<Diagnostic>(
        "Diagnostic",
        json!({"severity": "error", "code": "unknown_capability", "path": "/steps/0/capability", "message": "m", "hint": "close match: x"}),
    );
    round_trip::<Diagnostic>(
        "Diagnostic",
        json!({"severity": "warning", "code": "select_star", "path": {"start": {"line": 1, "column": 8}, "end": {"line": 1, "column": 9}}, "message": "m"}),
    );
    round_trip::<Diagnostic>(
        "Diagnostic",
        json!({"severity": "error", "code": "bad_expression", "path": "/steps/0/with/a", "range": {"start": {"line": 1, "column": 3}, "end": {"line": 1, "column": 7}}, "message": "m"}),
    );
    rejected("Diagnostic", json!({"severity": "fatal", "code": "x", "path": "", "message": "m"}));
    rejected("TextRange", json!({"start": {"line": 0, "column": 1}, "end": {"line": 1, "column": 1}}));
}

#[test]
fn plans_outcomes_and_traces_round_trip() {
    let plan: Plan = round_trip("Plan", plan());
    assert_eq!(plan.steps[1].loop_id.as_deref(), Some("each"));
    round_trip::<PlanStep>("PlanStep", plan_step_without_calls());
    round_trip::<Outcome>("Outcome", outcome_ok());
    round_trip::<Outcome>("Outcome", json!({"ok": false, "status": "partial", "error": "stopped"}));
    rejected("Outcome", json!({"ok": true, "status": "success", "error": "not null"}));
    rejected("Outcome", json!({"ok": false, "status": "error", "error": null}));
    round_trip::<Decision>("Decision", json!({"at": "each", "took": "exit", "because": "empty"}));
    round_trip::<TraceStep>("TraceStep", trace()["steps"][0].clone());
    round_trip::<Trace>("Trace", trace());
    rejected("Trace", json!({"run_id": "r", "level": "none", "steps": []}));
}

fn plan_step_without_calls() -> Value {
    json!({"id": "gate", "risk": "safe", "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}})
}

#[test]
fn requests_and_responses_round_trip() {
    round_trip::<ValidateResponse>(
        "ValidateResponse",
        json!({"valid": true, "diagnostics": [], "catalog_version": "cv_1", "plan": plan()}),
    );
    round_trip::<ValidateResponse>(
        "ValidateResponse",
        json!({"valid": false, "diagnostics": [
        {"severity": "error", "code": "unknown_capability", "path": "/steps/0/capability", "message": "m"}], "catalog_version": "cv_1"}),
    );
    round_trip::<ValidateResponse>("ValidateResponse", json!({"valid": true, "diagnostics": [], "references": ["a"]}));
    rejected("ValidateResponse", json!({"diagnostics": []}));

    round_trip::<ExecuteRequest>(
        "ExecuteRequest",
        json!({"program": {"steps": []}, "input": {"userId": "42"}, "trace_level": "full", "expected_catalog_version": "cv_1",
               "idempotency_key": "k", "store": true}),
    );
    round_trip::<ExecuteRequest>("ExecuteRequest", json!({"program_ref": "prog_1", "input": null}));
    rejected("ExecuteRequest", json!({"program": {}, "program_ref": "p"}));
    rejected("ExecuteRequest", json!({"input": {}}));

    round_trip::<ExecuteResponse>(
        "ExecuteResponse",
        json!({"run_id": "run_1", "outcome": outcome_ok(), "output": {"name": "A"}, "trace": trace()}),
    );
    round_trip::<ExecuteResponse>(
        "ExecuteResponse",
        json!({"run_id": "run_2", "outcome": {"ok": false, "status": "validation_error", "error": "invalid"},
               "diagnostics": [{"severity": "error", "code": "input_binding", "path": "/userId", "message": "m"}]}),
    );
    rejected(
        "ExecuteResponse",
        json!({"run_id": "run_2", "outcome": {"ok": false, "status": "validation_error", "error": "invalid"}}),
    );

    round_trip::<TraceFetchRequest>("TraceFetchRequest", json!({"run_id": "run_1", "trace_level": "summary"}));
    round_trip::<TraceFetchResponse>(
        "TraceFetchResponse",
        json!({"run_id": "run_1", "outcome": outcome_ok(), "output": 3, "trace": trace()}),
    );
    rejected("TraceFetchRequest", json!({"run_id": "run_1", "trace_level": "none"}));
}

#[test]
fn request_errors_round_trip_with_siblings() {
    for kind in [
        "not_found",
        "invalid_request",
        "unknown_baseline",
        "idempotency_conflict",
        "bounds_exceeded",
        "unsupported",
        "internal",
    ] {
        round_trip::<RequestError>("RequestError", json!({"error": {"kind": kind, "message": "m"}}));
    }
    round_trip::<RequestError>(
        "RequestError",
        json!({"error": {"kind": "not_found", "message": "unknown entry"}, "catalog_version": "cv_1"}),
    );
    rejected("RequestError", json!({"error": {"kind": "teapot", "message": "m"}}));
}

#[test]
fn unknown_members_are_ignored_on_input() {
    let mut value = entry();
    value["future_member"] = json!({"x": 1});
    let parsed: CatalogEntry = serde_json::from_value(value).unwrap();
    assert_eq!(parsed.id, "cap_read_user_profile");
    let mut response = json!({"valid": true, "diagnostics": [], "narration": "new in 1.2"});
    response["plan"] = plan();
    let parsed: ValidateResponse = serde_json::from_value(response).unwrap();
    assert!(parsed.valid);
}
