//! MQTT triggers: a tenant-registered broker (the tenant secret
//! `mqtt:<broker>`: `{"url": "mqtt://host:port", "username"?,
//! "password"?}`, sealed like every secret) is connected by each replica
//! once per distinct topic filter that an enabled deployment of the tenant
//! listens to, and the filter is subscribed as a shared subscription of the
//! tenant's group (`$share/pilotage-<tenant>/<filter>`, QoS 1).
//!
//! Why one connection per filter: a message matching two filters reaches a
//! client once per matching subscription, and MQTT 3.1.1 does not say which
//! one; with one filter per connection, a message that arrives names its
//! filter, and only the deployments listening with exactly that filter
//! fire. Why a group per tenant: the broker hands each message to one
//! member of a group, so two tenants sharing a broker and a filter must not
//! share a group. Within a tenant's group the broker picks one replica of
//! the fleet: each message fires each matching deployment once (at least
//! once under QoS 1: a message redelivered after a lost connection fires
//! again).
//!
//! Subscriptions follow the store: after a change made here at once, and
//! every few seconds for changes made through other replicas. A broker that
//! drops the connection is reconnected and the filter subscribed again.
//!
//! Confinement (`crate::egress`): the broker's address is checked against
//! the tenant's egress rules before the first connection and before every
//! reconnect (a plain `mqtt://` connection then goes to the address just
//! checked); a refused broker is retried only once the rules permit it. A
//! filter outside the tenant's `mqtt_topic_prefix` is not subscribed, and
//! one that falls outside after the operator changes the prefix is
//! unsubscribed at the next refresh.

use std::collections::BTreeSet;
use std::time::Duration;

use pilotage_engine::installation::Trigger;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::broker::{BrokerError, BrokerSecret, matches, shared};
use super::model::{Deployment, MQTT_SECRET_PREFIX, of_tenant};
use super::runtime::fire;
use super::state::{MqttConnection, SubscriptionKey};
use crate::egress::{Confinement, DestinationRefused};
use crate::tenancy::{Platform, SecretValueError};

/// How often MQTT subscriptions are brought in line with the store.
pub(crate) const SUBSCRIPTIONS_PERIOD: Duration = Duration::from_secs(5);

/// Occurs when a broker cannot be connected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
enum ConnectError {
    /// Occurs when the broker's secret cannot be read.
    #[error(transparent)]
    Secret(#[from] SecretValueError),
    /// Occurs when the broker's secret is unusable.
    #[error(transparent)]
    Broker(#[from] BrokerError),
    /// Occurs when the tenant's egress rules refuse the broker's address.
    #[error(transparent)]
    Refused(#[from] DestinationRefused),
    /// Occurs when the tenant is not loaded on this replica.
    #[error("the tenant is not loaded")]
    NoTenant,
}

/// Keeps this replica's MQTT subscriptions in line with the store until
/// `shutdown`: after every local change, and every
/// [`SUBSCRIPTIONS_PERIOD`] for changes made through other replicas.
pub(crate) async fn follow_subscriptions(platform: Platform, shutdown: CancellationToken) {
    loop {
        refresh(&platform).await;
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = platform.deployments().subscriptions_wake.notified() => {}
            () = tokio::time::sleep(SUBSCRIPTIONS_PERIOD) => {}
        }
    }
}

/// Brings connections and subscriptions in line with the enabled
/// deployments' MQTT triggers in the store.
pub(crate) async fn refresh(platform: &Platform) {
    let rows = match platform.store().deployments_with_trigger("mqtt").await {
        Ok(rows) => rows,
        Err(error) => {
            tracing::warn!(%error, "cannot read MQTT deployments");
            return;
        }
    };
    let mut wanted: BTreeSet<SubscriptionKey> = BTreeSet::new();
    for row in rows {
        let Ok(deployment) = Deployment::from_row(row) else { continue };
        let tenant = &deployment.row.tenant;
        let Some(live) = platform.tenant(tenant) else { continue };
        for trigger in &deployment.triggers {
            if let Trigger::Mqtt { broker, topic } = trigger {
                if !live.egress().permits_filter(topic) {
                    tracing::warn!(%tenant, %broker, filter = %topic, "the filter is outside the tenant's MQTT topic prefix; not subscribed");
                    continue;
                }
                wanted.insert((tenant.clone(), broker.clone(), topic.clone()));
            }
        }
    }
    let mut connections = platform.deployments().mqtt.lock().await;
    let gone: Vec<SubscriptionKey> = connections.keys().filter(|key| !wanted.contains(*key)).cloned().collect();
    for key in gone {
        if let Some(connection) = connections.remove(&key) {
            let _ = connection.client.unsubscribe(shared(&key.0, &key.2)).await;
            let _ = connection.client.disconnect().await;
            connection.task.abort();
        }
    }
    for key in wanted {
        if connections.contains_key(&key) {
            continue;
        }
        match connect(platform, &key).await {
            Ok(connection) => {
                connections.insert(key, connection);
            }
            Err(error) => {
                let (tenant, broker, filter) = &key;
                tracing::warn!(%tenant, %broker, %filter, %error, "cannot connect to an MQTT broker");
            }
        }
    }
}

/// The broker's options once the tenant's egress rules permit its address
/// (a plain connection pinned to the address checked).
async fn checked_options(
    egress: &Confinement,
    secret: &BrokerSecret,
    client_id: &str,
) -> Result<MqttOptions, ConnectError> {
    let (host, port) = secret.address();
    let addresses = egress.resolve(&host, port).await?;
    let at = (secret.is_plain() && host.parse::<std::net::IpAddr>().is_err())
        .then(|| addresses.first().map(std::net::SocketAddr::ip))
        .flatten();
    Ok(secret.options(client_id, at)?)
}

async fn connect(platform: &Platform, key: &SubscriptionKey) -> Result<MqttConnection, ConnectError> {
    let (tenant, broker, _) = key;
    let egress = platform.tenant(tenant).ok_or(ConnectError::NoTenant)?.egress().clone();
    let secret = BrokerSecret::parse(&platform.secret_value(tenant, &format!("{MQTT_SECRET_PREFIX}{broker}")).await?)?;
    let client_id = format!("pilotage-{}-{}", &platform.leases().instance_id(), hex::encode(rand::random::<[u8; 4]>()));
    let options = checked_options(&egress, &secret, &client_id).await?;
    let (client, mut events) = AsyncClient::new(options, 64);
    let task = {
        let (platform, key) = (platform.clone(), key.clone());
        let client = client.clone();
        tokio::spawn(async move {
            let (tenant, broker, filter) = &key;
            let mut lost = false;
            loop {
                if lost {
                    // Every reconnect is checked again: the name may
                    // resolve elsewhere now, or the operator may have
                    // narrowed the tenant's rules.
                    match checked_options(&egress, &secret, &client_id).await {
                        Ok(options) => {
                            events.mqtt_options = options;
                            lost = false;
                        }
                        Err(error) => {
                            tracing::warn!(%tenant, %broker, %filter, %error, "not reconnecting to the MQTT broker");
                            tokio::time::sleep(SUBSCRIPTIONS_PERIOD).await;
                            continue;
                        }
                    }
                }
                match events.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        // A new session (the first, or after a lost
                        // connection): subscribe again.
                        if let Err(error) = client.subscribe(shared(tenant, filter), QoS::AtLeastOnce).await {
                            tracing::warn!(%tenant, %broker, %filter, %error, "cannot subscribe");
                        }
                    }
                    Ok(Event::Incoming(Packet::Publish(publish))) => {
                        let (platform, key) = (platform.clone(), key.clone());
                        tokio::spawn(async move {
                            deliver(&platform, &key, &publish.topic, &publish.payload).await;
                        });
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%tenant, %broker, %filter, %error, "MQTT connection lost; reconnecting");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        lost = true;
                    }
                }
            }
        })
    };
    Ok(MqttConnection { client, task })
}

/// Fires every enabled deployment of the key's tenant that listens on its
/// broker with exactly its filter (the subscription the message came
/// through); a topic the filter does not match (a broker's mistake) fires
/// nothing.
async fn deliver(platform: &Platform, key: &SubscriptionKey, topic: &str, payload: &[u8]) {
    let (tenant, broker, filter) = key;
    if !matches(filter, topic) {
        tracing::warn!(%tenant, %broker, %filter, %topic, "the broker delivered a topic the filter does not match");
        return;
    }
    let deployments = match of_tenant(platform.store(), tenant).await {
        Ok(deployments) => deployments,
        Err(error) => {
            tracing::warn!(%error, "cannot read deployments for an MQTT message");
            return;
        }
    };
    let payload = serde_json::from_slice::<Value>(payload)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(payload).into_owned()));
    let event = json!({"topic": topic, "payload": payload});
    let instance = format!("mqtt:{}", hex::encode(rand::random::<[u8; 12]>()));
    let at = platform.clock().now_ms();
    let trigger = Trigger::Mqtt { broker: broker.clone(), topic: filter.clone() };
    for deployment in deployments.iter().filter(|d| d.row.enabled && d.triggers.contains(&trigger)) {
        fire(platform, deployment, &instance, Some(trigger.clone()), event.clone(), at, at).await;
    }
}
