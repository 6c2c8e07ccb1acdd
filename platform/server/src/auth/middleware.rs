//! The authentication layer in front of `/mcp` and `/t/{tenant}/mcp`, and
//! the protected-resource metadata (RFC 9728).
//!
//! A missing or bad token answers 401 with `WWW-Authenticate: Bearer
//! resource_metadata="…"`; a token without the needed scope or tenant
//! answers 403. An authenticated request carries its [`Principal`] in the
//! request extensions, where the MCP handler reads it.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::dev::DevTokens;
use super::dpop::{self, Presented, SeenProofs};
use super::jwt::JwtVerifier;
use super::{
    ADMIN_SIDE_SCOPES, AuthError, AuthMode, AuthSettings, Claims, IssuerConfig, Principal, Resource, TenantFrom,
    admin_resource, tenant_resource,
};
use crate::tenancy::Platform;

/// Everything the layer needs.
#[derive(Clone)]
pub struct Authenticator {
    /// The platform (tenants exist? disabled?).
    pub platform: Platform,
    /// The settings.
    pub settings: AuthSettings,
    /// Issuer validation (`jwt` mode).
    pub verifier: Option<Arc<JwtVerifier>>,
    /// Development tokens (`dev` mode).
    pub dev: Option<DevTokens>,
    /// This resource's identifier: `<public url>/mcp`.
    pub resource: String,
    /// The public URL (no trailing `/`) the resources' identifiers are
    /// formed under.
    pub public_url: String,
    /// Where the resource metadata is served.
    pub metadata_url: String,
    /// DPoP proof ids seen lately (RFC 9449 replay check).
    pub proofs: Arc<SeenProofs>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("resource", &self.resource).finish_non_exhaustive()
    }
}

/// The token of `Authorization: Bearer …` or `Authorization: DPoP …`,
/// and whether it was the latter.
fn credential(request: &Request) -> Option<(&str, bool)> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if scheme.eq_ignore_ascii_case("bearer") {
        Some((token.trim(), false))
    } else {
        scheme.eq_ignore_ascii_case("dpop").then(|| (token.trim(), true))
    }
}

/// The tenant named by a `/t/{tenant}/…` path.
pub(crate) fn path_tenant(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/t/")?;
    let tenant = rest.split('/').next()?;
    (!tenant.is_empty()).then(|| tenant.to_owned())
}

/// The tenants a verified token may act in, as its issuer names them
/// (claim, the issuer's own tenants, or the resource it was issued for).
///
/// # Errors
/// [`AuthError::Tenant`] when the token names a tenant its issuer does not
/// serve, or names none and its issuer cannot supply one.
pub(crate) fn token_tenants(
    settings: &AuthSettings,
    claims: &Claims,
    issuer: Option<&IssuerConfig>,
    public_url: &str,
    resource: Resource<'_>,
) -> Result<Vec<String>, AuthError> {
    let Some(issuer) = issuer else {
        // A development token: its claim decides.
        return Ok(claims.tenants(&settings.tenant_claim));
    };
    if let (TenantFrom::Resource, Resource::Mcp { path_tenant }) = (issuer.tenant_from, resource) {
        // The token was issued for one tenant's resource: it acts there,
        // and only on that tenant's path.
        let Some(tenant) = path_tenant else {
            return Err(AuthError::Tenant(format!(
                "tokens of {} act in the tenant whose resource they were issued for: use /t/{{tenant}}/mcp",
                issuer.issuer
            )));
        };
        if !claims.audiences().contains(&tenant_resource(public_url, tenant).as_str()) || !issuer.serves(tenant) {
            return Err(AuthError::Tenant(format!(
                "the token was not issued for tenant '{tenant}' (its audience must be {})",
                tenant_resource(public_url, tenant)
            )));
        }
        return Ok(vec![tenant.to_owned()]);
    }
    let claim = issuer.tenant_claim.as_deref().unwrap_or(&settings.tenant_claim);
    let named = claims.tenants(claim);
    if let Some(foreign) = named.iter().find(|t| !issuer.serves(t)) {
        return Err(AuthError::Tenant(format!("the issuer {} may not act for tenant '{foreign}'", issuer.issuer)));
    }
    if named.is_empty() && !issuer.is_operators() {
        return Ok(issuer.tenants.clone());
    }
    if named.is_empty() {
        return Err(AuthError::Tenant(format!("the token names no tenant (its '{claim}' claim is missing)")));
    }
    Ok(named)
}

impl Authenticator {
    /// The principal for a verified token, in `path_tenant` when the path
    /// names one.
    ///
    /// # Errors
    /// [`AuthError::Tenant`] when the token does not grant the tenant.
    pub fn principal(
        &self,
        claims: &Claims,
        issuer: Option<&IssuerConfig>,
        path_tenant: Option<&str>,
    ) -> Result<Principal, AuthError> {
        let tenants = token_tenants(&self.settings, claims, issuer, &self.public_url, Resource::Mcp { path_tenant })?;
        let tenant = match path_tenant {
            Some(wanted) if tenants.iter().any(|t| t == wanted) => wanted.to_owned(),
            Some(wanted) => return Err(AuthError::Tenant(format!("the token is not for tenant '{wanted}'"))),
            None => match tenants.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(AuthError::Tenant(format!(
                        "the token names no tenant (its '{}' claim is missing)",
                        self.settings.tenant_claim
                    )));
                }
                _ => {
                    return Err(AuthError::Tenant(
                        "the token grants several tenants: connect to /t/{tenant}/mcp".into(),
                    ));
                }
            },
        };
        // `iss` was checked against the trusted issuers (or the development
        // issuer) before this: the principal is that issuer's subject.
        Ok(Principal {
            tenant,
            issuer: claims.iss.clone().unwrap_or_default(),
            subject: claims.sub.clone().unwrap_or_default(),
            scopes: claims.scopes(),
        })
    }

    /// Authenticates a request to `/mcp` (or `/t/{tenant}/mcp`) presenting
    /// `token` as `presented` says (scheme, DPoP proof, the request).
    ///
    /// # Errors
    /// [`AuthError`] as the request deserves.
    pub async fn authenticate(
        &self,
        token: Option<&str>,
        path_tenant: Option<&str>,
        presented: Presented<'_>,
    ) -> Result<Principal, AuthError> {
        let resource = Resource::Mcp { path_tenant };
        let principal = match (self.settings.mode, token) {
            (AuthMode::Dev, None) => {
                let mut principal = self.platform.dev_principal().clone();
                if let Some(tenant) = path_tenant {
                    principal.tenant = tenant.to_owned();
                }
                principal
            }
            (AuthMode::Dev, Some(token)) => {
                let dev = self
                    .dev
                    .as_ref()
                    .ok_or_else(|| AuthError::Invalid("development tokens are not configured".into()))?;
                self.principal(&dev.verify(token, resource)?, None, path_tenant)?
            }
            (AuthMode::Jwt, None) => return Err(AuthError::Missing),
            (AuthMode::Jwt, Some(token)) => {
                let verifier =
                    self.verifier.as_ref().ok_or_else(|| AuthError::Invalid("no issuer is configured".into()))?;
                let verified = verifier.verify(token, resource).await?;
                // Proofs carry the client's real time, as tokens do: the system
                // clock, never a test's frozen one.
                let now = pilotage_engine::clock::system_now_ms() / 1000;
                dpop::check(token, &verified.claims, verified.issuer.dpop, presented, &self.proofs, now)?;
                let principal = self.principal(&verified.claims, Some(&verified.issuer), path_tenant)?;
                if !principal.scopes.contains(&self.settings.required_scope) {
                    return Err(AuthError::Scope(self.settings.required_scope.clone()));
                }
                principal
            }
        };
        match self.platform.tenant(&principal.tenant) {
            Some(tenant) if !tenant.is_disabled() => Ok(principal),
            Some(_) => Err(AuthError::Tenant(format!("the tenant '{}' is disabled", principal.tenant))),
            None => Err(AuthError::Tenant(format!("there is no tenant '{}' here", principal.tenant))),
        }
    }

    /// Where the metadata of the resource at `path_tenant`'s path (or
    /// `/mcp`) is served (RFC 9728 §3.1: the resource's path after the
    /// well-known prefix).
    fn metadata_url(&self, path_tenant: Option<&str>) -> String {
        match path_tenant {
            Some(tenant) => format!("{}/.well-known/oauth-protected-resource/t/{tenant}/mcp", self.public_url),
            None => self.metadata_url.clone(),
        }
    }

    /// The refusal response for `error`, on the resource `path_tenant`
    /// names (MCP authorization; RFC 6750 §3 for the challenge: the
    /// description says what is wrong in words an SDK shows its user).
    pub fn refusal(&self, error: &AuthError, path_tenant: Option<&str>) -> Response {
        let metadata = self.metadata_url(path_tenant);
        // A quoted-string of visible ASCII (RFC 6750 §3: error_description
        // excludes `"` and the backslash), so the header is always sent.
        let description: String = error
            .to_string()
            .chars()
            .map(|c| {
                if c == '"' || c == '\\' {
                    '\''
                } else if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        let (status, challenge, code) = match error {
            // No credential: the start of the OAuth dance, not an error
            // (RFC 6750 §3.1); the scope an agent should ask for.
            AuthError::Missing => (
                StatusCode::UNAUTHORIZED,
                format!("Bearer resource_metadata=\"{metadata}\", scope=\"{}\"", self.settings.required_scope),
                "invalid_token",
            ),
            AuthError::Invalid(_) => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "Bearer error=\"invalid_token\", error_description=\"{description}\", resource_metadata=\"{metadata}\", scope=\"{}\"",
                    self.settings.required_scope
                ),
                "invalid_token",
            ),
            AuthError::Scope(scope) => (
                StatusCode::FORBIDDEN,
                format!(
                    "Bearer error=\"insufficient_scope\", scope=\"{scope}\", error_description=\"{description}\", resource_metadata=\"{metadata}\""
                ),
                "insufficient_scope",
            ),
            // RFC 9449 §7.1: the DPoP scheme's challenge, with the
            // algorithms a proof may use.
            AuthError::DpopProof(_) => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "DPoP error=\"invalid_dpop_proof\", error_description=\"{description}\", algs=\"{}\"",
                    dpop::ALGORITHMS
                ),
                "invalid_dpop_proof",
            ),
            // The token is good but this tenant is not for it: another
            // scope would not help, so this is not `insufficient_scope`
            // (which sends SDKs into a step-up); the description says why.
            AuthError::Tenant(_) => (
                StatusCode::FORBIDDEN,
                format!("Bearer error_description=\"{description}\", resource_metadata=\"{metadata}\""),
                "access_denied",
            ),
        };
        let mut response =
            (status, Json(json!({"error": code, "error_description": error.to_string()}))).into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// The RFC 9728 metadata document of the MCP resource (`/mcp`, or one
    /// tenant's `/t/{tenant}/mcp`): the issuers that may serve it and only
    /// the scope an agent needs (the admin API is a resource of its own).
    pub fn metadata(&self, path_tenant: Option<&str>) -> serde_json::Value {
        let (resource, servers) = match path_tenant {
            Some(tenant) => (
                tenant_resource(&self.public_url, tenant),
                self.verifier.as_ref().map(|v| v.issuers_of(tenant)).unwrap_or_default(),
            ),
            None => (self.resource.clone(), self.verifier.as_ref().map(|v| v.issuers()).unwrap_or_default()),
        };
        json!({
            "resource": resource,
            "authorization_servers": servers,
            "scopes_supported": [self.settings.required_scope],
            "bearer_methods_supported": ["header"],
            "resource_name": "Pilotage Platform"
        })
    }

    /// The RFC 9728 metadata document of the admin API (the console and
    /// the approval page sign in with its tokens).
    pub fn admin_metadata(&self) -> serde_json::Value {
        json!({
            "resource": admin_resource(&self.public_url),
            "authorization_servers": self.verifier.as_ref().map(|v| v.issuers()).unwrap_or_default(),
            "scopes_supported": ADMIN_SIDE_SCOPES,
            "bearer_methods_supported": ["header"],
            "resource_name": "Pilotage Platform administration"
        })
    }
}

/// The middleware: authenticate, then pass the request on with its
/// [`Principal`].
pub(crate) async fn require_principal(
    State(auth): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    let tenant = path_tenant(request.uri().path());
    let presented = credential(&request).map(|(token, dpop)| (token.to_owned(), dpop));
    let mut proofs = request.headers().get_all("dpop").iter();
    let proof = match (proofs.next(), proofs.next()) {
        (Some(one), None) => one.to_str().ok().map(str::to_owned),
        _ => None,
    };
    let dpop_scheme = presented.as_ref().is_some_and(|(_, dpop)| *dpop);
    // The URL a proof must name; only a DPoP request needs it.
    let url = if dpop_scheme { format!("{}{}", auth.public_url, request.uri().path()) } else { String::new() };
    let how = Presented { dpop_scheme, proof: proof.as_deref(), method: request.method().as_str(), url: &url };
    let token = presented.as_ref().map(|(token, _)| token.as_str());
    match auth.authenticate(token, tenant.as_deref(), how).await {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => {
            // A request without a token is the first step of every OAuth
            // client; anything else is a refusal an operator may be asked
            // about.
            match error {
                AuthError::Missing => tracing::info!(%error, "refused an MCP request"),
                _ => tracing::warn!(%error, tenant = tenant.as_deref().unwrap_or(""), "refused an MCP request"),
            }
            auth.refusal(&error, tenant.as_deref())
        }
    }
}

/// `GET /.well-known/oauth-protected-resource` (and the `/mcp` suffixed
/// form): the MCP resource's metadata.
pub(crate) async fn protected_resource(State(auth): State<Arc<Authenticator>>) -> Response {
    Json(auth.metadata(None)).into_response()
}

/// `GET /.well-known/oauth-protected-resource/t/{tenant}/mcp`: the
/// metadata of one tenant's MCP resource.
pub(crate) async fn tenant_protected_resource(
    State(auth): State<Arc<Authenticator>>,
    axum::extract::Path(tenant): axum::extract::Path<String>,
) -> Response {
    Json(auth.metadata(Some(&tenant))).into_response()
}

/// `GET /.well-known/oauth-protected-resource/admin/v1`: the admin API's
/// metadata.
pub(crate) async fn admin_protected_resource(State(auth): State<Arc<Authenticator>>) -> Response {
    Json(auth.admin_metadata()).into_response()
}

/// Any other `/.well-known/…` path: 404, not the MCP routes' 401.
pub(crate) async fn unknown_well_known() -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"error": "not_found", "error_description": "no such metadata here"})))
        .into_response()
}
