//! A tenant's console pages that list what it holds: the overview (quotas,
//! their use, live figures), Languages, catalog, data sources and the
//! audit log. Each is admitted first ([`TenantPage`]).

use axum::extract::State;
use axum::response::Response;
use serde_json::Value;

use super::session::TenantPage;
use super::web::{escape, urlencode};
use crate::admin::AdminState;
use pilotage_engine::clock::rfc3339;
use pilotage_engine::lint::lint;
use pilotage_store::Scope;

/// A JSON value as short text for a table cell.
pub(super) fn short(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `GET /console/t/{tenant}`: quotas and their use, live figures.
pub(super) async fn overview(State(state): State<AdminState>, page: TenantPage) -> Response {
    let (viewer, tenant, live) = (&page.viewer, page.tenant.as_str(), &page.live);
    let store = state.platform.store();
    let stored_bytes = match store.run_bytes_of_tenant(tenant).await {
        Ok(bytes) => bytes,
        Err(error) => return page.failed(&state, &error),
    };
    let deployments = match store.deployments_of_tenant(tenant).await {
        Ok(rows) => rows,
        Err(error) => return page.failed(&state, &error),
    };
    let quotas = live.quotas();
    let enabled = deployments.iter().filter(|d| d.enabled).count();
    let rows = [
        ("Concurrent Runs", live.running().to_string(), quotas.max_concurrent_runs.to_string()),
        ("Requests per second", "—".to_owned(), quotas.requests_per_second.to_string()),
        ("Stored Run bytes", stored_bytes.to_string(), quotas.max_stored_run_bytes.to_string()),
        ("Deployments", deployments.len().to_string(), quotas.max_deployments.to_string()),
        ("Firings per minute", "—".to_owned(), quotas.max_firings_per_minute.to_string()),
        ("Task wall time (ms)", "—".to_owned(), quotas.task_wall_time_ms.to_string()),
    ];
    let mut quota_rows = String::new();
    for (name, used, limit) in rows {
        quota_rows.push_str(&format!("<tr><th scope=\"row\">{name}</th><td>{used}</td><td>{limit}</td></tr>"));
    }
    let t = urlencode(tenant);
    let attention = match attention(&state, tenant, stored_bytes, deployments.len(), &quotas).await {
        Ok(section) => section,
        Err(error) => return page.failed(&state, &error),
    };
    let body = format!(
        "{attention}<p>{languages} Languages, {entries} catalog entries, {enabled} of {deployments} deployments enabled{state}.</p>\
         <section aria-labelledby=\"quotas\"><h2 id=\"quotas\">Quotas and their use</h2><table id=\"quota-table\"><thead><tr><th scope=\"col\">Quota</th><th scope=\"col\">In use</th><th scope=\"col\">Limit</th></tr></thead><tbody>{quota_rows}</tbody></table></section>\
         <section aria-labelledby=\"figures-title\" id=\"figures\" data-src=\"/console/t/{t}/figures.json\"><h2 id=\"figures-title\">Live figures</h2>\
         <p class=\"note\">Updated every 5 seconds. Runs and firings are this tenant's, from its stored records of the last 24 hours{platform}.</p>\
         <div class=\"charts\" id=\"charts\"><p>Loading…</p></div></section>{capacity}",
        languages = live.languages().len(),
        entries = live.with_catalog(|catalog| catalog.all().count()),
        deployments = deployments.len(),
        state = if live.is_disabled() { "; the tenant is disabled" } else { "" },
        capacity = super::capacity::tenant_section(&state.platform, tenant),
        platform = if viewer.operator() {
            "; requests and platform-wide Runs are this replica's counters since it started"
        } else {
            ""
        },
    );
    page.page(&state, &format!("Tenant {tenant}"), &body, &[])
}

/// A quota is near its limit from this share of it on.
const NEAR: f64 = 0.8;

/// "Needs attention" of a tenant: its pending approval requests, its
/// stored Runs that did not succeed in the last hour, its enabled
/// deployments whose last firing's Run did not succeed, and its fleet-wide
/// quotas at 80 % or more;
/// "Nothing needs attention" when none.
async fn attention(
    state: &AdminState,
    tenant: &str,
    stored_bytes: i64,
    deployments: usize,
    quotas: &crate::tenancy::Quotas,
) -> Result<String, pilotage_store::StoreError> {
    let store = state.platform.store();
    let now = state.platform.clock().now_ms();
    let t = urlencode(tenant);
    let mut items = Vec::new();
    let pending = store
        .approvals_of_tenant(tenant, Some("pending"), 500)
        .await?
        .iter()
        .filter(|row| crate::policy::approvals::state_at(row, now) == "pending")
        .count();
    if pending > 0 {
        items.push(format!(
            "<li id=\"attention-approvals\"><a href=\"/console/approvals\">{pending} approval requests wait for a decision</a></li>"
        ));
    }
    let failed: i64 = store
        .runs_by_status(tenant, now - 3_600_000)
        .await?
        .iter()
        .filter(|(status, _)| status != "success")
        .map(|(_, n)| n)
        .sum();
    if failed > 0 {
        items.push(format!(
            "<li id=\"attention-runs\"><a href=\"/console/t/{t}/runs\">{failed} stored Runs did not succeed in the last hour</a></li>"
        ));
    }
    for row in store.deployments_of_tenant(tenant).await?.iter().filter(|row| row.enabled) {
        let Some(firing) = store.firings_of(tenant, &row.name, 1).await?.into_iter().next() else {
            continue;
        };
        // Its outcome is its Run's, while the Run is kept.
        if let Some(run) = store.run_get(&firing.run_id).await?.filter(|run| run.status != "success") {
            items.push(format!(
                "<li class=\"attention-deployment\"><a href=\"/console/t/{t}/deployments/{name}\">Deployment {shown}: its last firing ended {status}</a></li>",
                name = urlencode(&row.name),
                shown = escape(&row.name),
                status = escape(&run.status),
            ));
        }
    }
    let near = |used: f64, limit: f64| limit > 0.0 && used >= limit * NEAR;
    if near(stored_bytes as f64, quotas.max_stored_run_bytes as f64) {
        items.push(format!(
            "<li id=\"attention-bytes\">Stored Run bytes at {:.0} % of the quota</li>",
            100.0 * stored_bytes as f64 / quotas.max_stored_run_bytes as f64
        ));
    }
    if near(deployments as f64, f64::from(quotas.max_deployments)) {
        items.push(format!(
            "<li id=\"attention-deployments\">{deployments} of {} deployments allowed</li>",
            quotas.max_deployments
        ));
    }
    Ok(if items.is_empty() {
        "<section aria-labelledby=\"attention\" class=\"attention\"><h2 id=\"attention\">Needs attention</h2><p id=\"attention-none\">Nothing needs attention.</p></section>".to_owned()
    } else {
        format!(
            "<section aria-labelledby=\"attention\" class=\"attention\"><h2 id=\"attention\">Needs attention</h2><ul>{}</ul></section>",
            items.join("")
        )
    })
}

/// `GET /console/t/{tenant}/languages`: each Language served, what it
/// declares, its lint findings with their fixes, and its uploads.
pub(super) async fn languages(State(state): State<AdminState>, page: TenantPage) -> Response {
    let (tenant, live) = (page.tenant.as_str(), &page.live);
    let uploads = match state.platform.store().languages(Scope::Tenant(tenant), false).await {
        Ok(rows) => rows,
        Err(error) => return page.failed(&state, &error),
    };
    let mut body = String::new();
    let mut slots = live.languages();
    slots.sort_by(|a, b| a.entry.name.cmp(&b.entry.name));
    for slot in &slots {
        let d = slot.description();
        let findings = lint(d);
        let mut lint_rows = String::new();
        for finding in &findings {
            let severity = serde_json::to_value(finding.severity).map(|v| short(&v)).unwrap_or_default();
            lint_rows.push_str(&format!(
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                escape(&severity),
                escape(finding.rule),
                escape(&finding.message),
                escape(&finding.fix)
            ));
        }
        let lint_table = if findings.is_empty() {
            "<p>The conformance lint finds nothing.</p>".to_owned()
        } else {
            format!(
                "<div class=\"scroll\"><table><caption>Lint findings</caption><thead><tr><th scope=\"col\">Severity</th><th scope=\"col\">Rule</th><th scope=\"col\">Finding</th><th scope=\"col\">Fix</th></tr></thead><tbody>{lint_rows}</tbody></table></div>"
            )
        };
        let mut history = String::new();
        for upload in uploads.iter().filter(|u| u.name == slot.entry.name) {
            history.push_str(&format!(
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&upload.sha256[..upload.sha256.len().min(16)]),
                escape(&upload.uploaded_by),
                escape(&rfc3339(upload.created_at)),
                if upload.sha256 == slot.component.sha256() { "served" } else { "kept" }
            ));
        }
        let history = if history.is_empty() {
            "<p>Bundled with the platform (no upload).</p>".to_owned()
        } else {
            format!(
                "<div class=\"scroll\"><table><caption>Uploads</caption><thead><tr><th scope=\"col\">Component</th><th scope=\"col\">By</th><th scope=\"col\">When</th><th scope=\"col\">State</th></tr></thead><tbody>{history}</tbody></table></div>"
            )
        };
        let statuses: Vec<&str> = d.run_statuses.iter().map(|s| s.status.as_str()).collect();
        body.push_str(&format!(
            "<section class=\"card\" aria-labelledby=\"lang-{id}\"><h2 id=\"lang-{id}\">{name}: {title}</h2><dl class=\"facts\">\
             <dt>Component</dt><dd><code>{sha}</code></dd><dt>Execution</dt><dd>{execution}</dd><dt>Highest trace level</dt><dd>{trace}</dd>\
             <dt>Guides</dt><dd>{guides}</dd><dt>Diagnostic codes</dt><dd>{codes}</dd><dt>Run statuses</dt><dd>{statuses}</dd>\
             <dt>Tools</dt><dd>{tools}</dd></dl>{lint_table}{history}</section>",
            id = urlencode(&slot.entry.name),
            name = escape(&slot.entry.name),
            title = escape(&d.title),
            sha = escape(&slot.component.sha256()[..16.min(slot.component.sha256().len())]),
            execution = escape(&short(&serde_json::to_value(d.execution).unwrap_or_default())),
            trace = escape(d.trace_ceiling.as_str()),
            guides = d.guides.len(),
            codes = d.diagnostic_codes.len(),
            statuses = escape(&statuses.join(", ")),
            tools = escape(
                &[Some(&slot.exposure.loop_tools.validate), slot.exposure.loop_tools.execute.as_ref(), slot.exposure.loop_tools.trace.as_ref()]
                    .into_iter()
                    .flatten()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if slots.is_empty() {
        body.push_str("<p>This tenant serves no Language.</p>");
    }
    page.page(&state, "Languages", &body, &[])
}

/// A binding's URL as a page may show it: without its user and password
/// and with its query cut (either may hold a credential, as header values
/// may), and nothing of a URL that does not read.
fn shown_url(url: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return "(a URL that does not read)".to_owned();
    };
    let hidden = !parsed.username().is_empty() || parsed.password().is_some();
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    let query = parsed.query().is_some_and(|q| !q.is_empty());
    parsed.set_query(None);
    parsed.set_fragment(None);
    let mut shown = parsed.to_string();
    if query {
        shown.push_str("?…");
    }
    if hidden {
        shown.push_str(" (credentials hidden)");
    }
    shown
}

/// `GET /console/t/{tenant}/catalog`: every entry with its kind, risk,
/// visibility scopes and binding (header names only: values may hold
/// secrets).
pub(super) async fn catalog(State(state): State<AdminState>, page: TenantPage) -> Response {
    let live = &page.live;
    let rows = live.with_catalog(|catalog| {
        let mut rows = String::new();
        let mut count = 0usize;
        for stored in catalog.all() {
            count += 1;
            let entry = &stored.entry;
            let hints = &entry.risk_hints;
            let binding = stored.binding.as_ref().map_or_else(String::new, |binding| {
                let names: Vec<&str> = binding.headers.keys().map(String::as_str).collect();
                format!(
                    "{}{}",
                    shown_url(&binding.url),
                    if names.is_empty() { String::new() } else { format!(" (headers: {})", names.join(", ")) }
                )
            });
            rows.push_str(&format!(
                "<tr><th scope=\"row\"><code>{}</code></th><td>{}</td><td>{}</td><td class=\"pv-risk pv-risk-{}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&entry.id),
                escape(&entry.kind),
                escape(entry.description.as_deref().unwrap_or(&entry.name)),
                escape(&entry.risk),
                escape(&entry.risk),
                escape(
                    &[("read-only", hints.read_only), ("destructive", hints.destructive), ("open world", hints.open_world)]
                        .iter()
                        .filter(|(_, on)| *on)
                        .map(|(name, _)| *name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                escape(&if stored.visibility.is_empty() { "everyone".to_owned() } else { stored.visibility.join(", ") }),
                escape(&binding),
            ));
        }
        (rows, count)
    });
    let body = format!(
        "<div class=\"scroll\"><table id=\"catalog-table\"><caption>{} entries</caption><thead><tr><th scope=\"col\">Entry</th><th scope=\"col\">Kind</th><th scope=\"col\">Description</th><th scope=\"col\">Risk</th><th scope=\"col\">Hints</th><th scope=\"col\">Visible to scopes</th><th scope=\"col\">Binding</th></tr></thead><tbody>{}</tbody></table></div>",
        rows.1, rows.0
    );
    page.page(&state, "Catalog", &body, &[])
}

/// `GET /console/t/{tenant}/data-sources`: each attached database with its
/// last catalog refresh.
pub(super) async fn data_sources(State(state): State<AdminState>, page: TenantPage) -> Response {
    let live = &page.live;
    let mut rows = String::new();
    let sources = live.data_sources();
    for source in &sources {
        let described = source.describe();
        rows.push_str(&format!(
            "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
            escape(&source.name),
            escape(&short(&described["spec"]["language"])),
            escape(&short(&described["target"])),
            escape(&serde_json::to_string_pretty(&described["last_refresh"]).unwrap_or_default()),
        ));
    }
    let body = if sources.is_empty() {
        "<p>No data source is attached to this tenant.</p>".to_owned()
    } else {
        format!(
            "<div class=\"scroll\"><table><caption>{} data sources</caption><thead><tr><th scope=\"col\">Name</th><th scope=\"col\">Language</th><th scope=\"col\">Target</th><th scope=\"col\">Last refresh</th></tr></thead><tbody>{rows}</tbody></table></div>",
            sources.len()
        )
    };
    page.page(&state, "Data sources", &body, &[])
}

/// `GET /console/t/{tenant}/audit`: the tenant's audit records, newest
/// first (an operator's view of one tenant shows that tenant's too).
pub(super) async fn audit(State(state): State<AdminState>, page: TenantPage) -> Response {
    let tenant = page.tenant.as_str();
    let records = match state.platform.store().audit_of_tenant(tenant, 200).await {
        Ok(rows) => rows,
        Err(error) => return page.failed(&state, &error),
    };
    let mut rows = String::new();
    let count = records.len();
    for record in &records {
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td><code class=\"detail\">{}</code></td></tr>",
            escape(&rfc3339(record.at)),
            escape(&record.actor),
            escape(&record.action),
            escape(&record.target),
            escape(&record.detail),
        ));
    }
    let body = format!(
        "<div class=\"scroll\"><table id=\"audit-table\"><caption>The latest {count} records</caption><thead><tr><th scope=\"col\">When</th><th scope=\"col\">Who</th><th scope=\"col\">Action</th><th scope=\"col\">Target</th><th scope=\"col\">Detail</th></tr></thead><tbody>{rows}</tbody></table></div>"
    );
    page.page(&state, "Audit log", &body, &[])
}

#[cfg(test)]
mod tests {
    use super::shown_url;

    #[test]
    fn a_binding_url_shows_no_credential() {
        let shown = shown_url("http://user:SECRET@example.test:8080/orders/flag?api_key=KEY&x=1#frag");
        assert_eq!(shown, "http://example.test:8080/orders/flag?… (credentials hidden)");
        assert_eq!(shown_url("https://example.test/a"), "https://example.test/a");
        assert_eq!(shown_url("not a url ?token=x"), "(a URL that does not read)");
    }
}
