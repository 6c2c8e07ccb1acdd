//! MCP sessions any replica serves (Part III §8.1 sessions; issue: run as
//! a fleet): rmcp's session store backed by the `mcp_sessions` table.
//!
//! A session opened on one replica is stored with its `initialize`
//! parameters and its owner (tenant and subject). A request for it on a
//! replica that does not hold it is let through only when the stored owner
//! is the caller ([`SharedSessions::owner`], checked by the HTTP edge), and
//! rmcp then restores it by replaying `initialize`. Session-retained runs
//! are keyed by the session id in the shared store, so they keep their
//! meaning on every replica.
//!
//! When does a session end? A client's DELETE ends it everywhere
//! ([`StoredSessions::delete`]). A replica's copy that idles out, or that
//! closes because the replica stops, ends the session only when no replica
//! saw it used for the idle time (`last_seen`, refreshed at most every
//! [`TOUCH_EVERY`] by each replica that serves it); the sweeper ends
//! sessions every replica forgot.
//!
//! Not shared: open SSE streams and server-to-client requests stay on the
//! replica that holds them; a `tools/list_changed` notification reaches a
//! session through whichever replica holds its GET stream, since every
//! replica applies every change (`fleet::changes`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::transport::streamable_http_server::session::store::{SessionState, SessionStore, SessionStoreError};

use crate::mcp::session_binding::{SessionBindings, SessionOwner};
use pilotage_engine::clock::system_now_ms;
use pilotage_store::{SessionRow, Store};

/// How often one replica refreshes a session's `last_seen` while serving
/// it, at most.
pub(crate) const TOUCH_EVERY: Duration = Duration::from_secs(10);

/// The shared-session state the HTTP edge consults. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct SharedSessions {
    store: Store,
    touched: Arc<Mutex<HashMap<String, Instant>>>,
}

impl SharedSessions {
    /// Sessions stored in `store`.
    pub(crate) fn new(store: Store) -> SharedSessions {
        SharedSessions { store, touched: Arc::new(Mutex::new(HashMap::new())) }
    }

    /// The stored owner of session `id`; `None` when it is not stored or
    /// the store cannot be read (logged), so the request is answered as
    /// for an unknown session.
    pub(crate) async fn owner(&self, id: &str) -> Option<SessionOwner> {
        match self.store.session_get(id).await {
            Ok(row) => row.map(|row| SessionOwner { tenant: row.tenant, issuer: row.issuer, subject: row.subject }),
            Err(error) => {
                tracing::warn!(session = %id, %error, "cannot read a stored session");
                None
            }
        }
    }

    /// Ends session `id` in the store, so that no replica restores it
    /// (logged when the store cannot be written: the session's own close
    /// tries again).
    pub(crate) async fn end(&self, id: &str) {
        if let Err(error) = self.store.session_end(id).await {
            tracing::error!(session = %id, %error, "cannot end a stored session");
        }
        self.touched.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }

    /// Notes that this replica serves session `id` now; refreshes its
    /// `last_seen` in the store when this replica last did so more than
    /// [`TOUCH_EVERY`] ago (in the background).
    pub(crate) fn touch(&self, id: &str) {
        {
            let mut touched = self.touched.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            match touched.get(id) {
                Some(at) if now.duration_since(*at) < TOUCH_EVERY => return,
                _ => {
                    touched.insert(id.to_owned(), now);
                }
            }
        }
        let store = self.store.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            if let Err(error) = store.session_touch(&id, system_now_ms()).await {
                tracing::warn!(session = %id, %error, "cannot record a session's use");
            }
        });
    }

    /// Ends this replica's copy of session `id` (idle, or the replica
    /// stops): the session itself ends, with its runs, only when no
    /// replica used it within `idle`.
    pub(crate) async fn close_local(&self, id: &str, idle: Duration) {
        self.touched.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        // A use by another replica may be up to TOUCH_EVERY older in the
        // store than it was: allow for it twice (this replica's and theirs).
        let slack = 2 * TOUCH_EVERY.as_millis() as i64;
        let idle_before = system_now_ms() - idle.as_millis() as i64 + slack;
        match self.store.session_end_if_idle(id, idle_before).await {
            Ok(true) => tracing::info!(session = %id, "session ended; its runs were deleted"),
            Ok(false) => tracing::debug!(session = %id, "this replica's copy closed; the session lives on"),
            Err(error) => tracing::error!(session = %id, %error, "cannot end a session"),
        }
    }
}

/// rmcp's session store over the `mcp_sessions` table. The owner of a new
/// session is the principal its binding names (bound before rmcp stores it,
/// `mcp::sessions`).
pub(crate) struct StoredSessions {
    store: Store,
    bindings: SessionBindings,
}

impl StoredSessions {
    /// The store for `bindings`' sessions.
    pub(crate) fn new(store: Store, bindings: SessionBindings) -> StoredSessions {
        StoredSessions { store, bindings }
    }
}

#[async_trait::async_trait]
impl SessionStore for StoredSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(row) = self.store.session_get(session_id).await? else { return Ok(None) };
        Ok(Some(serde_json::from_str(&row.state)?))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        // A session nobody owns could be restored by anybody: not stored.
        let Some(owner) = self.bindings.owner(session_id) else {
            return Err(format!("session {session_id} has no owner").into());
        };
        let now = system_now_ms();
        let row = SessionRow {
            id: session_id.to_owned(),
            tenant: owner.tenant,
            issuer: owner.issuer,
            subject: owner.subject,
            state: serde_json::to_string(state)?,
            created_at: now,
            last_seen: now,
        };
        self.store.session_put(&row).await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.store.session_end(session_id).await?;
        Ok(())
    }
}
