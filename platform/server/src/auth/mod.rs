//! Agent authentication (the MCP authorization model: the platform is an
//! OAuth 2.1 resource server) and the [`Principal`] every request acts as.
//!
//! - [`jwt`]: bearer JWT validation against issuers' JWKS, with the
//!   algorithm allow-list, audience, issuer, expiry and tenant checks;
//! - [`dev`]: development tokens (HS256, a secret in the data folder),
//!   accepted only in `--auth dev` on loopback;
//! - `middleware`: the axum layer that turns `Authorization: Bearer` into
//!   a [`Principal`], or answers 401/403 with `WWW-Authenticate`, and the
//!   RFC 9728 protected-resource metadata.

pub mod dev;
pub mod dpop;
pub mod jwt;
pub(crate) mod middleware;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

pub use crate::tenancy::Principal;
pub use crate::tenancy::issuers::{IssuerConfig, TenantFrom};

/// Occurs when authentication cannot be set up (at start, or minting a
/// development token).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthSetupError {
    /// Occurs when an issuer's algorithm list names a symmetric or unknown
    /// algorithm.
    #[error("issuer {issuer}: algorithms {algorithms:?} must be asymmetric ones (RS256, ES256, PS256, EdDSA, …)")]
    Algorithms {
        /// The issuer.
        issuer: String,
        /// The list configured.
        algorithms: Vec<String>,
    },
    /// Occurs when the development secret cannot be read or written.
    #[error("the development secret {path}: {message}")]
    DevSecret {
        /// Its file.
        path: std::path::PathBuf,
        /// Why.
        message: String,
    },
    /// Occurs when a development token cannot be signed.
    #[error("cannot sign a development token: {0}")]
    Sign(String),
}

/// The scope an agent's token needs to use `/mcp` under `--auth jwt`.
pub const MCP_SCOPE: &str = "pilotage:mcp";
/// The scope of an operator (every tenant) on the admin API.
pub const ADMIN_SCOPE: &str = "pilotage:admin";
/// The scope of a tenant's own administrator on the admin API.
pub const TENANT_ADMIN_SCOPE: &str = "pilotage:tenant-admin";
/// The scope of a tenant's approvers: it lets its holder decide the
/// tenant's approval requests on the approval page
/// (`crate::policy::approvals`), and nothing else.
pub const APPROVE_SCOPE: &str = "pilotage:approve";
/// The scope of a tenant's console readers: it lets its holder sign in to
/// the operator console (`crate::console`) and read its own tenant's
/// pages, and nothing else.
pub const CONSOLE_SCOPE: &str = "pilotage:console";

/// How agents authenticate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// Development: requests without a token act as the development
    /// principal; development tokens (`pilotage token mint`) select
    /// another. Loopback only.
    #[default]
    Dev,
    /// Production: a valid bearer JWT from a configured issuer is required.
    Jwt,
}

/// The admin API's resource identifier (RFC 8707) under `public_url`: a
/// resource of its own, so a token issued for the MCP resource (an
/// agent's) never reaches it.
pub fn admin_resource(public_url: &str) -> String {
    format!("{}/admin/v1", public_url.trim_end_matches('/'))
}

/// The MCP resource identifier of one tenant's path under `public_url`.
pub fn tenant_resource(public_url: &str, tenant: &str) -> String {
    format!("{}/t/{tenant}/mcp", public_url.trim_end_matches('/'))
}

/// Scopes of the admin side: a token holding one is issued for the admin
/// API's resource, not the MCP one.
pub const ADMIN_SIDE_SCOPES: [&str; 4] = [ADMIN_SCOPE, TENANT_ADMIN_SCOPE, APPROVE_SCOPE, CONSOLE_SCOPE];

/// Which resource a token is presented to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource<'a> {
    /// `/mcp`, or `/t/{tenant}/mcp` when the path names a tenant.
    Mcp {
        /// The tenant the path names.
        path_tenant: Option<&'a str>,
    },
    /// The admin API, the console and the approval page.
    Admin,
}

/// Authentication settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthSettings {
    /// `dev` or `jwt`.
    pub mode: AuthMode,
    /// Trusted issuers (`jwt` mode).
    pub issuers: Vec<IssuerConfig>,
    /// The claim naming the caller's tenant (a string, or an array of
    /// tenants the token may act in).
    pub tenant_claim: String,
    /// Allowed clock skew for `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
    /// The scope needed to use `/mcp` (`jwt` mode).
    pub required_scope: String,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            mode: AuthMode::Dev,
            issuers: Vec::new(),
            tenant_claim: "tenant".to_owned(),
            leeway_secs: 30,
            required_scope: MCP_SCOPE.to_owned(),
        }
    }
}

/// Sign-in to the console with OpenID Connect (authorization code with
/// PKCE, RFC 7636, asking for a token of the admin side's resource, RFC
/// 8707): the token it returns opens a console session as a pasted one
/// would, so what it may see follows its scopes (`pilotage:admin`,
/// `pilotage:tenant-admin`, `pilotage:console`) and tenant, as the identity
/// provider grants them to each person. Settings file only:
/// `[console_sign_in]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleSignIn {
    /// The identity provider: one of `auth.issuers`, whose
    /// `/.well-known/openid-configuration` names its endpoints.
    pub issuer: String,
    /// The console's client id there (registered with the redirect URI
    /// `<public url>/console/oidc/callback`).
    pub client_id: String,
    /// Its secret, for a confidential client; none for a public one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The scopes asked for (default `openid pilotage:console`).
    #[serde(default = "console_scopes")]
    pub scopes: Vec<String>,
    /// The sign-in button's words (default "Sign in with <issuer>").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

fn console_scopes() -> Vec<String> {
    vec!["openid".to_owned(), CONSOLE_SCOPE.to_owned()]
}

/// The claims the platform reads from a token. Others are ignored.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    /// Subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    /// Space-separated scopes (OAuth `scope`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Scopes as `scp`: an array, or a space-separated string (Entra ID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scp: Option<Scp>,
    /// Every other claim (the tenant claim among them).
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

impl Claims {
    /// The scopes the token holds.
    pub fn scopes(&self) -> BTreeSet<String> {
        let mut scopes: BTreeSet<String> =
            self.scope.as_deref().unwrap_or("").split_whitespace().map(str::to_owned).collect();
        match &self.scp {
            Some(Scp::List(list)) => scopes.extend(list.iter().cloned()),
            Some(Scp::Text(text)) => scopes.extend(text.split_whitespace().map(str::to_owned)),
            None => {}
        }
        scopes
    }

    /// The audiences the token names (`aud`, a string or an array).
    pub fn audiences(&self) -> Vec<&str> {
        match self.other.get("aud") {
            Some(serde_json::Value::String(one)) => vec![one.as_str()],
            Some(serde_json::Value::Array(list)) => list.iter().filter_map(serde_json::Value::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// The tenants the token may act in, from `claim` (a string or an
    /// array of strings).
    pub fn tenants(&self, claim: &str) -> Vec<String> {
        match self.other.get(claim) {
            Some(serde_json::Value::String(tenant)) => vec![tenant.clone()],
            Some(serde_json::Value::Array(list)) => list.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect(),
            _ => Vec::new(),
        }
    }
}

/// A token's `scp` claim: an array of scopes, or one space-separated
/// string as Entra ID sends it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scp {
    /// `["a", "b"]`.
    List(Vec<String>),
    /// `"a b"`.
    Text(String),
}

/// Why a request is not authenticated or not authorized.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// Occurs when no bearer token is presented.
    #[error("a bearer token is required")]
    Missing,
    /// Occurs when the token is malformed, badly signed, from an unknown
    /// issuer or key, for another audience, expired or not yet valid.
    #[error("invalid token: {0}")]
    Invalid(String),
    /// Occurs when the token names no tenant, or not the requested one.
    #[error("{0}")]
    Tenant(String),
    /// Occurs when the token lacks a needed scope.
    #[error("the token lacks the scope '{0}'")]
    Scope(String),
    /// Occurs when a key-bound (DPoP) token comes without a valid proof
    /// (RFC 9449).
    #[error("invalid DPoP proof: {0}")]
    DpopProof(String),
}
