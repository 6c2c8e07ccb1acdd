//! `discover` (Part II §6.1, Part III §3.1): the manifest.

use serde_json::Value;

use super::Context;

/// The manifest of the caller's tenant. Side-effect free.
pub(crate) fn manifest(context: &Context) -> Value {
    serde_json::to_value(context.tenant.manifest()).unwrap_or(Value::Null)
}
