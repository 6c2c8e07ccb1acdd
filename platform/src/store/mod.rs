//! Durable state over sqlx: SQLite (the embedded default, one file) or
//! PostgreSQL (many replicas). The only module that knows SQL.
//!
//! Tables (`migrations/sqlite`, `migrations/postgres`): `runs` (run
//! records at the recorded trace level), `idempotency_keys` (claimed
//! atomically by conditional insert, each with its Run, owner and lease),
//! `promoted_programs` (immutable
//! bodies and their baselines), `tenants`, `languages` (versions, naming
//! their component by SHA-256), `components` (each component's bytes once,
//! whoever uploaded them), `catalog_entries`, `secrets`, `data_sources`
//! (URLs sealed), `audit_log`, `run_bytes` (each tenant's stored run bytes,
//! kept by triggers on `runs` for the quota), `tenant_changes` and
//! `mcp_sessions` (what replicas on one PostgreSQL share, [`fleet`]).
//! Every row but a component's carries its tenant. Times are milliseconds since the Unix epoch.

mod deployments;
mod fleet;

pub use deployments::{DeploymentRow, FiringRow};
pub use fleet::{CHANGES_CHANNEL, ChangeRow, SessionRow};

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AnyPool, Row, SqlStr};

use crate::telemetry::metrics::{Metrics, StoreOperation};

/// Which database a store talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// An SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// Occurs when the database cannot be reached or a statement fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Occurs when the URL is neither `sqlite:` nor `postgres:`.
    #[error("unsupported database URL '{0}': use sqlite:PATH or postgres://…")]
    Url(String),
    /// Occurs when a statement or the connection fails.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// Occurs when migrations cannot be applied.
    #[error("migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Occurs when a stored value cannot be read back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// The platform's database.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// Where the latency of the operations on a request's path is
    /// recorded (`pilotage_store_operation_duration_seconds`), once
    /// [`Store::observed`].
    metrics: Option<Metrics>,
}

/// Records one operation's time into the store's metrics when dropped (at
/// the end of the operation, whichever way it ends).
struct OperationTimer<'a> {
    metrics: Option<&'a Metrics>,
    operation: StoreOperation,
    started: std::time::Instant,
}

impl Drop for OperationTimer<'_> {
    fn drop(&mut self) {
        if let Some(metrics) = self.metrics {
            metrics.store_operation(self.operation, self.started.elapsed());
        }
    }
}

/// One stored run record.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    /// The Run's id.
    pub run_id: String,
    /// Its tenant.
    pub tenant: String,
    /// The subject that ran it.
    pub subject: String,
    /// Its Language.
    pub language: String,
    /// Set iff the record lives only as long as this MCP session.
    pub session_id: Option<String>,
    /// `summary` or `full`.
    pub recorded_level: String,
    /// The record (JSON: outcome, output, trace).
    pub record: String,
    /// When it was recorded.
    pub created_at: i64,
    /// When it expires; `None` for session-bound records.
    pub expires_at: Option<i64>,
}

/// What claiming an idempotency key found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key was free and is now ours.
    Claimed,
    /// The key is held.
    Held(HeldClaim),
}

/// A held idempotency key (Part II §6.5.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldClaim {
    /// Hash of the runnable it was claimed for.
    pub runnable_hash: String,
    /// Hash of the input it was claimed for.
    pub input_hash: String,
    /// The recorded response, once the first Run finished (or was found
    /// interrupted).
    pub response: Option<String>,
    /// The Run that holds it; `None` for a claim made before leases.
    pub run_id: Option<String>,
    /// The instance id of the server process running it.
    pub owner: Option<String>,
    /// Until when its owner's lease holds (ms since the Unix epoch); `None`
    /// for a claim made before leases, which counts as expired.
    pub lease_expires_at: Option<i64>,
}

impl HeldClaim {
    /// Whether the Run is still unfinished and nobody renewed its lease in
    /// time: its process is presumed gone.
    pub fn lease_expired(&self, now_ms: i64) -> bool {
        self.response.is_none() && self.lease_expires_at.is_none_or(|lease| lease <= now_ms)
    }
}

/// A new idempotency claim: the key, what it is for, the Run, its owner
/// and the lease.
#[derive(Clone, Debug)]
pub struct NewClaim<'a> {
    /// The caller's tenant.
    pub tenant: &'a str,
    /// The caller.
    pub subject: &'a str,
    /// The idempotency key.
    pub key: &'a str,
    /// Hash of the runnable.
    pub runnable_hash: &'a str,
    /// Hash of the input and context.
    pub input_hash: &'a str,
    /// The Run this claim starts.
    pub run_id: &'a str,
    /// The instance id of this server process.
    pub owner: &'a str,
    /// Now, in ms since the Unix epoch.
    pub now_ms: i64,
    /// The end of the first lease.
    pub lease_expires_at: i64,
    /// The end of the deduplication window.
    pub expires_at: i64,
}

/// A stored promoted program.
#[derive(Clone, Debug, PartialEq)]
pub struct PromotedRow {
    /// Its tenant.
    pub tenant: String,
    /// The content-derived reference.
    pub program_ref: String,
    /// Its Language.
    pub language: String,
    /// The published catalog entry (JSON).
    pub entry: String,
    /// The immutable body (JSON).
    pub body: String,
    /// Load-bearing fields of every referenced entry at promotion (JSON).
    pub baseline: String,
    /// Who promoted it.
    pub promoter: String,
    /// When.
    pub created_at: i64,
}

fn migration(version: i64, description: &'static str, sql: &'static str) -> Migration {
    Migration::new(version, Cow::Borrowed(description), MigrationType::Simple, SqlStr::from_static(sql), false)
}

fn migrator(backend: Backend) -> Migrator {
    let migrations = match backend {
        Backend::Sqlite => vec![
            migration(
                1,
                "runs idempotency promotions",
                include_str!("../../../migrations/sqlite/0001_runs_idempotency_promotions.sql"),
            ),
            migration(
                2,
                "tenants languages catalog secrets audit",
                include_str!("../../../migrations/sqlite/0002_tenants_languages_catalog_secrets_audit.sql"),
            ),
            migration(3, "data sources", include_str!("../../../migrations/sqlite/0003_data_sources.sql")),
            migration(4, "idempotency leases", include_str!("../../../migrations/sqlite/0004_idempotency_leases.sql")),
            migration(5, "run bytes", include_str!("../../../migrations/sqlite/0005_run_bytes.sql")),
            migration(6, "components", include_str!("../../../migrations/sqlite/0006_components.sql")),
            migration(7, "fleet", include_str!("../../../migrations/sqlite/0007_fleet.sql")),
            migration(8, "deployments", include_str!("../../../migrations/sqlite/0008_deployments.sql")),
            migration(
                9,
                "firings by deployment",
                include_str!("../../../migrations/sqlite/0009_firings_by_deployment.sql"),
            ),
        ],
        Backend::Postgres => vec![
            migration(
                1,
                "runs idempotency promotions",
                include_str!("../../../migrations/postgres/0001_runs_idempotency_promotions.sql"),
            ),
            migration(
                2,
                "tenants languages catalog secrets audit",
                include_str!("../../../migrations/postgres/0002_tenants_languages_catalog_secrets_audit.sql"),
            ),
            migration(3, "data sources", include_str!("../../../migrations/postgres/0003_data_sources.sql")),
            migration(
                4,
                "idempotency leases",
                include_str!("../../../migrations/postgres/0004_idempotency_leases.sql"),
            ),
            migration(5, "run bytes", include_str!("../../../migrations/postgres/0005_run_bytes.sql")),
            migration(6, "components", include_str!("../../../migrations/postgres/0006_components.sql")),
            migration(7, "fleet", include_str!("../../../migrations/postgres/0007_fleet.sql")),
            migration(8, "deployments", include_str!("../../../migrations/postgres/0008_deployments.sql")),
            migration(
                9,
                "firings by deployment",
                include_str!("../../../migrations/postgres/0009_firings_by_deployment.sql"),
            ),
        ],
    };
    Migrator { migrations: Cow::Owned(migrations), ..Migrator::DEFAULT }
}

impl Store {
    /// Connects to `url` (`sqlite:PATH` creates the file and its folder;
    /// `postgres://…`).
    ///
    /// # Errors
    /// [`StoreError`] when the URL is unsupported or the database is
    /// unreachable.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(StoreError::Url(url.to_owned()));
        };
        let url = match backend {
            Backend::Sqlite => {
                let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
                let path = path.split('?').next().unwrap_or(path);
                if path != ":memory:"
                    && let Some(parent) = Path::new(path).parent()
                    && !parent.as_os_str().is_empty()
                {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| StoreError::Corrupt(format!("cannot create {}: {e}", parent.display())))?;
                }
                if url.contains('?') { url.to_owned() } else { format!("sqlite://{path}?mode=rwc") }
            }
            Backend::Postgres => url.to_owned(),
        };
        let pool = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite => 4,
                Backend::Postgres => 16,
            })
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |connection, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        // Many readers and one writer without "database is locked".
                        sqlx::query("PRAGMA journal_mode = WAL").execute(&mut *connection).await?;
                        sqlx::query("PRAGMA busy_timeout = 10000").execute(&mut *connection).await?;
                        sqlx::query("PRAGMA synchronous = NORMAL").execute(&mut *connection).await?;
                    }
                    Ok(())
                })
            })
            .connect(&url)
            .await?;
        Ok(Store { pool, backend, metrics: None })
    }

    /// This store, recording the latency of its request-path operations
    /// into `metrics`.
    pub fn observed(mut self, metrics: Metrics) -> Store {
        self.metrics = Some(metrics);
        self
    }

    fn timer(&self, operation: StoreOperation) -> OperationTimer<'_> {
        OperationTimer { metrics: self.metrics.as_ref(), operation, started: std::time::Instant::now() }
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Applies pending migrations.
    ///
    /// # Errors
    /// [`StoreError::Migrate`] when a migration fails.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        migrator(self.backend).run(&self.pool).await?;
        Ok(())
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> bool {
        let _timer = self.timer(StoreOperation::Ping);
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }

    /// Stores a run record; committed when this returns.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn run_insert(&self, row: &RunRow) -> Result<(), StoreError> {
        let _timer = self.timer(StoreOperation::RunInsert);
        sqlx::query(
            "INSERT INTO runs (run_id, tenant, subject, language, session_id, recorded_level, record, bytes, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
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
            "SELECT run_id, tenant, subject, language, session_id, recorded_level, record, created_at, expires_at FROM runs WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| run_from_row(&row)).transpose()
    }

    /// Run records of a tenant, newest first (operators).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn runs_of_tenant(&self, tenant: &str, limit: i64) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, tenant, subject, language, session_id, recorded_level, record, created_at, expires_at FROM runs \
             WHERE tenant = $1 ORDER BY created_at DESC LIMIT $2",
        )
        .bind(tenant)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(run_from_row).collect()
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

    /// Deletes expired records and idempotency keys.
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
        Ok(runs + keys)
    }

    /// How many run records exist (tests and metrics).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn runs_count(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM runs").fetch_one(&self.pool).await?;
        Ok(row.try_get::<i64, _>("n")?)
    }

    /// Claims an idempotency key atomically (a conditional insert), or
    /// reports who holds it. A key past its deduplication window is
    /// released first.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn idempotency_claim(&self, claim: &NewClaim<'_>) -> Result<Claim, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyClaim);
        sqlx::query("DELETE FROM idempotency_keys WHERE tenant = $1 AND subject = $2 AND idempotency_key = $3 AND expires_at <= $4")
            .bind(claim.tenant)
            .bind(claim.subject)
            .bind(claim.key)
            .bind(claim.now_ms)
            .execute(&self.pool)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (tenant, subject, idempotency_key, runnable_hash, input_hash, state, response, created_at, expires_at, \
             run_id, owner, lease_expires_at) \
             VALUES ($1, $2, $3, $4, $5, 'running', NULL, $6, $7, $8, $9, $10) ON CONFLICT (tenant, subject, idempotency_key) DO NOTHING",
        )
        .bind(claim.tenant)
        .bind(claim.subject)
        .bind(claim.key)
        .bind(claim.runnable_hash)
        .bind(claim.input_hash)
        .bind(claim.now_ms)
        .bind(claim.expires_at)
        .bind(claim.run_id)
        .bind(claim.owner)
        .bind(claim.lease_expires_at)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if inserted == 1 {
            return Ok(Claim::Claimed);
        }
        Ok(self.idempotency_get(claim.tenant, claim.subject, claim.key).await?.map_or(Claim::Claimed, Claim::Held))
    }

    /// Who holds a key, if anyone.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn idempotency_get(
        &self,
        tenant: &str,
        subject: &str,
        key: &str,
    ) -> Result<Option<HeldClaim>, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyGet);
        let row = sqlx::query(
            "SELECT runnable_hash, input_hash, response, run_id, owner, lease_expires_at FROM idempotency_keys \
             WHERE tenant = $1 AND subject = $2 AND idempotency_key = $3",
        )
        .bind(tenant)
        .bind(subject)
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(HeldClaim {
                runnable_hash: row.try_get("runnable_hash")?,
                input_hash: row.try_get("input_hash")?,
                response: row.try_get::<Option<String>, _>("response")?,
                run_id: row.try_get::<Option<String>, _>("run_id")?,
                owner: row.try_get::<Option<String>, _>("owner")?,
                lease_expires_at: row.try_get::<Option<i64>, _>("lease_expires_at")?,
            })
        })
        .transpose()
    }

    /// Extends the lease of a running claim that `owner` holds for
    /// `run_id`. Returns false when the claim is no longer that Run's (it
    /// finished, or a retry took it over after its lease ran out).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn idempotency_renew(
        &self,
        tenant: &str,
        subject: &str,
        key: &str,
        run_id: &str,
        owner: &str,
        lease_expires_at: i64,
    ) -> Result<bool, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyRenew);
        let renewed = sqlx::query(
            "UPDATE idempotency_keys SET lease_expires_at = $1 WHERE tenant = $2 AND subject = $3 AND idempotency_key = $4 \
             AND state = 'running' AND run_id = $5 AND owner = $6",
        )
        .bind(lease_expires_at)
        .bind(tenant)
        .bind(subject)
        .bind(key)
        .bind(run_id)
        .bind(owner)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(renewed == 1)
    }

    /// Records the response of the Run `run_id` that holds a key. Returns
    /// false when the key is no longer that Run's (a retry took it over
    /// after its lease ran out, and recorded the interrupted outcome).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn idempotency_complete(
        &self,
        tenant: &str,
        subject: &str,
        key: &str,
        run_id: &str,
        response: &str,
    ) -> Result<bool, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyComplete);
        let completed = sqlx::query(
            "UPDATE idempotency_keys SET state = 'done', response = $1 WHERE tenant = $2 AND subject = $3 AND idempotency_key = $4 \
             AND state = 'running' AND run_id = $5",
        )
        .bind(response)
        .bind(tenant)
        .bind(subject)
        .bind(key)
        .bind(run_id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(completed == 1)
    }

    /// Takes over a running claim whose lease ran out, recording
    /// `response` (the interrupted outcome) as its result, in one
    /// conditional update: of two retries racing, exactly one gets true;
    /// a claim renewed, completed or taken over meanwhile gives false.
    /// `run_id` is the Run the caller found holding it (`None` for a claim
    /// made before leases).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    #[allow(clippy::too_many_arguments)]
    pub async fn idempotency_take_over(
        &self,
        tenant: &str,
        subject: &str,
        key: &str,
        run_id: Option<&str>,
        owner: &str,
        now_ms: i64,
        response: &str,
    ) -> Result<bool, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyTakeOver);
        let taken = sqlx::query(
            "UPDATE idempotency_keys SET state = 'done', response = $1, owner = $2 WHERE tenant = $3 AND subject = $4 \
             AND idempotency_key = $5 AND state = 'running' AND COALESCE(run_id, '') = $6 AND COALESCE(lease_expires_at, 0) <= $7",
        )
        .bind(response)
        .bind(owner)
        .bind(tenant)
        .bind(subject)
        .bind(key)
        .bind(run_id.unwrap_or(""))
        .bind(now_ms)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(taken == 1)
    }

    /// Releases a claimed key whose Run `run_id` never started (an internal
    /// failure before execution), so a retry can run.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn idempotency_release(
        &self,
        tenant: &str,
        subject: &str,
        key: &str,
        run_id: &str,
    ) -> Result<(), StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyRelease);
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE tenant = $1 AND subject = $2 AND idempotency_key = $3 AND state = 'running' AND run_id = $4",
        )
        .bind(tenant)
        .bind(subject)
        .bind(key)
        .bind(run_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Stores a promoted program; storing the same reference again is a
    /// no-op (references are content-derived).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn promoted_insert(&self, row: &PromotedRow) -> Result<(), StoreError> {
        let _timer = self.timer(StoreOperation::PromotedInsert);
        sqlx::query(
            "INSERT INTO promoted_programs (tenant, program_ref, language, entry, body, baseline, promoter, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant, program_ref) DO NOTHING",
        )
        .bind(&row.tenant)
        .bind(&row.program_ref)
        .bind(&row.language)
        .bind(&row.entry)
        .bind(&row.body)
        .bind(&row.baseline)
        .bind(&row.promoter)
        .bind(row.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every promoted program of a tenant.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn promoted_of_tenant(&self, tenant: &str) -> Result<Vec<PromotedRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, program_ref, language, entry, body, baseline, promoter, created_at FROM promoted_programs WHERE tenant = $1 ORDER BY program_ref",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(promoted_row).collect()
    }

    /// Every promoted program of every tenant, by tenant then reference
    /// (start-up reads them in one query, not one per tenant).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn promoted_all(&self) -> Result<Vec<PromotedRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, program_ref, language, entry, body, baseline, promoter, created_at FROM promoted_programs ORDER BY tenant, program_ref",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(promoted_row).collect()
    }
}

fn promoted_row(row: &AnyRow) -> Result<PromotedRow, StoreError> {
    Ok(PromotedRow {
        tenant: row.try_get("tenant")?,
        program_ref: row.try_get("program_ref")?,
        language: row.try_get("language")?,
        entry: row.try_get("entry")?,
        body: row.try_get("body")?,
        baseline: row.try_get("baseline")?,
        promoter: row.try_get("promoter")?,
        created_at: row.try_get("created_at")?,
    })
}

fn tenant_row(row: &AnyRow) -> Result<TenantRow, StoreError> {
    Ok(TenantRow {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        disabled: row.try_get::<i64, _>("disabled")? != 0,
        quotas: row.try_get("quotas")?,
        created_at: row.try_get("created_at")?,
    })
}

fn language_row(row: &AnyRow) -> Result<LanguageRow, StoreError> {
    Ok(LanguageRow {
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        sha256: row.try_get("sha256")?,
        lint: row.try_get("lint")?,
        active: row.try_get::<i64, _>("active")? != 0,
        uploaded_by: row.try_get("uploaded_by")?,
        created_at: row.try_get("created_at")?,
    })
}

fn data_source_row(row: &AnyRow) -> Result<DataSourceRow, StoreError> {
    Ok(DataSourceRow {
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        spec: row.try_get("spec")?,
        nonce: row.try_get("nonce")?,
        sealed_url: row.try_get("sealed_url")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// A stored tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantRow {
    /// Its id.
    pub id: String,
    /// Its display name.
    pub name: String,
    /// Whether it is disabled.
    pub disabled: bool,
    /// Its quotas (JSON).
    pub quotas: String,
    /// When it was created.
    pub created_at: i64,
}

/// A stored Language component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LanguageRow {
    /// Its tenant.
    pub tenant: String,
    /// The Language identifier.
    pub name: String,
    /// SHA-256 of the component (hex); its bytes are in `components`
    /// ([`Store::component_bytes`]), stored once whoever uploaded them.
    pub sha256: String,
    /// The lint findings at upload (JSON).
    pub lint: String,
    /// Whether this version is the one served.
    pub active: bool,
    /// Who uploaded it.
    pub uploaded_by: String,
    /// When.
    pub created_at: i64,
}

/// One stored data source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSourceRow {
    /// The tenant.
    pub tenant: String,
    /// The tenant's name for it.
    pub name: String,
    /// Its [`DataSourceSpec`](crate::datasource::attached::DataSourceSpec)
    /// as JSON, without the URL.
    pub spec: String,
    /// The nonce of the sealed URL.
    pub nonce: Vec<u8>,
    /// The URL, sealed by the platform's secret box.
    pub sealed_url: Vec<u8>,
    /// Last change, ms since the Unix epoch.
    pub updated_at: i64,
}

/// One audit record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AuditRow {
    /// When, ms since the epoch.
    pub at: i64,
    /// Who.
    pub actor: String,
    /// What (`tenant.create`, `language.upload`, …).
    pub action: String,
    /// On what.
    pub target: String,
    /// Details (JSON); never secret values.
    pub detail: String,
}

impl Store {
    /// Creates a tenant; `false` when it already exists.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn tenant_insert(&self, row: &TenantRow) -> Result<bool, StoreError> {
        let inserted = sqlx::query(
            "INSERT INTO tenants (id, name, disabled, quotas, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&row.id)
        .bind(&row.name)
        .bind(i64::from(row.disabled))
        .bind(&row.quotas)
        .bind(row.created_at)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(inserted == 1)
    }

    /// Every tenant.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn tenants(&self) -> Result<Vec<TenantRow>, StoreError> {
        let rows = sqlx::query("SELECT id, name, disabled, quotas, created_at FROM tenants ORDER BY id")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(tenant_row).collect()
    }

    /// Updates a tenant's name, state and quotas.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn tenant_update(&self, row: &TenantRow) -> Result<(), StoreError> {
        sqlx::query("UPDATE tenants SET name = $1, disabled = $2, quotas = $3 WHERE id = $4")
            .bind(&row.name)
            .bind(i64::from(row.disabled))
            .bind(&row.quotas)
            .bind(&row.id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Deletes a tenant and everything it owns, in one transaction.
    ///
    /// # Errors
    /// [`StoreError`] when a write fails (nothing is deleted then).
    pub async fn tenant_delete(&self, tenant: &str) -> Result<(), StoreError> {
        let mut transaction = self.pool.begin().await?;
        for statement in [
            "DELETE FROM runs WHERE tenant = $1",
            "DELETE FROM idempotency_keys WHERE tenant = $1",
            "DELETE FROM promoted_programs WHERE tenant = $1",
            "DELETE FROM languages WHERE tenant = $1",
            "DELETE FROM catalog_entries WHERE tenant = $1",
            "DELETE FROM secrets WHERE tenant = $1",
            "DELETE FROM data_sources WHERE tenant = $1",
            "DELETE FROM deployments WHERE tenant = $1",
            "DELETE FROM firings WHERE tenant = $1",
            "DELETE FROM deliveries WHERE tenant = $1",
            "DELETE FROM tenants WHERE id = $1",
        ] {
            sqlx::query(statement).bind(tenant).execute(&mut *transaction).await?;
        }
        // Components no other tenant serves or keeps go with it.
        sqlx::query(
            "DELETE FROM components WHERE NOT EXISTS (SELECT 1 FROM languages WHERE languages.sha256 = components.sha256)",
        )
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        Ok(())
    }

    /// Stores an uploaded version of a Language: its row, and its
    /// component `bytes` under `row.sha256` unless those bytes are already
    /// stored (for any tenant). A no-op when the tenant already has this
    /// version.
    ///
    /// `row.sha256` must be the SHA-256 of `bytes` (the caller loaded them).
    ///
    /// # Errors
    /// [`StoreError`] when a write fails (nothing is stored then).
    pub async fn language_insert(&self, row: &LanguageRow, bytes: &[u8]) -> Result<(), StoreError> {
        let insert_component = "INSERT INTO components (sha256, bytes) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING";
        let mut transaction = self.pool.begin().await?;
        sqlx::query(insert_component).bind(&row.sha256).bind(bytes.to_vec()).execute(&mut *transaction).await?;
        sqlx::query(
            "INSERT INTO languages (tenant, name, sha256, lint, active, uploaded_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant, name, sha256) DO NOTHING",
        )
        .bind(&row.tenant)
        .bind(&row.name)
        .bind(&row.sha256)
        .bind(&row.lint)
        .bind(i64::from(row.active))
        .bind(&row.uploaded_by)
        .bind(row.created_at)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        // Another replica deleting its last tenant using these bytes may
        // have removed them between our insert (a no-op on an existing
        // row) and our commit; our row now keeps them, so storing them
        // again cannot be undone by a later deletion.
        if self.component_bytes(&row.sha256).await?.is_none() {
            sqlx::query(insert_component).bind(&row.sha256).bind(bytes.to_vec()).execute(&self.pool).await?;
        }
        Ok(())
    }

    /// The bytes of a stored component, by its SHA-256 (hex).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn component_bytes(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query("SELECT bytes FROM components WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => Some(row.try_get("bytes")?),
            None => None,
        })
    }

    /// The served version of every tenant's Languages, by tenant then name
    /// (start-up reads them in one query, not one per tenant).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn languages_active(&self) -> Result<Vec<LanguageRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, name, sha256, lint, active, uploaded_by, created_at FROM languages WHERE active <> 0 ORDER BY tenant, name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(language_row).collect()
    }

    /// Makes one version of a Language the served one.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn language_activate(&self, tenant: &str, name: &str, sha256: &str) -> Result<bool, StoreError> {
        let mut transaction = self.pool.begin().await?;
        sqlx::query("UPDATE languages SET active = 0 WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .execute(&mut *transaction)
            .await?;
        let updated = sqlx::query("UPDATE languages SET active = 1 WHERE tenant = $1 AND name = $2 AND sha256 = $3")
            .bind(tenant)
            .bind(name)
            .bind(sha256)
            .execute(&mut *transaction)
            .await?
            .rows_affected();
        transaction.commit().await?;
        Ok(updated == 1)
    }

    /// Retires a Language: no version is served any more.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn language_retire(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        let updated = sqlx::query("UPDATE languages SET active = 0 WHERE tenant = $1 AND name = $2 AND active = 1")
            .bind(tenant)
            .bind(name)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(updated > 0)
    }

    /// Every stored version of a tenant's Languages.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn languages_of_tenant(&self, tenant: &str) -> Result<Vec<LanguageRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, name, sha256, lint, active, uploaded_by, created_at FROM languages WHERE tenant = $1 ORDER BY name, created_at",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(language_row).collect()
    }

    /// Inserts or replaces catalog entries (each a JSON `StoredEntry`).
    ///
    /// # Errors
    /// [`StoreError`] when a write fails (nothing is written then).
    pub async fn catalog_put(&self, tenant: &str, entries: &[(String, String)], now_ms: i64) -> Result<(), StoreError> {
        let mut transaction = self.pool.begin().await?;
        for (id, stored) in entries {
            sqlx::query(
                "INSERT INTO catalog_entries (tenant, id, stored, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (tenant, id) DO UPDATE SET stored = excluded.stored, updated_at = excluded.updated_at",
            )
            .bind(tenant)
            .bind(id)
            .bind(stored)
            .bind(now_ms)
            .execute(&mut *transaction)
            .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    /// Deletes catalog entries.
    ///
    /// # Errors
    /// [`StoreError`] when a write fails.
    pub async fn catalog_delete(&self, tenant: &str, ids: &[String]) -> Result<(), StoreError> {
        let mut transaction = self.pool.begin().await?;
        for id in ids {
            sqlx::query("DELETE FROM catalog_entries WHERE tenant = $1 AND id = $2")
                .bind(tenant)
                .bind(id)
                .execute(&mut *transaction)
                .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    /// Every stored catalog entry of a tenant (JSON `StoredEntry`s).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn catalog_of_tenant(&self, tenant: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT stored FROM catalog_entries WHERE tenant = $1 ORDER BY id")
            .bind(tenant)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|row| Ok(row.try_get::<String, _>("stored")?)).collect()
    }

    /// Every stored catalog entry of every tenant, as (tenant, JSON
    /// `StoredEntry`), by tenant then id (start-up reads them in one query).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn catalog_all(&self) -> Result<Vec<(String, String)>, StoreError> {
        let rows =
            sqlx::query("SELECT tenant, stored FROM catalog_entries ORDER BY tenant, id").fetch_all(&self.pool).await?;
        rows.iter().map(|row| Ok((row.try_get("tenant")?, row.try_get("stored")?))).collect()
    }

    /// Stores an encrypted secret.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn secret_put(
        &self,
        tenant: &str,
        name: &str,
        nonce: &[u8],
        ciphertext: &[u8],
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO secrets (tenant, name, nonce, ciphertext, updated_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (tenant, name) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
        )
        .bind(tenant)
        .bind(name)
        .bind(nonce.to_vec())
        .bind(ciphertext.to_vec())
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// One encrypted secret: (nonce, ciphertext).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn secret_get(&self, tenant: &str, name: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>, StoreError> {
        let row = sqlx::query("SELECT nonce, ciphertext FROM secrets WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| Ok((row.try_get("nonce")?, row.try_get("ciphertext")?))).transpose()
    }

    /// The names of a tenant's secrets.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn secret_names(&self, tenant: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT name FROM secrets WHERE tenant = $1 ORDER BY name")
            .bind(tenant)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|row| Ok(row.try_get::<String, _>("name")?)).collect()
    }

    /// Deletes a secret.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn secret_delete(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("DELETE FROM secrets WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .execute(&self.pool)
            .await?
            .rows_affected()
            > 0)
    }

    /// Stores a data source: its spec (JSON, without the URL) and its
    /// sealed URL.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn data_source_put(&self, row: &DataSourceRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO data_sources (tenant, name, spec, nonce, sealed_url, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (tenant, name) DO UPDATE SET spec = excluded.spec, nonce = excluded.nonce, \
             sealed_url = excluded.sealed_url, updated_at = excluded.updated_at",
        )
        .bind(&row.tenant)
        .bind(&row.name)
        .bind(&row.spec)
        .bind(row.nonce.clone())
        .bind(row.sealed_url.clone())
        .bind(row.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A tenant's data sources, by name.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn data_sources_of_tenant(&self, tenant: &str) -> Result<Vec<DataSourceRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, name, spec, nonce, sealed_url, updated_at FROM data_sources WHERE tenant = $1 ORDER BY name",
        )
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(data_source_row).collect()
    }

    /// Every data source of every tenant, by tenant then name (start-up).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn data_sources_all(&self) -> Result<Vec<DataSourceRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, name, spec, nonce, sealed_url, updated_at FROM data_sources ORDER BY tenant, name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(data_source_row).collect()
    }

    /// Deletes a data source.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn data_source_delete(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("DELETE FROM data_sources WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .execute(&self.pool)
            .await?
            .rows_affected()
            > 0)
    }

    /// Appends an audit record.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn audit(&self, row: &AuditRow) -> Result<(), StoreError> {
        let _timer = self.timer(StoreOperation::Audit);
        sqlx::query("INSERT INTO audit_log (at, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5)")
            .bind(row.at)
            .bind(&row.actor)
            .bind(&row.action)
            .bind(&row.target)
            .bind(&row.detail)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The latest audit records, newest first.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn audit_log(&self, limit: i64) -> Result<Vec<AuditRow>, StoreError> {
        let rows = sqlx::query("SELECT at, actor, action, target, detail FROM audit_log ORDER BY id DESC LIMIT $1")
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(AuditRow {
                    at: row.try_get("at")?,
                    actor: row.try_get("actor")?,
                    action: row.try_get("action")?,
                    target: row.try_get("target")?,
                    detail: row.try_get("detail")?,
                })
            })
            .collect()
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
            "SELECT run_id, tenant, subject, language, session_id, recorded_level, record, created_at, expires_at FROM runs \
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
}

fn run_from_row(row: &AnyRow) -> Result<RunRow, StoreError> {
    Ok(RunRow {
        run_id: row.try_get("run_id")?,
        tenant: row.try_get("tenant")?,
        subject: row.try_get("subject")?,
        language: row.try_get("language")?,
        session_id: row.try_get::<Option<String>, _>("session_id")?,
        recorded_level: row.try_get("recorded_level")?,
        record: row.try_get("record")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get::<Option<i64>, _>("expires_at")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every migration file is embedded, in order, for both backends: a
    /// file added to `migrations/` but not to [`migrator`] would leave its
    /// tables missing on every existing database.
    #[test]
    fn every_migration_file_is_embedded() {
        for (backend, folder) in [(Backend::Sqlite, "sqlite"), (Backend::Postgres, "postgres")] {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(folder);
            let mut files: Vec<String> = std::fs::read_dir(&dir)
                .expect("the migrations folder")
                .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".sql"))
                .collect();
            files.sort();
            let embedded = migrator(backend);
            assert_eq!(embedded.migrations.len(), files.len(), "{folder}: {files:?}");
            for (migration, file) in embedded.migrations.iter().zip(&files) {
                let text = std::fs::read_to_string(dir.join(file)).unwrap();
                assert_eq!(migration.sql.as_ref(), text, "{folder}/{file} is not embedded at its place");
                assert!(file.starts_with(&format!("{:04}_", migration.version)), "{file}");
            }
        }
    }
}
