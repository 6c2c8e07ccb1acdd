//! What a deploy-mode Run installs (Part II §6.5.7 `deploy` and `both`):
//! the component's `deploy` export answers with an [`Installation`], a
//! name, [`Trigger`]s in the platform's vocabulary and a body. The server
//! stores it as a deployment and fires the body when a trigger does.

use serde::{Deserialize, Serialize};

use crate::wit::pilotage::language::run_types as wit;

/// When a deployed body runs, in the platform's vocabulary (the WIT
/// `trigger`, stored as JSON with a `kind`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Trigger {
    /// A cron pattern in an IANA time zone.
    Schedule {
        /// 5 or 6 fields.
        cron: String,
        /// IANA zone name.
        time_zone: String,
    },
    /// A signed delivery to `POST /events/{tenant}/{source}`.
    Webhook {
        /// The event source's name.
        source: String,
    },
    /// A message on a topic filter of a tenant-registered broker.
    Mqtt {
        /// The broker's name (secret `mqtt:<broker>`).
        broker: String,
        /// The topic filter.
        topic: String,
    },
}

/// What a deploy-mode Run's component installs (the WIT `installation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installation {
    /// The deployment's name.
    pub name: String,
    /// Its triggers.
    pub triggers: Vec<Trigger>,
    /// The body run at each firing.
    pub body: String,
}

impl Installation {
    /// From the component's answer.
    pub(crate) fn from_wit(installation: wit::Installation) -> Installation {
        Installation {
            name: installation.name,
            triggers: installation.triggers.into_iter().map(Trigger::from_wit).collect(),
            body: installation.body,
        }
    }
}

impl Trigger {
    /// `schedule`, `webhook` or `mqtt`.
    pub fn kind(&self) -> &'static str {
        match self {
            Trigger::Schedule { .. } => "schedule",
            Trigger::Webhook { .. } => "webhook",
            Trigger::Mqtt { .. } => "mqtt",
        }
    }

    /// A short human description ("on schedule '0 22 * * *' in
    /// Europe/Paris").
    pub fn describe(&self) -> String {
        match self {
            Trigger::Schedule { cron, time_zone } => format!("on schedule '{cron}' in {time_zone}"),
            Trigger::Webhook { source } => format!("on webhook events from '{source}'"),
            Trigger::Mqtt { broker, topic } => format!("on MQTT messages on '{topic}' at broker '{broker}'"),
        }
    }

    pub(crate) fn from_wit(trigger: wit::Trigger) -> Trigger {
        match trigger {
            wit::Trigger::Schedule(schedule) => {
                Trigger::Schedule { cron: schedule.cron, time_zone: schedule.time_zone }
            }
            wit::Trigger::Webhook(source) => Trigger::Webhook { source },
            wit::Trigger::Mqtt(subscription) => {
                Trigger::Mqtt { broker: subscription.broker, topic: subscription.topic }
            }
        }
    }
}
