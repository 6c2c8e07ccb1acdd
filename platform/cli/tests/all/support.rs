//! The shared helpers of `pilotage-test-support`, under the names these
//! tests use.

pub use pilotage_test_support::{
    FnInvoker, HOSTILE, assert_schema, demo_catalog, demo_entries, demo_invoker, engine, mcp_url_announced,
    python_venv, repository, run, schema_document, schema_errors, spawn_serving, spec_dir, test_bounds, workflow,
};

/// The metrics exposition of the server at `addr`, asked with `token`.
pub async fn scrape(addr: std::net::SocketAddr, token: &str) -> String {
    reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}
