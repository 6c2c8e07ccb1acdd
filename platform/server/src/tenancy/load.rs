//! The one place tenant state is loaded from the store: at start-up for
//! every tenant, and for one tenant when the admin API or another
//! replica's announcement (`fleet::follow`) says it changed. A tenant's
//! state is its row (disabled, quotas), its served Languages, operator
//! catalog entries, data sources (introspected into the catalog) and
//! promoted programs; deployments are published as catalog entries by
//! `deploy::publish`.
//!
//! Each kind of row is read in one query for the whole [`Scope`], and
//! each distinct component once (by SHA-256) whatever the number of
//! tenants serving it, so start-up grows with the rows stored, not with
//! round trips per tenant (10,000 tenants start in seconds).

use std::collections::HashMap;
use std::sync::Arc;

use pilotage_engine::catalog::StoredEntry;
use pilotage_engine::{Component, EngineError};
use pilotage_store::{DataSourceRow, PromotedRow, Scope, StoreError, TenantRow};

use super::platform::Platform;
use super::promotion::PromotedProgram;
use super::tenant::{LanguageSlot, Tenant};
use crate::datasource::attached::{AttachedSource, DataSourceSpec, sealed_name};

/// Occurs when stored tenant state cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Occurs when the store cannot be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Occurs when a stored component is missing, does not load, or does
    /// not hash to the SHA-256 that names it.
    #[error("component {sha256}: {problem}")]
    Component {
        /// The SHA-256 the version names.
        sha256: String,
        /// What is wrong.
        problem: ComponentProblem,
    },
    /// Occurs when a stored row does not decode (a catalog entry, a data
    /// source's spec or sealed URL, a promoted program).
    #[error("tenant {tenant}: {what}: {message}")]
    Corrupt {
        /// The tenant.
        tenant: String,
        /// Which row (`catalog entry`, `data source sales`, `promoted prg_…`).
        what: String,
        /// Why.
        message: String,
    },
}

/// What is wrong with a stored component.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ComponentProblem {
    /// Occurs when the store has no bytes under that SHA-256.
    #[error("the store has no such component")]
    Missing,
    /// Occurs when the bytes do not load.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Occurs when the bytes hash to another SHA-256.
    #[error("the stored bytes have SHA-256 {0}")]
    Mismatch(String),
    /// Occurs when the compiling thread did not finish.
    #[error("the compiling task failed: {0}")]
    Task(String),
}

/// The component a stored Language version names: the one already loaded
/// with that SHA-256 when some tenant uses it, else loaded from the bytes
/// in the store (compiled, or read from the compiled-code cache).
///
/// # Errors
/// [`LoadError::Component`] when the store has no such component, or the
/// bytes do not load or do not hash to `sha256`; [`LoadError::Store`] when
/// the read fails.
pub async fn component(platform: &Platform, sha256: &str) -> Result<Component, LoadError> {
    if let Some(component) = platform.engine().loaded(sha256) {
        return Ok(component);
    }
    let problem = |problem| LoadError::Component { sha256: sha256.to_owned(), problem };
    let bytes = platform.store().component_bytes(sha256).await?.ok_or_else(|| problem(ComponentProblem::Missing))?;
    let engine = platform.engine().clone();
    let component = tokio::task::spawn_blocking(move || engine.load(&bytes))
        .await
        .map_err(|error| problem(ComponentProblem::Task(error.to_string())))?
        .map_err(|error| problem(ComponentProblem::Engine(error)))?;
    if component.sha256() != sha256 {
        return Err(problem(ComponentProblem::Mismatch(component.sha256().to_owned())));
    }
    Ok(component)
}

/// Loads the stored tenants of `scope` into the platform: each tenant's
/// row, served Languages, catalog entries, data sources and promoted
/// programs. Returns how many tenants were loaded. A tenant of
/// [`Scope::Tenant`] that is no longer stored is left as it is (its caller
/// removes it).
///
/// # Errors
/// [`LoadError`] naming what could not be loaded.
pub async fn load(platform: &Platform, scope: Scope<'_>) -> Result<usize, LoadError> {
    let store = platform.store();
    let rows = store.tenants(scope).await?;
    let mut tenants = HashMap::with_capacity(rows.len());
    for row in &rows {
        tenants.insert(row.id.clone(), apply_row(platform, row));
    }
    let mut components: HashMap<String, Component> = HashMap::new();
    for language in store.languages(scope, true).await? {
        let Some(tenant) = tenants.get(&language.tenant) else { continue };
        let component = match components.get(&language.sha256) {
            Some(component) => component.clone(),
            None => {
                let loaded = self::component(platform, &language.sha256).await?;
                components.insert(language.sha256.clone(), loaded.clone());
                loaded
            }
        };
        tenant.install_language(LanguageSlot::new(component, platform.retention().clone()));
    }
    let mut entries: HashMap<String, Vec<StoredEntry>> = HashMap::new();
    for (tenant, text) in store.catalog_entries(scope).await? {
        let stored: StoredEntry = serde_json::from_str(&text).map_err(|error| LoadError::Corrupt {
            tenant: tenant.clone(),
            what: "a catalog entry".into(),
            message: error.to_string(),
        })?;
        entries.entry(tenant).or_default().push(StoredEntry::new(stored.entry, stored.visibility, stored.binding));
    }
    for (id, tenant) in &tenants {
        tenant.put_entries(entries.remove(id).unwrap_or_default());
    }
    for source in store.data_sources(scope).await? {
        if let Some(tenant) = tenants.get(&source.tenant) {
            data_source(platform, tenant, &source).await?;
        }
    }
    let mut promoted: HashMap<String, Vec<PromotedRow>> = HashMap::new();
    for row in store.promoted(scope).await? {
        promoted.entry(row.tenant.clone()).or_default().push(row);
    }
    for (id, tenant) in &tenants {
        promoted_programs(tenant, promoted.remove(id).unwrap_or_default())?;
    }
    Ok(rows.len())
}

/// A tenant's row applied to the running tenant (added when new).
pub fn apply_row(platform: &Platform, row: &TenantRow) -> Arc<Tenant> {
    let tenant = platform.add_tenant(&row.id);
    tenant.set_disabled(row.disabled);
    tenant.set_quotas(serde_json::from_str(&row.quotas).unwrap_or_default());
    // The admin API checked the policy before storing it; one that no
    // longer reads leaves the default (public addresses only), logged.
    let policy = serde_json::from_str::<crate::egress::EgressPolicy>(&row.egress)
        .map_err(|e| e.to_string())
        .and_then(|policy| tenant.egress().set_policy(policy).map_err(|e| e.to_string()));
    if let Err(error) = policy {
        tracing::error!(tenant = %row.id, %error, "the stored egress policy does not read; public addresses only");
    }
    // The identity providers an operator trusts for it; a list that no
    // longer reads trusts none (its agents are refused, never let in).
    match serde_json::from_str::<Vec<super::issuers::IssuerConfig>>(&row.issuers) {
        Ok(issuers) => platform.set_tenant_issuers(&row.id, issuers),
        Err(error) => {
            tracing::error!(tenant = %row.id, %error, "the stored issuers do not read; none is trusted for the tenant");
            platform.set_tenant_issuers(&row.id, Vec::new());
        }
    }
    // Likewise the policy on risk; one that no longer reads holds every
    // Run that changes state for approval rather than allowing it.
    match super::policy::Policy::read_stored(&row.policy) {
        Ok(policy) => tenant.set_policy(policy),
        Err(error) => {
            tracing::error!(tenant = %row.id, %error, "the stored policy on risk does not read; every Run that changes state needs approval");
            tenant.set_policy(super::policy::Policy::fail_safe());
        }
    }
    tenant
}

/// Attaches a stored data source and introspects it; a database that does
/// not answer leaves the source attached with an empty catalog and the
/// failure in its status (the periodic refresh retries).
///
/// # Errors
/// [`LoadError::Corrupt`] when the row cannot be read (a spec that does not
/// parse, a URL that cannot be unsealed with this platform's key).
pub async fn data_source(platform: &Platform, tenant: &Arc<Tenant>, row: &DataSourceRow) -> Result<(), LoadError> {
    let corrupt = |message: String| LoadError::Corrupt {
        tenant: row.tenant.clone(),
        what: format!("data source {}", row.name),
        message,
    };
    let spec: DataSourceSpec = serde_json::from_str(&row.spec).map_err(|e| corrupt(e.to_string()))?;
    let url = platform
        .secrets()
        .open(&row.tenant, &sealed_name(&row.name), &row.nonce, &row.sealed_url)
        .map_err(|e| corrupt(e.to_string()))?;
    let attached = AttachedSource::new(
        &row.name,
        spec,
        &url,
        platform.runtime().clone(),
        platform.clock().clone(),
        Some(tenant.egress().clone()),
    )
    .map_err(|e| corrupt(e.to_string()))?;
    let attached = Arc::new(attached);
    tenant.attach_data_source(attached.clone());
    if let Err(error) = attached.refresh(tenant.catalog()).await {
        tracing::warn!(tenant = %row.tenant, source = %row.name, %error, "a data source did not answer when loaded");
    }
    Ok(())
}

/// Loads a tenant's promoted programs (Part II §6.7) into it and their
/// entries into its catalog. Returns how many there were.
///
/// # Errors
/// [`LoadError::Corrupt`] when a stored row does not parse.
pub fn promoted_programs(tenant: &Tenant, rows: Vec<PromotedRow>) -> Result<usize, LoadError> {
    promoted_rows(tenant, rows)
}

/// Loads the promoted program `program_ref` of `tenant` from the store when
/// this replica does not hold it yet (promoted through another replica a
/// moment ago); `Ok(0)` when it holds it or nothing is stored.
///
/// # Errors
/// [`LoadError`] when the store cannot be read or the row does not decode.
pub async fn promoted_program(platform: &Platform, tenant: &Tenant, program_ref: &str) -> Result<usize, LoadError> {
    if tenant.promoted(program_ref).is_some() {
        return Ok(0);
    }
    let rows = platform.store().promoted(Scope::Tenant(&tenant.id)).await?;
    promoted_rows(tenant, rows.into_iter().filter(|row| row.program_ref == program_ref).collect())
}

fn promoted_rows(tenant: &Tenant, rows: Vec<PromotedRow>) -> Result<usize, LoadError> {
    let corrupt = |row: &PromotedRow, part: &str, error: serde_json::Error| LoadError::Corrupt {
        tenant: row.tenant.clone(),
        what: format!("promoted {} ({part})", row.program_ref),
        message: error.to_string(),
    };
    let mut entries = Vec::new();
    let count = rows.len();
    for row in rows {
        let stored: StoredEntry = serde_json::from_str(&row.entry).map_err(|e| corrupt(&row, "entry", e))?;
        let stored = StoredEntry::new(stored.entry, stored.visibility, None);
        let program = PromotedProgram {
            program_ref: row.program_ref.clone(),
            body: serde_json::from_str(&row.body).map_err(|e| corrupt(&row, "body", e))?,
            baseline: serde_json::from_str(&row.baseline).map_err(|e| corrupt(&row, "baseline", e))?,
            language: row.language,
            entry: stored.entry.clone(),
            promoter: row.promoter,
        };
        tenant.add_promoted(program);
        entries.push(stored);
    }
    tenant.put_entries(entries);
    Ok(count)
}
