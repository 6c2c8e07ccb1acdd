//! Pilotage Platform telemetry: what the engine, the store and the server
//! record for an operator to watch.
//!
//! - [`metrics`]: the Prometheus registry (`pilotage_*`), one per engine,
//!   with its families and the label handles resolved once per value; the
//!   server serves its text exposition at `/metrics`;
//! - [`spans`]: the spans of an MCP request, a validation, a Run, an
//!   invocation and a SQL statement, after the OpenTelemetry semantic
//!   conventions for MCP, with the parent taken from
//!   `params._meta.traceparent`. Their export over OTLP and the log lines
//!   are the server's (`pilotage_server::telemetry`).
//!
//! Invariant: telemetry records and never decides. No label holds a
//! tenant, subject, session or run id, and recording is a no-op until a
//! registry is enabled, so a server that exposes no metrics pays nothing
//! for them. This crate knows nothing of wasm, SQL, HTTP or MCP.
//!
//! ```
//! use pilotage_telemetry::metrics::{Metrics, ValidationResult};
//! let metrics = Metrics::new().unwrap();
//! metrics.set_enabled(true);
//! metrics.validation("workflow/v1", ValidationResult::Valid);
//! assert!(metrics.encode().contains("pilotage_validations_total{language=\"workflow/v1\",result=\"valid\"} 1"));
//! ```
#![deny(unsafe_code)]

pub mod metrics;
pub mod spans;
