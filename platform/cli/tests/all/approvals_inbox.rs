//! The console's approvals inbox in headless Chromium, through the real
//! server: an approver (`pilotage:approve` alone) signs in, lands on the
//! inbox and sees nothing else; the header counts what waits; a request
//! is rejected there with a comment, which the admin API then shows
//! decided and the audit log records with the comment; a forged form, a
//! reader without the approver scope, and the subject who asked change
//! nothing. The tenant's overview says what needs attention.

use serde_json::{Value, json};

use crate::endpoint::{Backend, client, server, settings};
use crate::tenancy::{ADMIN_TOKEN, admin};
use pilotage_test_support::browser::Browser;

/// `text` for a form body.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The porch rule with the door's unlock: destructive, so the policy
/// holds its deploy for a human.
fn unlocking_rule(name: &str) -> Value {
    json!({
        "rule": name,
        "trigger": {"webhook": pilotage_server::demo::tenant::DEMO_HOME_SOURCE},
        "conditions": [{"id": "door-opened", "event": "/state", "equals": "open"}],
        "actions": [{"id": "unlock", "call": "front_door.unlock"}]
    })
}

async fn shows(browser: &Browser, selector: &str, text: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Ok(found) = browser.text(selector).await
            && found.contains(text)
        {
            return found;
        }
        assert!(std::time::Instant::now() < deadline, "{selector} never showed '{text}'");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_decides_from_the_inbox_and_nothing_else_opens() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.console = true;
    settings.admin_token = Some(ADMIN_TOKEN.into());
    let data_dir = settings.data_dir.clone();
    let server = server(settings).await;
    let base = format!("http://{}", server.addr);
    let dev = pilotage_server::auth::dev::DevTokens::load(&data_dir, server.mcp_url()).unwrap();
    let token = |subject: &str, scope: &str| dev.mint("demo", subject, &[scope.to_owned()], 600).unwrap();

    // Nothing waits yet: the overview says so.
    let browser = Browser::start().await.expect("headless Chromium (Debian's chromium and chromium-driver)");
    browser.goto(&format!("{base}/console/sign-in?next=%2Fconsole%2Ft%2Fdemo")).await.unwrap();
    browser.fill("#token", ADMIN_TOKEN).await.unwrap();
    browser.submit("#token").await.unwrap();
    shows(&browser, "#attention-none", "Nothing needs attention").await;

    // The policy holds destructive deploys; an agent asks twice.
    let (status, _) = admin(
        &server,
        reqwest::Method::PUT,
        "/tenants/demo/policy",
        Some(json!({"rules": [{"risk": "destructive", "decision": "approve"}]})),
    )
    .await;
    assert_eq!(status, 200);
    let agent = client(&server.mcp_url()).await;
    let mut ids = Vec::new();
    for name in ["let-in", "let-in-too"] {
        let held =
            crate::endpoint::ok(&agent, "run_automation", json!({"rule": unlocking_rule(name), "mode": "deploy"}))
                .await;
        assert_eq!(held["outcome"]["status"], "approval_required", "{held}");
        ids.push(held["approval"]["id"].as_str().unwrap().to_owned());
    }
    agent.cancel().await.unwrap();
    browser.goto(&format!("{base}/console/t/demo")).await.unwrap();
    shows(&browser, "#attention-approvals", "2 approval requests wait").await;
    shows(&browser, "#pending-count", "2").await;

    // An approver signs in and lands on the inbox, the only page it opens.
    browser.click(".sign-out button").await.unwrap();
    shows(&browser, "h1", "Sign in").await;
    browser.goto(&format!("{base}/console")).await.unwrap();
    browser.fill("#token", &token("ada", "pilotage:approve")).await.unwrap();
    browser.submit("#token").await.unwrap();
    shows(&browser, "h1", "Approvals").await;
    shows(&browser, "#inbox caption", "2 pending").await;
    let row = shows(&browser, &format!("#inbox tr[data-id='{}']", ids[0]), "deploy Run").await;
    assert!(row.contains("deploy Run") && row.contains("destructive") && row.contains("held by rule 1"), "{row}");
    shows(&browser, "#pending-count", "2").await;
    browser.goto(&format!("{base}/console/t/demo/runs")).await.unwrap();
    shows(&browser, "#not-found", "no such page").await;

    // Rejected with a comment, from the inbox.
    browser.goto(&format!("{base}/console/approvals")).await.unwrap();
    browser.fill(&format!("#comment-{}", ids[0]), "unlocking needs a person at the door").await.unwrap();
    browser.click(&format!("#inbox tr[data-id='{}'] button[value='reject']", ids[0])).await.unwrap();
    shows(&browser, "#decided", &format!("{} rejected", ids[0])).await;
    shows(&browser, "#inbox caption", "1 pending").await;
    shows(&browser, "#pending-count", "1").await;
    let (_, decided) = admin(&server, reqwest::Method::GET, &format!("/tenants/demo/approvals/{}", ids[0]), None).await;
    let decided = if decided.get("approval").is_some() { decided["approval"].clone() } else { decided };
    assert_eq!(decided["state"], "rejected", "{decided}");
    assert!(decided["decided_by"].as_str().unwrap().contains("ada"), "{decided}");
    let (_, audit) = admin(&server, reqwest::Method::GET, "/audit", None).await;
    let record = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["action"] == "approval.reject")
        .cloned()
        .unwrap_or_else(|| panic!("no approval.reject record: {audit}"));
    assert!(record["detail"].as_str().unwrap().contains("unlocking needs a person at the door"), "{record}");
    // Deciding it again says so, and changes nothing.
    let csrf = browser
        .script("return document.querySelector(\"input[name='csrf']\").value;", vec![])
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let cookie = browser.cookies().await.unwrap().into_iter().find(|c| c.name == "pilotage_console").unwrap();
    let post = |id: String, csrf: String, cookie: String| async move {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .post(format!("http://{}/console/approvals/demo/{id}", server.addr))
            .header("cookie", format!("pilotage_console={cookie}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={}&decision=approve&comment=", urlencode(&csrf)))
            .send()
            .await
            .unwrap()
    };
    let again = post(ids[0].clone(), csrf.clone(), cookie.value.clone()).await;
    assert_eq!(again.status(), 303);
    assert!(again.headers()["location"].to_str().unwrap().contains("refused="));
    // A forged form (another session's token) is refused; the request
    // still waits.
    let forged = post(ids[1].clone(), "not-a-token".into(), cookie.value.clone()).await;
    assert_eq!(forged.status(), 403);
    let (_, waiting) = admin(&server, reqwest::Method::GET, &format!("/tenants/demo/approvals/{}", ids[1]), None).await;
    assert!(waiting.to_string().contains("\"pending\""), "{waiting}");

    // A reader without the approver scope sees the inbox but no form, and
    // a posted decision is refused.
    browser.click(".sign-out button").await.unwrap();
    browser.goto(&format!("{base}/console/approvals")).await.unwrap();
    browser.fill("#token", &token("rita", "pilotage:console")).await.unwrap();
    browser.submit("#token").await.unwrap();
    shows(&browser, "#inbox caption", "1 pending").await;
    assert!(browser.text("#inbox").await.unwrap().contains("approvers decide"));
    let reader_csrf = browser
        .script("return document.querySelector(\"input[name='csrf']\").value;", vec![])
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let reader = browser.cookies().await.unwrap().into_iter().find(|c| c.name == "pilotage_console").unwrap();
    let refused = post(ids[1].clone(), reader_csrf, reader.value.clone()).await;
    assert_eq!(refused.status(), 403);
    let (_, waiting) = admin(&server, reqwest::Method::GET, &format!("/tenants/demo/approvals/{}", ids[1]), None).await;
    assert!(waiting.to_string().contains("\"pending\""), "{waiting}");

    // The subject who asked (the development principal) cannot decide its
    // own request, even holding the approver scope.
    browser.click(".sign-out button").await.unwrap();
    browser.goto(&format!("{base}/console/approvals")).await.unwrap();
    let asker = server.platform.dev_principal().subject.clone();
    browser.fill("#token", &token(&asker, "pilotage:approve")).await.unwrap();
    browser.submit("#token").await.unwrap();
    shows(&browser, &format!("#inbox tr[data-id='{}']", ids[1]), "someone else decides").await;
    browser.set_window_size(390, 844).await.unwrap();
    browser.goto(&format!("{base}/console/approvals")).await.unwrap();
    shows(&browser, "h1", "Approvals").await;
    let overflow = browser
        .script("return document.documentElement.scrollWidth - window.innerWidth;", vec![])
        .await
        .unwrap()
        .as_f64()
        .unwrap();
    assert!(overflow <= 1.0, "the inbox is wider than a phone: {overflow}");
    browser.screenshot("console-approvals-inbox").await.unwrap();
    server.stop().await;
}
