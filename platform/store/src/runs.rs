//! Run records (Part II §6.6): stored at the recorded trace level,
//! bound to a session or expiring, swept when retention no longer covers
//! them; `run_bytes` keeps each tenant's stored bytes for the quota.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::store::{Store, StoreError};
use pilotage_telemetry::metrics::StoreOperation;

/// One stored run record.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    /// The Run's id.
    pub run_id: String,
    /// Its tenant.
    pub tenant: String,
    /// The issuer of the credential that ran it (its subject's issuer).
    pub issuer: String,
    /// The subject that ran it.
    pub subject: String,
    /// Its Language.
    pub language: String,
    /// Set iff the record lives only as long as this MCP session.
    pub session_id: Option<String>,
    /// `summary` or `full`.
    pub recorded_level: String,
    /// The record (JSON: outcome, output, trace, and the plan where the
    /// Run had one).
    pub record: String,
    /// The outcome's status (Part II §5.7), kept beside the record for
    /// listings; empty for a record whose status could not be read.
    pub status: String,
    /// When it was recorded.
    pub created_at: i64,
    /// When it expires; `None` for session-bound records.
    pub expires_at: Option<i64>,
}

/// What [`Store::runs_listed`] narrows a tenant's runs to; `None` is no
/// narrowing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFilter<'a> {
    /// Only this Language's.
    pub language: Option<&'a str>,
    /// Only Runs whose outcome has this status.
    pub status: Option<&'a str>,
    /// Only the Runs of this deployment's firings.
    pub deployment: Option<&'a str>,
    /// Only Runs stored at or after this time (ms since the epoch).
    pub since_ms: Option<i64>,
    /// Only Runs listed after this one in the newest-first order: the
    /// last row of the page before, as (`created_at`, `run_id`), so Runs
    /// stored in the same millisecond are neither skipped nor repeated.
    pub after: Option<(i64, &'a str)>,
    /// At most this many rows.
    pub limit: i64,
}

/// One run record as a listing shows it: everything but the record.
#[derive(Clone, Debug, PartialEq)]
pub struct RunListed {
    /// The Run's id.
    pub run_id: String,
    /// The issuer of the credential that ran it.
    pub issuer: String,
    /// The subject that ran it.
    pub subject: String,
    /// Its Language.
    pub language: String,
    /// Its outcome's status.
    pub status: String,
    /// `summary` or `full`.
    pub recorded_level: String,
    /// The record's size in bytes.
    pub bytes: i64,
    /// When it was recorded (ms since the epoch).
    pub created_at: i64,
    /// When it expires; `None` for session-bound records.
    pub expires_at: Option<i64>,
}

impl Store {
    /// Stores a run record; committed when this returns.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn run_insert(&self, row: &RunRow) -> Result<(), StoreError> {
        let _timer = self.timer(StoreOperation::RunInsert);
        sqlx::query(
            "INSERT INTO runs (run_id, tenant, subject, language, session_id, recorded_level, record, bytes, created_at, expires_at, status, \
             issuer) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&row.run_id)
        .bind(&row.tenant)
        .bind(&row.subject)
        .bind(&row.language)
        .bind(row.session_id.clone())
        .bind(&row.recorded_level)
        .bind(&row.record)
        .bind(row.record.len() as i64)
        .bind(row.created_at)
        .bind(row.expires_at)
        .bind(&row.status)
        .bind(&row.issuer)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// One run record by id, whoever owns it (callers check ownership).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn run_get(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        let _timer = self.timer(StoreOperation::RunGet);
        let row = sqlx::query(
            "SELECT run_id, tenant, issuer, subject, language, session_id, recorded_level, record, created_at, expires_at, status FROM runs WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| run_from_row(&row)).transpose()
    }

    /// Run records of a tenant with filters, newest first (operators).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn runs_filtered(
        &self,
        tenant: &str,
        subject: Option<&str>,
        language: Option<&str>,
        limit: i64,
    ) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, tenant, issuer, subject, language, session_id, recorded_level, record, created_at, expires_at, status FROM runs \
             WHERE tenant = $1 AND ($2 = '' OR subject = $3) AND ($4 = '' OR language = $5) ORDER BY created_at DESC LIMIT $6",
        )
        .bind(tenant)
        .bind(subject.unwrap_or(""))
        .bind(subject.unwrap_or(""))
        .bind(language.unwrap_or(""))
        .bind(language.unwrap_or(""))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(run_from_row).collect()
    }

    /// One page of a tenant's run records without the records themselves,
    /// newest first, narrowed by `filter` (the console's Run list).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn runs_listed(&self, tenant: &str, filter: &RunFilter<'_>) -> Result<Vec<RunListed>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, issuer, subject, language, status, recorded_level, bytes, created_at, expires_at FROM runs \
             WHERE tenant = $1 AND ($2 = '' OR language = $3) AND ($4 = '' OR status = $5) \
             AND ($6 = '' OR run_id IN (SELECT run_id FROM firings WHERE tenant = $7 AND deployment = $8)) \
             AND created_at >= $9 AND (created_at < $10 OR (created_at = $11 AND run_id < $12)) \
             ORDER BY created_at DESC, run_id DESC LIMIT $13",
        )
        .bind(tenant)
        .bind(filter.language.unwrap_or(""))
        .bind(filter.language.unwrap_or(""))
        .bind(filter.status.unwrap_or(""))
        .bind(filter.status.unwrap_or(""))
        .bind(filter.deployment.unwrap_or(""))
        .bind(tenant)
        .bind(filter.deployment.unwrap_or(""))
        .bind(filter.since_ms.unwrap_or(i64::MIN))
        .bind(filter.after.map_or(i64::MAX, |(at, _)| at))
        .bind(filter.after.map_or(i64::MAX, |(at, _)| at))
        .bind(filter.after.map_or("", |(_, run_id)| run_id))
        .bind(filter.limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(RunListed {
                    run_id: row.try_get("run_id")?,
                    issuer: row.try_get("issuer")?,
                    subject: row.try_get("subject")?,
                    language: row.try_get("language")?,
                    status: row.try_get::<Option<String>, _>("status")?.unwrap_or_default(),
                    recorded_level: row.try_get("recorded_level")?,
                    bytes: row.try_get("bytes")?,
                    created_at: row.try_get("created_at")?,
                    expires_at: row.try_get::<Option<i64>, _>("expires_at")?,
                })
            })
            .collect()
    }

    /// How many of a tenant's stored Runs have each outcome status, among
    /// those stored at or after `since_ms`, by status.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn runs_by_status(&self, tenant: &str, since_ms: i64) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT COALESCE(status, '') AS status, COUNT(*) AS n FROM runs WHERE tenant = $1 AND created_at >= $2 \
             GROUP BY COALESCE(status, '') ORDER BY 1",
        )
        .bind(tenant)
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|row| Ok((row.try_get("status")?, row.try_get("n")?))).collect()
    }

    /// Deletes the records bound to a session that ended.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn runs_delete_session(&self, session_id: &str) -> Result<u64, StoreError> {
        let _timer = self.timer(StoreOperation::RunsDeleteSession);
        Ok(sqlx::query("DELETE FROM runs WHERE session_id = $1")
            .bind(session_id)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    /// Deletes every session-bound record (sessions do not survive a
    /// restart of a single-node server).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn runs_delete_all_session_bound(&self) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM runs WHERE session_id IS NOT NULL").execute(&self.pool).await?.rows_affected())
    }

    /// Deletes expired records, idempotency keys, tasks and ended
    /// sign-ins.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn sweep(&self, now_ms: i64) -> Result<u64, StoreError> {
        let _timer = self.timer(StoreOperation::Sweep);
        let runs = sqlx::query("DELETE FROM runs WHERE expires_at IS NOT NULL AND expires_at <= $1")
            .bind(now_ms)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let keys = sqlx::query("DELETE FROM idempotency_keys WHERE expires_at <= $1")
            .bind(now_ms)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let tasks = self.tasks_sweep(now_ms).await?;
        let sign_ins = self.sign_ins_sweep(now_ms).await?;
        Ok(runs + keys + tasks + sign_ins)
    }

    /// How many run records exist (tests and metrics).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn runs_count(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM runs").fetch_one(&self.pool).await?;
        Ok(row.try_get::<i64, _>("n")?)
    }

    /// Bytes of stored run records of a tenant (for the quota): the total
    /// the `runs` triggers keep in `run_bytes` (migration 5), one key
    /// lookup whatever the number of runs stored; 0 for a tenant that never
    /// stored one.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn run_bytes_of_tenant(&self, tenant: &str) -> Result<i64, StoreError> {
        let _timer = self.timer(StoreOperation::RunBytesOfTenant);
        let row = sqlx::query("SELECT bytes FROM run_bytes WHERE tenant = $1")
            .bind(tenant)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => row.try_get::<i64, _>("bytes")?,
            None => 0,
        })
    }
}

fn run_from_row(row: &AnyRow) -> Result<RunRow, StoreError> {
    Ok(RunRow {
        run_id: row.try_get("run_id")?,
        tenant: row.try_get("tenant")?,
        issuer: row.try_get("issuer")?,
        subject: row.try_get("subject")?,
        language: row.try_get("language")?,
        session_id: row.try_get::<Option<String>, _>("session_id")?,
        recorded_level: row.try_get("recorded_level")?,
        record: row.try_get("record")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get::<Option<i64>, _>("expires_at")?,
        status: row.try_get::<Option<String>, _>("status")?.unwrap_or_default(),
    })
}
