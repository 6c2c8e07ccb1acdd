//! Approvals bound to the request: an execute that meets `approve` is held
//! until a human approves exactly it, then the first identical request
//! uses the approval, once.
//!
//! The binding is the SHA-256 of everything that changes what would run:
//! tenant, subject, Language, the program (its canonical JSON, or the
//! `program_ref`), the input and context (canonical JSON), the kind of Run
//! and the `catalog_version` the plan was checked against. Any change
//! needs a new approval. Every request, decision and use is an audit
//! record (the store's audit log, and a `pilotage::audit` log event, one
//! JSON line with the JSON log format).

use pilotage_protocol::plan::Plan;
use pilotage_store::{ApprovalDecision, ApprovalRow, AuditRow, StoreError};
use serde_json::{Value, json};
use sha2::Digest;

use super::{Policy, RunKind};
use crate::tenancy::{Identity, Platform};

/// What an approver decides on: one held execute.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asked<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The issuer of the asker's credential.
    pub issuer: &'a str,
    /// Who asks (a subject of `issuer`).
    pub subject: &'a str,
    /// The Language.
    pub language: &'a str,
    /// The inline program, or `None` for a promoted one.
    pub program: Option<&'a Value>,
    /// The promoted program's reference, when it is one.
    pub program_ref: Option<&'a str>,
    /// The input, as given.
    pub input: Option<&'a Value>,
    /// The context, as given.
    pub context: Option<&'a Value>,
    /// The kind of Run.
    pub kind: RunKind,
    /// The catalog version the plan was checked against.
    pub catalog_version: &'a str,
    /// The plan.
    pub plan: Option<&'a Plan>,
    /// The index of the rule that asked for approval.
    pub rule: Option<usize>,
    /// The address the request came from, when known.
    pub address: Option<&'a str>,
}

impl Asked<'_> {
    /// The digest every approval of this request carries (hex SHA-256).
    pub(crate) fn binding(&self) -> String {
        let canonical =
            |value: Option<&Value>| value.map(pilotage_engine::catalog::version::canonical_json).unwrap_or_default();
        let mut hash = sha2::Sha256::new();
        for part in [
            self.tenant,
            self.issuer,
            self.subject,
            self.language,
            &canonical(self.program),
            self.program_ref.unwrap_or(""),
            &canonical(self.input),
            &canonical(self.context),
            self.kind.as_str(),
            self.catalog_version,
        ] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
        hex::encode(hash.finalize())
    }

    /// What the approver is shown (stored with the request).
    fn shown(&self, policy: &Policy) -> Value {
        json!({
            "language": self.language,
            "issuer": self.issuer,
            "subject": self.subject,
            "run": self.kind.as_str(),
            "program": self.program,
            "program_ref": self.program_ref,
            "input": self.input,
            "context": self.context,
            "catalog_version": self.catalog_version,
            "plan": self.plan,
            "rule": self.rule,
            "policy_version": policy.version(),
            "from": self.address,
        })
    }
}

/// Where an asked request stands.
#[derive(Clone, Debug)]
pub(crate) enum Admission {
    /// Approved, and now used by this Run.
    Approved(ApprovalRow),
    /// Waiting for a human (just asked, or asked before).
    Held(ApprovalRow),
    /// A human rejected exactly this request (until the rejection expires).
    Rejected(ApprovalRow),
}

/// The approval page of `id`.
pub(crate) fn page_url(platform: &Platform, id: &str) -> String {
    format!("{}/approvals/{id}", platform.public_url())
}

/// The `approval` member of a held or rejected Run's response (the
/// platform's member beside the outcome): the approval's id, its state
/// (`pending`, `rejected`), the page a person decides on, and when it
/// expires (RFC 3339).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct ApprovalMember {
    /// The approval's id.
    pub id: String,
    /// Its state when answered.
    pub state: String,
    /// Its page ([`page_url`]).
    pub url: String,
    /// When it expires.
    pub expires_at: String,
}

/// The `approval` member of `row`.
pub(crate) fn member(platform: &Platform, row: &ApprovalRow) -> ApprovalMember {
    ApprovalMember {
        id: row.id.clone(),
        state: row.state.clone(),
        url: page_url(platform, &row.id),
        expires_at: pilotage_engine::clock::rfc3339(row.expires_at),
    }
}

/// Uses an approval of `asked` for `run_id` when one is approved, else
/// answers where it stands, asking anew when nothing counts any more.
///
/// # Errors
/// [`StoreError`] when the store cannot be read or written.
pub(crate) async fn admit(
    platform: &Platform,
    policy: &Policy,
    asked: &Asked<'_>,
    run_id: &str,
) -> Result<Admission, StoreError> {
    let store = platform.store();
    let binding = asked.binding();
    let now = platform.clock().now_ms();
    let live = store.approvals_live(asked.tenant, &binding, now).await?;
    for row in live.iter().filter(|row| row.state == "approved") {
        if store.approval_use(asked.tenant, &row.id, run_id, now).await? {
            audit(
                platform,
                &asked.actor(),
                "approval.use",
                &format!("{}/{}", asked.tenant, row.id),
                json!({"run_id": run_id}),
            )
            .await;
            let mut used = row.clone();
            used.state = "used".into();
            used.used_by_run = Some(run_id.to_owned());
            return Ok(Admission::Approved(used));
        }
    }
    // The newest decision stands: a rejection answers until it expires.
    if let Some(row) = live.iter().find(|row| row.state == "rejected" || row.state == "pending") {
        return Ok(if row.state == "rejected" {
            Admission::Rejected(row.clone())
        } else {
            Admission::Held(row.clone())
        });
    }
    let row = ApprovalRow {
        id: format!("apr_{}", hex::encode(rand::random::<[u8; 16]>())),
        tenant: asked.tenant.to_owned(),
        issuer: asked.issuer.to_owned(),
        subject: asked.subject.to_owned(),
        language: asked.language.to_owned(),
        binding,
        request: asked.shown(policy).to_string(),
        state: "pending".into(),
        created_at: now,
        expires_at: now + policy.approval_ttl_ms(),
        decided_by: None,
        decided_at: None,
        decided_from: None,
        used_by_run: None,
    };
    store.approval_insert(&row).await?;
    audit(
        platform,
        &asked.actor(),
        "approval.request",
        &format!("{}/{}", asked.tenant, row.id),
        json!({
            "language": asked.language,
            "binding": row.binding,
            "run": asked.kind.as_str(),
            "catalog_version": asked.catalog_version,
            "max_risk": asked.plan.map(|plan| plan.max_risk.clone()),
            "rule": asked.rule,
            "policy_version": policy.version(),
            "expires_at": row.expires_at,
            "from": asked.address,
        }),
    )
    .await;
    platform.engine().metrics().policy_decision("approval_requested");
    Ok(Admission::Held(row))
}

/// Why a decision on an approval was not recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum DecideError {
    /// Occurs when no approval of the approver's tenants has this id.
    #[error("no such approval")]
    NotFound,
    /// Occurs when the approver is the principal who asked (an agent
    /// cannot approve its own request).
    #[error("the subject who asked cannot decide its own request")]
    OwnRequest,
    /// Occurs when the approval is already decided, used or expired.
    #[error("this approval is {0}: nothing was decided")]
    NotPending(String),
    /// Occurs when the store fails.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The state an approval presents at `now`: `expired` once past its time
/// and not used, else its stored state.
pub(crate) fn state_at(row: &ApprovalRow, now_ms: i64) -> &str {
    if row.state != "used" && now_ms >= row.expires_at { "expired" } else { &row.state }
}

/// Records `approve` (or a rejection) of approval `id` of `tenant` by
/// `approver` (an operator, a tenant administrator or a holder of the
/// approver scope; never the subject who asked), from `address`, with the
/// approver's `comment` (empty: none) in the audit record.
///
/// # Errors
/// [`DecideError`]: not found, the asker's own request, not pending.
pub(crate) async fn decide(
    platform: &Platform,
    tenant: &str,
    id: &str,
    approve: bool,
    approver: &Approver,
    address: &str,
    comment: &str,
) -> Result<ApprovalRow, DecideError> {
    let store = platform.store();
    let row = store.approval(tenant, id).await?.ok_or(DecideError::NotFound)?;
    if approver.asked(&row) {
        return Err(DecideError::OwnRequest);
    }
    let now = platform.clock().now_ms();
    let state = if approve { "approved" } else { "rejected" };
    let decided = store
        .approval_decide(
            tenant,
            id,
            &ApprovalDecision { state, by: &approver.decided_by(), from: address, now_ms: now },
        )
        .await?;
    if !decided {
        let row = store.approval(tenant, id).await?.ok_or(DecideError::NotFound)?;
        return Err(DecideError::NotPending(state_at(&row, now).to_owned()));
    }
    audit(
        platform,
        &approver.actor(),
        if approve { "approval.approve" } else { "approval.reject" },
        &format!("{tenant}/{id}"),
        json!({
            "tenant": tenant,
            "binding": row.binding,
            "asked_by": row.subject,
            "asked_by_issuer": row.issuer,
            "from": address,
            "comment": comment,
        }),
    )
    .await;
    platform.engine().metrics().policy_decision(state);
    Ok(store.approval(tenant, id).await?.unwrap_or(row))
}

/// The longest comment an approver may give with a decision, in
/// characters (the console's inbox, the admin API, the CLI).
pub(crate) const COMMENT_MAX_CHARS: usize = 500;

/// Who decides an approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Approver {
    /// The approver's tenant (`None`: an operator, for every tenant).
    pub tenant: Option<String>,
    /// Who.
    pub who: Identity,
}

impl Approver {
    /// How the audit log names the approver (`actor`; the record also
    /// names the credential's kind and issuer).
    pub(crate) fn actor(&self) -> Actor {
        let name = match &self.tenant {
            Some(tenant) => format!("{}@{tenant}", self.who.subject),
            None => self.who.subject.clone(),
        };
        Actor { name, who: self.who.clone() }
    }

    /// How an approval's `decided_by` names the approver: the actor, and
    /// the issuer when it has one, so two issuers' "alice" stay apart.
    pub(crate) fn decided_by(&self) -> String {
        let name = self.actor().name;
        if self.who.issuer.is_empty() || self.who.issuer == crate::tenancy::DEV_ISSUER {
            name
        } else {
            format!("{name} ({})", self.who.issuer)
        }
    }

    /// Whether the approver is the principal who asked for `row`: the same
    /// subject of the same issuer, of the same tenant or as an operator (an
    /// operator's token and an agent's from one identity provider name one
    /// person by one subject). A subject of another issuer is someone else
    /// (OpenID Connect Core §2); the operator token names nobody who could
    /// have asked, whatever a token's subject is called.
    pub(crate) fn asked(&self, row: &ApprovalRow) -> bool {
        self.who.is(&row.issuer, &row.subject) && self.tenant.as_ref().is_none_or(|tenant| *tenant == row.tenant)
    }

    /// Whether the approver may decide for `tenant`.
    pub(crate) fn may(&self, tenant: &str) -> bool {
        self.tenant.as_deref().is_none_or(|own| own == tenant)
    }
}

/// Who acted, as a policy event's audit record names it: a name for
/// people (`subject@tenant`) and the credential behind it.
#[derive(Clone, Debug)]
pub(crate) struct Actor {
    /// The record's `actor`.
    pub name: String,
    /// The credential: its kind, issuer and subject.
    pub who: Identity,
}

impl Asked<'_> {
    /// The asker, as the audit log names it.
    pub(crate) fn actor(&self) -> Actor {
        Actor { name: format!("{}@{}", self.subject, self.tenant), who: Identity::of_token(self.issuer, self.subject) }
    }
}

/// Appends an audit record of a policy event and logs it as one
/// `pilotage::audit` event (a JSON line with the JSON log format, for a
/// SIEM); a store failure is logged, never fails the caller's request.
pub(crate) async fn audit(platform: &Platform, actor: &Actor, action: &str, target: &str, detail: Value) {
    let row = AuditRow {
        at: platform.clock().now_ms(),
        actor: actor.name.clone(),
        credential: actor.who.credential.as_str().to_owned(),
        issuer: actor.who.issuer.clone(),
        action: action.to_owned(),
        target: target.to_owned(),
        detail: detail.to_string(),
    };
    tracing::info!(target: "pilotage::audit", actor = %row.actor, credential = %row.credential, issuer = %row.issuer,
        action, target, detail = %row.detail, "policy");
    if let Err(error) = platform.store().audit(&row).await {
        tracing::error!(%error, "cannot write the audit log");
    }
}
