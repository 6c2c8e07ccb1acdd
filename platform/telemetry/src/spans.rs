//! The platform's spans and their attributes, after the OpenTelemetry
//! semantic conventions for MCP (`gen-ai/mcp.md`: a server span per
//! JSON-RPC request named `{mcp.method.name} {target}`, its parent taken
//! from `params._meta.traceparent` / `tracestate` with the W3C Trace
//! Context propagator) plus Pilotage's own `pilotage.*` attributes.
//!
//! Every span here is at `DEBUG` level under this crate's target: the
//! default log filter leaves them disabled (a disabled span costs one
//! atomic load), and the OpenTelemetry layer, when OTLP export is on,
//! enables exactly them (`telemetry::otlp::span_filter`). Attributes known
//! only once the request has run are recorded into fields declared
//! `Empty` up front (`tracing` spans cannot gain fields later).
//!
//! | span | name | attributes |
//! |---|---|---|
//! | MCP request (server) | `{method} {tool}` or `{method}` | `mcp.method.name`, `gen_ai.tool.name`, `gen_ai.operation.name` (`execute_tool`), `mcp.session.id`, `mcp.protocol.version`, `jsonrpc.request.id`, `network.transport`, `network.protocol.name`, `error.type`, `rpc.response.status_code`, `pilotage.tenant`, `pilotage.language`, `pilotage.run_id`, `pilotage.outcome.status`, `pilotage.catalog_version` |
//! | validation | `validate {language}` | `pilotage.language`, `pilotage.catalog_version`, `pilotage.cache` (hit, miss), `pilotage.valid` |
//! | Run | `run {language}` | `pilotage.language`, `pilotage.run_id`, `pilotage.outcome.status` |
//! | invocation (client) | `invoke {entry id}` | `pilotage.entry.id`, `pilotage.entry.kind`, `pilotage.step.id`, `error.type` |
//! | SQL statement (client) | `{db.operation.name}` | `db.system.name` (`postgresql`), `db.operation.name`, `db.query.text`, `pilotage.step.id`, `error.type` |

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// How an MCP request reached the server (`network.transport`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP over TCP.
    Http,
    /// stdio (a pipe).
    Stdio,
}

/// What the server span of one MCP request is named and made from.
#[derive(Debug)]
pub struct McpRequest<'a> {
    /// What the span is named after: the method, or `other` for a method
    /// the client made up.
    pub name: &'a str,
    /// The JSON-RPC method (`mcp.method.name`).
    pub method: &'a str,
    /// The tool of a `tools/call` (`gen_ai.tool.name`, and the span name's
    /// target).
    pub tool: Option<&'a str>,
    /// The transport.
    pub transport: Transport,
}

/// The rest of a server span's attributes and its parent, recorded only
/// into an enabled span (they cost lookups to gather).
#[derive(Debug)]
pub struct McpRequestDetails<'a> {
    /// The JSON-RPC request id (`jsonrpc.request.id`).
    pub request_id: String,
    /// The MCP session (`mcp.session.id`), when there is one.
    pub session_id: Option<&'a str>,
    /// The negotiated or declared MCP revision (`mcp.protocol.version`).
    pub protocol_version: Option<&'a str>,
    /// The caller's tenant (`pilotage.tenant`).
    pub tenant: Option<&'a str>,
    /// `params._meta.traceparent`, if the client sent one.
    pub traceparent: Option<&'a str>,
    /// `params._meta.tracestate`, if the client sent one.
    pub tracestate: Option<&'a str>,
}

/// How an MCP request ended, as its server span records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpEnd {
    /// A result (for `tools/call`, with `isError: false`).
    Ok,
    /// A `tools/call` result with `isError: true`: `error.type` =
    /// `tool_error`.
    ToolError,
    /// A JSON-RPC error: `error.type` and `rpc.response.status_code` =
    /// the code, the status description = the message.
    RpcError {
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
}

/// The server span of one MCP request. Disabled (and free) unless OTLP
/// export is on; when enabled, [`mcp_server_span_details`] completes it.
pub fn mcp_server_span(request: &McpRequest<'_>) -> Span {
    tracing::debug_span!(
        "mcp.server",
        otel.name = %match request.tool {
            Some(tool) => format!("{} {tool}", request.name),
            None => request.name.to_owned(),
        },
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = %request.method,
        gen_ai.tool.name = request.tool,
        gen_ai.operation.name = request.tool.map(|_| "execute_tool"),
        mcp.session.id = Empty,
        mcp.protocol.version = Empty,
        jsonrpc.request.id = Empty,
        network.transport = match request.transport {
            Transport::Http => "tcp",
            Transport::Stdio => "pipe",
        },
        network.protocol.name = match request.transport {
            Transport::Http => Some("http"),
            Transport::Stdio => None,
        },
        error.type = Empty,
        rpc.response.status_code = Empty,
        pilotage.tenant = Empty,
        pilotage.language = Empty,
        pilotage.run_id = Empty,
        pilotage.outcome.status = Empty,
        pilotage.catalog_version = Empty,
    )
}

/// Records the request's id, session, revision and tenant on its server
/// span, and parents it on the client's `traceparent` when it sent a
/// valid one (else the span starts a trace of its own).
pub fn mcp_server_span_details(span: &Span, details: &McpRequestDetails<'_>) {
    if span.is_disabled() {
        return;
    }
    span.record("jsonrpc.request.id", details.request_id.as_str());
    if let Some(session) = details.session_id {
        span.record("mcp.session.id", session);
    }
    if let Some(version) = details.protocol_version {
        span.record("mcp.protocol.version", version);
    }
    if let Some(tenant) = details.tenant {
        span.record("pilotage.tenant", tenant);
    }
    if let Some(traceparent) = details.traceparent {
        let mut carrier = HashMap::with_capacity(2);
        carrier.insert("traceparent".to_owned(), traceparent.to_owned());
        if let Some(tracestate) = details.tracestate {
            carrier.insert("tracestate".to_owned(), tracestate.to_owned());
        }
        let parent = TraceContextPropagator::new().extract(&carrier);
        // An invalid traceparent extracts to an empty context: the span
        // then starts a trace of its own, as with none.
        let _ = span.set_parent(parent);
    }
}

/// Records how the request of `span` ended.
pub fn mcp_server_span_end(span: &Span, end: &McpEnd) {
    if span.is_disabled() {
        return;
    }
    match end {
        McpEnd::Ok => {}
        McpEnd::ToolError => {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "error");
        }
        McpEnd::RpcError { code, message } => {
            span.record("error.type", code.to_string());
            span.record("rpc.response.status_code", code.to_string());
            span.record("otel.status_code", "error");
            span.record("otel.status_description", message.as_str());
        }
    }
}

/// Records the Language a tool call serves on the current span (the
/// request's server span).
pub fn record_language(language: &str) {
    Span::current().record("pilotage.language", language);
}

/// Records the `catalog_version` a validation or Run used on the current
/// span (the request's server span).
pub fn record_catalog_version(catalog_version: &str) {
    Span::current().record("pilotage.catalog_version", catalog_version);
}

/// Records a Run's id and outcome status on `span` (the request's server
/// span, or the Run's own).
pub fn record_run(span: &Span, run_id: &str, status: &str) {
    span.record("pilotage.run_id", run_id);
    span.record("pilotage.outcome.status", status);
}

/// The span of one Run's execution by its component (the blocking part).
pub fn run_span(language: &str, run_id: &str) -> Span {
    tracing::debug_span!(
        "pilotage.run",
        otel.name = %format_args!("run {language}"),
        pilotage.language = %language,
        pilotage.run_id = %run_id,
        pilotage.outcome.status = Empty,
    )
}

/// The client span of one invocation of a catalog entry by a Run.
pub fn invocation_span(step_id: &str, entry_id: &str, entry_kind: &str) -> Span {
    tracing::debug_span!(
        "pilotage.invoke",
        otel.name = %format_args!("invoke {entry_id}"),
        otel.kind = "client",
        otel.status_code = Empty,
        pilotage.entry.id = %entry_id,
        pilotage.entry.kind = %entry_kind,
        pilotage.step.id = %step_id,
        error.type = Empty,
    )
}

/// The client span of one SQL statement a Run sends to its data source
/// (OpenTelemetry database conventions; the statement text is the
/// validated, parameterized one, never the parameters).
pub fn statement_span(step_id: &str, statement: &str) -> Span {
    let operation = statement.split_whitespace().next().unwrap_or("").to_ascii_uppercase();
    tracing::debug_span!(
        "pilotage.sql",
        otel.name = %operation,
        otel.kind = "client",
        otel.status_code = Empty,
        db.system.name = "postgresql",
        db.operation.name = %operation,
        db.query.text = %statement,
        pilotage.step.id = %step_id,
        error.type = Empty,
    )
}

/// Marks a client span (invocation, statement) failed: `error.type` =
/// `kind`.
pub fn record_failure(span: &Span, kind: &'static str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "error");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_disabled_without_a_subscriber() {
        let request = McpRequest {
            name: "tools/call",
            method: "tools/call",
            tool: Some("validate_workflow"),
            transport: Transport::Http,
        };
        let span = mcp_server_span(&request);
        assert!(span.is_disabled());
        let details = McpRequestDetails {
            request_id: "1".into(),
            session_id: None,
            protocol_version: None,
            tenant: None,
            traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            tracestate: None,
        };
        mcp_server_span_details(&span, &details);
        mcp_server_span_end(&span, &McpEnd::ToolError);
    }
}
