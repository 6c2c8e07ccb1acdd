//! What every admin route shares: the state ([`AdminState`]), who calls
//! ([`Admin`], from [`authorize`]), the error every route answers with
//! ([`ApiError`]: a status and `{"error": {"code", "message", "field"?,
//! "findings"?}}`), and the audit log.

use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::auth::middleware::Authenticator;
use crate::auth::middleware::token_tenants;
use crate::auth::{ADMIN_SCOPE, APPROVE_SCOPE, AuthMode, CONSOLE_SCOPE, Resource, TENANT_ADMIN_SCOPE};
use crate::tenancy::{Identity, Platform, Tenant};
use pilotage_store::AuditRow;

/// The admin API's state.
#[derive(Clone)]
pub(crate) struct AdminState {
    /// The platform.
    pub platform: Platform,
    /// Token checks shared with `/mcp`.
    pub auth: Arc<Authenticator>,
    /// The operator token, when configured.
    pub operator_token: Option<String>,
    /// The body bounds.
    pub limits: AdminLimits,
    /// Failed credentials per client address (`super::throttle`).
    pub throttle: Arc<super::throttle::SignInThrottle>,
    /// The console's sign-in with an identity provider, when configured
    /// (`crate::console`).
    pub console_sign_in: Option<Arc<crate::auth::ConsoleSignIn>>,
}

/// The admin API's body bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AdminLimits {
    /// Largest JSON body, in bytes (setting `admin_max_body_bytes`).
    pub json_bytes: usize,
    /// Largest Language component upload, in bytes (setting
    /// `max_component_bytes`).
    pub component_bytes: usize,
}

impl Default for AdminLimits {
    fn default() -> Self {
        AdminLimits { json_bytes: 4 << 20, component_bytes: 32 << 20 }
    }
}

/// Who is calling the admin API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Admin {
    /// Every tenant.
    Operator(Identity),
    /// One tenant's own resources.
    TenantAdmin {
        /// The tenant.
        tenant: String,
        /// Who.
        who: Identity,
    },
}

impl Admin {
    /// How the audit log names the administrator (`actor`; the record
    /// also names the credential's kind and issuer).
    pub(super) fn actor(&self) -> String {
        match self {
            Admin::Operator(who) => who.subject.clone(),
            Admin::TenantAdmin { tenant, who } => format!("{}@{tenant}", who.subject),
        }
    }

    /// Who the credential names.
    pub(super) fn identity(&self) -> &Identity {
        match self {
            Admin::Operator(who) | Admin::TenantAdmin { who, .. } => who,
        }
    }

    pub(super) fn may(&self, tenant: &str) -> Result<(), ApiError> {
        match self {
            Admin::Operator(_) => Ok(()),
            Admin::TenantAdmin { tenant: own, .. } if own == tenant => Ok(()),
            Admin::TenantAdmin { .. } => Err(ApiError::forbidden("this credential administers another tenant")),
        }
    }
}

/// An admin API error: a status and `{"error": {"code", "message",
/// "field"?, "findings"?}}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(super) status: StatusCode,
    pub(super) body: Value,
    /// `Retry-After`, in seconds, when the client should wait.
    pub(super) retry_after_s: Option<u64>,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError { status, body: json!({"error": {"code": code, "message": message.into()}}), retry_after_s: None }
    }

    /// 400 naming the offending field.
    pub(crate) fn field(field: &str, message: impl Into<String>) -> ApiError {
        let mut error = ApiError::new(StatusCode::BAD_REQUEST, "invalid_field", message);
        error.body["error"]["field"] = json!(field);
        error
    }

    /// 403 `destination_refused` naming `field`: a destination the
    /// tenant's egress confinement refuses (`crate::egress`).
    pub(crate) fn refused(field: &str, refused: &crate::egress::DestinationRefused) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "destination_refused", refused.to_string()).at(field)
    }

    /// The same error, naming `field`.
    pub(super) fn at(mut self, field: &str) -> ApiError {
        self.body["error"]["field"] = json!(field);
        self
    }

    pub(super) fn unauthorized(message: &str) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 429 with `Retry-After`: the client presented too many bad
    /// credentials (`super::throttle`).
    pub(super) fn throttled(left: std::time::Duration) -> ApiError {
        let seconds = super::throttle::retry_after_s(left);
        let mut error = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_failures",
            format!("too many bad credentials from this address: retry in {seconds} s"),
        );
        error.retry_after_s = Some(seconds);
        error
    }

    pub(super) fn forbidden(message: &str) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub(super) fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub(super) fn internal(error: impl std::fmt::Display) -> ApiError {
        tracing::error!(%error, "admin API failure");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the server failed; the failure was logged")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body)).into_response();
        if let Some(seconds) = self.retry_after_s {
            response.headers_mut().insert(header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

impl From<pilotage_store::StoreError> for ApiError {
    fn from(error: pilotage_store::StoreError) -> Self {
        ApiError::internal(error)
    }
}

pub(super) type ApiResult = Result<Response, ApiError>;

pub(super) async fn authorize(state: &AdminState, headers: &HeaderMap) -> Result<Admin, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().to_owned())
        .ok_or_else(|| ApiError::unauthorized("an admin credential is required (Authorization: Bearer …)"))?;
    match credential(state, &token).await? {
        Credential::Admin(admin) => Ok(admin),
        Credential::Scoped { .. } => {
            Err(ApiError::forbidden(&format!("the credential holds neither {ADMIN_SCOPE} nor {TENANT_ADMIN_SCOPE}")))
        }
        Credential::Other(why) => Err(ApiError::forbidden(&why)),
    }
}

/// What a credential the platform accepts may do here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Credential {
    /// Administer (every tenant, or one).
    Admin(Admin),
    /// Less than administering one tenant: deciding its approvals
    /// (`pilotage:approve`), reading its console pages
    /// (`pilotage:console`), or both.
    Scoped {
        /// The tenant.
        tenant: String,
        /// Who.
        who: Identity,
        /// Holds `pilotage:approve`.
        approve: bool,
        /// Holds `pilotage:console`.
        console: bool,
    },
    /// Nothing here: a valid credential of another scope, or an agent's
    /// token (issued for the MCP resource); why, for the message.
    Other(String),
}

/// Reads `token`: the operator token, or a bearer token of the configured
/// mode holding `pilotage:admin`, `pilotage:tenant-admin`,
/// `pilotage:approve` or `pilotage:console` (the last three naming
/// exactly one tenant).
///
/// # Errors
/// 401 when the token is not valid; 403 when a tenant-scoped credential
/// names no or several tenants.
pub(crate) async fn credential(state: &AdminState, token: &str) -> Result<Credential, ApiError> {
    credential_until(state, token).await.map(|(credential, _)| credential)
}

/// [`credential`], with when the token stops being valid (its `exp`, in
/// ms since the epoch; `None` for the operator token and a token without
/// one): a page's session never outlives the credential it was opened
/// with.
///
/// # Errors
/// As [`credential`].
pub(crate) async fn credential_until(state: &AdminState, token: &str) -> Result<(Credential, Option<i64>), ApiError> {
    if let Some(operator) = &state.operator_token
        && bool::from(operator.as_bytes().ct_eq(token.as_bytes()))
    {
        return Ok((Credential::Admin(Admin::Operator(Identity::operator_token())), None));
    }
    // The admin side is a resource of its own (`<public url>/admin/v1`):
    // a token issued for the MCP resource, an agent's, is refused here.
    let verified = match state.auth.settings.mode {
        AuthMode::Jwt => match &state.auth.verifier {
            Some(verifier) => verifier.verify(token, Resource::Admin).await.map(|v| (v.claims, Some(v.issuer))),
            None => return Err(ApiError::unauthorized("the credential is not valid")),
        },
        AuthMode::Dev => match &state.auth.dev {
            Some(dev) => dev.verify(token, Resource::Admin).map(|claims| (claims, None)),
            None => return Err(ApiError::unauthorized("the credential is not valid")),
        },
    };
    let (claims, issuer) = match verified {
        Ok(verified) => verified,
        Err(error) => {
            // An agent's token is a real credential that grants nothing
            // here: say so rather than "not valid".
            if agents_token(state, token).await {
                return Ok((
                    Credential::Other(format!(
                        "this is an agent's token, issued for the MCP resource; the admin side accepts tokens issued for {}",
                        crate::auth::admin_resource(&state.auth.public_url)
                    )),
                    None,
                ));
            }
            return Err(ApiError::unauthorized(&format!("the credential is not valid for the admin API: {error}")));
        }
    };
    // The admin side takes bearer tokens only: a key-bound one (DPoP)
    // without its proof is as good as stolen here.
    if crate::auth::dpop::bound_key(&claims).is_some() {
        return Err(ApiError::unauthorized("a key-bound (DPoP) token is not accepted by the admin side"));
    }
    let until = claims.other.get("exp").and_then(Value::as_i64).map(|exp| exp.saturating_mul(1000));
    let scopes = claims.scopes();
    let subject = claims.sub.clone().unwrap_or_default();
    let issuer_id = claims.iss.clone().unwrap_or_default();
    let who = Identity::of_token(&issuer_id, &subject);
    // `pilotage:admin` was already cut from the tokens of an issuer tied
    // to tenants (`crate::auth::jwt`).
    if scopes.contains(ADMIN_SCOPE) {
        return Ok((Credential::Admin(Admin::Operator(who)), until));
    }
    let (approve, console) = (scopes.contains(APPROVE_SCOPE), scopes.contains(CONSOLE_SCOPE));
    let tenant_scoped = scopes.contains(TENANT_ADMIN_SCOPE) || approve || console;
    if !tenant_scoped {
        return Ok((
            Credential::Other(format!(
                "the credential of '{subject}' holds none of {ADMIN_SCOPE}, {TENANT_ADMIN_SCOPE}, {APPROVE_SCOPE}, {CONSOLE_SCOPE}"
            )),
            until,
        ));
    }
    let tenants =
        token_tenants(&state.auth.settings, &claims, issuer.as_deref(), &state.auth.public_url, Resource::Admin)
            .map_err(|e| ApiError::forbidden(&e.to_string()))?;
    let [tenant] = tenants.as_slice() else {
        return Err(ApiError::forbidden("a tenant-scoped credential must name exactly one tenant"));
    };
    if scopes.contains(TENANT_ADMIN_SCOPE) {
        return Ok((Credential::Admin(Admin::TenantAdmin { tenant: tenant.clone(), who }), until));
    }
    Ok((Credential::Scoped { tenant: tenant.clone(), who, approve, console }, until))
}

/// Whether `token` is valid for the MCP resource, `/mcp` or a tenant's
/// `/t/{tenant}/mcp` (an agent's token).
async fn agents_token(state: &AdminState, token: &str) -> bool {
    // The tenant resources the token says it was issued for, checked
    // below like any other audience.
    let prefix = format!("{}/t/", state.auth.public_url);
    let tenants: Vec<Option<String>> = std::iter::once(None)
        .chain(
            jsonwebtoken::dangerous::insecure_decode_claims::<crate::auth::Claims>(token)
                .map(|claims| {
                    claims
                        .audiences()
                        .iter()
                        .filter_map(|aud| aud.strip_prefix(&prefix)?.strip_suffix("/mcp").map(str::to_owned))
                        // A token listing many audiences costs a few
                        // checks, never one per audience.
                        .take(4)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
                .into_iter()
                .map(Some),
        )
        .collect();
    for tenant in &tenants {
        let mcp = Resource::Mcp { path_tenant: tenant.as_deref() };
        let valid = match (state.auth.settings.mode, &state.auth.verifier, &state.auth.dev) {
            (AuthMode::Jwt, Some(verifier), _) => verifier.verify(token, mcp).await.is_ok(),
            (AuthMode::Dev, _, Some(dev)) => dev.verify(token, mcp).is_ok(),
            _ => false,
        };
        if valid {
            return true;
        }
    }
    false
}

pub(crate) async fn audit(state: &AdminState, admin: &Admin, action: &str, target: &str, detail: Value) {
    let row = AuditRow {
        at: state.platform.clock().now_ms(),
        actor: admin.actor(),
        credential: admin.identity().credential.as_str().to_owned(),
        issuer: admin.identity().issuer.clone(),
        action: action.to_owned(),
        target: target.to_owned(),
        detail: detail.to_string(),
    };
    if let Err(error) = state.platform.store().audit(&row).await {
        tracing::error!(%error, "cannot write the audit log");
    }
    tracing::info!(actor = %row.actor, credential = %row.credential, issuer = %row.issuer, action, target, "admin change");
}

pub(super) fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| {
        let field = error.to_string().split('`').nth(1).unwrap_or("body").to_owned();
        ApiError::field(&field, format!("the body does not fit: {error}"))
    })
}

pub(super) async fn live_tenant(state: &AdminState, tenant: &str) -> Result<Arc<Tenant>, ApiError> {
    state.platform.tenant(tenant).ok_or_else(|| ApiError::not_found(format!("no tenant '{tenant}'")))
}
