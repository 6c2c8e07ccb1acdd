//! Scenario 10: the automation story of issue 14 on `automation/1` and
//! the demo home. A draft rule that also unlocks the door is stopped at the
//! Host gate; test runs at 14:03 and 22:30 decide by the clock, the light
//! step simulated; the question "why did nothing turn on?" is answered by
//! the narration of the 14:03 Run's stored record; the rule is deployed,
//! the door opens at night as a signed webhook delivery, the firing really
//! lights the porch, and its Run is fetched by `run_id`.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::{Value, json};

use super::{DemoError, Narrator, indent};
use pilotage_client::gate::Refuse;
use pilotage_client::{PilotageClient, RunOptions};
use pilotage_server::demo::world::DemoWorld;
use pilotage_server::start::Server;

/// The automation story's Language.
const AUTOMATION: &str = pilotage_server::demo::tenant::DEMO_HOME_LANGUAGE;

/// The rule the agent drafts for "when the front door opens after 22:00 in
/// Europe/Paris, turn on the porch light": it also unlocks the door.
fn porch_rule_draft() -> Value {
    json!({
        "rule": "porch-at-night",
        "description": "When the front door opens after 22:00 in Paris, light the porch.",
        "trigger": {"webhook": pilotage_server::demo::tenant::DEMO_HOME_SOURCE},
        "conditions": [
            {"id": "door-opened", "event": "/state", "equals": "open"},
            {"id": "after-22", "time": {"after": "22:00", "before": "06:00", "time_zone": "Europe/Paris"}},
            {"id": "light-is-off", "read": "porch_light.state", "field": "/on", "equals": false}
        ],
        "actions": [
            {"id": "light-on", "call": "porch_light.turn_on", "with": {"brightness": 80}},
            {"id": "unlock", "call": "front_door.unlock"}
        ]
    })
}

/// The decisions of the trace's `when` entry, one line each.
fn decisions(execution: Option<&pilotage_protocol::requests::ExecuteResponse>) -> Vec<(String, String, String)> {
    execution
        .and_then(|e| e.trace.as_ref())
        .and_then(|t| t.steps.iter().find(|s| s.id == "when"))
        .map(|step| step.decisions.iter().map(|d| (d.at.clone(), d.took.clone(), d.because.clone())).collect())
        .unwrap_or_default()
}

/// The demo home's path that turns the porch light on.
const TURN_ON_PATH: &str = "/home/porch_light/turn_on";

/// The demo home's path that unlocks the front door.
const UNLOCK_PATH: &str = "/home/front_door/unlock";

/// How many times the demo home's `path` was called.
fn calls(world: &DemoWorld, path: &str) -> u64 {
    world.calls().get(path).copied().unwrap_or(0)
}

/// The input of a Run as the front door opens at `at` (RFC 3339).
fn door_opens_at(at: &str) -> Value {
    json!({"event": {"device": "front_door", "state": "open"}, "at": at})
}

/// Scenario 10: the automation story, scene by scene; a note when the
/// demo home is not served.
pub(super) async fn automation_story(
    server: &Server,
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    data_dir: &Path,
) -> Result<(), DemoError> {
    n.say(&format!(
        "\n10. Automation ({AUTOMATION}): \"when the front door opens after 22:00 in Europe/Paris, turn on the porch light\"."
    ))?;
    let Some((demo_addr, world)) = &server.demo_world else {
        n.check("the demo home is served", false, "no demo capability service")?;
        return Ok(());
    };
    // A data folder an earlier demo used still holds its rule: removed, so
    // this run tells the same story (a first deploy, version 1) and lists
    // the same registry.
    let tenant = server.platform.dev_principal().tenant.clone();
    if let Err(error) = pilotage_server::deploy::manage::remove(&server.platform, &tenant, "porch-at-night").await {
        tracing::warn!(%error, "the earlier demo's rule could not be removed");
    }
    registry(client, n).await?;
    let home_before = world.home();
    let turn_ons_before = calls(world, TURN_ON_PATH);
    let mut rule = porch_rule_draft();
    let deploy = RunOptions {
        trace_level: Some("full".into()),
        store: Some(true),
        mode: Some("deploy".into()),
        ..RunOptions::default()
    };
    draft_stopped(client, n, world, &rule, &deploy).await?;
    super::approval::held_then_rejected(server, client, n, data_dir, AUTOMATION, &rule).await?;
    if let Some(actions) = rule["actions"].as_array_mut() {
        actions.retain(|action| action["id"] != "unlock");
    }
    n.say(
        "   The agent drops the unlock step; the plan's highest risk is now write (the light), which the tenant's policy allows.",
    )?;

    immediate_refused(client, n, world, &rule, &home_before).await?;
    let test = RunOptions { test_run: Some(true), ..deploy.clone() };
    day_test_run(client, n, &rule, &test).await?;
    night_test_run(client, n, world, &rule, &test, &home_before, turn_ons_before).await?;
    deployed(client, n, world, &rule, &deploy, &home_before).await?;
    let run_id = door_opens_at_night(server, n, *demo_addr, world, &tenant).await?;
    fired_run(client, n, &run_id).await?;
    super::console::fired_rule(server, n, data_dir, &tenant, "porch-at-night", &run_id).await?;
    Ok(())
}

/// The home's device registry as automation/1 sees it, with each entry's
/// risk: the door's unlock destructive, the porch light a write.
async fn registry(client: &mut PilotageClient, n: &mut Narrator<'_>) -> Result<(), DemoError> {
    client.refresh_if_changed().await?;
    let page = client.catalog_list(AUTOMATION, None, None).await?;
    n.say("   The home's device registry, as automation/1 sees it:")?;
    for entry in &page.items {
        n.say(&format!("   {} ({}) [{}] {}", entry.id, entry.kind, entry.risk, entry.name))?;
    }
    let risk_of = |id: &str| page.items.iter().find(|e| e.id == id).map(|e| e.risk.clone()).unwrap_or_default();
    n.check(
        "the registry lists sensors and actions; front_door.unlock is destructive, the porch light is not",
        risk_of("front_door.unlock") == "destructive"
            && risk_of("porch_light.turn_on") == "write"
            && risk_of("front_door.state") == "safe",
        format!("{:?}", page.items.iter().map(|e| (&e.id, &e.risk)).collect::<Vec<_>>()),
    )?;
    Ok(())
}

/// The draft, through the Host gate: its destructive plan needs approval,
/// no one approves, and the door is not unlocked.
async fn draft_stopped(
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    world: &DemoWorld,
    rule: &Value,
    deploy: &RunOptions,
) -> Result<(), DemoError> {
    let unlocks_before = calls(world, UNLOCK_PATH);
    n.say("   The agent's draft rule also unlocks the door for whoever comes home:")?;
    n.say(&indent(rule))?;
    let gated = client.run(AUTOMATION, rule.clone(), None, deploy, &Refuse).await?;
    if let Some(request) = &gated.approval {
        n.say("   The Host asks for approval outside the model:")?;
        for line in request.prompt().lines() {
            n.say(&format!("     {line}"))?;
        }
    }
    n.say("   No one approves, so the Host sends nothing: the rule is neither deployed nor tested.")?;
    n.check(
        "the destructive plan (front_door.unlock) needed approval and was not sent",
        gated.approval.as_ref().is_some_and(|a| a.plan.as_ref().is_some_and(|p| p.max_risk == "destructive"))
            && !gated.approved
            && gated.executions.is_empty()
            && calls(world, UNLOCK_PATH) == unlocks_before,
        "it was sent",
    )?;
    Ok(())
}

/// An immediate Run of a rule with a trigger is refused, with the way out
/// (`trigger_needs_deploy`), and nothing runs.
async fn immediate_refused(
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    world: &DemoWorld,
    rule: &Value,
    home_before: &Value,
) -> Result<(), DemoError> {
    let tool = client.language(AUTOMATION)?.loop_tools.execute.clone().unwrap_or_default();
    let argument = client.program_argument(&tool, AUTOMATION)?;
    let once = client.execute_raw(AUTOMATION, json!({argument: rule, "mode": "immediate"})).await?;
    let refusal = once.diagnostics.as_ref().and_then(|d| d.first());
    if let Some(finding) = refusal {
        n.say(&format!(
            "   Run it now (mode immediate)? → {}: {} ({})",
            finding.code,
            finding.message,
            finding.hint.clone().unwrap_or_default()
        ))?;
    }
    n.check(
        "an immediate Run of a rule with a trigger is refused (validation_error, trigger_needs_deploy) and nothing ran",
        once.outcome.status == "validation_error"
            && refusal.is_some_and(|d| d.code == "trigger_needs_deploy" && d.hint.is_some())
            && world.home() == *home_before,
        &once.outcome.status,
    )?;
    Ok(())
}

/// A test run at a simulated 14:03 in Paris: the rule skips, the decision
/// names the clock, and the narration of its stored record answers "why
/// did nothing turn on?" (Part II §6.6).
async fn day_test_run(
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    rule: &Value,
    test: &RunOptions,
) -> Result<(), DemoError> {
    n.say("   A test run at a simulated 14:03 in Paris (input.at 2026-07-14T14:03:00+02:00), the door opening:")?;
    let day =
        client.run(AUTOMATION, rule.clone(), Some(door_opens_at("2026-07-14T14:03:00+02:00")), test, &Refuse).await?;
    let day_decisions = decisions(day.execution.as_ref());
    for (at, took, because) in &day_decisions {
        n.say(&format!("     decision at '{at}': took '{took}' because {because}"))?;
    }
    n.check(
        "at 14:03 the rule skips, and the decision names the clock",
        day.execution.as_ref().is_some_and(|e| e.outcome.ok)
            && day_decisions.first().is_some_and(|(at, took, because)| {
                at == "when" && took == "else" && because.contains("it is 14:03 in Europe/Paris")
            }),
        format!("{day_decisions:?}"),
    )?;
    // Narration (Part II §6.6): a person's question about that Run,
    // answered from its recorded facts only, labelled as interpretation.
    let day_run = day.execution.as_ref().map(|e| e.run_id.clone()).unwrap_or_default();
    let question = "Why did nothing turn on?";
    let asked = client.ask(AUTOMATION, &day_run, None, question).await;
    let narration = asked.as_ref().ok().and_then(|fetched| fetched.narration.clone()).unwrap_or_default();
    n.say(&format!("   Asked of that Run's stored record: \"{question}\" The platform's narration:"))?;
    n.say(&format!("     {narration}"))?;
    n.check(
        "the narration answers from the recorded decision, labelled as interpretation, and the facts are unchanged",
        narration.starts_with("Interpretation of the recorded trace")
            && narration.contains("Nothing ran after the decision at 'when'")
            && narration.contains("it is 14:03 in Europe/Paris")
            && asked
                .as_ref()
                .is_ok_and(|fetched| Some(&fetched.trace) == day.execution.as_ref().and_then(|e| e.trace.as_ref())),
        asked.as_ref().err().map(ToString::to_string).unwrap_or(narration.clone()),
    )?;
    Ok(())
}

/// A test run at a simulated 22:30: the light would turn on, but the step
/// is simulated and the home is unchanged.
async fn night_test_run(
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    world: &DemoWorld,
    rule: &Value,
    test: &RunOptions,
    home_before: &Value,
    turn_ons_before: u64,
) -> Result<(), DemoError> {
    n.say("   A test run at a simulated 22:30:")?;
    let night =
        client.run(AUTOMATION, rule.clone(), Some(door_opens_at("2026-07-14T22:30:00+02:00")), test, &Refuse).await?;
    for (at, took, because) in decisions(night.execution.as_ref()) {
        n.say(&format!("     decision at '{at}': took '{took}' because {because}"))?;
    }
    let light_step = night
        .execution
        .as_ref()
        .and_then(|e| e.trace.as_ref())
        .and_then(|t| t.steps.iter().find(|s| s.id == "light-on"))
        .cloned();
    if let Some(step) = &light_step {
        n.say(&format!(
            "     step light-on calls {}: simulated {}, output {}",
            step.calls.clone().unwrap_or_default(),
            step.simulated.unwrap_or(false),
            step.output.clone().unwrap_or(Value::Null)
        ))?;
    }
    n.say(&format!("     the home afterwards: {}", world.home()))?;
    n.check(
        "at 22:30 the light would turn on: the step is marked simulated and the home is unchanged",
        decisions(night.execution.as_ref()).first().is_some_and(|(_, took, _)| took == "then")
            && light_step.as_ref().is_some_and(|s| s.simulated == Some(true))
            && world.home() == *home_before
            && calls(world, TURN_ON_PATH) == turn_ons_before,
        format!("{light_step:?}, home {}", world.home()),
    )?;
    Ok(())
}

/// Deploys the rule: installed behind its webhook trigger, nothing run.
async fn deployed(
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    world: &DemoWorld,
    rule: &Value,
    deploy: &RunOptions,
    home_before: &Value,
) -> Result<(), DemoError> {
    let deployed = client.run(AUTOMATION, rule.clone(), None, deploy, &Refuse).await?;
    let output = deployed.execution.as_ref().and_then(|e| e.output.clone()).unwrap_or(Value::Null);
    n.say(&format!("   Deployed (mode deploy): {output}"))?;
    n.check(
        "the rule is installed behind its webhook trigger, and installing ran nothing",
        deployed.execution.as_ref().is_some_and(|e| e.outcome.ok)
            && output["deployment"] == "porch-at-night"
            && world.home() == *home_before,
        deployed.execution.as_ref().map(|e| format!("{:?}", e.outcome)).unwrap_or_default(),
    )?;
    Ok(())
}

/// The door opens at night (the platform's clock set to the last 22:41 in
/// Paris): the home hub's signed webhook delivery fires the rule and the
/// porch light really turns on. Returns the firing's `run_id`.
async fn door_opens_at_night(
    server: &Server,
    n: &mut Narrator<'_>,
    demo_addr: SocketAddr,
    world: &DemoWorld,
    tenant: &str,
) -> Result<String, DemoError> {
    // The last 22:41 in Paris before now, not a fixed date: the Run and the
    // firing then fall within the retention, so serving this data folder
    // afterwards still shows them (a date months back would have expired).
    let (night_ms, night_at) = last_night_in_paris(server.platform.clock().now_ms())
        .unwrap_or((1_784_061_660_000, "2026-07-14T22:41:00+02:00".to_owned()));
    server.platform.clock().freeze_at(night_ms);
    n.say(&format!(
        "   So that \"at night\" does not depend on when you run this demo, the demo sets the platform's clock to {night_at} (22:41 in Paris); firings read that clock."
    ))?;
    n.say(
        "   Someone opens the front door; the home hub posts the event to the platform, signed with the source's key:",
    )?;
    let opened: Value =
        match reqwest::Client::new().post(format!("http://{demo_addr}/home/front_door/open")).send().await {
            Ok(response) => response.json().await.unwrap_or(Value::Null),
            Err(error) => json!({"error": error.to_string()}),
        };
    n.say(&format!("     {opened}"))?;
    n.check(
        "the platform accepted the signed delivery (202) and it fires the rule",
        opened["status"] == 202
            && opened["answer"]["fires"].as_array().is_some_and(|f| f.iter().any(|d| d == "porch-at-night")),
        &opened,
    )?;
    let delivery = opened["answer"]["delivery"].as_str().unwrap_or_default().to_owned();
    let mut firing = None;
    for _ in 0..200 {
        let firings = server.platform.store().firings_of(tenant, "porch-at-night", 20).await.unwrap_or_default();
        firing = firings.into_iter().find(|f| f.instance == delivery);
        if firing.is_some() && world.home()["porch_light"]["on"] == true {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let home = world.home();
    n.say(&format!("   The home now: {home}"))?;
    n.check(
        "the rule fired and the porch light is really on (brightness 80)",
        firing.is_some()
            && home["porch_light"] == json!({"on": true, "brightness": 80})
            && home["front_door"]["locked"] == true,
        &home,
    )?;
    Ok(firing.map(|f| f.run_id).unwrap_or_default())
}

/// The firing's Run, fetched by `run_id`: the decision at 22:41 and the
/// real call of `porch_light.turn_on`.
async fn fired_run(client: &mut PilotageClient, n: &mut Narrator<'_>, run_id: &str) -> Result<(), DemoError> {
    let mut fetched = None;
    for _ in 0..100 {
        if let Ok(trace) = client.trace(AUTOMATION, run_id, Some("full")).await {
            fetched = Some(trace);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    match &fetched {
        Some(fetched) => {
            n.say(&format!("   The firing's Run {run_id}, fetched by run_id:"))?;
            n.say(&indent(&serde_json::to_value(&fetched.trace).unwrap_or_default()))?;
        }
        None => n.say(&format!("   The firing's Run {run_id} could not be fetched."))?,
    }
    let fired_light = fetched.as_ref().and_then(|f| f.trace.steps.iter().find(|s| s.id == "light-on"));
    let fired_when = fetched
        .as_ref()
        .and_then(|f| f.trace.steps.iter().find(|s| s.id == "when"))
        .and_then(|s| s.decisions.iter().find(|d| d.at == "after-22"));
    n.check(
        "the fetched trace shows the decision at 22:41 and the real call of porch_light.turn_on",
        fetched.as_ref().is_some_and(|f| f.outcome.ok)
            && fired_when.is_some_and(|d| d.took == "true" && d.because.contains("it is 22:41 in Europe/Paris"))
            && fired_light.is_some_and(|s| s.calls.as_deref() == Some("porch_light.turn_on") && s.simulated.is_none()),
        fetched.as_ref().map(|f| format!("{:?}", f.outcome)).unwrap_or_else(|| "not fetched".into()),
    )?;
    Ok(())
}

/// The last 22:41 in Europe/Paris at or before `now_ms`: its epoch
/// milliseconds and its RFC 3339 text with Paris's offset of that day.
fn last_night_in_paris(now_ms: i64) -> Option<(i64, String)> {
    use chrono::TimeZone as _;
    let paris = chrono_tz::Europe::Paris;
    let now = paris.timestamp_millis_opt(now_ms).single()?;
    (0..3).find_map(|days_back| {
        let day = now.date_naive().checked_sub_days(chrono::Days::new(days_back))?;
        let at = paris.from_local_datetime(&day.and_hms_opt(22, 41, 0)?).single()?;
        (at <= now).then(|| (at.timestamp_millis(), at.to_rfc3339()))
    })
}

#[cfg(test)]
mod tests {
    use super::last_night_in_paris;

    #[test]
    fn the_demo_night_is_the_last_22_41_in_paris() {
        // 2026-12-07 14:41 UTC is 15:41 in Paris: the night before.
        let (ms, text) = last_night_in_paris(1_796_654_460_000).unwrap();
        assert_eq!(text, "2026-12-06T22:41:00+01:00");
        assert!(ms <= 1_796_654_460_000);
        // 2026-07-14 21:00 UTC is 23:00 in Paris (summer time): that night.
        assert_eq!(last_night_in_paris(1_784_062_800_000).unwrap().1, "2026-07-14T22:41:00+02:00");
    }
}
