//! Uploaded Language versions and their components: a version names its
//! component by SHA-256, and each component's bytes are stored once,
//! whoever uploaded them.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::store::{Scope, Store, StoreError};

/// A stored Language component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LanguageRow {
    /// Its tenant.
    pub tenant: String,
    /// The Language identifier.
    pub name: String,
    /// SHA-256 of the component (hex); its bytes are in `components`
    /// ([`Store::component_bytes`]), stored once whoever uploaded them.
    pub sha256: String,
    /// The lint findings at upload (JSON).
    pub lint: String,
    /// Whether this version is the one served.
    pub active: bool,
    /// Who uploaded it.
    pub uploaded_by: String,
    /// When.
    pub created_at: i64,
}

impl Store {
    /// Stores an uploaded version of a Language: its row, and its
    /// component `bytes` under `row.sha256` unless those bytes are already
    /// stored (for any tenant). A no-op when the tenant already has this
    /// version.
    ///
    /// `row.sha256` must be the SHA-256 of `bytes` (the caller loaded them).
    ///
    /// # Errors
    /// [`StoreError`] when a write fails (nothing is stored then).
    pub async fn language_insert(&self, row: &LanguageRow, bytes: &[u8]) -> Result<(), StoreError> {
        let insert_component = "INSERT INTO components (sha256, bytes) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING";
        let mut transaction = self.pool.begin().await?;
        sqlx::query(insert_component).bind(&row.sha256).bind(bytes.to_vec()).execute(&mut *transaction).await?;
        sqlx::query(
            "INSERT INTO languages (tenant, name, sha256, lint, active, uploaded_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant, name, sha256) DO NOTHING",
        )
        .bind(&row.tenant)
        .bind(&row.name)
        .bind(&row.sha256)
        .bind(&row.lint)
        .bind(i64::from(row.active))
        .bind(&row.uploaded_by)
        .bind(row.created_at)
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        // Another replica deleting its last tenant using these bytes may
        // have removed them between our insert (a no-op on an existing
        // row) and our commit; our row now keeps them, so storing them
        // again cannot be undone by a later deletion.
        if self.component_bytes(&row.sha256).await?.is_none() {
            sqlx::query(insert_component).bind(&row.sha256).bind(bytes.to_vec()).execute(&self.pool).await?;
        }
        Ok(())
    }

    /// The bytes of a stored component, by its SHA-256 (hex).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn component_bytes(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query("SELECT bytes FROM components WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(row) => Some(row.try_get("bytes")?),
            None => None,
        })
    }

    /// The stored Language versions of `scope`, by tenant, name and upload
    /// time; only the served ones when `served_only` (start-up and a
    /// replica re-reading a tenant install those).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn languages(&self, scope: Scope<'_>, served_only: bool) -> Result<Vec<LanguageRow>, StoreError> {
        let rows = scope
            .query(
                "SELECT tenant, name, sha256, lint, active, uploaded_by, created_at FROM languages \
             {where} ORDER BY tenant, name, created_at",
                "tenant",
                served_only.then_some("active <> 0"),
            )
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(language_row).collect()
    }

    /// Makes one version of a Language the served one.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn language_activate(&self, tenant: &str, name: &str, sha256: &str) -> Result<bool, StoreError> {
        let mut transaction = self.pool.begin().await?;
        sqlx::query("UPDATE languages SET active = 0 WHERE tenant = $1 AND name = $2")
            .bind(tenant)
            .bind(name)
            .execute(&mut *transaction)
            .await?;
        let updated = sqlx::query("UPDATE languages SET active = 1 WHERE tenant = $1 AND name = $2 AND sha256 = $3")
            .bind(tenant)
            .bind(name)
            .bind(sha256)
            .execute(&mut *transaction)
            .await?
            .rows_affected();
        transaction.commit().await?;
        Ok(updated == 1)
    }

    /// Retires a Language: no version is served any more.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn language_retire(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        let updated = sqlx::query("UPDATE languages SET active = 0 WHERE tenant = $1 AND name = $2 AND active = 1")
            .bind(tenant)
            .bind(name)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(updated > 0)
    }
}

fn language_row(row: &AnyRow) -> Result<LanguageRow, StoreError> {
    Ok(LanguageRow {
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        sha256: row.try_get("sha256")?,
        lint: row.try_get("lint")?,
        active: row.try_get::<i64, _>("active")? != 0,
        uploaded_by: row.try_get("uploaded_by")?,
        created_at: row.try_get("created_at")?,
    })
}
