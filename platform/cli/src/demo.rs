//! The main job: `pilotage demo` starts the platform on the embedded
//! default (SQLite, the bundled Languages, the demo tenant and its
//! capability service) and drives the reference client through the spec's
//! own scenarios, saying what happens at each step. Every step checks what
//! the spec requires; the demo fails when any step does not behave so.
//!
//! Scenarios: the Part III §9.3–9.4 workflow (a typo caught with the
//! close-match hint, corrected, executed, its trace fetched again by
//! `run_id`); a branching workflow whose trace shows the decision; a stale
//! `catalog_version` refused with `catalog_drift` and recovered; a
//! destructive plan stopped at the Host gate; and the Part I story on
//! PostgreSQL (`sql/postgres-15` over the demo sales database: a wrong
//! column caught with its hint, the read-only plan, `rows_matched` in the
//! trace), or a clear note when PostgreSQL cannot be reached; and the
//! automation story of issue 14 on `automation/1` and the demo home (a
//! draft rule that also unlocks the door stopped at the Host gate, test
//! runs at 14:03 and 22:30 whose decisions name the clock and whose light
//! step is simulated, the question "why did nothing turn on?" answered by
//! the narration of the 14:03 Run's stored record, the deploy, the door opening at night as a signed
//! webhook delivery, the firing that really lights the porch, and its Run
//! fetched by `run_id`).

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use pilotage_client::gate::Refuse;
use pilotage_client::{ClientError, Connection, PilotageClient, RunOptions};
use pilotage_server::settings::Settings;
use pilotage_server::start::{Server, StartError, start};

/// What the demo saw.
#[derive(Debug, Default)]
pub struct DemoReport {
    /// Steps that behaved as the spec says.
    pub passed: Vec<String>,
    /// Steps that did not, with what happened.
    pub failed: Vec<String>,
}

impl DemoReport {
    /// Whether every step behaved.
    pub fn succeeded(&self) -> bool {
        self.failed.is_empty() && !self.passed.is_empty()
    }
}

/// Occurs when the demo cannot run at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// Occurs when the server does not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// Occurs when the client loses the server.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Occurs when the output cannot be written.
    #[error("cannot write the demo's output: {0}")]
    Output(#[from] std::io::Error),
}

mod approval;
mod console;

struct Narrator<'o> {
    out: &'o mut dyn Write,
    report: DemoReport,
}

impl Narrator<'_> {
    fn say(&mut self, text: &str) -> std::io::Result<()> {
        writeln!(self.out, "{text}")
    }

    fn check(&mut self, what: &str, holds: bool, detail: impl std::fmt::Display) -> std::io::Result<()> {
        if holds {
            writeln!(self.out, "   ✓ {what}")?;
            self.report.passed.push(what.to_owned());
        } else {
            writeln!(self.out, "   ✗ {what}: {detail}")?;
            self.report.failed.push(format!("{what}: {detail}"));
        }
        Ok(())
    }
}

/// Signs in on a page of the server as a person would: posts `form` to
/// `sign_in_url` and returns a client that does not follow redirects with
/// the session cookie the answer set.
async fn signed_in(sign_in_url: &str, form: String) -> Result<(reqwest::Client, String), String> {
    let http =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().map_err(|e| e.to_string())?;
    let answer = http
        .post(sign_in_url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let cookie = answer
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .ok_or_else(|| format!("sign-in answered {} without a session", answer.status()))?
        .to_owned();
    Ok((http, cookie))
}

fn indent(value: &Value) -> String {
    serde_json::to_string_pretty(value)
        .unwrap_or_default()
        .lines()
        .map(|line| format!("     {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn typo_program() -> Value {
    json!({
        "steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profil", "with": {"user_id": "$.input.userId"}}],
        "output": {"name": "$.steps.profile.output.name"}
    })
}

/// Runs the demo against a freshly started server and writes the story to
/// `out`.
///
/// # Errors
/// [`DemoError`] when the server cannot start or the client loses it;
/// scenario failures are in the report.
pub async fn run(settings: Settings, out: &mut dyn Write) -> Result<DemoReport, DemoError> {
    let data_dir = settings.data_dir.clone();
    let server = start(settings, &pilotage_bundled::ALL).await?;
    let result = scenarios(&server, out, &data_dir).await;
    server.stop().await;
    result
}

async fn scenarios(server: &Server, out: &mut dyn Write, data_dir: &Path) -> Result<DemoReport, DemoError> {
    let mut n = Narrator { out, report: DemoReport::default() };
    let url = server.mcp_url();
    n.say(&format!("Pilotage Platform demo: the server is up at {url} (SQLite, demo tenant, bundled Languages)."))?;
    if let Some((addr, _)) = &server.demo_world {
        n.say(&format!("The demo capability service (profiles, orders, outbox) answers at http://{addr}.\n"))?;
    }

    // 1. Discover.
    n.say("1. Discover: the agent connects and asks for the manifest first.")?;
    let connection = Connection::http(&url, None).await?;
    n.check(
        "the server declares the Pilotage extension at initialize",
        connection.declares_extension(),
        "no extension",
    )?;
    let welcome = connection.instructions().unwrap_or_default();
    n.check("the welcome text sends the agent to pilotage_manifest", welcome.contains("pilotage_manifest"), &welcome)?;
    let inline = connection.inline_manifest();
    let mut client = PilotageClient::discover(connection).await?;
    let languages: Vec<String> = client.manifest().languages.iter().map(|l| l.name.clone()).collect();
    n.say(&format!("   The manifest lists: {}.", languages.join(", ")))?;
    n.check(
        "the inline manifest equals the manifest tool's",
        inline.as_ref() == Some(client.manifest()),
        "they differ",
    )?;

    // 2. Learn.
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

    // 3. Lookup.
    n.say("\n3. Lookup: which capabilities can a workflow call?")?;
    let page = client.catalog_list("workflow/v1", None, None).await?;
    for entry in &page.items {
        n.say(&format!("   {} [{}] {}", entry.id, entry.risk, entry.name))?;
    }
    n.say(&format!("   catalog_version {}", page.catalog_version))?;

    // 4. Validate with a typo, fix it from the hint.
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

    // 5. Execute through the Host gate, then fetch the trace again.
    n.say("\n5. Execute (Part III §9.4): the plan is read-only, so the Host gate lets it through.")?;
    let options = RunOptions {
        trace_level: Some("full".into()),
        store: Some(true),
        fetch: true,
        drift_retries: 1,
        ..RunOptions::default()
    };
    let report = client.run("workflow/v1", program.clone(), Some(json!({"userId": "42"})), &options, &Refuse).await?;
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

    // 6. Branching.
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
    let report = client.run("workflow/v1", branching, Some(json!({"userId": "42"})), &options, &Refuse).await?;
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

    // 7. Drift.
    n.say("\n7. Drift: the agent validates, then an operator edits the catalog before the Run.")?;
    let validated = client.validate("workflow/v1", &program, None).await?;
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
    let recovered =
        client.run("workflow/v1", program.clone(), Some(json!({"userId": "42"})), &options, &Refuse).await?;
    n.check(
        "after looking up and validating again, the Run succeeds",
        recovered.execution.as_ref().is_some_and(|e| e.outcome.ok),
        "it did not",
    )?;

    // 8. The Host gate.
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
    let gated = client.run("workflow/v1", destructive, None, &options, &Refuse).await?;
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

    // 9. SQL.
    sql_story(server, &mut client, &mut n, &options).await?;

    // 10. Automation.
    automation_story(server, &mut client, &mut n, data_dir).await?;

    let passed = n.report.passed.len();
    let failed = n.report.failed.len();
    n.say(&format!("\n{passed} checks passed, {failed} failed."))?;
    client.close().await;
    Ok(n.report)
}

/// The Part I story: "monthly revenue per customer", with a wrong column.
const REVENUE_QUERY: &str = "SELECT c.name, date_trunc('month', o.ordered_at) AS month, sum(o.total) AS revenue
FROM customers c
JOIN orders o ON o.customer_id = c.id
WHERE o.status <> 'cancelled'
GROUP BY c.name, month
ORDER BY month, revenue DESC
LIMIT 500";

async fn sql_story(
    server: &Server,
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    options: &RunOptions,
) -> Result<(), DemoError> {
    const SQL: &str = pilotage_server::demo::tenant::DEMO_SQL_LANGUAGE;
    n.say("\n9. SQL (Part I): monthly revenue per customer, on the demo sales database in PostgreSQL.")?;
    match &server.demo_sql {
        None => {
            n.say("   The demo's SQL part is off (demo_postgres = \"off\"); skipped.")?;
            return Ok(());
        }
        Some(Err(why)) => {
            n.say(&format!("   PostgreSQL could not be used, so the SQL story is skipped: {why}"))?;
            n.say("   (Start PostgreSQL, or point --demo-postgres at one, and run the demo again.)")?;
            return Ok(());
        }
        Some(Ok(target)) => n.say(&format!("   The demo tenant reads {target} as a read-only role."))?,
    }
    client.refresh_if_changed().await?;
    let page = client.catalog_list(SQL, None, None).await?;
    for entry in &page.items {
        n.say(&format!("   {} [{}] {}", entry.id, entry.risk, entry.description.clone().unwrap_or_default()))?;
    }
    n.check(
        "the catalog lists the sales tables, read-only for this role",
        page.items.len() >= 3 && page.items.iter().all(|e| e.risk == "safe"),
        page.items.len(),
    )?;

    n.say("   The agent writes the query from memory, with a wrong column (o.total):")?;
    for line in REVENUE_QUERY.lines() {
        n.say(&format!("     {line}"))?;
    }
    let first = client.validate(SQL, &json!(REVENUE_QUERY), None).await?;
    let finding = first.diagnostics.iter().find(|d| d.code == "unknown_column");
    if let Some(finding) = finding {
        n.say(&format!(
            "   {} at {}: {} ({})",
            finding.code,
            serde_json::to_string(&finding.path).unwrap_or_default(),
            finding.message,
            finding.hint.clone().unwrap_or_default()
        ))?;
    }
    n.check(
        "the wrong column is unknown_column with the close match total_amount",
        !first.valid && finding.is_some_and(|d| d.hint.as_deref() == Some("close match: total_amount")),
        serde_json::to_string(&first.diagnostics).unwrap_or_default(),
    )?;
    let fixed = REVENUE_QUERY.replace("sum(o.total)", "sum(o.total_amount)");
    n.say("   The agent applies the hint: sum(o.total_amount).")?;
    let second = client.validate(SQL, &json!(fixed), None).await?;
    let plan = second.plan.clone();
    if let Some(plan) = &plan {
        let steps: Vec<String> = plan
            .steps
            .iter()
            .map(|s| format!("{}{}", s.id, s.calls.as_ref().map(|c| format!(" → {c}")).unwrap_or_default()))
            .collect();
        n.say(&format!(
            "   Plan: {}; max_risk {} (readOnly={}).",
            steps.join(", "),
            plan.max_risk,
            plan.max_risk_hints.read_only
        ))?;
    }
    n.check(
        "the fixed query is valid and its plan is read-only (safe)",
        second.valid && plan.as_ref().is_some_and(|p| p.max_risk == "safe" && p.max_risk_hints.read_only),
        serde_json::to_string(&second.diagnostics).unwrap_or_default(),
    )?;

    let report = client.run(SQL, json!(fixed), None, options, &Refuse).await?;
    let statement = report
        .execution
        .as_ref()
        .and_then(|e| e.trace.as_ref())
        .and_then(|t| t.steps.iter().find(|s| s.id == "stmt-1"))
        .and_then(|s| s.output.clone());
    let rows_matched = statement.as_ref().and_then(|s| s["rows_matched"].as_u64());
    let first_row = report.execution.as_ref().and_then(|e| e.output.as_ref()).and_then(|o| o.get(0).cloned());
    n.say(&format!(
        "   Executed in a READ ONLY transaction: rows_matched {}, first row {}",
        rows_matched.map(|r| r.to_string()).unwrap_or_else(|| "?".into()),
        first_row.unwrap_or(Value::Null)
    ))?;
    n.check(
        "the Run succeeded and its trace shows rows_matched",
        report.execution.as_ref().is_some_and(|e| e.outcome.ok) && rows_matched.is_some_and(|r| r > 0),
        report.execution.as_ref().map(|e| e.outcome.status.clone()).unwrap_or_default(),
    )?;
    assertion_story(client, n, options, &fixed).await?;
    let smuggled = client.validate(SQL, &json!("SELECT 1; DROP TABLE orders"), None).await?;
    n.check(
        "a smuggled second statement is refused before anything reaches the database",
        !smuggled.valid,
        "it validated",
    )?;
    Ok(())
}

/// Part I's "a filter that matched zero rows ... looks completely fine",
/// caught by assertions (the platform's `x-assertions`, docs/assertions.md):
/// a misspelt status filter succeeds with no rows; the same Run with two
/// assertions ends `assertion_failed`; spelled as the data has it, they hold.
async fn assertion_story(
    client: &mut PilotageClient,
    n: &mut Narrator<'_>,
    options: &RunOptions,
    query: &str,
) -> Result<(), DemoError> {
    const SQL: &str = pilotage_server::demo::tenant::DEMO_SQL_LANGUAGE;
    let rows_of = |report: &pilotage_client::RunReport| {
        report.execution.as_ref().and_then(|e| e.output.as_ref()).and_then(Value::as_array).map(Vec::len)
    };
    n.say("   Asked for the revenue lost to cancelled orders, the agent filters on o.status = 'canceled' (one l):")?;
    let misspelt = query.replace("o.status <> 'cancelled'", "o.status = 'canceled'");
    let looks_fine = client.run(SQL, json!(misspelt), None, options, &Refuse).await?;
    let status = |report: &pilotage_client::RunReport| {
        report.execution.as_ref().map(|e| e.outcome.status.clone()).unwrap_or_default()
    };
    n.say(&format!(
        "   It is valid, and the Run ends {} with {} rows: a result that looks completely fine (Part I).",
        status(&looks_fine),
        rows_of(&looks_fine).map_or_else(|| "?".to_owned(), |rows| rows.to_string())
    ))?;
    n.check(
        "the misspelt filter runs successfully and returns no rows",
        status(&looks_fine) == "success" && rows_of(&looks_fine) == Some(0),
        status(&looks_fine),
    )?;
    let assertions = json!([
        {"id": "has-rows", "target": {"output": ""}, "check": {"count": {"gt": 0}},
         "message": "a revenue report without rows answers nothing"},
        {"id": "matched", "target": {"step": "stmt-1", "member": "output", "pointer": "/rows_matched"},
         "check": {"gt": 0}}
    ]);
    n.say(&format!("   This time the agent says what a right result is, with x-assertions: {assertions}"))?;
    let asserted = RunOptions { assertions: Some(assertions), ..options.clone() };
    let caught = client.run(SQL, json!(misspelt), None, &asserted, &Refuse).await?;
    let report = caught.execution.as_ref().and_then(|e| e.assertions.clone());
    let failed = report.as_ref().and_then(|r| r.verdicts.iter().find(|v| v.id == "has-rows").cloned());
    n.say(&format!(
        "   The platform checks them against the trace: {} ({}).",
        status(&caught),
        failed.as_ref().and_then(|v| v.message.clone()).unwrap_or_default()
    ))?;
    n.check(
        "the same Run with assertions ends assertion_failed, has-rows observed 0",
        status(&caught) == "assertion_failed"
            && report.as_ref().is_some_and(|r| r.failed == 2)
            && failed.is_some_and(|v| v.observed == Some(json!(0))),
        status(&caught),
    )?;
    let spelled = query.replace("o.status <> 'cancelled'", "o.status = 'cancelled'");
    n.say("   Spelled as the data has it ('cancelled'), the filter finds rows:")?;
    let proved = client.run(SQL, json!(spelled), None, &asserted, &Refuse).await?;
    let held = proved.execution.as_ref().and_then(|e| e.assertions.as_ref()).map(|r| (r.passed, r.failed));
    n.say(&format!(
        "   {} with {} rows; the assertions: {}.",
        status(&proved),
        rows_of(&proved).map_or_else(|| "?".to_owned(), |rows| rows.to_string()),
        held.map_or_else(|| "no report".to_owned(), |(passed, failed)| format!("{passed} passed, {failed} failed"))
    ))?;
    n.check(
        "spelled right, both assertions hold and the Run succeeds",
        status(&proved) == "success" && held == Some((2, 0)),
        status(&proved),
    )?;
    Ok(())
}

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

async fn automation_story(
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
    let home_before = world.home();
    let calls = |path: &str| world.calls().get(path).copied().unwrap_or(0);
    let turn_on_path = "/home/porch_light/turn_on";
    let (turn_ons_before, unlocks_before) = (calls(turn_on_path), calls("/home/front_door/unlock"));

    // The draft, through the Host gate.
    let mut rule = porch_rule_draft();
    n.say("   The agent's draft rule also unlocks the door for whoever comes home:")?;
    n.say(&indent(&rule))?;
    let deploy = RunOptions {
        trace_level: Some("full".into()),
        store: Some(true),
        mode: Some("deploy".into()),
        ..RunOptions::default()
    };
    let gated = client.run(AUTOMATION, rule.clone(), None, &deploy, &Refuse).await?;
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
            && calls("/home/front_door/unlock") == unlocks_before,
        "it was sent",
    )?;
    approval::held_then_rejected(server, client, n, data_dir, AUTOMATION, &rule).await?;
    if let Some(actions) = rule["actions"].as_array_mut() {
        actions.retain(|action| action["id"] != "unlock");
    }
    n.say(
        "   The agent drops the unlock step; the plan's highest risk is now write (the light), which the tenant's policy allows.",
    )?;

    // An immediate Run of a rule with a trigger is refused, with the way out.
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
            && world.home() == home_before,
        &once.outcome.status,
    )?;

    // Test runs at a simulated 14:03 and 22:30.
    let test = RunOptions { test_run: Some(true), ..deploy.clone() };
    let door_opens_at = |at: &str| json!({"event": {"device": "front_door", "state": "open"}, "at": at});
    n.say("   A test run at a simulated 14:03 in Paris (input.at 2026-07-14T14:03:00+02:00), the door opening:")?;
    let day =
        client.run(AUTOMATION, rule.clone(), Some(door_opens_at("2026-07-14T14:03:00+02:00")), &test, &Refuse).await?;
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
    n.say("   A test run at a simulated 22:30:")?;
    let night =
        client.run(AUTOMATION, rule.clone(), Some(door_opens_at("2026-07-14T22:30:00+02:00")), &test, &Refuse).await?;
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
            && world.home() == home_before
            && calls(turn_on_path) == turn_ons_before,
        format!("{light_step:?}, home {}", world.home()),
    )?;

    // Deploy, then the door opens at night.
    let deployed = client.run(AUTOMATION, rule.clone(), None, &deploy, &Refuse).await?;
    let output = deployed.execution.as_ref().and_then(|e| e.output.clone()).unwrap_or(Value::Null);
    n.say(&format!("   Deployed (mode deploy): {output}"))?;
    n.check(
        "the rule is installed behind its webhook trigger, and installing ran nothing",
        deployed.execution.as_ref().is_some_and(|e| e.outcome.ok)
            && output["deployment"] == "porch-at-night"
            && world.home() == home_before,
        deployed.execution.as_ref().map(|e| format!("{:?}", e.outcome)).unwrap_or_default(),
    )?;
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
        let firings = server.platform.store().firings_of(&tenant, "porch-at-night", 20).await.unwrap_or_default();
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
    let run_id = firing.map(|f| f.run_id).unwrap_or_default();
    let mut fetched = None;
    for _ in 0..100 {
        if let Ok(trace) = client.trace(AUTOMATION, &run_id, Some("full")).await {
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
    console::fired_rule(server, n, data_dir, &tenant, "porch-at-night", &run_id).await?;
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
