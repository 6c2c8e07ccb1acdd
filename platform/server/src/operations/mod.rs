//! The six Pilotage operations (Part II §6) and promotion, as the platform
//! serves them to one caller. The MCP layer turns arguments into these
//! calls and their results into tool results; nothing here knows MCP.
//!
//! Every operation returns its result or an [`OpError`]: a request error
//! (Part III §7.2) or a structural fault that the binding reports as a
//! carrier error (Part III §7.1). Execute's result is typed
//! (`execute::ExecuteAnswer`), and only the MCP binding turns it into
//! `structuredContent`; the others still answer a JSON value.

pub(crate) mod assertions;
mod context;
pub(crate) mod discover;
pub(crate) mod execute;
pub(crate) mod firing;
pub(crate) mod idempotency;
pub(crate) mod install;
pub(crate) mod learn;
pub(crate) use crate::tenancy::leases;
pub mod lookup;
pub(crate) mod narration;
pub(crate) mod promote;
pub(crate) mod trace_fetch;
pub(crate) mod validate;

pub use context::{Caller, Context, OpError, arguments, members_outside, request_error};
pub(crate) use context::{STORAGE_RETRY_MS, storage_error};
