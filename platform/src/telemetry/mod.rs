//! Telemetry: what an operator watches a running server with.
//!
//! - [`metrics`]: the Prometheus metrics (`pilotage_*`), one registry per
//!   engine, served at `/metrics` by `http::metrics` on a listener of its
//!   own (`metrics_listen`) or on the main one behind a bearer token
//!   (`metrics_token`);
//! - [`spans`]: the spans of an MCP request, a validation, a Run, an
//!   invocation and a SQL statement, after the OpenTelemetry semantic
//!   conventions for MCP, with the parent taken from
//!   `params._meta.traceparent`;
//! - [`otlp`]: their export over OTLP/HTTP (`otlp_endpoint`, or the
//!   standard `OTEL_EXPORTER_OTLP_*` variables);
//! - [`logs`]: the log lines, text or JSON, carrying the trace id.
//!
//! ```
//! use pilotage_platform::telemetry::metrics::{Metrics, ValidationResult};
//! let metrics = Metrics::new().unwrap();
//! metrics.validation("workflow/v1", ValidationResult::Valid);
//! assert!(metrics.encode().contains("pilotage_validations_total{language=\"workflow/v1\",result=\"valid\"} 1"));
//! ```

pub mod logs;
pub mod metrics;
pub mod otlp;
pub mod spans;
