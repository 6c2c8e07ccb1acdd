//! Tenant secrets at rest: the nonce and ciphertext [`crate::sealing`]
//! made; the store never sees a value in clear.

use sqlx::Row;

use crate::store::{Store, StoreError};

impl Store {
    /// Stores an encrypted secret.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn secret_put(
        &self,
        tenant: &str,
        name: &str,
        nonce: &[u8],
        ciphertext: &[u8],
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO secrets (tenant, name, nonce, ciphertext, updated_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (tenant, name) DO UPDATE SET nonce = excluded.nonce, ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
        )
        .bind(tenant)
        .bind(name)
        .bind(nonce.to_vec())
        .bind(ciphertext.to_vec())
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// One encrypted secret: (nonce, ciphertext).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn secret_get(&self, tenant: &str, name: &str) -> Result<Option<(Vec<u8>, Vec<u8>)>, StoreError> {
        let row = sqlx::query("SELECT nonce, ciphertext FROM secrets WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| Ok((row.try_get("nonce")?, row.try_get("ciphertext")?))).transpose()
    }

    /// The names of a tenant's secrets.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn secret_names(&self, tenant: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT name FROM secrets WHERE tenant = $1 ORDER BY name")
            .bind(tenant)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(|row| Ok(row.try_get::<String, _>("name")?)).collect()
    }

    /// Deletes a secret.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn secret_delete(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("DELETE FROM secrets WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .execute(&self.pool)
            .await?
            .rows_affected()
            > 0)
    }
}
