//! The clock deployments fire by: the system clock, or, for tests, a
//! frozen clock moved by hand (`freeze_at`, `advance`), so a schedule test
//! crosses minutes and daylight-saving changes without sleeping through
//! them. Firings also give the body this clock as `effects.now`.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

/// The deployments' clock. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct Clock {
    frozen: Mutex<Option<i64>>,
    moved: Notify,
}

impl Clock {
    /// Now, in ms since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match *self.frozen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) {
            Some(frozen) => frozen,
            None => crate::operations::now_ms(),
        }
    }

    /// Stops the clock at `at_ms` (it moves only by [`Clock::advance`] from
    /// then on) and wakes whoever waits on it.
    pub fn freeze_at(&self, at_ms: i64) {
        *self.frozen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(at_ms);
        self.moved.notify_waiters();
    }

    /// Moves a frozen clock forward by `by` (a running clock ignores it).
    pub fn advance(&self, by: Duration) {
        if let Some(frozen) = self.frozen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).as_mut() {
            *frozen += by.as_millis() as i64;
        }
        self.moved.notify_waiters();
    }

    /// Waits until `at_ms` or for `at_most` of real time, whichever comes
    /// first; a frozen clock is also woken when it is moved.
    pub async fn sleep_until(&self, at_ms: i64, at_most: Duration) {
        let moved = self.moved.notified();
        let frozen = self.frozen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_some();
        let wait = if frozen {
            at_most
        } else {
            Duration::from_millis(at_ms.saturating_sub(self.now_ms()).max(0) as u64).min(at_most)
        };
        let _ = tokio::time::timeout(wait, moved).await;
    }
}
