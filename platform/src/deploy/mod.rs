//! The deployment runtime (Part II §6.5.7 `deploy` and `both`, §5.8.4;
//! docs/architecture.md "Deployments"). The platform owns triggers,
//! storage and firing; the component owns the language.
//!
//! - A deploy-mode `execute` calls the component's `deploy` export
//!   (`pilotage:language@1.2.0`, world `deploying-language`), which returns
//!   an installation: a name, triggers in the platform's vocabulary
//!   ([`Trigger`]) and a body. [`install`] checks it (triggers parse, their
//!   sources exist, the body validates for the deployer, quota) and stores
//!   it as a deployment: deploying a name again replaces it.
//! - [`runtime`] fires it: schedules (cron in an IANA zone, [`schedule`]),
//!   webhook deliveries ([`webhook`]) and MQTT messages ([`mqtt`]). Every
//!   trigger instance is claimed in the store first, so it fires once
//!   across replicas. A firing is a Run of the body (immediate) as the
//!   deploying principal, after the body's referenced entries are checked
//!   against the current catalog; it is retained and its trace fetchable by
//!   `run_id`.
//! - Operators list, disable, enable and remove deployments through the
//!   admin API and CLI (`admin::deployments`); agents see their tenant's
//!   deployments as catalog entries (id [`entry_id`], kind [`entry_kind`],
//!   not callable, carrying the body's risk), kept by [`publish`].

pub mod clock;
pub mod mqtt;
pub mod runtime;
pub mod schedule;
pub mod webhook;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::catalog::CatalogSnapshot;
use crate::engine::bindings::pilotage::language::run_types as wit;
use crate::language::validation::Validated;
use crate::operations::{Context, now_ms};
use crate::protocol::risk::RiskHints;
use crate::service::{LanguageSlot, Platform};
use crate::store::DeploymentRow;

/// The catalog entry id under which agents see deployment `name`.
pub fn entry_id(name: &str) -> String {
    format!("deployment:{name}")
}

/// The catalog entry kind of a deployment of Language `language`
/// (`family/version`): `<family>_deployment`, engine-defined per family as
/// promoted programs' `<family>_program` is (Part II §5.4: an entry's kind
/// belongs to its Language's kind set). Not callable.
pub fn entry_kind(language: &str) -> String {
    format!("{}_deployment", language.split('/').next().unwrap_or(language))
}

/// The prefix of a webhook source's secret: the operator stores the
/// source's signing key as the tenant secret `webhook:<source>`.
pub const WEBHOOK_SECRET_PREFIX: &str = "webhook:";

/// The prefix of an MQTT broker's secret: the tenant secret
/// `mqtt:<broker>` holds `{"url": "mqtt://host:port", "username"?,
/// "password"?}`.
pub const MQTT_SECRET_PREFIX: &str = "mqtt:";

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
    pub fn from_wit(installation: wit::Installation) -> Installation {
        Installation {
            name: installation.name,
            triggers: installation.triggers.into_iter().map(Trigger::from_wit).collect(),
            body: installation.body,
        }
    }
}

impl Trigger {
    fn from_wit(trigger: wit::Trigger) -> Trigger {
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

/// A stored deployment, decoded.
#[derive(Clone, Debug)]
pub struct Deployment {
    /// The row as stored.
    pub row: DeploymentRow,
    /// Its triggers.
    pub triggers: Vec<Trigger>,
    /// Referenced entry id → baseline.
    pub baseline: BTreeMap<String, Value>,
    /// The deployer's scopes.
    pub scopes: BTreeSet<String>,
}

impl Deployment {
    /// Decodes a stored row.
    ///
    /// # Errors
    /// A message when a JSON column does not decode (a corrupt row).
    pub fn from_row(row: DeploymentRow) -> Result<Deployment, String> {
        let triggers = serde_json::from_str(&row.triggers).map_err(|e| format!("triggers: {e}"))?;
        let baseline = serde_json::from_str(&row.baseline).map_err(|e| format!("baseline: {e}"))?;
        let scopes = serde_json::from_str(&row.scopes).map_err(|e| format!("scopes: {e}"))?;
        Ok(Deployment { row, triggers, baseline, scopes })
    }

    /// The schedules among its triggers, parsed (a stored schedule parsed
    /// when it was installed).
    pub fn schedules(&self) -> Vec<schedule::Schedule> {
        self.triggers
            .iter()
            .filter_map(|trigger| match trigger {
                Trigger::Schedule { cron, time_zone } => schedule::Schedule::parse(cron, time_zone).ok(),
                _ => None,
            })
            .collect()
    }

    /// What the admin API and the agents' catalog show.
    pub fn view(&self) -> Value {
        json!({
            "name": self.row.name,
            "language": self.row.language,
            "version": self.row.version,
            "enabled": self.row.enabled,
            "deployed_by": self.row.subject,
            "triggers": self.triggers,
            "risk": self.row.risk,
            "risk_hints": serde_json::from_str::<Value>(&self.row.risk_hints).unwrap_or(Value::Null),
            "references": self.baseline.keys().collect::<Vec<_>>(),
            "installed_by_run": self.row.run_id,
            "created_at": rfc3339(self.row.created_at),
            "updated_at": rfc3339(self.row.updated_at),
            "next_due": self.row.next_due.map(rfc3339),
        })
    }
}

impl Deployment {
    /// The catalog entry agents see (Part II §5.4). Its fields change only
    /// when the deployment is replaced, enabled or disabled — never per
    /// firing — so `catalog_version` does not move with the clock. It is
    /// visible to a caller who may see every entry the body references
    /// (their visibility scopes, read from `catalog` now; a reference that
    /// no longer exists adds none, and its firing refuses on drift).
    pub fn catalog_entry(&self, catalog: &crate::catalog::TenantCatalog) -> crate::catalog::StoredEntry {
        let row = &self.row;
        let mut visibility: Vec<String> =
            self.baseline.keys().filter_map(|id| catalog.stored(id)).flat_map(|s| s.visibility.clone()).collect();
        visibility.sort();
        visibility.dedup();
        let triggers: Vec<String> = self.triggers.iter().map(Trigger::describe).collect();
        let state = if row.enabled { "enabled" } else { "disabled" };
        let mut tags = vec!["deployment".to_owned(), state.to_owned()];
        for trigger in &self.triggers {
            let kind = trigger.kind().to_owned();
            if !tags.contains(&kind) {
                tags.push(kind);
            }
        }
        let entry = crate::protocol::catalog::CatalogEntry {
            id: entry_id(&row.name),
            kind: entry_kind(&row.language),
            name: row.name.clone(),
            description: Some(format!(
                "Deployed {} program, version {}, {state}; fires {}; runs as {}.",
                row.language,
                row.version,
                triggers.join(" or "),
                row.subject
            )),
            input_schema: None,
            output_schema: None,
            risk: row.risk.clone(),
            // A row that does not decode claims the most risk (Part II §5.3:
            // hints are never less restrictive than the body).
            risk_hints: serde_json::from_str(&row.risk_hints).unwrap_or(RiskHints {
                read_only: false,
                destructive: true,
                open_world: true,
            }),
            tags,
            languages: Some(vec![row.language.clone()]),
            revision: Some(format!("{}", row.version)),
        };
        crate::catalog::StoredEntry::new(entry, visibility, None)
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
}

/// Makes `tenant`'s catalog in this replica show deployment `name` as the
/// store holds it: its entry put, replaced, or removed when it is gone.
/// Called after every install, enable, disable and remove here, and for a
/// change another replica announces (`fleet::changes`).
///
/// # Errors
/// A message when the store fails or the row does not decode.
pub async fn publish(platform: &Platform, tenant: &crate::service::Tenant, name: &str) -> Result<(), String> {
    let row = platform.store().deployment_get(&tenant.id, name).await.map_err(|e| e.to_string())?;
    match row {
        Some(row) => {
            let deployment = Deployment::from_row(row)?;
            tenant.with_catalog(|catalog| {
                let entry = deployment.catalog_entry(catalog);
                catalog.apply(vec![entry], &[])
            });
        }
        None => {
            tenant.with_catalog(|catalog| catalog.apply(Vec::new(), &[entry_id(name)]));
        }
    }
    Ok(())
}

/// Publishes every stored deployment of `tenant` (at start, or when a
/// replica loads a tenant); returns how many.
///
/// # Errors
/// A message when the store fails.
pub async fn publish_all(platform: &Platform, tenant: &crate::service::Tenant) -> Result<usize, String> {
    let deployments = of_tenant(platform, &tenant.id).await?;
    let count = deployments.len();
    tenant.with_catalog(|catalog| {
        let entries: Vec<_> = deployments.iter().map(|deployment| deployment.catalog_entry(catalog)).collect();
        catalog.apply(entries, &[])
    });
    Ok(count)
}

/// Tells this replica's catalog and the other replicas that deployment
/// `name` of `tenant` changed in the store.
async fn changed(platform: &Platform, tenant: &str, name: &str) {
    platform.deployments().changed();
    if let Some(live) = platform.tenant(tenant)
        && let Err(error) = publish(platform, &live, name).await
    {
        tracing::error!(%tenant, deployment = %name, %error, "cannot publish a deployment's catalog entry");
    }
    let change = crate::fleet::changes::Change::Deployment { tenant: tenant.to_owned(), name: name.to_owned() };
    crate::fleet::changes::announce(platform, vec![change]).await;
}

/// `ms` since the Unix epoch as an RFC 3339 UTC instant with milliseconds.
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Parses an RFC 3339 instant to ms since the Unix epoch.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text).ok().map(|at| at.timestamp_millis())
}

/// The first tick of any of `schedules` strictly after `after_ms`.
pub fn next_due(schedules: &[schedule::Schedule], after_ms: i64) -> Option<i64> {
    schedules.iter().filter_map(|schedule| schedule.next_after(after_ms)).min()
}

/// What [`install`] stored.
#[derive(Clone, Debug)]
pub struct Installed {
    /// The deployment's name.
    pub name: String,
    /// Its version (1 for a new name).
    pub version: i64,
    /// Its triggers.
    pub triggers: Vec<Trigger>,
    /// Its next schedule tick.
    pub next_due: Option<i64>,
}

/// Checks and stores what a successful deploy-mode Run `run_id` installs
/// for `context`'s caller (Part II §6.5.7).
///
/// # Errors
/// A message for the installation Run's outcome (nothing is stored): a
/// malformed name, no trigger, a schedule that does not parse, a webhook
/// source or MQTT broker the tenant has not registered, a body that does
/// not validate for the deployer, the `max_deployments` quota, a store
/// failure.
pub async fn install(
    context: &Context,
    slot: &LanguageSlot,
    installation: Installation,
    snapshot: &CatalogSnapshot,
    context_value: Option<&Value>,
    body_validated: &Validated,
    run_id: &str,
) -> Result<Installed, String> {
    let platform = &context.platform;
    let principal = &context.caller.principal;
    let name = installation.name;
    if name.is_empty() || name.len() > 128 || name.chars().any(|c| c.is_control() || c == '/' || c.is_whitespace()) {
        return Err(format!(
            "the installation is named {name:?}: a deployment name is 1 to 128 characters without spaces or '/'"
        ));
    }
    if installation.triggers.is_empty() {
        return Err("the installation has no trigger, so it would never run; nothing was installed".into());
    }
    let triggers = installation.triggers;
    let secrets: BTreeSet<String> = platform
        .store()
        .secret_names(&principal.tenant)
        .await
        .map_err(|e| format!("the store failed: {e}"))?
        .into_iter()
        .collect();
    let mut schedules = Vec::new();
    for trigger in &triggers {
        match trigger {
            Trigger::Schedule { cron, time_zone } => schedules.push(schedule::Schedule::parse(cron, time_zone)?),
            Trigger::Webhook { source } => {
                if !secrets.contains(&format!("{WEBHOOK_SECRET_PREFIX}{source}")) {
                    return Err(format!(
                        "webhook source '{source}' is not registered in tenant '{}': the operator stores its signing key as the secret '{WEBHOOK_SECRET_PREFIX}{source}'",
                        principal.tenant
                    ));
                }
            }
            Trigger::Mqtt { broker, topic } => {
                if !secrets.contains(&format!("{MQTT_SECRET_PREFIX}{broker}")) {
                    return Err(format!(
                        "MQTT broker '{broker}' is not registered in tenant '{}': the operator stores its URL and credentials as the secret '{MQTT_SECRET_PREFIX}{broker}'",
                        principal.tenant
                    ));
                }
                mqtt::check_filter(topic)?;
            }
        }
    }
    let Some(plan) = &body_validated.plan else {
        return Err("the installed body has no plan; nothing was installed".into());
    };
    if !body_validated.response.valid {
        return Err("the installed body does not validate for the deployer; nothing was installed".into());
    }
    let store = platform.store();
    let existing =
        store.deployment_get(&principal.tenant, &name).await.map_err(|e| format!("the store failed: {e}"))?;
    if existing.is_none() {
        let count = store.deployments_count(&principal.tenant).await.map_err(|e| format!("the store failed: {e}"))?;
        let limit = context.tenant.quotas().max_deployments;
        if count >= i64::from(limit) {
            return Err(format!(
                "quota max_deployments ({limit}) of tenant '{}' is reached; remove a deployment or deploy under an existing name",
                principal.tenant
            ));
        }
    }
    let now = platform.deployments().clock().now_ms();
    let next = next_due(&schedules, now);
    let baseline = crate::run::promotion::baseline(snapshot, &body_validated.references);
    let hints: RiskHints = plan.max_risk_hints;
    let row = DeploymentRow {
        tenant: principal.tenant.clone(),
        name: name.clone(),
        language: slot.entry.name.clone(),
        version: 0,
        subject: principal.subject.clone(),
        scopes: serde_json::to_string(&principal.scopes).unwrap_or_else(|_| "[]".into()),
        body: installation.body,
        context: context_value.map(Value::to_string),
        triggers: serde_json::to_string(&triggers).unwrap_or_else(|_| "[]".into()),
        baseline: serde_json::to_string(&baseline).unwrap_or_else(|_| "{}".into()),
        risk: plan.max_risk.clone(),
        risk_hints: serde_json::to_string(&hints).unwrap_or_else(|_| "{}".into()),
        enabled: true,
        run_id: run_id.to_owned(),
        created_at: now_ms(),
        updated_at: now_ms(),
        next_due: next,
    };
    let version = store.deployment_put(&row).await.map_err(|e| format!("the store failed: {e}"))?;
    changed(platform, &principal.tenant, &name).await;
    Ok(Installed { name, version, triggers, next_due: next })
}

/// A tenant's deployments, decoded (corrupt rows are logged and skipped).
///
/// # Errors
/// A message when the store fails.
pub async fn of_tenant(platform: &Platform, tenant: &str) -> Result<Vec<Deployment>, String> {
    let rows = platform.store().deployments_of_tenant(tenant).await.map_err(|e| e.to_string())?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let name = row.name.clone();
            Deployment::from_row(row)
                .inspect_err(
                    |error| tracing::error!(%tenant, deployment = %name, %error, "a stored deployment does not decode"),
                )
                .ok()
        })
        .collect())
}

/// Enables or disables a deployment (an enabled one's next tick is
/// computed from now); false when it does not exist.
///
/// # Errors
/// A message when the store fails.
pub async fn set_enabled(platform: &Platform, tenant: &str, name: &str, enabled: bool) -> Result<bool, String> {
    let store = platform.store();
    let Some(row) = store.deployment_get(tenant, name).await.map_err(|e| e.to_string())? else {
        return Ok(false);
    };
    let deployment = Deployment::from_row(row)?;
    let next = if enabled { next_due(&deployment.schedules(), platform.deployments().clock().now_ms()) } else { None };
    let done = store.deployment_set_enabled(tenant, name, enabled, next, now_ms()).await.map_err(|e| e.to_string())?;
    changed(platform, tenant, name).await;
    Ok(done)
}

/// Removes a deployment; false when it does not exist.
///
/// # Errors
/// A message when the store fails.
pub async fn remove(platform: &Platform, tenant: &str, name: &str) -> Result<bool, String> {
    let done = platform.store().deployment_delete(tenant, name).await.map_err(|e| e.to_string())?;
    changed(platform, tenant, name).await;
    Ok(done)
}
