//! Outcomes and the reserved statuses (Part II §5.7).

use serde::{Deserialize, Serialize};

/// Reserved status: the program completed successfully.
pub const SUCCESS: &str = "success";
/// Reserved status: refused, the program, input or context is invalid.
pub const VALIDATION_ERROR: &str = "validation_error";
/// Reserved status: refused, `expected_catalog_version` is stale.
pub const CATALOG_DRIFT: &str = "catalog_drift";
/// Reserved status: refused, a promoted program's baseline changed.
pub const PROMOTION_DRIFT: &str = "promotion_drift";
/// Reserved status: started and did not complete; effects possible.
pub const PARTIAL: &str = "partial";
/// Reserved status: failed, nothing more specific applies.
pub const ERROR: &str = "error";

/// Platform-defined status: the Run reached its wall-time bound. Listed in
/// every Language's closed-sets guide; `ok: false`; effects possible.
pub const TIMEOUT: &str = "timeout";
/// Platform-defined status: the Run reached a fuel, memory, stack,
/// invocation or trace-size bound. `ok: false`; effects possible.
pub const RESOURCE_EXHAUSTED: &str = "resource_exhausted";
/// Platform-defined status: the Language component broke the platform's
/// contract (trapped, called outside its plan, hid or invented a call in
/// its trace, broke plan–trace correspondence). `ok: false`; effects
/// possible.
pub const ENGINE_FAULT: &str = "engine_fault";

/// Platform-defined status: the tenant's policy holds the Run until a human
/// approves exactly this request. `ok: false`; no effects.
pub const APPROVAL_REQUIRED: &str = "approval_required";
/// Platform-defined status: a human rejected exactly this request. `ok:
/// false`; no effects.
pub const APPROVAL_REJECTED: &str = "approval_rejected";
/// Platform-defined status: the tenant's policy denies a plan of this risk.
/// `ok: false`; no effects.
pub const POLICY_DENIED: &str = "policy_denied";
/// Platform-defined status: a budget of Runs of this risk is spent. `ok:
/// false`; no effects.
pub const BUDGET_EXCEEDED: &str = "budget_exceeded";

/// The statuses of a tenant's policy on risk, which the platform adds to
/// every Language's run statuses and closed-sets guide (Part II §5.7):
/// (status, ok, side effects possible, meaning).
pub const POLICY_STATUSES: [(&str, bool, bool, &str); 4] = [
    (
        APPROVAL_REQUIRED,
        false,
        false,
        "Held by the tenant's policy: a human must approve this exact request first. Nothing ran. The response's `approval` names the request (`id`, `state`, `url`, `expires_at`): show the URL to a person who may approve, then send the same request again.",
    ),
    (
        APPROVAL_REJECTED,
        false,
        false,
        "A human rejected this exact request. Nothing ran. Change the program (drop the step that needed approval), or ask again once the rejection expires (`approval.expires_at`).",
    ),
    (
        POLICY_DENIED,
        false,
        false,
        "The tenant's policy does not allow a plan of this risk here. Nothing ran, and no approval can change that.",
    ),
    (
        BUDGET_EXCEEDED,
        false,
        false,
        "A budget of Runs of this risk is spent for now. Nothing ran. The error says in how many seconds the window resets.",
    ),
];

/// The reserved run statuses (Part II §5.7).
pub const RESERVED_STATUSES: [&str; 6] = [SUCCESS, VALIDATION_ERROR, CATALOG_DRIFT, PROMOTION_DRIFT, PARTIAL, ERROR];

/// Statuses the platform itself may put on a started Run, whatever the
/// Language (the host's bounds and contract checks).
pub const PLATFORM_STATUSES: [&str; 3] = [TIMEOUT, RESOURCE_EXHAUSTED, ENGINE_FAULT];

/// The closed classification of a Run or step (Part II §5.7). `error` is
/// `null` iff `ok` is true; it always serializes, as `null` when absent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Whether it completed successfully.
    pub ok: bool,
    /// Member of the Language's status set.
    pub status: String,
    /// Human-readable failure summary.
    pub error: Option<String>,
}

impl Outcome {
    /// `{ok: true, status: "success", error: null}`.
    pub fn success() -> Outcome {
        Outcome { ok: true, status: SUCCESS.into(), error: None }
    }

    /// A failed outcome with a status and a message.
    pub fn failure(status: &str, error: impl Into<String>) -> Outcome {
        Outcome { ok: false, status: status.into(), error: Some(error.into()) }
    }

    /// Whether the `error`/`ok` pairing holds (Part II §5.7).
    pub fn is_consistent(&self) -> bool {
        self.ok == self.error.is_none()
    }

    /// The status a Client acts on: an unrecognized failed status is treated
    /// as `partial` (Part II §1.3). `known` is the set the Client knows.
    pub fn effective_status<'a>(&'a self, known: &[&str]) -> &'a str {
        if !self.ok && !known.contains(&self.status.as_str()) { PARTIAL } else { &self.status }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_serializes_error_as_null() {
        let text = serde_json::to_string(&Outcome::success()).unwrap();
        assert_eq!(text, r#"{"ok":true,"status":"success","error":null}"#);
    }

    #[test]
    fn consistency_of_ok_and_error() {
        assert!(Outcome::success().is_consistent());
        assert!(Outcome::failure(PARTIAL, "x").is_consistent());
        assert!(!Outcome { ok: true, status: SUCCESS.into(), error: Some("x".into()) }.is_consistent());
        assert!(!Outcome { ok: false, status: ERROR.into(), error: None }.is_consistent());
    }

    #[test]
    fn unknown_failed_status_reads_as_partial() {
        let odd = Outcome::failure("melted", "x");
        assert_eq!(odd.effective_status(&RESERVED_STATUSES), PARTIAL);
        assert_eq!(Outcome::failure(ERROR, "x").effective_status(&RESERVED_STATUSES), ERROR);
    }
}
