//! Approval requests and budget uses: what a tenant's policy on risk keeps
//! between requests (migration 12).
//!
//! An approval moves `pending` → `approved` | `rejected`, and `approved`
//! → `used`, each by one conditional update, so two approvers, two
//! replicas or two racing retries cannot both win. Past `expires_at` no
//! transition succeeds, whatever the state says.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::store::{Store, StoreError};

/// A stored approval request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRow {
    /// Its id (`apr_` and 32 hex digits).
    pub id: String,
    /// The tenant.
    pub tenant: String,
    /// The issuer of the asker's credential.
    pub issuer: String,
    /// Who asked (the subject of the execute).
    pub subject: String,
    /// The Language.
    pub language: String,
    /// Digest of everything the approval is for (the server computes it).
    pub binding: String,
    /// What the approver is shown (JSON).
    pub request: String,
    /// `pending`, `approved`, `rejected` or `used`.
    pub state: String,
    /// When it was asked, ms since the epoch.
    pub created_at: i64,
    /// When it stops counting, ms since the epoch.
    pub expires_at: i64,
    /// Who decided, once decided.
    pub decided_by: Option<String>,
    /// When, once decided.
    pub decided_at: Option<i64>,
    /// From which address the decision came, once decided.
    pub decided_from: Option<String>,
    /// The Run that used it, once used.
    pub used_by_run: Option<String>,
}

/// A decision on a pending approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApprovalDecision<'a> {
    /// `approved` or `rejected`.
    pub state: &'a str,
    /// Who decides.
    pub by: &'a str,
    /// From which address.
    pub from: &'a str,
    /// Now, ms since the epoch.
    pub now_ms: i64,
}

/// The columns of an approval, in [`approval_row`]'s order (a macro, so
/// queries stay literal SQL).
macro_rules! columns {
    () => {
        "id, tenant, subject, language, binding, request, state, created_at, expires_at, decided_by, decided_at, decided_from, \
         used_by_run, issuer"
    };
}

impl Store {
    /// Stores a new approval request.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn approval_insert(&self, row: &ApprovalRow) -> Result<(), StoreError> {
        sqlx::query(concat!(
            "INSERT INTO approvals (",
            columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        ))
        .bind(&row.id)
        .bind(&row.tenant)
        .bind(&row.subject)
        .bind(&row.language)
        .bind(&row.binding)
        .bind(&row.request)
        .bind(&row.state)
        .bind(row.created_at)
        .bind(row.expires_at)
        .bind(&row.decided_by)
        .bind(row.decided_at)
        .bind(&row.decided_from)
        .bind(&row.used_by_run)
        .bind(&row.issuer)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// One approval of `tenant`, if stored.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn approval(&self, tenant: &str, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        let row = sqlx::query(concat!("SELECT ", columns!(), " FROM approvals WHERE tenant = $1 AND id = $2"))
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(approval_row).transpose()
    }

    /// An approval by id alone (the approval page, whose URL names no
    /// tenant: the approver's credential is checked against the row's).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn approval_by_id(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        let row = sqlx::query(concat!("SELECT ", columns!(), " FROM approvals WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(approval_row).transpose()
    }

    /// The approvals of `tenant` with `binding` that still count at
    /// `now_ms` (not used, not expired), newest first.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn approvals_live(
        &self,
        tenant: &str,
        binding: &str,
        now_ms: i64,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        let rows = sqlx::query(concat!("SELECT ", columns!(), " FROM approvals WHERE tenant = $1 AND binding = $2 AND expires_at > $3 AND state <> 'used' ORDER BY created_at DESC"))
        .bind(tenant)
        .bind(binding)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(approval_row).collect()
    }

    /// The latest approvals of `tenant`, newest first; only `state` when
    /// given.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn approvals_of_tenant(
        &self,
        tenant: &str,
        state: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ApprovalRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM approvals WHERE tenant = $1 AND ($2 = '' OR state = $2) ORDER BY created_at DESC LIMIT $3"
        ))
        .bind(tenant)
        .bind(state.unwrap_or(""))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(approval_row).collect()
    }

    /// Decides a pending approval that has not expired; `false` when it
    /// was not pending any more (decided, used) or has expired.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn approval_decide(
        &self,
        tenant: &str,
        id: &str,
        decision: &ApprovalDecision<'_>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE approvals SET state = $1, decided_by = $2, decided_from = $3, decided_at = $4 WHERE tenant = $5 AND id = $6 AND state = 'pending' AND expires_at > $4",
        )
        .bind(decision.state)
        .bind(decision.by)
        .bind(decision.from)
        .bind(decision.now_ms)
        .bind(tenant)
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done == 1)
    }

    /// Uses an approved approval for `run_id`, once: `false` when it is
    /// not approved (pending, rejected, already used) or has expired.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn approval_use(&self, tenant: &str, id: &str, run_id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE approvals SET state = 'used', used_by_run = $1 WHERE tenant = $2 AND id = $3 AND state = 'approved' AND expires_at > $4",
        )
        .bind(run_id)
        .bind(tenant)
        .bind(id)
        .bind(now_ms)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done == 1)
    }

    /// Takes one unit of a budget's window: `true` when the window had
    /// fewer than `limit` uses (now one more), `false` when it is spent.
    /// `holder` is a principal's key (the caller names it; issuer and
    /// subject together), or `*` for the whole tenant.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn budget_take(
        &self,
        tenant: &str,
        holder: &str,
        budget: &str,
        window_start: i64,
        limit: i64,
    ) -> Result<bool, StoreError> {
        if limit <= 0 {
            return Ok(false);
        }
        let done = sqlx::query(
            "INSERT INTO budget_uses (tenant, holder, budget, window_start, used) VALUES ($1, $2, $3, $4, 1) \
             ON CONFLICT (tenant, holder, budget, window_start) DO UPDATE SET used = budget_uses.used + 1 WHERE budget_uses.used < $5",
        )
        .bind(tenant)
        .bind(holder)
        .bind(budget)
        .bind(window_start)
        .bind(limit)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done == 1)
    }

    /// Gives back one unit taken by [`Store::budget_take`] (a Run refused
    /// after it took its unit, before anything ran).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn budget_give_back(
        &self,
        tenant: &str,
        holder: &str,
        budget: &str,
        window_start: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE budget_uses SET used = used - 1 WHERE tenant = $1 AND holder = $2 AND budget = $3 AND window_start = $4 AND used > 0",
        )
        .bind(tenant)
        .bind(holder)
        .bind(budget)
        .bind(window_start)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Deletes approvals that expired before `before_ms` and budget
    /// windows that started before it (the sweep); returns how many rows
    /// went.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn approvals_sweep(&self, before_ms: i64) -> Result<u64, StoreError> {
        let approvals =
            sqlx::query("DELETE FROM approvals WHERE expires_at < $1").bind(before_ms).execute(&self.pool).await?;
        let windows =
            sqlx::query("DELETE FROM budget_uses WHERE window_start < $1").bind(before_ms).execute(&self.pool).await?;
        Ok(approvals.rows_affected() + windows.rows_affected())
    }
}

fn approval_row(row: &AnyRow) -> Result<ApprovalRow, StoreError> {
    Ok(ApprovalRow {
        id: row.try_get("id")?,
        tenant: row.try_get("tenant")?,
        issuer: row.try_get("issuer")?,
        subject: row.try_get("subject")?,
        language: row.try_get("language")?,
        binding: row.try_get("binding")?,
        request: row.try_get("request")?,
        state: row.try_get("state")?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
        decided_by: row.try_get("decided_by")?,
        decided_at: row.try_get("decided_at")?,
        decided_from: row.try_get("decided_from")?,
        used_by_run: row.try_get("used_by_run")?,
    })
}
