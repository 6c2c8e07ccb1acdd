//! What each tenant uses, per UTC day (docs/architecture.md, "Usage per
//! tenant"): every Run that ends adds its kind, outcome, invocations,
//! fuel, wall time and stored bytes here, and to the usage counters of
//! the metrics. The additions wait in memory, summed by (tenant, day,
//! kind, outcome), and go to the store together ([`Usage::flush`]) every
//! [`FLUSH_EVERY`], when the usage is read, and once more at shutdown, so
//! a Run's answer never waits on a usage write. A failed flush keeps the
//! figures for the next one; a process killed outright loses at most the
//! last `FLUSH_EVERY` of them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use pilotage_store::{Store, StoreError, UsageRow};
use pilotage_telemetry::metrics::{Metrics, RunUse};
use serde_json::{Value, json};

/// How often the figures waiting in memory go to the store.
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// The kind of a Run, as usage counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UsageKind {
    /// An immediate Run (an execute, or an MCP task's Run).
    Immediate,
    /// A test run (Part II §6.5.7).
    Test,
    /// A deploy: the Run that installs a program.
    Deploy,
    /// A deployment's firing.
    Firing,
}

impl UsageKind {
    /// Its name in usage figures and metrics.
    pub fn as_str(self) -> &'static str {
        pilotage_telemetry::metrics::USAGE_KINDS[self as usize]
    }
}

/// What one Run used.
#[derive(Clone, Debug)]
pub struct RunUsage<'a> {
    /// Its kind.
    pub kind: UsageKind,
    /// Its outcome status.
    pub outcome: &'a str,
    /// Invocations it made.
    pub invocations: u64,
    /// Fuel it used.
    pub fuel: u64,
    /// Its wall time.
    pub wall_time: Duration,
    /// Bytes of its stored record (0 when not stored).
    pub stored_bytes: u64,
}

type Key = (String, String, UsageKind, String);

/// The figures not yet in the store, summed by (tenant, day, kind,
/// outcome).
#[derive(Debug, Default)]
pub struct Usage {
    pending: Mutex<HashMap<Key, [i64; 5]>>,
}

impl Usage {
    /// Adds `run`, which ended at `at_ms` (the platform's clock), to
    /// `tenant`'s figures and to the usage counters of `metrics`.
    pub fn record(&self, metrics: &Metrics, tenant: &str, at_ms: i64, run: &RunUsage<'_>) {
        let wall_ms = i64::try_from(run.wall_time.as_millis()).unwrap_or(i64::MAX);
        let added = [1, saturating(run.invocations), saturating(run.fuel), wall_ms, saturating(run.stored_bytes)];
        let key = (tenant.to_owned(), day_of(at_ms), run.kind, run.outcome.to_owned());
        self.add(key, added);
        metrics.tenant_usage(
            tenant,
            &RunUse {
                kind: run.kind as usize,
                invocations: run.invocations,
                fuel: run.fuel,
                wall_time: run.wall_time,
                stored_bytes: run.stored_bytes,
            },
        );
    }

    fn add(&self, key: Key, added: [i64; 5]) {
        let mut pending = self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let sums = pending.entry(key).or_default();
        for (sum, more) in sums.iter_mut().zip(added) {
            *sum = sum.saturating_add(more);
        }
    }

    /// Writes the waiting figures to `store` in one transaction; returns
    /// how many rows it added to.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails; the figures then wait for the
    /// next flush, none lost.
    pub async fn flush(&self, store: &Store) -> Result<usize, StoreError> {
        let taken = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        if taken.is_empty() {
            return Ok(0);
        }
        let rows: Vec<UsageRow> = taken
            .iter()
            .map(|((tenant, day, kind, outcome), [runs, invocations, fuel, wall_time_ms, stored_bytes])| UsageRow {
                tenant: tenant.clone(),
                day: day.clone(),
                kind: kind.as_str().to_owned(),
                outcome: outcome.clone(),
                runs: *runs,
                invocations: *invocations,
                fuel: *fuel,
                wall_time_ms: *wall_time_ms,
                stored_bytes: *stored_bytes,
            })
            .collect();
        match store.usage_add(&rows).await {
            Ok(()) => Ok(rows.len()),
            Err(error) => {
                for (key, sums) in taken {
                    self.add(key, sums);
                }
                Err(error)
            }
        }
    }
}

fn saturating(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The UTC day of `at_ms`, `YYYY-MM-DD`.
pub fn day_of(at_ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(at_ms).unwrap_or_default().format("%Y-%m-%d").to_string()
}

/// The sums of `rows`: every measure, Runs by kind and by outcome, and
/// `firings` (the Runs of kind `firing`).
pub fn totals(rows: &[UsageRow]) -> Value {
    let mut by_kind: BTreeMap<&str, i64> = BTreeMap::new();
    let mut by_outcome: BTreeMap<&str, i64> = BTreeMap::new();
    let sum = |measure: fn(&UsageRow) -> i64| rows.iter().map(measure).fold(0_i64, i64::saturating_add);
    for row in rows {
        *by_kind.entry(&row.kind).or_default() += row.runs;
        *by_outcome.entry(&row.outcome).or_default() += row.runs;
    }
    json!({"runs": sum(|r| r.runs), "firings": by_kind.get("firing").copied().unwrap_or(0),
           "invocations": sum(|r| r.invocations), "fuel": sum(|r| r.fuel), "wall_time_ms": sum(|r| r.wall_time_ms),
           "stored_bytes": sum(|r| r.stored_bytes), "runs_by_kind": by_kind, "runs_by_outcome": by_outcome})
}

/// `rows` as CSV (RFC 4180): a header line, then one line per row.
pub fn csv_of(rows: &[UsageRow]) -> String {
    let mut text = String::from("tenant,day,kind,outcome,runs,invocations,fuel,wall_time_ms,stored_bytes\r\n");
    for row in rows {
        let fields = [
            field(&row.tenant),
            field(&row.day),
            field(&row.kind),
            field(&row.outcome),
            row.runs.to_string(),
            row.invocations.to_string(),
            row.fuel.to_string(),
            row.wall_time_ms.to_string(),
            row.stored_bytes.to_string(),
        ];
        text.push_str(&fields.join(","));
        text.push_str("\r\n");
    }
    text
}

/// One CSV field: quoted when it holds a comma, a quote or a line break.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\r', '\n']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_one_tenant_day_kind_and_outcome_are_summed() {
        let usage = Usage::default();
        let metrics = Metrics::new().unwrap();
        let run = |outcome, fuel| RunUsage {
            kind: UsageKind::Immediate,
            outcome,
            invocations: 3,
            fuel,
            wall_time: Duration::from_millis(20),
            stored_bytes: 0,
        };
        // 2026-12-07 14:41 UTC twice, then the next day.
        usage.record(&metrics, "acme", 1_796_654_460_000, &run("success", 10));
        usage.record(&metrics, "acme", 1_796_654_460_000, &run("success", 5));
        usage.record(&metrics, "acme", 1_796_654_460_000 + 86_400_000, &run("error", 1));
        let pending = usage.pending.lock().unwrap();
        let key =
            |day: &str, outcome: &str| ("acme".to_owned(), day.to_owned(), UsageKind::Immediate, outcome.to_owned());
        assert_eq!(pending[&key("2026-12-07", "success")], [2, 6, 15, 40, 0]);
        assert_eq!(pending[&key("2026-12-08", "error")], [1, 3, 1, 20, 0]);
    }

    #[test]
    fn csv_quotes_what_needs_it_and_totals_add_up() {
        let row = |kind: &str, outcome: &str, runs| UsageRow {
            tenant: "acme".into(),
            day: "2026-12-07".into(),
            kind: kind.into(),
            outcome: outcome.into(),
            runs,
            invocations: 2 * runs,
            fuel: 100,
            wall_time_ms: 7,
            stored_bytes: 0,
        };
        let rows = [row("immediate", "success", 3), row("firing", "a,\"b\"", 1)];
        let csv = csv_of(&rows);
        assert_eq!(csv.lines().nth(2), Some("acme,2026-12-07,firing,\"a,\"\"b\"\"\",1,2,100,7,0"));
        let totals = totals(&rows);
        assert_eq!((totals["runs"].clone(), totals["firings"].clone()), (json!(4), json!(1)));
        assert_eq!(totals["invocations"], 8);
        assert_eq!(totals["runs_by_kind"], json!({"firing": 1, "immediate": 3}));
    }
}
