//! A tenant's policy on risk, as the tenant holds it: [`Rule`]s mapping a
//! plan's maximum risk (from `risk_hints`, never labels, Part II §5.3) to a
//! [`Ruling`], [`Budget`]s of Runs per window, and the checks a stored or
//! submitted policy must pass. The model only: `crate::policy` enforces it
//! (the gate, approvals, budgets), above the tenancy it reads.

use std::collections::BTreeSet;

use pilotage_protocol::risk::RiskHints;
use serde::{Deserialize, Serialize};

pub use pilotage_protocol::outcome::{
    APPROVAL_REJECTED, APPROVAL_REQUIRED, BUDGET_EXCEEDED, POLICY_DENIED, POLICY_STATUSES as STATUSES,
};

/// How long approvals and budget windows are kept after they end (the
/// sweep), in ms: 32 days, above the longest budget window.
pub(crate) const KEEP_MS: i64 = 32 * 24 * 3_600_000;

/// The longest approval lifetime and budget window, in seconds (31 days).
const MAX_SECONDS: u64 = 31 * 24 * 3600;

/// A tenant's policy (stored on the tenant as JSON; `{}` allows all).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Rules in order; the first that matches decides.
    pub rules: Vec<Rule>,
    /// Budgets; every budget that matches a Run takes one unit of it.
    pub budgets: Vec<Budget>,
    /// How long an approval request counts, in seconds (default 900, at
    /// most 31 days).
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "whole::optional")]
    pub approval_ttl_s: Option<u64>,
    /// At most this many invocations per Run (below the platform's own
    /// bound, never above it); the invocation past it is refused and the
    /// Run ends `resource_exhausted`, as at the platform's bound.
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "whole::optional")]
    pub max_invocations_per_run: Option<u32>,
}

/// Whole numbers written either way: `900` or `900.0` (Helm's `toToml`
/// writes every number of a chart's values as a float).
mod whole {
    use serde::{Deserialize, Deserializer, de::Error};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Integer(u64),
        Float(f64),
    }

    /// A whole number that fits `T`.
    pub(super) fn number<'de, D: Deserializer<'de>, T: TryFrom<u64>>(deserializer: D) -> Result<T, D::Error> {
        let value = match Written::deserialize(deserializer)? {
            Written::Integer(value) => value,
            Written::Float(value) if value >= 0.0 && value.fract() == 0.0 && value <= u64::MAX as f64 => value as u64,
            Written::Float(value) => return Err(D::Error::custom(format!("{value} is not a whole number"))),
        };
        T::try_from(value).map_err(|_| D::Error::custom(format!("{value} is too large")))
    }

    /// An optional whole number that fits `T`.
    pub(super) fn optional<'de, D: Deserializer<'de>, T: TryFrom<u64>>(deserializer: D) -> Result<Option<T>, D::Error> {
        number(deserializer).map(Some)
    }
}

/// A plan's risk class, from its maximum `risk_hints` (Part II §5.3),
/// ordered: `read_only` < `write` < `destructive`.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum RiskClass {
    /// `readOnly` and not `destructive`.
    ReadOnly,
    /// Not `readOnly`, not `destructive`.
    Write,
    /// `destructive`.
    Destructive,
}

impl RiskClass {
    /// The class of `hints`.
    pub fn of(hints: &RiskHints) -> RiskClass {
        if hints.destructive {
            RiskClass::Destructive
        } else if hints.read_only {
            RiskClass::ReadOnly
        } else {
            RiskClass::Write
        }
    }

    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RiskClass::ReadOnly => "read_only",
            RiskClass::Write => "write",
            RiskClass::Destructive => "destructive",
        }
    }
}

/// Which Runs a rule or budget is about.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// An immediate Run.
    Immediate,
    /// A deploy (installing a program that fires later).
    Deploy,
    /// A test run (side-effect free; Part II §6.5.7).
    Test,
}

impl RunKind {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Immediate => "immediate",
            RunKind::Deploy => "deploy",
            RunKind::Test => "test",
        }
    }
}

/// What a rule decides.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Ruling {
    /// Run.
    Allow,
    /// Hold until a human approves this exact request.
    Approve,
    /// Refuse.
    Deny,
}

impl Ruling {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Ruling::Allow => "allow",
            Ruling::Approve => "approve",
            Ruling::Deny => "deny",
        }
    }
}

/// One rule: when a plan's maximum risk is at least `risk` (and the
/// narrowing members match), `decision`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The least risk class the rule applies to.
    pub risk: RiskClass,
    /// What it decides.
    pub decision: Ruling,
    /// Also when the plan may reach outside the server's domain
    /// (`openWorld`), whatever its class; default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open_world: bool,
    /// Only these Languages (empty: every Language).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<String>,
    /// Only for these kinds of Run (default: immediate and deploy; test
    /// runs stay allowed unless named).
    #[serde(default = "default_runs")]
    pub runs: BTreeSet<RunKind>,
    /// Only for callers holding every one of these scopes (empty: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Not for callers holding any of these scopes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub except_scopes: Vec<String>,
}

fn default_runs() -> BTreeSet<RunKind> {
    [RunKind::Immediate, RunKind::Deploy].into_iter().collect()
}

/// Runs per window: at most `runs` Runs whose plan is at least `risk`, in
/// each window of `window_s` seconds (fixed windows from the epoch).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The least risk class counted.
    pub risk: RiskClass,
    /// Runs allowed per window.
    #[serde(deserialize_with = "whole::number")]
    pub runs: u32,
    /// The window, in seconds (1 to 31 days' worth).
    #[serde(deserialize_with = "whole::number")]
    pub window_s: u64,
    /// Per principal (`principal`, the default) or for the whole tenant
    /// (`tenant`).
    #[serde(default)]
    pub per: BudgetHolder,
    /// Only these Languages (empty: every Language).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<String>,
    /// Only these kinds of Run (default: immediate and deploy).
    #[serde(default = "default_runs")]
    pub runs_of: BTreeSet<RunKind>,
}

/// Whose budget a [`Budget`] is.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BudgetHolder {
    /// Each principal has its own.
    #[default]
    Principal,
    /// The tenant's principals share one.
    Tenant,
}

/// What a policy is asked about: one execute that passed validation.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The Language.
    pub language: &'a str,
    /// The plan's maximum risk hints.
    pub hints: RiskHints,
    /// The kind of Run.
    pub kind: RunKind,
    /// The caller's scopes.
    pub scopes: &'a BTreeSet<String>,
}

/// Why a policy does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Occurs when a number is outside its range; names the member.
    #[error("{member}: {message}")]
    OutOfRange {
        /// The member, as a JSON path (`budgets[0].window_s`).
        member: String,
        /// What is wrong.
        message: String,
    },
    /// Occurs when a stored policy is not JSON of a policy's shape.
    #[error("{0}")]
    Unreadable(String),
}

impl Policy {
    /// Checks the numbers serde cannot.
    ///
    /// # Errors
    /// [`PolicyError::OutOfRange`] naming the first member out of range.
    pub fn check(&self) -> Result<(), PolicyError> {
        let out = |member: String, message: &str| PolicyError::OutOfRange { member, message: message.to_owned() };
        if self.max_invocations_per_run == Some(0) {
            return Err(out("max_invocations_per_run".into(), "at least 1 (omit it for the platform's bound)"));
        }
        if let Some(ttl) = self.approval_ttl_s
            && !(1..=MAX_SECONDS).contains(&ttl)
        {
            return Err(out("approval_ttl_s".into(), "between 1 and 2678400 seconds (31 days)"));
        }
        for (i, budget) in self.budgets.iter().enumerate() {
            if !(1..=MAX_SECONDS).contains(&budget.window_s) {
                return Err(out(format!("budgets[{i}].window_s"), "between 1 and 2678400 seconds (31 days)"));
            }
            if budget.runs_of.is_empty() {
                return Err(out(format!("budgets[{i}].runs_of"), "name at least one kind of Run"));
            }
        }
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.runs.is_empty() {
                return Err(out(format!("rules[{i}].runs"), "name at least one kind of Run"));
            }
        }
        Ok(())
    }

    /// A stored policy read back: parsed, then checked as one written
    /// through the admin API is, since a row written by another version or
    /// by hand may hold what the API refuses (a budget window of 0 s would
    /// divide by zero at every Run it counts).
    ///
    /// # Errors
    /// [`PolicyError::Unreadable`] when it does not parse;
    /// [`PolicyError::OutOfRange`] when [`Policy::check`] refuses it.
    pub fn read_stored(text: &str) -> Result<Policy, PolicyError> {
        let policy: Policy = serde_json::from_str(text).map_err(|error| PolicyError::Unreadable(error.to_string()))?;
        policy.check()?;
        Ok(policy)
    }

    /// The policy of a tenant whose stored policy does not read: every
    /// Run that changes state waits for approval (failing closed, since
    /// the unreadable policy may have been stricter).
    pub fn fail_safe() -> Policy {
        Policy {
            rules: vec![Rule {
                risk: RiskClass::Write,
                decision: Ruling::Approve,
                open_world: true,
                languages: Vec::new(),
                runs: default_runs(),
                scopes: Vec::new(),
                except_scopes: Vec::new(),
            }],
            ..Policy::default()
        }
    }

    /// Whether this is the policy that allows everything (a lower
    /// invocation bound is applied apart, to the Run).
    pub fn allows_all(&self) -> bool {
        self.rules.iter().all(|rule| rule.decision == Ruling::Allow) && self.budgets.is_empty()
    }

    /// How long an approval request counts, in ms.
    pub fn approval_ttl_ms(&self) -> i64 {
        (self.approval_ttl_s.unwrap_or(900) * 1000) as i64
    }

    /// The decision on `request` and the index of the rule that made it
    /// (`None`: no rule matched, allowed).
    pub fn decide(&self, request: &Request<'_>) -> (Ruling, Option<usize>) {
        let class = RiskClass::of(&request.hints);
        self.rules
            .iter()
            .position(|rule| {
                (class >= rule.risk || (rule.open_world && request.hints.open_world))
                    && rule.runs.contains(&request.kind)
                    && (rule.languages.is_empty() || rule.languages.iter().any(|l| l == request.language))
                    && rule.scopes.iter().all(|scope| request.scopes.contains(scope))
                    && !rule.except_scopes.iter().any(|scope| request.scopes.contains(scope))
            })
            .map_or((Ruling::Allow, None), |index| (self.rules[index].decision, Some(index)))
    }

    /// The budgets `request` counts against, with their indexes.
    pub fn budgets_of<'a>(&'a self, request: &'a Request<'_>) -> impl Iterator<Item = (usize, &'a Budget)> + 'a {
        let class = RiskClass::of(&request.hints);
        self.budgets.iter().enumerate().filter(move |(_, budget)| {
            class >= budget.risk
                && budget.runs_of.contains(&request.kind)
                && (budget.languages.is_empty() || budget.languages.iter().any(|l| l == request.language))
        })
    }

    /// A digest naming this version of the policy (recorded with each
    /// decision): the first 16 hex digits of the SHA-256 of its JSON.
    pub fn version(&self) -> String {
        use sha2::Digest;
        let text = serde_json::to_string(self).unwrap_or_default();
        let digest = sha2::Sha256::digest(text.as_bytes());
        digest.iter().take(8).map(|byte| format!("{byte:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(hints: RiskHints, kind: RunKind, scopes: &BTreeSet<String>) -> Request<'_> {
        Request { language: "automation/1", hints, kind, scopes }
    }

    fn policy(text: &str) -> Policy {
        let policy: Policy = serde_json::from_str(text).unwrap();
        policy.check().unwrap();
        policy
    }

    #[test]
    fn the_empty_policy_allows_everything() {
        let none = BTreeSet::new();
        let policy = Policy::default();
        assert!(policy.allows_all());
        for hints in [RiskHints::SAFE, RiskHints::WRITE, RiskHints::DESTRUCTIVE] {
            assert_eq!(policy.decide(&request(hints, RunKind::Immediate, &none)), (Ruling::Allow, None));
        }
    }

    #[test]
    fn the_first_matching_rule_decides_by_class_kind_and_scopes() {
        let none = BTreeSet::new();
        let trusted: BTreeSet<String> = ["ops:trusted".to_owned()].into();
        let policy = policy(
            r#"{"rules": [
                {"risk": "destructive", "decision": "deny", "scopes": ["ops:intern"]},
                {"risk": "destructive", "decision": "approve", "except_scopes": ["ops:trusted"]},
                {"risk": "write", "decision": "allow"}
            ]}"#,
        );
        assert!(!policy.allows_all());
        assert_eq!(
            policy.decide(&request(RiskHints::DESTRUCTIVE, RunKind::Immediate, &none)),
            (Ruling::Approve, Some(1))
        );
        assert_eq!(policy.decide(&request(RiskHints::DESTRUCTIVE, RunKind::Deploy, &none)), (Ruling::Approve, Some(1)));
        // Test runs are not named: allowed.
        assert_eq!(policy.decide(&request(RiskHints::DESTRUCTIVE, RunKind::Test, &none)), (Ruling::Allow, None));
        assert_eq!(
            policy.decide(&request(RiskHints::DESTRUCTIVE, RunKind::Immediate, &trusted)),
            (Ruling::Allow, Some(2))
        );
        let intern: BTreeSet<String> = ["ops:intern".to_owned()].into();
        assert_eq!(
            policy.decide(&request(RiskHints::DESTRUCTIVE, RunKind::Immediate, &intern)),
            (Ruling::Deny, Some(0))
        );
        assert_eq!(policy.decide(&request(RiskHints::SAFE, RunKind::Immediate, &none)), (Ruling::Allow, None));
    }

    #[test]
    fn open_world_plans_match_a_rule_that_asks_for_them() {
        let none = BTreeSet::new();
        let policy = policy(r#"{"rules": [{"risk": "destructive", "open_world": true, "decision": "approve"}]}"#);
        let reaching_out = RiskHints { read_only: true, destructive: false, open_world: true };
        assert_eq!(policy.decide(&request(reaching_out, RunKind::Immediate, &none)).0, Ruling::Approve);
        assert_eq!(policy.decide(&request(RiskHints::WRITE, RunKind::Immediate, &none)).0, Ruling::Allow);
    }

    #[test]
    fn numbers_out_of_range_and_unknown_members_are_refused() {
        for (text, member) in [
            (r#"{"budgets": [{"risk": "write", "runs": 2, "window_s": 0}]}"#, "budgets[0].window_s"),
            (r#"{"approval_ttl_s": 99999999}"#, "approval_ttl_s"),
            (r#"{"rules": [{"risk": "write", "decision": "deny", "runs": []}]}"#, "rules[0].runs"),
        ] {
            let policy: Policy = serde_json::from_str(text).unwrap();
            let error = policy.check().unwrap_err();
            assert!(error.to_string().starts_with(member), "{error}");
        }
        assert!(serde_json::from_str::<Policy>(r#"{"rules": [{"risk": "write", "decision": "maybe"}]}"#).is_err());
        assert!(serde_json::from_str::<Policy>(r#"{"rulez": []}"#).is_err());
    }

    #[test]
    fn whole_numbers_may_be_written_as_floats_but_fractions_are_refused() {
        let policy: Policy = serde_json::from_str(
            r#"{"approval_ttl_s": 900.0, "budgets": [{"risk": "write", "runs": 2.0, "window_s": 60}]}"#,
        )
        .unwrap();
        assert_eq!((policy.approval_ttl_s, policy.budgets[0].runs), (Some(900), 2));
        assert!(serde_json::from_str::<Policy>(r#"{"approval_ttl_s": 1.5}"#).is_err());
        assert!(serde_json::from_str::<Policy>(r#"{"max_invocations_per_run": 5000000000}"#).is_err());
    }

    #[test]
    fn budgets_count_runs_at_or_above_their_class() {
        let none = BTreeSet::new();
        let policy = policy(r#"{"budgets": [{"risk": "write", "runs": 2, "window_s": 3600}]}"#);
        let write = request(RiskHints::WRITE, RunKind::Immediate, &none);
        assert_eq!(policy.budgets_of(&write).count(), 1);
        let read = request(RiskHints::SAFE, RunKind::Immediate, &none);
        assert_eq!(policy.budgets_of(&read).count(), 0);
        let test = request(RiskHints::DESTRUCTIVE, RunKind::Test, &none);
        assert_eq!(policy.budgets_of(&test).count(), 0);
        assert_ne!(policy.version(), Policy::default().version());
    }
}
