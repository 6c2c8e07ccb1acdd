//! The Language components shipped inside the `pilotage` binary, built for
//! `wasm32-wasip2` by the build script (`pilotage-guest-build`) and
//! embedded: `workflow/v1`, `sql/postgres-15` and `automation/1`.
//!
//! Invariant: only what the product ships is here; test components are
//! built for tests only (`pilotage-test-support`), so neither `cargo build`
//! nor an edit of a test component rebuilds what the binary embeds.
//!
//! ```
//! assert!(pilotage_bundled::WORKFLOW.starts_with(b"\0asm"));
//! assert_eq!(pilotage_bundled::ALL.len(), 3);
//! ```
#![deny(unsafe_code)]

/// The `workflow/v1` Language component.
pub const WORKFLOW: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/workflow.wasm"));

/// The `sql/postgres-15` Language component.
pub const SQL: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sql.wasm"));

/// The `automation/1` Language component (home-automation rules, executed,
/// test-run or deployed).
pub const AUTOMATION: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/automation.wasm"));

/// Every bundled component with the Language it declares, in the order a
/// server installs them.
pub const ALL: [(&str, &[u8]); 3] = [("workflow/v1", WORKFLOW), ("sql/postgres-15", SQL), ("automation/1", AUTOMATION)];
