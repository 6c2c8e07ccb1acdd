//! Pilotage Platform store: durable state over sqlx, SQLite (the embedded
//! default, one file) or PostgreSQL (many replicas).
//!
//! [`Store`] is the handle; each row family has a module of queries:
//! [`runs`] (run records at the recorded trace level, Part II §6.6),
//! [`idempotency`] (keys claimed atomically, with their Run, owner and
//! lease, §6.5.6), [`promoted`] (immutable bodies and baselines, §6.7),
//! [`tenants`], [`languages`] (versions naming their component by SHA-256;
//! each component's bytes stored once), [`catalog`], [`secrets`] (sealed
//! by [`sealing`]), [`data_sources`] (URLs sealed), [`audit`],
//! [`deployments`] (deployments, firing claims, webhook deliveries) and
//! [`fleet`] (the change log and MCP sessions replicas share), [`tasks`]
//! (MCP tasks: an execute answered with a handle, its Run's end recorded),
//! [`approvals`] (approval requests and budget uses of a tenant's policy on
//! risk). Rows kept per principal name their [`Owner`] (tenant, issuer,
//! subject) and are matched on all three. Reads that
//! start-up makes for every tenant and a replica makes for one take a
//! [`Scope`]. [`migrations`] lists the schema's migrations once for both
//! backends (`migrations/sqlite`, `migrations/postgres`).
//!
//! Invariant: every row but a component's carries its tenant, and every
//! query names it; times are milliseconds since the Unix epoch, given by
//! the caller (the store never reads a clock). The store knows nothing of
//! wasm, MCP or HTTP: values it does not query by are JSON text it does not
//! interpret.
//!
//! ```no_run
//! # async fn example() -> Result<(), pilotage_store::StoreError> {
//! use pilotage_store::{Scope, Store};
//! let store = Store::connect("sqlite::memory:").await?;
//! store.migrate().await?;
//! assert!(store.tenants(Scope::Every).await?.is_empty());
//! # Ok(()) }
//! ```
#![deny(unsafe_code)]

pub mod approvals;
pub mod audit;
mod backend;
pub mod catalog;
pub mod data_sources;
pub mod deployments;
pub mod fleet;
pub mod idempotency;
pub mod languages;
pub mod migrations;
mod owner;
pub mod promoted;
pub mod runs;
pub mod sealing;
pub mod secrets;
mod sign_ins;
mod store;
pub mod tasks;
pub mod tenants;
pub mod usage;

pub use approvals::{ApprovalDecision, ApprovalRow};
pub use audit::AuditRow;
pub use backend::Backend;
pub use data_sources::DataSourceRow;
pub use deployments::{DeploymentPut, DeploymentRow, FiringClaim, FiringRow};
pub use fleet::{CHANGES_CHANNEL, ChangeRow, SessionRow};
pub use idempotency::{Claim, HeldClaim, NewClaim};
pub use languages::LanguageRow;
pub use owner::Owner;
pub use promoted::PromotedRow;
pub use runs::{RunFilter, RunListed, RunRow};
pub use store::{Scope, Store, StoreError};
pub use tasks::TaskRow;
pub use tenants::TenantRow;
pub use usage::UsageRow;
