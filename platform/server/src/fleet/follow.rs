//! Following the changes other replicas announce (ARCHITECTURE
//! "Scale-out": LISTEN/NOTIFY with a catch-up read).
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

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use pilotage_engine::catalog::StoredEntry;
use pilotage_engine::clock::system_now_ms;
use pilotage_store::{CHANGES_CHANNEL, Scope, StoreError};
use tokio_util::sync::CancellationToken;

use crate::changes::Change;
use crate::deploy::publish::{PublishError, publish, publish_all};
use crate::tenancy::Platform;
use crate::tenancy::load::{self, LoadError};

/// How often a follower reads the log even without a notification.
pub(crate) const CATCH_UP_EVERY: Duration = Duration::from_secs(5);

/// How far back each read also looks, whatever the positions already read:
/// a change whose transaction committed after a later-numbered one is
/// still seen (transactions that announce are single statements, far
/// shorter than this).
pub(crate) const LATE_COMMIT_WINDOW_MS: i64 = 10_000;

/// How long the log keeps a change. A follower that could not read it for
/// longer than [`RECONCILE_AFTER`] reloads every stored item instead.
pub(crate) const KEEP_CHANGES_MS: i64 = 24 * 3_600_000;

/// After this long without a successful read, a follower reconciles every
/// stored item rather than trust the log (well inside
/// [`KEEP_CHANGES_MS`]).
pub(crate) const RECONCILE_AFTER: Duration = Duration::from_secs(3_600);

/// Occurs when a change cannot be applied here; the follower logs it and
/// goes on (the next reconcile or restart applies the item again).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ApplyError {
    /// Occurs when the store cannot be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Occurs when a stored item cannot be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Occurs when a deployment's catalog entry cannot be published.
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// Reloads one tenant as stored (after another replica announced that its
/// row changed, or that it was created): loaded, its deployments published
/// as catalog entries, and its sessions told that the tools changed.
/// Nothing happens for a tenant that is not stored.
///
/// # Errors
/// [`ApplyError`] naming what could not be loaded or published.
async fn reload(platform: &Platform, id: &str) -> Result<(), ApplyError> {
    if load::load(platform, Scope::Tenant(id)).await? == 0 {
        return Ok(());
    }
    if let Some(tenant) = platform.tenant(id) {
        publish_all(platform, &tenant).await?;
    }
    platform.tools_changed(id).await;
    Ok(())
}

/// Makes this replica's memory match the store for `change`'s item.
///
/// # Errors
/// [`ApplyError`] when the store cannot be read or a stored item cannot be
/// loaded (a component that does not load, a row that does not parse).
pub(crate) async fn apply(platform: &Platform, change: &Change) -> Result<(), ApplyError> {
    let store = platform.store();
    if let Change::Tenant { tenant } = change {
        match store.tenant(tenant).await? {
            None => {
                platform.remove_tenant(tenant);
            }
            Some(row) => {
                load::apply_row(platform, &row);
            }
        }
        return Ok(());
    }
    // A change to a tenant this replica does not know yet arrives with the
    // tenant's own change, which loads nothing else: load it whole then.
    let Some(live) = platform.tenant(change.tenant()) else {
        return reload(platform, change.tenant()).await;
    };
    match change {
        Change::Tenant { .. } => {}
        Change::Language { tenant, name } => {
            let rows = store.languages(Scope::Tenant(tenant), true).await?;
            match rows.into_iter().find(|row| row.name == *name) {
                Some(row) => {
                    if live.language(name).is_none_or(|slot| slot.component.sha256() != row.sha256) {
                        let component = load::component(platform, &row.sha256).await?;
                        platform.install_language(tenant, component).await;
                    }
                }
                None => {
                    if live.retire_language(name) {
                        platform.tools_changed(tenant).await;
                    }
                }
            }
        }
        Change::CatalogEntry { tenant, id } => match store.catalog_entry_get(tenant, id).await? {
            Some(text) => {
                let stored: StoredEntry = serde_json::from_str(&text).map_err(|error| LoadError::Corrupt {
                    tenant: tenant.clone(),
                    what: format!("catalog entry {id}"),
                    message: error.to_string(),
                })?;
                let stored = StoredEntry::new(stored.entry, stored.visibility, stored.binding);
                live.with_catalog(|catalog| catalog.apply(vec![stored], &[]));
            }
            None => {
                if !live.entry_from_data_source(id) {
                    live.with_catalog(|catalog| catalog.apply(Vec::new(), std::slice::from_ref(id)));
                }
            }
        },
        Change::DataSource { tenant, name } => {
            let rows = store.data_sources(Scope::Tenant(tenant)).await?;
            match rows.into_iter().find(|row| row.name == *name) {
                Some(row) => {
                    let old = live.data_source(name);
                    load::data_source(platform, &live, &row).await?;
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
            debug_assert_eq!(tenant, &live.id);
            load::promoted_program(platform, &live, program_ref).await?;
        }
        Change::Deployment { name, .. } => {
            publish(platform, &live, name).await?;
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
/// [`StoreError`] when the store cannot be read.
pub(crate) async fn reconcile_all(platform: &Platform) -> Result<usize, StoreError> {
    let store = platform.store();
    let mut changes = Vec::new();
    let mut tenants: BTreeSet<String> = store.tenants(Scope::Every).await?.into_iter().map(|row| row.id).collect();
    tenants.extend(platform.tenants().iter().map(|tenant| tenant.id.clone()));
    changes.extend(tenants.iter().map(|tenant| Change::Tenant { tenant: tenant.clone() }));
    for row in store.languages(Scope::Every, true).await? {
        changes.push(Change::Language { tenant: row.tenant, name: row.name });
    }
    for (tenant, text) in store.catalog_entries(Scope::Every).await? {
        if let Ok(stored) = serde_json::from_str::<StoredEntry>(&text) {
            changes.push(Change::CatalogEntry { tenant, id: stored.entry.id });
        }
    }
    for row in store.data_sources(Scope::Every).await? {
        changes.push(Change::DataSource { tenant: row.tenant, name: row.name });
    }
    for tenant in platform.tenants() {
        for source in tenant.data_sources() {
            changes.push(Change::DataSource { tenant: tenant.id.clone(), name: source.name.clone() });
        }
    }
    for row in store.promoted(Scope::Every).await? {
        changes.push(Change::Promoted { tenant: row.tenant, program_ref: row.program_ref });
    }
    for tenant in platform.tenants() {
        if let Err(error) = publish_all(platform, &tenant).await {
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
pub(crate) struct CatchUp {
    /// Changes applied.
    pub applied: usize,
    /// Changes that failed to apply (logged).
    pub failed: usize,
}

impl Position {
    async fn catch_up(&mut self, platform: &Platform) -> Result<CatchUp, StoreError> {
        if self.read_at.elapsed() > RECONCILE_AFTER {
            tracing::warn!("the change log was not read for an hour: reconciling every stored item");
            let head = platform.store().changes_head().await?;
            reconcile_all(platform).await?;
            self.last = head;
            self.read_at = std::time::Instant::now();
        }
        let now = system_now_ms();
        let rows = platform.store().changes_since(self.last, now - LATE_COMMIT_WINDOW_MS).await?;
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
pub(crate) async fn follow(platform: Platform, database_url: String, from: i64, shutdown: CancellationToken) {
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
