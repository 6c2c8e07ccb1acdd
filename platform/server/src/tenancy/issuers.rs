//! The identity providers a platform trusts: [`IssuerConfig`], from the
//! settings (the operator's own, and customers' tied to tenants) or stored
//! with a tenant (`tenants.issuers`, set by an operator through the admin
//! API), and the platform-wide index of the stored ones by `iss`
//! ([`StoredIssuers`]). Only the model: `crate::auth::jwt` checks tokens
//! against it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One trusted token issuer, and what its tokens may do here.
///
/// An issuer with no `tenants` is the operator's own: its tokens may name
/// any tenant and may carry `pilotage:admin`. An issuer tied to tenants
/// (a customer's identity provider) acts only in those, and never grants
/// `pilotage:admin`, whatever its tokens say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuerConfig {
    /// The `iss` value tokens carry, compared byte for byte (an issuer
    /// whose identifier ends in `/`, as Auth0's does, is configured so).
    pub issuer: String,
    /// Where its signing keys are published.
    pub jwks_url: String,
    /// Algorithms accepted from it (asymmetric only; default RS256 and
    /// ES256).
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// The tenants its tokens may act in; empty: any (the operator's own
    /// issuer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// How its tokens name their tenant.
    #[serde(default, skip_serializing_if = "TenantFrom::is_claim")]
    pub tenant_from: TenantFrom,
    /// The claim naming the tenant in its tokens, when not
    /// `auth.tenant_claim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_claim: Option<String>,
    /// The `aud` its tokens carry for the MCP resource, when not the
    /// resource's URL (Entra ID sets the API's client id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The `aud` its tokens carry for the admin API, when not
    /// `<public url>/admin/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_audience: Option<String>,
    /// The scopes it may grant; others in its tokens are ignored. `None`:
    /// every scope (but `pilotage:admin` only from the operator's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// Its tokens must be RFC 9068 access tokens (header `typ` `at+jwt`),
    /// so an ID token it signed is never taken for one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub access_token_type: bool,
    /// It issues DPoP-bound tokens (RFC 9449, `cnf.jkt`): those are
    /// accepted with a valid proof. A bound token from an issuer not
    /// marked so is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dpop: bool,
    /// The claim in which its tokens name the person's groups or roles
    /// (`groups` for Okta and Keycloak, `roles` for Entra ID app roles): a
    /// string or an array of strings, read through `role_scopes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles_claim: Option<String>,
    /// The scopes each value of `roles_claim` grants, e.g.
    /// `{"pilotage-operators": ["pilotage:admin"], "auditors":
    /// ["pilotage:console"]}`: added to the token's own scopes before
    /// `scopes` cuts them, so a provider's groups map onto operator, tenant
    /// admin, reader and approver rights without custom scopes, and an
    /// issuer tied to tenants still never grants `pilotage:admin`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub role_scopes: BTreeMap<String, Vec<String>>,
}

impl IssuerConfig {
    /// The operator's own issuer `issuer` with its keys at `jwks_url`,
    /// everything else by default.
    pub fn new(issuer: impl Into<String>, jwks_url: impl Into<String>) -> IssuerConfig {
        IssuerConfig {
            issuer: issuer.into(),
            jwks_url: jwks_url.into(),
            algorithms: default_algorithms(),
            tenants: Vec::new(),
            tenant_from: TenantFrom::Claim,
            tenant_claim: None,
            audience: None,
            admin_audience: None,
            scopes: None,
            access_token_type: false,
            dpop: false,
            roles_claim: None,
            role_scopes: BTreeMap::new(),
        }
    }

    /// Whether it is the operator's own issuer (tied to no tenant).
    pub fn is_operators(&self) -> bool {
        self.tenants.is_empty()
    }

    /// The scopes `claims`' roles grant through `role_scopes` (none
    /// without `roles_claim`).
    pub fn role_granted(&self, claims: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
        let Some(claim) = &self.roles_claim else { return Vec::new() };
        let roles: Vec<&str> = match claims.get(claim) {
            Some(serde_json::Value::String(one)) => vec![one.as_str()],
            Some(serde_json::Value::Array(list)) => list.iter().filter_map(serde_json::Value::as_str).collect(),
            _ => Vec::new(),
        };
        roles.into_iter().filter_map(|role| self.role_scopes.get(role)).flatten().cloned().collect()
    }

    /// Whether its tokens may act in `tenant`.
    pub fn serves(&self, tenant: &str) -> bool {
        self.is_operators() || self.tenants.iter().any(|t| t == tenant)
    }
}

/// How an issuer's tokens name the tenant they act in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TenantFrom {
    /// A claim (the issuer's `tenant_claim`, else `auth.tenant_claim`):
    /// a string or an array of tenants. A token of an issuer tied to
    /// tenants that names none acts in the issuer's tenant (when it has
    /// exactly one, or the one the path `/t/{tenant}/mcp` names).
    #[default]
    Claim,
    /// The resource: its tokens' audience is `<public url>/t/{tenant}/mcp`
    /// (RFC 8707 resource indicators), and they act in that tenant only,
    /// on that path only.
    Resource,
}

impl TenantFrom {
    fn is_claim(&self) -> bool {
        *self == TenantFrom::Claim
    }
}

fn default_algorithms() -> Vec<String> {
    vec!["RS256".to_owned(), "ES256".to_owned()]
}

/// The issuers stored with tenants, by `iss`: one entry per issuer, its
/// `tenants` every tenant that trusts it. An issuer is configured alike
/// for every tenant that lists it (the admin API refuses otherwise), so
/// the first tenant's entry stands for all.
#[derive(Clone, Debug, Default)]
pub struct StoredIssuers {
    by_issuer: BTreeMap<String, Arc<IssuerConfig>>,
}

impl StoredIssuers {
    /// The index of `tenants`' own lists (tenant id, its issuers).
    pub fn build<'a>(tenants: impl IntoIterator<Item = (&'a str, Vec<IssuerConfig>)>) -> StoredIssuers {
        let mut by_issuer: BTreeMap<String, IssuerConfig> = BTreeMap::new();
        for (tenant, list) in tenants {
            for config in list {
                let entry = by_issuer
                    .entry(config.issuer.clone())
                    .or_insert_with(|| IssuerConfig { tenants: Vec::new(), ..config.clone() });
                if !entry.tenants.iter().any(|t| t == tenant) {
                    entry.tenants.push(tenant.to_owned());
                }
            }
        }
        StoredIssuers { by_issuer: by_issuer.into_iter().map(|(iss, config)| (iss, Arc::new(config))).collect() }
    }

    /// The entry of `iss`, if a tenant trusts it.
    pub fn get(&self, iss: &str) -> Option<Arc<IssuerConfig>> {
        self.by_issuer.get(iss).cloned()
    }

    /// Every entry, by `iss`.
    pub fn all(&self) -> impl Iterator<Item = &Arc<IssuerConfig>> {
        self.by_issuer.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issuer_trusted_by_two_tenants_is_one_entry_serving_both_and_no_other() {
        let shared = IssuerConfig::new("https://idp.test", "https://idp.test/jwks");
        let own = IssuerConfig::new("https://acme.test", "https://acme.test/jwks");
        let index = StoredIssuers::build([
            ("acme", vec![shared.clone(), own.clone()]),
            ("globex", vec![shared.clone()]),
            ("initech", Vec::new()),
        ]);
        let entry = index.get("https://idp.test").unwrap();
        assert_eq!(entry.tenants, ["acme", "globex"]);
        assert!(entry.serves("globex") && !entry.serves("initech") && !entry.is_operators());
        assert_eq!(index.get("https://acme.test").unwrap().tenants, ["acme"]);
        assert!(index.get("https://nobody.test").is_none());
        assert_eq!(index.all().count(), 2);
    }
}
