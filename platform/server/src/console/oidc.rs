//! Operators and tenants' readers sign in to the console with the identity
//! provider they already use: OpenID Connect's authorization code flow
//! with PKCE (RFC 7636), asking for a token of the admin side's resource
//! (RFC 8707, `<public url>/admin/v1`). The token the provider returns
//! opens a session exactly as a pasted one would
//! (`session::open_session`), so what a person may see follows the
//! scopes and tenant the provider grants them.
//!
//! `GET /console/oidc/start` sends the browser to the provider with a
//! fresh `state` and code challenge, kept sealed in a cookie scoped to
//! `/console/oidc` for ten minutes; `GET /console/oidc/callback` checks the
//! `state`, exchanges the code with the verifier, and opens the session.
//! Nothing is kept on the server, so the callback may reach any replica.

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::session::{Next, Refused, SEAL, open_session, safe_next, sign_in_form};
use crate::admin::AdminState;
use crate::auth::ConsoleSignIn;
use crate::web;

/// The cookie holding a sign-in under way.
const COOKIE: &str = "pilotage_console_oidc";

/// How long a sign-in may take at the provider, in seconds.
const PENDING_S: i64 = 600;

/// A sign-in under way, sealed in [`COOKIE`].
#[derive(Serialize, Deserialize)]
struct Pending {
    state: String,
    verifier: String,
    next: String,
    /// Expiry, ms since the epoch (system clock).
    exp: i64,
}

/// The provider's endpoints (OpenID Connect Discovery 1.0 §4).
#[derive(Deserialize)]
struct Endpoints {
    authorization_endpoint: String,
    token_endpoint: String,
}

async fn endpoints(state: &AdminState, sign_in: &ConsoleSignIn) -> Result<Endpoints, String> {
    let url = format!("{}/.well-known/openid-configuration", sign_in.issuer.trim_end_matches('/'));
    let response = state
        .platform
        .http()
        .get(&url)
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await
        .map_err(|e| format!("{url} is unreachable: {e}"))?;
    response.json::<Endpoints>().await.map_err(|e| format!("{url} does not name its endpoints: {e}"))
}

fn redirect_uri(state: &AdminState) -> String {
    format!("{}/console/oidc/callback", state.auth.public_url)
}

fn random_hex(bytes: usize) -> String {
    hex::encode((0..bytes).map(|_| rand::random::<u8>()).collect::<Vec<u8>>())
}

/// `GET /console/oidc/start?next=`: to the provider's sign-in.
pub(super) async fn start(State(state): State<AdminState>, Query(next): Query<Next>) -> Response {
    let next = safe_next(next.next.as_deref());
    let Some(sign_in) = state.console_sign_in.clone() else {
        return sign_in_form(&state, &next, Some("Sign-in with an identity provider is not set up here."));
    };
    let endpoints = match endpoints(&state, &sign_in).await {
        Ok(endpoints) => endpoints,
        Err(error) => {
            tracing::warn!(%error, "the console's identity provider cannot be used");
            return sign_in_form(&state, &next, Some("The identity provider cannot be reached; try again later."));
        }
    };
    let pending = Pending {
        state: random_hex(16),
        verifier: random_hex(32),
        next,
        exp: pilotage_engine::clock::system_now_ms() + PENDING_S * 1000,
    };
    let challenge =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(pending.verifier.as_bytes()));
    let resource = crate::auth::admin_resource(&state.auth.public_url);
    let scope = sign_in.scopes.join(" ");
    let Ok(url) = reqwest::Url::parse_with_params(
        &endpoints.authorization_endpoint,
        [
            ("response_type", "code"),
            ("client_id", sign_in.client_id.as_str()),
            ("redirect_uri", redirect_uri(&state).as_str()),
            ("scope", scope.as_str()),
            ("state", pending.state.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("resource", resource.as_str()),
        ],
    ) else {
        return sign_in_form(&state, &pending.next, Some("The identity provider's sign-in address is not a URL."));
    };
    let sealed = web::seal(&state.platform, SEAL, "oidc", &serde_json::to_string(&pending).unwrap_or_default());
    let secure = if state.auth.public_url.starts_with("https://") { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={sealed}; Path=/console/oidc; HttpOnly; SameSite=Lax; Max-Age={PENDING_S}{secure}");
    web::see_other(url.as_str(), Some(&cookie))
}

/// The provider's answer.
#[derive(Deserialize)]
pub(super) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /console/oidc/callback`: the code for a token, the token for a
/// session.
pub(super) async fn callback(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Query(answer): Query<Callback>,
) -> Response {
    let Some(sign_in) = state.console_sign_in.clone() else {
        return sign_in_form(&state, "/console", Some("Sign-in with an identity provider is not set up here."));
    };
    // The sign-in this browser started here (any replica: it is sealed
    // with the platform's key), unexpired, and the answer is to it.
    let pending = web::cookie(&headers, COOKIE)
        .and_then(|value| web::open(&state.platform, SEAL, "oidc", value))
        .and_then(|text| serde_json::from_str::<Pending>(&text).ok())
        .filter(|pending| pending.exp > pilotage_engine::clock::system_now_ms());
    let Some(pending) = pending else {
        return sign_in_form(&state, "/console", Some("This sign-in expired or was not started here; start again."));
    };
    if answer.state.as_deref() != Some(pending.state.as_str()) {
        return sign_in_form(&state, &pending.next, Some("The identity provider's answer is not to this sign-in."));
    }
    if let Some(error) = answer.error {
        let why = answer.error_description.unwrap_or(error);
        return sign_in_form(&state, &pending.next, Some(&format!("The identity provider refused: {why}")));
    }
    let Some(code) = answer.code else {
        return sign_in_form(&state, &pending.next, Some("The identity provider sent no code."));
    };
    let token = match exchange(&state, &sign_in, &code, &pending.verifier).await {
        Ok(token) => token,
        Err(error) => {
            tracing::warn!(%error, "the console's identity provider gave no token");
            return sign_in_form(&state, &pending.next, Some("The identity provider gave no token; try again."));
        }
    };
    // Begun on an approval's page: a session of that page, and back to it.
    if let Some(id) = pending.next.strip_prefix("/approvals/") {
        let id = percent_encoding::percent_decode_str(id).decode_utf8_lossy().into_owned();
        let mut response = crate::admin::approval_page_open(&state, &token, &id).await;
        clear_pending(&mut response);
        return response;
    }
    let mut response = match open_session(&state, &token, &pending.next).await {
        Ok(response) => response,
        Err(Refused::Invalid) => {
            return sign_in_form(&state, &pending.next, Some("The identity provider's token is not valid here."));
        }
        Err(Refused::NotForTheConsole) => {
            return sign_in_form(
                &state,
                &pending.next,
                Some(
                    "You may not use the console: the identity provider granted neither pilotage:console, pilotage:approve nor an admin scope.",
                ),
            );
        }
    };
    clear_pending(&mut response);
    response.into_response()
}

/// Clears the cookie of the sign-in under way: it is over.
fn clear_pending(response: &mut Response) {
    if let Ok(clear) = axum::http::HeaderValue::from_str(&format!("{COOKIE}=; Path=/console/oidc; HttpOnly; Max-Age=0"))
    {
        response.headers_mut().append(axum::http::header::SET_COOKIE, clear);
    }
}

/// The token endpoint's answer (RFC 6749 §5.1).
#[derive(Deserialize)]
struct Tokens {
    access_token: String,
}

async fn exchange(state: &AdminState, sign_in: &ConsoleSignIn, code: &str, verifier: &str) -> Result<String, String> {
    let endpoints = endpoints(state, sign_in).await?;
    let redirect = redirect_uri(state);
    let resource = crate::auth::admin_resource(&state.auth.public_url);
    let mut request = state.platform.http().post(&endpoints.token_endpoint).timeout(std::time::Duration::from_secs(10));
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect.as_str()),
        ("code_verifier", verifier),
        ("resource", resource.as_str()),
    ];
    match &sign_in.client_secret {
        Some(secret) => request = request.basic_auth(&sign_in.client_id, Some(secret)),
        None => form.push(("client_id", sign_in.client_id.as_str())),
    }
    // application/x-www-form-urlencoded, encoded as a URL's query is.
    let body = reqwest::Url::parse_with_params("http://form.invalid/", &form)
        .map_err(|e| format!("the token request does not encode: {e}"))?
        .query()
        .unwrap_or_default()
        .to_owned();
    let response = request
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("the token endpoint is unreachable: {e}"))?;
    if !response.status().is_success() {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        return Err(format!("the token endpoint answered {status}: {}", body.chars().take(300).collect::<String>()));
    }
    response.json::<Tokens>().await.map(|t| t.access_token).map_err(|e| format!("the token endpoint's answer: {e}"))
}
