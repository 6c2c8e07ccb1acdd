//! What the console does, in headless Chromium through the real server.
//! The approvals inbox: an approver (`pilotage:approve` alone) signs in,
//! lands on the inbox and sees nothing else; the header counts what
//! waits; a request is rejected there with a comment, which the admin API
//! then shows decided and the audit log records with the comment; a
//! forged form, a reader without the approver scope, and the subject who
//! asked change nothing. The tenant's overview says what needs attention.
//! An administrator turns a deployment off and on from its page.

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

/// The value of the form field `selector` on the browser's page.
async fn field(browser: &Browser, selector: &str) -> String {
    let script = format!("return document.querySelector({selector:?}).value;");
    browser.script(&script, vec![]).await.unwrap().as_str().unwrap().to_owned()
}

/// The browser's console session cookie.
async fn session(browser: &Browser) -> String {
    browser.cookies().await.unwrap().into_iter().find(|c| c.name == "pilotage_console").unwrap().value
}

/// A form posted to `path` of `addr` with the session `cookie`, as a page
/// elsewhere (or a script) would post it; redirects not followed.
async fn post_form(addr: std::net::SocketAddr, path: &str, cookie: &str, body: String) -> reqwest::Response {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("http://{addr}{path}"))
        .header("cookie", format!("pilotage_console={cookie}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Signs the browser out and waits for the sign-in page, so the next
/// navigation cannot cut the sign-out's POST short.
async fn sign_out(browser: &Browser) {
    browser.click(".sign-out button").await.unwrap();
    shows(browser, "h1", "Sign in").await;
}

/// A server with the console and the operator token, and its development
/// tokens.
async fn console_server() -> (pilotage_server::start::Server, pilotage_server::auth::dev::DevTokens) {
    let mut settings = settings(Backend::Sqlite).await;
    settings.console = true;
    settings.admin_token = Some(ADMIN_TOKEN.into());
    let data_dir = settings.data_dir.clone();
    let server = server(settings).await;
    let dev = pilotage_server::auth::dev::DevTokens::load(&data_dir, server.mcp_url()).unwrap();
    (server, dev)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_decides_from_the_inbox_and_nothing_else_opens() {
    let (server, dev) = console_server().await;
    let base = format!("http://{}", server.addr);
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
    sign_out(&browser).await;
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
    let csrf = field(&browser, "input[name='csrf']").await;
    let cookie = session(&browser).await;
    let post = |id: String, csrf: String, cookie: String| async move {
        let body = format!("csrf={}&decision=approve&comment=", urlencode(&csrf));
        post_form(server.addr, &format!("/console/approvals/demo/{id}"), &cookie, body).await
    };
    let again = post(ids[0].clone(), csrf.clone(), cookie.clone()).await;
    assert_eq!(again.status(), 303);
    assert!(again.headers()["location"].to_str().unwrap().contains("refused="));
    // A forged form (another session's token) is refused; the request
    // still waits.
    let forged = post(ids[1].clone(), "not-a-token".into(), cookie.clone()).await;
    assert_eq!(forged.status(), 403);
    let (_, waiting) = admin(&server, reqwest::Method::GET, &format!("/tenants/demo/approvals/{}", ids[1]), None).await;
    assert!(waiting.to_string().contains("\"pending\""), "{waiting}");

    // A reader without the approver scope sees the inbox but no form, and
    // a posted decision is refused.
    sign_out(&browser).await;
    browser.goto(&format!("{base}/console/approvals")).await.unwrap();
    browser.fill("#token", &token("rita", "pilotage:console")).await.unwrap();
    browser.submit("#token").await.unwrap();
    shows(&browser, "#inbox caption", "1 pending").await;
    assert!(browser.text("#inbox").await.unwrap().contains("approvers decide"));
    let reader_csrf = field(&browser, "input[name='csrf']").await;
    let reader = session(&browser).await;
    let refused = post(ids[1].clone(), reader_csrf, reader).await;
    assert_eq!(refused.status(), 403);
    let (_, waiting) = admin(&server, reqwest::Method::GET, &format!("/tenants/demo/approvals/{}", ids[1]), None).await;
    assert!(waiting.to_string().contains("\"pending\""), "{waiting}");

    // The subject who asked (the development principal) cannot decide its
    // own request, even holding the approver scope.
    sign_out(&browser).await;
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

/// An administrator disables and enables a deployment from its page; the
/// admin API and the audit log follow; a reader gets no button and a
/// forged or a reader's post changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_administrator_turns_a_deployment_off_and_on_from_its_page() {
    let (server, dev) = console_server().await;
    let base = format!("http://{}", server.addr);
    let agent = client(&server.mcp_url()).await;
    let rule = json!({
        "rule": "porch",
        "trigger": {"webhook": pilotage_server::demo::tenant::DEMO_HOME_SOURCE},
        "conditions": [{"id": "door-opened", "event": "/state", "equals": "open"}],
        "actions": [{"id": "light-on", "call": "porch_light.turn_on", "with": {"brightness": 80}}]
    });
    let deployed = crate::endpoint::ok(&agent, "run_automation", json!({"rule": rule, "mode": "deploy"})).await;
    assert_eq!(deployed["outcome"]["ok"], true, "{deployed}");
    agent.cancel().await.unwrap();
    let enabled = || async {
        admin(&server, reqwest::Method::GET, "/tenants/demo/deployments/porch", None).await.1["enabled"].clone()
    };
    assert_eq!(enabled().await, true);

    // A tenant administrator disables it, then enables it again.
    let browser = Browser::start().await.expect("headless Chromium (Debian's chromium and chromium-driver)");
    let page = format!("{base}/console/t/demo/deployments/porch");
    browser.goto(&page).await.unwrap();
    let administrator = dev.mint("demo", "tess", &["pilotage:tenant-admin".to_owned()], 600).unwrap();
    browser.fill("#token", &administrator).await.unwrap();
    browser.submit("#token").await.unwrap();
    shows(&browser, "#deployment-state", "enabled").await;
    browser.click("#deployment-action button").await.unwrap();
    shows(&browser, "#deployment-state", "disabled").await;
    assert_eq!(enabled().await, false);
    let (_, audit) = admin(&server, reqwest::Method::GET, "/audit", None).await;
    let record =
        audit["audit"].as_array().unwrap().iter().find(|row| row["action"] == "deployment.disable").cloned().unwrap();
    assert!(record["actor"].as_str().unwrap().contains("tess"), "{record}");
    shows(&browser, "#deployment-action button", "Enable").await;
    let csrf = field(&browser, "#deployment-action input[name='csrf']").await;
    let cookie = session(&browser).await;
    browser.click("#deployment-action button").await.unwrap();
    shows(&browser, "#deployment-state", "enabled").await;
    assert_eq!(enabled().await, true);

    // A forged form changes nothing.
    let post = |csrf: String, cookie: String| async move {
        let body = format!("csrf={}&state=disabled", urlencode(&csrf));
        post_form(server.addr, "/console/t/demo/deployments/porch/state", &cookie, body).await.status().as_u16()
    };
    assert_eq!(post("forged".into(), cookie.clone()).await, 403);
    assert_eq!(enabled().await, true);
    // The form's own token works from outside the page too (a 303 back).
    assert_eq!(post(csrf, cookie).await, 303);
    assert_eq!(enabled().await, false);

    // A reader sees no button, and its post is refused.
    sign_out(&browser).await;
    browser.goto(&page).await.unwrap();
    let reader = dev.mint("demo", "rita", &["pilotage:console".to_owned()], 600).unwrap();
    browser.fill("#token", &reader).await.unwrap();
    browser.submit("#token").await.unwrap();
    shows(&browser, "#deployment-state", "disabled").await;
    let buttons =
        browser.script("return document.querySelectorAll('#deployment-action').length;", vec![]).await.unwrap();
    assert_eq!(buttons, 0);
    let reader_csrf = field(&browser, ".sign-out input[name='csrf']").await;
    let reader_cookie = session(&browser).await;
    assert_eq!(post(reader_csrf, reader_cookie).await, 403);
    assert_eq!(enabled().await, false);
    server.stop().await;
}
