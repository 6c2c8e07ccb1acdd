//! Installing what a deploy-mode Run returns (Part II §6.5.7): the
//! installation is checked (a name, at least one trigger, schedules that
//! parse, trigger sources the tenant registered, a body that validates for
//! the deployer, the `max_deployments` quota) and stored as a deployment;
//! deploying a name again replaces it.

use std::collections::BTreeSet;

use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::installation::{Installation, Trigger};
use pilotage_engine::validation::Validated;
use pilotage_protocol::risk::RiskHints;
use pilotage_store::{DeploymentPut, DeploymentRow, StoreError};
use serde_json::Value;

use super::Context;
use crate::deployments::broker::{BrokerError, check_filter};
use crate::deployments::model::{MQTT_SECRET_PREFIX, WEBHOOK_SECRET_PREFIX, next_due};
use crate::deployments::publish::changed;
use crate::deployments::schedule::{Schedule, ScheduleError};
use crate::tenancy::LanguageSlot;

/// Why an installation was refused; its message is the installation Run's
/// outcome `error` (nothing is stored).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum InstallError {
    /// Occurs when the installation's name is empty, too long, or holds a
    /// space, a control character or `/`.
    #[error("the installation is named {0:?}: a deployment name is 1 to 128 characters without spaces or '/'")]
    Name(String),
    /// Occurs when the installation has no trigger.
    #[error("the installation has no trigger, so it would never run; nothing was installed")]
    NoTrigger,
    /// Occurs when a schedule does not parse.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// Occurs when a webhook source is not registered in the tenant.
    #[error(
        "webhook source '{name}' is not registered in tenant '{tenant}': the operator stores its signing key as the secret 'webhook:{name}'"
    )]
    WebhookSource {
        /// The tenant.
        tenant: String,
        /// The source the trigger names.
        name: String,
    },
    /// Occurs when an MQTT broker is not registered in the tenant.
    #[error(
        "MQTT broker '{broker}' is not registered in tenant '{tenant}': the operator stores its URL and credentials as the secret 'mqtt:{broker}'"
    )]
    Broker {
        /// The tenant.
        tenant: String,
        /// The broker the trigger names.
        broker: String,
    },
    /// Occurs when a topic filter is not one.
    #[error(transparent)]
    Filter(#[from] BrokerError),
    /// Occurs when a topic filter lies outside the tenant's
    /// `mqtt_topic_prefix` (`crate::egress`).
    #[error(
        "MQTT filter '{filter}' is outside tenant '{tenant}''s topic prefix '{prefix}': subscribe to '{prefix}' or below it"
    )]
    OutsidePrefix {
        /// The tenant.
        tenant: String,
        /// The filter the trigger names.
        filter: String,
        /// The prefix an operator set.
        prefix: String,
    },
    /// Occurs when the body has no plan or does not validate for the
    /// deployer.
    #[error("the installed body {0}; nothing was installed")]
    Body(&'static str),
    /// Occurs when the tenant holds `max_deployments` deployments and the
    /// name is new.
    #[error(
        "quota max_deployments ({limit}) of tenant '{tenant}' is reached; remove a deployment or deploy under an existing name"
    )]
    Quota {
        /// The tenant.
        tenant: String,
        /// The quota.
        limit: u32,
    },
    /// Occurs when the component's deploy reported success but returned
    /// no installation.
    #[error("the component reported success but installed nothing")]
    Nothing,
    /// Occurs when the store fails.
    #[error("the store failed: {0}")]
    Store(#[from] StoreError),
}

/// What [`install`] stored.
#[derive(Clone, Debug)]
pub(crate) struct Installed {
    /// The deployment's name.
    pub name: String,
    /// Its version (1 for a new name).
    pub version: i64,
    /// Its triggers.
    pub triggers: Vec<Trigger>,
    /// Its next schedule tick.
    pub next_due: Option<i64>,
}

/// What the deploy request gave that the deployment keeps for its
/// firings.
pub(crate) struct Kept<'a> {
    /// The validation context.
    pub context: Option<&'a Value>,
    /// The assertions (`x-assertions`), evaluated on every firing.
    pub assertions: Option<&'a Value>,
}

/// Checks and stores what a successful deploy-mode Run `run_id` installs
/// for `context`'s caller (Part II §6.5.7).
///
/// # Errors
/// [`InstallError`] for the installation Run's outcome (nothing is
/// stored).
pub(crate) async fn install(
    context: &Context,
    slot: &LanguageSlot,
    installation: Installation,
    snapshot: &CatalogSnapshot,
    kept: Kept<'_>,
    body_validated: &Validated,
    run_id: &str,
) -> Result<Installed, InstallError> {
    let platform = &context.platform;
    let principal = &context.caller.principal;
    let name = installation.name;
    if name.is_empty() || name.len() > 128 || name.chars().any(|c| c.is_control() || c == '/' || c.is_whitespace()) {
        return Err(InstallError::Name(name));
    }
    if installation.triggers.is_empty() {
        return Err(InstallError::NoTrigger);
    }
    let triggers = installation.triggers;
    let secrets: BTreeSet<String> = platform.store().secret_names(&principal.tenant).await?.into_iter().collect();
    let mut schedules = Vec::new();
    for trigger in &triggers {
        match trigger {
            Trigger::Schedule { cron, time_zone } => schedules.push(Schedule::parse(cron, time_zone)?),
            Trigger::Webhook { source } => {
                if !secrets.contains(&format!("{WEBHOOK_SECRET_PREFIX}{source}")) {
                    return Err(InstallError::WebhookSource { tenant: principal.tenant.clone(), name: source.clone() });
                }
            }
            Trigger::Mqtt { broker, topic } => {
                if !secrets.contains(&format!("{MQTT_SECRET_PREFIX}{broker}")) {
                    return Err(InstallError::Broker { tenant: principal.tenant.clone(), broker: broker.clone() });
                }
                check_filter(topic)?;
                if let Some(live) = platform.tenant(&principal.tenant)
                    && !live.egress().permits_filter(topic)
                {
                    return Err(InstallError::OutsidePrefix {
                        tenant: principal.tenant.clone(),
                        filter: topic.clone(),
                        prefix: live.egress().policy().mqtt_topic_prefix.unwrap_or_default(),
                    });
                }
            }
        }
    }
    let Some(plan) = &body_validated.plan else {
        return Err(InstallError::Body("has no plan"));
    };
    if !body_validated.response.valid {
        return Err(InstallError::Body("does not validate for the deployer"));
    }
    let store = platform.store();
    let limit = context.tenant.quotas().max_deployments;
    let now = platform.clock().now_ms();
    let next = next_due(&schedules, now);
    let baseline = crate::invocation::promotion::baseline(snapshot, &body_validated.references);
    let hints: RiskHints = plan.max_risk_hints;
    let row = DeploymentRow {
        tenant: principal.tenant.clone(),
        name: name.clone(),
        language: slot.entry.name.clone(),
        version: 0,
        issuer: principal.issuer.clone(),
        subject: principal.subject.clone(),
        scopes: serde_json::to_string(&principal.scopes).unwrap_or_else(|_| "[]".into()),
        body: installation.body,
        context: kept.context.map(Value::to_string),
        triggers: serde_json::to_string(&triggers).unwrap_or_else(|_| "[]".into()),
        baseline: serde_json::to_string(&baseline).unwrap_or_else(|_| "{}".into()),
        risk: plan.max_risk.clone(),
        risk_hints: serde_json::to_string(&hints).unwrap_or_else(|_| "{}".into()),
        enabled: true,
        run_id: run_id.to_owned(),
        assertions: kept.assertions.map(Value::to_string),
        created_at: now,
        updated_at: now,
        next_due: next,
    };
    // The quota's count and the store are one step (fleet-wide).
    let version = match store.deployment_put_within(&row, i64::from(limit)).await? {
        DeploymentPut::Stored(version) => version,
        DeploymentPut::OverQuota => return Err(InstallError::Quota { tenant: principal.tenant.clone(), limit }),
    };
    changed(platform, &principal.tenant, &name).await;
    Ok(Installed { name, version, triggers, next_due: next })
}
