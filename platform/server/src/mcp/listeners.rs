//! Who hears that a tenant's tools changed (Part III §4.7): the MCP
//! sessions this replica holds (up to 2025-11-25, on the session's
//! stream) and the open `subscriptions/listen` requests (2026-07-28).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

use crate::tenancy::ToolListeners;

/// Connected MCP sessions and open `subscriptions/listen` requests, for
/// `notifications/tools/list_changed` (Part III §4.7).
#[derive(Debug, Default)]
pub struct Listeners {
    /// Session id → (tenant, peer): clients with a session (up to
    /// 2025-11-25) receive notifications on the session's stream.
    peers: Mutex<BTreeMap<String, (String, Peer<RoleServer>)>>,
    /// Listener number → (tenant, sink): 2026-07-28 clients, which have no
    /// session.
    listeners: Mutex<BTreeMap<u64, (String, SubscriptionSink)>>,
    next_listener: AtomicU64,
}

impl Listeners {
    /// Remembers a session's peer and tenant.
    pub fn add(&self, session_id: String, tenant: String, peer: Peer<RoleServer>) {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).insert(session_id, (tenant, peer));
    }

    /// Forgets a session.
    pub fn remove(&self, session_id: &str) {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).remove(session_id);
    }

    /// Registers an open `subscriptions/listen` of `tenant`; returns the
    /// number to [`Listeners::unlisten`] it with.
    pub fn listen(&self, tenant: String, sink: SubscriptionSink) -> u64 {
        let number = self.next_listener.fetch_add(1, Ordering::Relaxed);
        self.listeners.lock().unwrap_or_else(|p| p.into_inner()).insert(number, (tenant, sink));
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
        let sinks: Vec<SubscriptionSink> = self
            .listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(owner, _)| owner == tenant)
            .map(|(_, sink)| sink.clone())
            .collect();
        for sink in sinks {
            if let Err(error) = sink.notify_tool_list_changed().await {
                tracing::debug!(%error, "a subscription did not take tools/list_changed");
            }
        }
        let peers: Vec<Peer<RoleServer>> = self
            .peers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter(|(owner, _)| owner == tenant)
            .map(|(_, peer)| peer.clone())
            .collect();
        for peer in peers {
            if let Err(error) = peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "a session did not take tools/list_changed");
            }
        }
    }
}

impl ToolListeners for Listeners {
    fn tools_changed<'a>(&'a self, tenant: &'a str) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(self.notify_tools_changed(tenant))
    }
}
