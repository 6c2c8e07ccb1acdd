//! A tenant's policy on risk through the real endpoint (Part II §7.3
//! enforced by the platform, `pilotage_server::policy`): allow, approve and
//! deny on immediate Runs; an approval bound to its principal, program,
//! input and catalog version, used once, expiring; the asker cannot decide
//! its own request; budgets refuse with the time to retry and reset; the
//! approval page read and decided in a real headless Chromium; every
//! decision in the audit log.

use pilotage_client::Connection;
use pilotage_test_support::browser::Browser;
use serde_json::{Value, json};

use crate::tenancy::{World, admin, result, two_tenants};

const MCP: &str = "pilotage:mcp";

fn entry(id: &str, risk: &str, hints: Value, url: &str) -> Value {
    json!({"id": id, "kind": "capability", "name": id, "description": format!("{risk} action"),
           "input_schema": {"type": "object", "properties": {"user_id": {"type": "string"}}},
           "risk": risk, "risk_hints": hints, "binding": {"url": url}})
}

fn program(capability: &str, user: &str) -> Value {
    json!({"steps": [{"id": "act", "kind": "call", "capability": capability, "with": {"user_id": user}}],
           "output": "$.steps.act.output.name"})
}

/// The text of `selector` once the page shows `want` in it (navigation
/// after a click or submit is asynchronous to WebDriver): retried for
/// 10 s, then a failure naming what was shown.
async fn settled(browser: &Browser, selector: &str, want: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let shown = browser.text(selector).await;
        match shown {
            Ok(text) if text.contains(want) => return text,
            other if std::time::Instant::now() > deadline => panic!("{selector} never showed {want:?}: {other:?}"),
            _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
}

/// What `pilotage ARGS` printed, as the operator; asserts it succeeded.
async fn cli(args: &[&str]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
        .args(args)
        .env("PILOTAGE_ADMIN_TOKEN", crate::tenancy::ADMIN_TOKEN)
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "pilotage {args:?}: {text}{}", String::from_utf8_lossy(&output.stderr));
    text
}

async fn run(connection: &Connection, capability: &str, user: &str) -> Value {
    result(connection.call("run_workflow", json!({"workflow": program(capability, user)})).await.unwrap())
}

/// acme gets a write and a destructive entry and the policy of the tests.
async fn strict_world() -> World {
    let world = two_tenants().await;
    let demo = format!("http://{}/users/profile", world.server.demo_world.as_ref().unwrap().0);
    let (status, report) = admin(
        &world.server,
        reqwest::Method::POST,
        "/tenants/acme/catalog/apply",
        Some(json!({"entries": [
            entry("cap_write", "write", json!({"readOnly": false, "destructive": false, "openWorld": false}), &demo),
            entry("cap_wipe", "destructive", json!({"readOnly": false, "destructive": true, "openWorld": false}), &demo),
            entry("cap_shared", "safe", json!({"readOnly": true, "destructive": false, "openWorld": false}), &demo),
        ]})),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    world
}

const POLICY: &str = r#"{
    "rules": [
        {"risk": "write", "decision": "deny", "scopes": ["intern"]},
        {"risk": "destructive", "decision": "approve"}
    ],
    "budgets": [{"risk": "write", "runs": 3, "window_s": 3600}],
    "approval_ttl_s": 600
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tenants_policy_holds_denies_and_budgets_runs() {
    let world = strict_world().await;
    let server = &world.server;
    let alice = world.as_("acme", "alice", MCP).await;
    let bob = world.as_("acme", "bob", MCP).await;
    let intern = world.as_("acme", "ivy", &format!("{MCP} intern")).await;

    // The default policy allows everything.
    assert_eq!(run(&alice, "cap_wipe", "42").await["outcome"]["status"], "success");

    // Only an operator sets a policy; a bad one names its member.
    let tenant_admin = reqwest::Client::new()
        .put(format!("http://{}/admin/v1/tenants/acme/policy", server.addr))
        .bearer_auth(world.token("acme", "carol", "pilotage:tenant-admin"))
        .json(&serde_json::from_str::<Value>(POLICY).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(tenant_admin.status(), 403);
    let (status, bad) = admin(
        server,
        reqwest::Method::PUT,
        "/tenants/acme/policy",
        Some(json!({"budgets": [{"risk": "write", "runs": 1, "window_s": 0}]})),
    )
    .await;
    assert_eq!((status, bad["error"]["field"].as_str()), (400, Some("budgets[0].window_s")), "{bad}");
    let (status, set) =
        admin(server, reqwest::Method::PUT, "/tenants/acme/policy", Some(serde_json::from_str(POLICY).unwrap())).await;
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["version"].as_str().unwrap().len(), 16);

    // Read-only plans are untouched; so is another tenant.
    assert_eq!(run(&alice, "cap_shared", "42").await["outcome"]["status"], "success");
    let globex = world.as_("globex", "gina", MCP).await;
    assert_eq!(run(&globex, "cap_shared", "42").await["outcome"]["status"], "success");

    // deny: no approval can change it, nothing ran.
    let denied = run(&intern, "cap_write", "42").await;
    assert_eq!(denied["outcome"], json!({"ok": false, "status": "policy_denied", "error": denied["outcome"]["error"]}));
    assert!(denied.get("approval").is_none() && denied.get("trace").is_none(), "{denied}");

    // approve: held with an approval naming its page; the same request is
    // held by the same approval.
    let held = run(&alice, "cap_wipe", "42").await;
    assert_eq!(held["outcome"]["status"], "approval_required", "{held}");
    assert_eq!(held["outcome"]["ok"], false);
    let id = held["approval"]["id"].as_str().unwrap().to_owned();
    assert!(held["approval"]["url"].as_str().unwrap().ends_with(&format!("/approvals/{id}")), "{held}");
    assert!(held["outcome"]["error"].as_str().unwrap().contains(&id));
    assert!(held.get("trace").is_none() && held.get("output").is_none(), "nothing ran: {held}");
    assert_eq!(run(&alice, "cap_wipe", "42").await["approval"]["id"], id.as_str());

    // The asker cannot decide its own request, even as a tenant admin.
    let approve_as = |id: &str, token: String| {
        reqwest::Client::new()
            .post(format!("http://{}/admin/v1/tenants/acme/approvals/{id}/approve", server.addr))
            .bearer_auth(token)
            .send()
    };
    let own = approve_as(&id, world.token("acme", "alice", "pilotage:tenant-admin")).await.unwrap();
    assert_eq!(own.status(), 403);
    // Nor as an operator: a token of the same subject holding
    // pilotage:admin is refused too (it was accepted, decided_by=alice).
    let own_as_operator = approve_as(&id, world.token("acme", "alice", "pilotage:admin")).await.unwrap();
    assert_eq!(own_as_operator.status(), 403);
    assert!(own_as_operator.text().await.unwrap().contains("its own request"));
    // A subject that happens to bear the operator token's name is no
    // exception: its admin token cannot approve what it asked either.
    let named_operator = world.as_("acme", "operator", MCP).await;
    let theirs = run(&named_operator, "cap_wipe", "99").await;
    let theirs = theirs["approval"]["id"].as_str().unwrap().to_owned();
    let own_as_named_operator = approve_as(&theirs, world.token("acme", "operator", "pilotage:admin")).await.unwrap();
    assert_eq!(own_as_named_operator.status(), 403);
    // Another tenant's admin sees nothing of it.
    let foreign = approve_as(&id, world.token("globex", "gus", "pilotage:tenant-admin")).await.unwrap();
    assert_eq!(foreign.status(), 403);
    // A comment longer than 500 characters, or a body that is not the
    // decision's shape, decides nothing; a fitting one is kept.
    let path = format!("/tenants/acme/approvals/{id}/approve");
    let (status, long) = admin(server, reqwest::Method::POST, &path, Some(json!({"comment": "x".repeat(501)}))).await;
    assert_eq!(status, 400, "{long}");
    assert!(long["error"]["message"].as_str().unwrap().contains("at most 500 characters"), "{long}");
    let (status, shaped) = admin(server, reqwest::Method::POST, &path, Some(json!({"comment": 7}))).await;
    assert_eq!(status, 400, "{shaped}");
    let (status, approved) =
        admin(server, reqwest::Method::POST, &path, Some(json!({"comment": "checked with the data owner"}))).await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["state"], "approved");
    let (status, again) =
        admin(server, reqwest::Method::POST, &format!("/tenants/acme/approvals/{id}/reject"), None).await;
    assert_eq!(status, 409, "a decided approval is not decided again: {again}");

    // Bound to the principal and the input: bob's identical request and
    // alice's with another input are held by approvals of their own.
    let bobs = run(&bob, "cap_wipe", "42").await;
    assert_eq!(bobs["outcome"]["status"], "approval_required");
    assert_ne!(bobs["approval"]["id"], id.as_str());
    let mut renamed = program("cap_wipe", "42");
    renamed["steps"][0]["id"] = json!("wipe");
    renamed["output"] = json!("$.steps.wipe.output.name");
    let other_program = result(alice.call("run_workflow", json!({"workflow": renamed})).await.unwrap());
    assert_eq!(other_program["outcome"]["status"], "approval_required", "another program: {other_program}");
    assert_ne!(other_program["approval"]["id"], id.as_str());
    let other_input = run(&alice, "cap_wipe", "7").await;
    assert_eq!(other_input["outcome"]["status"], "approval_required");
    assert_ne!(other_input["approval"]["id"], id.as_str());

    // The approved request runs once; the next identical one is held anew.
    let ran = run(&alice, "cap_wipe", "42").await;
    assert_eq!(ran["outcome"]["status"], "success", "{ran}");
    let (_, used) = admin(server, reqwest::Method::GET, &format!("/tenants/acme/approvals/{id}"), None).await;
    assert_eq!(used["state"], "used");
    assert_eq!(used["used_by_run"], ran["run_id"]);
    let next = run(&alice, "cap_wipe", "42").await;
    assert_eq!(next["outcome"]["status"], "approval_required");
    let next_id = next["approval"]["id"].as_str().unwrap().to_owned();
    assert_ne!(next_id, id);

    // Rejected, through the CLI (which lists the pending one first): the
    // request answers approval_rejected until it expires.
    let base = format!("http://{}", server.addr);
    let pending = cli(&["approval", "ls", "acme", "--state", "pending", "--server", &base]).await;
    assert!(pending.contains(&next_id), "{pending}");
    let rejected_by_cli =
        cli(&["approval", "reject", "acme", &next_id, "--comment", "not on a Friday", "--server", &base]).await;
    assert!(rejected_by_cli.contains("\"rejected\""), "{rejected_by_cli}");
    let shown = cli(&["policy", "get", "acme", "--server", &base]).await;
    assert!(shown.contains("\"approve\"") && shown.contains(set["version"].as_str().unwrap()), "{shown}");
    let rejected = run(&alice, "cap_wipe", "42").await;
    assert_eq!(rejected["outcome"]["status"], "approval_rejected", "{rejected}");

    // Bound to the catalog version: an approval made before the catalog
    // changed does not let the request run after.
    let pending = run(&alice, "cap_wipe", "3").await["approval"]["id"].as_str().unwrap().to_owned();
    let (status, _) =
        admin(server, reqwest::Method::POST, &format!("/tenants/acme/approvals/{pending}/approve"), None).await;
    assert_eq!(status, 200);
    let demo = format!("http://{}/users/profile", server.demo_world.as_ref().unwrap().0);
    let (status, _) = admin(
        server,
        reqwest::Method::PUT,
        "/tenants/acme/catalog/entries/cap_new",
        Some(entry("cap_new", "safe", json!({"readOnly": true, "destructive": false, "openWorld": false}), &demo)),
    )
    .await;
    assert_eq!(status, 201);
    let after_change = run(&alice, "cap_wipe", "3").await;
    assert_eq!(after_change["outcome"]["status"], "approval_required", "{after_change}");
    assert_ne!(after_change["approval"]["id"], pending.as_str());

    // Expiry: past approval_ttl_s an approved request needs a new one.
    let late = after_change["approval"]["id"].as_str().unwrap().to_owned();
    let (status, _) =
        admin(server, reqwest::Method::POST, &format!("/tenants/acme/approvals/{late}/approve"), None).await;
    assert_eq!(status, 200);
    server.platform.clock().freeze_at(server.platform.clock().now_ms());
    server.platform.clock().advance(std::time::Duration::from_secs(601));
    let expired = run(&alice, "cap_wipe", "3").await;
    assert_eq!(expired["outcome"]["status"], "approval_required");
    assert_ne!(expired["approval"]["id"], late.as_str());
    let (_, listed) = admin(server, reqwest::Method::GET, "/tenants/acme/approvals?state=expired", None).await;
    assert!(listed["approvals"].as_array().unwrap().iter().any(|a| a["id"] == late.as_str()), "{listed}");

    // Budgets: write Runs per principal per hour; a spent one says when it
    // resets, and it does. (A Run held for approval takes nothing.)
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(run(&bob, "cap_write", "42").await["outcome"].clone());
    }
    assert_eq!(
        statuses.iter().map(|o| o["status"].as_str().unwrap()).collect::<Vec<_>>(),
        ["success", "success", "success", "budget_exceeded"],
        "{statuses:?}"
    );
    let message = statuses[3]["error"].as_str().unwrap();
    assert!(message.contains("retry in "), "{message}");
    assert_eq!(run(&alice, "cap_write", "42").await["outcome"]["status"], "success", "per principal");
    server.platform.clock().advance(std::time::Duration::from_secs(3600));
    assert_eq!(run(&bob, "cap_write", "42").await["outcome"]["status"], "success", "the window reset");

    // Invocations per Run: a policy's bound below the platform's.
    let (status, _) =
        admin(server, reqwest::Method::PUT, "/tenants/acme/policy", Some(json!({"max_invocations_per_run": 1}))).await;
    assert_eq!(status, 200);
    let twice = json!({"steps": [
        {"id": "a", "kind": "call", "capability": "cap_shared", "with": {"user_id": "42"}},
        {"id": "b", "kind": "call", "capability": "cap_shared", "with": {"user_id": "7"}}], "output": "$.steps.b.output.name"});
    let bounded = result(bob.call("run_workflow", json!({"workflow": twice})).await.unwrap());
    assert_eq!(bounded["outcome"]["status"], "resource_exhausted", "{bounded}");
    assert!(bounded["outcome"]["error"].as_str().unwrap().contains("bound of 1 invocations"), "{bounded}");
    assert_eq!(run(&bob, "cap_shared", "42").await["outcome"]["status"], "success");

    // Every decision is in the audit log.
    let (_, audit) = admin(server, reqwest::Method::GET, "/audit?limit=200", None).await;
    let actions: Vec<&str> = audit["audit"].as_array().unwrap().iter().filter_map(|r| r["action"].as_str()).collect();
    for action in
        ["tenant.policy", "policy.deny", "approval.request", "approval.approve", "approval.reject", "approval.use"]
    {
        assert!(actions.contains(&action), "{action} missing from {actions:?}");
    }
    // The approvers' comments, from the admin API and the CLI, are kept.
    let comments: Vec<String> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| serde_json::from_str::<Value>(r["detail"].as_str()?).ok())
        .filter_map(|detail| detail["comment"].as_str().map(str::to_owned))
        .collect();
    for comment in ["checked with the data owner", "not on a Friday"] {
        assert!(comments.iter().any(|c| c == comment), "{comment} missing from {comments:?}");
    }
    // Each names its tenant, so the tenant's own audit views (a tenant
    // admin's, the console's) list it.
    for record in audit["audit"].as_array().unwrap() {
        let action = record["action"].as_str().unwrap();
        if action.starts_with("approval.") || action == "policy.deny" {
            let target = record["target"].as_str().unwrap();
            assert!(target.starts_with("acme/") || target.starts_with("globex/"), "{record}");
        }
    }

    // Every Language's closed-sets guide lists the policy's statuses.
    let index = result(alice.call("pilotage_get_guide", json!({"language": "workflow/v1"})).await.unwrap());
    let closed = index["guides"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["topics"].as_array().unwrap().contains(&json!("closed-sets")))
        .unwrap()["id"]
        .clone();
    let guide =
        result(alice.call("pilotage_get_guide", json!({"language": "workflow/v1", "id": closed})).await.unwrap());
    let text = guide["guide"]["body"].as_str().unwrap();
    for status in ["approval_required", "approval_rejected", "policy_denied", "budget_exceeded"] {
        assert!(text.contains(status), "{status} not in the closed-sets guide");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_reads_the_plan_and_decides_on_the_approval_page() {
    let world = strict_world().await;
    let server = &world.server;
    let (status, _) =
        admin(server, reqwest::Method::PUT, "/tenants/acme/policy", Some(serde_json::from_str(POLICY).unwrap())).await;
    assert_eq!(status, 200);
    let alice = world.as_("acme", "alice", MCP).await;
    let held = run(&alice, "cap_wipe", "7").await;
    let url = held["approval"]["url"].as_str().unwrap().to_owned();
    let url = url.replacen("http://pilotage.test", &format!("http://{}", server.addr), 1);

    let browser = Browser::start().await.expect("headless Chromium (Debian's chromium and chromium-driver)");
    // Signed out: the sign-in form; a credential without an approver
    // scope, or the agent's own, is refused.
    browser.goto(&url).await.unwrap();
    assert!(browser.exists("#token").await.unwrap());
    browser.fill("#token", &world.token("acme", "mallory", MCP)).await.unwrap();
    browser.submit("form").await.unwrap();
    settled(&browser, "[role=alert]", "may not decide").await;
    // The asker signs in with an approver token of its own subject: it
    // reads the request but gets no buttons.
    browser.fill("#token", &world.token("acme", "alice", "pilotage:approve")).await.unwrap();
    browser.submit("form").await.unwrap();
    settled(&browser, "#own", "someone else must decide").await;
    assert!(!browser.exists("#approve").await.unwrap());

    // An id holding encoded slashes keeps the sign-in form on its own path
    // (it posted to /console/sign-out/sign-in).
    let base = format!("http://{}", server.addr);
    let strange = Browser::start().await.unwrap();
    strange.goto(&format!("{base}/approvals/x%2F..%2F..%2Fconsole%2Fsign-out")).await.unwrap();
    let action = strange.find("form").await.unwrap().attribute("action").await.unwrap().unwrap();
    let segment = action.strip_prefix("/approvals/").and_then(|rest| rest.strip_suffix("/sign-in"));
    assert!(segment.is_some_and(|id| !id.contains('/') && !id.contains("..")), "{action}");
    let resolved = strange.script("return document.querySelector('form').action;", vec![]).await.unwrap();
    assert_eq!(resolved, json!(format!("{base}{action}")), "the browser posts where the form says");
    strange.close().await.unwrap();

    // An approver of another tenant sees no such approval.
    let other = Browser::start().await.unwrap();
    other.goto(&url).await.unwrap();
    other.fill("#token", &world.token("globex", "gus", "pilotage:approve")).await.unwrap();
    other.submit("form").await.unwrap();
    settled(&other, "h1", "No such approval").await;
    other.close().await.unwrap();

    // The approver reads who asks, the plan with each step's risk and
    // entry, the program and the input, then approves.
    let approver = Browser::start().await.unwrap();
    approver.goto(&url).await.unwrap();
    approver.fill("#token", &world.token("acme", "dana", "pilotage:approve")).await.unwrap();
    approver.submit("form").await.unwrap();
    // The asker is named with the issuer of its credential: two identity
    // providers' "alice" are two people.
    let asker = settled(&approver, "#asker", "alice").await;
    assert!(asker.starts_with("alice of https://issuer.test (tenant acme)"), "{asker}");
    assert_eq!(settled(&approver, "#max-risk", "").await, "destructive");
    let step = settled(&approver, "tr.step", "cap_wipe").await;
    assert!(step.contains("act") && step.contains("cap_wipe") && step.contains("destructive"), "{step}");
    settled(&approver, "#program", "cap_wipe").await;
    settled(&approver, "#from", "127.0.0.1").await;
    settled(&approver, "#input", "null").await;
    let cookie = approver.cookies().await.unwrap().into_iter().find(|c| c.name == "pilotage_approver").unwrap();
    assert_eq!(cookie.http_only, Some(true));
    approver.screenshot("approval-page").await.unwrap();
    // A forged form (a CSRF token of another approval) is refused.
    let csrf = approver.find("input[name=csrf]").await.unwrap().attribute("value").await.unwrap().unwrap();
    approver
        .script(
            "document.querySelector('input[name=csrf]').value = arguments[0]; document.querySelector('#approve').click();",
            vec![json!(format!("{csrf}x"))],
        )
        .await
        .unwrap();
    settled(&approver, "h1", "Refused").await;
    // A decision posted from another site's page is refused by its Origin,
    // even with the session's cookie and a valid form token; so is a
    // sign-in (login CSRF). Nothing was decided.
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let cross_site = http
        .post(format!("{url}/decision"))
        .header("origin", "https://evil.example")
        .header("cookie", format!("pilotage_approver={}", cookie.value))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&decision=approve"))
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);
    let forged_sign_in = http
        .post(format!("{url}/sign-in"))
        .header("origin", "https://evil.example")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", world.token("acme", "dana", "pilotage:approve")))
        .send()
        .await
        .unwrap();
    assert_eq!(forged_sign_in.status(), 403);
    assert!(forged_sign_in.headers().get("set-cookie").is_none());
    approver.goto(&url).await.unwrap();
    settled(&approver, "#state", "pending").await;
    approver.click("#approve").await.unwrap();
    settled(&approver, "#state", "approved").await;
    // Replaying the same form finds nothing to decide.
    approver
        .script(
            "const f = document.createElement('form'); f.method = 'post'; f.action = location.pathname + '/decision'; \
             for (const [n, v] of [['csrf', arguments[0]], ['decision', 'reject']]) { const i = document.createElement('input'); i.name = n; i.value = v; f.appendChild(i); } \
             document.body.appendChild(f); f.submit();",
            vec![json!(csrf)],
        )
        .await
        .unwrap();
    settled(&approver, "#conflict", "This approval is approved.").await;

    // The agent's retry runs now.
    assert_eq!(run(&alice, "cap_wipe", "7").await["outcome"]["status"], "success");

    // A call that waits (its client shows URL elicitations) completes once
    // the human approves on the page.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let info = elicitation_client_info();
    let waiting_client = reviewer_client(
        &server.mcp_url(),
        &world.token("acme", "alice", MCP),
        Reviewer { info, decide_at: None, seen: seen.clone() },
    )
    .await;
    let waiting = tokio::spawn(async move {
        let answer = call(&waiting_client, json!({"workflow": program("cap_wipe", "13")})).await;
        let _ = waiting_client.cancel().await;
        answer.structured_content.unwrap_or_default()
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (page_url, _) = loop {
        if let Some(first) = seen.lock().unwrap().first().cloned() {
            break first;
        }
        assert!(std::time::Instant::now() < deadline, "the waiting call sent no elicitation");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    approver.goto(&page_url.replacen("http://pilotage.test", &format!("http://{}", server.addr), 1)).await.unwrap();
    approver.click("#approve").await.unwrap();
    // The waiting call uses the approval the moment it is given: the page
    // reads approved, or already used when that Run was quicker.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let state = approver.text("#state").await.unwrap_or_default();
        if state == "approved" || state == "used" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the page never showed the decision: {state:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let completed = waiting.await.unwrap();
    assert_eq!(completed["outcome"]["status"], "success", "the waiting call ran once approved: {completed}");
    // Reject through the page: the agent is told.
    let held = run(&alice, "cap_wipe", "8").await;
    let url = held["approval"]["url"].as_str().unwrap().replacen(
        "http://pilotage.test",
        &format!("http://{}", server.addr),
        1,
    );
    approver.goto(&url).await.unwrap();
    approver.click("#reject").await.unwrap();
    settled(&approver, "#state", "rejected").await;
    assert_eq!(run(&alice, "cap_wipe", "8").await["outcome"]["status"], "approval_rejected");

    // The page cannot be framed and runs no script.
    let response = reqwest::get(&url).await.unwrap();
    assert_eq!(response.headers()["x-frame-options"], "DENY");
    let csp = response.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'none'"), "{csp}");
    approver.close().await.unwrap();
    browser.close().await.unwrap();
}

/// The demo home's rule of the story, with or without its unlock step.
fn porch_rule(unlock: bool) -> Value {
    let mut actions = vec![json!({"id": "light-on", "call": "porch_light.turn_on", "with": {"brightness": 80}})];
    if unlock {
        actions.push(json!({"id": "unlock", "call": "front_door.unlock"}));
    }
    json!({"rule": "porch-at-night", "description": "Light the porch at night.",
           "trigger": {"webhook": "home"},
           "conditions": [{"id": "door-opened", "event": "/state", "equals": "open"}],
           "actions": actions})
}

async fn automation(connection: &pilotage_client::Connection, rule: Value, extra: Value) -> Value {
    let mut arguments = json!({"rule": rule});
    for (name, value) in extra.as_object().unwrap() {
        arguments[name] = value.clone();
    }
    result(connection.call("run_automation", arguments).await.unwrap())
}

async fn deploys_and_test_runs_meet_the_policy(backend: crate::endpoint::Backend) {
    let mut configured = crate::endpoint::settings(backend).await;
    configured.admin_token = Some(crate::tenancy::ADMIN_TOKEN.into());
    let data_dir = configured.data_dir.clone();
    let server = crate::endpoint::server(configured).await;
    let agent = pilotage_client::Connection::http(&server.mcp_url(), None).await.unwrap();
    let policy = json!({"rules": [
        {"risk": "destructive", "decision": "approve"},
        {"risk": "write", "decision": "deny", "runs": ["test"], "except_scopes": ["tester"]}
    ], "budgets": [{"risk": "write", "runs": 2, "window_s": 86400, "per": "tenant", "runs_of": ["deploy"]}]});
    let (status, body) = admin(&server, reqwest::Method::PUT, "/tenants/demo/policy", Some(policy)).await;
    assert_eq!(status, 200, "{body}");
    let deploy = json!({"mode": "deploy"});
    let test = json!({"mode": "deploy", "test_run": true, "input": {"event": {"state": "open"}, "at": "2026-07-14T22:30:00+02:00"}});

    // Deploy: approve. The destructive rule is held; approved, it installs.
    let held = automation(&agent, porch_rule(true), deploy.clone()).await;
    assert_eq!(held["outcome"]["status"], "approval_required", "{held}");
    let id = held["approval"]["id"].as_str().unwrap();
    let (_, shown) = admin(&server, reqwest::Method::GET, &format!("/tenants/demo/approvals/{id}"), None).await;
    assert_eq!(shown["request"]["run"], "deploy", "{shown}");
    assert_eq!(shown["request"]["plan"]["max_risk"], "destructive");
    assert_eq!(shown["request"]["from"], "127.0.0.1", "the asker's address is recorded: {shown}");
    // A test run of the same rule is another request: its own decision.
    let tested = automation(&agent, porch_rule(true), test.clone()).await;
    assert_eq!(tested["outcome"]["status"], "policy_denied", "a write-or-worse test run is denied here: {tested}");
    let (status, _) =
        admin(&server, reqwest::Method::POST, &format!("/tenants/demo/approvals/{id}/approve"), None).await;
    assert_eq!(status, 200);
    let installed = automation(&agent, porch_rule(true), deploy.clone()).await;
    assert_eq!(installed["outcome"]["status"], "success", "{installed}");
    assert_eq!(installed["output"]["deployment"], "porch-at-night");

    // Deploy: allow (write), within the tenant's budget of deploys; the
    // third deploy today is refused with the time to retry.
    let allowed = automation(&agent, porch_rule(false), deploy.clone()).await;
    assert_eq!(allowed["outcome"]["status"], "success", "{allowed}");
    let spent = automation(&agent, porch_rule(false), deploy.clone()).await;
    assert_eq!(spent["outcome"]["status"], "budget_exceeded", "{spent}");
    assert!(spent["outcome"]["error"].as_str().unwrap().contains("retry in "), "{spent}");

    // Test runs: deny for this caller, allow for one holding `tester`,
    // and a test run of a read-only plan meets no rule.
    let denied = automation(&agent, porch_rule(false), test.clone()).await;
    assert_eq!(denied["outcome"]["status"], "policy_denied", "{denied}");
    let dev = pilotage_server::auth::dev::DevTokens::load(&data_dir, server.mcp_url()).unwrap();
    let tester_token = dev.mint("demo", "tess", &["pilotage:mcp".to_owned(), "tester".to_owned()], 600).unwrap();
    let tester = pilotage_client::Connection::http(&server.mcp_url(), Some(&tester_token)).await.unwrap();
    let simulated = automation(&tester, porch_rule(false), test.clone()).await;
    assert_eq!(simulated["outcome"]["status"], "success", "{simulated}");

    // The other way round: deploys denied, test runs held for approval.
    let policy = json!({"rules": [
        {"risk": "write", "decision": "deny", "runs": ["deploy"]},
        {"risk": "write", "decision": "approve", "runs": ["test"]}
    ]});
    let (status, _) = admin(&server, reqwest::Method::PUT, "/tenants/demo/policy", Some(policy)).await;
    assert_eq!(status, 200);
    let refused = automation(&agent, porch_rule(false), deploy.clone()).await;
    assert_eq!(refused["outcome"]["status"], "policy_denied", "{refused}");
    let held = automation(&agent, porch_rule(false), test.clone()).await;
    assert_eq!(held["outcome"]["status"], "approval_required", "{held}");
    let id = held["approval"]["id"].as_str().unwrap();
    let (status, _) =
        admin(&server, reqwest::Method::POST, &format!("/tenants/demo/approvals/{id}/approve"), None).await;
    assert_eq!(status, 200);
    let simulated = automation(&agent, porch_rule(false), test.clone()).await;
    assert_eq!(simulated["outcome"]["status"], "success", "{simulated}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploys_and_test_runs_meet_the_policy_on_sqlite() {
    deploys_and_test_runs_meet_the_policy(crate::endpoint::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploys_and_test_runs_meet_the_policy_on_postgres() {
    deploys_and_test_runs_meet_the_policy(crate::endpoint::Backend::Postgres).await;
}

/// An MCP client whose person approves through another replica: on
/// `elicitation/create` (URL mode) it records the request, answers
/// `accept` at once, and a second later approves through `decide_at`'s
/// admin API (or never, when `decide_at` is `None`).
struct Reviewer {
    info: rmcp::model::ClientConfig,
    decide_at: Option<String>,
    seen: std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
}

impl rmcp::ClientHandler for Reviewer {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        self.info.clone()
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        if let rmcp::model::ElicitRequestParams::UrlElicitationParams { url, elicitation_id, .. } = request {
            self.seen.lock().unwrap().push((url, elicitation_id.clone()));
            if let Some(base) = self.decide_at.clone() {
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    let path = format!("/tenants/demo/approvals/{elicitation_id}/approve");
                    let (status, body) = crate::fleet::admin_at(&base, reqwest::Method::POST, &path, None).await;
                    assert_eq!(status, 200, "{body}");
                });
            }
        }
        Ok(rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept))
    }
}

/// An MCP client's declaration: the Pilotage extension, and URL-mode
/// elicitation (it can show a person a page).
fn elicitation_client_info() -> rmcp::model::ClientConfig {
    let mut capabilities = rmcp::model::ClientCapabilities::default();
    let mut extensions = rmcp::model::ExtensionCapabilities::new();
    extensions.insert(pilotage_protocol::EXTENSION_ID.to_owned(), serde_json::Map::new());
    capabilities.extensions = Some(extensions);
    capabilities.elicitation =
        Some(rmcp::model::ElicitationCapability::new().with_url(rmcp::model::UrlElicitationCapability::new()));
    rmcp::model::ClientConfig::new(capabilities, rmcp::model::Implementation::new("approval-tests", "1.0"))
}

/// `run_workflow` with `arguments` on an rmcp client.
async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, Reviewer>,
    arguments: Value,
) -> rmcp::model::CallToolResult {
    let params =
        rmcp::model::CallToolRequestParams::new("run_workflow").with_arguments(arguments.as_object().unwrap().clone());
    client.call_tool(params).await.unwrap()
}

async fn reviewer_client(
    url: &str,
    token: &str,
    reviewer: Reviewer,
) -> rmcp::service::RunningService<rmcp::RoleClient, Reviewer> {
    use rmcp::ServiceExt;
    let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.to_owned())
        .auth_header(token.to_owned());
    reviewer.serve(rmcp::transport::StreamableHttpClientTransport::from_config(config)).await.expect("a session")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_made_on_one_replica_releases_a_call_waiting_on_the_other() {
    pilotage_client::install_crypto_provider();
    let database_url = crate::endpoint::postgres_schema().await;
    let data_dir = std::env::temp_dir().join(crate::endpoint::unique("pilotage-approval-fleet"));
    let public = format!("http://127.0.0.1:{}", crate::fleet::free_port());
    let args = ["--public-url", public.as_str(), "--approval-wait-ms", "8000"];
    let a = crate::fleet::replica_process(&data_dir, &database_url, &args).await;
    let b = crate::fleet::replica_process(&data_dir, &database_url, &args).await;
    let (base_a, base_b) = (format!("http://{}", a.addr), format!("http://{}", b.addr));
    let policy = json!({"rules": [{"risk": "destructive", "decision": "approve"}]});
    let (status, body) =
        crate::fleet::admin_at(&base_a, reqwest::Method::PUT, "/tenants/demo/policy", Some(policy)).await;
    assert_eq!(status, 200, "{body}");
    let dev = pilotage_server::auth::dev::DevTokens::load(&data_dir, format!("{public}/mcp")).unwrap();
    let token = dev.mint("demo", "agent", &["pilotage:mcp".to_owned()], 600).unwrap();
    let info = elicitation_client_info();
    let cancel = |step: &str| {
        json!({"workflow": {"steps": [{"id": step, "kind": "call", "capability": "cap_cancel_order", "with": {"order_id": "o-1001"}}],
                            "output": format!("$.steps.{step}.output.status")}})
    };

    // Released: the call on A waits; the person approves through B.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let reviewer = Reviewer { info: info.clone(), decide_at: Some(base_b.clone()), seen: seen.clone() };
    let client = reviewer_client(&format!("{base_a}/mcp"), &token, reviewer).await;
    let started = std::time::Instant::now();
    let answer = call(&client, cancel("released")).await;
    let waited = started.elapsed();
    let structured = answer.structured_content.clone().unwrap_or_default();
    assert_eq!(structured["outcome"]["status"], "success", "{structured}");
    assert!(waited >= std::time::Duration::from_secs(1), "the call returned before the approval: {waited:?}");
    let (url, id) = seen.lock().unwrap()[0].clone();
    assert_eq!(url, format!("{public}/approvals/{id}"));
    let (_, approval) =
        crate::fleet::admin_at(&base_b, reqwest::Method::GET, &format!("/tenants/demo/approvals/{id}"), None).await;
    assert_eq!(approval["state"], "used", "{approval}");
    assert_eq!(approval["used_by_run"], structured["run_id"]);
    assert_eq!(approval["decided_by"], "operator");
    client.cancel().await.unwrap();

    // Bounded: nobody decides; the call answers when the wait ends, and
    // says so.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = reviewer_client(&format!("{base_a}/mcp"), &token, Reviewer { info, decide_at: None, seen }).await;
    let started = std::time::Instant::now();
    let answer = call(&client, cancel("unanswered")).await;
    let structured = answer.structured_content.clone().unwrap_or_default();
    assert_eq!(structured["outcome"]["status"], "approval_required", "{structured}");
    assert!(
        structured["outcome"]["error"].as_str().unwrap().contains("waited 8 s and nobody decided yet"),
        "{structured}"
    );
    // The wait ends at its bound, less at most one reading of the store.
    assert!(started.elapsed() >= std::time::Duration::from_millis(7_500), "{:?}", started.elapsed());
    client.cancel().await.unwrap();
    for mut process in [a, b] {
        let _ = process.child.kill().await;
    }
    let _ = std::fs::remove_dir_all(&data_dir);
}

/// Policies the settings file gives (`[policies.<tenant>]`, what the Helm
/// chart mounts) are stored on their tenants at start and audited as set by
/// `settings`; one for a tenant that does not exist is skipped; one out of
/// range stops the start with its member named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settings_file_sets_tenants_policies_at_start() {
    let mut configured = crate::endpoint::settings(crate::endpoint::Backend::Sqlite).await;
    configured.admin_token = Some(crate::tenancy::ADMIN_TOKEN.into());
    let text = r#"
        [policies.demo]
        approval_ttl_s = 600
        [[policies.demo.rules]]
        risk = "destructive"
        decision = "approve"
        [policies.nobody]
        rules = []
    "#;
    let from_file: pilotage_server::settings::Settings = toml::from_str(text).unwrap();
    configured.policies = from_file.policies;
    configured.check().unwrap();
    let server = crate::endpoint::server(configured.clone()).await;
    let (_, stored) = admin(&server, reqwest::Method::GET, "/tenants/demo/policy", None).await;
    assert_eq!(stored["policy"]["rules"][0]["decision"], "approve", "{stored}");
    let (_, audit) = admin(&server, reqwest::Method::GET, "/audit", None).await;
    let set = audit["audit"].as_array().unwrap().iter().find(|r| r["action"] == "tenant.policy").cloned();
    assert_eq!(set.as_ref().map(|r| r["actor"].clone()), Some(json!("settings")), "{audit}");
    let agent = pilotage_client::Connection::http(&server.mcp_url(), None).await.unwrap();
    let cancel = json!({"workflow": {"steps": [{"id": "c", "kind": "call", "capability": "cap_cancel_order", "with": {"order_id": "o-1001"}}]}});
    let held = result(agent.call("run_workflow", cancel).await.unwrap());
    assert_eq!(held["outcome"]["status"], "approval_required", "{held}");
    server.stop().await;

    let bad: pilotage_server::settings::Settings = toml::from_str("[policies.demo]\napproval_ttl_s = 0\n").unwrap();
    let error = bad.check().unwrap_err().to_string();
    assert!(error.contains("policies.demo.approval_ttl_s"), "{error}");
}

/// A stored policy the admin API would refuse (a budget window of 0 s,
/// written by hand or by another version) is read as the fail-safe one:
/// a Run that changes state waits for approval and a read runs, where
/// every execute the budget counted answered -32603; a stored policy in
/// range is read as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_policy_out_of_range_fails_safe_instead_of_failing_every_run() {
    let mut configured = crate::endpoint::settings(crate::endpoint::Backend::Sqlite).await;
    configured.admin_token = Some(crate::tenancy::ADMIN_TOKEN.into());
    let server = crate::endpoint::server(configured).await;
    let agent = Connection::http(&server.mcp_url(), None).await.unwrap();
    let cancel = json!({"workflow": {"steps": [{"id": "c", "kind": "call", "capability": "cap_cancel_order", "with": {"order_id": "o-1001"}}]}});
    let read = json!({"workflow": {"steps": [{"id": "r", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "42"}}]}});
    for (window_s, cancelled) in [(0, "approval_required"), (60, "success")] {
        let store = server.platform.store();
        let mut row = store.tenant("demo").await.unwrap().unwrap();
        row.policy = json!({"budgets": [{"risk": "write", "runs": 5, "window_s": window_s}]}).to_string();
        store.tenant_update(&row).await.unwrap();
        pilotage_server::tenancy::load::apply_row(&server.platform, &row);
        let (status, stored) = admin(&server, reqwest::Method::GET, "/tenants/demo/policy", None).await;
        assert_eq!(status, 200, "{stored}");
        let budgets = stored["policy"]["budgets"].as_array().cloned().unwrap_or_default();
        assert_eq!(budgets.iter().any(|budget| budget["window_s"] == window_s), window_s > 0, "{stored}");
        let held = result(agent.call("run_workflow", cancel.clone()).await.unwrap());
        assert_eq!(held["outcome"]["status"], cancelled, "window {window_s}: {held}");
        let ran = result(agent.call("run_workflow", read.clone()).await.unwrap());
        assert_eq!(ran["outcome"]["status"], "success", "window {window_s}: {ran}");
    }
    agent.close().await;
    server.stop().await;
}

/// Concurrent retries of one idempotency key get the key's answer (the
/// Run's outcome, or "not finished; retry later with the same key") and
/// never meet the policy again: no `budget_exceeded` while the budget's one
/// Run is the key's own, no second approval request once the first is
/// approved, and the key takes one unit of budget in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_of_one_key_get_its_answer_and_never_meet_the_policy_again() {
    let world = strict_world().await;
    let server = &world.server;
    let slow = format!("http://{}/wait", server.demo_world.as_ref().unwrap().0);
    let (status, report) = admin(
        server,
        reqwest::Method::POST,
        "/tenants/acme/catalog/apply",
        Some(json!({"entries": [entry(
            "cap_slow_write",
            "write",
            json!({"readOnly": false, "destructive": false, "openWorld": false}),
            &slow,
        )]})),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    let alice = world.as_("acme", "alice", MCP).await;
    let asked = |key: &str| {
        json!({"workflow": {"steps": [{"id": "w", "kind": "call", "capability": "cap_slow_write", "with": {"ms": 800}}]},
               "idempotency_key": key})
    };
    // Four retries at once, each the key's answer.
    let burst = |key: &'static str| {
        let alice = &alice;
        let asked = asked(key);
        async move {
            let calls = (0..4).map(|_| {
                let asked = asked.clone();
                async move { result(alice.call("run_workflow", asked).await.unwrap()) }
            });
            futures::future::join_all(calls).await
        }
    };
    let the_keys_answer = |answers: &[Value]| {
        for answer in answers {
            let status = answer["outcome"]["status"].as_str();
            let in_progress = answer["error"]["message"].as_str().is_some_and(|m| m.contains("has not finished"));
            assert!(status == Some("success") || in_progress, "{answer}");
        }
        assert!(answers.iter().any(|answer| answer["outcome"]["status"] == "success"), "{answers:?}");
    };

    // A budget of one write Run: the key's retries take it once.
    let (status, _) = admin(
        server,
        reqwest::Method::PUT,
        "/tenants/acme/policy",
        Some(json!({"budgets": [{"risk": "write", "runs": 1, "window_s": 3600}]})),
    )
    .await;
    assert_eq!(status, 200);
    the_keys_answer(&burst("budget-key").await);
    let replayed = result(alice.call("run_workflow", asked("budget-key")).await.unwrap());
    assert_eq!(replayed["outcome"]["status"], "success", "{replayed}");
    let another = result(alice.call("run_workflow", asked("another-key")).await.unwrap());
    assert_eq!(another["outcome"]["status"], "budget_exceeded", "the key took the one unit: {another}");

    // Approval: held once (the claim is freed), approved, then retried at
    // once: one Run, and no approval request left pending.
    let (status, _) = admin(
        server,
        reqwest::Method::PUT,
        "/tenants/acme/policy",
        Some(json!({"rules": [{"risk": "write", "decision": "approve"}]})),
    )
    .await;
    assert_eq!(status, 200);
    let held = result(alice.call("run_workflow", asked("approved-key")).await.unwrap());
    assert_eq!(held["outcome"]["status"], "approval_required", "{held}");
    let id = held["approval"]["id"].as_str().unwrap().to_owned();
    let (status, approved) =
        admin(server, reqwest::Method::POST, &format!("/tenants/acme/approvals/{id}/approve"), None).await;
    assert_eq!(status, 200, "{approved}");
    the_keys_answer(&burst("approved-key").await);
    let (status, listed) = admin(server, reqwest::Method::GET, "/tenants/acme/approvals", None).await;
    assert_eq!(status, 200, "{listed}");
    let pending: Vec<&Value> =
        listed["approvals"].as_array().unwrap().iter().filter(|approval| approval["state"] == "pending").collect();
    assert!(pending.is_empty(), "retries left approval requests pending: {pending:?}");
}
