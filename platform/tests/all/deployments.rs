//! The deployment runtime through the real endpoint (Part II §6.5.7):
//! deploy-mode execute installs, a schedule fires on the deployments'
//! clock as a retained Run fetchable by `run_id`, and a test run never
//! reaches a non-read-only entry although the component (deployer/v1)
//! invokes every step whatever `test_run` says.

use std::time::Duration;

use pilotage_platform::client::PilotageClient;
use serde_json::{Value, json};

use crate::tenancy::{admin, two_tenants};

const DEPLOYER: &str = "deployer/v1";

fn instant(text: &str) -> i64 {
    pilotage_platform::deploy::parse_rfc3339(text).expect("an RFC 3339 instant")
}

async fn outbox_calls(demo: &str) -> u64 {
    let stats: Value = reqwest::get(format!("{demo}/stats")).await.unwrap().json().await.unwrap();
    stats["calls"]["/outbox/send"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_fire_and_test_runs_that_stay_side_effect_free() {
    let world = two_tenants().await;
    let server = &world.server;
    let demo = format!("http://{}", server.demo_world.as_ref().unwrap().0);
    let deployer = std::fs::read(concat!(env!("PILOTAGE_GUEST_DIR"), "/deployer.wasm")).unwrap();
    let response = reqwest::Client::new()
        .post(format!("http://{}/admin/v1/tenants/acme/languages", server.addr))
        .bearer_auth(crate::tenancy::ADMIN_TOKEN)
        .header("content-type", "application/wasm")
        .body(deployer)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    let write = json!({"id": "cap_write", "kind": "capability", "name": "cap_write", "description": "sends a message",
        "input_schema": {"type": "object"}, "risk": "write",
        "risk_hints": {"readOnly": false, "destructive": false, "openWorld": false},
        "binding": {"url": format!("{demo}/outbox/send")}});
    let (status, report) =
        admin(server, reqwest::Method::POST, "/tenants/acme/catalog/apply", Some(json!({"entries": [write]}))).await;
    assert_eq!(status, 200, "{report}");
    let client = PilotageClient::discover(world.as_("acme", "ann", "pilotage:mcp").await).await.unwrap();
    let program = json!({"name": "nightly", "steps": [{"id": "send", "calls": "cap_write"}],
        "triggers": [{"schedule": {"cron": "0 22 * * *", "time_zone": "Europe/Paris"}}]});

    // Part III §4.4: mode is required for an `execution: both` Language,
    // and only immediate or deploy.
    assert!(client.execute_raw(DEPLOYER, json!({"program": program})).await.is_err());
    assert!(client.execute_raw(DEPLOYER, json!({"program": program, "mode": "later"})).await.is_err());

    // A test run at a simulated 14:03: the component invokes cap_write, the
    // host answers in its place, marks the step simulated, and the clock
    // the component reads is the simulated one.
    let before = outbox_calls(&demo).await;
    let tested = client
        .execute_raw(
            DEPLOYER,
            json!({"program": program, "mode": "deploy", "test_run": true,
                   "input": {"at": "2026-12-03T14:03:00+01:00"}, "trace_level": "full"}),
        )
        .await
        .unwrap();
    assert!(tested.outcome.ok, "{:?}", tested.outcome);
    let step = &tested.trace.as_ref().unwrap().steps[0];
    assert_eq!(step.simulated, Some(true), "{step:?}");
    assert_eq!(step.output, Some(json!({"simulated": true})));
    assert_eq!(tested.output.as_ref().unwrap()["now"], json!(instant("2026-12-03T13:03:00Z")));
    assert_eq!(outbox_calls(&demo).await, before, "a test run reached a non-read-only entry");
    // A malformed simulated clock is a request error.
    assert!(
        client
            .execute_raw(
                DEPLOYER,
                json!({"program": program, "mode": "deploy", "test_run": true, "input": {"at": "14:03"}})
            )
            .await
            .is_err()
    );

    // Deploy on a frozen clock; the 22:00 Paris tick is 21:00 UTC.
    let clock = server.platform.deployments().clock().clone();
    clock.freeze_at(instant("2026-12-03T20:59:00Z"));
    let deployed = client.execute_raw(DEPLOYER, json!({"program": program, "mode": "deploy"})).await.unwrap();
    assert!(deployed.outcome.ok, "{:?}", deployed.outcome);
    let output = deployed.output.unwrap();
    assert_eq!(output["deployment"], "nightly");
    assert_eq!(output["version"], 1);
    assert_eq!(output["next_due"], "2026-12-03T21:00:00.000Z");
    assert_eq!(outbox_calls(&demo).await, before, "deploying runs nothing");

    // Nothing fires before the tick; the tick fires once.
    clock.advance(Duration::from_secs(30));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.platform.store().firings_of("acme", "nightly", 10).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(60));
    let mut firings = Vec::new();
    for _ in 0..100 {
        firings = server.platform.store().firings_of("acme", "nightly", 10).await.unwrap();
        if !firings.is_empty() && outbox_calls(&demo).await > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(firings.len(), 1, "{firings:?}");
    assert_eq!(firings[0].instance, format!("schedule:{}", instant("2026-12-03T21:00:00Z")));
    let record = server.platform.store().run_get(&firings[0].run_id).await.unwrap();
    assert_eq!(outbox_calls(&demo).await, before + 1, "the firing really invoked cap_write: {record:?}");
    // The firing's Run is retained and fetchable by its run_id.
    let mut fetched = None;
    for _ in 0..100 {
        if let Ok(trace) = client.trace(DEPLOYER, &firings[0].run_id, Some("full")).await {
            fetched = Some(trace);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fetched = fetched.expect("the firing's Run is fetchable");
    assert_eq!(fetched.trace.steps[0].calls.as_deref(), Some("cap_write"));
    assert_eq!(fetched.trace.steps[0].simulated, None);
    // The demo outbox refuses this body (HTTP 400): the answer came from the
    // real endpoint.
    assert!(fetched.trace.steps[0].outcome.error.as_deref().unwrap_or_default().contains("HTTP 400"));
    let input = &fetched.trace.steps[0].input.as_ref().unwrap()["input"];
    assert_eq!(input["trigger"]["kind"], "schedule");
    assert_eq!(input["event"]["due"], "2026-12-03T21:00:00.000Z");

    // Deploying the same name again replaces it.
    let again = client.execute_raw(DEPLOYER, json!({"program": program, "mode": "deploy"})).await.unwrap();
    assert_eq!(again.output.unwrap()["version"], 2);

    // An installation whose webhook source is not registered is refused,
    // and nothing is installed.
    let hooked = json!({"name": "hooked", "steps": [], "triggers": [{"webhook": "home"}]});
    let refused = client.execute_raw(DEPLOYER, json!({"program": hooked, "mode": "deploy"})).await.unwrap();
    assert!(!refused.outcome.ok);
    assert!(refused.outcome.error.unwrap().contains("webhook:home"));
    assert!(server.platform.store().deployment_get("acme", "hooked").await.unwrap().is_none());
}
