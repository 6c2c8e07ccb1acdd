//! Registered data sources: the spec (JSON, without the URL) and the URL
//! sealed by the platform's secret box.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::store::{Scope, Store, StoreError};

/// One stored data source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSourceRow {
    /// The tenant.
    pub tenant: String,
    /// The tenant's name for it.
    pub name: String,
    /// Its `DataSourceSpec`
    /// as JSON, without the URL.
    pub spec: String,
    /// The nonce of the sealed URL.
    pub nonce: Vec<u8>,
    /// The URL, sealed by the platform's secret box.
    pub sealed_url: Vec<u8>,
    /// Last change, ms since the Unix epoch.
    pub updated_at: i64,
}

impl Store {
    /// Stores a data source: its spec (JSON, without the URL) and its
    /// sealed URL.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn data_source_put(&self, row: &DataSourceRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO data_sources (tenant, name, spec, nonce, sealed_url, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (tenant, name) DO UPDATE SET spec = excluded.spec, nonce = excluded.nonce, \
             sealed_url = excluded.sealed_url, updated_at = excluded.updated_at",
        )
        .bind(&row.tenant)
        .bind(&row.name)
        .bind(&row.spec)
        .bind(row.nonce.clone())
        .bind(row.sealed_url.clone())
        .bind(row.updated_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The data sources of `scope`, by tenant then name.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn data_sources(&self, scope: Scope<'_>) -> Result<Vec<DataSourceRow>, StoreError> {
        let rows = scope
            .query(
            "SELECT tenant, name, spec, nonce, sealed_url, updated_at FROM data_sources {where} ORDER BY tenant, name",
            "tenant",
            None,
        )
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(data_source_row).collect()
    }

    /// Deletes a data source.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn data_source_delete(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("DELETE FROM data_sources WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .execute(&self.pool)
            .await?
            .rows_affected()
            > 0)
    }
}

fn data_source_row(row: &AnyRow) -> Result<DataSourceRow, StoreError> {
    Ok(DataSourceRow {
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        spec: row.try_get("spec")?,
        nonce: row.try_get("nonce")?,
        sealed_url: row.try_get("sealed_url")?,
        updated_at: row.try_get("updated_at")?,
    })
}
