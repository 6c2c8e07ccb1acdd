//! The shared helpers of `pilotage-test-support`, under the names these
//! tests use.

pub use pilotage_test_support::{
    FnInvoker, HOSTILE, assert_schema, demo_catalog, demo_entries, demo_invoker, engine, mcp_url_announced,
    python_venv, repository, run, schema_document, schema_errors, spawn_serving, spec_dir, test_bounds, workflow,
};
