//! Usage per tenant per UTC day (migration 17): what each tenant's Runs
//! used, by kind of Run and outcome status. Replicas add their counts
//! (`usage_add`, an upsert that sums), so rows from many replicas and many
//! flushes make one total; Runs expiring never touch them.

use sqlx::Row;

use crate::store::{Store, StoreError};

/// One tenant's usage on one day for one kind of Run and outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct UsageRow {
    /// The tenant.
    pub tenant: String,
    /// The UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// The kind of Run: `immediate`, `test`, `deploy` or `firing`.
    pub kind: String,
    /// The Run's outcome status (Part II §6.5.5's closed set and the
    /// Language's own).
    pub outcome: String,
    /// Runs counted.
    pub runs: i64,
    /// Invocations those Runs made.
    pub invocations: i64,
    /// Fuel they used (wasmtime fuel units).
    pub fuel: i64,
    /// Their wall time, in milliseconds.
    pub wall_time_ms: i64,
    /// Bytes of the Run records they stored (0 for unstored Runs).
    pub stored_bytes: i64,
}

impl Store {
    /// Adds `rows` to the stored usage, each summed into its (tenant, day,
    /// kind, outcome) row, in one transaction: all are added or none.
    ///
    /// # Errors
    /// [`StoreError`] when a write fails (nothing was added).
    pub async fn usage_add(&self, rows: &[UsageRow]) -> Result<(), StoreError> {
        let mut transaction = self.pool.begin().await?;
        for row in rows {
            sqlx::query(
                "INSERT INTO usage_days (tenant, day, kind, outcome, runs, invocations, fuel, wall_time_ms, stored_bytes) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                 ON CONFLICT (tenant, day, kind, outcome) DO UPDATE SET \
                 runs = usage_days.runs + excluded.runs, \
                 invocations = usage_days.invocations + excluded.invocations, \
                 fuel = usage_days.fuel + excluded.fuel, \
                 wall_time_ms = usage_days.wall_time_ms + excluded.wall_time_ms, \
                 stored_bytes = usage_days.stored_bytes + excluded.stored_bytes",
            )
            .bind(&row.tenant)
            .bind(&row.day)
            .bind(&row.kind)
            .bind(&row.outcome)
            .bind(row.runs)
            .bind(row.invocations)
            .bind(row.fuel)
            .bind(row.wall_time_ms)
            .bind(row.stored_bytes)
            .execute(&mut *transaction)
            .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    /// The usage of `tenant` (of every tenant when `None`) from the day
    /// `from` to the day `to` (both `YYYY-MM-DD`, both included), ordered
    /// by tenant, day, kind and outcome.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn usage_of(&self, tenant: Option<&str>, from: &str, to: &str) -> Result<Vec<UsageRow>, StoreError> {
        const COLUMNS: &str = "SELECT tenant, day, kind, outcome, runs, invocations, fuel, wall_time_ms, stored_bytes \
                               FROM usage_days";
        let rows = match tenant {
            Some(tenant) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "{COLUMNS} WHERE tenant = $1 AND day >= $2 AND day <= $3 ORDER BY tenant, day, kind, outcome"
                )))
                .bind(tenant)
                .bind(from)
                .bind(to)
                .fetch_all(&self.pool)
                .await?
            }
            None => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "{COLUMNS} WHERE day >= $1 AND day <= $2 ORDER BY tenant, day, kind, outcome"
                )))
                .bind(from)
                .bind(to)
                .fetch_all(&self.pool)
                .await?
            }
        };
        rows.iter()
            .map(|row| {
                Ok(UsageRow {
                    tenant: row.try_get("tenant")?,
                    day: row.try_get("day")?,
                    kind: row.try_get("kind")?,
                    outcome: row.try_get("outcome")?,
                    runs: row.try_get("runs")?,
                    invocations: row.try_get("invocations")?,
                    fuel: row.try_get("fuel")?,
                    wall_time_ms: row.try_get("wall_time_ms")?,
                    stored_bytes: row.try_get("stored_bytes")?,
                })
            })
            .collect()
    }
}
