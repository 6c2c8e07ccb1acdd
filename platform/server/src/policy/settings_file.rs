//! The policies a settings file gives (`[policies.<tenant>]`, what the
//! Helm chart writes from its `policies` value), stored on their tenants at
//! start.

use std::collections::BTreeMap;

use super::{Policy, approvals};

/// Stores the policies of the settings file (`[policies.<tenant>]`) on
/// their tenants at start, each one that differs from the stored policy
/// audited as set by `settings` and announced to the other replicas. A
/// tenant that does not exist, or a store that fails, is logged; the
/// tenant keeps what it had.
pub(crate) async fn from_settings(platform: &crate::tenancy::Platform, policies: &BTreeMap<String, Policy>) {
    for (tenant, policy) in policies {
        let text = serde_json::to_string(policy).unwrap_or_else(|_| "{}".into());
        let row = match platform.store().tenant(tenant).await {
            Ok(Some(row)) => row,
            Ok(None) => {
                tracing::warn!(%tenant, "the settings give a policy for a tenant that does not exist; skipped");
                continue;
            }
            Err(error) => {
                tracing::error!(%tenant, %error, "cannot read the tenant of a policy in the settings");
                continue;
            }
        };
        if row.policy == text {
            continue;
        }
        let from = serde_json::from_str::<Policy>(&row.policy).map(|p| p.version()).unwrap_or_default();
        let updated = pilotage_store::tenants::TenantRow { policy: text, ..row };
        if let Err(error) = platform.store().tenant_update(&updated).await {
            tracing::error!(%tenant, %error, "cannot store the policy the settings give");
            continue;
        }
        crate::tenancy::load::apply_row(platform, &updated);
        crate::changes::announce(platform, vec![crate::changes::Change::Tenant { tenant: tenant.clone() }]).await;
        approvals::audit(
            platform,
            &approvals::Actor { name: "settings".into(), who: crate::tenancy::Identity::settings_file() },
            "tenant.policy",
            tenant,
            serde_json::json!({"from_version": from, "version": policy.version(), "policy": policy}),
        )
        .await;
    }
}
