//! Data sources: a tenant's PostgreSQL database as the place where the
//! statements of a query Language (sql/postgres-15) run, and as the source
//! of that Language's catalog.
//!
//! - [`PostgresConfig`]: where to connect and every bound (pool size,
//!   connect and statement timeouts, row and byte caps), with defaults;
//! - [`PostgresDataSource`]: a bounded sqlx pool; implements the host's
//!   [`DataSource`](pilotage_engine::execution::DataSource) (one
//!   transaction per Run, `READ ONLY` when the plan only reads) and
//!   introspects the relations the role can see into catalog entries
//!   ([`introspection`]);
//! - [`sql_entry_id`]: the unambiguous `schema.relation` ids of relations'
//!   catalog entries (each part bare or `"quoted"`);
//! - [`values`]: PostgreSQL binary values to JSON and JSON parameters to
//!   binary values;
//! - [`attached`]: a data source registered by a tenant for one of its
//!   Languages, and the catalog entries its introspection owns;
//! - [`demo`]: the demo sales database.
//!
//! Invariant: a data source runs only what the host hands it, and the host
//! hands it only statements a validation returned (Part II §6.5.4); the
//! data source adds only its own envelope (`BEGIN [READ ONLY]`,
//! `SET LOCAL statement_timeout`, never more than the Run's time left,
//! `SET LOCAL search_path TO pg_catalog, pg_temp`, `COMMIT` or
//! `ROLLBACK`).
//!
//! Invariant: an unqualified relation name reaches no tenant schema. The
//! Language sends every relation schema-qualified as validation resolved
//! it, and a Run's `search_path` names no tenant schema, so PostgreSQL can
//! never pick a relation the caller cannot see.
//!
//! ```no_run
//! use pilotage_platform::datasource::{PostgresConfig, PostgresDataSource};
//! let runtime = tokio::runtime::Runtime::new().unwrap();
//! let config = PostgresConfig::new("postgres://postgres@127.0.0.1:5432/test", ["pilotage_demo"]);
//! let source = PostgresDataSource::new(config, runtime.handle().clone()).unwrap();
//! let entries = runtime.block_on(source.introspect()).unwrap();
//! assert!(entries.iter().all(|e| e.kind == "table" || e.kind == "view"));
//! ```

pub mod attached;
pub mod demo;
// The id rule is written once, in the sql/postgres-15 Language that reads
// the ids; the host compiles the same file to write them.
pub mod introspection;
pub mod postgres;
pub mod values;

pub use postgres::{PostgresConfig, PostgresDataSource};

/// Why a data source could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataSourceError {
    /// Occurs when the configuration is unusable (a URL that does not
    /// parse, an empty schema list).
    #[error("data source configuration: {0}")]
    Config(String),
    /// Occurs when PostgreSQL cannot be reached within the connect timeout
    /// (down, refusing, wrong credentials).
    #[error("PostgreSQL is unreachable at {target}: {message}")]
    Unreachable {
        /// host:port/database, without credentials.
        target: String,
        /// The driver's message.
        message: String,
    },
    /// Occurs when PostgreSQL reports an error for a host statement
    /// (introspection, demo set-up, the transaction envelope).
    #[error("PostgreSQL error: {0}")]
    Database(String),
}

impl DataSourceError {
    /// Classifies a sqlx error: connection-level failures are
    /// [`DataSourceError::Unreachable`], the rest [`DataSourceError::Database`].
    pub fn from_sqlx(target: &str, error: sqlx::Error) -> DataSourceError {
        match error {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Tls(_) | sqlx::Error::PoolClosed => {
                DataSourceError::Unreachable { target: target.to_owned(), message: error.to_string() }
            }
            sqlx::Error::Database(database) => DataSourceError::Database(database_message(database.as_ref())),
            other => DataSourceError::Database(other.to_string()),
        }
    }
}

/// A database error as one line: message, SQLSTATE and detail.
pub fn database_message(error: &dyn sqlx::error::DatabaseError) -> String {
    match error.code() {
        Some(code) => format!("{} (SQLSTATE {code})", error.message()),
        None => error.message().to_owned(),
    }
}
