//! The one clock the platform reads time from: run records and their
//! expiry (Part II §6.6), idempotency leases (§6.5.6), audit records,
//! data-source refreshes, sessions shared by replicas, deployments'
//! schedules (§6.5.7) and `effects.now` of a Run.
//!
//! A [`Clock`] follows the system clock until a test or the demo freezes
//! it ([`Clock::freeze_at`]); it then moves only when moved
//! ([`Clock::advance`]), and everything that holds a clone of it sees the
//! same instant, so a test crosses minutes, days and daylight-saving
//! changes without sleeping through them. Bearer-token expiry is not read
//! from it: a credential's lifetime is the real world's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

/// Milliseconds since the Unix epoch on the system clock (0 before the
/// epoch).
pub fn system_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// `ms` since the Unix epoch as an RFC 3339 UTC instant with milliseconds
/// (`2026-12-03T16:12:30.000Z`); empty when out of range.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Parses an RFC 3339 instant to ms since the Unix epoch; `None` when the
/// text is not one.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text).ok().map(|at| at.timestamp_millis())
}

/// A clock shared by clones: the system clock, or a frozen instant that
/// moves only by hand.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    frozen: Mutex<Option<i64>>,
    moved: Notify,
}

impl Clock {
    /// A clock following the system clock.
    pub fn system() -> Clock {
        Clock::default()
    }

    /// Now, in ms since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match *self.inner.frozen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) {
            Some(frozen) => frozen,
            None => system_now_ms(),
        }
    }

    /// Whether the clock is frozen.
    pub(crate) fn is_frozen(&self) -> bool {
        self.inner.frozen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).is_some()
    }

    /// Stops the clock at `at_ms` (it moves only by [`Clock::advance`] from
    /// then on) and wakes whoever waits on it.
    pub fn freeze_at(&self, at_ms: i64) {
        *self.inner.frozen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(at_ms);
        self.inner.moved.notify_waiters();
    }

    /// Moves a frozen clock forward by `by` (a running clock ignores it)
    /// and wakes whoever waits on it.
    pub fn advance(&self, by: Duration) {
        if let Some(frozen) = self.inner.frozen.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).as_mut() {
            *frozen = frozen.saturating_add(by.as_millis() as i64);
        }
        self.inner.moved.notify_waiters();
    }

    /// Waits until `at_ms` or for `at_most` of real time, whichever comes
    /// first; a frozen clock's waiters also wake when it is moved.
    pub async fn sleep_until(&self, at_ms: i64, at_most: Duration) {
        let moved = self.inner.moved.notified();
        let wait = if self.is_frozen() {
            at_most
        } else {
            Duration::from_millis(at_ms.saturating_sub(self.now_ms()).max(0) as u64).min(at_most)
        };
        let _ = tokio::time::timeout(wait, moved).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frozen_clock_moves_only_by_hand_and_clones_share_it() {
        let clock = Clock::system();
        let shared = clock.clone();
        assert!(!clock.is_frozen());
        clock.freeze_at(1_000);
        assert_eq!(shared.now_ms(), 1_000);
        shared.advance(Duration::from_secs(2));
        assert_eq!(clock.now_ms(), 3_000);
        // The bad case: a running clock ignores `advance`.
        let running = Clock::system();
        let before = running.now_ms();
        running.advance(Duration::from_secs(3_600));
        assert!(running.now_ms() < before + 3_600_000);
    }

    #[test]
    fn instants_round_trip_through_rfc3339() {
        let at = parse_rfc3339("2026-03-29T02:30:00+02:00").unwrap();
        assert_eq!(rfc3339(at), "2026-03-29T00:30:00.000Z");
        assert_eq!(parse_rfc3339("29 March 2026"), None);
    }
}
