//! Scenarios 1 to 8, on workflow/v1 (Part III §9.3–9.4): discover,
//! learn, lookup, a typo caught with the close-match hint and corrected,
//! the Run through the Host gate with its trace fetched again by `run_id`,
//! a branching workflow whose trace shows the decision, a stale
//! `catalog_version` refused with `catalog_drift` and recovered, and a
//! destructive plan stopped at the Host gate.

use serde_json::{Value, json};

use super::{DemoError, Narrator, indent};
use pilotage_client::gate::Refuse;
use pilotage_client::{Connection, PilotageClient, RunOptions};
use pilotage_server::start::Server;

/// The spec's example program (Part III §9.3), with its typo:
/// `cap_read_user_profil`.
fn typo_program() -> Value {
    json!({
        "steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profil", "with": {"user_id": "$.input.userId"}}],
        "output": {"name": "$.steps.profile.output.name"}
    })
}

/// The options of the scenarios' Runs: a full trace, stored, fetched again
/// by `run_id`, one retry after drift.
pub(super) fn run_options() -> RunOptions {
    RunOptions {
        trace_level: Some("full".into()),
        store: Some(true),
        fetch: true,
        drift_retries: 1,
        ..RunOptions::default()
    }
}

/// Scenario 1, discover: the agent connects and is sent to the manifest,
/// and the manifest at initialize equals the manifest tool's.
pub(super) async fn discover(url: &str, n: &mut Narrator<'_>) -> Result<PilotageClient, DemoError> {
    n.say("1. Discover: the agent connects and asks for the manifest first.")?;
    let connection = Connection::http(url, None).await?;
    n.check(
        "the server declares the Pilotage extension at initialize",
        connection.declares_extension(),
        "no extension",
    )?;
    let welcome = connection.instructions().unwrap_or_default();
    n.check("the welcome text sends the agent to pilotage_manifest", welcome.contains("pilotage_manifest"), &welcome)?;
    let inline = connection.inline_manifest();
    let client = PilotageClient::discover(connection).await?;
    let languages: Vec<String> = client.manifest().languages.iter().map(|l| l.name.clone()).collect();
    n.say(&format!("   The manifest lists: {}.", languages.join(", ")))?;
    n.check(
        "the inline manifest equals the manifest tool's",
        inline.as_ref() == Some(client.manifest()),
        "they differ",
    )?;
    Ok(client)
}

/// Scenario 2, learn: the core guide of workflow/v1, small, and the same
/// text as the workflow-v1 Agent Skill.
pub(super) async fn learn(client: &mut PilotageClient, n: &mut Narrator<'_>) -> Result<(), DemoError> {
    n.say("\n2. Learn: read the core guide of workflow/v1 before writing anything.")?;
    let core = client.core_guide("workflow/v1").await?;
    n.say(&format!("   '{}' ({} bytes).", core.title, core.size_bytes))?;
    n.check("the core guide is small (at most 8 KiB)", core.size_bytes <= 8192, core.size_bytes)?;
    // The same guide for an agent whose host does not speak Pilotage: an
    // Agent Skill (the MCP Skills extension, docs/skills.md).
    let skills = client.connection().skills().await?;
    let skill = skills.iter().find(|skill| skill.frontmatter.name == "workflow-v1");
    let skill_md = match skill {
        Some(skill) => client.connection().read_text(&skill.uri).await?,
        None => String::new(),
    };
    let verified = skill.is_some_and(|skill| match &skill.resources {
        rmcp::model::SkillResources::Files(files) => {
            files.iter().any(|file| file.uri == skill.uri && file.verify(skill_md.as_bytes()).is_ok())
        }
        _ => false,
    });
    if let Some(skill) = skill {
        n.say(&format!(
            "   For hosts that read Agent Skills it is also {} ({} skills here).",
            skill.uri,
            skills.len()
        ))?;
    }
    n.check(
        "the core guide is also the workflow-v1 skill's SKILL.md, byte for byte and as its digest says",
        verified && core.body.as_deref().is_some_and(|body| skill_md.ends_with(body) && skill_md.starts_with("---\n")),
        skills.iter().map(|skill| skill.uri.as_str()).collect::<Vec<_>>().join(", "),
    )?;
    Ok(())
}

/// Scenario 3, lookup: the capabilities a workflow can call, and the
/// catalog version.
pub(super) async fn lookup(client: &mut PilotageClient, n: &mut Narrator<'_>) -> Result<(), DemoError> {
    n.say("\n3. Lookup: which capabilities can a workflow call?")?;
    let page = client.catalog_list("workflow/v1", None, None).await?;
    for entry in &page.items {
        n.say(&format!("   {} [{}] {}", entry.id, entry.risk, entry.name))?;
    }
    n.say(&format!("   catalog_version {}", page.catalog_version))?;
    Ok(())
}

/// Scenario 4: validate the typo, then the program fixed from the hint;
/// returns the fixed program.
pub(super) async fn validate_typo(client: &mut PilotageClient, n: &mut Narrator<'_>) -> Result<Value, DemoError> {
    n.say("\n4. Validate the spec's example (Part III §9.3), typo included: cap_read_user_profil.")?;
    let mut program = typo_program();
    let first = client.validate("workflow/v1", &program, None).await?;
    n.say(&indent(&serde_json::to_value(&first.diagnostics).unwrap_or_default()))?;
    let hint = first.diagnostics.first().and_then(|d| d.hint.clone()).unwrap_or_default();
    n.check("the program is invalid, not an error", !first.valid, "valid")?;
    n.check(
        "the diagnostic is unknown_capability at /steps/0/capability with the close match",
        first.diagnostics.first().is_some_and(|d| d.code == "unknown_capability")
            && hint == "close match: cap_read_user_profile",
        &hint,
    )?;
    let fixed = hint.trim_start_matches("close match: ").to_owned();
    program["steps"][0]["capability"] = json!(fixed);
    n.say(&format!("   The agent applies the hint: capability = {fixed}."))?;
    let second = client.validate("workflow/v1", &program, None).await?;
    let plan = second.plan.clone();
    n.check("the corrected program is valid and comes with a plan", second.valid && plan.is_some(), "invalid")?;
    if let Some(plan) = &plan {
        n.say(&format!(
            "   Plan: {} step(s), max_risk {} (readOnly={}, destructive={}, openWorld={}).",
            plan.steps.len(),
            plan.max_risk,
            plan.max_risk_hints.read_only,
            plan.max_risk_hints.destructive,
            plan.max_risk_hints.open_world
        ))?;
    }
    Ok(program)
}

/// Scenario 5: execute the fixed program through the Host gate
/// (read-only, so no approval), then fetch its stored trace by `run_id`.
pub(super) async fn execute(
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    program: &Value,
    options: &RunOptions,
) -> Result<(), DemoError> {
    n.say("\n5. Execute (Part III §9.4): the plan is read-only, so the Host gate lets it through.")?;
    let report = client.run("workflow/v1", program.clone(), Some(json!({"userId": "42"})), options, &Refuse).await?;
    let execution = report.execution.clone();
    n.check("the gate needed no approval", report.approved && report.approval.is_none(), "approval was asked")?;
    match &execution {
        Some(execution) => {
            n.say(&format!(
                "   outcome {:?}, output {}",
                execution.outcome.status,
                execution.output.clone().unwrap_or(Value::Null)
            ))?;
            if let Some(trace) = &execution.trace {
                n.say("   trace:")?;
                n.say(&indent(&serde_json::to_value(trace).unwrap_or_default()))?;
            }
            n.check(
                "the Run succeeded with the profile's name",
                execution.output == Some(json!({"name": "Amira Hassan"})),
                &execution.outcome.status,
            )?;
            let fetched = report.fetched.as_ref();
            n.check(
                &format!("the stored trace fetched again by run_id {} is the same trace", execution.run_id),
                fetched.is_some_and(|f| Some(&f.trace) == execution.trace.as_ref()),
                "it differs or is missing",
            )?;
        }
        None => n.check("the Run was executed", false, "no execute response")?,
    }
    Ok(())
}

/// Scenario 6, a branching workflow: the trace shows which way it went
/// and why.
pub(super) async fn branching(
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    options: &RunOptions,
) -> Result<(), DemoError> {
    n.say("\n6. A branching workflow: gold customers get a note; the trace shows which way it went and why.")?;
    let branching = json!({
        "input": {"userId": "string"},
        "steps": [
            {"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "$.input.userId"}},
            {"id": "tier", "kind": "branch", "if": {"eq": ["$.steps.profile.output.tier", "gold"]},
             "then": [{"id": "flag", "kind": "call", "capability": "cap_flag_order", "with": {"order_id": "o-1001", "reason": "gold customer follow-up"}}],
             "else": [{"id": "note", "kind": "call", "capability": "cap_read_outbox"}]}
        ],
        "output": {"name": "$.steps.profile.output.name"}
    });
    let report = client.run("workflow/v1", branching, Some(json!({"userId": "42"})), options, &Refuse).await?;
    let decision = report
        .execution
        .as_ref()
        .and_then(|e| e.trace.as_ref())
        .and_then(|t| t.steps.iter().find(|s| s.id == "tier"))
        .and_then(|s| s.decisions.first().cloned());
    match &decision {
        Some(decision) => {
            n.say(&format!("   decision at '{}': took '{}' because {}", decision.at, decision.took, decision.because))?
        }
        None => n.say("   no decision was traced")?,
    }
    n.check(
        "the branch took 'then' and said why",
        decision.as_ref().is_some_and(|d| d.took == "then" && d.because.contains("gold")),
        "no such decision",
    )?;
    Ok(())
}

/// Scenario 7, drift: an operator edits the catalog between validation
/// and the Run; the stale token is refused, and looking up again recovers.
pub(super) async fn drift(
    server: &Server,
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    program: &Value,
    options: &RunOptions,
) -> Result<(), DemoError> {
    n.say("\n7. Drift: the agent validates, then an operator edits the catalog before the Run.")?;
    let validated = client.validate("workflow/v1", program, None).await?;
    let stale = validated.catalog_version.clone().unwrap_or_default();
    if let Some(tenant) = server.platform.tenant(&server.platform.dev_principal().tenant) {
        let edited = tenant.with_catalog(|catalog| catalog.stored("cap_read_user_profile").map(|s| s.as_ref().clone()));
        if let Some(mut edited) = edited {
            edited.entry.description =
                Some("Returns one user's profile: name, email and loyalty tier (edited).".into());
            tenant.put_entries(vec![edited]);
            n.say("   The operator updated the description of cap_read_user_profile.")?;
        }
    }
    let argument = client.program_argument("run_workflow", "workflow/v1")?;
    let refused = client
        .execute_raw(
            "workflow/v1",
            json!({argument: program, "input": {"userId": "42"}, "expected_catalog_version": stale}),
        )
        .await?;
    n.say(&format!(
        "   execute with the old catalog_version → {} ({})",
        refused.outcome.status,
        refused.outcome.error.clone().unwrap_or_default()
    ))?;
    n.check(
        "the stale token is refused with catalog_drift before anything runs",
        refused.outcome.status == "catalog_drift",
        &refused.outcome.status,
    )?;
    let recovered = client.run("workflow/v1", program.clone(), Some(json!({"userId": "42"})), options, &Refuse).await?;
    n.check(
        "after looking up and validating again, the Run succeeds",
        recovered.execution.as_ref().is_some_and(|e| e.outcome.ok),
        "it did not",
    )?;
    Ok(())
}

/// Scenario 8, a destructive plan: the Host asks for approval outside the
/// model, no one approves, and nothing is sent.
pub(super) async fn host_gate(
    server: &Server,
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    options: &RunOptions,
) -> Result<(), DemoError> {
    n.say("\n8. A destructive plan: the agent asks to cancel every pending order of user 42.")?;
    let destructive = json!({
        "steps": [
            {"id": "orders", "kind": "call", "capability": "cap_list_orders", "with": {"user_id": "42"}},
            {"id": "each", "kind": "for_each", "over": "$.steps.orders.output.orders", "as": "order", "do": [
                {"id": "pending", "kind": "branch", "if": {"eq": ["$.order.status", "pending"]},
                 "then": [{"id": "cancel", "kind": "call", "capability": "cap_cancel_order", "with": {"order_id": "$.order.id"}}]}
            ]}
        ]
    });
    let cancels_before = server.demo_world.as_ref().map(|(_, w)| w.calls().get("/orders/cancel").copied().unwrap_or(0));
    let gated = client.run("workflow/v1", destructive, None, options, &Refuse).await?;
    if let Some(request) = &gated.approval {
        n.say("   The Host asks for approval outside the model:")?;
        for line in request.prompt().lines() {
            n.say(&format!("     {line}"))?;
        }
    }
    n.say("   No one approves (this demo runs unattended), so the Host does not send the execute request.")?;
    let cancels_after = server.demo_world.as_ref().map(|(_, w)| w.calls().get("/orders/cancel").copied().unwrap_or(0));
    n.check(
        "the destructive plan needed approval and was not executed",
        gated.approval.is_some() && !gated.approved && gated.executions.is_empty() && cancels_before == cancels_after,
        "it ran",
    )?;
    Ok(())
}
