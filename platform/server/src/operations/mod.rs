//! The six Pilotage operations (Part II §6) and promotion, as the platform
//! serves them to one caller. The MCP layer turns arguments into these
//! calls and their results into tool results; nothing here knows MCP.
//!
//! Every operation returns either a `structuredContent` value or an
//! [`OpError`]: a request error (Part III §7.2) or a structural fault that
//! the binding reports as a carrier error (Part III §7.1).

mod context;
pub mod discover;
pub mod execute;
pub mod idempotency;
pub mod leases;
pub mod learn;
pub mod lookup;
pub mod promote;
pub mod trace_fetch;
pub mod validate;

pub use context::{Caller, Context, OpError, arguments, members_outside, request_error};
