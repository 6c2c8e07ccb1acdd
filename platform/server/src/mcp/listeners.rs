//! Who hears that a tenant's tools changed (Part III §4.7): the MCP
//! sessions this replica holds (up to 2025-11-25, on the session's
//! stream) and the open `subscriptions/listen` requests (2026-07-28).
//! A change of the tenant's Languages changes its resources too (Part III
//! §8.3): each hears `resources/list_changed`, and `resources/updated` for
//! every resource it subscribed to; a change of its catalog, `updated`
//! for its subscribed catalog resources ([`watch_catalogs`]) whose
//! content changed for that subscriber: each catalog resource is told
//! `updated` only when the `catalog_version` its subscriber sees moved, so
//! a change to an entry the subscriber cannot see is not announced to it
//! (Part II §10.3: an invisible entry is the same as a missing one).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

use tokio_util::sync::CancellationToken;

use pilotage_protocol::resources::ResourceRef;

use crate::tenancy::{Platform, Tenant, ToolListeners};

/// Who a session or subscription listens for: its tenant and the scopes
/// of its principal (what the catalog shows it).
#[derive(Clone, Debug)]
pub struct Audience {
    /// The tenant.
    pub tenant: String,
    /// The principal's scopes.
    pub scopes: BTreeSet<String>,
}

/// One open `subscriptions/listen`: who listens, its sink, and the
/// resource URIs it accepted.
type Listening = (Audience, SubscriptionSink, Vec<String>);

/// A session or an open `subscriptions/listen`, as the catalog versions
/// told to it are kept.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TargetKey {
    Session(String),
    Listen(u64),
}

/// The `catalog_version` `scopes` see of the catalog resource `uri` of
/// `tenant` (`None` for a URI that is no catalog resource).
pub(crate) fn catalog_version(tenant: &Tenant, scopes: &BTreeSet<String>, uri: &str) -> Option<String> {
    match ResourceRef::parse(uri)? {
        ResourceRef::Catalog { language, .. } => {
            Some(tenant.with_catalog(|catalog| catalog.snapshot(scopes, &language)).catalog_version().to_owned())
        }
        _ => None,
    }
}

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
    /// Session id → (audience, peer): clients with a session (up to
    /// 2025-11-25) receive notifications on the session's stream.
    peers: Mutex<BTreeMap<String, (Audience, Peer<RoleServer>)>>,
    /// Listener number → its subscription: 2026-07-28 clients, which have
    /// no session.
    listeners: Mutex<BTreeMap<u64, Listening>>,
    next_listener: AtomicU64,
    /// Session id → the resource URIs it subscribed to.
    subscribed: Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// The `catalog_version` each session or subscription last saw of each
    /// catalog resource it follows (when it subscribed, or the last
    /// `updated` it was told).
    told: Mutex<BTreeMap<(TargetKey, String), String>>,
}

impl Listeners {
    /// Remembers a session's peer and who it listens for.
    pub fn add(&self, session_id: String, audience: Audience, peer: Peer<RoleServer>) {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).insert(session_id, (audience, peer));
    }

    /// Forgets a session and its resource subscriptions.
    pub fn remove(&self, session_id: &str) {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).remove(session_id);
        self.subscribed.lock().unwrap_or_else(|p| p.into_inner()).remove(session_id);
        self.forget(&TargetKey::Session(session_id.to_owned()));
    }

    /// Subscribes a session to a resource's updates (again: nothing new);
    /// `version` is the `catalog_version` the subscriber sees of it now,
    /// for a catalog resource.
    ///
    /// # Errors
    /// [`SubscriptionsFull`] when the session already holds
    /// [`MAX_SUBSCRIPTIONS`] others.
    pub fn subscribe(&self, session_id: &str, uri: String, version: Option<String>) -> Result<(), SubscriptionsFull> {
        let mut subscribed = self.subscribed.lock().unwrap_or_else(|p| p.into_inner());
        let uris = subscribed.entry(session_id.to_owned()).or_default();
        if uris.len() >= MAX_SUBSCRIPTIONS && !uris.contains(&uri) {
            return Err(SubscriptionsFull);
        }
        if let Some(version) = version {
            let key = (TargetKey::Session(session_id.to_owned()), uri.clone());
            self.told.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_insert(version);
        }
        uris.insert(uri);
        Ok(())
    }

    /// Ends a session's subscription to a resource.
    pub fn unsubscribe(&self, session_id: &str, uri: &str) {
        if let Some(uris) = self.subscribed.lock().unwrap_or_else(|p| p.into_inner()).get_mut(session_id) {
            uris.remove(uri);
        }
        let key = (TargetKey::Session(session_id.to_owned()), uri.to_owned());
        self.told.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
    }

    /// Registers an open `subscriptions/listen` with the resource URIs it
    /// accepted, each with the `catalog_version` it sees now when it is a
    /// catalog resource; returns the number to [`Listeners::unlisten`] it
    /// with.
    pub fn listen(&self, audience: Audience, sink: SubscriptionSink, uris: Vec<(String, Option<String>)>) -> u64 {
        let number = self.next_listener.fetch_add(1, Ordering::Relaxed);
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        for (uri, version) in &uris {
            if let Some(version) = version {
                told.insert((TargetKey::Listen(number), uri.clone()), version.clone());
            }
        }
        drop(told);
        let uris = uris.into_iter().map(|(uri, _)| uri).collect();
        self.listeners.lock().unwrap_or_else(|p| p.into_inner()).insert(number, (audience, sink, uris));
        number
    }

    /// Forgets the catalog versions told to `target`.
    fn forget(&self, target: &TargetKey) {
        self.told.lock().unwrap_or_else(|p| p.into_inner()).retain(|(key, _), _| key != target);
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
        self.forget(&TargetKey::Listen(number));
    }

    /// Every subscription and session of `tenant`, each with who listens
    /// and its subscribed resource URIs that `wanted` picks.
    fn targets(&self, tenant: &str, wanted: impl Fn(&str) -> bool) -> Vec<Targeted> {
        let mut targets: Vec<Targeted> = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, (audience, _, _))| audience.tenant == tenant)
            .map(|(number, (audience, sink, uris))| Targeted {
                key: TargetKey::Listen(*number),
                target: Target::Listen(sink.clone()),
                scopes: audience.scopes.clone(),
                uris: uris.iter().filter(|uri| wanted(uri)).cloned().collect(),
            })
            .collect();
        let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let subscribed = self.subscribed.lock().unwrap_or_else(|p| p.into_inner());
        targets.extend(peers.iter().filter(|(_, (audience, _))| audience.tenant == tenant).map(
            |(session, (audience, peer))| Targeted {
                key: TargetKey::Session(session.clone()),
                target: Target::Session(peer.clone()),
                scopes: audience.scopes.clone(),
                uris: subscribed.get(session).into_iter().flatten().filter(|uri| wanted(uri)).cloned().collect(),
            },
        ));
        targets
    }

    /// Tells every session and every subscription of `tenant` that its tool
    /// list and resource list changed, and that each resource it
    /// subscribed to was updated.
    async fn notify_tools_changed(&self, tenant: &str) {
        for targeted in self.targets(tenant, |_| true) {
            targeted.target.list_changed().await;
            targeted.target.updated(targeted.uris).await;
        }
    }

    /// Sends `resources/updated` for each subscribed catalog resource of
    /// `tenant` whose `catalog_version`, as its subscriber sees it, moved
    /// since the subscriber last saw it, to sessions and subscriptions
    /// alike.
    async fn notify_catalogs(&self, tenant: &Tenant) {
        for targeted in self.targets(&tenant.id, |uri| uri.starts_with("pilotage://catalog/")) {
            let mut moved = Vec::new();
            for uri in targeted.uris {
                let Some(version) = catalog_version(tenant, &targeted.scopes, &uri) else { continue };
                let key = (targeted.key.clone(), uri.clone());
                let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
                if told.get(&key) != Some(&version) {
                    told.insert(key, version);
                    moved.push(uri);
                }
            }
            targeted.target.updated(moved).await;
        }
    }
}

/// One session or subscription a notification may go to.
struct Targeted {
    key: TargetKey,
    target: Target,
    scopes: BTreeSet<String>,
    uris: Vec<String>,
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
                listeners.notify_catalogs(&tenant).await;
            }
        }
    }
}

impl ToolListeners for Listeners {
    fn tools_changed<'a>(&'a self, tenant: &'a str) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(self.notify_tools_changed(tenant))
    }
}
