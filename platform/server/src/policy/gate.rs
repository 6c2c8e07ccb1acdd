//! The gate an execute passes after validation and binding, before it
//! claims its key or runs (Part II §7.3 enforced by the platform): the
//! tenant's rules decide, budgets are taken, and an `approve` decision
//! admits the request only with an approval made for exactly it.

use pilotage_protocol::plan::Plan;
use pilotage_protocol::risk::RiskHints;
use pilotage_store::StoreError;

use super::approvals::{self, Admission, Asked};
use super::budgets::{self, Taken};
use super::{APPROVAL_REJECTED, APPROVAL_REQUIRED, BUDGET_EXCEEDED, POLICY_DENIED, Request, Ruling};
use crate::tenancy::{Platform, Tenant};

/// What the gate says.
#[derive(Debug)]
pub(crate) enum Gate {
    /// Run; the budget units are the Run's (given back if it is refused
    /// later, before anything ran).
    Pass(Taken),
    /// Refuse: a Run outcome with `status` and `error`, and the response's
    /// `approval` member when a human can change the answer.
    Refuse {
        /// One of the policy's statuses.
        status: &'static str,
        /// The outcome's error.
        error: String,
        /// The `approval` member.
        approval: Option<approvals::ApprovalMember>,
    },
}

/// Passes `asked` (whose plan is `plan`; `None` for a Language without
/// plans, treated as the highest risk) through `tenant`'s policy for a
/// caller holding `scopes`.
///
/// # Errors
/// [`StoreError`] when approvals or budgets cannot be read or written.
pub(crate) async fn pass(
    platform: &Platform,
    tenant: &Tenant,
    asked: &Asked<'_>,
    plan: Option<&Plan>,
    scopes: &std::collections::BTreeSet<String>,
    run_id: &str,
) -> Result<Gate, StoreError> {
    let policy = tenant.policy();
    if policy.allows_all() {
        return Ok(Gate::Pass(Taken::default()));
    }
    // Without a plan nothing says what the program may do: the highest
    // class, so a strict policy holds it.
    let hints = plan.map_or(RiskHints { read_only: false, destructive: true, open_world: true }, |p| p.max_risk_hints);
    let request = Request { language: asked.language, hints, kind: asked.kind, scopes };
    let (decision, rule) = policy.decide(&request);
    platform.engine().metrics().policy_decision(decision.as_str());
    if decision == Ruling::Deny {
        approvals::audit(
            platform,
            &asked.actor(),
            "policy.deny",
            &format!("{}/{run_id}", asked.tenant),
            serde_json::json!({"language": asked.language, "run": asked.kind.as_str(), "rule": rule,
                               "policy_version": policy.version(), "from": asked.address}),
        )
        .await;
        return Ok(Gate::Refuse {
            status: POLICY_DENIED,
            error: format!(
                "this tenant's policy denies {} Runs of risk {} here (rule {}); nothing ran",
                asked.kind.as_str(),
                super::RiskClass::of(&hints).as_str(),
                rule.unwrap_or_default()
            ),
            approval: None,
        });
    }
    let taken = match budgets::take(platform, &policy, asked, &request).await? {
        Ok(taken) => taken,
        Err(spent) => {
            return Ok(Gate::Refuse {
                status: BUDGET_EXCEEDED,
                error: format!("{spent}; nothing ran"),
                approval: None,
            });
        }
    };
    if decision == Ruling::Allow {
        return Ok(Gate::Pass(taken));
    }
    let asked = Asked { rule, ..*asked };
    let admission = match approvals::admit(platform, &policy, &asked, run_id).await {
        Ok(admission) => admission,
        Err(error) => {
            taken.give_back(platform).await;
            return Err(error);
        }
    };
    match admission {
        Admission::Approved(row) => {
            tracing::info!(approval = %row.id, run_id, "an approved request runs");
            platform.engine().metrics().policy_decision("approval_used");
            Ok(Gate::Pass(taken))
        }
        Admission::Held(row) => {
            taken.give_back(platform).await;
            Ok(Gate::Refuse {
                status: APPROVAL_REQUIRED,
                error: format!(
                    "this tenant's policy needs a human to approve this exact request first (approval {}); ask a person who may approve to open {} and decide, then send the same request again; nothing ran",
                    row.id,
                    approvals::page_url(platform, &row.id)
                ),
                approval: Some(approvals::member(platform, &row)),
            })
        }
        Admission::Rejected(row) => {
            taken.give_back(platform).await;
            Ok(Gate::Refuse {
                status: APPROVAL_REJECTED,
                error: format!(
                    "{} rejected this exact request (approval {}); change the program, or ask again after {}; nothing ran",
                    row.decided_by.as_deref().unwrap_or("a human"),
                    row.id,
                    pilotage_engine::clock::rfc3339(row.expires_at)
                ),
                approval: Some(approvals::member(platform, &row)),
            })
        }
    }
}
