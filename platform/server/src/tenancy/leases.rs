//! This process's idempotency claims (Part II §6.5.6): the instance id
//! that owns them, the claims whose Runs execute here, and their lease
//! renewal. Every claim names the Run it started, its owner and a lease;
//! while the Run executes, the owner renews the lease every
//! [`IdempotencySettings::renew_ms`] (`operations::idempotency` runs the
//! renewal task and takes over claims whose owner stopped renewing).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use pilotage_store::{Owner, Store};

/// The leases of idempotency claims (`[idempotency]` in the settings
/// file).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdempotencySettings {
    /// How long a claim stays its owner's without a renewal, in
    /// milliseconds (`--idempotency-lease-ms`). Default 30 000. A process
    /// killed mid-Run holds its keys this long at most; then a retry gets
    /// the interrupted outcome. Too short a lease lets a live Run whose
    /// renewals are delayed (a slow database) be reported interrupted.
    pub lease_ms: u64,
    /// How often a live process renews the leases of its Runs in flight,
    /// in milliseconds (`--idempotency-renew-ms`). Default 10 000. At most
    /// half the lease, so one late renewal does not lose a live claim.
    pub renew_ms: u64,
}

impl Default for IdempotencySettings {
    fn default() -> Self {
        IdempotencySettings { lease_ms: 30_000, renew_ms: 10_000 }
    }
}

impl IdempotencySettings {
    /// Checks the two settings against each other.
    ///
    /// # Errors
    /// The name of the inconsistent setting and what is wrong with it.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.renew_ms == 0 {
            return Err(("idempotency.renew_ms", "must be at least 1".into()));
        }
        if self.renew_ms.saturating_mul(2) > self.lease_ms {
            return Err((
                "idempotency.renew_ms",
                format!(
                    "must be at most half of idempotency.lease_ms ({} ms), so one late renewal does not lose a live claim",
                    self.lease_ms
                ),
            ));
        }
        Ok(())
    }
}

/// A claim whose Run executes in this process.
#[derive(Clone, Debug)]
struct LiveClaim {
    tenant: String,
    issuer: String,
    subject: String,
    key: String,
    run_id: String,
}

/// This process's identity as a claim owner and the claims it renews.
#[derive(Debug)]
pub struct Leases {
    instance_id: String,
    settings: IdempotencySettings,
    live: Mutex<HashMap<u64, LiveClaim>>,
    next: AtomicU64,
}

/// Keeps a claim renewed while it lives; dropping it (the Run answered,
/// failed, or its request was abandoned) stops the renewals.
#[derive(Debug)]
pub struct LeaseGuard {
    leases: Arc<Leases>,
    id: u64,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.leases.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&self.id);
    }
}

impl Leases {
    /// Leases for a process starting now, with a fresh random instance id
    /// (`inst_` and 16 hex digits).
    pub fn new(settings: IdempotencySettings) -> Arc<Leases> {
        Arc::new(Leases {
            instance_id: format!("inst_{}", hex::encode(rand::random::<[u8; 8]>())),
            settings,
            live: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        })
    }

    /// This process's instance id, recorded as the owner of its claims.
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// The settings in force.
    pub fn settings(&self) -> &IdempotencySettings {
        &self.settings
    }

    /// The end of a lease taken or renewed at `now_ms`.
    pub fn lease_until(&self, now_ms: i64) -> i64 {
        now_ms.saturating_add(i64::try_from(self.settings.lease_ms).unwrap_or(i64::MAX))
    }

    /// Renews the claim of `run_id` on `owner`'s `key` until the guard
    /// drops.
    pub fn hold(self: &Arc<Self>, owner: Owner<'_>, key: &str, run_id: &str) -> LeaseGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let claim = LiveClaim {
            tenant: owner.tenant.to_owned(),
            issuer: owner.issuer.to_owned(),
            subject: owner.subject.to_owned(),
            key: key.to_owned(),
            run_id: run_id.to_owned(),
        };
        self.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(id, claim);
        LeaseGuard { leases: self.clone(), id }
    }

    /// How many claims this process renews now.
    pub fn live_count(&self) -> usize {
        self.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).len()
    }

    /// Renews every live claim once; returns how many were renewed. A
    /// claim that is no longer its Run's (taken over after a missed lease)
    /// is logged and left alone.
    pub async fn renew(&self, store: &Store, now_ms: i64) -> usize {
        let claims: Vec<LiveClaim> =
            self.live.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).values().cloned().collect();
        let until = self.lease_until(now_ms);
        let mut renewed = 0;
        for claim in claims {
            let owner = Owner { tenant: &claim.tenant, issuer: &claim.issuer, subject: &claim.subject };
            match store.idempotency_renew(owner, &claim.key, &claim.run_id, &self.instance_id, until).await {
                Ok(true) => renewed += 1,
                Ok(false) => tracing::debug!(run_id = %claim.run_id, "idempotency claim no longer this Run's"),
                Err(error) => tracing::warn!(%error, run_id = %claim.run_id, "idempotency lease renewal failed"),
            }
        }
        renewed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_renewal_must_fit_twice_in_the_lease() {
        IdempotencySettings::default().check().unwrap();
        IdempotencySettings { lease_ms: 1_000, renew_ms: 500 }.check().unwrap();
        let (field, _) = IdempotencySettings { lease_ms: 1_000, renew_ms: 501 }.check().unwrap_err();
        assert_eq!(field, "idempotency.renew_ms");
        assert!(IdempotencySettings { lease_ms: 1_000, renew_ms: 0 }.check().is_err());
    }

    #[test]
    fn a_dropped_guard_stops_the_renewals() {
        let leases = Leases::new(IdempotencySettings::default());
        assert!(leases.instance_id().starts_with("inst_") && leases.instance_id().len() == 21);
        let first = leases.hold(Owner { tenant: "t", issuer: "i", subject: "s" }, "k1", "run_1");
        let second = leases.hold(Owner { tenant: "t", issuer: "i", subject: "s" }, "k2", "run_2");
        assert_eq!(leases.live_count(), 2);
        drop(first);
        assert_eq!(leases.live_count(), 1);
        drop(second);
        assert_eq!(leases.live_count(), 0);
        assert_ne!(Leases::new(IdempotencySettings::default()).instance_id(), leases.instance_id());
    }
}
