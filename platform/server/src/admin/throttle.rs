//! Throttling of credential guesses: the admin API's bearer check, the
//! console's sign-in and the approval page's sign-in count failed
//! credentials per client address, and a client past
//! [`FAILURES_PER_WINDOW`] failures in a [`WINDOW`] is refused (429 with
//! `Retry-After`) before its next credential is even read, until the
//! window ends (OWASP ASVS 2.2.1). A correct credential is refused too
//! while its address is throttled: otherwise the refusal itself would tell
//! a guesser which guess was right.
//!
//! The client address is the connection's peer, or, when the peer is one
//! of the `trusted_proxies` (a load balancer), the rightmost
//! `X-Forwarded-For` entry that is not itself a trusted proxy: a client
//! cannot choose its own address by sending the header, and clients behind
//! one balancer are not all throttled as one. The count is per replica (a
//! fleet of N replicas behind a balancer allows up to N times the bound,
//! still a bound); at most [`TRACKED`] addresses are followed, the oldest
//! windows dropped first.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;

/// Failed credentials a client address may present per window.
pub(crate) const FAILURES_PER_WINDOW: u32 = 10;

/// The window failures are counted in.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// The most client addresses followed at once (about 48 bytes each).
const TRACKED: usize = 100_000;

/// One client address's failures in its current window.
#[derive(Clone, Copy, Debug)]
struct Failures {
    since: Instant,
    count: u32,
}

/// The failure counts of one replica.
#[derive(Debug)]
pub(crate) struct SignInThrottle {
    trusted: Vec<IpAddr>,
    failures: Mutex<HashMap<IpAddr, Failures>>,
}

impl SignInThrottle {
    /// A throttle attributing requests from `trusted` proxies to the
    /// client their `X-Forwarded-For` names.
    pub(crate) fn new(trusted: Vec<IpAddr>) -> SignInThrottle {
        SignInThrottle { trusted, failures: Mutex::new(HashMap::new()) }
    }

    /// The client a request came from: `peer`, or through a trusted proxy
    /// the client it forwarded for. `None` without a peer (a request not
    /// from the network), which is never throttled.
    pub(crate) fn client(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        let peer = peer?.ip().to_canonical();
        if !self.trusted.contains(&peer) {
            return Some(peer);
        }
        // Each proxy appends the address it received from; read from the
        // right, the first address no trusted proxy added is the client's.
        let forwarded = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .collect::<Vec<_>>();
        for entry in forwarded.iter().rev() {
            match entry.parse::<IpAddr>() {
                Ok(address) if self.trusted.contains(&address.to_canonical()) => continue,
                Ok(address) => return Some(address.to_canonical()),
                // A malformed entry: what is left of it was written by the
                // client, so the proxy's own view is all that is known.
                Err(_) => return Some(peer),
            }
        }
        Some(peer)
    }

    /// Whether `client` may present a credential now: `Err(retry_after)`
    /// while it is past its failures in the current window.
    pub(crate) fn check(&self, client: Option<IpAddr>) -> Result<(), Duration> {
        let Some(client) = client else { return Ok(()) };
        let failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match failures.get(&client) {
            Some(entry) if entry.count >= FAILURES_PER_WINDOW => {
                let left = WINDOW.saturating_sub(entry.since.elapsed());
                if left.is_zero() { Ok(()) } else { Err(left) }
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed credential of `client`.
    pub(crate) fn failed(&self, client: Option<IpAddr>) {
        let Some(client) = client else { return };
        let now = Instant::now();
        let mut failures = self.failures.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if failures.len() >= TRACKED && !failures.contains_key(&client) {
            failures.retain(|_, entry| now.duration_since(entry.since) < WINDOW);
            if failures.len() >= TRACKED
                && let Some(oldest) = failures.iter().min_by_key(|(_, entry)| entry.since).map(|(address, _)| *address)
            {
                failures.remove(&oldest);
            }
        }
        let entry = failures.entry(client).or_insert(Failures { since: now, count: 0 });
        if now.duration_since(entry.since) >= WINDOW {
            *entry = Failures { since: now, count: 0 };
        }
        entry.count = entry.count.saturating_add(1);
        if entry.count == FAILURES_PER_WINDOW {
            tracing::warn!(client = %client, failures = entry.count, window_s = WINDOW.as_secs(),
                "a client address presented too many bad credentials: refused until its window ends");
        }
    }
}

/// A sign-in page's answer to a throttled client: `page` (the form, with
/// a message saying why) as 429 with `Retry-After`.
pub(crate) fn throttled_page(mut page: Response, left: Duration) -> Response {
    *page.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    page.headers_mut().insert(header::RETRY_AFTER, retry_after_s(left).into());
    page
}

/// What a throttled sign-in form says.
pub(crate) const THROTTLED: &str =
    "Too many credentials that were not valid came from your address: wait a minute, then try again.";

/// The `Retry-After` value for `left`, in whole seconds (at least 1).
pub(crate) fn retry_after_s(left: Duration) -> u64 {
    u64::try_from(left.as_millis().div_ceil(1000)).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(text: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(text.parse().unwrap(), 40_000))
    }

    fn forwarded(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", value.parse().unwrap());
        headers
    }

    #[test]
    fn the_client_is_the_peer_unless_a_trusted_proxy_forwarded_for_it() {
        let throttle = SignInThrottle::new(vec!["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()]);
        let spoofed = forwarded("203.0.113.9");
        assert_eq!(throttle.client(peer("198.51.100.7"), &spoofed), Some("198.51.100.7".parse().unwrap()));
        let chain = forwarded("203.0.113.9, 198.51.100.7, 10.0.0.2");
        assert_eq!(throttle.client(peer("10.0.0.1"), &chain), Some("198.51.100.7".parse().unwrap()));
        assert_eq!(throttle.client(peer("10.0.0.1"), &HeaderMap::new()), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(throttle.client(peer("10.0.0.1"), &forwarded("not-an-ip")), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(throttle.client(None, &chain), None);
    }

    #[test]
    fn a_client_past_its_failures_waits_and_others_do_not() {
        let throttle = SignInThrottle::new(Vec::new());
        let (guesser, other) = (Some("198.51.100.7".parse().unwrap()), Some("198.51.100.8".parse().unwrap()));
        for _ in 0..FAILURES_PER_WINDOW {
            assert!(throttle.check(guesser).is_ok());
            throttle.failed(guesser);
        }
        let left = throttle.check(guesser).unwrap_err();
        assert!(left <= WINDOW && left > WINDOW - Duration::from_secs(5), "{left:?}");
        assert!(throttle.check(other).is_ok());
        assert!(throttle.check(None).is_ok());
        assert_eq!(retry_after_s(Duration::from_millis(59_001)), 60);
        assert_eq!(retry_after_s(Duration::ZERO), 1);
    }
}
