//! The [`Store`] handle: a connection pool over SQLite or PostgreSQL (the
//! Any driver), its errors, its operation timer, and which tenants a read
//! covers ([`Scope`]). Each row family's queries live in a module of their
//! own (`runs`, `idempotency`, `tenants`, …) as `impl Store` blocks.

use std::path::Path;
use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;

use pilotage_telemetry::metrics::{Metrics, StoreOperation};

use crate::backend::Backend;
use crate::migrations::migrator;

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

impl StoreError {
    /// Whether the database could not be reached (the connection failed or
    /// was refused, the pool timed out waiting for one, the server is
    /// shutting down or not yet accepting connections): nothing was read or
    /// written, and the same request is likely to succeed once the database
    /// is back. A statement the database refused is not this.
    pub fn is_unreachable(&self) -> bool {
        match self {
            StoreError::Database(error) => match error {
                sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => true,
                // SQLSTATE class 08 (connection exception), 57P01
                // (admin_shutdown), 57P02 (crash_shutdown), 57P03
                // (cannot_connect_now).
                sqlx::Error::Database(database) => database
                    .code()
                    .is_some_and(|code| code.starts_with("08") || matches!(code.as_ref(), "57P01" | "57P02" | "57P03")),
                _ => false,
            },
            _ => false,
        }
    }
}

/// The platform's database.
#[derive(Clone, Debug)]
pub struct Store {
    pub(crate) pool: AnyPool,
    backend: Backend,
    /// Where the latency of the operations on a request's path is
    /// recorded (`pilotage_store_operation_duration_seconds`), once
    /// [`Store::observed`].
    metrics: Option<Metrics>,
}

/// Records one operation's time into the store's metrics when dropped (at
/// the end of the operation, whichever way it ends).
pub(crate) struct OperationTimer<'a> {
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

    pub(crate) fn timer(&self, operation: StoreOperation) -> OperationTimer<'_> {
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

    /// A write transaction holding the fleet-wide lock named `key` until it
    /// ends, so a quota's count and its claim inside it are one step for
    /// every replica: on SQLite the database's write lock, taken at
    /// `BEGIN IMMEDIATE`; on PostgreSQL a transaction-scoped advisory lock
    /// on the key's 64-bit hash (two keys that collide only wait for each
    /// other).
    ///
    /// # Errors
    /// [`StoreError::Database`] when the transaction or the lock fails.
    pub(crate) async fn serialized(&self, key: &str) -> Result<sqlx::Transaction<'static, sqlx::Any>, StoreError> {
        match self.backend {
            Backend::Sqlite => Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?),
            Backend::Postgres => {
                let mut transaction = self.pool.begin().await?;
                // The lock function returns `void`, which the Any driver
                // does not decode: count the one row instead.
                sqlx::query(
                    "SELECT COUNT(*) AS n FROM (SELECT pg_advisory_xact_lock(hashtextextended($1, 0))) AS held",
                )
                .bind(key)
                .fetch_one(&mut *transaction)
                .await?;
                Ok(transaction)
            }
        }
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> bool {
        let _timer = self.timer(StoreOperation::Ping);
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }
}

/// Which tenants a read covers: one, or all of them at once (start-up reads
/// each row family in one query, not one per tenant).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every tenant's rows, by tenant.
    Every,
    /// One tenant's rows.
    Tenant(&'a str),
}

impl<'a> Scope<'a> {
    /// `sql` narrowed to this scope, with the tenant bound: `{where}`
    /// becomes `WHERE <column> = $1` (after `filter` when one is given) for
    /// one tenant, or `WHERE <filter>` / nothing for every tenant.
    pub(crate) fn query(
        &self,
        sql: &str,
        column: &str,
        filter: Option<&str>,
    ) -> sqlx::query::Query<'a, sqlx::Any, sqlx::any::AnyArguments> {
        let condition = match (self, filter) {
            (Scope::Every, None) => String::new(),
            (Scope::Every, Some(filter)) => format!("WHERE {filter}"),
            (Scope::Tenant(_), None) => format!("WHERE {column} = $1"),
            (Scope::Tenant(_), Some(filter)) => format!("WHERE {filter} AND {column} = $1"),
        };
        let query = sqlx::query(sqlx::AssertSqlSafe(sql.replace("{where}", &condition)));
        match self {
            Scope::Every => query,
            Scope::Tenant(tenant) => query.bind(*tenant),
        }
    }
}
