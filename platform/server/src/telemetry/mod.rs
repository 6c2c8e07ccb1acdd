//! The server's telemetry pipeline: spans exported over OTLP/HTTP
//! ([`otlp`]: `otlp_endpoint`, or the standard `OTEL_EXPORTER_OTLP_*`
//! variables) and the log lines, text or JSON, carrying the trace id
//! ([`logs`]). What is recorded is `pilotage_telemetry`'s.

pub mod logs;
pub mod otlp;
