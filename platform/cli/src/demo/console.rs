//! Scenario 10's last scene: the fired porch rule as people see it in the
//! operator console (`pilotage_server::console`). The demo prints the
//! demo tenant's console and the Run page of the firing, signs in as the
//! tenant's console reader (a `pilotage:console` development token), and
//! checks that the deployment's page lists the firing with a link to that
//! Run page, and that the Run page carries the decision "it is 22:41 in
//! Europe/Paris".

use std::path::Path;

use super::{DemoError, Narrator};
use pilotage_server::start::Server;

/// What the scene saw: the deployment page's link to the Run page, and
/// whether the Run page answered with the decision in its record.
async fn look(base: &str, token: &str, deployment_page: &str, run_page: &str) -> Result<(bool, bool), String> {
    let (http, cookie) =
        super::signed_in(&format!("{base}/console/sign-in"), format!("token={token}&next=%2Fconsole")).await?;
    let read = |url: String| {
        let http = http.clone();
        let cookie = cookie.clone();
        async move {
            let page = http.get(&url).header("cookie", cookie).send().await.map_err(|e| e.to_string())?;
            if !page.status().is_success() {
                return Err(format!("{url} answered {}", page.status()));
            }
            page.text().await.map_err(|e| e.to_string())
        }
    };
    let listed = read(format!("{base}{deployment_page}")).await?;
    let shown = read(format!("{base}{run_page}")).await?;
    Ok((listed.contains(&format!("href=\"{run_page}\"")), shown.contains("it is 22:41 in Europe/Paris")))
}

/// The scene, after the firing's Run `run_id` of `deployment` in `tenant`.
pub(super) async fn fired_rule(
    server: &Server,
    n: &mut Narrator<'_>,
    data_dir: &Path,
    tenant: &str,
    deployment: &str,
    run_id: &str,
) -> Result<(), DemoError> {
    let base = server.mcp_url().trim_end_matches("/mcp").to_owned();
    let deployment_page = format!("/console/t/{tenant}/deployments/{deployment}");
    let run_page = format!("/console/t/{tenant}/runs/{run_id}");
    n.say("   People look at the same Run in the operator console (setting `console`, on in this demo):")?;
    n.say(&format!("     the demo tenant's console:  {base}/console/t/{tenant}"))?;
    n.say(&format!("     the fired porch rule's Run: {base}{run_page}"))?;
    n.say(
        "     This server stops when the demo ends. To look around afterwards: `cargo run -- serve \
         --console=true`, open http://127.0.0.1:8480/console and sign in with a token from \
         `cargo run -- token mint --tenant demo --scope pilotage:console` (the demo tenant's reader; README, \"The console\").",
    )?;
    let minted = pilotage_server::auth::dev::DevTokens::load(data_dir, server.mcp_url())
        .map_err(|e| e.to_string())
        .and_then(|dev| dev.mint(tenant, "on-call", &["pilotage:console".to_owned()], 600).map_err(|e| e.to_string()));
    let seen = match minted {
        Ok(token) => look(&base, &token, &deployment_page, &run_page).await,
        Err(error) => Err(error),
    };
    n.check(
        "signed in as the tenant's console reader, the deployment's page lists the firing and links to its Run page, which holds the decision at 22:41",
        matches!(seen, Ok((true, true))),
        format!("{seen:?}"),
    )?;
    Ok(())
}
