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

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::{Deployment, MQTT_SECRET_PREFIX, Trigger};
use crate::service::Platform;

/// The prefix of the shared-subscription group every replica joins for a
/// tenant: `pilotage-<tenant>`.
pub const SHARE_GROUP_PREFIX: &str = "pilotage-";

/// Checks an MQTT topic filter (MQTT 3.1.1 §4.7): non-empty, `#` only as
/// the whole last level, `+` only as a whole level, no NUL.
///
/// # Errors
/// A message saying what is wrong.
pub fn check_filter(filter: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("'{filter}' is not an MQTT topic filter: {why}"));
    if filter.is_empty() || filter.len() > 65_535 {
        return bad("it is empty or too long");
    }
    if filter.contains('\0') {
        return bad("it contains NUL");
    }
    if filter.starts_with("$share/") {
        return bad("the platform shares subscriptions itself; give the plain filter");
    }
    let levels: Vec<&str> = filter.split('/').collect();
    for (index, level) in levels.iter().enumerate() {
        if level.contains('#') && (*level != "#" || index + 1 != levels.len()) {
            return bad("'#' stands alone as the last level");
        }
        if level.contains('+') && *level != "+" {
            return bad("'+' stands alone as a level");
        }
    }
    Ok(())
}

/// Whether `topic` matches `filter` (`+` one level, `#` the rest).
pub fn matches(filter: &str, topic: &str) -> bool {
    let mut topic_levels = topic.split('/');
    for level in filter.split('/') {
        match (level, topic_levels.next()) {
            ("#", _) => return !topic.starts_with('$'),
            ("+", Some(_)) => {}
            (expected, Some(actual)) if expected == actual => {}
            _ => return false,
        }
    }
    topic_levels.next().is_none()
}

struct Connection {
    client: AsyncClient,
    task: JoinHandle<()>,
}

/// Which subscription a connection holds: (tenant, broker, filter).
type Key = (String, String, String);

/// This replica's broker connections, one per (tenant, broker, filter).
#[derive(Default)]
pub struct Subscriptions {
    connections: tokio::sync::Mutex<BTreeMap<Key, Connection>>,
}

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriptions").finish_non_exhaustive()
    }
}

/// The shared subscription of `tenant`'s group for `filter`.
pub fn shared(tenant: &str, filter: &str) -> String {
    format!("$share/{SHARE_GROUP_PREFIX}{tenant}/{filter}")
}

impl Subscriptions {
    /// Brings connections and subscriptions in line with the enabled
    /// deployments' MQTT triggers in the store.
    pub async fn refresh(&self, platform: &Platform) {
        let rows = match platform.store().deployments_with_trigger("mqtt").await {
            Ok(rows) => rows,
            Err(error) => {
                tracing::warn!(%error, "cannot read MQTT deployments");
                return;
            }
        };
        let mut wanted: BTreeSet<Key> = BTreeSet::new();
        for row in rows {
            let Ok(deployment) = Deployment::from_row(row) else { continue };
            for trigger in &deployment.triggers {
                if let Trigger::Mqtt { broker, topic } = trigger {
                    wanted.insert((deployment.row.tenant.clone(), broker.clone(), topic.clone()));
                }
            }
        }
        let mut connections = self.connections.lock().await;
        let gone: Vec<Key> = connections.keys().filter(|key| !wanted.contains(*key)).cloned().collect();
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

    /// The (tenant, broker, filter) subscriptions held now (for tests and
    /// the metrics).
    pub async fn held(&self) -> Vec<(String, String, String)> {
        self.connections.lock().await.keys().cloned().collect()
    }
}

/// The tenant secret `mqtt:<broker>`: `{"url": "mqtt://host:port",
/// "username"?, "password"?}` (the admin API checks it when it is stored).
#[derive(Debug)]
pub struct BrokerSecret {
    /// The broker's URL (`mqtt://` or `mqtts://`).
    pub url: String,
    /// The user name, when the broker wants credentials.
    pub username: Option<String>,
    /// The password (empty when absent).
    pub password: String,
}

impl BrokerSecret {
    /// Parses and checks a secret's value.
    ///
    /// # Errors
    /// A message saying what is wrong: not JSON, no `url`, a URL rumqttc
    /// does not accept.
    pub fn parse(value: &str) -> Result<BrokerSecret, String> {
        let config: Value = serde_json::from_str(value)
            .map_err(|e| format!("an MQTT broker secret is JSON {{\"url\", \"username\"?, \"password\"?}}: {e}"))?;
        let url = config["url"].as_str().ok_or("the broker secret has no \"url\"")?.to_owned();
        let secret = BrokerSecret {
            url,
            username: config["username"].as_str().map(str::to_owned),
            password: config["password"].as_str().unwrap_or_default().to_owned(),
        };
        secret.options("pilotage-check")?;
        Ok(secret)
    }

    /// rumqttc's options for a client named `client_id`.
    fn options(&self, client_id: &str) -> Result<MqttOptions, String> {
        let url = &self.url;
        let separator = if url.contains('?') { '&' } else { '?' };
        let mut options = MqttOptions::parse_url(format!("{url}{separator}client_id={client_id}"))
            .map_err(|e| format!("'{url}' is not an MQTT URL (mqtt://host:port): {e}"))?;
        options.set_keep_alive(Duration::from_secs(30));
        // As large as a webhook event may be (the event becomes part of the
        // firing's stored Run); a larger message ends the connection, which
        // is reconnected.
        options.set_max_packet_size(super::webhook::MAX_EVENT_BYTES, super::webhook::MAX_EVENT_BYTES);
        if let Some(username) = &self.username {
            options.set_credentials(username, &self.password);
        }
        Ok(options)
    }
}

async fn connect(platform: &Platform, key: &Key) -> Result<Connection, String> {
    let (tenant, broker, _) = key;
    let secret = BrokerSecret::parse(&platform.secret_value(tenant, &format!("{MQTT_SECRET_PREFIX}{broker}")).await?)?;
    let client_id = format!("pilotage-{}-{}", &platform.leases().instance_id(), hex::encode(rand::random::<[u8; 4]>()));
    let options = secret.options(&client_id)?;
    let (client, mut events) = AsyncClient::new(options, 64);
    let task = {
        let (platform, key) = (platform.clone(), key.clone());
        let client = client.clone();
        tokio::spawn(async move {
            let (tenant, broker, filter) = &key;
            loop {
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
                    }
                }
            }
        })
    };
    Ok(Connection { client, task })
}

/// Fires every enabled deployment of the key's tenant that listens on its
/// broker with exactly its filter (the subscription the message came
/// through); a topic the filter does not match (a broker's mistake) fires
/// nothing.
async fn deliver(platform: &Platform, key: &Key, topic: &str, payload: &[u8]) {
    let (tenant, broker, filter) = key;
    if !matches(filter, topic) {
        tracing::warn!(%tenant, %broker, %filter, %topic, "the broker delivered a topic the filter does not match");
        return;
    }
    let deployments = match super::of_tenant(platform, tenant).await {
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
    let at = platform.deployments().clock().now_ms();
    let trigger = Trigger::Mqtt { broker: broker.clone(), topic: filter.clone() };
    for deployment in deployments.iter().filter(|d| d.row.enabled && d.triggers.contains(&trigger)) {
        super::runtime::fire(platform, deployment, &instance, Some(trigger.clone()), event.clone(), at, at).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_checked_and_matched_as_mqtt_does() {
        assert!(check_filter("home/+/state").is_ok());
        assert!(check_filter("home/#").is_ok());
        assert!(check_filter("#").is_ok());
        assert!(check_filter("home/#/x").is_err());
        assert!(check_filter("home/fr+nt").is_err());
        assert!(check_filter("").is_err());
        assert!(check_filter("$share/g/home").is_err());
        assert!(matches("home/+/state", "home/front_door/state"));
        assert!(!matches("home/+/state", "home/front_door/battery"));
        assert!(matches("home/#", "home/front_door/state"));
        assert!(matches("home/#", "home"));
        assert!(!matches("home/front_door", "home/front_door/state"));
        assert!(!matches("#", "$SYS/broker/load"));
    }
}
