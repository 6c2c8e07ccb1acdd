//! A tenant's policy on risk: the Host gate of Part II §7.3, enforced by
//! the platform itself, bound to the plan it checked.
//!
//! An operator sets, per tenant, [`Rule`]s that map a plan's maximum risk
//! (computed from `risk_hints`, never from labels, §5.3) to a
//! [`Ruling`]: `allow`, `approve` (a human approves this exact request
//! first, [`approvals`]) or `deny`; and [`Budget`]s (Runs per window by
//! risk, per principal or for the whole tenant, [`budgets`]). The first
//! rule that matches decides; none matching allows, so the default policy
//! (`{}`) is the behaviour without one.
//!
//! A refused Run is a Run outcome (Part II §5.7): ok false, no side
//! effects, with one of the engine-defined statuses [`APPROVAL_REQUIRED`],
//! [`APPROVAL_REJECTED`], [`POLICY_DENIED`] and [`BUDGET_EXCEEDED`], which
//! the platform lists in every Language's closed-sets guide
//! ([`STATUSES`]).
//!
//! Invariant: a Run the policy holds invokes nothing; an approval is used
//! at most once, by the request (principal, Language, program, input,
//! context, mode, test run, catalog version) it was asked for.

pub(crate) mod approvals;
pub(crate) mod budgets;
pub(crate) mod gate;
pub(crate) mod settings_file;

// The model lives with the tenant that holds it (`crate::tenancy::policy`);
// this module enforces it.
pub(crate) use crate::tenancy::policy::KEEP_MS;
pub use crate::tenancy::policy::{
    APPROVAL_REJECTED, APPROVAL_REQUIRED, BUDGET_EXCEEDED, Budget, BudgetHolder, POLICY_DENIED, Policy, PolicyError,
    Request, RiskClass, Rule, Ruling, RunKind, STATUSES,
};
