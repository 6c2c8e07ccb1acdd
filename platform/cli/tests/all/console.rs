//! The operator console (`pilotage_server::console`; docs/architecture.md,
//! "The console and the views") read in a real headless Chromium, on a
//! real server whose porch rule really fired:
//!
//! - sign-in: signed out is sent to the form; a bad credential and one
//!   without a console scope are refused; the operator and a tenant's
//!   `pilotage:console` reader get an HttpOnly session;
//! - the deployment's page lists the firing and links to its Run page,
//!   which shows the plan and the decision "it is 22:41 in Europe/Paris";
//! - the Run list filters by deployment and status, and says so when a
//!   time does not read;
//! - a tenant's reader reaching another tenant's pages by URL gets the
//!   same 404 as for a tenant that does not exist;
//! - a Run at the invocation bound (1,000 calls) renders, pages and
//!   scrolls; the pages fit a phone's width; each has one `<h1>`, labelled
//!   inputs and a skip link first in the focus order;
//! - the live figures are drawn (the operator's platform charts too);
//! - off (the default), no console route exists.
//!
//! Screenshots: `target/test-artifacts/console-*.png`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::endpoint::{Backend, client, ok, server, settings};
use crate::tenancy::{ADMIN_TOKEN, admin, upload_language};
use pilotage_test_support::browser::Browser;

/// Waits until the text of `selector` contains `want` (10 s), returning it.
pub(crate) async fn shows(browser: &Browser, selector: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match browser.text(selector).await {
            Ok(text) if text.contains(want) => return text,
            other if Instant::now() > deadline => panic!("{selector} never showed {want:?}: {other:?}"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// How many elements match `selector` now.
async fn count(browser: &Browser, selector: &str) -> u64 {
    let script = format!("return document.querySelectorAll({}).length;", json!(selector));
    browser.script(&script, vec![]).await.unwrap().as_u64().unwrap()
}

/// Posts the sign-in form as a program would: `form` is its body, `origin`
/// an `Origin` header to send.
async fn post_sign_in(http: &reqwest::Client, base: &str, form: String, origin: Option<&str>) -> reqwest::Response {
    let mut request = http
        .post(format!("{base}/console/sign-in"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form);
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.unwrap()
}

/// The session cookie (`name=value`) a sign-in answered with.
fn cookie_of(response: &reqwest::Response) -> String {
    response.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned()
}

pub(crate) async fn sign_in(browser: &Browser, base: &str, token: &str) {
    browser.goto(&format!("{base}/console")).await.unwrap();
    shows(browser, "h1", "Sign in").await;
    browser.fill("#token", token).await.unwrap();
    browser.submit("#token").await.unwrap();
}

/// Every page's structure: one `<h1>`, every field labelled, the skip
/// link the first thing the keyboard reaches, nothing wider than the
/// window.
async fn well_formed(browser: &Browser, page: &str) {
    let facts = browser
        .script(
            "const fields = [...document.querySelectorAll('input:not([type=hidden]), select, textarea')];\
             const focusable = [...document.querySelectorAll('a[href], button, input:not([type=hidden]), select')];\
             return {h1: document.querySelectorAll('h1').length,\
                     unlabelled: fields.filter(f => !f.labels || f.labels.length === 0).map(f => f.name),\
                     first: focusable.length ? focusable[0].className : null,\
                     overflow: document.documentElement.scrollWidth - window.innerWidth};",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(facts["h1"], 1, "{page}: {facts}");
    assert_eq!(facts["unlabelled"], json!([]), "{page}: {facts}");
    assert_eq!(facts["first"], "skip", "{page}: {facts}");
    assert!(facts["overflow"].as_i64().unwrap() <= 1, "{page} is wider than the window: {facts}");
}

/// The porch rule of the demo (without the unlock step): deployed, then
/// fired by the signed webhook delivery of the demo home at 22:41 in
/// Paris. Returns the firing's run_id.
pub(crate) async fn porch_fired(server: &pilotage_server::start::Server) -> String {
    porch_fired_keeping(server, None).await
}

/// [`porch_fired`], the deploy carrying `assertions` (`x-assertions`),
/// which the deployment keeps and evaluates on the firing.
pub(crate) async fn porch_fired_keeping(server: &pilotage_server::start::Server, assertions: Option<Value>) -> String {
    let agent = client(&server.mcp_url()).await;
    let rule = json!({
        "rule": "porch-at-night",
        "description": "When the front door opens after 22:00 in Paris, light the porch.",
        "trigger": {"webhook": pilotage_server::demo::tenant::DEMO_HOME_SOURCE},
        "conditions": [
            {"id": "door-opened", "event": "/state", "equals": "open"},
            {"id": "after-22", "time": {"after": "22:00", "before": "06:00", "time_zone": "Europe/Paris"}},
            {"id": "light-is-off", "read": "porch_light.state", "field": "/on", "equals": false}
        ],
        "actions": [{"id": "light-on", "call": "porch_light.turn_on", "with": {"brightness": 80}}]
    });
    let mut deploy = json!({"rule": rule, "mode": "deploy"});
    if let Some(assertions) = assertions {
        deploy["x-assertions"] = assertions;
    }
    let deployed = ok(&agent, "run_automation", deploy).await;
    assert_eq!(deployed["outcome"]["ok"], true, "{deployed}");
    let night = pilotage_engine::clock::parse_rfc3339("2026-07-14T22:41:00+02:00").unwrap();
    server.platform.clock().freeze_at(night);
    let home = server.demo_world.as_ref().unwrap().0;
    let opened: Value = reqwest::Client::new()
        .post(format!("http://{home}/home/front_door/open"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(opened["status"], 202, "{opened}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let firings = server.platform.store().firings_of("demo", "porch-at-night", 5).await.unwrap();
        if let Some(firing) = firings.first()
            && server.platform.store().run_get(&firing.run_id).await.unwrap().is_some()
        {
            agent.cancel().await.unwrap();
            return firing.run_id.clone();
        }
        assert!(Instant::now() < deadline, "the rule never fired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A workflow Run at the invocation bound: 1,000 order listings in a loop,
/// stored at level full. Returns its run_id and its record's size.
async fn bounded_run(server: &pilotage_server::start::Server) -> (String, usize) {
    // The demo's order listing with a note the service ignores: each
    // step's input carries 400 characters, as a real Run's payloads do.
    let orders = format!("http://{}/orders/list", server.demo_world.as_ref().unwrap().0);
    let entry = json!({"id": "cap_list_orders_noted", "kind": "capability", "name": "List a user's orders, with a note",
        "input_schema": {"type": "object", "properties": {"user_id": {"type": "string"}, "note": {"type": "string"}},
                         "required": ["user_id"], "additionalProperties": false},
        "risk": "safe", "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false},
        "binding": {"url": orders}});
    let (status, report) =
        admin(server, reqwest::Method::PUT, "/tenants/demo/catalog/entries/cap_list_orders_noted", Some(entry)).await;
    assert_eq!(status, 201, "{report}");
    let agent = client(&server.mcp_url()).await;
    let ids: Vec<&str> = (0..1000).map(|i| ["42", "7"][i % 2]).collect();
    let workflow = json!({"steps": [{"id": "each", "kind": "for_each", "over": "$.input.ids", "as": "id", "do": [
        {"id": "orders", "kind": "call", "capability": "cap_list_orders_noted", "with": {"user_id": "$.id", "note": "$.input.note"}}]}]});
    let run = ok(
        &agent,
        "run_workflow",
        json!({"workflow": workflow, "input": {"ids": ids, "note": "n".repeat(400)}, "trace_level": "none", "store": true}),
    )
    .await;
    agent.cancel().await.unwrap();
    assert_eq!(run["outcome"]["status"], "success", "{}", run["outcome"]);
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let row = server.platform.store().run_get(&run_id).await.unwrap().expect("the Run is stored");
    (run_id, row.record.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_find_the_fired_rule_and_read_its_run_in_the_console() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.console = true;
    settings.admin_token = Some(ADMIN_TOKEN.into());
    // The operator's figures are this replica's metrics, recorded when it
    // serves them.
    settings.metrics_token = Some("console-test-metrics-token".into());
    let data_dir = settings.data_dir.clone();
    let server = server(settings).await;
    let base = format!("http://{}", server.addr);
    let (status, _) = admin(&server, reqwest::Method::POST, "/tenants", Some(json!({"id": "acme"}))).await;
    assert_eq!(status, 201);
    upload_language(&server, "acme", pilotage_bundled::WORKFLOW).await;
    let dev = pilotage_server::auth::dev::DevTokens::load(&data_dir, server.mcp_url()).unwrap();
    let token = |tenant: &str, subject: &str, scope: &str| dev.mint(tenant, subject, &[scope.to_owned()], 600).unwrap();

    let run_id = porch_fired(&server).await;
    let (big, big_bytes) = bounded_run(&server).await;

    // The pages' headers, read as a program reads them.
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let signed_out = http.get(format!("{base}/console/t/demo/runs/{run_id}")).send().await.unwrap();
    assert_eq!(signed_out.status(), 303);
    let location = signed_out.headers()["location"].to_str().unwrap();
    assert!(location.starts_with("/console/sign-in?next=%2Fconsole%2Ft%2Fdemo%2Fruns%2F"), "{location}");
    let form = http.get(format!("{base}/console/sign-in")).send().await.unwrap();
    let csp = form.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(form.headers()["x-frame-options"], "DENY");
    // Signing in to a page elsewhere is refused: the form goes back to the console.
    let elsewhere =
        post_sign_in(&http, &base, format!("token={ADMIN_TOKEN}&next=%2F%2Fevil.example%2Fconsole"), None).await;
    assert_eq!(elsewhere.headers()["location"], "/console");
    // A sign-in form posted from another site's page is refused.
    let forged = post_sign_in(&http, &base, format!("token={ADMIN_TOKEN}"), Some("https://evil.example")).await;
    assert_eq!(forged.status(), 403);
    assert!(forged.headers().get("set-cookie").is_none());

    // Signed out, the browser is sent to the form; bad credentials and
    // one without a console scope are refused.
    let browser = Browser::start().await.expect("headless Chromium (Debian's chromium and chromium-driver)");
    browser.goto(&format!("{base}/console/t/demo/deployments/porch-at-night")).await.unwrap();
    shows(&browser, "h1", "Sign in").await;
    browser.fill("#token", "not-a-token").await.unwrap();
    browser.submit("#token").await.unwrap();
    shows(&browser, "#sign-in-error", "not valid").await;
    browser.fill("#token", &token("demo", "agent", "pilotage:execute")).await.unwrap();
    browser.submit("#token").await.unwrap();
    shows(&browser, "#sign-in-error", "may not use the console").await;
    browser.fill("#token", ADMIN_TOKEN).await.unwrap();
    browser.submit("#token").await.unwrap();
    // Back where it was going, signed in as the operator.
    shows(&browser, "h1", "Deployment porch-at-night").await;
    let cookie = browser.cookies().await.unwrap().into_iter().find(|c| c.name == "pilotage_console").unwrap();
    assert_eq!(cookie.http_only, Some(true));
    assert_eq!(cookie.path.as_deref(), Some("/console"));
    well_formed(&browser, "deployment").await;
    browser.screenshot("console-deployment").await.unwrap();

    // The firing is listed with its outcome and links to its Run page.
    let row = shows(&browser, "#firings-table tr.firing", &run_id).await;
    assert!(row.contains("success"), "{row}");
    browser.click(&format!("#firings-table a[href$='{run_id}']")).await.unwrap();
    shows(&browser, "h1", &format!("Run {run_id}")).await;
    assert!(browser.current_url().await.unwrap().ends_with(&format!("/console/t/demo/runs/{run_id}")));
    let because = shows(&browser, ".pv-decision[data-at='after-22']", "it is 22:41 in Europe/Paris").await;
    assert!(because.contains("took true"), "{because}");
    assert!(shows(&browser, "#pv-outcome", "Succeeded").await.contains("success"));
    // The plan above the trace, with each step's risk; the light's call
    // really ran (not simulated).
    assert!(count(&browser, ".pv-plan tr.pv-step").await >= 2);
    let light = shows(&browser, ".pv-trace-step[data-step='light-on']", "porch_light.turn_on").await;
    assert!(!light.contains("simulated"), "{light}");
    assert!(browser.text("dl.facts").await.unwrap().contains("porch-at-night"));
    well_formed(&browser, "run").await;
    // Tall enough for the plan and the decision (the README shows it).
    browser.set_window_size(1100, 1500).await.unwrap();
    browser.screenshot("console-run-page").await.unwrap();
    browser.set_window_size(1280, 800).await.unwrap();

    // The Run list, filtered by deployment and by status; a time that does
    // not read is said so.
    browser.goto(&format!("{base}/console/t/demo/runs?deployment=porch-at-night")).await.unwrap();
    shows(&browser, "#runs-table caption", "1 retained Runs").await;
    assert!(browser.text("#runs-table tbody").await.unwrap().contains(&run_id));
    browser.goto(&format!("{base}/console/t/demo/runs?status=no_such_status")).await.unwrap();
    shows(&browser, "#runs-table caption", "0 retained Runs").await;
    browser.goto(&format!("{base}/console/t/demo/runs?language=workflow%2Fv1&status=success")).await.unwrap();
    let listed = browser.text("#runs-table tbody").await.unwrap();
    assert!(listed.contains(&big) && !listed.contains(&run_id), "{listed}");
    browser.goto(&format!("{base}/console/t/demo/runs?since=yesterday")).await.unwrap();
    shows(&browser, "#filter-error", "'yesterday' is not a time").await;
    well_formed(&browser, "runs").await;

    // The other pages, each well formed; the catalog shows risk, and the
    // overview draws the live figures (the operator's platform ones too).
    for (path, heading) in [
        ("languages", "Languages"),
        ("catalog", "Catalog"),
        ("data-sources", "Data sources"),
        ("deployments", "Deployments"),
        ("usage", "Usage of demo"),
        ("audit", "Audit log"),
    ] {
        browser.goto(&format!("{base}/console/t/demo/{path}")).await.unwrap();
        shows(&browser, "h1", heading).await;
        well_formed(&browser, path).await;
    }
    // The same pages at a phone's width.
    browser.set_window_size(390, 844).await.unwrap();
    for path in [
        "",
        "/languages",
        "/catalog",
        "/data-sources",
        "/deployments",
        "/deployments/porch-at-night",
        "/runs",
        "/usage",
        "/audit",
    ] {
        browser.goto(&format!("{base}/console/t/demo{path}")).await.unwrap();
        shows(&browser, "h1", "").await;
        well_formed(&browser, &format!("{path} at a phone's width")).await;
    }
    browser.screenshot("console-audit-phone").await.unwrap();
    browser.set_window_size(1280, 800).await.unwrap();
    browser.goto(&format!("{base}/console/t/demo/catalog")).await.unwrap();
    assert!(browser.text("#catalog-table").await.unwrap().contains("front_door.unlock"));
    // Usage: a bar per day of the range, the firing's night among them
    // (the clock is frozen on 2026-07-14), and the days' table.
    browser.goto(&format!("{base}/console/t/demo/usage?days=7")).await.unwrap();
    assert_eq!(count(&browser, ".usage-chart rect.chart-bar").await, 7);
    let night = browser
        .script(
            "return document.querySelector(\".usage-chart rect[data-day='2026-07-14']\").getAttribute('data-runs');",
            vec![],
        )
        .await
        .unwrap();
    assert!(night.as_str().unwrap().parse::<i64>().unwrap() >= 2, "{night}");
    assert!(browser.text("#usage-days").await.unwrap().contains("2026-07-14"));
    well_formed(&browser, "usage").await;
    browser.goto(&format!("{base}/console/t/demo")).await.unwrap();
    shows(&browser, "#charts", "Runs by status").await;
    assert!(count(&browser, "#charts figure.chart").await >= 6, "the operator sees the platform's figures");
    assert!(browser.text("#charts").await.unwrap().contains("porch-at-night"));
    // A replica that records no metrics says so instead of drawing zeros.
    server.platform.engine().metrics().set_enabled(false);
    browser.goto(&format!("{base}/console/t/demo")).await.unwrap();
    shows(&browser, "#no-metrics", "records no metrics").await;
    server.platform.engine().metrics().set_enabled(true);
    well_formed(&browser, "overview").await;
    browser.screenshot("console-overview").await.unwrap();

    // A Run at the invocation bound renders, pages and scrolls.
    let started = Instant::now();
    browser.goto(&format!("{base}/console/t/demo/runs/{big}")).await.unwrap();
    shows(&browser, ".pv-page-label", "Steps 1–100 of").await;
    let rendered = started.elapsed();
    let label = browser.text(".pv-page-label").await.unwrap();
    eprintln!("a Run of {big_bytes} bytes ({label}) rendered in {rendered:?}");
    assert!(big_bytes > 600_000, "the bounded Run's record is only {big_bytes} bytes");
    assert_eq!(count(&browser, "#pv-timeline > li").await, 100);
    browser.click(".pv-pages button:last-of-type").await.unwrap();
    shows(&browser, ".pv-page-label", "Steps 101–200").await;
    let scrolled =
        browser.script("window.scrollTo(0, document.body.scrollHeight); return window.scrollY;", vec![]).await.unwrap();
    assert!(scrolled.as_f64().unwrap() > 0.0, "the page does not scroll");
    // A value opens on demand.
    browser.click("#pv-timeline > li:first-child details.pv-output summary").await.unwrap();
    shows(&browser, "#pv-timeline > li:first-child details.pv-output pre", "{").await;
    // A step named "__proto__" is data: the arm b2 did not take is greyed,
    // and nothing reaches Object.prototype.
    let agent = client(&server.mcp_url()).await;
    let branch = |id: &str, equals: &str, step: &str| {
        json!({"id": id, "kind": "branch", "if": {"eq": ["$.input.a", equals]}, "then": [
            {"id": step, "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "42"}}]})
    };
    let hostile = json!({"steps": [branch("__proto__", "yes", "first"), branch("b2", "no", "cancel_everything")]});
    let ran = ok(
        &agent,
        "run_workflow",
        json!({"workflow": hostile, "input": {"a": "yes"}, "trace_level": "none", "store": true}),
    )
    .await;
    assert_eq!(ran["outcome"]["status"], "success", "{ran}");
    agent.cancel().await.unwrap();
    browser.goto(&format!("{base}/console/t/demo/runs/{}", ran["run_id"].as_str().unwrap())).await.unwrap();
    shows(&browser, "tr.pv-step[data-step='cancel_everything']", "not taken").await;
    let polluted = browser
        .script("return Object.prototype.hasOwnProperty('then') || ({}).then !== undefined;", vec![])
        .await
        .unwrap();
    assert_eq!(polluted, json!(false));

    // Pages of the Run list: 60 Runs stored in the same millisecond are
    // each listed once over two pages.
    let now = server.platform.clock().now_ms();
    for index in 0..60 {
        let run_id = format!("run_page_{index:02}");
        let record = json!({"run_id": run_id, "outcome": {"ok": true, "status": "success", "error": null},
                            "trace": {"run_id": run_id, "level": "full", "steps": []}});
        let row = pilotage_store::RunRow {
            run_id,
            tenant: "demo".into(),
            issuer: String::new(),
            subject: "pager".into(),
            language: "pager/1".into(),
            session_id: None,
            recorded_level: "full".into(),
            record: record.to_string(),
            status: "success".into(),
            created_at: now,
            expires_at: Some(now + 3_600_000),
        };
        server.platform.store().run_insert(&row).await.unwrap();
    }
    browser.goto(&format!("{base}/console/t/demo/runs?language=pager%2F1")).await.unwrap();
    shows(&browser, "#runs-table caption", "50 retained Runs").await;
    let first = browser.text("#runs-table tbody").await.unwrap();
    browser.click("#older").await.unwrap();
    shows(&browser, "#runs-table caption", "10 retained Runs").await;
    let second = browser.text("#runs-table tbody").await.unwrap();
    assert!(!browser.exists("#older").await.unwrap());
    for index in 0..60 {
        let run_id = format!("run_page_{index:02}");
        assert!(first.contains(&run_id) != second.contains(&run_id), "{run_id} is not on exactly one page");
    }
    browser.goto(&format!("{base}/console/t/demo/runs/{big}")).await.unwrap();
    shows(&browser, ".pv-page-label", "Steps 1–100 of").await;

    // At a phone's width nothing is wider than the screen.
    browser.set_window_size(390, 844).await.unwrap();
    well_formed(&browser, "run at a phone's width").await;
    browser.screenshot("console-run-phone").await.unwrap();
    browser.close().await.unwrap();

    // A tenant's reader sees its own tenant, and reaching another tenant's
    // pages by URL is the same 404 as a tenant that does not exist.
    let reader = Browser::start().await.unwrap();
    sign_in(&reader, &base, &token("acme", "ann", "pilotage:console")).await;
    shows(&reader, "h1", "Tenant acme").await;
    shows(&reader, "#charts", "Runs by status").await;
    assert_eq!(count(&reader, "#charts figure.chart").await, 2, "a reader sees only its tenant's figures");
    let mut answers = Vec::new();
    for path in [
        format!("/console/t/demo/runs/{run_id}"),
        "/console/t/demo".to_owned(),
        "/console/t/demo/deployments/porch-at-night".to_owned(),
        "/console/t/nope".to_owned(),
        "/console/t/nope/runs/whatever".to_owned(),
        format!("/console/t/acme/runs/{run_id}"),
    ] {
        reader.goto(&format!("{base}{path}")).await.unwrap();
        answers.push(shows(&reader, "main", "There is no such page").await);
    }
    assert!(answers.windows(2).all(|pair| pair[0] == pair[1]), "{answers:?}");
    reader.close().await.unwrap();
    let cookie = cookie_of(
        &post_sign_in(&http, &base, format!("token={}", token("acme", "ann", "pilotage:console")), None).await,
    );
    let statuses = [
        format!("/console/t/demo/runs/{run_id}"),
        "/console/t/nope".to_owned(),
        "/console/t/demo/figures.json".to_owned(),
    ];
    for path in statuses {
        let response = http.get(format!("{base}{path}")).header("cookie", &cookie).send().await.unwrap();
        assert_eq!(response.status(), 404, "{path}");
    }
    // A session never outlives the credential it was opened with.
    let brief = dev.mint("acme", "ann", &["pilotage:console".to_owned()], 2).unwrap();
    let brief_cookie = cookie_of(&post_sign_in(&http, &base, format!("token={brief}"), None).await);
    let read = |cookie: String| {
        let http = http.clone();
        let url = format!("{base}/console/t/acme");
        async move { http.get(url).header("cookie", cookie).send().await.unwrap().status() }
    };
    assert_eq!(read(brief_cookie.clone()).await, 200);
    tokio::time::sleep(Duration::from_millis(3100)).await;
    assert_eq!(read(brief_cookie).await, 303, "the session ended with its token");
    assert_eq!(read(cookie.clone()).await, 200, "a longer token's session goes on");
    // A forged session is no session.
    let forged =
        http.get(format!("{base}/console/t/acme")).header("cookie", "pilotage_console=AAAA").send().await.unwrap();
    assert_eq!(forged.status(), 303);
    server.stop().await;

    // Off (the default): no console route.
    let off = crate::endpoint::server(settings_off().await).await;
    let response = http.get(format!("http://{}/console/sign-in", off.addr)).send().await.unwrap();
    assert_ne!(response.status(), 200);
    assert!(!response.text().await.unwrap().contains("Sign in to the console"));
    off.stop().await;
}

async fn settings_off() -> pilotage_server::settings::Settings {
    let settings = settings(Backend::Sqlite).await;
    assert!(!settings.console, "the console is off by default");
    settings
}

/// Signing out ends the session on the server: a copy of its cookie taken
/// before sign-out opens nothing afterwards, on the replica that signed it
/// out and on another sharing the store (two `pilotage serve` on one
/// PostgreSQL); a session that did not sign out goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_ends_the_session_on_every_replica() {
    let database_url = crate::endpoint::postgres_schema().await;
    let data_dir = std::env::temp_dir().join(crate::endpoint::unique("console-sign-out"));
    let mut one = crate::fleet::replica_process(&data_dir, &database_url, &["--console=true"]).await;
    let mut two = crate::fleet::replica_process(&data_dir, &database_url, &["--console=true"]).await;
    let (base_one, base_two) = (format!("http://{}", one.addr), format!("http://{}", two.addr));
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let read = |base: &str, cookie: &str| {
        let request = http.get(format!("{base}/console")).header("cookie", cookie.to_owned());
        async move { request.send().await.unwrap().status() }
    };
    // A second session, which does not sign out.
    let other = cookie_of(&post_sign_in(&http, &base_one, format!("token={}", crate::fleet::ADMIN_TOKEN), None).await);

    let browser = Browser::start().await.expect("headless Chromium (Debian's chromium and chromium-driver)");
    sign_in(&browser, &base_one, crate::fleet::ADMIN_TOKEN).await;
    let cookie = browser.cookies().await.unwrap().into_iter().find(|c| c.name == "pilotage_console").unwrap();
    let copy = format!("pilotage_console={}", cookie.value);
    assert_eq!(read(&base_one, &copy).await, 200);
    assert_eq!(read(&base_two, &copy).await, 200, "one session on every replica");
    browser.click("form.sign-out button").await.unwrap();
    shows(&browser, "h1", "Sign in").await;
    browser.close().await.unwrap();
    assert_eq!(read(&base_one, &copy).await, 303, "the copy opens nothing where it signed out");
    assert_eq!(read(&base_two, &copy).await, 303, "nor on another replica");
    assert_eq!(read(&base_two, &other).await, 200, "another session goes on");
    one.child.kill().await.unwrap();
    two.child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&data_dir);
}
