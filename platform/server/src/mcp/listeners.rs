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

    /// Subscribes a session to a resource's updates.
    pub fn subscribe(&self, session_id: &str, uri: String) {
        self.subscribed.lock().unwrap_or_else(|p| p.into_inner()).entry(session_id.to_owned()).or_default().insert(uri);
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

    /// Tells every session and every subscription of `tenant` that its tool
    /// list changed.
    async fn notify_tools_changed(&self, tenant: &str) {
        let sinks: Vec<(SubscriptionSink, Vec<String>)> = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(owner, _, _)| owner == tenant)
            .map(|(_, sink, uris)| (sink.clone(), uris.clone()))
            .collect();
        for (sink, uris) in sinks {
            if let Err(error) = sink.notify_tool_list_changed().await {
                tracing::debug!(%error, "a subscription did not take tools/list_changed");
            }
            let _ = sink.notify_resource_list_changed().await;
            for uri in uris {
                let _ = sink.notify_resource_updated(uri).await;
            }
        }
        let peers: Vec<(String, Peer<RoleServer>)> = self
            .peers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, (owner, _))| owner == tenant)
            .map(|(session, (_, peer))| (session.clone(), peer.clone()))
            .collect();
        for (session, peer) in peers {
            if let Err(error) = peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "a session did not take tools/list_changed");
            }
            let _ = peer.notify_resource_list_changed().await;
            let uris: Vec<String> = self
                .subscribed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&session)
                .map(|uris| uris.iter().cloned().collect())
                .unwrap_or_default();
            for uri in uris {
                let _ = peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await;
            }
        }
    }
}

impl Listeners {
    /// Sends `resources/updated` for every subscribed URI of `tenant` that
    /// `wanted` picks, to sessions and subscriptions alike.
    async fn notify_updated(&self, tenant: &str, wanted: impl Fn(&str) -> bool) {
        let sinks: Vec<(SubscriptionSink, Vec<String>)> = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(owner, _, _)| owner == tenant)
            .map(|(_, sink, uris)| (sink.clone(), uris.iter().filter(|uri| wanted(uri)).cloned().collect()))
            .collect();
        for (sink, uris) in sinks {
            for uri in uris {
                let _ = sink.notify_resource_updated(uri).await;
            }
        }
        let peers: Vec<(Peer<RoleServer>, Vec<String>)> = {
            let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
            let subscribed = self.subscribed.lock().unwrap_or_else(|p| p.into_inner());
            peers
                .iter()
                .filter(|(_, (owner, _))| owner == tenant)
                .map(|(session, (_, peer))| {
                    let uris = subscribed.get(session).into_iter().flatten().filter(|uri| wanted(uri)).cloned();
                    (peer.clone(), uris.collect())
                })
                .collect()
        };
        for (peer, uris) in peers {
            for uri in uris {
                let _ = peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri)).await;
            }
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
