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
use super::jwt::JwtVerifier;
use super::{ADMIN_SCOPE, AuthError, AuthMode, AuthSettings, Claims, MCP_SCOPE, Principal, TENANT_ADMIN_SCOPE};
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
    /// Where the resource metadata is served.
    pub metadata_url: String,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("resource", &self.resource).finish_non_exhaustive()
    }
}

fn bearer(request: &Request) -> Option<&str> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The tenant named by a `/t/{tenant}/…` path.
pub(crate) fn path_tenant(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/t/")?;
    let tenant = rest.split('/').next()?;
    (!tenant.is_empty()).then(|| tenant.to_owned())
}

impl Authenticator {
    /// The principal for a verified token, in `path_tenant` when the path
    /// names one.
    ///
    /// # Errors
    /// [`AuthError::Tenant`] when the token does not grant the tenant.
    pub fn principal(&self, claims: &Claims, path_tenant: Option<&str>) -> Result<Principal, AuthError> {
        let tenants = claims.tenants(&self.settings.tenant_claim);
        let tenant = match path_tenant {
            Some(wanted) if tenants.iter().any(|t| t == wanted) => wanted.to_owned(),
            Some(wanted) => return Err(AuthError::Tenant(format!("the token is not for tenant '{wanted}'"))),
            None => match tenants.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(AuthError::Invalid(format!(
                        "the token carries no '{}' claim",
                        self.settings.tenant_claim
                    )));
                }
                _ => return Err(AuthError::Tenant("the token grants several tenants: use /t/{tenant}/mcp".into())),
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

    /// Authenticates a request to `/mcp` (or `/t/{tenant}/mcp`).
    ///
    /// # Errors
    /// [`AuthError`] as the request deserves.
    pub async fn authenticate(&self, token: Option<&str>, path_tenant: Option<&str>) -> Result<Principal, AuthError> {
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
                self.principal(&dev.verify(token)?, path_tenant)?
            }
            (AuthMode::Jwt, None) => return Err(AuthError::Missing),
            (AuthMode::Jwt, Some(token)) => {
                let verifier =
                    self.verifier.as_ref().ok_or_else(|| AuthError::Invalid("no issuer is configured".into()))?;
                let principal = self.principal(&verifier.verify(token).await?, path_tenant)?;
                if !principal.scopes.contains(&self.settings.required_scope) {
                    return Err(AuthError::Scope(self.settings.required_scope.clone()));
                }
                principal
            }
        };
        match self.platform.tenant(&principal.tenant) {
            Some(tenant) if !tenant.is_disabled() => Ok(principal),
            _ => Err(AuthError::Tenant(format!("tenant '{}' does not exist or is disabled", principal.tenant))),
        }
    }

    /// The refusal response for `error` (Part III MCP authorization).
    pub fn refusal(&self, error: &AuthError) -> Response {
        let (status, challenge) = match error {
            AuthError::Missing => {
                (StatusCode::UNAUTHORIZED, format!("Bearer resource_metadata=\"{}\"", self.metadata_url))
            }
            AuthError::Invalid(_) => (
                StatusCode::UNAUTHORIZED,
                format!("Bearer error=\"invalid_token\", resource_metadata=\"{}\"", self.metadata_url),
            ),
            AuthError::Scope(scope) => (
                StatusCode::FORBIDDEN,
                format!(
                    "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{}\"",
                    self.metadata_url
                ),
            ),
            AuthError::Tenant(_) => (
                StatusCode::FORBIDDEN,
                format!("Bearer error=\"insufficient_scope\", resource_metadata=\"{}\"", self.metadata_url),
            ),
        };
        let code = match error {
            AuthError::Missing | AuthError::Invalid(_) => "invalid_token",
            AuthError::Scope(_) | AuthError::Tenant(_) => "insufficient_scope",
        };
        let mut response =
            (status, Json(json!({"error": code, "error_description": error.to_string()}))).into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// The RFC 9728 metadata document.
    pub fn metadata(&self) -> serde_json::Value {
        let servers = self.verifier.as_ref().map(|v| v.issuers()).unwrap_or_default();
        json!({
            "resource": self.resource,
            "authorization_servers": servers,
            "scopes_supported": [MCP_SCOPE, TENANT_ADMIN_SCOPE, ADMIN_SCOPE],
            "bearer_methods_supported": ["header"],
            "resource_name": "Pilotage Platform"
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
    let token = bearer(&request).map(str::to_owned);
    match auth.authenticate(token.as_deref(), tenant.as_deref()).await {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => {
            tracing::info!(%error, "refused an MCP request");
            auth.refusal(&error)
        }
    }
}

/// `GET /.well-known/oauth-protected-resource` (and the `/mcp` suffixed
/// form).
pub(crate) async fn protected_resource(State(auth): State<Arc<Authenticator>>) -> Response {
    Json(auth.metadata()).into_response()
}
