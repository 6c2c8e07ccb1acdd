//! Tenant changes announced to the other replicas (ARCHITECTURE
//! "Scale-out"): a replica that changes a tenant's state stores it as
//! before, changes its own memory, then [`announce`]s which item changed:
//! a row in the store's change log and a `NOTIFY` in one transaction
//! (`fleet::follow` applies them on every other replica). Below
//! everything that changes a tenant (policy, deployments, operations, the
//! admin API), it imports only the tenancy it announces for.

use pilotage_engine::clock::system_now_ms;
use pilotage_store::ChangeRow;

use crate::tenancy::Platform;

/// One item of a tenant's state that changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The tenant's row: created, updated (disabled, quotas) or deleted.
    Tenant {
        /// The tenant.
        tenant: String,
    },
    /// Which version of a Language serves, or that none does.
    Language {
        /// The tenant.
        tenant: String,
        /// The Language identifier (`family/version`).
        name: String,
    },
    /// One operator catalog entry: put or deleted.
    CatalogEntry {
        /// The tenant.
        tenant: String,
        /// The entry id.
        id: String,
    },
    /// One data source: attached, replaced or removed.
    DataSource {
        /// The tenant.
        tenant: String,
        /// The tenant's name for it.
        name: String,
    },
    /// One promoted program (Part II §6.7), published by a promote call.
    Promoted {
        /// The tenant.
        tenant: String,
        /// Its content-derived reference.
        program_ref: String,
    },
    /// One deployment (Part II §6.5.7): installed, replaced, enabled,
    /// disabled or removed. Firing reads the store, so applying it only
    /// refreshes the agents' catalog entry and wakes the scheduler.
    Deployment {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
    },
}

impl Change {
    /// The tenant it belongs to.
    pub(crate) fn tenant(&self) -> &str {
        match self {
            Change::Tenant { tenant }
            | Change::Language { tenant, .. }
            | Change::CatalogEntry { tenant, .. }
            | Change::DataSource { tenant, .. }
            | Change::Promoted { tenant, .. }
            | Change::Deployment { tenant, .. } => tenant,
        }
    }

    /// The log's (tenant, kind, name).
    pub(crate) fn to_row(&self) -> (String, String, String) {
        let (kind, name) = match self {
            Change::Tenant { .. } => ("tenant", ""),
            Change::Language { name, .. } => ("language", name.as_str()),
            Change::CatalogEntry { id, .. } => ("catalog_entry", id.as_str()),
            Change::DataSource { name, .. } => ("data_source", name.as_str()),
            Change::Promoted { program_ref, .. } => ("promoted", program_ref.as_str()),
            Change::Deployment { name, .. } => ("deployment", name.as_str()),
        };
        (self.tenant().to_owned(), kind.to_owned(), name.to_owned())
    }

    /// The change a log row names; `None` for a kind this version does not
    /// know (a newer replica's), which is skipped.
    pub(crate) fn from_row(row: &ChangeRow) -> Option<Change> {
        let tenant = row.tenant.clone();
        let name = row.name.clone();
        Some(match row.kind.as_str() {
            "tenant" => Change::Tenant { tenant },
            "language" => Change::Language { tenant, name },
            "catalog_entry" => Change::CatalogEntry { tenant, id: name },
            "data_source" => Change::DataSource { tenant, name },
            "promoted" => Change::Promoted { tenant, program_ref: name },
            "deployment" => Change::Deployment { tenant, name },
            _ => return None,
        })
    }
}

/// Announces `changes`, already stored and applied here, to the other
/// replicas. Nothing happens on SQLite. A failure is logged, not returned:
/// the change itself is made and stored, and the caller's answer should
/// say so; the other replicas then see it at their next reconcile or
/// restart.
pub(crate) async fn announce(platform: &Platform, changes: Vec<Change>) {
    if changes.is_empty() || !platform.store().is_shared() {
        return;
    }
    let rows: Vec<(String, String, String)> = changes.iter().map(Change::to_row).collect();
    let origin = platform.leases().instance_id();
    // The log is the fleet's: its times are compared across replicas, so
    // they come from the system clock, never a frozen test clock.
    if let Err(error) = platform.store().changes_announce(origin, &rows, system_now_ms()).await {
        tracing::error!(%error, changes = rows.len(), "cannot announce tenant changes to the other replicas");
    }
}
