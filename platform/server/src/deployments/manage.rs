//! Operating deployments (the admin API and CLI): enable, disable, remove.
//! Each change is published here and announced to the other replicas.

use pilotage_store::StoreError;

use super::model::{DecodeError, Deployment, next_due};
use super::publish::changed;
use crate::tenancy::Platform;

/// Occurs when a deployment cannot be changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManageError {
    /// Occurs when the store fails.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Occurs when the stored row does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Enables or disables a deployment (an enabled one's next tick is
/// computed from now); false when it does not exist.
///
/// # Errors
/// [`ManageError`] when the store fails.
pub async fn set_enabled(platform: &Platform, tenant: &str, name: &str, enabled: bool) -> Result<bool, ManageError> {
    let store = platform.store();
    let Some(row) = store.deployment_get(tenant, name).await? else {
        return Ok(false);
    };
    let deployment = Deployment::from_row(row)?;
    let next = if enabled { next_due(&deployment.schedules(), platform.clock().now_ms()) } else { None };
    let done = store.deployment_set_enabled(tenant, name, enabled, next, platform.clock().now_ms()).await?;
    changed(platform, tenant, name).await;
    Ok(done)
}

/// Removes a deployment; false when it does not exist.
///
/// # Errors
/// [`ManageError`] when the store fails.
pub async fn remove(platform: &Platform, tenant: &str, name: &str) -> Result<bool, ManageError> {
    let done = platform.store().deployment_delete(tenant, name).await?;
    changed(platform, tenant, name).await;
    Ok(done)
}
