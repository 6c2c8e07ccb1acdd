//! `discover` (Part II §6.1, Part III §3.1): the manifest.

use std::sync::Arc;

use super::Context;
use crate::tenancy::tenant::PublishedManifest;

/// The manifest of the caller's tenant, ready as JSON and text (built once
/// per change of the tenant's Languages). Side-effect free.
pub(crate) fn manifest(context: &Context) -> Arc<PublishedManifest> {
    context.tenant.manifest()
}
