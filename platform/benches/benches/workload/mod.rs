//! The workload the `engine`, `endpoint` and `load` benchmarks share: a realistic
//! 10-step workflow/v1 program against the demo catalog.
//!
//! Ten step objects: three `call`s of the demo capability service's
//! read-only entries (`cap_read_user_profile`, `cap_list_orders`,
//! `cap_read_outbox`, so an execute makes exactly three HTTP invocations
//! and needs no approval), four `set`s and two `branch`es (one with both
//! arms, one with a `then` arm only), plus an output mapping. `nonce` goes
//! into one `set` value so callers can make every program text distinct
//! (the platform caches validation results by program text).

use pilotage_server::settings::Settings;
use pilotage_server::start::{Server, start};
use pilotage_server::tenancy::Quotas;
use serde_json::{Value, json};

/// Starts the real server in-process with `settings` (its data folder
/// emptied first) and raises the demo tenant's quotas so they never cap a
/// benchmark's load (the endpoint and load benchmarks).
pub async fn start_demo_server(mut settings: Settings) -> Server {
    bench_capacity(&mut settings);
    let _ = std::fs::remove_dir_all(&settings.data_dir);
    let server = start(settings, &pilotage_bundled::ALL).await.expect("the server starts");
    let tenant = server.platform.tenant("demo").expect("the demo tenant");
    tenant.set_quotas(Quotas { requests_per_second: 1_000_000, max_concurrent_runs: 256, ..Quotas::default() });
    server
}

/// Run slots of an in-process bench server whose settings leave them to
/// the node: enough for any workload here, and small enough that the
/// several servers a bench starts at once do not reserve the address
/// space of a node's pool each (4 GiB per slot: docs/architecture.md,
/// "Capacity").
pub const BENCH_RUN_INSTANCES: u32 = 512;

/// Bounds the Runs' pool of a bench server at [`BENCH_RUN_INSTANCES`]
/// unless its settings chose a size.
pub fn bench_capacity(settings: &mut Settings) {
    if settings.capacity.run_instances == 0 {
        settings.capacity.run_instances = BENCH_RUN_INSTANCES;
    }
}

/// The 10-step program; `nonce` only changes a literal.
pub fn ten_step_program(nonce: u64) -> Value {
    json!({
        "description": "Summarise a customer: profile, orders, outbox; note gold tier and large orders.",
        "input": { "userId": "string" },
        "steps": [
            { "id": "profile", "kind": "call", "capability": "cap_read_user_profile",
              "with": { "user_id": "$.input.userId" } },
            { "id": "orders", "kind": "call", "capability": "cap_list_orders",
              "with": { "user_id": "$.input.userId" } },
            { "id": "summary", "kind": "set",
              "value": { "name": "$.steps.profile.output.name", "tier": "$.steps.profile.output.tier",
                         "orders": "$.steps.orders.output.orders", "nonce": nonce } },
            { "id": "tier", "kind": "branch",
              "if": { "eq": ["$.steps.profile.output.tier", "gold"] },
              "then": [ { "id": "gold_note", "kind": "set", "value": "priority customer" } ],
              "else": [ { "id": "plain_note", "kind": "set", "value": "standard customer" } ] },
            { "id": "outbox", "kind": "call", "capability": "cap_read_outbox" },
            { "id": "big_first", "kind": "branch",
              "if": { "and": [
                  { "exists": "$.steps.orders.output.orders[0]" },
                  { "gt": ["$.steps.orders.output.orders[0].total", 100] }
              ] },
              "then": [ { "id": "big_note", "kind": "set", "value": "$.steps.orders.output.orders[0].id" } ] },
            { "id": "result", "kind": "set",
              "value": { "summary": "$.steps.summary.output", "outbox": "$.steps.outbox.output" } }
        ],
        "output": { "result": "$.steps.result.output" }
    })
}

/// The input the program declares.
pub fn input() -> Value {
    json!({ "userId": "42" })
}

/// Number of step objects in [`ten_step_program`] (arms included).
pub const STEPS: usize = 10;
