//! Whether a `tools/call` reached a tool the tenant serves: set by the
//! handler ([`super::server`]), read by the observing wrapper
//! ([`super::observed`]) to label the request's metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `call_tool` when the called tool is one the caller's tenant
/// serves, so that the tool's name may label the request's metrics (a name
/// the client made up never does).
#[derive(Clone, Debug, Default)]
pub(super) struct ToolResolution(Arc<AtomicBool>);

impl ToolResolution {
    /// Marks the tool as served.
    pub(super) fn found(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether the tool was served.
    pub(super) fn is_found(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
