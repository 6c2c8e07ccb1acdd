//! The audit log: who changed what, when; never a secret value.

use sqlx::Row;

use crate::store::{Store, StoreError};
use pilotage_telemetry::metrics::StoreOperation;

/// One audit record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AuditRow {
    /// When, ms since the epoch.
    pub at: i64,
    /// Who.
    pub actor: String,
    /// The kind of credential that acted (`operator-token`, `jwt`,
    /// `dev-token`, `dev`, `deployment`, `settings-file`); empty in records
    /// written before migration 15.
    pub credential: String,
    /// The issuer of that credential, when it has one.
    pub issuer: String,
    /// What (`tenant.create`, `language.upload`, …).
    pub action: String,
    /// On what.
    pub target: String,
    /// Details (JSON); never secret values.
    pub detail: String,
}

impl Store {
    /// Appends an audit record.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn audit(&self, row: &AuditRow) -> Result<(), StoreError> {
        let _timer = self.timer(StoreOperation::Audit);
        sqlx::query(
            "INSERT INTO audit_log (at, actor, action, target, detail, credential, issuer) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(row.at)
        .bind(&row.actor)
        .bind(&row.action)
        .bind(&row.target)
        .bind(&row.detail)
        .bind(&row.credential)
        .bind(&row.issuer)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The latest audit records about `tenant` (its target is the tenant
    /// or under `tenant/`), newest first.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn audit_of_tenant(&self, tenant: &str, limit: i64) -> Result<Vec<AuditRow>, StoreError> {
        let prefix = format!("{tenant}/");
        let rows = sqlx::query(
            "SELECT at, actor, action, target, detail, credential, issuer FROM audit_log \
             WHERE target = $1 OR substr(target, 1, length($2)) = $3 ORDER BY id DESC LIMIT $4",
        )
        .bind(tenant)
        .bind(&prefix)
        .bind(&prefix)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(audit_from_row).collect()
    }

    /// The latest audit records, newest first.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn audit_log(&self, limit: i64) -> Result<Vec<AuditRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT at, actor, action, target, detail, credential, issuer FROM audit_log ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(audit_from_row).collect()
    }
}

fn audit_from_row(row: &sqlx::any::AnyRow) -> Result<AuditRow, StoreError> {
    Ok(AuditRow {
        at: row.try_get("at")?,
        actor: row.try_get("actor")?,
        action: row.try_get("action")?,
        target: row.try_get("target")?,
        detail: row.try_get("detail")?,
        credential: row.try_get("credential")?,
        issuer: row.try_get("issuer")?,
    })
}
