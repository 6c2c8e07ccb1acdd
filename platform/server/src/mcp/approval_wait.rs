//! An execute held for approval (`crate::policy`), waited on in the same
//! call where the client can show a person the approval page: MCP URL-mode
//! elicitation.
//!
//! - A session of a revision before 2026-07-28 whose client declared
//!   `elicitation.url`: the server sends `elicitation/create` (mode `url`,
//!   the page's URL, the approval id as `elicitationId`) and meanwhile
//!   reads the approval from the store every 200 ms, so a decision made on
//!   any replica releases the call. Decided: the execute runs again and
//!   answers (the Run, or `approval_rejected`). The person declined or
//!   cancelled: the held answer at once. Nothing decided within
//!   `approval_wait_ms`: the held answer, saying it waited.
//! - The 2026-07-28 revision (no server-to-client requests): the first
//!   answer is an `InputRequiredResult` carrying the same elicitation, its
//!   `requestState` the approval id; the client's retry with its response
//!   waits as above.
//! - Any other client gets the held answer (its `approval` names the URL).
//!
//! Invariant: the wait never runs anything; a Run starts only through the
//! execute operation, which uses the approval once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationAction, InputRequest, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::Peer;
use serde_json::Value;

use crate::operations::Context;
use crate::operations::execute::ExecuteAnswer;
use crate::policy::approvals;

/// The `inputRequests` key of the approval's elicitation.
const INPUT_KEY: &str = "approval";
/// How often the store is read for a decision.
const POLL: Duration = Duration::from_millis(200);

/// A held execute: its approval's id and page.
#[derive(Clone, Debug)]
pub(super) struct Held {
    id: String,
    url: String,
}

/// The approval of a held execute's answer, if it is one.
pub(super) fn held(answer: &ExecuteAnswer) -> Option<Held> {
    if answer.response.outcome.status != pilotage_protocol::outcome::APPROVAL_REQUIRED {
        return None;
    }
    let approval = answer.approval.as_ref()?;
    Some(Held { id: approval.id.clone(), url: approval.url.clone() })
}

fn message(held: &Held) -> String {
    format!(
        "This Run needs a person's approval (approval {}). Open the page, read the plan and approve or reject it; the call continues once decided.",
        held.id
    )
}

/// The elicitation of the 2026-07-28 form: an `InputRequiredResult` whose
/// `requestState` is the approval id.
pub(super) fn input_required(held: &Held) -> InputRequiredResult {
    let request = ElicitRequest::new(ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: message(held),
        url: held.url.clone(),
        elicitation_id: held.id.clone(),
    });
    let mut requests = BTreeMap::new();
    requests.insert(INPUT_KEY.to_owned(), InputRequest::Elicitation(request));
    let mut result = InputRequiredResult::from_request_state(held.id.clone());
    result.input_requests = Some(requests);
    result
}

/// Whether a retry of the 2026-07-28 form answers this held execute's
/// elicitation: its `requestState` is the approval id and its response is
/// not a refusal (`decline`, `cancel`).
pub(super) fn answered(held: &Held, responses: Option<&BTreeMap<String, Value>>, state: Option<&str>) -> Option<bool> {
    if state != Some(held.id.as_str()) {
        return None;
    }
    let action = responses?.get(INPUT_KEY)?.get("action")?.as_str()?;
    Some(action == "accept")
}

/// Whether the requests of this call are of a revision that forbids
/// server-to-client requests.
pub(super) fn stateless(version: Option<&ProtocolVersion>) -> bool {
    version.is_some_and(|version| *version >= ProtocolVersion::V_2026_07_28)
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Waited {
    /// A human decided (or the approval ended): run the execute again.
    Decided,
    /// The person declined or cancelled the elicitation.
    Refused,
    /// Nothing was decided in time.
    TimedOut,
}

/// Waits for a decision on `held`, asking the client (a session's peer)
/// to show the page when `peer` is given.
pub(super) async fn wait(context: &Context, held: &Held, peer: Option<&Peer<RoleServer>>) -> Waited {
    let limit = context.platform.approval_wait();
    let deadline = Instant::now() + limit;
    let decided = until_decided(context, &held.id, deadline);
    // A page URL that does not parse (a public URL set oddly) is not sent.
    let (Some(peer), Ok(page)) = (peer, reqwest::Url::parse(&held.url)) else {
        return if decided.await { Waited::Decided } else { Waited::TimedOut };
    };
    let elicitation = peer.elicit_url_with_timeout(message(held), page, held.id.clone(), Some(limit));
    tokio::pin!(decided);
    tokio::select! {
        done = &mut decided => if done { Waited::Decided } else { Waited::TimedOut },
        action = elicitation => match action {
            Ok(ElicitationAction::Accept) => if decided.await { Waited::Decided } else { Waited::TimedOut },
            Ok(_) => Waited::Refused,
            Err(error) => {
                tracing::debug!(%error, "the approval elicitation ended without an answer");
                if decided.await { Waited::Decided } else { Waited::TimedOut }
            }
        },
    }
}

/// Whether the approval stopped being pending before `deadline`.
async fn until_decided(context: &Context, id: &str, deadline: Instant) -> bool {
    loop {
        match context.platform.store().approval(&context.caller.principal.tenant, id).await {
            Ok(Some(row)) if approvals::state_at(&row, context.platform.clock().now_ms()) != "pending" => return true,
            Ok(None) => return true,
            Ok(Some(_)) => {}
            Err(error) => tracing::warn!(%error, "cannot read an approval while waiting"),
        }
        if Instant::now() + POLL > deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The held answer after a wait that ended without a decision: its error
/// says so.
pub(super) fn after_wait(mut answer: ExecuteAnswer, waited: Waited, limit: Duration) -> ExecuteAnswer {
    let note = match waited {
        Waited::Refused => "the person declined to open the approval page".to_owned(),
        _ => format!("waited {} s and nobody decided yet", limit.as_secs()),
    };
    if let Some(error) = answer.response.outcome.error.as_mut() {
        *error = format!("{error} ({note})");
    }
    answer
}
