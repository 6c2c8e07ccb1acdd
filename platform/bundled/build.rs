//! Builds the bundled Languages for `wasm32-wasip2` (see
//! `pilotage-guest-build`); the test components are the test-support
//! crate's.

fn main() {
    pilotage_guest_build::build(&[
        ("workflow", "workflow.wasm"),
        ("sql", "sql.wasm"),
        ("automation", "automation.wasm"),
    ]);
}
