//! Tenants: their rows (name, disabled, quotas) and the deletion of a
//! tenant with everything it owns.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::store::{Scope, Store, StoreError};

/// A stored tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantRow {
    /// Its id.
    pub id: String,
    /// Its display name.
    pub name: String,
    /// Whether it is disabled.
    pub disabled: bool,
    /// Its quotas (JSON).
    pub quotas: String,
    /// Where it may make the platform connect (JSON, `{}` when unset;
    /// `pilotage_server::egress::EgressPolicy`).
    pub egress: String,
    /// Its policy on risk (JSON, `{}` when unset;
    /// `pilotage_server::policy::Policy`).
    pub policy: String,
    /// The identity providers trusted for it (JSON, `[]` when none;
    /// `pilotage_server::auth::IssuerConfig` each).
    pub issuers: String,
    /// When it was created.
    pub created_at: i64,
}

impl Store {
    /// Creates a tenant; `false` when it already exists.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn tenant_insert(&self, row: &TenantRow) -> Result<bool, StoreError> {
        let inserted = sqlx::query(
            "INSERT INTO tenants (id, name, disabled, quotas, created_at, egress, policy, issuers) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&row.id)
        .bind(&row.name)
        .bind(i64::from(row.disabled))
        .bind(&row.quotas)
        .bind(row.created_at)
        .bind(&row.egress)
        .bind(&row.policy)
        .bind(&row.issuers)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(inserted == 1)
    }

    /// The tenants of `scope` (one, or every tenant), by id.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn tenants(&self, scope: Scope<'_>) -> Result<Vec<TenantRow>, StoreError> {
        let rows = scope
            .query(
                "SELECT id, name, disabled, quotas, created_at, egress, policy, issuers FROM tenants {where} ORDER BY id",
                "id",
                None,
            )
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(tenant_row).collect()
    }

    /// One tenant's row, if it is stored.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn tenant(&self, id: &str) -> Result<Option<TenantRow>, StoreError> {
        Ok(self.tenants(Scope::Tenant(id)).await?.into_iter().next())
    }

    /// Updates a tenant's name, state, quotas, egress policy, policy on
    /// risk and trusted issuers.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn tenant_update(&self, row: &TenantRow) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE tenants SET name = $1, disabled = $2, quotas = $3, egress = $4, policy = $5, issuers = $6 WHERE id = $7",
        )
        .bind(&row.name)
        .bind(i64::from(row.disabled))
        .bind(&row.quotas)
        .bind(&row.egress)
        .bind(&row.policy)
        .bind(&row.issuers)
        .bind(&row.id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Deletes a tenant and everything it owns, in one transaction.
    ///
    /// # Errors
    /// [`StoreError`] when a write fails (nothing is deleted then).
    pub async fn tenant_delete(&self, tenant: &str) -> Result<(), StoreError> {
        let mut transaction = self.pool.begin().await?;
        for statement in [
            "DELETE FROM runs WHERE tenant = $1",
            "DELETE FROM idempotency_keys WHERE tenant = $1",
            "DELETE FROM promoted_programs WHERE tenant = $1",
            "DELETE FROM languages WHERE tenant = $1",
            "DELETE FROM catalog_entries WHERE tenant = $1",
            "DELETE FROM secrets WHERE tenant = $1",
            "DELETE FROM data_sources WHERE tenant = $1",
            "DELETE FROM deployments WHERE tenant = $1",
            "DELETE FROM firings WHERE tenant = $1",
            "DELETE FROM deliveries WHERE tenant = $1",
            "DELETE FROM approvals WHERE tenant = $1",
            "DELETE FROM budget_uses WHERE tenant = $1",
            "DELETE FROM usage_days WHERE tenant = $1",
            "DELETE FROM tenants WHERE id = $1",
        ] {
            sqlx::query(statement).bind(tenant).execute(&mut *transaction).await?;
        }
        // Components no other tenant serves or keeps go with it.
        sqlx::query(
            "DELETE FROM components WHERE NOT EXISTS (SELECT 1 FROM languages WHERE languages.sha256 = components.sha256)",
        )
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        Ok(())
    }
}

fn tenant_row(row: &AnyRow) -> Result<TenantRow, StoreError> {
    Ok(TenantRow {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        disabled: row.try_get::<i64, _>("disabled")? != 0,
        quotas: row.try_get("quotas")?,
        egress: row.try_get("egress")?,
        policy: row.try_get("policy")?,
        issuers: row.try_get("issuers")?,
        created_at: row.try_get("created_at")?,
    })
}
