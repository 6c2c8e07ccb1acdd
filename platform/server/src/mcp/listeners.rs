//! Who hears that a tenant's tools changed (Part III §4.7): the MCP
//! sessions this replica holds (up to 2025-11-25, on the session's
//! stream) and the open `subscriptions/listen` requests (2026-07-28).
//! A change of the tenant's Languages changes its resources too (Part III
//! §8.3): each hears `resources/list_changed`, and `resources/updated` for
//! every resource it subscribed to; a change of its catalog, `updated`
//! for its subscribed catalog resources ([`watch_catalogs`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

use tokio_util::sync::CancellationToken;

use crate::tenancy::{Platform, ToolListeners};

/// One open `subscriptions/listen`: its tenant, its sink, and the
/// resource URIs it accepted.
type Listening = (String, SubscriptionSink, Vec<String>);

/// Resources one session (or one `subscriptions/listen`) may follow at
/// once. With [`MAX_URI_BYTES`] per URI, a session holds at most 64 KiB of
/// them, and a principal (64 sessions at most) 4 MiB.
pub const MAX_SUBSCRIPTIONS: usize = 64;

/// The longest resource URI accepted for a subscription, in bytes (this
/// surface's URIs are far shorter: a Language name and a guide id).
pub const MAX_URI_BYTES: usize = 1024;

/// A session asked for more than [`MAX_SUBSCRIPTIONS`] resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a session follows at most {MAX_SUBSCRIPTIONS} resources: unsubscribe from one first")]
pub struct SubscriptionsFull;

/// Connected MCP sessions and open `subscriptions/listen` requests, for
/// `notifications/tools/list_changed` (Part III §4.7).
#[derive(Debug, Default)]
pub struct Listeners {
    /// Session id → (tenant, peer): clients with a session (up to
    /// 2025-11-25) receive notifications on the session's stream.
    peers: Mutex<BTreeMap<String, (String, Peer<RoleServer>)>>,
    /// Listener number → its subscription: 2026-07-28 clients, which have
    /// no session.
    listeners: Mutex<BTreeMap<u64, Listening>>,
    next_listener: AtomicU64,
    /// Session id → the resource URIs it subscribed to.
    subscribed: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl Listeners {
    /// Remembers a session's peer and tenant.
    pub fn add(&self, session_id: String, tenant: String, peer: Peer<RoleServer>) {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).insert(session_id, (tenant, peer));
    }

    /// Forgets a session and its resource subscriptions.
    pub fn remove(&self, session_id: &str) {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).remove(session_id);
        self.subscribed.lock().unwrap_or_else(|p| p.into_inner()).remove(session_id);
    }

    /// Subscribes a session to a resource's updates (again: nothing new).
    ///
    /// # Errors
    /// [`SubscriptionsFull`] when the session already holds
    /// [`MAX_SUBSCRIPTIONS`] others.
    pub fn subscribe(&self, session_id: &str, uri: String) -> Result<(), SubscriptionsFull> {
        let mut subscribed = self.subscribed.lock().unwrap_or_else(|p| p.into_inner());
        let uris = subscribed.entry(session_id.to_owned()).or_default();
        if uris.len() >= MAX_SUBSCRIPTIONS && !uris.contains(&uri) {
            return Err(SubscriptionsFull);
        }
        uris.insert(uri);
        Ok(())
    }

    /// Ends a session's subscription to a resource.
    pub fn unsubscribe(&self, session_id: &str, uri: &str) {
        if let Some(uris) = self.subscribed.lock().unwrap_or_else(|p| p.into_inner()).get_mut(session_id) {
            uris.remove(uri);
        }
    }

    /// Registers an open `subscriptions/listen` of `tenant` with the
    /// resource URIs it accepted; returns the number to
    /// [`Listeners::unlisten`] it with.
    pub fn listen(&self, tenant: String, sink: SubscriptionSink, uris: Vec<String>) -> u64 {
        let number = self.next_listener.fetch_add(1, Ordering::Relaxed);
        self.listeners.lock().unwrap_or_else(|p| p.into_inner()).insert(number, (tenant, sink, uris));
        number
    }

    /// How many sessions and how many session-less subscriptions are open
    /// (the `pilotage_mcp_sessions_open` and `_subscriptions_open` gauges).
    pub fn counts(&self) -> (usize, usize) {
        let sessions = self.peers.lock().unwrap_or_else(|p| p.into_inner()).len();
        let listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner()).len();
        (sessions, listeners)
    }

    /// Forgets a subscription that ended.
    pub fn unlisten(&self, number: u64) {
        self.listeners.lock().unwrap_or_else(|p| p.into_inner()).remove(&number);
    }

    /// Every subscription and session of `tenant`, each with its subscribed
    /// resource URIs that `wanted` picks.
    fn targets(&self, tenant: &str, wanted: impl Fn(&str) -> bool) -> Vec<(Target, Vec<String>)> {
        let mut targets: Vec<(Target, Vec<String>)> = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(owner, _, _)| owner == tenant)
            .map(|(_, sink, uris)| {
                (Target::Listen(sink.clone()), uris.iter().filter(|uri| wanted(uri)).cloned().collect())
            })
            .collect();
        let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let subscribed = self.subscribed.lock().unwrap_or_else(|p| p.into_inner());
        targets.extend(peers.iter().filter(|(_, (owner, _))| owner == tenant).map(|(session, (_, peer))| {
            let uris = subscribed.get(session).into_iter().flatten().filter(|uri| wanted(uri)).cloned();
            (Target::Session(peer.clone()), uris.collect())
        }));
        targets
    }

    /// Tells every session and every subscription of `tenant` that its tool
    /// list and resource list changed, and that each resource it
    /// subscribed to was updated.
    async fn notify_tools_changed(&self, tenant: &str) {
        for (target, uris) in self.targets(tenant, |_| true) {
            target.list_changed().await;
            target.updated(uris).await;
        }
    }

    /// Sends `resources/updated` for every subscribed URI of `tenant` that
    /// `wanted` picks, to sessions and subscriptions alike.
    async fn notify_updated(&self, tenant: &str, wanted: impl Fn(&str) -> bool) {
        for (target, uris) in self.targets(tenant, wanted) {
            target.updated(uris).await;
        }
    }
}

/// Where a notification goes: a session's peer (up to 2025-11-25) or an
/// open `subscriptions/listen` (2026-07-28).
enum Target {
    Session(Peer<RoleServer>),
    Listen(SubscriptionSink),
}

impl Target {
    /// `tools/list_changed`, then `resources/list_changed`.
    async fn list_changed(&self) {
        let tools = match self {
            Target::Session(peer) => {
                let tools = peer.notify_tool_list_changed().await.map_err(|e| e.to_string());
                let _ = peer.notify_resource_list_changed().await;
                tools
            }
            Target::Listen(sink) => {
                let tools = sink.notify_tool_list_changed().await.map_err(|e| e.to_string());
                let _ = sink.notify_resource_list_changed().await;
                tools
            }
        };
        if let Err(error) = tools {
            tracing::debug!(%error, "a session or subscription did not take tools/list_changed");
        }
    }

    /// `resources/updated` for each of `uris`.
    async fn updated(&self, uris: Vec<String>) {
        for uri in uris {
            let _ = match self {
                Target::Session(peer) => {
                    peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await.map_err(drop)
                }
                Target::Listen(sink) => sink.notify_resource_updated(uri).await.map_err(drop),
            };
        }
    }
}

/// How often [`watch_catalogs`] looks for catalog changes.
const CATALOG_WATCH_PERIOD: Duration = Duration::from_secs(1);

/// Until `shutdown`: every [`CATALOG_WATCH_PERIOD`], each tenant whose
/// catalog took a change (through the admin API, a data source refresh, a
/// promotion, a deployment, or another replica's change followed here)
/// sends `resources/updated` for its subscribed catalog resources. Why a
/// watch: catalog changes arrive by many paths, and the catalog's change
/// counter is read in one lock per tenant.
pub(crate) async fn watch_catalogs(listeners: Arc<Listeners>, platform: Platform, shutdown: CancellationToken) {
    // The catalogs as loaded at start are the baseline; a tenant created
    // since starts from an empty catalog, so its first changes count.
    let mut seen: BTreeMap<String, u64> = platform
        .tenants()
        .iter()
        .map(|tenant| (tenant.id.clone(), tenant.with_catalog(|catalog| catalog.changes_seen())))
        .collect();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(CATALOG_WATCH_PERIOD) => {}
        }
        for tenant in platform.tenants() {
            let changes = tenant.with_catalog(|catalog| catalog.changes_seen());
            if seen.insert(tenant.id.clone(), changes).unwrap_or(0) != changes {
                listeners.notify_updated(&tenant.id, |uri| uri.starts_with("pilotage://catalog/")).await;
            }
        }
    }
}

impl ToolListeners for Listeners {
    fn tools_changed<'a>(&'a self, tenant: &'a str) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(self.notify_tools_changed(tenant))
    }
}
