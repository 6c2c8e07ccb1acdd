//! Requests and responses of validate, execute and trace fetch
//! (Part II §6.4–§6.6, Part III §4.4).
//!
//! Request types here carry raw strings where an unrecognized value must
//! reach the Pilotage handler and become a request error rather than a
//! carrier error (Part III §4.6): `trace_level` and `mode` are strings.

use serde::{Deserialize, Serialize};

use super::diagnostic::Diagnostic;
use super::outcome::Outcome;
use super::plan::Plan;
use super::trace::Trace;

/// A validate response (Part II §6.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidateResponse {
    /// Exactly the validity rule over `diagnostics`.
    pub valid: bool,
    /// Always present; empty means no findings.
    pub diagnostics: Vec<Diagnostic>,
    /// Present for catalog-bearing Languages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_version: Option<String>,
    /// Present when `plan` is declared and `valid` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// Referenced entries, when there is a catalog but no plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub references: Option<Vec<String>>,
}

/// An execute request's reserved members (Part II §6.5, Part III §4.4).
/// The program itself travels under the Language's declared argument name
/// and is carried here as `program`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecuteRequest {
    /// Inline program.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::present")]
    pub program: Option<serde_json::Value>,
    /// Promoted program reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_ref: Option<String>,
    /// Program input.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::present")]
    pub input: Option<serde_json::Value>,
    /// Validation context.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::present")]
    pub context: Option<serde_json::Value>,
    /// `none`, `summary` or `full`; anything else is `invalid_request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_level: Option<String>,
    /// Drift token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_catalog_version: Option<String>,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Test-run selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_run: Option<bool>,
    /// Retention override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// `immediate` or `deploy`, for `execution: both` Languages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The platform's `x-assertions` extension ([`crate::assertions`]),
    /// read by the server against the plan (docs/assertions.md).
    #[serde(
        rename = "x-assertions",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::present"
    )]
    pub assertions: Option<serde_json::Value>,
}

impl ExecuteRequest {
    /// Reads an execute tool's arguments (Part III §4.4), whose program
    /// travels under `program_argument`, the Language's declared name for
    /// it: that member becomes [`Self::program`], and a member literally
    /// named `program` of a Language that names it otherwise is ignored
    /// like any other unknown member. The program is copied once; nothing
    /// else of it is read here.
    ///
    /// # Errors
    /// serde's error when a reserved member has the wrong JSON type (a
    /// structural fault, Part III §7.1).
    pub fn from_arguments(arguments: &serde_json::Value, program_argument: &str) -> Result<Self, serde_json::Error> {
        let mut request = Self::deserialize(arguments)?;
        if program_argument != "program" {
            request.program = arguments.get(program_argument).cloned();
        }
        Ok(request)
    }
}

/// An execute response (Part II §6.5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExecuteResponse {
    /// Present for every Run, refused ones included.
    pub run_id: String,
    /// The Run's outcome.
    pub outcome: Outcome,
    /// The result, only when `outcome.ok`.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::present")]
    pub output: Option<serde_json::Value>,
    /// Present when the status is `validation_error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<Diagnostic>>,
    /// Present for a started Run at effective level summary or full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Trace>,
    /// The platform's member on a Run refused before it started for want
    /// of the server's capacity (`resource_exhausted`, nothing ran): when
    /// a retry is likely to find room, in milliseconds. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The platform's `x-assertions` report, when the request carried
    /// assertions and the Run started ([`crate::assertions`]).
    #[serde(rename = "x-assertions", default, skip_serializing_if = "Option::is_none")]
    pub assertions: Option<crate::assertions::Report>,
}

/// A trace-fetch request (Part II §6.6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceFetchRequest {
    /// The Run.
    pub run_id: String,
    /// `summary` or `full`; `none` and anything else is `invalid_request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_level: Option<String>,
    /// Narration question, where `narrate` is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
}

/// A trace-fetch response (Part II §6.6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceFetchResponse {
    /// The Run.
    pub run_id: String,
    /// Its outcome.
    pub outcome: Outcome,
    /// Its output, where retained.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::present")]
    pub output: Option<serde_json::Value>,
    /// The stored trace at the returned level.
    pub trace: Trace,
    /// Server prose, where `narrate` is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narration: Option<String>,
    /// The Run's `x-assertions` report, kept with it.
    #[serde(rename = "x-assertions", default, skip_serializing_if = "Option::is_none")]
    pub assertions: Option<crate::assertions::Report>,
}
