//! The platform's integration tests, compiled into one binary.

mod endpoint;
mod support;

mod client_vectors;
mod conformance;
mod deployments;
mod egress;
mod engine_bounds;
mod fleet;
mod hardening_edge;
mod hardening_jsonrpc;
mod hardening_sessions;
mod helm;
mod idempotency_lease;
mod interop;
mod language_authoring;
mod language_js;
mod language_loop;
mod layout;
mod main_job;
mod mcp_server;
mod narration;
mod protocol_schema;
mod resources;
mod server_card;
mod sql_endpoint;
mod sql_language;
mod sql_reach;
mod stdio;
mod tasks;
mod tasks_fleet;
mod telemetry;
mod tenancy;
mod tenant_memory;
mod workflow_language;
