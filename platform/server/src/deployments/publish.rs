//! Agents see their tenant's deployments as catalog entries (Part II
//! §5.4): [`publish`] makes this replica's catalog show one deployment as
//! the store holds it, [`publish_all`] every deployment of a tenant, and
//! [`changed`] tells this replica's runtime, its catalog and the other
//! replicas after a change made here.

use pilotage_store::StoreError;

use super::model::{DecodeError, Deployment, entry_id, of_tenant};
use crate::changes::{Change, announce};
use crate::tenancy::{Platform, Tenant};

/// Occurs when a deployment's catalog entry cannot be published.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// Occurs when the store cannot be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Occurs when the stored row does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Makes `tenant`'s catalog in this replica show deployment `name` as the
/// store holds it: its entry put, replaced, or removed when it is gone.
/// Called after every install, enable, disable and remove here, and for a
/// change another replica announces (`fleet::changes`).
///
/// # Errors
/// [`PublishError`] when the store fails or the row does not decode.
pub(crate) async fn publish(platform: &Platform, tenant: &Tenant, name: &str) -> Result<(), PublishError> {
    let row = platform.store().deployment_get(&tenant.id, name).await?;
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
/// [`PublishError`] when the store fails.
pub(crate) async fn publish_all(platform: &Platform, tenant: &Tenant) -> Result<usize, PublishError> {
    let deployments = of_tenant(platform.store(), &tenant.id).await?;
    let count = deployments.len();
    tenant.with_catalog(|catalog| {
        let entries: Vec<_> = deployments.iter().map(|deployment| deployment.catalog_entry(catalog)).collect();
        catalog.apply(entries, &[])
    });
    Ok(count)
}

/// Tells this replica's catalog and the other replicas that deployment
/// `name` of `tenant` changed in the store.
pub(crate) async fn changed(platform: &Platform, tenant: &str, name: &str) {
    platform.deployments().changed();
    if let Some(live) = platform.tenant(tenant)
        && let Err(error) = publish(platform, &live, name).await
    {
        tracing::error!(%tenant, deployment = %name, %error, "cannot publish a deployment's catalog entry");
    }
    announce(platform, vec![Change::Deployment { tenant: tenant.to_owned(), name: name.to_owned() }]).await;
}
