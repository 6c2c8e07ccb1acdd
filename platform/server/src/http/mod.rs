//! The HTTP edge: the axum router with `/mcp` (rmcp's Streamable HTTP
//! service behind a compatibility layer), `/healthz` and `/readyz`.
//!
//! - [`compat`]: JSON-RPC parse errors, liberal `Accept`, body and
//!   per-request timeouts;
//! - [`origin`]: `Origin` validation (403 before anything else);
//! - [`connections`]: the accept loop (connection cap, header timeout,
//!   `TCP_NODELAY`, graceful shutdown) and the admin API's body deadline;
//! - [`session_binding`]: sessions usable only by the principal that
//!   opened them, and the ceilings on open sessions;
//! - [`metrics`]: `/metrics`, on the main listener behind a bearer token
//!   or on a listener of its own.
//! - `server_card`: the MCP server card (`/mcp/server-card`) and the AI
//!   Catalog pointing at it (`/.well-known/ai-catalog.json`).
//! - `task_form`: the 2025-11-25 shapes of MCP tasks, put right on the
//!   JSON that rmcp's types cannot carry them in.

pub(crate) mod compat;
pub(crate) mod connections;
pub(crate) mod metrics;
pub(crate) mod origin;
mod router;
mod server_card;
pub(crate) mod session_binding;
mod task_form;

pub(crate) use router::app;
