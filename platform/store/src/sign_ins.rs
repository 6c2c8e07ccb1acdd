//! Browser sign-ins ended before their time (migration 14): the console's
//! sessions are sealed cookies the server keeps no copy of, so signing out
//! records the session's nonce until the session would have expired, and
//! every replica sharing the store refuses it from then on.

use sqlx::Row;

use crate::store::{Store, StoreError};

impl Store {
    /// Records that the sign-in `nonce` ended; kept until `expires_at` (ms
    /// since the epoch), when the session's cookie expires by itself.
    /// Ending it again changes nothing.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub async fn sign_in_end(&self, nonce: &str, expires_at: i64) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO ended_sign_ins (nonce, expires_at) VALUES ($1, $2) ON CONFLICT (nonce) DO NOTHING")
            .bind(nonce)
            .bind(expires_at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Whether the sign-in `nonce` was ended.
    ///
    /// # Errors
    /// [`StoreError`] when the read fails.
    pub async fn sign_in_ended(&self, nonce: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM ended_sign_ins WHERE nonce = $1")
            .bind(nonce)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<i64, _>("n")? > 0)
    }

    /// Forgets ended sign-ins whose sessions expired by `now_ms` (the
    /// sweep); returns how many went.
    ///
    /// # Errors
    /// [`StoreError`] when the write fails.
    pub(crate) async fn sign_ins_sweep(&self, now_ms: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM ended_sign_ins WHERE expires_at <= $1")
            .bind(now_ms)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }
}
