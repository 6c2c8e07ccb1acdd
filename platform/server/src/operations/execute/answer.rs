//! The last stage of an execute: its answer (Part II §6.5), typed until the
//! MCP binding turns it into `structuredContent`. A Run refused before it
//! started is a [`Refusal`] until then; every answer counts as a Run of
//! its Language.

use pilotage_protocol::diagnostic::Diagnostic;
use pilotage_protocol::outcome::{Outcome, RESOURCE_EXHAUSTED};
use pilotage_protocol::requests::ExecuteResponse;
use pilotage_telemetry::spans;
use serde::Serialize;

use crate::operations::Context;
use crate::policy::approvals::ApprovalMember;
use pilotage_engine::admission::Refused;

/// What an execute answers: the protocol's response and, for a Run the
/// tenant's policy held or rejected, the platform's `approval` member
/// beside it (its page, for a person to decide on).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ExecuteAnswer {
    /// The response of Part II §6.5.
    #[serde(flatten)]
    pub response: ExecuteResponse,
    /// The approval a held or rejected Run waits on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalMember>,
}

impl From<ExecuteResponse> for ExecuteAnswer {
    fn from(response: ExecuteResponse) -> Self {
        ExecuteAnswer { response, approval: None }
    }
}

impl ExecuteAnswer {
    /// The answer's `structuredContent`.
    pub(crate) fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

/// Why a Run did not start: a refused Run (Part II §6.5.2: no side
/// effects, never stored, holding no idempotency key).
#[derive(Debug)]
pub(super) struct Refusal {
    /// The outcome's status.
    pub status: &'static str,
    /// The outcome's error.
    pub error: String,
    /// The findings, for `validation_error`.
    pub diagnostics: Option<Vec<Diagnostic>>,
    /// When a retry may find room (`resource_exhausted`).
    pub retry_after_ms: Option<u64>,
    /// The approval a held or rejected Run waits on.
    pub approval: Option<ApprovalMember>,
}

impl Refusal {
    /// A refusal with `status` and `error`.
    pub(super) fn new(status: &'static str, error: impl Into<String>) -> Refusal {
        Refusal { status, error: error.into(), diagnostics: None, retry_after_ms: None, approval: None }
    }

    /// A `validation_error` with its findings.
    pub(super) fn invalid(error: &str, diagnostics: Vec<Diagnostic>) -> Refusal {
        Refusal { diagnostics: Some(diagnostics), ..Refusal::new(pilotage_protocol::outcome::VALIDATION_ERROR, error) }
    }

    /// A Run the node's execution pool could not admit (issue "Runs that
    /// wait cost nothing"): `resource_exhausted`, nothing ran, with
    /// `retry_after_ms` beside the outcome.
    pub(super) fn capacity(refused: &Refused) -> Refusal {
        Refusal {
            retry_after_ms: Some(refused.retry_after_ms),
            ..Refusal::new(RESOURCE_EXHAUSTED, refused.to_string())
        }
    }

    /// The answer of Run `run_id` of `language` refused so, counted.
    pub(super) fn answer(self, context: &Context, language: &str, run_id: String) -> ExecuteAnswer {
        observe_outcome(context, language, &run_id, self.status);
        ExecuteAnswer {
            response: ExecuteResponse {
                run_id,
                outcome: Outcome::failure(self.status, self.error),
                output: None,
                diagnostics: self.diagnostics,
                trace: None,
                retry_after_ms: self.retry_after_ms,
                assertions: None,
            },
            approval: self.approval,
        }
    }
}

/// A new run identifier: `run_` and 24 random hex digits.
pub(crate) fn new_run_id() -> String {
    format!("run_{}", hex::encode(rand::random::<[u8; 12]>()))
}

/// Counts a Run of `language` that ended `status` and records its id and
/// status on the request's span (the current one).
pub(crate) fn observe_outcome(context: &Context, language: &str, run_id: &str, status: &str) {
    context.platform.engine().metrics().run(language, status);
    spans::record_run(&tracing::Span::current(), run_id, status);
}
