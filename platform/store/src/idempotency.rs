//! Idempotency keys (Part II §6.5.6): claimed atomically by a conditional
//! insert, each with the Run that holds it, its owner (a server process)
//! and a lease the owner renews; a retry takes over a claim whose lease ran
//! out, in one conditional update.

use sqlx::Row;

use crate::owner::Owner;
use crate::store::{Store, StoreError};
use pilotage_telemetry::metrics::StoreOperation;

/// What claiming an idempotency key found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key was free and is now ours.
    Claimed,
    /// The key is held.
    Held(HeldClaim),
}

/// A held idempotency key (Part II §6.5.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldClaim {
    /// Hash of the runnable it was claimed for.
    pub runnable_hash: String,
    /// Hash of the input it was claimed for.
    pub input_hash: String,
    /// The recorded response, once the first Run finished (or was found
    /// interrupted).
    pub response: Option<String>,
    /// The Run that holds it; `None` for a claim made before leases.
    pub run_id: Option<String>,
    /// The instance id of the server process running it.
    pub owner: Option<String>,
    /// Until when its owner's lease holds (ms since the Unix epoch); `None`
    /// for a claim made before leases, which counts as expired.
    pub lease_expires_at: Option<i64>,
}

impl HeldClaim {
    /// Whether the Run is still unfinished and nobody renewed its lease in
    /// time: its process is presumed gone.
    pub fn lease_expired(&self, now_ms: i64) -> bool {
        self.response.is_none() && self.lease_expires_at.is_none_or(|lease| lease <= now_ms)
    }
}

/// A new idempotency claim: the key, what it is for, the Run, its owner
/// and the lease.
#[derive(Clone, Debug)]
pub struct NewClaim<'a> {
    /// The caller.
    pub principal: Owner<'a>,
    /// The idempotency key.
    pub key: &'a str,
    /// Hash of the runnable.
    pub runnable_hash: &'a str,
    /// Hash of the input and context.
    pub input_hash: &'a str,
    /// The Run this claim starts.
    pub run_id: &'a str,
    /// The instance id of this server process.
    pub owner: &'a str,
    /// Now, in ms since the Unix epoch.
    pub now_ms: i64,
    /// The end of the first lease.
    pub lease_expires_at: i64,
    /// The end of the deduplication window.
    pub expires_at: i64,
}

impl Store {
    /// Claims an idempotency key atomically (a conditional insert), or
    /// reports who holds it. A key past its deduplication window is
    /// released first.
    ///
    /// # Errors
    /// [`StoreError`] when the database fails.
    pub async fn idempotency_claim(&self, claim: &NewClaim<'_>) -> Result<Claim, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyClaim);
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE tenant = $1 AND issuer = $2 AND subject = $3 AND idempotency_key = $4 AND expires_at <= $5",
        )
        .bind(claim.principal.tenant)
        .bind(claim.principal.issuer)
        .bind(claim.principal.subject)
        .bind(claim.key)
        .bind(claim.now_ms)
        .execute(&self.pool)
        .await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (tenant, issuer, subject, idempotency_key, runnable_hash, input_hash, state, response, created_at, \
             expires_at, run_id, owner, lease_expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'running', NULL, $7, $8, $9, $10, $11) \
             ON CONFLICT (tenant, issuer, subject, idempotency_key) DO NOTHING",
        )
        .bind(claim.principal.tenant)
        .bind(claim.principal.issuer)
        .bind(claim.principal.subject)
        .bind(claim.key)
        .bind(claim.runnable_hash)
        .bind(claim.input_hash)
        .bind(claim.now_ms)
        .bind(claim.expires_at)
        .bind(claim.run_id)
        .bind(claim.owner)
        .bind(claim.lease_expires_at)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if inserted == 1 {
            return Ok(Claim::Claimed);
        }
        Ok(self.idempotency_get(claim.principal, claim.key).await?.map_or(Claim::Claimed, Claim::Held))
    }

    /// Who holds a key, if anyone.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn idempotency_get(&self, principal: Owner<'_>, key: &str) -> Result<Option<HeldClaim>, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyGet);
        let row = sqlx::query(
            "SELECT runnable_hash, input_hash, response, run_id, owner, lease_expires_at FROM idempotency_keys \
             WHERE tenant = $1 AND issuer = $2 AND subject = $3 AND idempotency_key = $4",
        )
        .bind(principal.tenant)
        .bind(principal.issuer)
        .bind(principal.subject)
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(HeldClaim {
                runnable_hash: row.try_get("runnable_hash")?,
                input_hash: row.try_get("input_hash")?,
                response: row.try_get::<Option<String>, _>("response")?,
                run_id: row.try_get::<Option<String>, _>("run_id")?,
                owner: row.try_get::<Option<String>, _>("owner")?,
                lease_expires_at: row.try_get::<Option<i64>, _>("lease_expires_at")?,
            })
        })
        .transpose()
    }

    /// Extends the lease of a running claim that `owner` holds for
    /// `run_id`. Returns false when the claim is no longer that Run's (it
    /// finished, or a retry took it over after its lease ran out).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn idempotency_renew(
        &self,
        principal: Owner<'_>,
        key: &str,
        run_id: &str,
        owner: &str,
        lease_expires_at: i64,
    ) -> Result<bool, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyRenew);
        let renewed = sqlx::query(
            "UPDATE idempotency_keys SET lease_expires_at = $1 WHERE tenant = $2 AND issuer = $3 AND subject = $4 \
             AND idempotency_key = $5 AND state = 'running' AND run_id = $6 AND owner = $7",
        )
        .bind(lease_expires_at)
        .bind(principal.tenant)
        .bind(principal.issuer)
        .bind(principal.subject)
        .bind(key)
        .bind(run_id)
        .bind(owner)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(renewed == 1)
    }

    /// Records the response of the Run `run_id` that holds a key. Returns
    /// false when the key is no longer that Run's (a retry took it over
    /// after its lease ran out, and recorded the interrupted outcome).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn idempotency_complete(
        &self,
        principal: Owner<'_>,
        key: &str,
        run_id: &str,
        response: &str,
    ) -> Result<bool, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyComplete);
        let completed = sqlx::query(
            "UPDATE idempotency_keys SET state = 'done', response = $1 WHERE tenant = $2 AND issuer = $3 AND subject = $4 \
             AND idempotency_key = $5 AND state = 'running' AND run_id = $6",
        )
        .bind(response)
        .bind(principal.tenant)
        .bind(principal.issuer)
        .bind(principal.subject)
        .bind(key)
        .bind(run_id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(completed == 1)
    }

    /// Takes over a running claim whose lease ran out, recording
    /// `response` (the interrupted outcome) as its result, in one
    /// conditional update: of two retries racing, exactly one gets true;
    /// a claim renewed, completed or taken over meanwhile gives false.
    /// `run_id` is the Run the caller found holding it (`None` for a claim
    /// made before leases).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    #[allow(clippy::too_many_arguments)]
    pub async fn idempotency_take_over(
        &self,
        principal: Owner<'_>,
        key: &str,
        run_id: Option<&str>,
        owner: &str,
        now_ms: i64,
        response: &str,
    ) -> Result<bool, StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyTakeOver);
        let taken = sqlx::query(
            "UPDATE idempotency_keys SET state = 'done', response = $1, owner = $2 WHERE tenant = $3 AND issuer = $4 \
             AND subject = $5 AND idempotency_key = $6 AND state = 'running' AND COALESCE(run_id, '') = $7 \
             AND COALESCE(lease_expires_at, 0) <= $8",
        )
        .bind(response)
        .bind(owner)
        .bind(principal.tenant)
        .bind(principal.issuer)
        .bind(principal.subject)
        .bind(key)
        .bind(run_id.unwrap_or(""))
        .bind(now_ms)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(taken == 1)
    }

    /// Releases a claimed key whose Run `run_id` never started (an internal
    /// failure before execution), so a retry can run.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn idempotency_release(&self, principal: Owner<'_>, key: &str, run_id: &str) -> Result<(), StoreError> {
        let _timer = self.timer(StoreOperation::IdempotencyRelease);
        sqlx::query(
            "DELETE FROM idempotency_keys WHERE tenant = $1 AND issuer = $2 AND subject = $3 AND idempotency_key = $4 \
             AND state = 'running' AND run_id = $5",
        )
        .bind(principal.tenant)
        .bind(principal.issuer)
        .bind(principal.subject)
        .bind(key)
        .bind(run_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
