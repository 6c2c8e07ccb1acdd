//! What an execute runs (Part II §6.5.2 step 1, runnable selection):
//! the request's inline program, or a promoted one named by
//! `program_ref`. Read by every later stage; imports nothing of them.

use std::sync::Arc;

use serde_json::Value;

use crate::invocation::promotion::PromotedProgram;

/// What runs: the request's inline program, or a promoted one.
pub(super) enum Runnable {
    /// The inline program (the Language's program argument).
    Inline(Value),
    /// The promoted program `program_ref` names.
    Promoted(Arc<PromotedProgram>),
}
