//! Deployments, their firings and webhook deliveries (migrations 8 and 9; Part
//! II §6.5.7, docs/architecture.md "Deployments"). Claims are rows with a
//! primary key: an insert that conflicts lost the claim, so each trigger
//! instance fires once however many replicas share the database.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::store::{Store, StoreError};

/// What [`Store::firing_claim_within`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FiringClaim {
    /// The instance is this caller's to run.
    Claimed,
    /// Another caller (on any replica) claimed the instance first.
    Taken,
    /// The deployment fired its quota's worth in the window: nothing was
    /// claimed.
    OverQuota,
}

/// What [`Store::deployment_put_within`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeploymentPut {
    /// Stored as this version.
    Stored(i64),
    /// The name is new and the tenant holds its quota's worth: nothing was
    /// stored.
    OverQuota,
}

/// One stored deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeploymentRow {
    /// The tenant.
    pub tenant: String,
    /// The deployment's name (unique in the tenant).
    pub name: String,
    /// The Language identifier.
    pub language: String,
    /// 1 for the first deploy of the name, +1 per replacement.
    pub version: i64,
    /// The issuer of the deploying credential.
    pub issuer: String,
    /// The deploying subject; firings run as it (with its issuer).
    pub subject: String,
    /// The deploying principal's scopes, a JSON array.
    pub scopes: String,
    /// The body the component installed (run at each firing).
    pub body: String,
    /// The validation context, JSON, when one was given.
    pub context: Option<String>,
    /// The triggers, a JSON array (`deploy::Trigger`).
    pub triggers: String,
    /// Referenced entry id → baseline, a JSON object (drift check).
    pub baseline: String,
    /// The body plan's `max_risk`.
    pub risk: String,
    /// The body plan's `max_risk_hints`, JSON.
    pub risk_hints: String,
    /// Whether triggers fire.
    pub enabled: bool,
    /// The installation Run.
    pub run_id: String,
    /// The assertions (`x-assertions`, a JSON array) evaluated on every
    /// firing; `None` when the deploy carried none.
    pub assertions: Option<String>,
    /// First deployed, ms since the Unix epoch.
    pub created_at: i64,
    /// Last deployed, enabled or disabled, ms since the Unix epoch.
    pub updated_at: i64,
    /// The next schedule tick, ms since the Unix epoch.
    pub next_due: Option<i64>,
}

/// One claimed trigger instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FiringRow {
    /// The tenant.
    pub tenant: String,
    /// The deployment's name.
    pub deployment: String,
    /// Which trigger instance: `schedule:<tick ms>`, `webhook:<delivery>`,
    /// `mqtt:<message>`.
    pub instance: String,
    /// The deployment version that fired.
    pub version: i64,
    /// The firing's Run.
    pub run_id: String,
    /// The replica that claimed it.
    pub owner: String,
    /// When, ms since the Unix epoch.
    pub claimed_at: i64,
}

const COLUMNS: &str = "tenant, name, language, version, subject, scopes, body, context, triggers, baseline, risk, \
                       risk_hints, enabled, run_id, created_at, updated_at, next_due, issuer, assertions";

fn deployment_row(row: &AnyRow) -> Result<DeploymentRow, StoreError> {
    Ok(DeploymentRow {
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        language: row.try_get("language")?,
        version: row.try_get("version")?,
        issuer: row.try_get("issuer")?,
        subject: row.try_get("subject")?,
        scopes: row.try_get("scopes")?,
        body: row.try_get("body")?,
        context: row.try_get("context")?,
        triggers: row.try_get("triggers")?,
        baseline: row.try_get("baseline")?,
        risk: row.try_get("risk")?,
        risk_hints: row.try_get("risk_hints")?,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        run_id: row.try_get("run_id")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        next_due: row.try_get("next_due")?,
        assertions: row.try_get("assertions")?,
    })
}

impl Store {
    /// Installs `row` under its (tenant, name), replacing a previous
    /// version (whose `created_at` is kept); returns the version stored.
    /// `row.version` is ignored.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn deployment_put(&self, row: &DeploymentRow) -> Result<i64, StoreError> {
        match self.deployment_put_within(row, i64::MAX).await? {
            DeploymentPut::Stored(version) => Ok(version),
            DeploymentPut::OverQuota => Err(StoreError::Corrupt("a tenant holds i64::MAX deployments".into())),
        }
    }

    /// [`Store::deployment_put`] within the `max_deployments` quota: a new
    /// name is stored only while the tenant holds fewer than `limit`
    /// deployments (replacing a name always is), counted and stored in one
    /// step under the tenant's lock ([`Store::serialized`]), so concurrent
    /// deploys on any replica never overshoot the quota.
    ///
    /// # Errors
    /// [`StoreError`] when a read or the write fails.
    pub async fn deployment_put_within(&self, row: &DeploymentRow, limit: i64) -> Result<DeploymentPut, StoreError> {
        let mut transaction = self.serialized(&format!("deployments\u{1f}{}", row.tenant)).await?;
        let previous = sqlx::query("SELECT version, created_at FROM deployments WHERE tenant = $1 AND name = $2")
            .bind(&row.tenant)
            .bind(&row.name)
            .fetch_optional(&mut *transaction)
            .await?;
        let (version, created_at) = match &previous {
            Some(previous) => (previous.try_get::<i64, _>("version")? + 1, previous.try_get("created_at")?),
            None => (1, row.created_at),
        };
        if previous.is_none() {
            let held = sqlx::query("SELECT COUNT(*) AS n FROM deployments WHERE tenant = $1")
                .bind(&row.tenant)
                .fetch_one(&mut *transaction)
                .await?
                .try_get::<i64, _>("n")?;
            if held >= limit {
                return Ok(DeploymentPut::OverQuota);
            }
        }
        sqlx::query("DELETE FROM deployments WHERE tenant = $1 AND name = $2")
            .bind(&row.tenant)
            .bind(&row.name)
            .execute(&mut *transaction)
            .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO deployments ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)"
        )))
        .bind(&row.tenant)
        .bind(&row.name)
        .bind(&row.language)
        .bind(version)
        .bind(&row.subject)
        .bind(&row.scopes)
        .bind(&row.body)
        .bind(&row.context)
        .bind(&row.triggers)
        .bind(&row.baseline)
        .bind(&row.risk)
        .bind(&row.risk_hints)
        .bind(i64::from(row.enabled))
        .bind(&row.run_id)
        .bind(created_at)
        .bind(row.updated_at)
        .bind(row.next_due)
        .bind(&row.issuer)
        .bind(&row.assertions)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        Ok(DeploymentPut::Stored(version))
    }

    /// One deployment.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn deployment_get(&self, tenant: &str, name: &str) -> Result<Option<DeploymentRow>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM deployments WHERE tenant = $1 AND name = $2"
        )))
        .bind(tenant)
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(deployment_row).transpose()
    }

    /// A tenant's deployments, by name.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn deployments_of_tenant(&self, tenant: &str) -> Result<Vec<DeploymentRow>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM deployments WHERE tenant = $1 ORDER BY name"
        )))
        .bind(tenant)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(deployment_row).collect()
    }

    /// Every enabled deployment with a trigger of `kind` ("webhook",
    /// "mqtt") in any tenant (the trigger sources' subscriptions).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn deployments_with_trigger(&self, kind: &str) -> Result<Vec<DeploymentRow>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM deployments WHERE enabled = 1 AND triggers LIKE $1 ORDER BY tenant, name"
        )))
        .bind(format!("%\"kind\":\"{kind}\"%"))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(deployment_row).collect()
    }

    /// Enabled deployments of every tenant (the `pilotage_deployments`
    /// gauge).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn deployments_enabled_count(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM deployments WHERE enabled = 1").fetch_one(&self.pool).await?;
        Ok(row.try_get("n")?)
    }

    /// Enables or disables a deployment, setting its next tick; false when
    /// it does not exist.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn deployment_set_enabled(
        &self,
        tenant: &str,
        name: &str,
        enabled: bool,
        next_due: Option<i64>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE deployments SET enabled = $3, next_due = $4, updated_at = $5 WHERE tenant = $1 AND name = $2",
        )
        .bind(tenant)
        .bind(name)
        .bind(i64::from(enabled))
        .bind(next_due)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Removes a deployment (its firings' Runs stay until they expire);
    /// false when it does not exist.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn deployment_delete(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM deployments WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Enabled deployments whose next tick is at or before `now_ms`, the
    /// most overdue first, at most `limit`. Served by the `next_due` index:
    /// the cost follows the deployments due, not the deployments installed.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn deployments_due(&self, now_ms: i64, limit: i64) -> Result<Vec<DeploymentRow>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM deployments WHERE next_due IS NOT NULL AND next_due <= $1 ORDER BY next_due LIMIT $2"
        )))
        .bind(now_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(deployment_row).collect()
    }

    /// The earliest next tick of any deployment (index read).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn deployments_next_due(&self) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query("SELECT MIN(next_due) AS due FROM deployments WHERE next_due IS NOT NULL")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("due")?)
    }

    /// Moves a deployment's next tick from `from` to `to`, only if it is
    /// still `from` at `version`: of the replicas that saw the same tick
    /// due, exactly one succeeds.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn deployment_advance(
        &self,
        tenant: &str,
        name: &str,
        version: i64,
        from: i64,
        to: Option<i64>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE deployments SET next_due = $5 WHERE tenant = $1 AND name = $2 AND version = $3 AND next_due = $4",
        )
        .bind(tenant)
        .bind(name)
        .bind(version)
        .bind(from)
        .bind(to)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Claims one trigger instance of a deployment within the
    /// `max_firings_per_minute` quota: counts the deployment's firings
    /// claimed at or after `since_ms` and claims the instance only while
    /// fewer than `limit`, in one step under the deployment's lock
    /// ([`Store::serialized`]), so concurrent firings on any replica never
    /// overshoot the quota.
    ///
    /// # Errors
    /// [`StoreError`] when the read or the write fails.
    pub async fn firing_claim_within(
        &self,
        row: &FiringRow,
        since_ms: i64,
        limit: i64,
    ) -> Result<FiringClaim, StoreError> {
        let mut transaction = self.serialized(&format!("firings\u{1f}{}\u{1f}{}", row.tenant, row.deployment)).await?;
        let claimed =
            sqlx::query("SELECT COUNT(*) AS n FROM firings WHERE tenant = $1 AND deployment = $2 AND instance = $3")
                .bind(&row.tenant)
                .bind(&row.deployment)
                .bind(&row.instance)
                .fetch_one(&mut *transaction)
                .await?
                .try_get::<i64, _>("n")?;
        if claimed > 0 {
            return Ok(FiringClaim::Taken);
        }
        let recent =
            sqlx::query("SELECT COUNT(*) AS n FROM firings WHERE tenant = $1 AND deployment = $2 AND claimed_at >= $3")
                .bind(&row.tenant)
                .bind(&row.deployment)
                .bind(since_ms)
                .fetch_one(&mut *transaction)
                .await?
                .try_get::<i64, _>("n")?;
        if recent >= limit {
            return Ok(FiringClaim::OverQuota);
        }
        sqlx::query(
            "INSERT INTO firings (tenant, deployment, instance, version, run_id, owner, claimed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&row.tenant)
        .bind(&row.deployment)
        .bind(&row.instance)
        .bind(row.version)
        .bind(&row.run_id)
        .bind(&row.owner)
        .bind(row.claimed_at)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        Ok(FiringClaim::Claimed)
    }

    /// The deployment and trigger instance whose firing started Run
    /// `run_id` of `tenant`; `None` when no firing did.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn firing_of_run(&self, tenant: &str, run_id: &str) -> Result<Option<(String, String)>, StoreError> {
        let row = sqlx::query("SELECT deployment, instance FROM firings WHERE tenant = $1 AND run_id = $2")
            .bind(tenant)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| Ok((row.try_get("deployment")?, row.try_get("instance")?))).transpose()
    }

    /// How many times each of a tenant's deployments fired at or after
    /// `since_ms`, by deployment name.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn firings_count_by_deployment(
        &self,
        tenant: &str,
        since_ms: i64,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT deployment, COUNT(*) AS n FROM firings WHERE tenant = $1 AND claimed_at >= $2 GROUP BY deployment ORDER BY deployment",
        )
        .bind(tenant)
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|row| Ok((row.try_get("deployment")?, row.try_get("n")?))).collect()
    }

    /// A deployment's firings, newest first, at most `limit`.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn firings_of(&self, tenant: &str, deployment: &str, limit: i64) -> Result<Vec<FiringRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, deployment, instance, version, run_id, owner, claimed_at FROM firings \
             WHERE tenant = $1 AND deployment = $2 ORDER BY claimed_at DESC, instance DESC LIMIT $3",
        )
        .bind(tenant)
        .bind(deployment)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(FiringRow {
                    tenant: row.try_get("tenant")?,
                    deployment: row.try_get("deployment")?,
                    instance: row.try_get("instance")?,
                    version: row.try_get("version")?,
                    run_id: row.try_get("run_id")?,
                    owner: row.try_get("owner")?,
                    claimed_at: row.try_get("claimed_at")?,
                })
            })
            .collect()
    }

    /// Records a webhook delivery by its signature; false when the same
    /// delivery was already received (a replay).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn delivery_claim(
        &self,
        tenant: &str,
        source: &str,
        signature: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO deliveries (tenant, source, signature, received_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT DO NOTHING",
        )
        .bind(tenant)
        .bind(source)
        .bind(signature)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Forgets firings older than `firings_before` and deliveries older
    /// than `deliveries_before` (ms since the Unix epoch).
    ///
    /// # Errors
    /// [`StoreError`] when a write fails.
    pub async fn deployments_sweep(&self, firings_before: i64, deliveries_before: i64) -> Result<u64, StoreError> {
        let firings = sqlx::query("DELETE FROM firings WHERE claimed_at < $1")
            .bind(firings_before)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let deliveries = sqlx::query("DELETE FROM deliveries WHERE received_at < $1")
            .bind(deliveries_before)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(firings + deliveries)
    }
}
