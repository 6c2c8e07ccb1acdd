//! Scenario 9: the Part I story on PostgreSQL (`sql/postgres-15` over the
//! demo sales database), and the assertions that catch a filter which
//! matched zero rows.

use serde_json::{Value, json};

use super::{DemoError, Narrator};
use pilotage_client::gate::Refuse;
use pilotage_client::{PilotageClient, RunOptions};
use pilotage_server::start::Server;

/// The Part I story: "monthly revenue per customer", with a wrong column.
const REVENUE_QUERY: &str = "SELECT c.name, date_trunc('month', o.ordered_at) AS month, sum(o.total) AS revenue
FROM customers c
JOIN orders o ON o.customer_id = c.id
WHERE o.status <> 'cancelled'
GROUP BY c.name, month
ORDER BY month, revenue DESC
LIMIT 500";

/// Scenario 9: the Part I story on PostgreSQL (`sql/postgres-15` over the
/// demo sales database): a wrong column caught with its hint, the
/// read-only plan, `rows_matched` in the trace, assertions, and a smuggled
/// second statement refused; or a clear note when PostgreSQL cannot be
/// reached.
pub(super) async fn sql_story(
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
