//! A PostgreSQL data source: a bounded sqlx pool, and the blocking
//! [`DataSource`]/[`SqlSession`] the execution pipeline uses (Runs execute
//! on blocking threads, so the session drives sqlx futures with the
//! runtime [`Handle`] captured at construction).

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use serde_json::Value;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgConnectOptions, PgPool, PgPoolOptions, PgRow, PgSslMode, PgTypeInfo};

use crate::egress::Confinement;
use sqlx::{AssertSqlSafe, Either, Executor, Postgres, Row, SqlSafeStr, Statement, Transaction, TypeInfo, ValueRef};
use tokio::runtime::Handle;

use super::values::{decode, encode};
use super::{DataSourceError, database_message};
use pilotage_engine::effects::{DataSource, SqlError, SqlSession};
use pilotage_engine::host::{CommitError, SqlResult};

/// Where a data source connects and the bounds it enforces. Every bound
/// has a default ([`PostgresConfig::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresConfig {
    /// `postgres://user[:password]@host:port/database`. Credentials are
    /// never shown in messages.
    pub url: String,
    /// Schemas whose relations are visible (catalog), in order. They are
    /// not on a Run's `search_path` (`pg_catalog, pg_temp`): the Language
    /// sends every relation schema-qualified as validation resolved it.
    pub schemas: Vec<String>,
    /// When set, only these relations (`schema.relation`) are visible.
    pub relations: Option<Vec<String>>,
    /// Pool size. Default 4 connections.
    pub max_connections: u32,
    /// Bound on getting a connection (connecting included). Default 5 s;
    /// beyond it, [`DataSourceError::Unreachable`] or a failed `begin`.
    pub connect_timeout: Duration,
    /// `SET LOCAL statement_timeout` of every Run. Default 5 s; beyond it
    /// the statement fails and the Run's transaction rolls back. A
    /// statement gets less when its Run has less wall time left (see
    /// [`statement_timeout_for`]).
    pub statement_timeout: Duration,
    /// Rows kept per statement. Default 1000; further rows are counted in
    /// `rows_matched` and dropped (`truncated`).
    pub max_rows: usize,
    /// Bytes of JSON rows kept per statement. Default 256 KiB; the row that
    /// would cross it and every later row are dropped (`truncated`).
    pub max_bytes: usize,
}

impl PostgresConfig {
    /// A configuration with the default bounds.
    pub fn new(url: impl Into<String>, schemas: impl IntoIterator<Item = impl Into<String>>) -> PostgresConfig {
        PostgresConfig {
            url: url.into(),
            schemas: schemas.into_iter().map(Into::into).collect(),
            relations: None,
            max_connections: 4,
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(5),
            max_rows: 1000,
            max_bytes: 256 * 1024,
        }
    }
}

/// A PostgreSQL database as a data source. Cheap to clone.
#[derive(Clone)]
pub struct PostgresDataSource {
    pool: PgPool,
    handle: Handle,
    config: Arc<PostgresConfig>,
    target: Arc<str>,
    options: PgConnectOptions,
    confinement: Option<Confinement>,
    /// The last check that passed: the confinement's generation and when.
    checked: Arc<std::sync::Mutex<Option<(u64, Instant)>>>,
}

impl std::fmt::Debug for PostgresDataSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresDataSource").field("target", &self.target).finish_non_exhaustive()
    }
}

/// `"name"` with embedded quotes doubled.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The `search_path` of every Run's transaction: the built-in schema, then
/// the session's temporary schema, and no tenant schema.
///
/// Rationale (defence in depth behind the Language, which sends every
/// relation schema-qualified as validation resolved it): an unqualified
/// relation name must never reach a tenant schema, where `search_path`
/// could pick a relation the caller cannot see. Built-in functions,
/// operators and types live in `pg_catalog`, so they keep resolving, and
/// a tenant schema's functions or operators can no longer capture an
/// allow-listed call by overloading it. `pg_temp` is named last because
/// PostgreSQL searches the temporary schema *first* for relations and
/// types when the path does not name it; Runs create no temporary
/// objects, and last it could not shadow a built-in type if one existed.
pub const RUN_SEARCH_PATH: &str = "pg_catalog, pg_temp";

/// The `statement_timeout` of a statement starting at `now`: the
/// configured one, or the wall time its Run has left before `deadline`
/// when that is less (Part II §10.1: the Run's wall-time bound stops its
/// statements too). `None` when less than a millisecond is left (a
/// `statement_timeout` of 0 would mean no timeout at all).
pub fn statement_timeout_for(configured: Duration, deadline: Option<Instant>, now: Instant) -> Option<Duration> {
    let timeout = match deadline {
        Some(deadline) => configured.min(deadline.saturating_duration_since(now)),
        None => configured,
    };
    (timeout >= Duration::from_millis(1)).then_some(timeout)
}

/// How long a passed destination check stands while the tenant's egress
/// rules are unchanged.
const RECHECK_AFTER: Duration = Duration::from_secs(5);

/// Why a statement cannot start: its Run's wall time is used up.
const NO_TIME_LEFT: &str = "the Run's wall-time bound was reached before the statement could start";

impl PostgresDataSource {
    /// A data source for `config`, its pool bound to the runtime of
    /// `handle`. Connects lazily: an unreachable database shows at the
    /// first use ([`PostgresDataSource::check`] tests it at once).
    ///
    /// The [`DataSource`] methods are async and run on that runtime; a
    /// session dropped without an end rolls back there too.
    ///
    /// # Errors
    /// [`DataSourceError::Config`] when the URL does not parse or no
    /// schema is given.
    pub fn new(config: PostgresConfig, handle: Handle) -> Result<PostgresDataSource, DataSourceError> {
        if config.schemas.is_empty() {
            return Err(DataSourceError::Config("at least one schema must be visible".into()));
        }
        let options = PgConnectOptions::from_str(&config.url)
            .map_err(|error| DataSourceError::Config(format!("the URL does not parse: {error}")))?
            .application_name("pilotage");
        let target = format!(
            "{}:{}/{}",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("(default database)")
        );
        let pool = {
            let _guard = handle.enter();
            PgPoolOptions::new()
                .max_connections(config.max_connections.max(1))
                .acquire_timeout(config.connect_timeout)
                .idle_timeout(Duration::from_secs(60))
                .connect_lazy_with(options.clone())
        };
        Ok(PostgresDataSource {
            pool,
            handle,
            config: Arc::new(config),
            target: target.into(),
            options,
            confinement: None,
            checked: Arc::default(),
        })
    }

    /// The same source, its destination checked against a tenant's egress
    /// `confinement` before every transaction, check and introspection
    /// (`crate::egress`).
    #[must_use]
    pub fn confined(mut self, confinement: Confinement) -> PostgresDataSource {
        self.confinement = Some(confinement);
        self
    }

    /// Checks the destination against the confinement (resolving a name),
    /// and points the pool's new connections at the address just checked,
    /// so that a name re-resolved between check and connect cannot lead
    /// elsewhere. Under `sslmode=verify-full` the name stays (the server
    /// certificate is verified against it).
    ///
    /// # Errors
    /// [`DataSourceError::Refused`] when the confinement refuses it.
    pub async fn confine(&self) -> Result<(), DataSourceError> {
        let Some(confinement) = &self.confinement else { return Ok(()) };
        // A passed check stands for a few seconds while the rules are
        // unchanged: a Run's transaction then costs no name lookup (a slow
        // resolver would slow every Run), and a narrowed rule still applies
        // to the very next Run.
        let generation = confinement.generation();
        let fresh = |checked: &Option<(u64, Instant)>| {
            checked.is_some_and(|(at_generation, at)| at_generation == generation && at.elapsed() < RECHECK_AFTER)
        };
        if fresh(&self.checked.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(());
        }
        let host = match self.options.get_socket() {
            Some(socket) => socket.display().to_string(),
            None => self.options.get_host().to_owned(),
        };
        let addresses = confinement.resolve(&host, self.options.get_port()).await.map_err(DataSourceError::Refused)?;
        let named = host.parse::<std::net::IpAddr>().is_err();
        if named
            && !matches!(self.options.get_ssl_mode(), PgSslMode::VerifyFull)
            && let Some(address) = addresses.first()
        {
            self.pool.set_connect_options(self.options.clone().host(&address.ip().to_string()));
        }
        *self.checked.lock().unwrap_or_else(|p| p.into_inner()) = Some((generation, Instant::now()));
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &PostgresConfig {
        &self.config
    }

    /// The pool (for host-side statements such as introspection).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// `host:port/database`, without credentials.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// `error` classified for this source's target.
    pub(crate) fn error(&self, error: sqlx::Error) -> DataSourceError {
        DataSourceError::from_sqlx(&self.target, error)
    }

    /// Checks that the database answers, within the connect timeout.
    ///
    /// # Errors
    /// [`DataSourceError::Unreachable`] when it does not.
    pub async fn check(&self) -> Result<(), DataSourceError> {
        self.confine().await?;
        sqlx::query("SELECT 1").execute(&self.pool).await.map(drop).map_err(|e| self.error(e))
    }

    async fn open(
        &self,
        read_only: bool,
        timeout: Duration,
    ) -> Result<Transaction<'static, Postgres>, DataSourceError> {
        self.confine().await?;
        let begin = if read_only { "BEGIN READ ONLY" } else { "BEGIN" };
        let mut transaction = self.pool.begin_with(begin).await.map_err(|e| self.error(e))?;
        for setting in [
            format!("SET LOCAL statement_timeout = {}", timeout.as_millis().max(1)),
            format!("SET LOCAL search_path TO {RUN_SEARCH_PATH}"),
        ] {
            sqlx::query(AssertSqlSafe(setting)).execute(&mut *transaction).await.map_err(|e| self.error(e))?;
        }
        Ok(transaction)
    }
}

#[async_trait::async_trait]
impl DataSource for PostgresDataSource {
    async fn begin(&self, read_only: bool, deadline: Option<Instant>) -> Result<Box<dyn SqlSession>, SqlError> {
        let timeout = statement_timeout_for(self.config.statement_timeout, deadline, Instant::now())
            .ok_or_else(|| SqlError::Deadline(NO_TIME_LEFT.to_owned()))?;
        let transaction = match deadline {
            // Waiting for a connection counts against the Run too.
            Some(deadline) => {
                tokio::time::timeout_at(deadline.into(), self.open(read_only, timeout)).await.unwrap_or_else(|_| {
                    Err(DataSourceError::Database(
                        "the Run's wall-time bound was reached while waiting for a connection".into(),
                    ))
                })
            }
            None => self.open(read_only, timeout).await,
        }
        .map_err(|error| SqlError::Connection(error.to_string()))?;
        Ok(Box::new(PostgresSession {
            transaction: Some(transaction),
            handle: self.handle.clone(),
            config: self.config.clone(),
            deadline,
            timeout,
        }))
    }
}

/// One Run's transaction.
struct PostgresSession {
    transaction: Option<Transaction<'static, Postgres>>,
    handle: Handle,
    config: Arc<PostgresConfig>,
    /// When the Run's wall time runs out.
    deadline: Option<Instant>,
    /// The `statement_timeout` in effect in the transaction.
    timeout: Duration,
}

/// One bound parameter: its bytes in the binary format of the type
/// PostgreSQL inferred for it.
struct Param {
    type_info: PgTypeInfo,
    bytes: Option<Vec<u8>>,
}

impl sqlx::Type<Postgres> for Param {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_name("unknown")
    }
}

impl sqlx::Encode<'_, Postgres> for Param {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        match &self.bytes {
            Some(bytes) => {
                buf.extend_from_slice(bytes);
                Ok(IsNull::No)
            }
            None => Ok(IsNull::Yes),
        }
    }

    fn produces(&self) -> Option<PgTypeInfo> {
        Some(self.type_info.clone())
    }
}

fn sqlx_message(error: sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(database) => database_message(database.as_ref()),
        other => other.to_string(),
    }
}

/// PostgreSQL's `query_canceled`, which a `statement_timeout` raises.
const QUERY_CANCELED: &str = "57014";

/// Why one statement of a session failed.
#[derive(Debug)]
enum StatementFailure {
    /// The failure the Run records (the database's message, or why the
    /// statement was not sent).
    Failed(String),
    /// The statement timeout cancelled it while that timeout was the time
    /// the Run had left: the Run's wall-time bound stopped it.
    RunOutOfTime(String),
}

impl From<String> for StatementFailure {
    fn from(message: String) -> StatementFailure {
        StatementFailure::Failed(message)
    }
}

impl From<&str> for StatementFailure {
    fn from(message: &str) -> StatementFailure {
        StatementFailure::Failed(message.to_owned())
    }
}

/// A database error of a statement whose `statement_timeout` was
/// `by_run` the Run's time left: a cancellation then is the Run's bound
/// (PostgreSQL may fire its timer a little before the Run's own clock
/// says the time is up, so the clock alone does not tell).
fn statement_failure(error: sqlx::Error, by_run: bool) -> StatementFailure {
    let cancelled =
        matches!(&error, sqlx::Error::Database(database) if database.code().as_deref() == Some(QUERY_CANCELED));
    let message = sqlx_message(error);
    if cancelled && by_run { StatementFailure::RunOutOfTime(message) } else { StatementFailure::Failed(message) }
}

fn type_oid(type_info: &PgTypeInfo) -> u32 {
    type_info.oid().map_or(0, |oid| oid.0)
}

impl PostgresSession {
    /// Runs one statement; the failure is the message the Run records.
    async fn run(&mut self, statement: &str, params: &Value) -> Result<SqlResult, StatementFailure> {
        let started = Instant::now();
        let transaction = self.transaction.as_mut().ok_or("the transaction has ended")?;
        // The statement may take no longer than its Run has left.
        let timeout =
            statement_timeout_for(self.config.statement_timeout, self.deadline, started).ok_or(NO_TIME_LEFT)?;
        if timeout < self.timeout {
            // Rounded up: a timeout cut short of the Run's time left would
            // cancel the statement before the Run's bound is reached.
            let millis = timeout.as_micros().div_ceil(1000).max(1);
            let setting = format!("SET LOCAL statement_timeout = {millis}");
            sqlx::query(AssertSqlSafe(setting)).execute(&mut **transaction).await.map_err(sqlx_message)?;
            self.timeout = timeout;
        }
        let by_run = self.timeout < self.config.statement_timeout;
        let sql = AssertSqlSafe(statement.to_owned()).into_sql_str();
        // Preparing first tells the parameter types PostgreSQL infers, so
        // each JSON value is encoded for exactly that type.
        let prepared = (&mut **transaction).prepare(sql.clone()).await.map_err(sqlx_message)?;
        let types: Vec<PgTypeInfo> = match prepared.parameters() {
            Some(Either::Left(types)) => types.to_vec(),
            Some(Either::Right(count)) => vec![PgTypeInfo::with_name("unknown"); count],
            None => Vec::new(),
        };
        let values: &[Value] = match params {
            Value::Array(values) => values,
            Value::Null => &[],
            _ => return Err("parameters must be a JSON array".into()),
        };
        if values.len() != types.len() {
            return Err(format!("the statement takes {} parameters; {} were given", types.len(), values.len()).into());
        }
        let mut query = sqlx::query(sql);
        for (index, (type_info, value)) in types.iter().zip(values).enumerate() {
            let bytes = encode(type_oid(type_info), type_info.name(), value)
                .map_err(|error| format!("parameter ${}: {error}", index + 1))?;
            query = query.bind(Param { type_info: type_info.clone(), bytes });
        }
        let columns: Vec<(String, String)> = prepared
            .columns()
            .iter()
            .map(|column| {
                (sqlx::Column::name(column).to_owned(), sqlx::Column::type_info(column).name().to_lowercase())
            })
            .collect();
        let (max_rows, max_bytes) = (self.config.max_rows, self.config.max_bytes);
        let mut rows = Vec::new();
        let mut matched: u64 = 0;
        let mut truncated = false;
        let mut bytes = 0usize;
        if columns.is_empty() {
            matched =
                query.execute(&mut **transaction).await.map_err(|e| statement_failure(e, by_run))?.rows_affected();
        } else {
            let mut stream = query.fetch(&mut **transaction);
            while let Some(row) = stream.try_next().await.map_err(|e| statement_failure(e, by_run))? {
                matched += 1;
                if truncated || rows.len() >= max_rows {
                    truncated = true;
                    continue;
                }
                let row = row_json(&row);
                let size = row.to_string().len();
                if bytes + size > max_bytes {
                    truncated = true;
                    continue;
                }
                bytes += size;
                rows.push(row);
            }
        }
        Ok(SqlResult {
            columns,
            rows: Value::Array(rows),
            rows_matched: matched,
            truncated,
            elapsed_ms: started.elapsed().as_millis() as u64,
        })
    }
}

impl Drop for PostgresSession {
    /// A session dropped without `commit` or `rollback` rolls back (sqlx
    /// does it as the connection returns to the pool, from a task): the
    /// transaction is dropped inside the runtime, so dropping a session on
    /// a thread outside it (a panicking caller) does not panic again.
    fn drop(&mut self) {
        if let Some(transaction) = self.transaction.take() {
            let _runtime = self.handle.enter();
            drop(transaction);
        }
    }
}

/// Classifies a failed COMMIT. PostgreSQL answers a COMMIT it cannot carry
/// out (a deferred constraint, a serialization failure) with an error and
/// rolls the transaction back. Without an answer (the connection failed),
/// or with a connection exception (SQLSTATE class 08) or a shutdown or
/// crash (57P..), the transaction may have committed before the failure.
fn commit_error(error: sqlx::Error) -> CommitError {
    match error {
        sqlx::Error::Database(database) => {
            let code = database.code().map(|code| code.into_owned()).unwrap_or_default();
            let message = database_message(database.as_ref());
            if code.starts_with("08") || code.starts_with("57P") {
                CommitError::Unknown(message)
            } else {
                CommitError::RolledBack(message)
            }
        }
        other => CommitError::Unknown(other.to_string()),
    }
}

/// One row as a JSON array in column order.
fn row_json(row: &PgRow) -> Value {
    let values = (0..row.len())
        .map(|index| match row.try_get_raw(index) {
            Ok(raw) if raw.is_null() => Value::Null,
            Ok(raw) => {
                let oid = type_oid(&raw.type_info());
                raw.as_bytes().map_or(Value::Null, |bytes| decode(oid, bytes))
            }
            Err(_) => Value::Null,
        })
        .collect();
    Value::Array(values)
}

#[async_trait::async_trait]
impl SqlSession for PostgresSession {
    async fn query(&mut self, statement: &str, params: &Value) -> Result<SqlResult, SqlError> {
        self.run(statement, params).await.map_err(|failure| match failure {
            StatementFailure::Failed(message) => SqlError::Statement(message),
            StatementFailure::RunOutOfTime(message) => SqlError::Deadline(message),
        })
    }

    async fn commit(mut self: Box<Self>) -> Result<(), CommitError> {
        match self.transaction.take() {
            Some(transaction) => transaction.commit().await.map_err(commit_error),
            None => Err(CommitError::RolledBack("the transaction had already ended".into())),
        }
    }

    async fn rollback(mut self: Box<Self>) {
        if let Some(transaction) = self.transaction.take()
            && let Err(error) = transaction.rollback().await
        {
            tracing::warn!(%error, "rolling a Run's transaction back failed; the connection is discarded");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_identifier("pilotage_demo"), "\"pilotage_demo\"");
        assert_eq!(quote_identifier("we\"ird"), "\"we\"\"ird\"");
    }

    #[test]
    fn a_statement_gets_the_lower_of_its_timeout_and_the_runs_time_left() {
        let now = Instant::now();
        let five = Duration::from_secs(5);
        assert_eq!(statement_timeout_for(five, None, now), Some(five));
        let soon = now + Duration::from_millis(1500);
        assert_eq!(statement_timeout_for(five, Some(soon), now), Some(Duration::from_millis(1500)));
        let later = now + Duration::from_secs(60);
        assert_eq!(statement_timeout_for(five, Some(later), now), Some(five));
        // No time left: no statement, never a `statement_timeout` of 0.
        assert_eq!(statement_timeout_for(five, Some(now), now), None);
        assert_eq!(statement_timeout_for(five, Some(now + Duration::from_micros(500)), now), None);
    }

    #[test]
    fn configuration_errors_are_reported_before_connecting() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let no_schema = PostgresConfig::new("postgres://postgres@127.0.0.1:5432/test", Vec::<String>::new());
        assert!(matches!(
            PostgresDataSource::new(no_schema, runtime.handle().clone()),
            Err(DataSourceError::Config(_))
        ));
        let bad_url = PostgresConfig::new("not a url", ["public"]);
        assert!(matches!(PostgresDataSource::new(bad_url, runtime.handle().clone()), Err(DataSourceError::Config(_))));
    }
}
