//! Narration from the recorded facts through the real endpoint (Part II
//! §6.6 "Narration", §9.4; issue 30 item 4): every bundled Language
//! declares `trace_fetch.narrate`; a fetch, with a `question` or without,
//! carries prose built from the returned record only, labelled as
//! interpretation; a question the facts cannot answer gets a sentence
//! saying so; a question over the bound is `invalid_request`; and the facts
//! beside the narration are byte for byte those of a fetch without one.

use serde_json::{Value, json};

use crate::endpoint::{Backend, client, ok, postgres_url, request_error, server, settings, spec_program};
use crate::support::assert_schema;

/// The narration's first words (`operations::narration::LABEL`).
const LABEL: &str = "Interpretation of the recorded trace (not a fact;";

/// The start of the answer to a question the facts cannot answer
/// (`operations::narration::UNANSWERED`).
const UNANSWERED: &str = "The recorded facts do not answer this question";

/// The response without its `narration`: the facts.
fn facts(response: &Value) -> Value {
    let mut facts = response.clone();
    facts.as_object_mut().unwrap().remove("narration");
    facts
}

fn narration(response: &Value) -> &str {
    response["narration"].as_str().unwrap_or_else(|| panic!("no narration in {response}"))
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, rmcp::model::ClientConfig>;

/// Fetches `run_id` through `tool` with `question`, checks the schema, the
/// label and that the facts equal `plain`'s, and returns the narration.
async fn ask(client: &Client, tool: &str, run_id: &Value, question: &str, plain: &Value) -> String {
    let answered = ok(client, tool, json!({"run_id": run_id, "question": question})).await;
    assert_schema("TraceFetchResponse", &answered);
    let text = narration(&answered).to_owned();
    assert!(text.starts_with(LABEL), "{text}");
    assert!(text.chars().count() <= 4000, "{} characters", text.chars().count());
    assert_eq!(
        serde_json::to_string(&facts(&answered)).unwrap(),
        serde_json::to_string(&facts(plain)).unwrap(),
        "the question changes the narration only"
    );
    text
}

async fn narrated_workflow_and_automation(backend: Backend) {
    let server = server(settings(backend).await).await;
    let client = client(&server.mcp_url()).await;

    // The manifest declares narrate beside trace_fetch for each Language.
    let manifest = ok(&client, "pilotage_manifest", json!({})).await;
    for language in manifest["languages"].as_array().unwrap() {
        let trace_fetch = &language["capabilities"]["trace_fetch"];
        assert_eq!(trace_fetch, &json!({"narrate": true}), "{}", language["name"]);
    }
    let tools = client.list_all_tools().await.unwrap();
    let trace_tool = tools.iter().find(|t| t.name == "trace_workflow").unwrap();
    assert_eq!(trace_tool.input_schema["properties"]["question"]["type"], "string");
    assert!(trace_tool.description.as_deref().unwrap().contains("interpretation"));

    // workflow/v1: a Run that succeeded, narrated without a question.
    let run = ok(
        &client,
        "run_workflow",
        json!({"workflow": spec_program(), "input": {"userId": "42"}, "trace_level": "full", "store": true}),
    )
    .await;
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    let plain = ok(&client, "trace_workflow", json!({"run_id": run["run_id"]})).await;
    assert_schema("TraceFetchResponse", &plain);
    assert_eq!(plain["trace"], run["trace"], "narration leaves the facts as recorded");
    let text = narration(&plain);
    assert!(text.starts_with(LABEL), "{text}");
    assert!(text.contains("The Run completed (status success)"), "{text}");
    assert!(text.contains("'profile' called cap_read_user_profile (success"), "{text}");
    // Step values are facts to read in the trace, never quoted in prose.
    assert!(!text.contains("Amira"), "{text}");

    let failed = ask(&client, "trace_workflow", &run["run_id"], "Why did it fail?", &plain).await;
    assert!(failed.contains("Nothing failed: the outcome is success"), "{failed}");
    let unanswerable =
        ask(&client, "trace_workflow", &run["run_id"], "What is the user's favourite colour?", &plain).await;
    assert!(unanswerable.contains(UNANSWERED), "{unanswerable}");
    // The same answer at the summary level, cut first: still from the facts.
    let summary = ok(&client, "trace_workflow", json!({"run_id": run["run_id"], "trace_level": "summary"})).await;
    assert!(narration(&summary).contains("(level summary)"), "{}", narration(&summary));

    // automation/1: the test run at 14:03 that turned nothing on.
    let rule = json!({"rule": "porch-at-dusk",
        "conditions": [
            {"id": "door-opened", "event": "/state", "equals": "open"},
            {"id": "after-22", "time": {"after": "22:00", "before": "06:00", "time_zone": "Europe/Paris"}}
        ],
        "actions": [{"id": "light-on", "call": "porch_light.turn_on", "with": {"brightness": 40}}]});
    // A stored test run of the rule with the door opening at `at`.
    let door_opens_at = |at: &str| {
        let input = json!({"event": {"device": "front_door", "state": "open"}, "at": at});
        let args = json!({"rule": rule, "input": input, "mode": "immediate", "test_run": true, "store": true});
        ok(&client, "run_automation", args)
    };
    let day = door_opens_at("2026-07-14T14:03:00+02:00").await;
    assert_eq!(day["outcome"]["ok"], true, "{day}");
    let plain = ok(&client, "trace_automation", json!({"run_id": day["run_id"]})).await;
    let nothing = ask(&client, "trace_automation", &day["run_id"], "Why did nothing happen?", &plain).await;
    assert!(nothing.contains("Nothing ran after the decision at 'when'"), "{nothing}");
    assert!(nothing.contains("14:03 in Europe/Paris"), "{nothing}");
    let when = ask(&client, "trace_automation", &day["run_id"], "When did the rule run?", &plain).await;
    assert!(when.contains("The clock times recorded") && when.contains("14:03"), "{when}");

    // At 22:30 the light would turn on: the simulated step is named.
    let night = door_opens_at("2026-07-14T22:30:00+02:00").await;
    let plain = ok(&client, "trace_automation", json!({"run_id": night["run_id"]})).await;
    let really = ask(&client, "trace_automation", &night["run_id"], "Did the light really turn on?", &plain).await;
    assert!(really.contains("This was a test run") && really.contains("'light-on' (porch_light.turn_on)"), "{really}");
    assert!(really.contains("changed nothing"), "{really}");

    // The bound, both sides of it; and a question is never quoted back.
    let longest = "why ".repeat(500);
    assert_eq!(longest.chars().count(), 2000);
    let answered = ask(&client, "trace_automation", &night["run_id"], &longest, &plain).await;
    assert!(!answered.contains("why why"), "{answered}");
    let error = request_error(
        &client,
        "trace_automation",
        json!({"run_id": night["run_id"], "question": format!("{longest}?")}),
    )
    .await;
    assert_eq!(error["error"]["kind"], "invalid_request", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("2000"), "{error}");
    // An unknown Run with a question is the same not_found as without one.
    let unknown = request_error(&client, "trace_automation", json!({"run_id": "run_nope"})).await;
    let asked = request_error(&client, "trace_automation", json!({"run_id": "run_nope", "question": "why?"})).await;
    assert_eq!(asked, unknown);
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_and_automation_runs_are_narrated_on_sqlite() {
    narrated_workflow_and_automation(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_and_automation_runs_are_narrated_on_postgres() {
    narrated_workflow_and_automation(Backend::Postgres).await;
}

/// sql/postgres-15 on the demo tenant's sales tables: the row counts the
/// Engine recorded answer "how many rows".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_row_counts_are_narrated() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.demo_postgres = postgres_url();
    let server = server(settings).await;
    let client = client(&server.mcp_url()).await;
    let query = "SELECT id, status FROM pilotage_demo.orders WHERE status = 'cancelled' ORDER BY id";
    let run = ok(&client, "run_sql", json!({"query": query, "store": true, "trace_level": "full"})).await;
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    let matched = run["output"].as_array().unwrap().len();
    let plain = ok(&client, "trace_sql", json!({"run_id": run["run_id"]})).await;
    let rows = ask(&client, "trace_sql", &run["run_id"], "How many rows matched?", &plain).await;
    assert!(rows.contains(&format!("'stmt-1' matched {matched} rows")), "{rows}");
    // Nothing is quoted from the rows themselves.
    assert!(!rows.contains("cancelled'"), "{rows}");
    let changed = ask(&client, "trace_sql", &run["run_id"], "What did this change?", &plain).await;
    assert!(changed.contains("read pilotage_demo.orders"), "{changed}");
    client.cancel().await.unwrap();
    server.stop().await;
}
