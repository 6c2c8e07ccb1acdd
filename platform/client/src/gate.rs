//! The Host risk gate (Part II §7.3): policy code, never the Model's job.
//! It decides from `risk_hints` alone, fails closed when risk information
//! is missing, and presents plans, descriptions and risk labels as what
//! they are: unverified claims of the Server.

use std::io::{BufRead, Write};

use pilotage_protocol::plan::Plan;
use pilotage_protocol::risk::RiskHints;

/// Where the risk of a pending execution comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum RiskSource {
    /// The validation plan's `max_risk_hints` (inline program, `plan`
    /// declared).
    Plan(RiskHints),
    /// The promoted entry's `risk_hints` (`program_ref` Run).
    PromotedEntry(RiskHints),
    /// The aggregate of the Server-provided `references` (no plan).
    References(RiskHints),
    /// No usable risk information: treated as risky (fail closed).
    Missing(String),
}

impl RiskSource {
    /// The hints, when there are any.
    pub fn hints(&self) -> Option<RiskHints> {
        match self {
            RiskSource::Plan(h) | RiskSource::PromotedEntry(h) | RiskSource::References(h) => Some(*h),
            RiskSource::Missing(_) => None,
        }
    }

    /// Why approval is needed, or empty when it is not.
    pub fn reasons(&self) -> Vec<String> {
        match self {
            RiskSource::Missing(why) => vec![format!("no risk information: {why}")],
            _ => {
                let hints = self.hints().unwrap_or(RiskHints::DESTRUCTIVE);
                let mut reasons = Vec::new();
                if hints.destructive {
                    reasons.push("the plan may delete or irreversibly change state (destructive)".to_owned());
                }
                if hints.open_world {
                    reasons.push("the plan may reach systems outside the server (openWorld)".to_owned());
                }
                reasons
            }
        }
    }

    /// Whether the Host must obtain approval before transmitting execute:
    /// destructive or openWorld, or no information at all.
    pub fn needs_approval(&self) -> bool {
        !self.reasons().is_empty()
    }
}

/// What a person (or a policy) is asked to approve.
#[derive(Clone, Debug)]
pub struct ApprovalRequest {
    /// The Language.
    pub language: String,
    /// The program text, shown for text Languages (Part II §7.3).
    pub program_text: Option<String>,
    /// The plan, when there is one.
    pub plan: Option<Plan>,
    /// The risk and where it comes from.
    pub risk: RiskSource,
    /// Set when the promoted program runs under an authority model this
    /// Host does not know (Part II §1.3).
    pub unknown_authority: bool,
}

impl ApprovalRequest {
    /// Whether approval is required at all.
    pub fn required(&self) -> bool {
        self.risk.needs_approval() || self.unknown_authority
    }

    /// The prompt a person reads. It states that plans, descriptions and
    /// risk labels are unverified Server claims.
    pub fn prompt(&self) -> String {
        let mut text = format!("Approval needed to run a {} program.\n", self.language);
        for reason in self.risk.reasons() {
            text.push_str(&format!("  - {reason}\n"));
        }
        if self.unknown_authority {
            text.push_str("  - the promoted program runs under an authority model this client does not know\n");
        }
        if let Some(plan) = &self.plan {
            text.push_str("The server's plan:\n");
            for step in &plan.steps {
                let calls = step.calls.as_deref().map(|c| format!(" calls {c}")).unwrap_or_default();
                text.push_str(&format!(
                    "  {}{calls}: risk {} (readOnly={}, destructive={}, openWorld={})\n",
                    step.id,
                    step.risk,
                    step.risk_hints.read_only,
                    step.risk_hints.destructive,
                    step.risk_hints.open_world
                ));
            }
        }
        if let Some(program) = &self.program_text {
            text.push_str("The program:\n");
            for line in program.lines() {
                text.push_str(&format!("  | {line}\n"));
            }
        }
        text.push_str(
            "Note: the plan, the descriptions and the risk labels above are claims made by the server; this client \
             has not verified them.\n",
        );
        text
    }
}

/// Decides approvals outside the Model.
pub trait Approver: Send + Sync {
    /// Whether the Run may go ahead.
    fn approve(&self, request: &ApprovalRequest) -> bool;
}

/// Why an `--approve` value could not be read as a [`HostPolicy`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostPolicyError {
    /// Occurs when a word of the value is not one [`HostPolicy::parse`] knows.
    #[error("unknown approval '{word}': use none, all, destructive, open-world, unknown")]
    UnknownApproval {
        /// The word.
        word: String,
    },
}

/// A standing Host policy (the `--approve` flag).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostPolicy {
    /// Approve destructive plans.
    pub destructive: bool,
    /// Approve open-world plans.
    pub open_world: bool,
    /// Approve Runs without risk information.
    pub unknown: bool,
}

impl HostPolicy {
    /// Parses `--approve` values: `none`, `all`, or a comma list of
    /// `destructive`, `open-world`, `unknown`.
    ///
    /// # Errors
    /// [`HostPolicyError::UnknownApproval`] naming an unknown word.
    pub fn parse(text: &str) -> Result<HostPolicy, HostPolicyError> {
        let mut policy = HostPolicy::default();
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "none" => {}
                "all" => policy = HostPolicy { destructive: true, open_world: true, unknown: true },
                "destructive" => policy.destructive = true,
                "open-world" | "openWorld" => policy.open_world = true,
                "unknown" => policy.unknown = true,
                other => return Err(HostPolicyError::UnknownApproval { word: other.to_owned() }),
            }
        }
        Ok(policy)
    }
}

impl Approver for HostPolicy {
    fn approve(&self, request: &ApprovalRequest) -> bool {
        let hints = request.risk.hints();
        let destructive_ok = hints.is_none_or(|h| !h.destructive) || self.destructive;
        let open_ok = hints.is_none_or(|h| !h.open_world) || self.open_world;
        let unknown_ok = (hints.is_some() && !request.unknown_authority) || self.unknown;
        destructive_ok && open_ok && unknown_ok
    }
}

/// Refuses everything that needs approval (non-interactive default).
#[derive(Clone, Copy, Debug, Default)]
pub struct Refuse;

impl Approver for Refuse {
    fn approve(&self, _request: &ApprovalRequest) -> bool {
        false
    }
}

/// Asks a person on the terminal.
#[derive(Clone, Copy, Debug, Default)]
pub struct Interactive;

impl Approver for Interactive {
    fn approve(&self, request: &ApprovalRequest) -> bool {
        let mut out = std::io::stderr();
        let _ = write!(out, "{}Run it? [y/N] ", request.prompt());
        let _ = out.flush();
        let mut answer = String::new();
        if std::io::stdin().lock().read_line(&mut answer).is_err() {
            return false;
        }
        matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(risk: RiskSource) -> ApprovalRequest {
        ApprovalRequest {
            language: "workflow/v1".into(),
            program_text: None,
            plan: None,
            risk,
            unknown_authority: false,
        }
    }

    #[test]
    fn destructive_and_open_world_need_approval_safe_does_not() {
        assert!(request(RiskSource::Plan(RiskHints::DESTRUCTIVE)).required());
        let open = RiskHints { read_only: true, destructive: false, open_world: true };
        assert!(request(RiskSource::Plan(open)).required());
        assert!(!request(RiskSource::Plan(RiskHints::SAFE)).required());
        assert!(!request(RiskSource::Plan(RiskHints::WRITE)).required());
    }

    #[test]
    fn missing_risk_fails_closed() {
        let missing = request(RiskSource::Missing("no plan and no references".into()));
        assert!(missing.required());
        assert!(!Refuse.approve(&missing));
        assert!(!HostPolicy::parse("destructive,open-world").unwrap().approve(&missing));
        assert!(HostPolicy::parse("unknown").unwrap().approve(&missing));
    }

    #[test]
    fn policies_approve_only_what_they_name() {
        let destructive = request(RiskSource::Plan(RiskHints::DESTRUCTIVE));
        assert!(!HostPolicy::parse("none").unwrap().approve(&destructive));
        assert!(!HostPolicy::parse("open-world").unwrap().approve(&destructive));
        assert!(HostPolicy::parse("destructive").unwrap().approve(&destructive));
        assert!(HostPolicy::parse("all").unwrap().approve(&destructive));
        assert!(HostPolicy::parse("everything").is_err());
    }

    #[test]
    fn an_unknown_approval_word_is_named_with_the_words_there_are() {
        let error = HostPolicy::parse("destructive, everything").unwrap_err();
        assert_eq!(error.to_string(), "unknown approval 'everything': use none, all, destructive, open-world, unknown");
    }

    #[test]
    fn the_prompt_says_claims_are_unverified_and_shows_text_programs() {
        let mut asked = request(RiskSource::Plan(RiskHints::DESTRUCTIVE));
        asked.program_text = Some("DELETE FROM orders".into());
        let prompt = asked.prompt();
        assert!(prompt.contains("claims made by the server"));
        assert!(prompt.contains("DELETE FROM orders"));
        assert!(prompt.contains("destructive"));
    }

    #[test]
    fn unknown_promotion_authority_needs_approval() {
        let mut asked = request(RiskSource::PromotedEntry(RiskHints::SAFE));
        asked.unknown_authority = true;
        assert!(asked.required());
        assert!(!HostPolicy::default().approve(&asked));
    }
}
