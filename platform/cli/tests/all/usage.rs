//! Usage per tenant per day (docs/architecture.md, "Usage per tenant"),
//! through the real endpoint on both backends: the figures equal the sums
//! of the Runs and the firing the test made, by kind and outcome; they
//! outlive the Runs' expiry; the admin API answers JSON and CSV and
//! refuses a bad range; the CLI prints them; the metrics count them; a
//! tenant's admin reads its own and no other's.

use serde_json::{Value, json};

use crate::console::porch_fired;
use crate::endpoint::{Backend, client, ok, server, settings, spec_program};
use crate::tenancy::{ADMIN_TOKEN, admin};

const METRICS_TOKEN: &str = "usage-test-metrics-token";

async fn admin_text(base: &str, path: &str, accept: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(format!("{base}/admin/v1{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// The usage rows of `kind` in `usage`, summed: (runs, invocations).
fn of_kind(usage: &Value, kind: &str) -> (i64, i64) {
    usage["days"].as_array().unwrap().iter().filter(|row| row["kind"] == kind).fold((0, 0), |(runs, calls), row| {
        (runs + row["runs"].as_i64().unwrap(), calls + row["invocations"].as_i64().unwrap())
    })
}

async fn usage_counts_every_run_and_outlives_it(backend: Backend) {
    let mut settings = settings(backend).await;
    settings.admin_token = Some(ADMIN_TOKEN.into());
    settings.metrics_token = Some(METRICS_TOKEN.into());
    let data_dir = settings.data_dir.clone();
    let server = server(settings).await;
    let base = format!("http://{}", server.addr);
    let today = pilotage_server::tenancy::usage::day_of(server.platform.clock().now_ms());

    // Nothing ran yet: no rows, zero totals (bad polarity first).
    let (status, empty) = admin(&server, reqwest::Method::GET, "/tenants/demo/usage", None).await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!((empty["days"].clone(), empty["totals"]["runs"].clone()), (json!([]), json!(0)));

    // Three immediate Runs, one invocation each (one unstored, one whose
    // user does not exist), and a test run of a rule.
    let agent = client(&server.mcp_url()).await;
    let mut statuses = Vec::new();
    for (user, store) in [("42", true), ("42", false), ("nobody", true)] {
        let run =
            ok(&agent, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": user}, "store": store}))
                .await;
        statuses.push(run["outcome"]["status"].as_str().unwrap().to_owned());
    }
    let rule = json!({"rule": "porch-at-dusk",
        "conditions": [{"id": "door-opened", "event": "/state", "equals": "open"}],
        "actions": [{"id": "light-on", "call": "porch_light.turn_on", "with": {"brightness": 40}}]});
    let input = json!({"event": {"device": "front_door", "state": "open"}, "at": "2026-07-14T14:03:00+02:00"});
    let tested = ok(
        &agent,
        "run_automation",
        json!({"rule": rule, "input": input, "mode": "immediate", "test_run": true, "store": true}),
    )
    .await;
    assert_eq!(tested["outcome"]["ok"], true, "{tested}");
    agent.cancel().await.unwrap();
    // A deploy, then its firing on the night of 2026-07-14 (the clock is
    // frozen there from now on).
    porch_fired(&server).await;
    let stored_bytes = server.platform.store().run_bytes_of_tenant("demo").await.unwrap();

    let range = format!("/tenants/demo/usage?from=2026-07-01&to={today}");
    let (status, usage) = admin(&server, reqwest::Method::GET, &range, None).await;
    assert_eq!(status, 200, "{usage}");
    assert_eq!(of_kind(&usage, "immediate"), (3, 3), "{usage}");
    assert_eq!(of_kind(&usage, "test").0, 1, "{usage}");
    assert_eq!(of_kind(&usage, "deploy").0, 1, "{usage}");
    let (firings, firing_calls) = of_kind(&usage, "firing");
    assert_eq!(firings, 1, "{usage}");
    assert!(firing_calls >= 1, "the firing turned the light on: {usage}");
    let totals = &usage["totals"];
    assert_eq!((totals["runs"].clone(), totals["firings"].clone()), (json!(6), json!(1)), "{usage}");
    assert_eq!(totals["stored_bytes"], stored_bytes, "usage counts the stored records' bytes: {usage}");
    assert!(totals["fuel"].as_i64().unwrap() > 0, "{usage}");
    for status in &statuses {
        assert!(totals["runs_by_outcome"][status].as_i64().unwrap() >= 1, "{status}: {usage}");
    }
    assert_ne!(statuses[2], "success", "the unknown user's Run fails: {statuses:?}");
    // The firing's Run is on the frozen night; the others on today.
    let firing_day =
        usage["days"].as_array().unwrap().iter().find(|row| row["kind"] == "firing").unwrap()["day"].clone();
    assert_eq!(firing_day, "2026-07-14");

    // The Runs expire; what they used does not.
    server.platform.store().sweep(i64::MAX).await.unwrap();
    assert_eq!(server.platform.store().run_bytes_of_tenant("demo").await.unwrap(), 0);
    let (_, after) = admin(&server, reqwest::Method::GET, &range, None).await;
    assert_eq!(after["totals"], usage["totals"]);

    // CSV, asked by the query or by Accept; the operator's view of every tenant.
    let (status, csv) = admin_text(&base, &format!("{range}&format=csv"), "*/*").await;
    assert_eq!(status, 200);
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("tenant,day,kind,outcome,runs,invocations,fuel,wall_time_ms,stored_bytes"));
    assert_eq!(lines.count(), usage["days"].as_array().unwrap().len(), "{csv}");
    let (_, by_accept) = admin_text(&base, &range, "text/csv").await;
    assert_eq!(by_accept, csv);
    let (status, every) = admin(&server, reqwest::Method::GET, "/usage?from=2026-07-01&to=2026-12-31", None).await;
    assert_eq!(status, 200);
    assert!(every["days"].as_array().unwrap().iter().all(|row| row["tenant"] == "demo"), "{every}");

    // A bad range is refused, naming the field.
    for (query, field) in [
        ("from=2026-13-01", "from"),
        ("from=2026-07-02&to=2026-07-01", "from"),
        ("from=2020-01-01&to=2026-07-01", "from"),
        ("to=yesterday", "to"),
        ("format=xml", "format"),
    ] {
        let (status, body) = admin(&server, reqwest::Method::GET, &format!("/tenants/demo/usage?{query}"), None).await;
        assert_eq!((status, body["error"]["field"].as_str()), (400, Some(field)), "{query}: {body}");
    }

    // The CLI prints them (JSON to a pipe, CSV when asked).
    let cli = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
        .args(["tenant", "usage", "demo", "--from", "2026-07-01", "--to", &today, "--csv", "--server", &base])
        .env("PILOTAGE_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .await
        .unwrap();
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    assert_eq!(String::from_utf8_lossy(&cli.stdout).trim_end(), csv.trim_end());

    // The metrics count this replica's Runs per tenant and kind.
    let metrics = crate::support::scrape(server.addr, METRICS_TOKEN).await;
    for line in [
        "pilotage_tenant_runs_total{kind=\"immediate\",tenant=\"demo\"} 3",
        "pilotage_tenant_runs_total{kind=\"firing\",tenant=\"demo\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} missing from the metrics");
    }
    assert!(metrics.contains("pilotage_tenant_fuel_total{tenant=\"demo\"}"));

    // Another tenant's admin reads its own usage, neither demo's nor
    // every tenant's.
    let (status, _) = admin(&server, reqwest::Method::POST, "/tenants", Some(json!({"id": "acme"}))).await;
    assert_eq!(status, 201);
    let dev = pilotage_server::auth::dev::DevTokens::load(&data_dir, server.mcp_url()).unwrap();
    let acme_admin = dev.mint("acme", "ann", &["pilotage:tenant-admin".to_owned()], 600).unwrap();
    for (path, expected) in [("/tenants/acme/usage", 200), ("/tenants/demo/usage", 403), ("/usage", 403)] {
        let answer =
            reqwest::Client::new().get(format!("{base}/admin/v1{path}")).bearer_auth(&acme_admin).send().await.unwrap();
        assert_eq!(answer.status().as_u16(), expected, "{path}");
        if expected == 200 {
            let own: Value = answer.json().await.unwrap();
            assert_eq!(own["totals"]["runs"], 0, "{own}");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counts_every_run_and_outlives_it_on_sqlite() {
    usage_counts_every_run_and_outlives_it(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_counts_every_run_and_outlives_it_on_postgres() {
    usage_counts_every_run_and_outlives_it(Backend::Postgres).await;
}
