//! `GET /console/t/{tenant}/usage`: what the tenant's Runs used per UTC
//! day (`crate::tenancy::usage`), over the last 7, 30 or 90 days: a bar
//! chart of Runs per day with its axes, the totals by kind and outcome,
//! and a table per day; `usage.csv` gives the same range as CSV. The
//! figures waiting in this replica's memory are stored first, as the
//! admin API's `usage` does.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::session::TenantPage;
use super::web::{escape, urlencode};
use crate::admin::AdminState;
use crate::tenancy::usage::{csv_of, day_of};
use pilotage_store::UsageRow;

/// The ranges offered, in days.
const RANGES: [u64; 3] = [7, 30, 90];

#[derive(Debug, Deserialize)]
pub(super) struct UsageQuery {
    #[serde(default)]
    days: Option<u64>,
}

/// The range asked for (one of [`RANGES`], else 30 days) as `(days, from,
/// to)`, `to` being today (UTC, the platform's clock).
fn range(state: &AdminState, query: &UsageQuery) -> (u64, String, String) {
    let days = query.days.filter(|d| RANGES.contains(d)).unwrap_or(30);
    let now = state.platform.clock().now_ms();
    let from = now - i64::try_from((days - 1) * 86_400_000).unwrap_or(0);
    (days, day_of(from), day_of(now))
}

async fn rows(state: &AdminState, tenant: &str, from: &str, to: &str) -> Result<Vec<UsageRow>, String> {
    if let Err(error) = state.platform.flush_usage().await {
        tracing::warn!(%error, "usage figures could not be stored before a read");
    }
    state.platform.store().usage_of(Some(tenant), from, to).await.map_err(|e| e.to_string())
}

/// One day's sums.
#[derive(Default)]
struct Day {
    runs: i64,
    by_kind: BTreeMap<String, i64>,
    invocations: i64,
    fuel: i64,
    wall_time_ms: i64,
    stored_bytes: i64,
}

pub(super) async fn usage(
    State(state): State<AdminState>,
    page: TenantPage,
    Query(query): Query<UsageQuery>,
) -> Response {
    let tenant = page.tenant.as_str();
    let (days, from, to) = range(&state, &query);
    let rows = match rows(&state, tenant, &from, &to).await {
        Ok(rows) => rows,
        Err(error) => return page.failed(&state, &error),
    };
    let mut by_day: BTreeMap<String, Day> = BTreeMap::new();
    let mut by_outcome: BTreeMap<&str, i64> = BTreeMap::new();
    for row in &rows {
        let day = by_day.entry(row.day.clone()).or_default();
        day.runs += row.runs;
        *day.by_kind.entry(row.kind.clone()).or_default() += row.runs;
        day.invocations += row.invocations;
        day.fuel += row.fuel;
        day.wall_time_ms += row.wall_time_ms;
        day.stored_bytes += row.stored_bytes;
        *by_outcome.entry(&row.outcome).or_default() += row.runs;
    }
    let t = urlencode(tenant);
    let ranges: Vec<String> = RANGES
        .iter()
        .map(|&d| {
            if d == days {
                format!("<strong aria-current=\"true\">{d} days</strong>")
            } else {
                format!("<a href=\"/console/t/{t}/usage?days={d}\">{d} days</a>")
            }
        })
        .collect();
    let every_day = days_between(&from, days);
    let chart = chart(&every_day, &by_day);
    let total_runs: i64 = by_day.values().map(|d| d.runs).sum();
    let outcomes: String = by_outcome
        .iter()
        .map(|(outcome, runs)| format!("<tr><th scope=\"row\">{}</th><td>{runs}</td></tr>", escape(outcome)))
        .collect();
    let mut table = String::new();
    for (day, sums) in by_day.iter().rev() {
        let kind = |name: &str| sums.by_kind.get(name).copied().unwrap_or(0);
        table.push_str(&format!(
            "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(day),
            sums.runs,
            kind("immediate"),
            kind("test"),
            kind("deploy"),
            kind("firing"),
            sums.invocations,
            sums.fuel,
            seconds(sums.wall_time_ms),
            bytes(sums.stored_bytes),
        ));
    }
    let body = if rows.is_empty() {
        format!(
            "<p class=\"ranges\">{}</p><p id=\"usage-none\">No Run of this tenant ended between {from} and {to} (UTC).</p>",
            ranges.join(" · ")
        )
    } else {
        format!(
            "<p class=\"ranges\">{ranges}</p>\
             <p>{total_runs} Runs from {from} to {to} (UTC days). Kept when the Runs themselves expire; \
             <a href=\"/console/t/{t}/usage.csv?days={days}\" download>CSV</a>.</p>\
             <figure class=\"chart usage-chart\"><figcaption>Runs per day</figcaption>{chart}</figure>\
             <div class=\"scroll\"><table id=\"usage-outcomes\"><caption>Runs by outcome</caption><thead><tr><th scope=\"col\">Outcome</th><th scope=\"col\">Runs</th></tr></thead><tbody>{outcomes}</tbody></table></div>\
             <div class=\"scroll\"><table id=\"usage-days\"><caption>Per day, newest first</caption><thead><tr><th scope=\"col\">Day</th><th scope=\"col\">Runs</th><th scope=\"col\">Immediate</th><th scope=\"col\">Test</th><th scope=\"col\">Deploy</th><th scope=\"col\">Firings</th><th scope=\"col\">Invocations</th><th scope=\"col\">Fuel</th><th scope=\"col\">Wall time</th><th scope=\"col\">Stored</th></tr></thead><tbody>{table}</tbody></table></div>",
            ranges = ranges.join(" · "),
        )
    };
    page.page(&state, &format!("Usage of {tenant}"), &body, &[])
}

/// `GET /console/t/{tenant}/usage.csv?days=`: the page's range as CSV.
pub(super) async fn usage_csv(
    State(state): State<AdminState>,
    page: TenantPage,
    Query(query): Query<UsageQuery>,
) -> Response {
    let (_, from, to) = range(&state, &query);
    match rows(&state, &page.tenant, &from, &to).await {
        Ok(rows) => {
            let mut response = csv_of(&rows).into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8"));
            if let Ok(value) =
                HeaderValue::from_str(&format!("attachment; filename=\"usage-{}-{from}-{to}.csv\"", page.tenant))
            {
                headers.insert(header::CONTENT_DISPOSITION, value);
            }
            response
        }
        Err(error) => page.failed(&state, &error),
    }
}

/// The `days` days from `from` on, `YYYY-MM-DD`.
fn days_between(from: &str, days: u64) -> Vec<String> {
    let Ok(first) = chrono::NaiveDate::parse_from_str(from, "%Y-%m-%d") else {
        return Vec::new();
    };
    (0..days).filter_map(|n| first.checked_add_days(chrono::Days::new(n))).map(|d| d.to_string()).collect()
}

/// Width and height of the chart's drawing, in its own units; margins for
/// the axes' labels.
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 200.0;
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 24.0;

/// A bar per day of Runs, with a y axis (0, half, the highest day) and an
/// x axis naming the first, middle and last day; each bar's `<title>`
/// gives its day and count.
fn chart(days: &[String], by_day: &BTreeMap<String, Day>) -> String {
    let highest = by_day.values().map(|d| d.runs).max().unwrap_or(0).max(1);
    let plot_width = WIDTH - LEFT - 4.0;
    let plot_height = HEIGHT - BOTTOM - 8.0;
    let slot = plot_width / days.len().max(1) as f64;
    let mut svg = format!(
        "<svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"100%\" role=\"img\" aria-label=\"Runs per day, the highest {highest}\">"
    );
    for (fraction, value) in [(0.0, 0), (0.5, highest / 2), (1.0, highest)] {
        let y = 8.0 + plot_height * (1.0 - fraction);
        svg.push_str(&format!(
            "<line class=\"chart-grid\" x1=\"{LEFT}\" x2=\"{WIDTH}\" y1=\"{y:.1}\" y2=\"{y:.1}\"></line>\
             <text class=\"chart-label\" x=\"{x:.1}\" y=\"{ty:.1}\" text-anchor=\"end\">{value}</text>",
            x = LEFT - 6.0,
            ty = y + 4.0
        ));
    }
    for (i, day) in days.iter().enumerate() {
        let runs = by_day.get(day).map_or(0, |d| d.runs);
        let height = plot_height * runs as f64 / highest as f64;
        let x = LEFT + slot * i as f64 + slot * 0.15;
        let y = 8.0 + plot_height - height;
        svg.push_str(&format!(
            "<rect class=\"chart-bar\" data-day=\"{day}\" data-runs=\"{runs}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{height:.1}\"><title>{day}: {runs} Runs</title></rect>",
            w = slot * 0.7
        ));
    }
    let labelled = [0, days.len() / 2, days.len().saturating_sub(1)];
    for (n, i) in labelled.iter().enumerate() {
        if let Some(day) = days.get(*i)
            && (n == 0 || *i != labelled[n - 1])
        {
            let x = LEFT + slot * (*i as f64 + 0.5);
            let anchor = match n {
                0 => "start",
                1 => "middle",
                _ => "end",
            };
            svg.push_str(&format!(
                "<text class=\"chart-label\" x=\"{x:.1}\" y=\"{y}\" text-anchor=\"{anchor}\">{day}</text>",
                y = HEIGHT - 6.0
            ));
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Milliseconds as seconds, one decimal.
fn seconds(ms: i64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// Bytes in B, KiB, MiB or GiB.
fn bytes(n: i64) -> String {
    let n = n as f64;
    match n {
        n if n >= (1 << 30) as f64 => format!("{:.1} GiB", n / (1u64 << 30) as f64),
        n if n >= (1 << 20) as f64 => format!("{:.1} MiB", n / (1u64 << 20) as f64),
        n if n >= 1024.0 => format!("{:.1} KiB", n / 1024.0),
        n => format!("{n} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_draws_every_day_and_labels_its_axes() {
        let days = days_between("2026-12-01", 7);
        assert_eq!(days.first().map(String::as_str), Some("2026-12-01"));
        assert_eq!(days.last().map(String::as_str), Some("2026-12-07"));
        let mut by_day = BTreeMap::new();
        by_day.insert("2026-12-03".to_owned(), Day { runs: 4, ..Day::default() });
        let svg = chart(&days, &by_day);
        assert_eq!(svg.matches("<rect").count(), 7);
        assert!(svg.contains("data-day=\"2026-12-03\" data-runs=\"4\""));
        assert!(svg.contains(">2026-12-01</text>") && svg.contains(">2026-12-07</text>"));
        assert!(svg.contains(">4</text>") && svg.contains(">2</text>"));
        assert_eq!((bytes(512), bytes(2048), seconds(1500)), ("512 B".into(), "2.0 KiB".into(), "1.5 s".into()));
    }
}
