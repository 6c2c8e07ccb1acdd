//! Label handles resolved once per label value, so that recording an
//! event costs a map lookup under a read lock and a few atomic adds: the
//! bounded map of an open-ended label's values and the handle sets it
//! holds.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use prometheus::{Counter, Histogram, IntCounter};

use super::labels::McpOutcome;

/// Most distinct values one open-ended label (tool, Language, entry kind)
/// takes in one process; the values after it are counted under
/// [`OVERFLOW_LABEL`]. Rationale: a deployment's tools and Languages are
/// few, and a runaway set of names must not grow the exposition without
/// bound.
pub(super) const MAX_LABEL_VALUES: usize = 256;

/// The label value of everything past [`MAX_LABEL_VALUES`].
pub(super) const OVERFLOW_LABEL: &str = "_other";

/// Handles resolved once per value of an open-ended label, at most
/// [`MAX_LABEL_VALUES`] of them; later values share the overflow handles.
pub(super) struct BoundedHandles<T> {
    by_value: RwLock<HashMap<String, Arc<T>>>,
    overflow: OnceLock<Arc<T>>,
}

impl<T> Default for BoundedHandles<T> {
    fn default() -> Self {
        BoundedHandles { by_value: RwLock::new(HashMap::new()), overflow: OnceLock::new() }
    }
}

impl<T> BoundedHandles<T> {
    /// The handles of `value`, made by `make` (given the label value to
    /// use) the first time it is seen.
    pub(super) fn get(&self, value: &str, make: impl FnOnce(&str) -> T) -> Arc<T> {
        if let Some(found) = self.by_value.read().unwrap_or_else(|p| p.into_inner()).get(value) {
            return found.clone();
        }
        let mut by_value = self.by_value.write().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = by_value.get(value) {
            return found.clone();
        }
        if by_value.len() >= MAX_LABEL_VALUES {
            return self.overflow.get_or_init(|| Arc::new(make(OVERFLOW_LABEL))).clone();
        }
        let made = Arc::new(make(value));
        by_value.insert(value.to_owned(), made.clone());
        made
    }
}

/// A request counter and its latency histogram, one pair per outcome.
pub(super) struct RequestHandles {
    pub(super) by_outcome: [(IntCounter, Histogram); 3],
}

impl RequestHandles {
    /// Counts one request that ended with `outcome` and its latency.
    pub(super) fn observe(&self, outcome: McpOutcome, elapsed: Duration) {
        let (count, latency) = &self.by_outcome[outcome as usize];
        count.inc();
        latency.observe(elapsed.as_secs_f64());
    }
}

/// The per-Language handles: validations by result.
pub(super) struct LanguageHandles {
    /// The label value this Language is counted under.
    pub(super) label: String,
    pub(super) validations: [IntCounter; 4],
}

/// The per-tenant usage handles.
pub(super) struct TenantUsageHandles {
    pub(super) runs: [IntCounter; 4],
    pub(super) invocations: IntCounter,
    pub(super) fuel: IntCounter,
    pub(super) seconds: Counter,
    pub(super) stored_bytes: IntCounter,
}

/// The per-entry-kind handles: invocation latency, ok and failed.
pub(super) struct EntryKindHandles {
    pub(super) ok: Histogram,
    pub(super) failed: Histogram,
}
