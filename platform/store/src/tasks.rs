//! MCP tasks (the Tasks extension): an execute call answered at once with
//! a task handle, its Run's end recorded when it comes. Every query names
//! the task's owner (tenant, issuer, subject): a task is its caller's
//! alone.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::owner::Owner;
use crate::store::{Store, StoreError};

/// One task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    /// Unguessable id (the caller holds it).
    pub task_id: String,
    /// Its tenant.
    pub tenant: String,
    /// The issuer of the credential that created it.
    pub issuer: String,
    /// The subject that created it; only they (of that issuer) can read or
    /// cancel it.
    pub subject: String,
    /// The execute tool called.
    pub tool: String,
    /// `working`, `completed`, `failed` or `cancelled`.
    pub status: String,
    /// A line on the state, for people.
    pub status_message: Option<String>,
    /// The tools/call result (JSON text) once the Run ended.
    pub result: Option<String>,
    /// Whether a cancellation was asked for.
    pub cancel_requested: bool,
    /// The instance id of the replica running it.
    pub runner: String,
    /// When the runner last said it is alive (ms since the epoch).
    pub heartbeat_at: i64,
    /// Time to live from creation, in milliseconds.
    pub ttl_ms: i64,
    /// When it was created.
    pub created_at: i64,
    /// When its state last changed.
    pub updated_at: i64,
    /// When it is swept.
    pub expires_at: i64,
}

/// The columns of `tasks`, in [`TaskRow`]'s order (a literal, so every
/// query stays one static string).
macro_rules! columns {
    () => {
        "task_id, tenant, subject, tool, status, status_message, result, cancel_requested, runner, heartbeat_at, \
         ttl_ms, created_at, updated_at, expires_at, issuer"
    };
}

impl Store {
    /// Stores a new task; committed when this returns.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails (a duplicate id included).
    pub async fn task_insert(&self, row: &TaskRow) -> Result<(), StoreError> {
        sqlx::query(concat!(
            "INSERT INTO tasks (",
            columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
        ))
        .bind(&row.task_id)
        .bind(&row.tenant)
        .bind(&row.subject)
        .bind(&row.tool)
        .bind(&row.status)
        .bind(row.status_message.clone())
        .bind(row.result.clone())
        .bind(i64::from(row.cancel_requested))
        .bind(&row.runner)
        .bind(row.heartbeat_at)
        .bind(row.ttl_ms)
        .bind(row.created_at)
        .bind(row.updated_at)
        .bind(row.expires_at)
        .bind(&row.issuer)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The task `task_id` of `owner`, unexpired at `now_ms`;
    /// `None` for any other (unknown, expired, someone else's).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn task_get(&self, owner: Owner<'_>, task_id: &str, now_ms: i64) -> Result<Option<TaskRow>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM tasks WHERE task_id = $1 AND tenant = $2 AND issuer = $3 AND subject = $4 AND expires_at > $5"
        ))
        .bind(task_id)
        .bind(owner.tenant)
        .bind(owner.issuer)
        .bind(owner.subject)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| task_from_row(&row)).transpose()
    }

    /// `owner`'s unexpired tasks, newest first, at most
    /// `limit`, created strictly before `before` (a page's cursor: created
    /// time and id) when given.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn tasks_of(
        &self,
        owner: Owner<'_>,
        now_ms: i64,
        before: Option<(i64, &str)>,
        limit: i64,
    ) -> Result<Vec<TaskRow>, StoreError> {
        let (created, id) = before.unwrap_or((i64::MAX, ""));
        let rows = sqlx::query(concat!(
            "SELECT ",
            columns!(),
            " FROM tasks WHERE tenant = $1 AND issuer = $2 AND subject = $3 AND expires_at > $4 \
             AND (created_at < $5 OR (created_at = $6 AND task_id < $7)) \
             ORDER BY created_at DESC, task_id DESC LIMIT $8"
        ))
        .bind(owner.tenant)
        .bind(owner.issuer)
        .bind(owner.subject)
        .bind(now_ms)
        .bind(created)
        .bind(created)
        .bind(id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(task_from_row).collect()
    }

    /// Ends a working task: `status` (terminal), its message and result.
    /// `false` when the task is no longer working (another replica
    /// declared it lost meanwhile): the first end recorded stays.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn task_finish(
        &self,
        tenant: &str,
        task_id: &str,
        status: &str,
        status_message: &str,
        result: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE tasks SET status = $1, status_message = $2, result = $3, updated_at = $4 \
             WHERE task_id = $5 AND tenant = $6 AND status = 'working'",
        )
        .bind(status)
        .bind(status_message)
        .bind(result)
        .bind(now_ms)
        .bind(task_id)
        .bind(tenant)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks a working task whose runner fell silent before `stale_before`
    /// as `failed` with `status_message`; `true` when this call did it.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn task_lose(
        &self,
        tenant: &str,
        task_id: &str,
        stale_before: i64,
        status_message: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE tasks SET status = 'failed', status_message = $1, updated_at = $2 \
             WHERE task_id = $3 AND tenant = $4 AND status = 'working' AND heartbeat_at < $5",
        )
        .bind(status_message)
        .bind(now_ms)
        .bind(task_id)
        .bind(tenant)
        .bind(stale_before)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Asks a working task of `owner` to stop; `true` when
    /// it was working (the request is recorded for its runner to see).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn task_request_cancel(&self, owner: Owner<'_>, task_id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE tasks SET cancel_requested = 1, updated_at = $1 \
             WHERE task_id = $2 AND tenant = $3 AND issuer = $4 AND subject = $5 AND status = 'working'",
        )
        .bind(now_ms)
        .bind(task_id)
        .bind(owner.tenant)
        .bind(owner.issuer)
        .bind(owner.subject)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The runner `runner`'s heartbeat for its working tasks among
    /// `task_ids`, at `now_ms`; answers which of them were asked to stop.
    ///
    /// # Errors
    /// [`StoreError`] when the write or read fails.
    pub async fn tasks_heartbeat(
        &self,
        runner: &str,
        task_ids: &[String],
        now_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        let mut cancelled = Vec::new();
        for task_id in task_ids {
            sqlx::query("UPDATE tasks SET heartbeat_at = $1 WHERE task_id = $2 AND runner = $3 AND status = 'working'")
                .bind(now_ms)
                .bind(task_id)
                .bind(runner)
                .execute(&self.pool)
                .await?;
            let row = sqlx::query("SELECT cancel_requested FROM tasks WHERE task_id = $1")
                .bind(task_id)
                .fetch_optional(&self.pool)
                .await?;
            if let Some(row) = row
                && row.try_get::<i64, _>("cancel_requested")? != 0
            {
                cancelled.push(task_id.clone());
            }
        }
        Ok(cancelled)
    }

    /// Deletes tasks expired at `now_ms`.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn tasks_sweep(&self, now_ms: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM tasks WHERE expires_at <= $1")
            .bind(now_ms)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }
}

fn task_from_row(row: &AnyRow) -> Result<TaskRow, StoreError> {
    Ok(TaskRow {
        task_id: row.try_get("task_id")?,
        tenant: row.try_get("tenant")?,
        issuer: row.try_get("issuer")?,
        subject: row.try_get("subject")?,
        tool: row.try_get("tool")?,
        status: row.try_get("status")?,
        status_message: row.try_get::<Option<String>, _>("status_message")?,
        result: row.try_get::<Option<String>, _>("result")?,
        cancel_requested: row.try_get::<i64, _>("cancel_requested")? != 0,
        runner: row.try_get("runner")?,
        heartbeat_at: row.try_get("heartbeat_at")?,
        ttl_ms: row.try_get("ttl_ms")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        expires_at: row.try_get("expires_at")?,
    })
}
