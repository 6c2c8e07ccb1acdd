//! Operator catalog entries, each stored as the JSON of the engine's
//! `StoredEntry` (entry, visibility, binding) under its tenant and id.

use sqlx::Row;

use crate::store::{Scope, Store, StoreError};

impl Store {
    /// Inserts or replaces catalog entries (each a JSON `StoredEntry`).
    ///
    /// # Errors
    /// [`StoreError`] when a write fails (nothing is written then).
    pub async fn catalog_put(&self, tenant: &str, entries: &[(String, String)], now_ms: i64) -> Result<(), StoreError> {
        let mut transaction = self.pool.begin().await?;
        for (id, stored) in entries {
            sqlx::query(
                "INSERT INTO catalog_entries (tenant, id, stored, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (tenant, id) DO UPDATE SET stored = excluded.stored, updated_at = excluded.updated_at",
            )
            .bind(tenant)
            .bind(id)
            .bind(stored)
            .bind(now_ms)
            .execute(&mut *transaction)
            .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    /// Deletes catalog entries.
    ///
    /// # Errors
    /// [`StoreError`] when a write fails.
    pub async fn catalog_delete(&self, tenant: &str, ids: &[String]) -> Result<(), StoreError> {
        let mut transaction = self.pool.begin().await?;
        for id in ids {
            sqlx::query("DELETE FROM catalog_entries WHERE tenant = $1 AND id = $2")
                .bind(tenant)
                .bind(id)
                .execute(&mut *transaction)
                .await?;
        }
        transaction.commit().await?;
        Ok(())
    }

    /// The stored catalog entries of `scope`, as (tenant, JSON
    /// `StoredEntry`), by tenant then id.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn catalog_entries(&self, scope: Scope<'_>) -> Result<Vec<(String, String)>, StoreError> {
        let rows = scope
            .query("SELECT tenant, stored FROM catalog_entries {where} ORDER BY tenant, id", "tenant", None)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|row| Ok((row.try_get("tenant")?, row.try_get("stored")?))).collect()
    }
}
