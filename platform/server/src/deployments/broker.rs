//! MQTT topic filters and broker secrets, checked where they enter (a
//! deploy's triggers, the admin API's `mqtt:<broker>` secret) and used by
//! the subscriptions (`deploy::mqtt`).

use std::net::IpAddr;
use std::time::Duration;

use rumqttc::MqttOptions;
use serde_json::Value;

/// Occurs when a topic filter or a broker secret is unusable; the message
/// says what is wrong and how it should look.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BrokerError {
    /// Occurs when a topic filter breaks MQTT 3.1.1 §4.7 or names a shared
    /// subscription itself.
    #[error("'{filter}' is not an MQTT topic filter: {why}")]
    Filter {
        /// The filter given.
        filter: String,
        /// What is wrong.
        why: &'static str,
    },
    /// Occurs when a broker secret is not the JSON object it must be.
    #[error("an MQTT broker secret is JSON {{\"url\", \"username\"?, \"password\"?}}: {0}")]
    NotJson(String),
    /// Occurs when a broker secret has no `url`.
    #[error("the broker secret has no \"url\"")]
    NoUrl,
    /// Occurs when the URL is not one rumqttc connects to.
    #[error("'{url}' is not an MQTT URL (mqtt://host:port): {message}")]
    Url {
        /// The URL given.
        url: String,
        /// rumqttc's reason.
        message: String,
    },
}

/// The prefix of the shared-subscription group every replica joins for a
/// tenant: `pilotage-<tenant>`.
pub(crate) const SHARE_GROUP_PREFIX: &str = "pilotage-";

/// Checks an MQTT topic filter (MQTT 3.1.1 §4.7): non-empty, `#` only as
/// the whole last level, `+` only as a whole level, no NUL.
///
/// # Errors
/// [`BrokerError::Filter`] saying what is wrong.
pub(crate) fn check_filter(filter: &str) -> Result<(), BrokerError> {
    let bad = |why: &'static str| Err(BrokerError::Filter { filter: filter.to_owned(), why });
    if filter.is_empty() || filter.len() > 65_535 {
        return bad("it is empty or too long");
    }
    if filter.contains('\0') {
        return bad("it contains NUL");
    }
    if filter.starts_with("$share/") || filter.starts_with("$SHARE/") {
        return bad("the platform shares subscriptions itself; give the plain filter");
    }
    if filter.starts_with('$') {
        return bad("topics starting with '$' ($SYS, $queue, …) are the broker's own");
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
pub(crate) fn matches(filter: &str, topic: &str) -> bool {
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

/// The shared subscription of `tenant`'s group for `filter`.
pub(crate) fn shared(tenant: &str, filter: &str) -> String {
    format!("$share/{SHARE_GROUP_PREFIX}{tenant}/{filter}")
}

/// The tenant secret `mqtt:<broker>`: `{"url": "mqtt://host:port",
/// "username"?, "password"?}` (the admin API checks it when it is stored).
#[derive(Debug)]
pub(crate) struct BrokerSecret {
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
    /// [`BrokerError`] saying what is wrong: not JSON, no `url`, a URL
    /// rumqttc does not accept.
    pub(crate) fn parse(value: &str) -> Result<BrokerSecret, BrokerError> {
        let config: Value = serde_json::from_str(value).map_err(|e| BrokerError::NotJson(e.to_string()))?;
        let url = config["url"].as_str().ok_or(BrokerError::NoUrl)?.to_owned();
        let secret = BrokerSecret {
            url,
            username: config["username"].as_str().map(str::to_owned),
            password: config["password"].as_str().unwrap_or_default().to_owned(),
        };
        secret.options("pilotage-check", None)?;
        Ok(secret)
    }

    /// The broker's host and port, as rumqttc reads them from the URL.
    pub(crate) fn address(&self) -> (String, u16) {
        self.options("pilotage-check", None).map(|options| options.broker_address()).unwrap_or_default()
    }

    /// Whether the connection is plain TCP (`mqtt://`, `tcp://`), where
    /// the host may be replaced by the address it was checked at; a TLS
    /// connection keeps the name its certificate is verified against.
    pub(crate) fn is_plain(&self) -> bool {
        self.url.starts_with("mqtt://") || self.url.starts_with("tcp://")
    }

    /// rumqttc's options for a client named `client_id`, connecting to
    /// `at` instead of the URL's host when given (an address the tenant's
    /// confinement just checked).
    ///
    /// # Errors
    /// [`BrokerError::Url`] when rumqttc does not accept the URL.
    pub(crate) fn options(&self, client_id: &str, at: Option<IpAddr>) -> Result<MqttOptions, BrokerError> {
        let mut url = self.url.clone();
        if let Some(address) = at
            && let Ok(mut parsed) = reqwest::Url::parse(&url)
            && parsed.set_ip_host(address).is_ok()
        {
            url = parsed.to_string();
        }
        let separator = if url.contains('?') { '&' } else { '?' };
        let mut options = MqttOptions::parse_url(format!("{url}{separator}client_id={client_id}"))
            .map_err(|e| BrokerError::Url { url: self.url.clone(), message: e.to_string() })?;
        options.set_keep_alive(Duration::from_secs(30));
        // As large as a webhook event may be (the event becomes part of the
        // firing's stored Run); a larger message ends the connection, which
        // is reconnected.
        options.set_max_packet_size(
            crate::deployments::model::MAX_EVENT_BYTES,
            crate::deployments::model::MAX_EVENT_BYTES,
        );
        if let Some(username) = &self.username {
            options.set_credentials(username, &self.password);
        }
        Ok(options)
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
        assert!(check_filter("$SHARE/g/home").is_err());
        assert!(check_filter("$SYS/#").is_err());
        assert!(check_filter("$queue/x").is_err());
        assert!(matches("home/+/state", "home/front_door/state"));
        assert!(!matches("home/+/state", "home/front_door/battery"));
        assert!(matches("home/#", "home/front_door/state"));
        assert!(matches("home/#", "home"));
        assert!(!matches("home/front_door", "home/front_door/state"));
        assert!(!matches("#", "$SYS/broker/load"));
    }
}
