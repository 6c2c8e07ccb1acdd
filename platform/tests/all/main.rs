//! The platform's integration tests, compiled into one binary.

mod support;

mod engine_bounds;
mod protocol_schema;
mod workflow_language;
