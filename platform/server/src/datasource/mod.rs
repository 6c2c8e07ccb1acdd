//! Data sources: a tenant's PostgreSQL database as the place where the
//! statements of a query Language (sql/postgres-15) run, and as the source
//! of that Language's catalog.
//!
//! - [`PostgresConfig`]: where to connect and every bound (pool size,
//!   connect and statement timeouts, row and byte caps), with defaults;
//! - [`PostgresDataSource`]: a bounded sqlx pool; implements the host's
//!   [`DataSource`](pilotage_engine::effects::DataSource) (one
//!   transaction per Run, `READ ONLY` when the plan only reads) and
//!   introspects the relations the role can see into catalog entries
//!   (`introspection`);
//! - [`sql_entry_id`]: the unambiguous `schema.relation` ids of relations'
//!   catalog entries (each part bare or `"quoted"`);
//! - `values`: PostgreSQL binary values to JSON and JSON parameters to
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
//! use pilotage_server::datasource::{PostgresConfig, PostgresDataSource};
//! let runtime = tokio::runtime::Runtime::new().unwrap();
//! let config = PostgresConfig::new("postgres://postgres@127.0.0.1:5432/test", ["pilotage_demo"]);
//! let source = PostgresDataSource::new(config, runtime.handle().clone()).unwrap();
//! let entries = runtime.block_on(source.introspect()).unwrap();
//! assert!(entries.iter().all(|e| e.kind == "table" || e.kind == "view"));
//! ```

pub mod attached;
pub mod demo;
mod error;
pub(crate) mod introspection;
pub mod postgres;
pub(crate) mod values;

pub use error::{DataSourceError, database_message};
pub use postgres::{PostgresConfig, PostgresDataSource};
