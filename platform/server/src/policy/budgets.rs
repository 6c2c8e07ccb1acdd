//! Budgets: at most N Runs of a risk class per fixed window, per principal
//! or per tenant, counted in the store so every replica shares them.
//!
//! A Run takes one unit of every budget it counts against before anything
//! runs; when one is spent, the units already taken are given back and the
//! Run is refused (`budget_exceeded`) with the time until that window
//! resets.

use pilotage_store::StoreError;

use super::approvals::Asked;
use super::{BudgetHolder, Policy, Request};
use crate::tenancy::Platform;

/// A spent budget: which, and when its window resets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Spent {
    /// The budget's index in the policy.
    pub index: usize,
    /// Its limit per window.
    pub runs: u32,
    /// The risk class it counts.
    pub risk: &'static str,
    /// Its window, in seconds.
    pub window_s: u64,
    /// Seconds until the window resets (at least 1).
    pub retry_after_s: u64,
}

impl std::fmt::Display for Spent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "budget {} of this tenant's policy is spent: at most {} Runs of risk {} or above per {} s; retry in {} s",
            self.index, self.runs, self.risk, self.window_s, self.retry_after_s
        )
    }
}

/// Units taken from budgets by one Run, which [`Taken::give_back`] returns
/// when the Run is refused after all.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    tenant: String,
    units: std::sync::Mutex<Vec<(String, String, i64)>>,
}

impl Taken {
    /// Gives every unit back (a store failure is logged: the window then
    /// counts one Run too many, never one too few).
    pub(crate) async fn give_back(&self, platform: &Platform) {
        let units = std::mem::take(&mut *self.units.lock().unwrap_or_else(|p| p.into_inner()));
        for (holder, name, window_start) in units {
            if let Err(error) = platform.store().budget_give_back(&self.tenant, &holder, &name, window_start).await {
                tracing::error!(%error, "cannot give back a budget unit");
            }
        }
    }
}

/// Takes one unit of every budget `request` counts against, for the
/// principal who `asked`: `Ok(Ok(taken))`, or `Ok(Err(spent))` when one is spent
/// (nothing is taken then).
///
/// # Errors
/// [`StoreError`] when the store fails (units taken are given back).
pub(crate) async fn take(
    platform: &Platform,
    policy: &Policy,
    asked: &Asked<'_>,
    request: &Request<'_>,
) -> Result<Result<Taken, Spent>, StoreError> {
    let tenant = asked.tenant;
    let store = platform.store();
    let now = platform.clock().now_ms();
    let taken = Taken { tenant: tenant.to_owned(), units: Default::default() };
    let mut outcome = Ok(None);
    for (index, budget) in policy.budgets_of(request) {
        // `Policy::check` keeps windows at 1 s or more; never divide by 0.
        let window_ms = (budget.window_s.max(1) * 1000) as i64;
        let window_start = now - now.rem_euclid(window_ms);
        let holder = match budget.per {
            // Issuer and subject, unambiguous for any text in either: two
            // issuers' "alice" spend apart.
            BudgetHolder::Principal => serde_json::json!([asked.issuer, asked.subject]).to_string(),
            BudgetHolder::Tenant => "*".to_owned(),
        };
        // The budget's identity includes what it counts, so a changed
        // policy starts fresh windows rather than reading another's.
        let name = format!("{index}:{}:{}:{}", budget.risk.as_str(), budget.runs, budget.window_s);
        match store.budget_take(tenant, &holder, &name, window_start, i64::from(budget.runs)).await {
            Ok(true) => taken.units.lock().unwrap_or_else(|p| p.into_inner()).push((holder, name, window_start)),
            Ok(false) => {
                let retry_after_ms = window_start + window_ms - now;
                outcome = Ok(Some(Spent {
                    index,
                    runs: budget.runs,
                    risk: budget.risk.as_str(),
                    window_s: budget.window_s,
                    retry_after_s: (retry_after_ms as u64).div_ceil(1000).max(1),
                }));
                break;
            }
            Err(error) => {
                outcome = Err(error);
                break;
            }
        }
    }
    match outcome {
        Ok(None) => Ok(Ok(taken)),
        Ok(Some(spent)) => {
            taken.give_back(platform).await;
            platform.engine().metrics().policy_decision("budget_exceeded");
            Ok(Err(spent))
        }
        Err(error) => {
            taken.give_back(platform).await;
            Err(error)
        }
    }
}
