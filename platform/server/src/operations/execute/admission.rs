//! Stage 5a of an execute, admission (Part II §6.5.2 step 5, §7.3): the
//! idempotency claim, then the tenant's policy on risk (approvals,
//! denials, budgets), then its quotas (concurrent Runs, stored bytes),
//! then the Run's turn in the node's execution pool.
//!
//! The claim comes first: a retry of a request already claimed (recorded,
//! or still running) is answered from the claim alone, so concurrent
//! retries of one key never meet the policy again (no second approval
//! request, no budget taken) and a burst of identical requests cannot
//! exhaust the tenant's concurrent-run quota.
//!
//! What admission takes, a Run that does not start gives back: a
//! [`Refund`] holds the budget units and the key's claim until the Run's
//! outcome says they are spent, and gives them back when dropped
//! unspent, so a request whose future ends early (a panic on its path, a
//! caller that drops it) frees the key and the budget as a refusal does,
//! instead of leaving a claim whose lease then runs out and reads as an
//! interrupted Run.

use std::sync::Arc;

use super::answer::{ExecuteAnswer, Refusal};
use super::checks::Checked;
use super::key::{self, Claimed};
use super::request::CheckedRequest;
use super::run::Held;
use super::runnable::Runnable;
use crate::operations::{Context, OpError, request_error};
use crate::policy;
use crate::policy::approvals::Asked;
use crate::policy::budgets::Taken;
use crate::policy::gate::Gate;
use crate::tenancy::{LanguageSlot, Platform};
use pilotage_engine::admission::Pool;
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_protocol::trace::effective_level;

/// What admission decides.
pub(super) enum Admission {
    /// The Run may start, holding `held`; `refund` gives back what it took
    /// if it is refused after all.
    Admitted {
        /// Its place, lease and slot.
        held: Held,
        /// Its budget units and claim.
        refund: Refund,
    },
    /// Another Run of the same request holds the key: its answer.
    Replay(Box<ExecuteAnswer>),
    /// A refused Run (policy, capacity); everything taken was given back.
    Refused(Refusal),
}

/// Admits Run `run_id` of `request`, whose program passed as `checked`.
///
/// # Errors
/// An idempotency conflict; a store failure before the Run started;
/// `bounds_exceeded` when a quota of the tenant is reached (everything
/// taken is given back first).
pub(super) async fn admit(
    context: &Context,
    slot: &Arc<LanguageSlot>,
    request: &CheckedRequest,
    checked: &Checked,
    run_id: &str,
) -> Result<Admission, OpError> {
    let mut refund = Refund::new(context, run_id);
    let mut lease = None;
    if let Some(print) = &request.key {
        let level = effective_level(request.requested_level, slot.description().trace_ceiling);
        match key::claim(context, print, run_id, &slot.exposure.retention, level).await? {
            Claimed::Theirs(answer) => return Ok(Admission::Replay(answer)),
            Claimed::Ours(guard) => {
                lease = Some(guard);
                refund.key = Some(print.key.clone());
            }
        }
    }

    // The tenant's policy on risk (Part II §7.3, enforced here): a held,
    // denied or over-budget Run is refused like the ones before it, before
    // anything runs; its key's claim is freed.
    let gate = policy::gate::pass(
        &context.platform,
        &context.tenant,
        &asked(context, request, checked),
        checked.validated.response.plan.as_ref(),
        &context.caller.principal.scopes,
        run_id,
    )
    .await;
    match gate {
        Ok(Gate::Pass(taken)) => refund.budget = taken,
        Ok(Gate::Refuse { status, error, approval }) => {
            refund.give_back().await;
            return Ok(Admission::Refused(Refusal { approval, ..Refusal::new(status, error) }));
        }
        Err(error) => {
            refund.give_back().await;
            return Err(key::before_run(&error));
        }
    }

    // The tenant's quotas, checked before anything runs, so a refusal is a
    // request error; a refusal from here on gives the budget back and
    // frees the claim, so the same key can be retried once the quota
    // allows.
    let slot_guard = match context.tenant.start_run() {
        Ok(guard) => guard,
        Err(exceeded) => {
            refund.give_back().await;
            return Err(request_error(RequestErrorKind::BoundsExceeded, exceeded.to_string()));
        }
    };
    if request.retained
        && let Err(error) = stored_bytes_allow(context).await
    {
        refund.give_back().await;
        return Err(error);
    }
    // The Run's turn in the node's execution pool: a refusal is a Run that
    // did not start (nothing ran, nothing is stored, the key is free).
    let admission = context.platform.engine().admission();
    match admission.admit(Pool::Execution, &context.tenant.id, slot.component.need()).await {
        Ok(place) => Ok(Admission::Admitted { held: Held { place, lease, slot: Some(slot_guard) }, refund }),
        Err(refused) => {
            refund.give_back().await;
            Ok(Admission::Refused(Refusal::capacity(&refused)))
        }
    }
}

/// What the tenant's policy decides on.
fn asked<'a>(context: &'a Context, request: &'a CheckedRequest, checked: &'a Checked) -> Asked<'a> {
    let principal = &context.caller.principal;
    Asked {
        tenant: &principal.tenant,
        issuer: &principal.issuer,
        subject: &principal.subject,
        language: &request.language,
        program: match &request.runnable {
            Runnable::Inline(program) => Some(program),
            Runnable::Promoted(_) => None,
        },
        program_ref: request.request.program_ref.as_deref(),
        input: request.request.input.as_ref(),
        context: request.request.context.as_ref(),
        kind: request.kind,
        catalog_version: checked.snapshot.catalog_version(),
        plan: checked.validated.response.plan.as_ref(),
        rule: None,
        address: context.caller.address.as_deref(),
    }
}

/// The tenant's `max_stored_run_bytes` quota, for a Run that is retained.
async fn stored_bytes_allow(context: &Context) -> Result<(), OpError> {
    let tenant = &context.caller.principal.tenant;
    let limit = context.tenant.quotas().max_stored_run_bytes;
    let used = context.platform.store().run_bytes_of_tenant(tenant).await.map_err(|e| key::before_run(&e))?;
    if used as u64 >= limit {
        return Err(request_error(
            RequestErrorKind::BoundsExceeded,
            format!(
                "quota max_stored_run_bytes ({limit}) of tenant '{tenant}' is reached; use store:false or wait for runs to expire"
            ),
        ));
    }
    Ok(())
}

/// What an admitted Run took that a refusal gives back: the tenant's
/// budget units and the idempotency key's claim. Spent with [`keep`]
/// once the Run's outcome is the key's answer; given back with
/// [`give_back`], or on drop (then on a task of its own, since the store
/// is asynchronous).
///
/// [`keep`]: Refund::keep
/// [`give_back`]: Refund::give_back
pub(super) struct Refund {
    platform: Platform,
    owner: (String, String, String),
    run_id: String,
    budget: Taken,
    key: Option<String>,
    spent: bool,
}

impl Refund {
    fn new(context: &Context, run_id: &str) -> Refund {
        let principal = &context.caller.principal;
        Refund {
            platform: context.platform.clone(),
            owner: (principal.tenant.clone(), principal.issuer.clone(), principal.subject.clone()),
            run_id: run_id.to_owned(),
            budget: Taken::default(),
            key: None,
            spent: false,
        }
    }

    /// The Run used what it took: nothing is given back.
    pub(super) fn keep(mut self) {
        self.spent = true;
    }

    /// Gives the budget units back and frees the key's claim, now.
    pub(super) async fn give_back(mut self) {
        self.spent = true;
        give_back(&self.platform, &self.owner, &self.run_id, &self.budget, self.key.take()).await;
    }
}

impl Drop for Refund {
    fn drop(&mut self) {
        if self.spent {
            return;
        }
        let (platform, owner, run_id) = (self.platform.clone(), self.owner.clone(), self.run_id.clone());
        let (budget, key) = (std::mem::take(&mut self.budget), self.key.take());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { give_back(&platform, &owner, &run_id, &budget, key).await });
        }
    }
}

async fn give_back(
    platform: &Platform,
    (tenant, issuer, subject): &(String, String, String),
    run_id: &str,
    budget: &Taken,
    key: Option<String>,
) {
    budget.give_back(platform).await;
    if let Some(key) = key {
        let owner = pilotage_store::Owner { tenant, issuer, subject };
        if let Err(error) = platform.store().idempotency_release(owner, &key, run_id).await {
            tracing::warn!(%error, %run_id, "cannot free an idempotency claim of a Run that did not start");
        }
    }
}
