//! Tenant changes announced by one replica and applied by every other
//! (ARCHITECTURE "Scale-out": LISTEN/NOTIFY with a catch-up read).
//!
//! A replica that changes a tenant's state stores it as before, changes
//! its own memory, then [`announce`]s which item changed. Followers
//! ([`follow`]) wake on `NOTIFY`, read the log from where they stopped, and
//! [`apply`] each change by re-reading the item's row: what is stored is
//! installed, what is gone is removed. The log, not the notification,
//! carries the change, so a follower that lost its connection reads what it
//! missed when it reconnects, and a periodic read covers a notification
//! that never came.
//!
//! Why re-read instead of shipping the new value: the row is the truth and
//! may have changed again since; applying is then idempotent and order
//! does not matter (the last read wins, and it reads the last write).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::catalog::StoredEntry;
use crate::operations::now_ms;
use crate::service::Platform;
use crate::store::{CHANGES_CHANNEL, ChangeRow};

/// How often a follower reads the log even without a notification.
pub const CATCH_UP_EVERY: Duration = Duration::from_secs(5);

/// How far back each read also looks, whatever the positions already read:
/// a change whose transaction committed after a later-numbered one is
/// still seen (transactions that announce are single statements, far
/// shorter than this).
pub const LATE_COMMIT_WINDOW_MS: i64 = 10_000;

/// How long the log keeps a change. A follower that could not read it for
/// longer than [`RECONCILE_AFTER`] reloads every stored item instead.
pub const KEEP_CHANGES_MS: i64 = 24 * 3_600_000;

/// After this long without a successful read, a follower reconciles every
/// stored item rather than trust the log (well inside
/// [`KEEP_CHANGES_MS`]).
pub const RECONCILE_AFTER: Duration = Duration::from_secs(3_600);

/// One item of a tenant's state that changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The tenant's row: created, updated (disabled, quotas) or deleted.
    Tenant {
        /// The tenant.
        tenant: String,
    },
    /// Which version of a Language serves, or that none does.
    Language {
        /// The tenant.
        tenant: String,
        /// The Language identifier (`family/version`).
        name: String,
    },
    /// One operator catalog entry: put or deleted.
    CatalogEntry {
        /// The tenant.
        tenant: String,
        /// The entry id.
        id: String,
    },
    /// One data source: attached, replaced or removed.
    DataSource {
        /// The tenant.
        tenant: String,
        /// The tenant's name for it.
        name: String,
    },
    /// One promoted program (Part II §6.7), published by a promote call.
    Promoted {
        /// The tenant.
        tenant: String,
        /// Its content-derived reference.
        program_ref: String,
    },
    /// One deployment (Part II §6.5.7): installed, replaced, enabled,
    /// disabled or removed. Firing reads the store, so applying it only
    /// refreshes the agents' catalog entry and wakes the scheduler.
    Deployment {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
    },
}

impl Change {
    /// The tenant it belongs to.
    pub fn tenant(&self) -> &str {
        match self {
            Change::Tenant { tenant }
            | Change::Language { tenant, .. }
            | Change::CatalogEntry { tenant, .. }
            | Change::DataSource { tenant, .. }
            | Change::Promoted { tenant, .. }
            | Change::Deployment { tenant, .. } => tenant,
        }
    }

    /// The log's (tenant, kind, name).
    fn to_row(&self) -> (String, String, String) {
        let (kind, name) = match self {
            Change::Tenant { .. } => ("tenant", ""),
            Change::Language { name, .. } => ("language", name.as_str()),
            Change::CatalogEntry { id, .. } => ("catalog_entry", id.as_str()),
            Change::DataSource { name, .. } => ("data_source", name.as_str()),
            Change::Promoted { program_ref, .. } => ("promoted", program_ref.as_str()),
            Change::Deployment { name, .. } => ("deployment", name.as_str()),
        };
        (self.tenant().to_owned(), kind.to_owned(), name.to_owned())
    }

    /// The change a log row names; `None` for a kind this version does not
    /// know (a newer replica's), which is skipped.
    pub fn from_row(row: &ChangeRow) -> Option<Change> {
        let tenant = row.tenant.clone();
        let name = row.name.clone();
        Some(match row.kind.as_str() {
            "tenant" => Change::Tenant { tenant },
            "language" => Change::Language { tenant, name },
            "catalog_entry" => Change::CatalogEntry { tenant, id: name },
            "data_source" => Change::DataSource { tenant, name },
            "promoted" => Change::Promoted { tenant, program_ref: name },
            "deployment" => Change::Deployment { tenant, name },
            _ => return None,
        })
    }
}

/// Announces `changes`, already stored and applied here, to the other
/// replicas. Nothing happens on SQLite. A failure is logged, not returned:
/// the change itself is made and stored, and the caller's answer should
/// say so; the other replicas then see it at their next reconcile or
/// restart.
pub async fn announce(platform: &Platform, changes: Vec<Change>) {
    if changes.is_empty() || !platform.store().is_shared() {
        return;
    }
    let rows: Vec<(String, String, String)> = changes.iter().map(Change::to_row).collect();
    let origin = platform.leases().instance_id();
    if let Err(error) = platform.store().changes_announce(origin, &rows, now_ms()).await {
        tracing::error!(%error, changes = rows.len(), "cannot announce tenant changes to the other replicas");
    }
}

/// Makes this replica's memory match the store for `change`'s item.
///
/// # Errors
/// A message when the store cannot be read or a stored item cannot be
/// loaded (a component that does not load, a row that does not parse).
pub async fn apply(platform: &Platform, change: &Change) -> Result<(), String> {
    let store = platform.store();
    if let Change::Tenant { tenant } = change {
        match store.tenant_get(tenant).await.map_err(|e| e.to_string())? {
            None => {
                platform.remove_tenant(tenant);
            }
            Some(row) => {
                let live = platform.add_tenant(&row.id);
                live.set_disabled(row.disabled);
                live.set_quotas(serde_json::from_str(&row.quotas).unwrap_or_default());
            }
        }
        return Ok(());
    }
    // A change to a tenant this replica does not know yet arrives with the
    // tenant's own change, which loads nothing else: load it whole then.
    let Some(live) = platform.tenant(change.tenant()) else {
        return match store.tenant_get(change.tenant()).await.map_err(|e| e.to_string())? {
            Some(_) => crate::admin::load_tenant(platform, change.tenant()).await,
            None => Ok(()),
        };
    };
    match change {
        Change::Tenant { .. } => {}
        Change::Language { tenant, name } => {
            let rows = store.languages_of_tenant(tenant).await.map_err(|e| e.to_string())?;
            match rows.into_iter().find(|row| row.name == *name && row.active) {
                Some(row) => {
                    if live.language(name).is_none_or(|slot| slot.component.sha256() != row.sha256) {
                        let component = crate::admin::load_stored(platform, &row.sha256).await?;
                        platform.install_language(tenant, component).await;
                    }
                }
                None => {
                    if live.retire_language(name) {
                        platform.sessions().notify_tools_changed(tenant).await;
                    }
                }
            }
        }
        Change::CatalogEntry { tenant, id } => {
            match store.catalog_entry_get(tenant, id).await.map_err(|e| e.to_string())? {
                Some(text) => {
                    let stored: StoredEntry =
                        serde_json::from_str(&text).map_err(|e| format!("tenant {tenant}: entry {id}: {e}"))?;
                    let stored = StoredEntry::new(stored.entry, stored.visibility, stored.binding);
                    live.with_catalog(|catalog| catalog.apply(vec![stored], &[]));
                }
                None => {
                    if !live.entry_from_data_source(id) {
                        live.with_catalog(|catalog| catalog.apply(Vec::new(), std::slice::from_ref(id)));
                    }
                }
            }
        }
        Change::DataSource { tenant, name } => {
            let rows = store.data_sources_of_tenant(tenant).await.map_err(|e| e.to_string())?;
            match rows.into_iter().find(|row| row.name == *name) {
                Some(row) => {
                    let old = live.data_source(name);
                    crate::admin::data_sources::restore(platform, &live, &row).await?;
                    if let (Some(old), Some(new)) = (old, live.data_source(name)) {
                        let stale: Vec<String> = old.owned().into_iter().filter(|id| !new.owns(id)).collect();
                        live.with_catalog(|catalog| catalog.apply(Vec::new(), &stale));
                        old.source.pool().close().await;
                    }
                }
                None => {
                    if let Some(source) = live.detach_data_source(name) {
                        source.source.pool().close().await;
                    }
                }
            }
        }
        Change::Promoted { tenant, program_ref } => {
            if live.promoted(program_ref).is_none() {
                let rows = store.promoted_of_tenant(tenant).await.map_err(|e| e.to_string())?;
                let rows: Vec<_> = rows.into_iter().filter(|row| row.program_ref == *program_ref).collect();
                crate::operations::promote::restore(&live, rows)?;
            }
        }
        Change::Deployment { name, .. } => {
            crate::deploy::publish(platform, &live, name).await?;
            platform.deployments().changed();
        }
    }
    Ok(())
}

/// Makes every stored tenant match the store, for a follower that could
/// not read the log for longer than it is kept: tenants (stored and known
/// here), their stored Languages, catalog entries, data sources and
/// promoted programs. Items removed from the store while the follower was
/// away are removed only when their kind is still listed somewhere
/// (tenants, data sources known here); a deleted catalog entry or a
/// retired Language of a tenant this replica knows is caught by the next
/// restart. Returns how many items were applied.
///
/// # Errors
/// A message when the store cannot be read.
pub async fn reconcile_all(platform: &Platform) -> Result<usize, String> {
    let store = platform.store();
    let mut changes = Vec::new();
    let mut tenants: std::collections::BTreeSet<String> =
        store.tenants().await.map_err(|e| e.to_string())?.into_iter().map(|row| row.id).collect();
    tenants.extend(platform.tenants().iter().map(|tenant| tenant.id.clone()));
    changes.extend(tenants.iter().map(|tenant| Change::Tenant { tenant: tenant.clone() }));
    for row in store.languages_active().await.map_err(|e| e.to_string())? {
        changes.push(Change::Language { tenant: row.tenant, name: row.name });
    }
    for (tenant, text) in store.catalog_all().await.map_err(|e| e.to_string())? {
        if let Ok(stored) = serde_json::from_str::<StoredEntry>(&text) {
            changes.push(Change::CatalogEntry { tenant, id: stored.entry.id });
        }
    }
    for row in store.data_sources_all().await.map_err(|e| e.to_string())? {
        changes.push(Change::DataSource { tenant: row.tenant, name: row.name });
    }
    for tenant in platform.tenants() {
        for source in tenant.data_sources() {
            changes.push(Change::DataSource { tenant: tenant.id.clone(), name: source.name.clone() });
        }
    }
    for row in store.promoted_all().await.map_err(|e| e.to_string())? {
        changes.push(Change::Promoted { tenant: row.tenant, program_ref: row.program_ref });
    }
    for tenant in platform.tenants() {
        if let Err(error) = crate::deploy::publish_all(platform, &tenant).await {
            tracing::warn!(tenant = %tenant.id, %error, "deployments could not be published");
        }
    }
    for change in &changes {
        if let Err(error) = apply(platform, change).await {
            tracing::warn!(?change, %error, "a stored item could not be applied");
        }
    }
    Ok(changes.len())
}

/// Where a follower is in the log.
#[derive(Debug)]
struct Position {
    /// The highest position read.
    last: i64,
    /// Positions applied (or skipped) within the late-commit window, with
    /// their time, so a re-read does not apply them twice.
    seen: HashMap<i64, i64>,
    /// When the log was last read successfully.
    read_at: std::time::Instant,
}

/// What one read of the log did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// Changes applied.
    pub applied: usize,
    /// Changes that failed to apply (logged).
    pub failed: usize,
}

impl Position {
    async fn catch_up(&mut self, platform: &Platform) -> Result<CatchUp, String> {
        if self.read_at.elapsed() > RECONCILE_AFTER {
            tracing::warn!("the change log was not read for an hour: reconciling every stored item");
            let head = platform.store().changes_head().await.map_err(|e| e.to_string())?;
            reconcile_all(platform).await?;
            self.last = head;
            self.read_at = std::time::Instant::now();
        }
        let now = now_ms();
        let rows =
            platform.store().changes_since(self.last, now - LATE_COMMIT_WINDOW_MS).await.map_err(|e| e.to_string())?;
        self.read_at = std::time::Instant::now();
        let own = platform.leases().instance_id();
        let mut result = CatchUp::default();
        for row in rows {
            self.last = self.last.max(row.seq);
            if self.seen.insert(row.seq, row.at_ms).is_some() || row.origin == own {
                continue;
            }
            let Some(change) = Change::from_row(&row) else { continue };
            match apply(platform, &change).await {
                Ok(()) => result.applied += 1,
                Err(error) => {
                    result.failed += 1;
                    tracing::warn!(?change, %error, "a change announced by another replica could not be applied");
                }
            }
        }
        self.seen.retain(|_, at| *at >= now - 2 * LATE_COMMIT_WINDOW_MS);
        Ok(result)
    }
}

/// Keeps a `LISTEN` connection to `database_url` open and wakes `wake` on
/// every notification and after every reconnection (notifications sent
/// while disconnected are lost; the log is not). Runs until aborted.
async fn listen(database_url: String, wake: Arc<tokio::sync::Notify>) {
    loop {
        let mut listener = match sqlx::postgres::PgListener::connect(&database_url).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "cannot open the change listener; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(error) = listener.listen(CHANGES_CHANNEL).await {
            tracing::warn!(%error, "cannot LISTEN for changes; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        // Whatever was announced before this connection listened.
        wake.notify_one();
        loop {
            match listener.try_recv().await {
                Ok(Some(_)) => wake.notify_one(),
                Ok(None) => {
                    tracing::warn!("the change listener lost its connection; reconnecting");
                    wake.notify_one();
                }
                Err(error) => {
                    tracing::warn!(%error, "the change listener failed; reconnecting");
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Follows the change log of the store at `database_url` from position
/// `from` (read before this replica loaded its tenants) until `shutdown`:
/// woken by `NOTIFY`, and every [`CATCH_UP_EVERY`] regardless.
pub async fn follow(platform: Platform, database_url: String, from: i64, shutdown: CancellationToken) {
    let wake = Arc::new(tokio::sync::Notify::new());
    let listener = tokio::spawn(listen(database_url, wake.clone()));
    let mut position = Position { last: from, seen: HashMap::new(), read_at: std::time::Instant::now() };
    let mut interval = tokio::time::interval(CATCH_UP_EVERY);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = wake.notified() => {}
            _ = interval.tick() => {}
        }
        match position.catch_up(&platform).await {
            Ok(CatchUp { applied: 0, failed: 0 }) => {}
            Ok(done) => {
                tracing::debug!(applied = done.applied, failed = done.failed, "applied changes of other replicas")
            }
            Err(error) => tracing::warn!(%error, "cannot read the change log; retrying"),
        }
    }
    listener.abort();
}
