//! Assertions (`x-assertions`, docs/assertions.md, issue 49 item 1)
//! through the real endpoint: declared beside `execute` in the manifest
//! and listed in every closed-sets guide; passing and failing ones on
//! workflow/v1 (a loop's invocation count, an untaken arm, rows counted,
//! the input, a schema); Part I's zero-row Run that "looks fine" caught as
//! `assertion_failed` with the output kept in the report; the verdicts
//! stored with the Run and fetched again; automation/1's test runs; and
//! every malformed assertion refused as `validation_error` before anything
//! runs. A request without assertions sees no change.

use serde_json::{Value, json};

use crate::console::{shows, sign_in};
use crate::endpoint::{Backend, client, ok, request_error, server, settings, spec_program};
use crate::support::assert_schema;
use crate::tenancy::ADMIN_TOKEN;
use pilotage_test_support::browser::Browser;

/// Orders of `$.input.userId`, a branch on the tier, and one profile read
/// per order: every kind of step an assertion can target.
fn orders_program() -> Value {
    json!({"steps": [
        {"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "$.input.userId"}},
        {"id": "orders", "kind": "call", "capability": "cap_list_orders", "with": {"user_id": "$.input.userId"}},
        {"id": "tier", "kind": "branch", "if": {"eq": ["$.steps.profile.output.tier", "gold"]},
         "then": [{"id": "gold", "kind": "call", "capability": "cap_read_outbox"}],
         "else": [{"id": "plain", "kind": "call", "capability": "cap_read_outbox"}]},
        {"id": "each", "kind": "for_each", "over": "$.steps.orders.output.orders", "do": [
            {"id": "look", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "$.input.userId"}}]}
    ], "output": {"name": "$.steps.profile.output.name"}})
}

/// What the agent asserts: the Run found orders and looked at each.
fn orders_assertions() -> Value {
    json!([
        {"id": "some-orders", "target": {"step": "orders", "member": "output", "pointer": "/orders"},
         "check": {"count": {"gt": 0}}, "message": "the user has orders to review"},
        {"id": "each-looked", "target": {"step": "look", "member": "invocations"}, "check": {"ge": 1}},
        {"id": "gold-arm", "target": {"step": "gold", "member": "outcome"}, "check": {"eq": "success"}},
        {"id": "plain-untaken", "target": {"step": "plain", "member": "outcome"}, "check": {"exists": false}},
        {"id": "same-user", "target": {"step": "profile", "member": "output", "pointer": "/id"},
         "check": {"equals_input": "/userId"}},
        {"id": "named", "target": {"output": ""},
         "check": {"schema": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}
    ])
}

fn verdict<'a>(response: &'a Value, id: &str) -> &'a Value {
    response["x-assertions"]["verdicts"]
        .as_array()
        .unwrap_or_else(|| panic!("no verdicts in {response}"))
        .iter()
        .find(|v| v["id"] == id)
        .unwrap_or_else(|| panic!("no verdict {id} in {response}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assertions_prove_a_run_or_catch_the_zero_row_result_that_looks_fine() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.console = true;
    settings.admin_token = Some(ADMIN_TOKEN.into());
    settings.metrics_token = Some("assertions-metrics-token".into());
    let server = server(settings).await;
    let client = client(&server.mcp_url()).await;

    // Declared beside execute, for every Language that executes, and
    // documented in each closed-sets guide with its status.
    let manifest = ok(&client, "pilotage_manifest", json!({})).await;
    for language in manifest["languages"].as_array().unwrap() {
        assert_eq!(language["capabilities"]["execute"]["x-assertions"], true, "{}", language["name"]);
    }
    let index = ok(&client, "pilotage_get_guide", json!({"language": "workflow/v1"})).await;
    let closed = index["guides"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["topics"].as_array().unwrap().contains(&json!("closed-sets")))
        .unwrap()["id"]
        .clone();
    let guide = ok(&client, "pilotage_get_guide", json!({"language": "workflow/v1", "id": closed})).await;
    let text = guide["guide"]["body"].as_str().unwrap();
    assert!(text.contains("`assertion_failed` (ok: false, side effects: possible)"), "{text}");
    let tools = client.list_all_tools().await.unwrap();
    let run_tool = tools.iter().find(|t| t.name == "run_workflow").unwrap();
    // Listed without a type, so a malformed value reaches the Pilotage
    // channel (a diagnostic) instead of the schema check's carrier error.
    let listed = &run_tool.input_schema["properties"]["x-assertions"];
    assert!(listed["description"].as_str().unwrap().contains("docs/assertions.md") && listed.get("type").is_none());

    // Amira (gold, three orders): every assertion holds; the Run is as
    // it would be without them, plus the report.
    let proved = ok(
        &client,
        "run_workflow",
        json!({"workflow": orders_program(), "input": {"userId": "42"}, "trace_level": "full", "store": true,
               "x-assertions": orders_assertions()}),
    )
    .await;
    assert_schema("ExecuteResponse", &proved);
    assert_eq!(proved["outcome"], json!({"ok": true, "status": "success", "error": null}), "{proved}");
    assert_eq!(proved["output"], json!({"name": "Amira Hassan"}));
    assert_eq!((&proved["x-assertions"]["passed"], &proved["x-assertions"]["failed"]), (&json!(6), &json!(0)));
    assert_eq!(verdict(&proved, "some-orders")["observed"], 3, "rows are counted");
    assert_eq!(verdict(&proved, "each-looked")["observed"], 3, "a loop's step counts its invocations");
    assert_eq!(verdict(&proved, "gold-arm")["observed"], "success");
    assert!(verdict(&proved, "plain-untaken").get("observed").is_none(), "an untaken arm reads as absent");
    assert_eq!(verdict(&proved, "same-user")["observed"], "42");
    assert!(verdict(&proved, "named").get("message").is_none());
    assert!(proved["x-assertions"].get("output").is_none(), "the output stays where it was");

    // Jonas (silver, no orders): the program succeeds, and a reader of
    // the outcome alone would think all is well. The assertions do not.
    let caught = ok(
        &client,
        "run_workflow",
        json!({"workflow": orders_program(), "input": {"userId": "7"}, "trace_level": "full", "store": true,
               "x-assertions": orders_assertions()}),
    )
    .await;
    assert_schema("ExecuteResponse", &caught);
    assert_eq!(caught["outcome"]["ok"], false, "{caught}");
    assert_eq!(caught["outcome"]["status"], "assertion_failed");
    let error = caught["outcome"]["error"].as_str().unwrap();
    assert!(
        error.starts_with("4 of 6 assertions failed (some-orders, each-looked, gold-arm, plain-untaken)"),
        "{error}"
    );
    assert!(error.contains("effects stand"), "{error}");
    assert!(caught.get("output").is_none(), "output only on an ok outcome (Part II §6.5)");
    assert_eq!(caught["x-assertions"]["output"], json!({"name": "Jonas Weber"}), "the output is kept in the report");
    let rows = verdict(&caught, "some-orders");
    assert_eq!((&rows["verdict"], &rows["observed"]), (&json!("failed"), &json!(0)));
    assert_eq!(rows["message"], "the user has orders to review (expected a count gt 0, counted 0)");
    assert_eq!(verdict(&caught, "each-looked")["observed"], 0);
    let arm = verdict(&caught, "gold-arm");
    assert!(arm.get("observed").is_none() && arm["message"].as_str().unwrap().contains("did not run"), "{arm}");
    assert_eq!(verdict(&caught, "plain-untaken")["verdict"], "failed", "the else arm ran");
    assert_eq!(verdict(&caught, "same-user")["verdict"], "passed");
    // The trace is the Run's, untouched: every step that ran is in it.
    let ids: Vec<&str> =
        caught["trace"]["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["profile", "orders", "tier", "plain", "each"]);

    // Kept with the Run: the fetch door returns the same verdicts.
    for run in [&proved, &caught] {
        let fetched = ok(&client, "trace_workflow", json!({"run_id": run["run_id"]})).await;
        assert_schema("TraceFetchResponse", &fetched);
        assert_eq!(fetched["x-assertions"], run["x-assertions"]);
        assert_eq!(fetched["outcome"], run["outcome"]);
    }

    // An operator reads them on the Run's page in the console.
    let plain_run =
        ok(&client, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}, "store": true}))
            .await;
    let browser = Browser::start().await.expect("headless Chromium (Debian's chromium and chromium-driver)");
    let base = format!("http://{}", server.addr);
    sign_in(&browser, &base, ADMIN_TOKEN).await;
    browser.goto(&format!("{base}/console/t/demo/runs/{}", caught["run_id"].as_str().unwrap())).await.unwrap();
    shows(&browser, "#run-status", "assertion_failed").await;
    shows(&browser, "#run-assertions p", "2 passed, 4 failed").await;
    let row = shows(&browser, "#run-assertions tr[data-assertion='some-orders']", "failed").await;
    assert!(row.contains("the user has orders to review (expected a count gt 0, counted 0)"), "{row}");
    shows(&browser, "#run-assertions tr[data-assertion='gold-arm']", "absent").await;
    shows(&browser, "#run-assertions tr[data-assertion='same-user']", "passed").await;
    browser.goto(&format!("{base}/console/t/demo/runs/{}", plain_run["run_id"].as_str().unwrap())).await.unwrap();
    shows(&browser, "#run-status", "success").await;
    let none = browser.script("return document.querySelector('#run-assertions') === null;", vec![]).await.unwrap();
    assert_eq!(none, json!(true), "a Run without assertions shows no section");

    // Narration names the verdicts, from the record alone.
    let why = ok(&client, "trace_workflow", json!({"run_id": caught["run_id"], "question": "Why did it fail?"})).await;
    let text = why["narration"].as_str().unwrap();
    assert!(text.contains("(status assertion_failed)"), "{text}");
    assert!(
        text.contains(
            "4 of the request's 6 assertions failed: 'some-orders', 'each-looked', 'gold-arm', 'plain-untaken'."
        ),
        "{text}"
    );
    let fine = ok(&client, "trace_workflow", json!({"run_id": proved["run_id"], "question": "What happened?"})).await;
    assert!(fine["narration"].as_str().unwrap().contains("All 6 of the request's assertions held."), "{fine}");

    // An agent that sends none sees no change.
    let plain = ok(&client, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}})).await;
    assert!(plain.get("x-assertions").is_none(), "{plain}");
    assert_eq!(plain["outcome"]["status"], "success");
    let empty =
        ok(&client, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}, "x-assertions": []}))
            .await;
    assert_eq!(empty["x-assertions"], json!({"passed": 0, "failed": 0, "verdicts": []}));
    assert_eq!(empty["outcome"]["status"], "success");

    // Malformed assertions are refused before anything runs, each with a
    // path into the request's x-assertions and a hint.
    let refusals = [
        (
            json!([{"id": "a", "target": {"step": "nope", "member": "invocations"}, "check": {"eq": 1}}]),
            "/x-assertions/0/target/step",
            "not in the program's plan",
        ),
        (json!("all good"), "/x-assertions", "must be an array"),
        (
            json!([{"id": "a", "target": {"output": "/name"}, "check": {"between": [1, 2]}}]),
            "/x-assertions/0/check/between",
            "unknown check 'between'",
        ),
        (
            json!([{"id": "a", "target": {"output": "/name"}, "check": {"eq": 1, "ne": 2}}]),
            "/x-assertions/0/check",
            "exactly one of",
        ),
        (
            json!([{"id": "a", "target": {"output": "/name"}, "check": {"equals_input": "/missing"}}]),
            "/x-assertions/0/check/equals_input",
            "the input has nothing at '/missing'",
        ),
        (
            json!([{"id": "a", "target": {"output": "/name"}, "check": {"exists": true}},
                {"id": "a", "target": {"output": "/name"}, "check": {"exists": true}}]),
            "/x-assertions/1/id",
            "used twice",
        ),
    ];
    for (assertions, path, words) in refusals {
        let refused = ok(
            &client,
            "run_workflow",
            json!({"workflow": orders_program(), "input": {"userId": "42"}, "store": true, "x-assertions": assertions}),
        )
        .await;
        assert_schema("ExecuteResponse", &refused);
        assert_eq!(refused["outcome"]["status"], "validation_error", "{refused}");
        assert!(refused.get("trace").is_none() && refused.get("x-assertions").is_none(), "{refused}");
        let diagnostic = &refused["diagnostics"][0];
        assert_eq!((&diagnostic["code"], &diagnostic["path"]), (&json!("constraint"), &json!(path)), "{refused}");
        assert!(diagnostic["message"].as_str().unwrap().contains(words), "{diagnostic}");
        assert!(diagnostic["hint"].as_str().is_some_and(|h| !h.is_empty()), "{diagnostic}");
        let missing = request_error(&client, "trace_workflow", json!({"run_id": refused["run_id"]})).await;
        assert_eq!(missing["error"]["kind"], "not_found", "a refused Run is never stored");
    }
    let hint = {
        let refused = ok(
            &client,
            "run_workflow",
            json!({"workflow": orders_program(), "input": {"userId": "42"},
            "x-assertions": [{"id": "a", "target": {"step": "nope", "member": "invocations"}, "check": {"eq": 1}}]}),
        )
        .await;
        refused["diagnostics"][0]["hint"].as_str().unwrap().to_owned()
    };
    assert_eq!(hint, "the plan's steps: profile, orders, tier, gold, plain, each, look");

    // automation/1: a test run proves what the rule would do before it
    // is deployed; a deploy itself carries no assertions.
    let rule = json!({"rule": "porch-at-dusk",
        "conditions": [
            {"id": "door-opened", "event": "/state", "equals": "open"},
            {"id": "after-22", "time": {"after": "22:00", "before": "06:00", "time_zone": "Europe/Paris"}}
        ],
        "actions": [{"id": "light-on", "call": "porch_light.turn_on", "with": {"brightness": 40}}]});
    let light = json!([{"id": "light-turns-on", "target": {"step": "light-on", "member": "invocations"},
                        "check": {"eq": 1}, "message": "the porch light must come on"}]);
    let door_opens_at = |at: &str| {
        let input = json!({"event": {"device": "front_door", "state": "open"}, "at": at});
        json!({"rule": rule, "input": input, "mode": "immediate", "test_run": true, "store": true, "x-assertions": light})
    };
    let night = ok(&client, "run_automation", door_opens_at("2026-07-14T22:30:00+02:00")).await;
    assert_eq!(night["outcome"]["status"], "success", "{night}");
    assert_eq!(verdict(&night, "light-turns-on")["observed"], 1);
    let day = ok(&client, "run_automation", door_opens_at("2026-07-14T14:03:00+02:00")).await;
    assert_eq!(day["outcome"]["status"], "assertion_failed", "{day}");
    assert_eq!(verdict(&day, "light-turns-on")["message"], "the porch light must come on (expected eq 1, observed 0)");

    // A deployment keeps its assertions and evaluates them on every
    // firing: malformed ones refuse the deploy; kept ones show in its
    // view; a firing that breaks one is an assertion_failed Run, stored
    // with its verdicts and counted.
    let bad = ok(
        &client,
        "run_automation",
        json!({"rule": rule, "mode": "deploy",
        "x-assertions": [{"id": "x", "target": {"step": "nowhere", "member": "invocations"}, "check": {"eq": 1}}]}),
    )
    .await;
    assert_eq!(bad["outcome"]["status"], "validation_error", "{bad}");
    assert_eq!(bad["diagnostics"][0]["path"], "/x-assertions/0/target/step");
    let kept = json!([
        {"id": "lit", "target": {"step": "light-on", "member": "invocations"}, "check": {"eq": 1}},
        {"id": "dim", "target": {"step": "light-on", "member": "input", "pointer": "/brightness"},
         "check": {"le": 50}, "message": "the porch light stays dim at night"},
        {"id": "decided", "target": {"step": "when", "member": "outcome"}, "check": {"eq": "success"}}
    ]);
    let fired = crate::console::porch_fired_keeping(&server, Some(kept.clone())).await;
    let (status, view) =
        crate::tenancy::admin(&server, reqwest::Method::GET, "/tenants/demo/deployments/porch-at-night", None).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["x-assertions"], kept, "{view}");
    let record = ok(&client, "trace_automation", json!({"run_id": fired})).await;
    assert_eq!(record["outcome"]["status"], "assertion_failed", "{record}");
    assert_eq!((&record["x-assertions"]["passed"], &record["x-assertions"]["failed"]), (&json!(2), &json!(1)));
    assert_eq!(verdict(&record, "dim")["observed"], 80);
    assert_eq!(verdict(&record, "dim")["message"], "the porch light stays dim at night (expected le 50, observed 80)");
    browser.goto(&format!("{base}/console/t/demo/deployments/porch-at-night")).await.unwrap();
    shows(&browser, "#deployment-assertions", "3 checked on every firing; 1 of the 1 firings listed broke one").await;
    let metrics = crate::support::scrape(server.addr, "assertions-metrics-token").await;
    for line in [
        "pilotage_assertions_total{language=\"automation/1\",verdict=\"failed\"} 2",
        "pilotage_assertions_total{language=\"automation/1\",verdict=\"passed\"} 3",
        "pilotage_runs_total{language=\"automation/1\",status=\"assertion_failed\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }

    client.cancel().await.unwrap();
    server.stop().await;
}

/// An agent may check its assertions with `validate` before it runs
/// anything (docs/assertions.md, "At validation"): the result's
/// `x-assertions` says whether they fit the plan, with the same
/// diagnostics an execute would refuse with, and leaves the program's own
/// `valid` alone; without them the answer is as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_checks_assertions_against_the_plan_before_anything_runs() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    let validate = |extra: Value| {
        let mut args = json!({"workflow": orders_program()});
        if let Value::Object(extra) = extra {
            args.as_object_mut().unwrap().extend(extra);
        }
        args
    };

    // They fit: every step is one the plan can run; `equals_input` waits
    // for the Run's input.
    let fits = ok(&client, "validate_workflow", validate(json!({"x-assertions": orders_assertions()}))).await;
    assert_eq!(fits["valid"], true, "{fits}");
    assert!(fits["plan"].is_object(), "{fits}");
    assert_eq!(fits["x-assertions"], json!({"checked": 6, "fit": true, "diagnostics": []}), "{fits}");
    // The same validation without assertions: no member, the rest equal.
    let plain = ok(&client, "validate_workflow", validate(json!({}))).await;
    assert!(plain.get("x-assertions").is_none(), "{plain}");
    let mut without = fits.clone();
    without.as_object_mut().unwrap().remove("x-assertions");
    assert_eq!(without, plain, "the program's validation is unchanged");

    // They do not fit: the diagnostics execute would refuse with.
    let nope = json!([{"id": "a", "target": {"output": "/name"}, "check": {"exists": true}},
                      {"id": "a", "target": {"output": "/name"}, "check": {"exists": true}},
                      {"id": "b", "target": {"step": "nope", "member": "invocations"}, "check": {"eq": 1}}]);
    let unfit = ok(&client, "validate_workflow", validate(json!({"x-assertions": nope.clone()}))).await;
    assert_eq!(unfit["valid"], true, "the program itself is valid: {unfit}");
    let checked = &unfit["x-assertions"];
    assert_eq!((checked["checked"].clone(), checked["fit"].clone()), (json!(3), json!(false)), "{unfit}");
    let paths: Vec<&str> =
        checked["diagnostics"].as_array().unwrap().iter().map(|d| d["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/x-assertions/1/id", "/x-assertions/2/target/step"], "{unfit}");
    assert_eq!(checked["diagnostics"][1]["hint"], "the plan's steps: profile, orders, tier, gold, plain, each, look");
    let refused = ok(
        &client,
        "run_workflow",
        json!({"workflow": orders_program(), "input": {"userId": "42"}, "x-assertions": nope}),
    )
    .await;
    assert_eq!(refused["outcome"]["status"], "validation_error", "{refused}");
    assert_eq!(refused["diagnostics"], checked["diagnostics"], "validate and execute find the same");

    // Not a list, and an invalid program (no plan: only their shape is read).
    let shape = ok(&client, "validate_workflow", validate(json!({"x-assertions": {"id": "a"}}))).await;
    assert_eq!(shape["x-assertions"]["checked"], 0, "{shape}");
    assert_eq!(shape["x-assertions"]["diagnostics"][0]["path"], "/x-assertions", "{shape}");
    let typo = json!({"steps": [{"id": "p", "kind": "call", "capability": "cap_read_user_profil"}]});
    let invalid = ok(
        &client,
        "validate_workflow",
        json!({"workflow": typo, "x-assertions": [{"id": "b", "target": {"step": "p", "member": "outcome"},
                                                   "check": {"eq": "success"}}]}),
    )
    .await;
    assert_eq!(invalid["valid"], false, "{invalid}");
    assert_eq!(invalid["x-assertions"], json!({"checked": 1, "fit": true, "diagnostics": []}), "{invalid}");
    let _ = client.cancel().await;
    server.stop().await;
}
