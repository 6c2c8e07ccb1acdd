//! The deployment runtime's state in a [`Platform`](crate::tenancy::Platform):
//! the wake-ups of the scheduler and of the MQTT follower, and this
//! replica's broker connections. The logic that uses it is in
//! `runtime` and `mqtt`.

use std::collections::BTreeMap;

use rumqttc::AsyncClient;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Which subscription a broker connection holds: (tenant, broker, filter).
pub type SubscriptionKey = (String, String, String);

/// One broker connection and the task reading its events.
pub struct MqttConnection {
    pub(crate) client: AsyncClient,
    pub(crate) task: JoinHandle<()>,
}

/// The deployment runtime's shared state.
#[derive(Default)]
pub struct Deployments {
    pub(crate) wake: Notify,
    pub(crate) subscriptions_wake: Notify,
    /// This replica's broker connections, one per (tenant, broker, filter).
    pub(crate) mqtt: tokio::sync::Mutex<BTreeMap<SubscriptionKey, MqttConnection>>,
}

impl std::fmt::Debug for Deployments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployments").finish_non_exhaustive()
    }
}

impl Deployments {
    /// Called after a deployment was installed, replaced, enabled,
    /// disabled or removed here: the scheduler re-reads the store now and
    /// the MQTT subscriptions follow (woken, not awaited: a firing may
    /// install, and the subscriber fires).
    pub fn changed(&self) {
        self.wake.notify_one();
        self.subscriptions_wake.notify_one();
    }

    /// The (tenant, broker, filter) subscriptions held now (for tests and
    /// the metrics).
    pub async fn mqtt_held(&self) -> Vec<SubscriptionKey> {
        self.mqtt.lock().await.keys().cloned().collect()
    }
}
