//! The Language components shipped inside the `pilotage` binary, built for
//! `wasm32-wasip2` by the build script (`platform/build.rs`).

/// The `workflow/v1` Language component.
pub const WORKFLOW: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/workflow.wasm"));

/// The `sql/postgres-15` Language component.
pub const SQL: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sql.wasm"));

/// The `automation/1` Language component (home-automation rules, executed,
/// test-run or deployed).
pub const AUTOMATION: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/automation.wasm"));
