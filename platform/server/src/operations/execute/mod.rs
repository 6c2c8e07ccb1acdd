//! `execute` (Part II §6.5, Part III §4.4) as stages in the exact
//! processing order of Part II §6.5.2, each in its own file and handing a
//! typed value to the next; the first failing check decides the response:
//!
//! 1. `request`: well-formedness, into one [`request::CheckedRequest`]
//!    (runnable selection, `program_ref` resolution, `trace_level`,
//!    `test_run`, `mode`, `store` against retention, an idempotency
//!    conflict; a key that holds an answer replays it);
//! 2. to 4. `checks`: catalog drift, revalidation (inline) or the
//!    promotion baseline (`program_ref`), input and context binding, the
//!    request's assertions, into [`checks::Checked`];
//! 5. `admission`: the idempotency claim (a retry finding the key claimed
//!    gets the key's answer and meets neither the policy nor the quotas),
//!    the policy on risk, the quotas, the node's execution pool; what it
//!    takes, a [`admission::Refund`] gives back if the Run does not start;
//!    then `run`: the Run under bounds on a task of its own, recorded
//!    under the key and kept by the one rule of `retention`; then
//!    `answer`: the typed [`ExecuteAnswer`] the MCP binding serializes.
//!
//! A component may still refuse before invoking anything, when the
//! program cannot run in the mode asked (a check `validate` cannot make,
//! not knowing the mode): the answer is then a refused Run,
//! `validation_error` with the component's diagnostics (Part IV §9).
//!
//! Invariant: refused Runs (`validation_error`, `catalog_drift`,
//! `promotion_drift`, the policy's and capacity's refusals) have no side
//! effects, are never stored, and never hold an idempotency key.

mod admission;
mod answer;
mod checks;
mod key;
mod request;
mod retention;
mod run;
mod runnable;
mod serve;

pub(crate) use answer::{ExecuteAnswer, new_run_id, observe_outcome};
pub(crate) use key::internal;
pub(crate) use retention::{Record, store as store_record};
pub(crate) use run::{Held, RunMode, RunRequest, run_detached};
pub(crate) use serve::{execute, execute_with};
