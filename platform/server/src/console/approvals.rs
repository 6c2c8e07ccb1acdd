//! The approvals inbox at `/console/approvals`: the pending approval
//! requests of every tenant the viewer may see, with their age and expiry,
//! decided from there (approve or reject, with a comment that goes into
//! the audit record). `approvals.json` is the header's pending count.
//!
//! Who: every signed-in viewer sees the inbox of its tenants; those who
//! decide (operators, tenant administrators, `pilotage:approve`) get the
//! forms, and an approver without `pilotage:console` sees nothing else
//! (`session::Viewer::reads`). A decision is a POST carrying the session's
//! CSRF token, behind the console's Origin check, decided by
//! `policy::approvals::decide` as on the approval page and the admin API:
//! never by the subject who asked, only while pending.

use std::net::SocketAddr;

use axum::Extension;
use axum::Json;
use axum::extract::{ConnectInfo, Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::session::{Viewer, page, viewer};
use super::web::{self, escape, urlencode};
use crate::admin::AdminState;
use crate::policy::approvals::{Approver, COMMENT_MAX_CHARS, DecideError, decide, state_at};
use pilotage_store::{ApprovalRow, Scope};

/// The most pending requests listed per tenant.
const PER_TENANT: i64 = 200;

/// The pending requests `viewer` may see, oldest first (the one expiring
/// soonest on top).
async fn pending(state: &AdminState, viewer: &Viewer) -> Result<Vec<ApprovalRow>, pilotage_store::StoreError> {
    let tenants: Vec<String> = match &viewer.tenant {
        Some(own) => vec![own.clone()],
        None => state.platform.store().tenants(Scope::Every).await?.into_iter().map(|row| row.id).collect(),
    };
    let now = state.platform.clock().now_ms();
    let mut rows = Vec::new();
    for tenant in tenants {
        let stored = state.platform.store().approvals_of_tenant(&tenant, Some("pending"), PER_TENANT).await?;
        rows.extend(stored.into_iter().filter(|row| state_at(row, now) == "pending"));
    }
    rows.sort_by_key(|row| row.expires_at);
    Ok(rows)
}

/// `GET /console/approvals.json`: `{"pending": n}` for the header.
pub(super) async fn count(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    let Some(viewer) = viewer(&state, &headers).await else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    match pending(&state, &viewer).await {
        Ok(rows) => {
            let mut response = Json(json!({"pending": rows.len()})).into_response();
            response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(error) => {
            tracing::error!(%error, "the approvals inbox cannot read the store");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// What the inbox says after a decision (`?done=` / `?refused=`).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Said {
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    refused: Option<String>,
}

/// "5 min" from a span in ms.
fn span(ms: i64) -> String {
    let minutes = ms.max(0) / 60_000;
    match minutes {
        0 => "under a minute".to_owned(),
        1..=119 => format!("{minutes} min"),
        _ => format!("{} h", minutes / 60),
    }
}

/// What a request is, from its stored request: the kind of Run, the
/// plan's highest risk and the policy rule that held it (its position in
/// the tenant's rules, counted from 1).
fn what(row: &ApprovalRow) -> String {
    let request: serde_json::Value = serde_json::from_str(&row.request).unwrap_or_default();
    let mut parts = Vec::new();
    if let Some(run) = request["run"].as_str() {
        parts.push(format!("{run} Run"));
    }
    if let Some(risk) = request["plan"]["max_risk"].as_str() {
        parts.push(format!("risk {risk}"));
    }
    if let Some(rule) = request["rule"].as_u64() {
        parts.push(format!("held by rule {}", rule + 1));
    }
    parts.join(", ")
}

/// `GET /console/approvals`: the inbox.
pub(super) async fn inbox(State(state): State<AdminState>, headers: HeaderMap, Query(said): Query<Said>) -> Response {
    let Some(viewer) = viewer(&state, &headers).await else {
        return web::see_other("/console/sign-in?next=%2Fconsole%2Fapprovals", None);
    };
    let rows = match pending(&state, &viewer).await {
        Ok(rows) => rows,
        Err(error) => {
            tracing::error!(%error, "the approvals inbox cannot read the store");
            let mut failed = page(&state, &viewer, None, "The server failed", "<p>The failure was logged.</p>", &[]);
            *failed.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            return failed;
        }
    };
    let now = state.platform.clock().now_ms();
    let csrf = viewer.csrf(&state);
    let mut body = String::new();
    if let Some(done) = said.done.as_deref() {
        body.push_str(&format!("<p class=\"done\" id=\"decided\" role=\"status\">{}</p>", escape(done)));
    }
    if let Some(refused) = said.refused.as_deref() {
        body.push_str(&format!("<p class=\"refusal\" id=\"refused\" role=\"alert\">{}</p>", escape(refused)));
    }
    if rows.is_empty() {
        body.push_str("<p id=\"inbox-empty\">Nothing waits for a decision.</p>");
        return page(&state, &viewer, None, "Approvals", &body, &[]);
    }
    let mut table = String::new();
    for row in &rows {
        let approver = Approver { tenant: viewer.tenant.clone(), who: viewer.who.clone() };
        let decision = if !viewer.approves() {
            "<span class=\"note\">You read; approvers decide.</span>".to_owned()
        } else if approver.asked(row) {
            "<span class=\"note\">Your own request: someone else decides.</span>".to_owned()
        } else {
            format!(
                "<form class=\"decide\" method=\"post\" action=\"/console/approvals/{t}/{id}\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
                 <label class=\"visually-hidden\" for=\"comment-{idh}\">Comment on {idh}</label>\
                 <input type=\"text\" id=\"comment-{idh}\" name=\"comment\" maxlength=\"500\" placeholder=\"Comment (optional)\">\
                 <button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button>\
                 <button type=\"submit\" name=\"decision\" value=\"reject\">Reject</button></form>",
                t = urlencode(&row.tenant),
                id = urlencode(&row.id),
                idh = escape(&row.id),
            )
        };
        table.push_str(&format!(
            "<tr class=\"pending\" data-id=\"{idh}\"><td>{tenant}</td><th scope=\"row\"><a href=\"/approvals/{id}\" title=\"{idh}\">{short}</a></th><td>{who}</td><td>{language}</td><td>{risk}</td><td>{age} ago</td><td>in {left}</td><td>{decision}</td></tr>",
            idh = escape(&row.id),
            id = urlencode(&row.id),
            short = escape(&format!("{}…", row.id.chars().take(12).collect::<String>())),
            tenant = escape(&row.tenant),
            who = escape(&row.subject),
            language = escape(&row.language),
            risk = escape(&what(row)),
            age = span(now - row.created_at),
            left = span(row.expires_at - now),
        ));
    }
    body.push_str(&format!(
        "<p>Each request is one exact program, input and plan an agent asked to run; open it to read the plan. \
         Undecided, it expires.</p><div class=\"scroll\"><table id=\"inbox\"><caption>{n} pending</caption><thead><tr>\
         <th scope=\"col\">Tenant</th><th scope=\"col\">Request</th><th scope=\"col\">Asked by</th><th scope=\"col\">Language</th>\
         <th scope=\"col\">What</th><th scope=\"col\">Asked</th><th scope=\"col\">Expires</th><th scope=\"col\">Decision</th>\
         </tr></thead><tbody>{table}</tbody></table></div>",
        n = rows.len()
    ));
    page(&state, &viewer, None, "Approvals", &body, &[])
}

/// A decision posted from the inbox.
#[derive(Debug, Deserialize)]
pub(super) struct Decided {
    csrf: String,
    decision: String,
    #[serde(default)]
    comment: String,
}

/// `POST /console/approvals/{tenant}/{id}`: approve or reject from the
/// inbox; back to it with what happened.
pub(super) async fn post(
    State(state): State<AdminState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Path((tenant, id)): Path<(String, String)>,
    Form(form): Form<Decided>,
) -> Response {
    let Some(viewer) = viewer(&state, &headers).await else {
        return web::see_other("/console/sign-in?next=%2Fconsole%2Fapprovals", None);
    };
    let forbidden = |why: &str| {
        let mut refused =
            page(&state, &viewer, None, "Refused", &format!("<p id=\"refused\">{}</p>", escape(why)), &[]);
        *refused.status_mut() = StatusCode::FORBIDDEN;
        refused
    };
    if !viewer.issued(&state, &form.csrf) {
        return forbidden("This form was not issued to your session.");
    }
    if !viewer.approves() || !viewer.may(&tenant) {
        return forbidden("You may not decide this tenant's approval requests.");
    }
    let approve = match form.decision.as_str() {
        "approve" => true,
        "reject" => false,
        _ => return forbidden("A decision is approve or reject."),
    };
    let comment: String = form.comment.trim().chars().take(COMMENT_MAX_CHARS).collect();
    let address = peer.map(|Extension(ConnectInfo(peer))| peer.ip().to_string()).unwrap_or_default();
    let approver = Approver { tenant: viewer.tenant.clone(), who: viewer.who.clone() };
    let said = match decide(&state.platform, &tenant, &id, approve, &approver, &address, &comment).await {
        Ok(row) => format!("done={}", urlencode(&format!("{} {}.", row.id, row.state))),
        Err(DecideError::Store(error)) => {
            tracing::error!(%error, "an inbox decision cannot reach the store");
            format!("refused={}", urlencode("The server could not record the decision; try again."))
        }
        Err(refusal) => format!("refused={}", urlencode(&format!("{id}: {refusal}."))),
    };
    web::see_other(&format!("/console/approvals?{said}"), None)
}

#[cfg(test)]
mod tests {
    use super::span;

    #[test]
    fn spans_read_as_minutes_then_hours() {
        assert_eq!(span(30_000), "under a minute");
        assert_eq!(span(5 * 60_000), "5 min");
        assert_eq!(span(3 * 3_600_000), "3 h");
        assert_eq!(span(-5), "under a minute");
    }
}
