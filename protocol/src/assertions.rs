//! Assertions: the platform's extension of execute (docs/assertions.md),
//! ahead of a Pilotage field for them. An agent sends postconditions with
//! its program under [`MEMBER`]; the platform checks them against the
//! Run's trace and output and answers each with a [`Verdict`] in the same
//! member of the response. Every name is `x-` prefixed, so a future
//! Pilotage field cannot collide with it (receivers ignore unknown
//! members, Part II §1.2).

use serde::{Deserialize, Serialize};

/// The member that carries assertions in an execute request and their
/// report in its response and in the stored Run (trace fetch); also the
/// `execute` sub-feature that declares the extension.
pub const MEMBER: &str = "x-assertions";

/// The Run status when the program ended successfully but at least one
/// assertion failed. `ok: false`; the Run's effects happened as its trace
/// shows (Part II §1.3: an unrecognized status with `ok: false` is read as
/// `partial`, which says the same).
pub const ASSERTION_FAILED: &str = "assertion_failed";

/// [`ASSERTION_FAILED`] as a closed-set status: (status, ok, side effects,
/// meaning), as in [`crate::outcome::POLICY_STATUSES`].
pub const STATUS: (&str, bool, bool, &str) = (
    ASSERTION_FAILED,
    false,
    true,
    "The program ran to its end, but at least one of the request's `x-assertions` failed. Its effects happened as the trace shows; nothing was undone. The response's `x-assertions` member holds each verdict with the value observed, and the output the program produced (`output`).",
);

/// How many assertions one request may carry.
pub const MAX_ASSERTIONS: usize = 64;

/// The report of a Run's assertions: in the execute response, the stored
/// Run and its trace fetch, under [`MEMBER`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// How many passed.
    pub passed: usize,
    /// How many failed.
    pub failed: usize,
    /// One per assertion, in the request's order.
    pub verdicts: Vec<Verdict>,
    /// The program's output when a failed assertion made the outcome
    /// `assertion_failed` (Part II §6.5: `output` appears only when the
    /// outcome is ok, so it travels here instead).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::present")]
    pub output: Option<serde_json::Value>,
}

/// One assertion's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The assertion's `id`.
    pub id: String,
    /// `passed` or `failed`.
    pub verdict: String,
    /// The value the check read at the target (a count for `count`);
    /// absent when the target is absent (a step that did not run, a
    /// pointer that resolves to nothing).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::present")]
    pub observed: Option<serde_json::Value>,
    /// Why it failed: the assertion's `message` followed by what was
    /// expected; absent when it passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The section the platform adds to every closed-sets guide.
pub fn closed_sets_section() -> String {
    format!(
        "\n\n## Assertions (`{MEMBER}`, a platform extension)\n\nAn execute may carry `{MEMBER}`: postconditions checked against this Run's trace and output after it ends, whatever the Language. Malformed assertions, or ones naming a step the plan does not have, refuse the Run with `validation_error` (code `constraint`, path into the request's `{MEMBER}`) before anything runs. The response's `{MEMBER}` member reports `passed`, `failed` and one verdict per assertion (`id`, `verdict`, `observed`, `message`).\n\n- `{}` (ok: false, side effects: possible): {}\n",
        STATUS.0, STATUS.3
    )
}
