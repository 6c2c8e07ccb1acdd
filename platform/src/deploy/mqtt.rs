//! MQTT triggers: each tenant-registered broker (the tenant secret
//! `mqtt:<broker>`: `{"url": "mqtt://host:port", "username"?,
//! "password"?}`, sealed like every secret) is connected once per replica
//! while an enabled deployment listens to it, with the topic filters of
//! those deployments subscribed as shared subscriptions
//! (`$share/pilotage/<filter>`, QoS 1): the broker hands each message to
//! one replica of the fleet, which fires every matching deployment.
//!
//! Subscriptions follow the store: after a change made here at once, and
//! every few seconds for changes made through other replicas. A broker that
//! drops the connection is reconnected (every filter subscribed again).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::{Deployment, MQTT_SECRET_PREFIX, Trigger};
use crate::service::Platform;

/// The shared-subscription group every replica joins.
pub const SHARE_GROUP: &str = "pilotage";

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
    filters: Arc<Mutex<BTreeSet<String>>>,
    task: JoinHandle<()>,
}

/// This replica's broker connections, keyed by (tenant, broker).
#[derive(Default)]
pub struct Subscriptions {
    connections: tokio::sync::Mutex<BTreeMap<(String, String), Connection>>,
}

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriptions").finish_non_exhaustive()
    }
}

fn shared(filter: &str) -> String {
    format!("$share/{SHARE_GROUP}/{filter}")
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
        let mut wanted: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        for row in rows {
            let Ok(deployment) = Deployment::from_row(row) else { continue };
            for trigger in &deployment.triggers {
                if let Trigger::Mqtt { broker, topic } = trigger {
                    wanted.entry((deployment.row.tenant.clone(), broker.clone())).or_default().insert(topic.clone());
                }
            }
        }
        let mut connections = self.connections.lock().await;
        let gone: Vec<_> = connections.keys().filter(|key| !wanted.contains_key(*key)).cloned().collect();
        for key in gone {
            if let Some(connection) = connections.remove(&key) {
                let _ = connection.client.disconnect().await;
                connection.task.abort();
            }
        }
        for (key, filters) in wanted {
            if !connections.contains_key(&key) {
                match connect(platform, &key.0, &key.1).await {
                    Ok(connection) => {
                        connections.insert(key.clone(), connection);
                    }
                    Err(error) => {
                        tracing::warn!(tenant = %key.0, broker = %key.1, %error, "cannot connect to an MQTT broker");
                        continue;
                    }
                }
            }
            let Some(connection) = connections.get(&key) else { continue };
            let (added, removed) = {
                let mut held = connection.filters.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                let added: Vec<String> = filters.difference(&held).cloned().collect();
                let removed: Vec<String> = held.difference(&filters).cloned().collect();
                *held = filters;
                (added, removed)
            };
            for filter in added {
                if let Err(error) = connection.client.subscribe(shared(&filter), QoS::AtLeastOnce).await {
                    tracing::warn!(%error, %filter, "cannot subscribe");
                }
            }
            for filter in removed {
                let _ = connection.client.unsubscribe(shared(&filter)).await;
            }
        }
    }

    /// The (tenant, broker, filter) subscriptions held now (for tests and
    /// the admin view).
    pub async fn held(&self) -> Vec<(String, String, String)> {
        let connections = self.connections.lock().await;
        connections
            .iter()
            .flat_map(|((tenant, broker), connection)| {
                let filters = connection.filters.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
                filters.into_iter().map(move |filter| (tenant.clone(), broker.clone(), filter))
            })
            .collect()
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
        if let Some(username) = &self.username {
            options.set_credentials(username, &self.password);
        }
        Ok(options)
    }
}

async fn connect(platform: &Platform, tenant: &str, broker: &str) -> Result<Connection, String> {
    let secret = BrokerSecret::parse(&platform.secret_value(tenant, &format!("{MQTT_SECRET_PREFIX}{broker}")).await?)?;
    let client_id = format!("pilotage-{}-{}", &platform.leases().instance_id(), hex::encode(rand::random::<[u8; 4]>()));
    let options = secret.options(&client_id)?;
    let (client, mut events) = AsyncClient::new(options, 64);
    let filters: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let task = {
        let (platform, tenant, broker) = (platform.clone(), tenant.to_owned(), broker.to_owned());
        let (client, filters) = (client.clone(), filters.clone());
        tokio::spawn(async move {
            loop {
                match events.poll().await {
                    Ok(Event::Incoming(Packet::ConnAck(_))) => {
                        // A new session: subscribe every filter again.
                        let held: Vec<String> =
                            filters.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).iter().cloned().collect();
                        for filter in held {
                            let _ = client.subscribe(shared(&filter), QoS::AtLeastOnce).await;
                        }
                    }
                    Ok(Event::Incoming(Packet::Publish(publish))) => {
                        let platform = platform.clone();
                        let tenant = tenant.clone();
                        let broker = broker.clone();
                        tokio::spawn(async move {
                            deliver(&platform, &tenant, &broker, &publish.topic, &publish.payload).await;
                        });
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%tenant, %broker, %error, "MQTT connection lost; reconnecting");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        })
    };
    Ok(Connection { client, filters, task })
}

/// Fires every enabled deployment of `tenant` listening on `broker` with a
/// filter matching `topic`.
async fn deliver(platform: &Platform, tenant: &str, broker: &str, topic: &str, payload: &[u8]) {
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
    for deployment in deployments.iter().filter(|d| d.row.enabled) {
        let trigger = deployment.triggers.iter().find(|trigger| {
            matches!(trigger, Trigger::Mqtt { broker: b, topic: filter } if b == broker && matches(filter, topic))
        });
        if let Some(trigger) = trigger {
            super::runtime::fire(platform, deployment, &instance, Some(trigger.clone()), event.clone(), at, at).await;
        }
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
