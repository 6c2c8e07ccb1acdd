//! The tables replicas share on PostgreSQL (migration 7): the log of
//! tenant changes that every replica follows, and the MCP sessions any
//! replica can restore. On SQLite (one process) nothing is announced and
//! no session is stored; the tables exist so both schemas stay alike.

use sqlx::Row;
use sqlx::any::AnyRow;

use crate::backend::Backend;
use crate::store::{Store, StoreError};

/// The channel `NOTIFY` wakes followers on; its payload is empty (the log
/// says what changed).
pub const CHANGES_CHANNEL: &str = "pilotage_changes";

/// One announced change: which item of which tenant to re-read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeRow {
    /// Position in the log (assigned by the database).
    pub seq: i64,
    /// The tenant.
    pub tenant: String,
    /// What changed: `tenant`, `language`, `catalog_entry`, `data_source`
    /// or `promoted` (see `fleet::changes::Change`).
    pub kind: String,
    /// Which one (a Language name, an entry id, …; empty for `tenant`).
    pub name: String,
    /// The instance id of the replica that made it.
    pub origin: String,
    /// When, in ms since the Unix epoch.
    pub at_ms: i64,
}

/// One stored MCP session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRow {
    /// The `Mcp-Session-Id`.
    pub id: String,
    /// The tenant it was opened in.
    pub tenant: String,
    /// The issuer of the credential that opened it.
    pub issuer: String,
    /// The subject that opened it.
    pub subject: String,
    /// rmcp's session state (the `initialize` parameters), as JSON.
    pub state: String,
    /// When it was opened, ms since the Unix epoch.
    pub created_at: i64,
    /// When a replica last saw it used, ms since the Unix epoch.
    pub last_seen: i64,
}

fn change_row(row: &AnyRow) -> Result<ChangeRow, StoreError> {
    Ok(ChangeRow {
        seq: row.try_get("seq")?,
        tenant: row.try_get("tenant")?,
        kind: row.try_get("kind")?,
        name: row.try_get("name")?,
        origin: row.try_get("origin")?,
        at_ms: row.try_get("at_ms")?,
    })
}

impl Store {
    /// Whether replicas may share this database (PostgreSQL): changes are
    /// announced and sessions stored only then.
    pub fn is_shared(&self) -> bool {
        self.backend() == Backend::Postgres
    }

    /// Appends `changes` (tenant, kind, name) made by `origin` to the log
    /// and wakes every follower, in one transaction. Does nothing on
    /// SQLite.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn changes_announce(
        &self,
        origin: &str,
        changes: &[(String, String, String)],
        now_ms: i64,
    ) -> Result<(), StoreError> {
        if !self.is_shared() || changes.is_empty() {
            return Ok(());
        }
        let mut transaction = self.pool.begin().await?;
        for (tenant, kind, name) in changes {
            sqlx::query("INSERT INTO tenant_changes (tenant, kind, name, origin, at_ms) VALUES ($1, $2, $3, $4, $5)")
                .bind(tenant)
                .bind(kind)
                .bind(name)
                .bind(origin)
                .bind(now_ms)
                .execute(&mut *transaction)
                .await?;
        }
        // Delivered at commit, after the rows are visible.
        sqlx::query("SELECT pg_notify($1, '')").bind(CHANGES_CHANNEL).execute(&mut *transaction).await?;
        transaction.commit().await?;
        Ok(())
    }

    /// The last position in the change log (0 when empty).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn changes_head(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COALESCE(MAX(seq), 0) AS head FROM tenant_changes").fetch_one(&self.pool).await?;
        Ok(row.try_get("head")?)
    }

    /// Changes after position `after`, and every change made at or after
    /// `since_ms` whatever its position, in log order. The second part
    /// catches a change whose transaction committed after a later one (its
    /// position is lower than one already read).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn changes_since(&self, after: i64, since_ms: i64) -> Result<Vec<ChangeRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, tenant, kind, name, origin, at_ms FROM tenant_changes
             WHERE seq > $1 OR at_ms >= $2 ORDER BY seq",
        )
        .bind(after)
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(change_row).collect()
    }

    /// Deletes changes made before `before_ms`; returns how many.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn changes_prune(&self, before_ms: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM tenant_changes WHERE at_ms < $1")
            .bind(before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    /// One stored catalog entry (JSON `StoredEntry`).
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn catalog_entry_get(&self, tenant: &str, id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT stored FROM catalog_entries WHERE tenant = $1 AND id = $2")
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| row.try_get("stored")).transpose()?)
    }

    /// Stores a new session (or replaces one of the same id).
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn session_put(&self, row: &SessionRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO mcp_sessions (id, tenant, subject, state, created_at, last_seen, issuer)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, subject = excluded.subject,
                 state = excluded.state, last_seen = excluded.last_seen, issuer = excluded.issuer",
        )
        .bind(&row.id)
        .bind(&row.tenant)
        .bind(&row.subject)
        .bind(&row.state)
        .bind(row.created_at)
        .bind(row.last_seen)
        .bind(&row.issuer)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// One stored session.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn session_get(&self, id: &str) -> Result<Option<SessionRow>, StoreError> {
        let row = sqlx::query(
            "SELECT id, tenant, issuer, subject, state, created_at, last_seen FROM mcp_sessions WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(SessionRow {
                id: row.try_get("id")?,
                tenant: row.try_get("tenant")?,
                issuer: row.try_get("issuer")?,
                subject: row.try_get("subject")?,
                state: row.try_get("state")?,
                created_at: row.try_get("created_at")?,
                last_seen: row.try_get("last_seen")?,
            })
        })
        .transpose()
    }

    /// Records that `id` was used at `now_ms`.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn session_touch(&self, id: &str, now_ms: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE mcp_sessions SET last_seen = $2 WHERE id = $1 AND last_seen < $2")
            .bind(id)
            .bind(now_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Ends session `id` for the whole fleet: its row and the runs it
    /// retained. Returns whether the row existed.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn session_end(&self, id: &str) -> Result<bool, StoreError> {
        let mut transaction = self.pool.begin().await?;
        let existed = sqlx::query("DELETE FROM mcp_sessions WHERE id = $1").bind(id).execute(&mut *transaction).await?;
        sqlx::query("DELETE FROM runs WHERE session_id = $1").bind(id).execute(&mut *transaction).await?;
        transaction.commit().await?;
        Ok(existed.rows_affected() > 0)
    }

    /// Ends session `id` (as [`Store::session_end`]) only when no replica
    /// saw it used since `idle_before_ms`, or when it is not stored at all
    /// (its runs then go). Returns whether it ended.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn session_end_if_idle(&self, id: &str, idle_before_ms: i64) -> Result<bool, StoreError> {
        let mut transaction = self.pool.begin().await?;
        let stored = sqlx::query("SELECT last_seen FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *transaction)
            .await?
            .map(|row| row.try_get::<i64, _>("last_seen"))
            .transpose()?;
        if stored.is_some_and(|last_seen| last_seen >= idle_before_ms) {
            return Ok(false);
        }
        sqlx::query("DELETE FROM mcp_sessions WHERE id = $1").bind(id).execute(&mut *transaction).await?;
        sqlx::query("DELETE FROM runs WHERE session_id = $1").bind(id).execute(&mut *transaction).await?;
        transaction.commit().await?;
        Ok(true)
    }

    /// Ends every session no replica saw used since `idle_before_ms`, with
    /// its runs, and the runs of sessions no longer stored; returns how many
    /// sessions ended.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn sessions_sweep(&self, idle_before_ms: i64) -> Result<u64, StoreError> {
        let ended = sqlx::query("DELETE FROM mcp_sessions WHERE last_seen < $1")
            .bind(idle_before_ms)
            .execute(&self.pool)
            .await?
            .rows_affected();
        sqlx::query(
            "DELETE FROM runs WHERE session_id IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM mcp_sessions s WHERE s.id = runs.session_id)",
        )
        .execute(&self.pool)
        .await?;
        Ok(ended)
    }
}
