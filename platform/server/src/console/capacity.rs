//! The node's capacity as the console shows it (issue: "Runs that wait
//! cost nothing"): each pool's calls in use, waiting and admitted
//! together, and who holds them. An operator sees every tenant holding or
//! waiting; a tenant's reader sees the pools' totals and its own calls,
//! never another tenant's name.

use super::web::escape;
use crate::tenancy::Platform;
use pilotage_engine::admission::{CapacityUsage, SATURATED_AT};

/// Tenants listed on the operator's page, the largest holders first.
const TENANTS_SHOWN: usize = 20;

fn percent(fraction: f64) -> String {
    format!("{:.0} %", (fraction * 100.0).min(999.0))
}

/// The pools' table: calls in use, waiting, admitted together, the
/// fullest of their resources, and whether the replica reports itself
/// saturated (`/readyz`).
fn pools_table(usage: &CapacityUsage) -> String {
    let mut rows = String::new();
    for pool in &usage.pools {
        rows.push_str(&format!(
            "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            pool.pool.as_str(),
            pool.calls,
            pool.waiting,
            pool.admitted_calls,
            percent(pool.saturation)
        ));
    }
    let state = if usage.saturated(SATURATED_AT) {
        "<p class=\"failed\" id=\"capacity-state\">Saturated: this replica's /readyz answers 503, so a balancer sends new sessions elsewhere.</p>"
    } else {
        "<p id=\"capacity-state\">Room to spare: this replica's /readyz answers ready.</p>"
    };
    format!(
        "{state}<div class=\"scroll\"><table id=\"capacity-table\"><thead><tr><th scope=\"col\">Pool</th><th scope=\"col\">Calls in use</th><th scope=\"col\">Waiting</th><th scope=\"col\">Admitted together</th><th scope=\"col\">Fullest resource</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )
}

/// The operator's section: the pools and the tenants holding or waiting
/// now, the largest first.
pub(super) fn operator_section(platform: &Platform) -> String {
    let usage = platform.engine().admission().usage();
    let mut tenants = usage.tenants.clone();
    tenants.sort_by(|a, b| (b.calls + b.waiting).cmp(&(a.calls + a.waiting)).then(a.tenant.cmp(&b.tenant)));
    let shown = tenants.len().min(TENANTS_SHOWN);
    let mut rows = String::new();
    for held in &tenants[..shown] {
        rows.push_str(&format!(
            "<tr><th scope=\"row\"><a href=\"/console/t/{}\">{}</a></th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            super::web::urlencode(&held.tenant),
            escape(&held.tenant),
            held.pool.as_str(),
            held.calls,
            held.waiting,
            percent(held.share)
        ));
    }
    let holders = if tenants.is_empty() {
        "<p id=\"capacity-tenants\">No tenant holds or waits for a place now.</p>".to_owned()
    } else {
        format!(
            "<div class=\"scroll\"><table id=\"capacity-tenants\"><caption>{shown} of {} tenants holding or waiting, the largest first</caption><thead><tr><th scope=\"col\">Tenant</th><th scope=\"col\">Pool</th><th scope=\"col\">Calls</th><th scope=\"col\">Waiting</th><th scope=\"col\">Share</th></tr></thead><tbody>{rows}</tbody></table></div>",
            tenants.len()
        )
    };
    format!(
        "<section aria-labelledby=\"capacity\"><h2 id=\"capacity\">Capacity of this replica</h2>{}{holders}</section>",
        pools_table(&usage)
    )
}

/// A tenant's section: the pools, and this tenant's own calls in each.
pub(super) fn tenant_section(platform: &Platform, tenant: &str) -> String {
    let usage = platform.engine().admission().usage();
    let mut own = String::new();
    for pool in &usage.pools {
        let held = usage.tenants.iter().find(|held| held.tenant == tenant && held.pool == pool.pool);
        own.push_str(&format!(
            "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td></tr>",
            pool.pool.as_str(),
            held.map_or(0, |held| held.calls),
            held.map_or(0, |held| held.waiting)
        ));
    }
    format!(
        "<section aria-labelledby=\"capacity\"><h2 id=\"capacity\">Capacity of this replica</h2>{}<div class=\"scroll\"><table id=\"capacity-own\"><caption>This tenant's calls now</caption><thead><tr><th scope=\"col\">Pool</th><th scope=\"col\">Calls</th><th scope=\"col\">Waiting</th></tr></thead><tbody>{own}</tbody></table></div></section>",
        pools_table(&usage)
    )
}
