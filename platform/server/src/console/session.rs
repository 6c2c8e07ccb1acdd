//! Who looks at the console: sign-in, the session cookie, sign-out, and the
//! page shell every console page is drawn in.
//!
//! A session is `{tenant, who, exp, nonce}` as JSON, sealed with the
//! platform key under a box name no tenant secret has; the cookie is
//! `HttpOnly`, `SameSite=Lax` (a link to a Run page from a chat or a
//! terminal opens signed in; every console route that changes anything is
//! a POST with a CSRF token), `Path=/console`, `Secure` behind https, and
//! lasts [`SESSION_S`] seconds, or less when the credential expires sooner.

use std::sync::Arc;

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::Extension;
use axum::extract::{ConnectInfo, Form, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::web::{self, escape, urlencode};
use crate::admin::{Admin, AdminState, Credential, THROTTLED, credential_until, throttled_page};
use crate::tenancy::{Identity, Tenant};

/// The session cookie's name.
const COOKIE: &str = "pilotage_console";
/// How long a session lasts, in seconds.
pub(super) const SESSION_S: i64 = 1800;
/// The sealing box's name for console sessions and CSRF tokens.
pub(super) const SEAL: &str = "\u{0}console";

/// Every console page's Content-Security-Policy: scripts and styles from
/// this server's `/console/assets` only, the figures fetched from here,
/// no framing, forms posting here.
pub(super) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A signed-in viewer, as the session cookie carries it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Viewer {
    /// `None`: an operator, who sees every tenant.
    pub(super) tenant: Option<String>,
    /// Who signed in: the credential's kind, issuer and subject.
    pub(super) who: Identity,
    /// Expiry, ms since the epoch (system clock: a browser's session).
    exp: i64,
    /// Random; CSRF tokens are bound to it.
    nonce: String,
    /// Reads the tenant's pages (an operator, a tenant administrator,
    /// `pilotage:console`); an approver alone sees only the inbox.
    #[serde(default = "reads_by_default")]
    reads: bool,
    /// Decides approval requests (an operator, a tenant administrator,
    /// `pilotage:approve`).
    #[serde(default)]
    approves: bool,
    /// Administers its tenants (an operator, a tenant administrator): the
    /// pages' actions (a deployment enabled or disabled).
    #[serde(default)]
    administers: bool,
}

/// Sessions sealed before `reads` existed were all readers'.
fn reads_by_default() -> bool {
    true
}

impl Viewer {
    /// Whether this viewer may see `tenant`'s pages.
    pub(super) fn may(&self, tenant: &str) -> bool {
        self.tenant.as_deref().is_none_or(|own| own == tenant)
    }

    /// Whether this viewer sees every tenant.
    pub(super) fn operator(&self) -> bool {
        self.tenant.is_none()
    }

    /// Whether this viewer reads the tenant's pages (not only the inbox).
    pub(super) fn reads(&self) -> bool {
        self.reads
    }

    /// Whether this viewer decides approval requests of the tenants it
    /// may see.
    pub(super) fn approves(&self) -> bool {
        self.approves
    }

    /// The administrator this viewer acts as, when it administers: the
    /// pages' actions are audited as the admin API's are.
    pub(super) fn admin(&self) -> Option<Admin> {
        self.administers.then(|| match &self.tenant {
            None => Admin::Operator(self.who.clone()),
            Some(tenant) => Admin::TenantAdmin { tenant: tenant.clone(), who: self.who.clone() },
        })
    }

    /// The CSRF token of this session's forms.
    pub(super) fn csrf(&self, state: &AdminState) -> String {
        web::seal(&state.platform, SEAL, "csrf", &self.nonce)
    }

    /// Whether `token` is a CSRF token issued to this session.
    pub(super) fn issued(&self, state: &AdminState, token: &str) -> bool {
        web::open(&state.platform, SEAL, "csrf", token).is_some_and(|nonce| nonce == self.nonce)
    }
}

/// The viewer of a live session: its cookie opens, has not expired and was
/// not signed out (on any replica sharing the store; a copy of a cookie
/// taken before sign-out opens nothing). A store that cannot say refuses
/// the session.
pub(super) async fn viewer(state: &AdminState, headers: &HeaderMap) -> Option<Viewer> {
    let value = web::cookie(headers, COOKIE)?;
    let viewer: Viewer = serde_json::from_str(&web::open(&state.platform, SEAL, "session", value)?).ok()?;
    if viewer.exp <= pilotage_engine::clock::system_now_ms() {
        return None;
    }
    match state.platform.store().sign_in_ended(&viewer.nonce).await {
        Ok(false) => Some(viewer),
        Ok(true) => None,
        Err(error) => {
            tracing::error!(%error, "cannot read the ended sign-ins: the console session is refused");
            None
        }
    }
}

/// A tenant's page, admitted: the signed-in viewer, who may see the
/// tenant named by the path's `{tenant}`, and the live tenant. As an
/// extractor its rejection is the answer: the sign-in page (coming back to
/// the asked path after), or the same 404 for a tenant the viewer may not
/// see and one that does not exist.
pub(super) struct TenantPage {
    /// Who looks.
    pub(super) viewer: Viewer,
    /// The tenant's id, from the path.
    pub(super) tenant: String,
    /// The tenant as this replica serves it.
    pub(super) live: Arc<Tenant>,
}

impl FromRequestParts<AdminState> for TenantPage {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AdminState) -> Result<TenantPage, Response> {
        let Some(viewer) = viewer(state, &parts.headers).await else {
            return Err(web::see_other(&format!("/console/sign-in?next={}", urlencode(&parts.uri.to_string())), None));
        };
        let tenant = Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .ok()
            .and_then(|Path(mut params)| params.remove("tenant"))
            .unwrap_or_default();
        match state.platform.tenant(&tenant) {
            Some(live) if viewer.may(&tenant) && viewer.reads() => Ok(TenantPage { viewer, tenant, live }),
            _ => Err(not_found(Some(&viewer), state)),
        }
    }
}

impl TenantPage {
    /// The page `title` with `body` in the tenant's shell.
    pub(super) fn page(&self, state: &AdminState, title: &str, body: &str, scripts: &[&str]) -> Response {
        page(state, &self.viewer, Some(&self.tenant), title, body, scripts)
    }

    /// A failure reading the store, as a page (logged).
    pub(super) fn failed(&self, state: &AdminState, error: &dyn std::fmt::Display) -> Response {
        tracing::error!(%error, "a console page cannot read the store");
        let mut response =
            page(state, &self.viewer, None, "The server failed", "<p>The failure was logged; try again.</p>", &[]);
        *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        response
    }

    /// The one 404, for a thing of this tenant that does not exist.
    pub(super) fn not_found(&self, state: &AdminState) -> Response {
        not_found(Some(&self.viewer), state)
    }
}

/// A tenant's console links, in the order of the navigation.
const SECTIONS: &[(&str, &str)] = &[
    ("", "Overview"),
    ("/languages", "Languages"),
    ("/catalog", "Catalog"),
    ("/data-sources", "Data sources"),
    ("/deployments", "Deployments"),
    ("/runs", "Runs"),
    ("/usage", "Usage"),
    ("/audit", "Audit log"),
];

/// The page shell: a skip link, the navigation (the tenant's sections,
/// the viewer, sign-out), then `body` in `<main>` under its `<h1>`.
/// `scripts` names the assets the page loads beyond `console.js`.
pub(super) fn page(
    state: &AdminState,
    viewer: &Viewer,
    tenant: Option<&str>,
    title: &str,
    body: &str,
    scripts: &[&str],
) -> Response {
    let mut nav = String::from("<a class=\"brand\" href=\"/console\">Pilotage console</a>");
    if let Some(tenant) = tenant {
        nav.push_str(&format!("<span class=\"tenant\">Tenant <strong>{}</strong></span><ul>", escape(tenant)));
        for (path, label) in SECTIONS {
            let href = format!("/console/t/{}{path}", urlencode(tenant));
            nav.push_str(&format!("<li><a href=\"{href}\">{label}</a></li>"));
        }
        nav.push_str("</ul>");
    }
    // The inbox, with the pending count console.js fills in.
    nav.push_str(
        "<a class=\"inbox\" href=\"/console/approvals\">Approvals <span id=\"pending-count\" class=\"badge\" data-src=\"/console/approvals.json\"></span></a>",
    );
    let who = match &viewer.tenant {
        None => format!("{} (operator)", viewer.who.subject),
        Some(own) => format!("{} ({own})", viewer.who.subject),
    };
    nav.push_str(&format!(
        "<form class=\"sign-out\" method=\"post\" action=\"/console/sign-out\"><span>{}</span><input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\">Sign out</button></form>",
        escape(&who),
        viewer.csrf(state)
    ));
    let mut head = String::from(
        "<link rel=\"stylesheet\" href=\"/console/assets/console.css\"><link rel=\"stylesheet\" href=\"/console/assets/view.css\">",
    );
    for script in scripts.iter().chain(["console.js"].iter()) {
        head.push_str(&format!("<script src=\"/console/assets/{script}\" defer></script>"));
    }
    web::document(
        StatusCode::OK,
        CSP,
        &format!("{title} · Pilotage console"),
        &head,
        &format!(
            "<a class=\"skip\" href=\"#main\">Skip to the content</a><header><nav aria-label=\"Console\">{nav}</nav></header><main id=\"main\" tabindex=\"-1\"><h1>{}</h1>{body}</main>",
            escape(title)
        ),
    )
}

/// The 404 every unknown or unseen page answers, the same whatever the
/// reason.
pub(super) fn not_found(viewer: Option<&Viewer>, state: &AdminState) -> Response {
    let body = "<p id=\"not-found\">There is no such page, or you may not see it.</p><p><a href=\"/console\">Back to the console</a></p>";
    let mut response = match viewer {
        Some(viewer) => page(state, viewer, None, "No such page", body, &[]),
        None => plain("No such page", body),
    };
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

/// `GET /console/{*rest}`: a path the console does not have.
pub(super) async fn not_found_page(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    not_found(viewer(&state, &headers).await.as_ref(), &state)
}

/// A page outside the shell (sign-in, not found when signed out).
fn plain(title: &str, body: &str) -> Response {
    web::document(
        StatusCode::OK,
        CSP,
        &format!("{title} · Pilotage console"),
        "<link rel=\"stylesheet\" href=\"/console/assets/console.css\">",
        &format!("<main id=\"main\"><h1>{}</h1>{body}</main>", escape(title)),
    )
}

/// `GET /console`: the operator's list of tenants, or a tenant reader's
/// own tenant.
pub(super) async fn home(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    let Some(viewer) = viewer(&state, &headers).await else {
        return web::see_other("/console/sign-in", None);
    };
    if !viewer.reads() {
        return web::see_other("/console/approvals", None);
    }
    if let Some(own) = &viewer.tenant {
        return web::see_other(&format!("/console/t/{}", urlencode(own)), None);
    }
    let mut tenants = state.platform.tenants();
    tenants.sort_by(|a, b| a.id.cmp(&b.id));
    let mut rows = String::new();
    for tenant in &tenants {
        rows.push_str(&format!(
            "<tr><th scope=\"row\"><a href=\"/console/t/{}\">{}</a></th><td>{}</td><td>{}</td></tr>",
            urlencode(&tenant.id),
            escape(&tenant.id),
            tenant.languages().len(),
            if tenant.is_disabled() { "disabled" } else { "serving" }
        ));
    }
    let body = format!(
        "<table><caption>{} tenants</caption><thead><tr><th scope=\"col\">Tenant</th><th scope=\"col\">Languages</th><th scope=\"col\">State</th></tr></thead><tbody>{rows}</tbody></table>{}",
        tenants.len(),
        super::capacity::operator_section(&state.platform)
    );
    page(&state, &viewer, None, "Tenants", &body, &[])
}

/// `?next=`: where to go after signing in.
#[derive(Debug, Deserialize)]
pub(super) struct Next {
    #[serde(default)]
    pub(super) next: Option<String>,
}

/// Only a console path of this server: never another origin
/// (`//host`, `/\host`), nor a path that leaves the console once a
/// browser resolves it (`/console/../admin`, `%2e%2e`, `/consoleevil`).
pub(super) fn safe_next(next: Option<&str>) -> String {
    let fits = |path: &str| {
        let (route, _) = path.split_once(['?', '#']).unwrap_or((path, ""));
        // An approval's page (one segment after `/approvals/`), where a
        // sign-in begun on that page returns.
        let approval = route.strip_prefix("/approvals/").is_some_and(|id| !id.is_empty() && !id.contains('/'));
        (route == "/console" || route.starts_with("/console/") || approval)
            && !route.split('/').any(|segment| segment == "." || segment == "..")
            && !route.to_ascii_lowercase().contains("%2e")
            && !path.contains('\\')
            && !path.chars().any(char::is_control)
    };
    match next {
        Some(path) if fits(path) => path.to_owned(),
        _ => "/console".to_owned(),
    }
}

pub(super) fn sign_in_form(state: &AdminState, next: &str, message: Option<&str>) -> Response {
    let note = message.map(|m| format!("<p role=\"alert\" id=\"sign-in-error\">{}</p>", escape(m))).unwrap_or_default();
    // Sign-in with the identity provider, when configured, comes first;
    // the pasted credential stays for operators' tokens.
    let provider = state
        .console_sign_in
        .as_ref()
        .map(|sign_in| {
            let label = sign_in.label.clone().unwrap_or_else(|| format!("Sign in with {}", sign_in.issuer));
            let start = format!("/console/oidc/start?next={}", urlencoding(next));
            format!(
                "<p><a id=\"sign-in-provider\" class=\"button\" href=\"{}\">{}</a></p>",
                escape(&start),
                escape(&label)
            )
        })
        .unwrap_or_default();
    let mut response = plain(
        "Sign in to the console",
        &format!(
            "{note}{provider}<form method=\"post\" action=\"/console/sign-in\"><input type=\"hidden\" name=\"next\" value=\"{}\"><label for=\"token\">Credential: the operator token, or a token holding pilotage:console, pilotage:approve or pilotage:tenant-admin for your tenant</label><input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required><p><button type=\"submit\">Sign in</button></p></form>",
            escape(next)
        ),
    );
    if message.is_some() {
        *response.status_mut() = StatusCode::UNAUTHORIZED;
    }
    response
}

/// `GET /console/sign-in`.
pub(super) async fn sign_in_page(State(state): State<AdminState>, Query(next): Query<Next>) -> Response {
    sign_in_form(&state, &safe_next(next.next.as_deref()), None)
}

/// `value` percent-encoded for a query parameter.
fn urlencoding(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub(super) struct SignIn {
    token: String,
    #[serde(default)]
    next: Option<String>,
}

/// `POST /console/sign-in`: the credential for a session cookie.
pub(super) async fn sign_in(
    State(state): State<AdminState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    let next = safe_next(form.next.as_deref());
    // A client past its failed credentials is refused before its next one
    // is read (`admin::throttle`).
    let client = state.throttle.client(peer.map(|Extension(ConnectInfo(peer))| peer), &headers);
    if let Err(left) = state.throttle.check(client) {
        return throttled_page(sign_in_form(&state, &next, Some(THROTTLED)), left);
    }
    // A credential pasted with its scheme ("Bearer eyJ…") reads too.
    let token = form.token.trim();
    let token = token.strip_prefix("Bearer ").or_else(|| token.strip_prefix("bearer ")).unwrap_or(token).trim();
    match open_session(&state, token, &next).await {
        Ok(response) => response,
        Err(Refused::Invalid) => {
            state.throttle.failed(client);
            sign_in_form(&state, &next, Some("This credential is not valid."))
        }
        Err(Refused::NotForTheConsole) => sign_in_form(
            &state,
            &next,
            Some(
                "This credential may not use the console (it holds neither pilotage:console, pilotage:approve nor an admin scope).",
            ),
        ),
    }
}

/// Why a credential opened no session.
pub(super) enum Refused {
    /// It is not valid here.
    Invalid,
    /// It is valid but grants no console page.
    NotForTheConsole,
}

/// A console session for `token` (pasted, or returned by the identity
/// provider): the 303 to `next` setting the session cookie.
///
/// # Errors
/// [`Refused`] saying why there is none.
pub(super) async fn open_session(state: &AdminState, token: &str, next: &str) -> Result<Response, Refused> {
    let (credential, until) = credential_until(state, token).await.map_err(|_| Refused::Invalid)?;
    let (tenant, who, reads, approves, administers) = match credential {
        Credential::Admin(Admin::Operator(who)) => (None, who, true, true, true),
        Credential::Admin(Admin::TenantAdmin { tenant, who }) => (Some(tenant), who, true, true, true),
        Credential::Scoped { tenant, who, console, approve } if console || approve => {
            (Some(tenant), who, console, approve, false)
        }
        Credential::Scoped { .. } | Credential::Other(_) => return Err(Refused::NotForTheConsole),
    };
    let viewer = Viewer {
        tenant,
        who,
        reads,
        approves,
        administers,
        // Never longer than the credential it was opened with.
        exp: (pilotage_engine::clock::system_now_ms() + SESSION_S * 1000).min(until.unwrap_or(i64::MAX)),
        nonce: hex::encode(rand::random::<[u8; 16]>()),
    };
    let sealed = web::seal(&state.platform, SEAL, "session", &serde_json::to_string(&viewer).unwrap_or_default());
    let secure = if state.platform.public_url().starts_with("https://") { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={sealed}; Path=/console; HttpOnly; SameSite=Lax; Max-Age={SESSION_S}{secure}");
    Ok(web::see_other(next, Some(&cookie)))
}

/// The sign-out form.
#[derive(Debug, Deserialize)]
pub(super) struct SignOut {
    csrf: String,
}

/// `POST /console/sign-out`: ends the session in the store (every replica
/// refuses its cookie from then on) and clears the cookie (a forged form is
/// 403).
pub(super) async fn sign_out(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Form(form): Form<SignOut>,
) -> Response {
    let Some(viewer) = viewer(&state, &headers).await else {
        return web::see_other("/console/sign-in", None);
    };
    if !viewer.issued(&state, &form.csrf) {
        let mut refused = plain("Refused", "<p>This form was not issued to your session.</p>");
        *refused.status_mut() = StatusCode::FORBIDDEN;
        return refused;
    }
    // The session ends on the server, not only in this browser.
    if let Err(error) = state.platform.store().sign_in_end(&viewer.nonce, viewer.exp).await {
        tracing::error!(%error, "cannot record a sign-out");
        let mut failed =
            plain("Not signed out", "<p id=\"sign-out-error\">The server could not end your session. Try again.</p>");
        *failed.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        return failed;
    }
    web::see_other("/console/sign-in", Some(&format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Lax; Max-Age=0")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_the_console() {
        assert_eq!(safe_next(Some("/console/t/demo/runs?status=success")), "/console/t/demo/runs?status=success");
        for outside in [
            "//evil.example/console",
            "https://evil.example/",
            "/admin/v1/tenants",
            "/console\\evil",
            "",
            "/console/../admin/v1/tenants",
            "/console/%2e%2e/approvals/apr_x",
            "/console/%2E%2E/admin",
            "/consoleevil",
            "/console@evil.example",
            "/console/./../admin",
        ] {
            assert_eq!(safe_next(Some(outside)), "/console", "{outside}");
        }
        assert_eq!(safe_next(None), "/console");
        assert_eq!(safe_next(Some("/console?x=1")), "/console?x=1");
    }
}
