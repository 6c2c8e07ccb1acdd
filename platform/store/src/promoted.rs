//! Promoted programs (Part II §6.7): immutable bodies under a
//! content-derived reference, with the baseline of every entry they
//! referenced at promotion.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::store::{Scope, Store, StoreError};
use pilotage_telemetry::metrics::StoreOperation;

/// A stored promoted program.
#[derive(Clone, Debug, PartialEq)]
pub struct PromotedRow {
    /// Its tenant.
    pub tenant: String,
    /// The content-derived reference.
    pub program_ref: String,
    /// Its Language.
    pub language: String,
    /// The published catalog entry (JSON).
    pub entry: String,
    /// The immutable body (JSON).
    pub body: String,
    /// Load-bearing fields of every referenced entry at promotion (JSON).
    pub baseline: String,
    /// Who promoted it.
    pub promoter: String,
    /// When.
    pub created_at: i64,
}

impl Store {
    /// Stores a promoted program; storing the same reference again is a
    /// no-op (references are content-derived).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn promoted_insert(&self, row: &PromotedRow) -> Result<(), StoreError> {
        let _timer = self.timer(StoreOperation::PromotedInsert);
        sqlx::query(
            "INSERT INTO promoted_programs (tenant, program_ref, language, entry, body, baseline, promoter, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant, program_ref) DO NOTHING",
        )
        .bind(&row.tenant)
        .bind(&row.program_ref)
        .bind(&row.language)
        .bind(&row.entry)
        .bind(&row.body)
        .bind(&row.baseline)
        .bind(&row.promoter)
        .bind(row.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The promoted programs of `scope`, by tenant then reference.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn promoted(&self, scope: Scope<'_>) -> Result<Vec<PromotedRow>, StoreError> {
        let rows = scope
            .query(
            "SELECT tenant, program_ref, language, entry, body, baseline, promoter, created_at FROM promoted_programs \
             {where} ORDER BY tenant, program_ref",
            "tenant",
            None,
        )
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(promoted_row).collect()
    }
}

fn promoted_row(row: &AnyRow) -> Result<PromotedRow, StoreError> {
    Ok(PromotedRow {
        tenant: row.try_get("tenant")?,
        program_ref: row.try_get("program_ref")?,
        language: row.try_get("language")?,
        entry: row.try_get("entry")?,
        body: row.try_get("body")?,
        baseline: row.try_get("baseline")?,
        promoter: row.try_get("promoter")?,
        created_at: row.try_get("created_at")?,
    })
}
