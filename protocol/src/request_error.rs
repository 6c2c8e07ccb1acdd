//! The request-error shape and its closed kinds (Part III §7.2).

use serde::{Deserialize, Deserializer, Serialize};

/// The closed set of request-error kinds (Part III §7.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestErrorKind {
    /// Unknown (or invisible, expired, unstored) guide, topic, entry,
    /// Language, promoted reference or Run.
    NotFound,
    /// Invalid runnable selection, unsupported `test_run` or `mode`,
    /// unknown `trace_level`, member inapplicable to the verb or to the
    /// declared capabilities.
    InvalidRequest,
    /// `changed_since` cannot be computed from the supplied token.
    UnknownBaseline,
    /// An idempotency key reused with another runnable or input.
    IdempotencyConflict,
    /// A validation resource bound was exceeded.
    BoundsExceeded,
    /// `store: true` on a Language declaring retention `none`.
    Unsupported,
    /// Validator, Engine or Server malfunction.
    Internal,
}

impl RequestErrorKind {
    /// Every kind, in the order of Part III §7.2.
    pub const ALL: [RequestErrorKind; 7] = [
        RequestErrorKind::NotFound,
        RequestErrorKind::InvalidRequest,
        RequestErrorKind::UnknownBaseline,
        RequestErrorKind::IdempotencyConflict,
        RequestErrorKind::BoundsExceeded,
        RequestErrorKind::Unsupported,
        RequestErrorKind::Internal,
    ];

    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestErrorKind::NotFound => "not_found",
            RequestErrorKind::InvalidRequest => "invalid_request",
            RequestErrorKind::UnknownBaseline => "unknown_baseline",
            RequestErrorKind::IdempotencyConflict => "idempotency_conflict",
            RequestErrorKind::BoundsExceeded => "bounds_exceeded",
            RequestErrorKind::Unsupported => "unsupported",
            RequestErrorKind::Internal => "internal",
        }
    }

    /// Reads a wire value; an unrecognized kind is `internal`, as a Client
    /// must treat it (Part III §7.2).
    pub fn from_wire(text: &str) -> RequestErrorKind {
        RequestErrorKind::ALL.into_iter().find(|kind| kind.as_str() == text).unwrap_or(RequestErrorKind::Internal)
    }
}

impl<'de> Deserialize<'de> for RequestErrorKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(RequestErrorKind::from_wire(&text))
    }
}

/// The `error` member of a request error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestErrorBody {
    /// Closed kind; Clients branch on it.
    pub kind: RequestErrorKind,
    /// Server-authored prose; never branched on.
    pub message: String,
}

/// A request error's `structuredContent` (Part III §7.2), with the
/// operation-mandated sibling `catalog_version` where Part II requires it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestError {
    /// Kind and message.
    pub error: RequestErrorBody,
    /// Sibling required on a failed catalog `get` (Part II §6.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_version: Option<String>,
    /// The platform's sibling on a retryable refusal (the server's
    /// capacity or a tenant's quota was in use; nothing ran): when a retry
    /// is likely to succeed, in milliseconds. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl RequestError {
    /// A request error of `kind` with `message`.
    pub fn new(kind: RequestErrorKind, message: impl Into<String>) -> RequestError {
        RequestError {
            error: RequestErrorBody { kind, message: message.into() },
            catalog_version: None,
            retry_after_ms: None,
        }
    }

    /// The same error with the `retry_after_ms` sibling: a retryable
    /// refusal.
    pub fn with_retry_after(mut self, retry_after_ms: u64) -> RequestError {
        self.retry_after_ms = Some(retry_after_ms);
        self
    }

    /// The same error with the `catalog_version` sibling.
    pub fn with_catalog_version(mut self, catalog_version: impl Into<String>) -> RequestError {
        self.catalog_version = Some(catalog_version.into());
        self
    }

    /// The kind.
    pub fn kind(&self) -> RequestErrorKind {
        self.error.kind
    }
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error.kind.as_str(), self.error.message)
    }
}

impl std::error::Error for RequestError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_unknown_reads_as_internal() {
        for kind in RequestErrorKind::ALL {
            let text = serde_json::to_string(&kind).unwrap();
            assert_eq!(text, format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<RequestErrorKind>(&text).unwrap(), kind);
        }
        assert_eq!(serde_json::from_str::<RequestErrorKind>("\"rate_limited\"").unwrap(), RequestErrorKind::Internal);
    }

    #[test]
    fn sibling_appears_beside_error() {
        let value = serde_json::to_value(
            RequestError::new(RequestErrorKind::NotFound, "unknown entry").with_catalog_version("cv_1"),
        )
        .unwrap();
        assert_eq!(
            value,
            serde_json::json!({"error": {"kind": "not_found", "message": "unknown entry"}, "catalog_version": "cv_1"})
        );
    }
}
