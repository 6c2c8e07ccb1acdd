//! The deployment model (Part II §6.5.7): a stored deployment decoded
//! ([`Deployment`]), how agents see it in their catalog (id [`entry_id`],
//! kind [`entry_kind`], not callable), the secret names a tenant registers
//! its trigger sources under, and the bounds on events.

use std::collections::{BTreeMap, BTreeSet};

use pilotage_engine::catalog::{StoredEntry, TenantCatalog};
use pilotage_engine::clock::rfc3339;
use pilotage_engine::installation::Trigger;
use pilotage_protocol::catalog::CatalogEntry;
use pilotage_protocol::risk::RiskHints;
use pilotage_store::{DeploymentRow, Store, StoreError};
use serde_json::{Value, json};

use super::schedule::Schedule;

/// The largest event a trigger delivers, in bytes: a webhook body or an
/// MQTT message (an event becomes part of its firing's stored Run). A
/// larger webhook body is refused with 413 before it is buffered; a larger
/// MQTT packet ends its connection, which is reconnected.
pub const MAX_EVENT_BYTES: usize = 256 * 1024;

/// Occurs when a stored deployment does not decode (a corrupt row).
#[derive(Debug, thiserror::Error)]
#[error("deployment {tenant}/{name}: {column} does not decode: {message}")]
pub struct DecodeError {
    /// The tenant.
    pub tenant: String,
    /// The deployment.
    pub name: String,
    /// The JSON column (`triggers`, `baseline`, `scopes`).
    pub column: &'static str,
    /// serde's message.
    pub message: String,
}

/// The catalog entry id under which agents see deployment `name`.
pub(crate) fn entry_id(name: &str) -> String {
    format!("deployment:{name}")
}

/// The catalog entry kind of a deployment of Language `language`
/// (`family/version`): `<family>_deployment`, engine-defined per family as
/// promoted programs' `<family>_program` is (Part II §5.4: an entry's kind
/// belongs to its Language's kind set). Not callable.
pub(crate) fn entry_kind(language: &str) -> String {
    format!("{}_deployment", language.split('/').next().unwrap_or(language))
}

/// The prefix of a webhook source's secret: the operator stores the
/// source's signing key as the tenant secret `webhook:<source>`.
pub(crate) const WEBHOOK_SECRET_PREFIX: &str = "webhook:";

/// The prefix of an MQTT broker's secret: the tenant secret
/// `mqtt:<broker>` holds `{"url": "mqtt://host:port", "username"?,
/// "password"?}`.
pub(crate) const MQTT_SECRET_PREFIX: &str = "mqtt:";

/// A stored deployment, decoded.
#[derive(Clone, Debug)]
pub(crate) struct Deployment {
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
    /// [`DecodeError`] when a JSON column does not decode (a corrupt row).
    pub(crate) fn from_row(row: DeploymentRow) -> Result<Deployment, DecodeError> {
        fn column<T: serde::de::DeserializeOwned>(
            row: &DeploymentRow,
            column: &'static str,
            text: &str,
        ) -> Result<T, DecodeError> {
            serde_json::from_str(text).map_err(|error| DecodeError {
                tenant: row.tenant.clone(),
                name: row.name.clone(),
                column,
                message: error.to_string(),
            })
        }
        let triggers = column(&row, "triggers", &row.triggers)?;
        let baseline = column(&row, "baseline", &row.baseline)?;
        let scopes = column(&row, "scopes", &row.scopes)?;
        Ok(Deployment { row, triggers, baseline, scopes })
    }

    /// The schedules among its triggers, parsed (a stored schedule parsed
    /// when it was installed).
    pub(crate) fn schedules(&self) -> Vec<Schedule> {
        self.triggers
            .iter()
            .filter_map(|trigger| match trigger {
                Trigger::Schedule { cron, time_zone } => Schedule::parse(cron, time_zone).ok(),
                _ => None,
            })
            .collect()
    }

    /// What the admin API and the agents' catalog show.
    pub(crate) fn view(&self) -> Value {
        let mut view = self.view_without_assertions();
        if let Some(kept) = self.row.assertions.as_deref().and_then(|text| serde_json::from_str::<Value>(text).ok()) {
            view[pilotage_protocol::assertions::MEMBER] = kept;
        }
        view
    }

    fn view_without_assertions(&self) -> Value {
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
    pub(crate) fn catalog_entry(&self, catalog: &TenantCatalog) -> StoredEntry {
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
        let entry = CatalogEntry {
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
        StoredEntry::new(entry, visibility, None)
    }
}

/// The first tick of any of `schedules` strictly after `after_ms`.
pub(crate) fn next_due(schedules: &[Schedule], after_ms: i64) -> Option<i64> {
    schedules.iter().filter_map(|schedule| schedule.next_after(after_ms)).min()
}

/// A tenant's deployments, decoded (corrupt rows are logged and skipped).
///
/// # Errors
/// [`StoreError`] when the store fails.
pub(crate) async fn of_tenant(store: &Store, tenant: &str) -> Result<Vec<Deployment>, StoreError> {
    let rows = store.deployments_of_tenant(tenant).await?;
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
