//! The demo's scene of the tenant's policy on risk (issue 28): the demo
//! tenant's operator says destructive plans need a human's approval; an
//! agent whose host has no gate sends the draft that unlocks the door; the
//! platform holds it; the demo plays the human on the approval page (signs
//! in, reads the plan, rejects); the agent is told.

use std::path::Path;

use serde_json::{Value, json};

use super::{DemoError, Narrator};
use pilotage_client::PilotageClient;
use pilotage_server::start::Server;

/// The policy the scene sets on the demo tenant.
fn policy() -> Value {
    json!({"rules": [{"risk": "destructive", "decision": "approve"}], "approval_ttl_s": 900})
}

/// Sets the demo tenant's policy as an operator would (stored, then
/// applied); `Err` says why it could not.
async fn set_policy(server: &Server, tenant: &str) -> Result<(), String> {
    let policy: pilotage_server::policy::Policy = serde_json::from_value(policy()).map_err(|e| e.to_string())?;
    let store = server.platform.store();
    let mut row = store.tenant(tenant).await.map_err(|e| e.to_string())?.ok_or("no demo tenant row")?;
    row.policy = serde_json::to_string(&policy).map_err(|e| e.to_string())?;
    store.tenant_update(&row).await.map_err(|e| e.to_string())?;
    pilotage_server::tenancy::load::apply_row(&server.platform, &row);
    Ok(())
}

/// The text of `html` between `start` and the next `end`, after `from`.
fn between<'h>(html: &'h str, start: &str, end: &str) -> Option<&'h str> {
    let from = html.find(start)? + start.len();
    let to = html[from..].find(end)? + from;
    Some(&html[from..to])
}

/// The visible text of an HTML fragment: tags dropped, cells spaced.
fn text_of(fragment: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in fragment.chars() {
        match c {
            '<' => {
                in_tag = true;
                out.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ").replace("&gt;", ">").replace("&amp;", "&")
}

/// The human's side: sign in on the approval page at `url` with an
/// approver's token, read the plan (one line per step), and reject.
/// Returns the plan's lines.
async fn reject_on_the_page(url: &str, token: &str) -> Result<Vec<String>, String> {
    let (http, cookie) = super::signed_in(&format!("{url}/sign-in"), format!("token={token}")).await?;
    let page = http.get(url).header("cookie", &cookie).send().await.map_err(|e| e.to_string())?;
    let html = page.text().await.map_err(|e| e.to_string())?;
    let rows = between(&html, "<tbody>", "</tbody>").ok_or("the page shows no plan")?;
    let steps: Vec<String> = rows.split("</tr>").map(text_of).filter(|line| !line.is_empty()).collect();
    let csrf = between(&html, "name=\"csrf\" value=\"", "\"").ok_or("the page offers no decision")?;
    let decided = http
        .post(format!("{url}/decision"))
        .header("cookie", &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("decision=reject&csrf={csrf}"))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if decided.status() != reqwest::StatusCode::SEE_OTHER {
        return Err(format!("the decision answered {}", decided.status()));
    }
    Ok(steps)
}

/// The scene: `rule` (the draft with the unlock step) sent by an agent
/// whose host has no gate, held, rejected by the human on the page.
pub(super) async fn held_then_rejected(
    server: &Server,
    client: &PilotageClient,
    n: &mut Narrator<'_>,
    data_dir: &Path,
    language: &str,
    rule: &Value,
) -> Result<(), DemoError> {
    let tenant = server.platform.dev_principal().tenant.clone();
    n.say("   The platform does not rely on every agent's host having a gate. The demo tenant's operator sets its policy:")?;
    n.say(&format!("     {}", policy()))?;
    let set = set_policy(server, &tenant).await;
    n.check("the tenant's policy is set: destructive plans need a human's approval", set.is_ok(), format!("{set:?}"))?;
    let unlocks = || server.demo_world.as_ref().and_then(|(_, w)| w.calls().get("/home/front_door/unlock").copied());
    let unlocks_before = unlocks();

    let tool = client.language(language)?.loop_tools.execute.clone().unwrap_or_default();
    let argument = client.program_argument(&tool, language)?;
    let request = json!({argument: rule, "mode": "deploy"});
    let send = async || match client.connection().call(&tool, request.clone()).await {
        Ok(pilotage_client::Reply::Result(value)) => Ok(value),
        Ok(pilotage_client::Reply::RequestError(error)) => Ok(json!({"request_error": error})),
        Err(error) => Err(DemoError::from(error)),
    };
    n.say("   An agent whose host has no gate sends the same draft (mode deploy):")?;
    let held = send().await?;
    let url = held["approval"]["url"].as_str().unwrap_or_default().to_owned();
    n.say(&format!(
        "     → {}: {}",
        held["outcome"]["status"].as_str().unwrap_or_default(),
        held["outcome"]["error"].as_str().unwrap_or_default()
    ))?;
    n.check(
        "the platform held the destructive plan (approval_required, the approval page named) and ran nothing",
        held["outcome"]["status"] == "approval_required" && !url.is_empty() && unlocks() == unlocks_before,
        &held,
    )?;

    n.say(&format!("   The demo plays the human: it opens {url}, signs in as a reviewer and reads the plan:"))?;
    let minted =
        pilotage_server::auth::dev::DevTokens::load(data_dir, server.mcp_url()).map_err(|e| e.to_string()).and_then(
            |dev| dev.mint(&tenant, "reviewer", &["pilotage:approve".to_owned()], 600).map_err(|e| e.to_string()),
        );
    let page = match minted {
        Ok(token) => reject_on_the_page(&url, &token).await,
        Err(error) => Err(error),
    };
    for line in page.as_ref().map(Vec::as_slice).unwrap_or_default() {
        n.say(&format!("     step {line}"))?;
    }
    n.say("   \"Absolutely not\": the reviewer rejects it.")?;
    n.check(
        "the approval page showed the plan, front_door.unlock destructive, and took the rejection",
        page.as_ref().is_ok_and(|steps| {
            steps.iter().any(|line| line.contains("front_door.unlock") && line.contains("destructive"))
        }),
        format!("{page:?}"),
    )?;
    let told = send().await?;
    n.say(&format!(
        "   The agent asks again → {}: {}",
        told["outcome"]["status"].as_str().unwrap_or_default(),
        told["outcome"]["error"].as_str().unwrap_or_default()
    ))?;
    n.check(
        "the agent is told the human rejected exactly this request (approval_rejected), and the door was never unlocked",
        told["outcome"]["status"] == "approval_rejected" && unlocks() == unlocks_before,
        &told,
    )?;
    Ok(())
}
