//! The approval page at `/approvals/{id}`: where a human reads a held
//! request (who asks, the plan step by step with each step's risk and the
//! entry it calls, the program, the input) and approves or rejects it.
//!
//! - Sign-in with a credential the platform already accepts (the operator
//!   token, or a bearer token holding `pilotage:admin`,
//!   `pilotage:tenant-admin` or `pilotage:approve` for the request's
//!   tenant), exchanged for a session cookie: sealed with the platform's
//!   secret key (so any replica reads it), `HttpOnly`, `SameSite=Strict`,
//!   `Path=/approvals`, 15 minutes.
//! - The principal who asked is shown the request but no buttons, and its
//!   decision is refused: an agent cannot approve its own request.
//! - Each form carries a CSRF token sealed to the session and the
//!   approval; a forged one is 403, a replayed one finds the approval no
//!   longer pending (409). Clickjacking: `frame-ancestors 'none'` and
//!   `X-Frame-Options: DENY`. The page has no script at all.
//! - An approval of another tenant, or none, is the same 404.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;
use serde_json::Value;

use super::api::{AdminState, Credential, credential_until};
use crate::admin::api::Admin;
use crate::policy::approvals::{self, Approver, DecideError};
use crate::tenancy::Identity;
use crate::web::{self, escape, urlencode};
use pilotage_store::ApprovalRow;

/// The session cookie's name.
const COOKIE: &str = "pilotage_approver";
/// How long a session lasts, in seconds.
const SESSION_S: i64 = 900;
/// The sealing box's (tenant, name) of sessions and CSRF tokens: no
/// tenant secret can be opened as one, nor one as the other.
const SEAL_TENANT: &str = "\u{0}approval-page";

/// The page's routes, merged at the root by the edge.
pub(crate) fn router(state: AdminState) -> Router {
    Router::new()
        .route("/approvals/{id}", get(page))
        .route("/approvals/{id}/sign-in", post(sign_in))
        .route("/approvals/{id}/decision", post(decision))
        .with_state(state)
}

/// A signed-in approver, as the session cookie carries it.
#[derive(Debug, serde::Serialize, Deserialize)]
struct Session {
    /// `None`: an operator.
    tenant: Option<String>,
    /// Who signed in: the credential's kind, issuer and subject.
    who: Identity,
    /// Expiry, ms since the epoch (system clock: a browser's session).
    exp: i64,
    /// Random; CSRF tokens are bound to it.
    nonce: String,
}

impl Session {
    fn approver(&self) -> Approver {
        Approver { tenant: self.tenant.clone(), who: self.who.clone() }
    }
}

fn seal(state: &AdminState, name: &str, value: &str) -> String {
    web::seal(&state.platform, SEAL_TENANT, name, value)
}

fn open(state: &AdminState, name: &str, text: &str) -> Option<String> {
    web::open(&state.platform, SEAL_TENANT, name, text)
}

fn session(state: &AdminState, headers: &HeaderMap) -> Option<Session> {
    let value = web::cookie(headers, COOKIE)?;
    let session: Session = serde_json::from_str(&open(state, "session", value)?).ok()?;
    (session.exp > pilotage_engine::clock::system_now_ms()).then_some(session)
}

fn csrf_for(state: &AdminState, session: &Session, id: &str) -> String {
    seal(state, &format!("csrf:{id}"), &session.nonce)
}

fn csrf_ok(state: &AdminState, session: &Session, id: &str, token: &str) -> bool {
    open(state, &format!("csrf:{id}"), token).is_some_and(|nonce| nonce == session.nonce)
}

/// The page's policy: inline style only, no script at all.
const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A page with the headers every page of this module sends.
fn html(status: StatusCode, title: &str, body: &str) -> Response {
    web::document(status, CSP, title, &format!("<style>{STYLE}</style>"), &format!("<main>{body}</main>"))
}

const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;margin:0;color:#1b1b1b;background:#fafafa}main{max-width:60rem;margin:0 auto;padding:1rem}table{border-collapse:collapse;width:100%}th,td{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top}pre{background:#f0f0f0;padding:.5rem;overflow:auto;max-height:24rem}.risk-destructive{color:#a00;font-weight:bold}.risk-write{color:#8a5a00}button{font-size:1rem;padding:.5rem 1rem;margin-right:1rem}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{font-weight:bold}label{display:block;margin:.5rem 0}input[type=password]{width:100%;max-width:30rem;font-size:1rem}";

fn not_found() -> Response {
    html(
        StatusCode::NOT_FOUND,
        "No such approval",
        "<h1>No such approval</h1><p>This link names no approval request you may see.</p>",
    )
}

fn sign_in_form(state: &AdminState, id: &str, message: Option<&str>) -> Response {
    // The form posts to this approval's own path: the id is one path
    // segment (an id holding `/` or `..` must not move the form elsewhere).
    let action = escape(&format!("/approvals/{}/sign-in", urlencode(id)));
    let back = format!("/approvals/{}", urlencode(id));
    let id = escape(id);
    let note = message.map(|m| format!("<p role=\"alert\">{}</p>", escape(m))).unwrap_or_default();
    // The console's identity provider, when it signs people in here
    // (`console_sign_in`, set only with the console mounted): it comes
    // back to this page (`console::oidc`, then [`open_from_token`]).
    let provider = state
        .console_sign_in
        .as_ref()
        .map(|sign_in| {
            let label = sign_in.label.clone().unwrap_or_else(|| format!("Sign in with {}", sign_in.issuer));
            let start = format!("/console/oidc/start?next={}", urlencode(&back));
            format!("<p><a id=\"sign-in-provider\" href=\"{}\">{}</a></p>", escape(&start), escape(&label))
        })
        .unwrap_or_default();
    html(
        if message.is_some() { StatusCode::UNAUTHORIZED } else { StatusCode::OK },
        "Sign in to decide",
        &format!(
            "<h1>Sign in to decide approval {id}</h1>{note}{provider}<form method=\"post\" action=\"{action}\"><label for=\"token\">Credential (the operator token, or a token holding pilotage:approve for this tenant)</label><input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required><p><button type=\"submit\">Sign in</button></p></form>"
        ),
    )
}

/// The approval `id` if the session's approver may see it; else the page
/// to answer (the same 404 for another tenant's and for none).
async fn visible(state: &AdminState, session: &Session, id: &str) -> Result<ApprovalRow, Response> {
    match state.platform.store().approval_by_id(id).await {
        Ok(Some(row)) if session.approver().may(&row.tenant) => Ok(row),
        Ok(_) => Err(not_found()),
        Err(error) => {
            tracing::error!(%error, "cannot read an approval");
            Err(html(StatusCode::INTERNAL_SERVER_ERROR, "Failure", "<h1>The server failed</h1>"))
        }
    }
}

async fn page(State(state): State<AdminState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let Some(session) = session(&state, &headers) else {
        return sign_in_form(&state, &id, None);
    };
    let row = match visible(&state, &session, &id).await {
        Ok(row) => row,
        Err(refusal) => return refusal,
    };
    let now = state.platform.clock().now_ms();
    let status = approvals::state_at(&row, now);
    let request: Value = serde_json::from_str(&row.request).unwrap_or(Value::Null);
    let text = |value: &Value| value.as_str().map(str::to_owned).unwrap_or_else(|| value.to_string());
    let pretty = |value: &Value| escape(&serde_json::to_string_pretty(value).unwrap_or_default());
    let plan = &request["plan"];
    let mut steps = String::new();
    for step in plan["steps"].as_array().into_iter().flatten() {
        let risk = text(&step["risk"]);
        let hints = &step["risk_hints"];
        let arm = if step["arm"].is_object() {
            format!("{} → {}", text(&step["arm"]["branch"]), text(&step["arm"]["label"]))
        } else {
            String::new()
        };
        steps.push_str(&format!(
            "<tr class=\"step\"><td>{}</td><td>{}</td><td class=\"risk-{}\">{}</td><td>readOnly {}, destructive {}, openWorld {}</td><td>{}</td></tr>",
            escape(&text(&step["id"])),
            escape(step["calls"].as_str().unwrap_or("")),
            escape(&risk),
            escape(&risk),
            hints["readOnly"],
            hints["destructive"],
            hints["openWorld"],
            escape(&arm),
        ));
    }
    let own = session.approver().asked(&row);
    let actions = if status != "pending" {
        format!(
            "<p id=\"decided\">This request is <strong>{}</strong>{}.</p>",
            escape(status),
            row.decided_by.as_deref().map(|by| format!(" by {}", escape(by))).unwrap_or_default()
        )
    } else if own {
        "<p id=\"own\">You asked for this Run: someone else must decide it.</p>".to_owned()
    } else {
        format!(
            "<form method=\"post\" action=\"/approvals/{id}/decision\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button type=\"submit\" name=\"decision\" value=\"approve\" id=\"approve\">Approve</button><button type=\"submit\" name=\"decision\" value=\"reject\" id=\"reject\">Reject</button></form>",
            id = escape(&row.id),
            csrf = csrf_for(&state, &session, &row.id),
        )
    };
    let program = if request["program"].is_null() {
        format!("<p>The promoted program <code>{}</code>.</p>", escape(&text(&request["program_ref"])))
    } else {
        format!("<pre id=\"program\">{}</pre>", pretty(&request["program"]))
    };
    let body = format!(
        "<h1>Approve this Run?</h1><dl><dt>Asked by</dt><dd id=\"asker\">{subject}{issuer} (tenant {tenant})</dd><dt>From</dt><dd id=\"from\">{from}</dd><dt>Language</dt><dd>{language}</dd><dt>Run</dt><dd>{run}</dd><dt>Highest risk</dt><dd id=\"max-risk\" class=\"risk-{max}\">{max}</dd><dt>Catalog version</dt><dd>{catalog}</dd><dt>State</dt><dd id=\"state\">{status}</dd><dt>Expires</dt><dd>{expires}</dd></dl><h2>Plan</h2><table><caption>Each step the program may take, with its risk</caption><thead><tr><th scope=\"col\">Step</th><th scope=\"col\">Calls</th><th scope=\"col\">Risk</th><th scope=\"col\">Hints</th><th scope=\"col\">Branch</th></tr></thead><tbody>{steps}</tbody></table><h2>Program</h2>{program}<h2>Input</h2><pre id=\"input\">{input}</pre>{actions}<p><small>Approval {id}. An approval is used once, by exactly this request; any change to the program, input, mode or catalog needs a new one.</small></p>",
        subject = escape(&row.subject),
        issuer = if row.issuer.is_empty() || row.issuer == crate::tenancy::DEV_ISSUER {
            String::new()
        } else {
            format!(" of {}", escape(&row.issuer))
        },
        from = escape(request["from"].as_str().unwrap_or("unknown")),
        tenant = escape(&row.tenant),
        language = escape(&row.language),
        run = escape(&text(&request["run"])),
        max = escape(&text(&plan["max_risk"])),
        catalog = escape(&text(&request["catalog_version"])),
        status = escape(status),
        expires = escape(&pilotage_engine::clock::rfc3339(row.expires_at)),
        input = pretty(&request["input"]),
        id = escape(&row.id),
    );
    html(StatusCode::OK, "Approve this Run?", &body)
}

#[derive(Debug, Deserialize)]
struct SignIn {
    token: String,
}

async fn sign_in(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    // A client past its failed credentials is refused before its next one
    // is read (`super::throttle`).
    let client = state.throttle.client(peer.map(|Extension(ConnectInfo(peer))| peer), &headers);
    if let Err(left) = state.throttle.check(client) {
        return super::throttle::throttled_page(sign_in_form(&state, &id, Some(super::throttle::THROTTLED)), left);
    }
    match session_from_token(&state, form.token.trim(), &id).await {
        Ok(signed_in) => signed_in,
        Err(SignInRefused::Invalid) => {
            state.throttle.failed(client);
            sign_in_form(&state, &id, Some("This credential is not valid."))
        }
        Err(SignInRefused::NotAnApprover) => sign_in_form(&state, &id, Some(NOT_AN_APPROVER)),
    }
}

/// Why a credential opened no session here.
enum SignInRefused {
    /// Occurs when the credential is no valid one.
    Invalid,
    /// Occurs when it is valid but holds no right to decide approvals.
    NotAnApprover,
}

const NOT_AN_APPROVER: &str = "This credential may not decide approvals (it holds no approver scope).";

/// A session opened with `token` and the way back to approval `id`: the
/// sealed cookie and a redirect to the page.
async fn session_from_token(state: &AdminState, token: &str, id: &str) -> Result<Response, SignInRefused> {
    let (credential, until) = credential_until(state, token).await.map_err(|_| SignInRefused::Invalid)?;
    let (tenant, who) = match credential {
        Credential::Admin(Admin::Operator(who)) => (None, who),
        Credential::Admin(Admin::TenantAdmin { tenant, who })
        | Credential::Scoped { tenant, who, approve: true, .. } => (Some(tenant), who),
        Credential::Scoped { .. } | Credential::Other(_) => return Err(SignInRefused::NotAnApprover),
    };
    let session = Session {
        tenant,
        who,
        // Never longer than the credential it was opened with.
        exp: (pilotage_engine::clock::system_now_ms() + SESSION_S * 1000).min(until.unwrap_or(i64::MAX)),
        nonce: hex::encode(rand::random::<[u8; 16]>()),
    };
    let sealed = seal(state, "session", &serde_json::to_string(&session).unwrap_or_default());
    let secure = if state.platform.public_url().starts_with("https://") { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={sealed}; Path=/approvals; HttpOnly; SameSite=Strict; Max-Age={SESSION_S}{secure}");
    Ok(web::see_other(&format!("/approvals/{}", urlencode(id)), Some(&cookie)))
}

/// The end of a sign-in at the identity provider that started on this
/// page (`console::oidc`'s callback, with the token it was given): a
/// session and the way back to approval `id`, or the sign-in form saying
/// why not.
pub(crate) async fn open_from_token(state: &AdminState, token: &str, id: &str) -> Response {
    match session_from_token(state, token, id).await {
        Ok(signed_in) => signed_in,
        Err(SignInRefused::Invalid) => {
            sign_in_form(state, id, Some("The identity provider's token is not valid here."))
        }
        Err(SignInRefused::NotAnApprover) => sign_in_form(state, id, Some(NOT_AN_APPROVER)),
    }
}

#[derive(Debug, Deserialize)]
struct DecisionForm {
    decision: String,
    csrf: String,
}

async fn decision(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    peer: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    Form(form): Form<DecisionForm>,
) -> Response {
    let Some(session) = session(&state, &headers) else {
        return sign_in_form(&state, &id, Some("Sign in first: your session ended."));
    };
    if !csrf_ok(&state, &session, &id, &form.csrf) {
        return html(
            StatusCode::FORBIDDEN,
            "Refused",
            "<h1>Refused</h1><p>This form was not issued to your session for this approval.</p>",
        );
    }
    let approve = match form.decision.as_str() {
        "approve" => true,
        "reject" => false,
        _ => return html(StatusCode::BAD_REQUEST, "Refused", "<h1>Refused</h1><p>Decide approve or reject.</p>"),
    };
    let row = match visible(&state, &session, &id).await {
        Ok(row) => row,
        Err(refusal) => return refusal,
    };
    let address = peer.map_or_else(|| "unknown".to_owned(), |axum::Extension(ConnectInfo(addr))| addr.ip().to_string());
    match approvals::decide(&state.platform, &row.tenant, &id, approve, &session.approver(), &address, "").await {
        Ok(_) => web::see_other(&format!("/approvals/{}", urlencode(&id)), None),
        Err(DecideError::NotPending(state)) => html(
            StatusCode::CONFLICT,
            "Already decided",
            &format!("<h1>Nothing was decided</h1><p id=\"conflict\">This approval is {}.</p>", escape(&state)),
        ),
        Err(DecideError::OwnRequest) => html(
            StatusCode::FORBIDDEN,
            "Refused",
            "<h1>Refused</h1><p>You asked for this Run: someone else must decide it.</p>",
        ),
        Err(DecideError::NotFound) => not_found(),
        Err(error) => {
            tracing::error!(%error, "cannot decide an approval");
            html(StatusCode::INTERNAL_SERVER_ERROR, "Failure", "<h1>The server failed</h1>")
        }
    }
}
