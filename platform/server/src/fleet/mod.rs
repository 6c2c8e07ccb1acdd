//! Replicas that share one PostgreSQL behave as one server (issue: run as
//! a fleet; ARCHITECTURE "Scale-out").
//!
//! - [`announce`]: a change to a tenant's state made through one replica is
//!   appended to the store's change log and announced with `NOTIFY`;
//! - [`follow`]: every other replica follows the log (`LISTEN`, with a
//!   catch-up read after a lost connection and every few seconds) and
//!   re-reads the named item, so its Languages, catalog, data sources,
//!   promoted programs and tenants match the store within moments, and its
//!   sessions hear `notifications/tools/list_changed`;
//! - [`sessions`]: rmcp's session store backed by the `mcp_sessions` table,
//!   so a replica that does not hold an MCP session restores it, bound to
//!   the principal that opened it.
//!
//! On SQLite (one process) none runs: nothing is announced, no session
//! is stored, and the server behaves as before.
//!
//! Invariant: a replica's in-memory tenant state is a function of the
//! store's rows (plus what the process itself serves: bundled Languages,
//! the demo catalog, Language files); applying a change twice, or out of
//! order, leaves the same state, because applying re-reads the item's row.
//! Times compared across replicas (the log, session liveness) come from the
//! system clock.

pub(crate) mod follow;
pub(crate) mod sessions;
