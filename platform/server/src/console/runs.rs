//! A tenant's deployments with their firings, its retained Runs (listed,
//! filtered by Language, status, deployment and time) and the Run page:
//! the plan with each step's risk and arm, then the trace as a timeline,
//! drawn by the shared view (`assets/view.js`) from the stored record.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::pages::short;
use super::session::TenantPage;
use super::web::{escape, urlencode};
use crate::admin::AdminState;
use crate::deploy::model::{Deployment, of_tenant};
use pilotage_engine::clock::{parse_rfc3339, rfc3339};
use pilotage_store::RunFilter;

/// Rows per page of the Run list.
const RUNS_PER_PAGE: i64 = 50;

fn run_link(tenant: &str, run_id: &str) -> String {
    format!(
        "<a href=\"/console/t/{}/runs/{}\"><code>{}</code></a>",
        urlencode(tenant),
        urlencode(run_id),
        escape(run_id)
    )
}

/// `GET /console/t/{tenant}/deployments`.
pub(super) async fn deployments(State(state): State<AdminState>, page: TenantPage) -> Response {
    let tenant = page.tenant.as_str();
    let deployments = match of_tenant(state.platform.store(), tenant).await {
        Ok(deployments) => deployments,
        Err(error) => return page.failed(&state, &error),
    };
    let mut rows = String::new();
    for deployment in &deployments {
        let view = deployment.view();
        rows.push_str(&format!(
            "<tr><th scope=\"row\"><a href=\"/console/t/{t}/deployments/{n}\">{name}</a></th><td>{language}</td><td>{triggers}</td><td>{enabled}</td><td>{next}</td><td class=\"pv-risk pv-risk-{risk}\">{risk}</td></tr>",
            t = urlencode(tenant),
            n = urlencode(&deployment.row.name),
            name = escape(&deployment.row.name),
            language = escape(&deployment.row.language),
            triggers = escape(&triggers(&view["triggers"])),
            enabled = if deployment.row.enabled { "enabled" } else { "disabled" },
            next = escape(&short(&view["next_due"])),
            risk = escape(&deployment.row.risk),
        ));
    }
    let body = if deployments.is_empty() {
        "<p>Nothing is deployed in this tenant.</p>".to_owned()
    } else {
        format!(
            "<div class=\"scroll\"><table id=\"deployments-table\"><caption>{} deployments</caption><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Language</th><th scope=\"col\">Triggers</th><th scope=\"col\">State</th><th scope=\"col\">Next due</th><th scope=\"col\">Risk</th></tr></thead><tbody>{rows}</tbody></table></div>",
            deployments.len()
        )
    };
    page.page(&state, "Deployments", &body, &[])
}

/// A deployment's triggers in one line (`webhook home: door.opened`,
/// `schedule 0 22 * * * Europe/Paris`, …).
fn triggers(value: &Value) -> String {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|trigger| {
            let kind = short(&trigger["kind"]);
            let rest: Vec<String> = trigger
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(key, _)| key.as_str() != "kind")
                .map(|(key, value)| format!("{key} {}", short(value)))
                .collect();
            format!("{kind} ({})", rest.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `GET /console/t/{tenant}/deployments/{name}`: the deployment and its
/// latest firings, each linking to its Run.
pub(super) async fn deployment(
    State(state): State<AdminState>,
    page: TenantPage,
    Path((_, name)): Path<(String, String)>,
) -> Response {
    let tenant = page.tenant.as_str();
    let store = state.platform.store();
    let row = match store.deployment_get(tenant, &name).await {
        Ok(Some(row)) => row,
        Ok(None) => return page.not_found(&state),
        Err(error) => return page.failed(&state, &error),
    };
    let deployment = match Deployment::from_row(row) {
        Ok(deployment) => deployment,
        Err(error) => return page.failed(&state, &error),
    };
    let firings = match store.firings_of(tenant, &name, 50).await {
        Ok(rows) => rows,
        Err(error) => return page.failed(&state, &error),
    };
    let mut rows = String::new();
    let mut broken = 0;
    for firing in &firings {
        // The outcome is the Run's; a Run past its retention is gone.
        let status = match store.run_get(&firing.run_id).await {
            Ok(Some(run)) => run.status,
            Ok(None) => "no longer kept".to_owned(),
            Err(error) => return page.failed(&state, &error),
        };
        broken += usize::from(status == pilotage_protocol::assertions::ASSERTION_FAILED);
        rows.push_str(&format!(
            "<tr class=\"firing\"><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            escape(&rfc3339(firing.claimed_at)),
            escape(&firing.instance),
            escape(&status),
            run_link(tenant, &firing.run_id),
        ));
    }
    let view = deployment.view();
    let firings_table = if firings.is_empty() {
        "<p id=\"no-firings\">It has not fired yet.</p>".to_owned()
    } else {
        format!(
            "<div class=\"scroll\"><table id=\"firings-table\"><caption>The latest {} firings</caption><thead><tr><th scope=\"col\">When</th><th scope=\"col\">Instance</th><th scope=\"col\">Outcome</th><th scope=\"col\">Run</th></tr></thead><tbody>{rows}</tbody></table></div>",
            firings.len()
        )
    };
    // The assertions it keeps (docs/assertions.md), and how many of the
    // firings listed broke one.
    let assertions = match view.get(pilotage_protocol::assertions::MEMBER).and_then(Value::as_array) {
        Some(kept) => format!(
            "<h2>Assertions</h2><p id=\"deployment-assertions\">{n} checked on every firing; {broken} of the {shown} firings listed broke one (status assertion_failed).</p><pre>{json}</pre>",
            n = kept.len(),
            shown = firings.len(),
            json = escape(&serde_json::to_string_pretty(kept).unwrap_or_default()),
        ),
        None => String::new(),
    };
    // An administrator turns it off or on from here.
    let action = match page.viewer.admin() {
        Some(_) => format!(
            "<form class=\"decide\" id=\"deployment-action\" method=\"post\" action=\"/console/t/{t}/deployments/{n}/state\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"state\" value=\"{to}\">\
             <button type=\"submit\">{label}</button></form>",
            t = urlencode(tenant),
            n = urlencode(&name),
            csrf = page.viewer.csrf(&state),
            to = if deployment.row.enabled { "disabled" } else { "enabled" },
            label = if deployment.row.enabled { "Disable its triggers" } else { "Enable its triggers" },
        ),
        None => String::new(),
    };
    let body = format!(
        "{action}<dl class=\"facts\"><dt>Language</dt><dd>{language}</dd><dt>State</dt><dd id=\"deployment-state\">{enabled}</dd><dt>Triggers</dt><dd>{triggers}</dd><dt>Next due</dt><dd>{next}</dd>\
         <dt>Risk</dt><dd class=\"pv-risk pv-risk-{risk}\">{risk}</dd><dt>Deployed by</dt><dd>{by}</dd><dt>Installed by Run</dt><dd>{installed}</dd><dt>Version</dt><dd>{version}</dd></dl>\
         {assertions}<h2>Firings</h2>{firings_table}<p><a href=\"/console/t/{t}/runs?deployment={n}\">Every retained Run of this deployment</a></p>\
         <h2>Program</h2><pre>{program}</pre>",
        language = escape(&deployment.row.language),
        enabled = if deployment.row.enabled { "enabled" } else { "disabled" },
        triggers = escape(&triggers(&view["triggers"])),
        next = escape(&short(&view["next_due"])),
        risk = escape(&deployment.row.risk),
        by = escape(&deployment.row.subject),
        installed = run_link(tenant, &deployment.row.run_id),
        version = deployment.row.version,
        t = urlencode(tenant),
        n = urlencode(&name),
        program = escape(
            &serde_json::from_str::<Value>(&deployment.row.body)
                .map(|body| serde_json::to_string_pretty(&body).unwrap_or_default())
                .unwrap_or_else(|_| deployment.row.body.clone())
        ),
    );
    page.page(&state, &format!("Deployment {name}"), &body, &[])
}

/// The Run list's filters (`?language=&status=&deployment=&since=&after=`),
/// `since` as RFC 3339 or `YYYY-MM-DDTHH:MM` (UTC), `after` the cursor of
/// the next page (`<created_at ms>.<run_id>` of the last row shown).
#[derive(Debug, Default, Deserialize)]
pub(super) struct RunsQuery {
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    deployment: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    after: Option<String>,
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// `since` as ms since the epoch: RFC 3339, or a datetime-local value read
/// as UTC.
fn since_ms(text: &str) -> Option<i64> {
    parse_rfc3339(text).or_else(|| parse_rfc3339(&format!("{text}:00Z"))).or_else(|| parse_rfc3339(&format!("{text}Z")))
}

/// `GET /console/t/{tenant}/runs`.
pub(super) async fn runs(
    State(state): State<AdminState>,
    page: TenantPage,
    Query(query): Query<RunsQuery>,
) -> Response {
    let (tenant, live) = (page.tenant.as_str(), &page.live);
    let since = non_empty(&query.since);
    let since_parsed = since.map(since_ms);
    let filter = RunFilter {
        language: non_empty(&query.language),
        status: non_empty(&query.status),
        deployment: non_empty(&query.deployment),
        since_ms: since_parsed.flatten(),
        after: non_empty(&query.after)
            .and_then(|cursor| cursor.split_once('.'))
            .and_then(|(at, run_id)| Some((at.parse().ok()?, run_id))),
        limit: RUNS_PER_PAGE,
    };
    let rows = match state.platform.store().runs_listed(tenant, &filter).await {
        Ok(rows) => rows,
        Err(error) => return page.failed(&state, &error),
    };
    let deployments = of_tenant(state.platform.store(), tenant).await.unwrap_or_default();
    let mut languages: Vec<String> = live.languages().iter().map(|slot| slot.entry.name.clone()).collect();
    languages.sort();
    let options = |values: &[String], chosen: Option<&str>| {
        let mut html = String::from("<option value=\"\">any</option>");
        for value in values {
            let selected = if Some(value.as_str()) == chosen { " selected" } else { "" };
            html.push_str(&format!("<option value=\"{v}\"{selected}>{v}</option>", v = escape(value)));
        }
        html
    };
    let statuses: Vec<String> = {
        let mut statuses: Vec<String> = live
            .languages()
            .iter()
            .flat_map(|slot| slot.description().run_statuses.iter().map(|s| s.status.clone()).collect::<Vec<_>>())
            .collect();
        statuses.sort();
        statuses.dedup();
        statuses
    };
    let names: Vec<String> = deployments.iter().map(|d| d.row.name.clone()).collect();
    let warning = if since_parsed.is_some_and(|parsed| parsed.is_none()) {
        format!(
            "<p role=\"alert\" id=\"filter-error\">'{}' is not a time: give it as 2026-07-14T22:00 (UTC) or RFC 3339.</p>",
            escape(since.unwrap_or_default())
        )
    } else {
        String::new()
    };
    let form = format!(
        "<form class=\"filters\" method=\"get\" action=\"/console/t/{t}/runs\" role=\"search\" aria-label=\"Filter the Runs\">\
         <label>Language <select name=\"language\" id=\"filter-language\">{languages}</select></label>\
         <label>Status <select name=\"status\" id=\"filter-status\">{statuses}</select></label>\
         <label>Deployment <select name=\"deployment\" id=\"filter-deployment\">{deployments}</select></label>\
         <label>Since (UTC) <input type=\"text\" name=\"since\" id=\"filter-since\" placeholder=\"2026-07-14T22:00\" value=\"{since}\"></label>\
         <button type=\"submit\">Filter</button></form>{warning}",
        t = urlencode(tenant),
        languages = options(&languages, filter.language),
        statuses = options(&statuses, filter.status),
        deployments = options(&names, filter.deployment),
        since = escape(since.unwrap_or_default()),
    );
    let mut table = String::new();
    for row in &rows {
        table.push_str(&format!(
            "<tr class=\"run\"><td>{}</td><td>{}</td><td>{}</td><td class=\"status-{}\">{}</td><td>{}</td><td>{}</td></tr>",
            run_link(tenant, &row.run_id),
            escape(&rfc3339(row.created_at)),
            escape(&row.language),
            escape(&row.status),
            escape(&row.status),
            escape(&row.subject),
            row.bytes,
        ));
    }
    let next = match rows.last() {
        Some(last) if rows.len() as i64 == RUNS_PER_PAGE => {
            let mut link =
                format!("/console/t/{}/runs?after={}.{}", urlencode(tenant), last.created_at, urlencode(&last.run_id));
            for (key, value) in [
                ("language", filter.language),
                ("status", filter.status),
                ("deployment", filter.deployment),
                ("since", since),
            ] {
                if let Some(value) = value {
                    link.push_str(&format!("&{key}={}", urlencode(value)));
                }
            }
            format!("<p><a href=\"{}\" id=\"older\">Older Runs</a></p>", escape(&link))
        }
        _ => String::new(),
    };
    let body = format!(
        "{form}<div class=\"scroll\"><table id=\"runs-table\"><caption>{} retained Runs, newest first</caption><thead><tr><th scope=\"col\">Run</th><th scope=\"col\">Stored</th><th scope=\"col\">Language</th><th scope=\"col\">Status</th><th scope=\"col\">By</th><th scope=\"col\">Bytes</th></tr></thead><tbody>{table}</tbody></table></div>{next}",
        rows.len()
    );
    page.page(&state, "Runs", &body, &[])
}

/// JSON for a `<script type="application/json">` element: nothing in it
/// can close the element or open a comment.
fn script_json(value: &Value) -> String {
    value.to_string().replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

/// The Run's `x-assertions` verdicts (docs/assertions.md) as a table:
/// each assertion, whether it held, the value observed and why it failed.
/// Empty when the request carried none.
fn assertions_section(record: &Value) -> String {
    let Some(report) = record.get(pilotage_protocol::assertions::MEMBER) else { return String::new() };
    let verdicts = report["verdicts"].as_array().map(Vec::as_slice).unwrap_or_default();
    let rows: String = verdicts
        .iter()
        .map(|verdict| {
            let observed = match verdict.get("observed") {
                Some(value) => format!("<code>{}</code>", escape(&clipped(&value.to_string(), 200))),
                None => "<em>absent</em>".to_owned(),
            };
            format!(
                "<tr class=\"verdict-{state}\" data-assertion=\"{id}\"><th scope=\"row\"><code>{id}</code></th><td>{state}</td><td>{observed}</td><td>{message}</td></tr>",
                id = escape(&short(&verdict["id"])),
                state = escape(&short(&verdict["verdict"])),
                message = escape(&short(&verdict["message"])),
            )
        })
        .collect();
    format!(
        "<section id=\"run-assertions\" aria-labelledby=\"run-assertions-title\"><h2 id=\"run-assertions-title\">Assertions</h2>\
         <p>{passed} passed, {failed} failed (checked by the platform against this trace and output).</p>\
         <div class=\"scroll\"><table><thead><tr><th scope=\"col\">Assertion</th><th scope=\"col\">Verdict</th><th scope=\"col\">Observed</th><th scope=\"col\">Why it failed</th></tr></thead><tbody>{rows}</tbody></table></div></section>",
        passed = escape(&short(&report["passed"])),
        failed = escape(&short(&report["failed"])),
    )
}

/// `text` cut to `chars` characters, with `…` when cut.
fn clipped(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// `GET /console/t/{tenant}/runs/{run_id}`: the Run view.
pub(super) async fn run(
    State(state): State<AdminState>,
    page: TenantPage,
    Path((_, run_id)): Path<(String, String)>,
) -> Response {
    let tenant = page.tenant.as_str();
    let row = match state.platform.store().run_get(&run_id).await {
        Ok(Some(row)) if row.tenant == tenant => row,
        Ok(_) => return page.not_found(&state),
        Err(error) => return page.failed(&state, &error),
    };
    let record: Value = match serde_json::from_str(&row.record) {
        Ok(record) => record,
        Err(error) => return page.failed(&state, &error),
    };
    let steps = record["trace"]["steps"].as_array().map_or(0, Vec::len);
    let firing = match state.platform.store().firing_of_run(tenant, &run_id).await {
        Ok(firing) => firing,
        Err(error) => return page.failed(&state, &error),
    };
    let origin = match &firing {
        Some((deployment, instance)) => format!(
            "<dt>Fired by</dt><dd>the deployment <a href=\"/console/t/{}/deployments/{}\">{}</a>, instance <code>{}</code></dd>",
            urlencode(tenant),
            urlencode(deployment),
            escape(deployment),
            escape(instance)
        ),
        None => String::new(),
    };
    let body = format!(
        "<dl class=\"facts\"><dt>Language</dt><dd>{language}</dd><dt>By</dt><dd>{subject}</dd><dt>Stored</dt><dd>{created}</dd><dt>Kept until</dt><dd>{expires}</dd>\
         <dt>Outcome</dt><dd id=\"run-status\">{status}</dd><dt>Trace</dt><dd>{steps} steps at level {level}, {bytes} bytes</dd>{origin}</dl>\
         {assertions}<script type=\"application/json\" id=\"run-data\">{data}</script>\
         <div id=\"run-view\" class=\"run-view\"><noscript><p>The Run view draws the plan and the trace with script; the record is above as JSON.</p></noscript></div>",
        language = escape(&row.language),
        subject = escape(&row.subject),
        created = escape(&rfc3339(row.created_at)),
        expires = row.expires_at.map_or_else(|| "the end of its session".to_owned(), |at| escape(&rfc3339(at))),
        status = escape(&row.status),
        level = escape(&row.recorded_level),
        bytes = row.record.len(),
        data = script_json(&record),
        assertions = assertions_section(&record),
    );
    page.page(&state, &format!("Run {run_id}"), &body, &["view.js"])
}
