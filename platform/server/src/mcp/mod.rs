//! The MCP binding (Part III): an rmcp `ServerHandler` that declares the
//! extension, carries the inline manifest and the welcome text, lists each
//! tenant's tools, and maps every operation's result onto its channel:
//! `structuredContent` always, one text block (the JSON, or for a large
//! Run result a short summary), `isError` only for request errors,
//! JSON-RPC errors only for structural faults.
//!
//! - `tools`: the tool surface and dispatch roles;
//! - `content`: the result envelope, and the text block of execute and
//!   trace-fetch results;
//! - `apps`: the MCP Apps views (SEP-1865): the plan view of the validate
//!   tools and the Run view of the execute and trace-fetch tools, as
//!   `ui://` resources;
//! - `tasks`: execute as an MCP task (the Tasks extension);
//! - `approval_wait`: an execute held for approval, waited on in the same
//!   call through URL-mode elicitation (or the 2026-07-28 input-required
//!   form);
//! - [`tasks_2025`]: the same tasks in the 2025-11-25 form (`params.task`,
//!   `tasks/result`, `tasks/list`), for requests the HTTP edge marked;
//! - `arguments`: the structural check of tool arguments against the
//!   advertised input schemas (carrier errors, Part III §7.1);
//! - `schemas`: input and output schemas;
//! - `sessions`: observing the end of MCP sessions;
//! - `session_binding`: each session bound to its principal, and the
//!   ceilings on open sessions per principal and per tenant;
//! - `skills`: each Language's guides as an Agent Skill (SEP-2640);
//! - [`observed`]: every request's server span and metrics.

mod approval_wait;
pub(crate) mod apps;
pub(crate) mod arguments;
mod content;
pub mod listeners;
pub mod observed;
mod resolution;
mod resources;
pub(crate) mod schemas;
mod server;
pub(crate) mod session_binding;
pub(crate) mod sessions;
pub(crate) mod skills;
mod tasks;
pub(crate) mod tasks_2025;
pub(crate) mod tools;

pub use content::envelope;
pub use server::{INSTRUCTIONS, PilotageServer};
