//! Engine benchmarks (issue: foundation). Run with `cargo bench --bench engine`.
//!
//! What is measured, and the figure each answers:
//!
//! - `engine/validate_10_step` (µs per call, median; target ≤ 60 µs): a
//!   fresh store, instantiation of the bundled workflow/v1 component and its
//!   `validate` of the 10-step program of `workload/mod.rs`, with every
//!   host-side check, through `language::validation::validate` against the
//!   demo catalog snapshot (the snapshot the server builds for the demo
//!   principal). Beside it, to show where the time goes: the same guest
//!   call without the host checks (`validate_10_step_raw_call`),
//!   instantiation alone (`instantiate_only`), a trivial validate, and an
//!   in-process execute of the same program with canned invocation results
//!   (`execute_10_step_canned`).
//! - `engine/load_*` (ms per load): `Engine::load` of the workflow component
//!   from its bytes with the compiled-code cache warm (deserialize, ~0.1 ms
//!   expected) and cold (compile, ~50 ms expected for a 70 KB component),
//!   plus its parts (SHA-256 of the bytes, the `describe` call). The warm
//!   path is checked to have skipped compilation on every iteration:
//!   `Component::loaded_from_cache()` must be true and the cached artifact's
//!   modification time must not change.
//! - fuel (printed once): fuel consumed by a trivial `validate`, by the
//!   10-step `validate` and by instantiation alone, read from the engine's
//!   own `CallCost` (set before instantiation, read after the call).
//! - hostile spin (s, min/median/max of 5 runs per path; target ≤ 1.1 s): wall time
//!   until a component spinning in `validate` is stopped at a 1 s deadline
//!   (fuel set high enough that only the deadline can stop it).
//!
//! With `PILOTAGE_BENCH_COMPARE=a.wasm,b.wasm` the binary instead compares
//! workflow components (say, before and after a change to the Language)
//! interleaved in one process; see `compare_components`.

/// The allocator the `pilotage` binary runs with (see its `main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Shared with the endpoint and load benches; this one starts no server.
#[allow(dead_code, reason = "the shared workload module serves benches that use all of it")]
mod workload;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::Criterion;
use futures::executor::block_on;
use pilotage_engine::catalog::{CatalogSnapshot, TenantCatalog};
use pilotage_engine::effects::Invoker;
use pilotage_engine::execution::{self, ExecutionRequest};
use pilotage_engine::host::CallContext;
use pilotage_engine::validation::{self, Program, ValidationFailure};
use pilotage_engine::{Bounds, CallBounds, CallCost, CallError, CallKind, Component, Engine, cache};
use pilotage_protocol::catalog::CatalogEntry;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The hostile test component (`test-programs/hostile`), built by build.rs.
const HOSTILE: &[u8] = pilotage_test_support::HOSTILE;

/// The trivial program: no steps.
const TRIVIAL: &str = r#"{"steps":[]}"#;

/// The demo catalog as the server holds it, viewed by the demo principal
/// (no scopes) for workflow/v1.
fn demo_snapshot() -> CatalogSnapshot {
    let entries = pilotage_server::demo::tenant::demo_entries(
        "http://127.0.0.1:9",
        &[pilotage_server::demo::tenant::DEMO_CATALOG_LANGUAGE.to_owned()],
    )
    .expect("the demo catalog parses");
    let mut catalog = TenantCatalog::new();
    catalog.apply(entries, &[]);
    catalog.snapshot(&Default::default(), "workflow/v1")
}

fn json_program(component: &Component, value: &Value) -> Program {
    let bounds = component.engine().bounds();
    Program::from_argument(component.description().program_kind, value, bounds.program_bytes, bounds.nesting_depth)
        .expect("within the host bounds")
}

/// Answers every invocation with a canned output, so an in-process execute
/// measures the engine and the host, not HTTP.
struct CannedInvoker;

#[async_trait::async_trait]
impl Invoker for CannedInvoker {
    async fn invoke(
        &self,
        entry: &CatalogEntry,
        input: &Value,
    ) -> Result<Value, pilotage_engine::effects::InvokeError> {
        Ok(match entry.id.as_str() {
            "cap_read_user_profile" => {
                json!({"id": input["user_id"], "name": "Amira Hassan", "email": "amira@example.com", "tier": "gold"})
            }
            "cap_list_orders" => json!({"orders": [{"id": "o-1003", "total": 410.0, "status": "pending"}]}),
            _ => json!({"messages": []}),
        })
    }
}

/// One raw call into a fresh instance: `validate(text)` when given, else
/// nothing beyond instantiation; its result and cost.
fn raw_call(
    component: &Component,
    snapshot: &CatalogSnapshot,
    text: Option<&str>,
) -> (Result<(), CallError>, CallCost) {
    block_on(async {
        let mut call = match component.start(CallKind::Validation, CallContext::validation(snapshot.clone())).await {
            Ok(call) => call,
            Err(error) => return (Err(error), CallCost::default()),
        };
        let result = match text {
            Some(text) => call.validate(text, None).await.map(drop),
            None => Ok(()),
        };
        (result, call.finish().1)
    })
}

fn validate_benches(criterion: &mut Criterion, component: &Component, snapshot: &CatalogSnapshot) {
    let program = json_program(component, &workload::ten_step_program(0));
    let validated = block_on(validation::validate(component, &program, None, snapshot)).expect("the program validates");
    assert!(validated.response.valid, "the 10-step program must be valid: {:?}", validated.response.diagnostics);
    let plan = validated.plan.as_ref().expect("a valid workflow has a plan");
    assert_eq!(plan.steps.len(), workload::STEPS, "the plan has one step per step object");
    let trivial = json_program(component, &serde_json::from_str(TRIVIAL).expect("JSON"));

    let mut group = criterion.benchmark_group("engine");
    group.bench_function("validate_10_step", |bencher| {
        bencher
            .iter(|| block_on(validation::validate(component, black_box(&program), None, snapshot)).expect("validates"))
    });
    group.bench_function("validate_10_step_raw_call", |bencher| {
        bencher.iter(|| raw_call(component, snapshot, Some(black_box(program.text()))).0.expect("validates"))
    });
    group.bench_function("validate_trivial", |bencher| {
        bencher
            .iter(|| block_on(validation::validate(component, black_box(&trivial), None, snapshot)).expect("validates"))
    });
    group.bench_function("instantiate_only", |bencher| {
        bencher.iter(|| raw_call(component, snapshot, None).0.expect("instantiates"))
    });
    let input = workload::input();
    let invoker: Arc<dyn Invoker> = Arc::new(CannedInvoker);
    let execution = execute(component, &program, &validated, &input, snapshot, &invoker);
    assert!(execution.outcome.ok, "the 10-step program must run: {:?}", execution.outcome);
    assert_eq!(execution.invocations.len(), 3, "three invocations");
    group.bench_function("execute_10_step_canned", |bencher| {
        bencher.iter(|| execute(component, &program, &validated, &input, snapshot, &invoker))
    });
    group.finish();
}

fn execute(
    component: &Component,
    program: &Program,
    validated: &validation::Validated,
    input: &Value,
    snapshot: &CatalogSnapshot,
    invoker: &Arc<dyn Invoker>,
) -> execution::Execution {
    block_on(execution::execute(
        component,
        ExecutionRequest {
            program,
            input: Some(input),
            context: None,
            plan: validated.plan.as_ref(),
            references: &validated.references,
            catalog: snapshot.clone(),
            invoker: invoker.clone(),
            statements: &validated.statements,
            data_source: None,
            test_run: false,
            deploy: false,
            clock_ms: None,
            run_id: "run_bench",
        },
    ))
}

fn load_benches(criterion: &mut Criterion) {
    let bytes = pilotage_bundled::WORKFLOW;
    let cache_dir = std::env::temp_dir().join(format!("pilotage-bench-cache-{}", std::process::id()));
    let cached_engine = Engine::new(Bounds::default(), Some(cache_dir.clone())).expect("the engine starts");
    let uncached_engine = Engine::new(Bounds::default(), None).expect("the engine starts");

    // Prime the cache: the first load compiles and writes the artifact.
    let first = cached_engine.load(bytes).expect("workflow loads");
    assert!(!first.loaded_from_cache(), "the cache directory was fresh");
    let artifact = cache_dir.join(cache::artifact_name(first.sha256(), cached_engine.config_key()));
    let artifact_bytes = std::fs::metadata(&artifact).expect("the artifact was written").len();
    let written = std::fs::metadata(&artifact).and_then(|m| m.modified()).expect("mtime");
    println!(
        "workflow.wasm: {} bytes; compiled artifact {} ({} bytes)",
        bytes.len(),
        artifact.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
        artifact_bytes
    );

    let mut group = criterion.benchmark_group("engine");
    let mut warm_loads = 0u64;
    group.bench_function("load_warm_cache", |bencher| {
        bencher.iter(|| {
            let component = cached_engine.load(black_box(bytes)).expect("workflow loads");
            // Proof that compilation was skipped: the component says it came
            // from the cache (only the deserialize path sets this).
            assert!(component.loaded_from_cache(), "a warm load compiled");
            warm_loads += 1;
            component
        })
    });
    group.bench_function("load_part_sha256_of_bytes", |bencher| bencher.iter(|| Sha256::digest(black_box(bytes))));
    group.bench_function("load_part_describe_call", |bencher| {
        bencher.iter(|| {
            block_on(async {
                let mut call = first.start(CallKind::Validation, CallContext::describe()).await?;
                let described = call.describe().await;
                call.finish();
                described
            })
            .expect("describes")
        })
    });
    group.sample_size(10);
    group.bench_function("load_cold_compile", |bencher| {
        bencher.iter(|| {
            let component = uncached_engine.load(black_box(bytes)).expect("workflow loads");
            assert!(!component.loaded_from_cache());
            component
        })
    });
    group.finish();

    let unchanged = std::fs::metadata(&artifact).and_then(|m| m.modified()).expect("mtime") == written;
    println!(
        "warm-cache check: {warm_loads} warm loads, every one reported loaded_from_cache() = true; \
         artifact rewritten since priming: {}",
        !unchanged
    );
    assert!(unchanged, "the artifact was rewritten: a warm load recompiled");
    let _ = std::fs::remove_dir_all(&cache_dir);
}

fn report_fuel(component: &Component, snapshot: &CatalogSnapshot) {
    let fuel_of = |text: &str| {
        let (result, cost) = raw_call(component, snapshot, Some(text));
        result.expect("validates");
        cost.fuel
    };
    let ten_step = workload::ten_step_program(0).to_string();
    let (result, instantiate) = raw_call(component, snapshot, None);
    result.expect("instantiates");
    println!(
        "fuel: trivial validate ({TRIVIAL}) = {}; 10-step validate = {}; instantiation alone = {} \
         (engine::CallCost::fuel; validation bound {})",
        fuel_of(TRIVIAL),
        fuel_of(&ten_step),
        instantiate.fuel,
        component.engine().bounds().validation.fuel
    );
}

fn spin_deadline() {
    const RUNS: usize = 5;
    let bounds =
        Bounds { validation: CallBounds { fuel: 10_000_000_000_000, wall_time_ms: 1_000 }, ..Bounds::default() };
    let engine = Engine::new(bounds, None).expect("the engine starts");
    let hostile = engine.load(HOSTILE).expect("the hostile component loads");
    let snapshot = CatalogSnapshot::hashed(Vec::new());
    let spin =
        Program::from_argument(hostile.description().program_kind, &Value::String("validate:spin".into()), 1 << 20, 64)
            .expect("within bounds");
    let mut engine_walls = Vec::with_capacity(RUNS);
    let mut request_walls = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        // The engine's own classification and wall clock (store creation,
        // instantiation and the call).
        let (result, cost) = raw_call(&hostile, &snapshot, Some(spin.text()));
        assert_eq!(result.err(), Some(CallError::Timeout(1_000)), "only the deadline may stop the spin");
        engine_walls.push(cost.wall);
        // The path a validate request takes, timed from outside.
        let started = Instant::now();
        let failure =
            block_on(validation::validate(&hostile, &spin, None, &snapshot)).expect_err("the spin is stopped");
        request_walls.push(started.elapsed());
        assert!(
            matches!(&failure, ValidationFailure::BoundsExceeded(message) if message.contains("wall-time")),
            "{failure:?}"
        );
    }
    for (what, mut walls) in [("Call::finish (CallCost.wall)", engine_walls), ("validation::validate", request_walls)] {
        walls.sort();
        println!(
            "hostile spin stopped at a 1 s deadline via {what}, {RUNS} runs: min {:.4} s, median {:.4} s, max {:.4} s (target <= 1.1 s)",
            walls[0].as_secs_f64(),
            walls[RUNS / 2].as_secs_f64(),
            walls[RUNS - 1].as_secs_f64()
        );
    }
}

/// Interleaved comparison of workflow components (`PILOTAGE_BENCH_COMPARE`,
/// comma-separated `.wasm` paths): each round runs 300 raw 10-step
/// validations per component in turn, 30 rounds, and prints each
/// component's fastest and median round in µs per call. The machine's speed
/// drifts by more than the differences a change to a Language makes; runs
/// interleaved in one process see the same drift, so their ratio holds.
/// Each line also gives the fuel of one validation (deterministic).
fn compare_components(engine: &Engine, bundled: &Component, snapshot: &CatalogSnapshot, list: &str) {
    const ROUNDS: usize = 30;
    const CALLS: u32 = 300;
    let program = json_program(bundled, &workload::ten_step_program(0));
    let components: Vec<(&str, Component)> = list
        .split(',')
        .map(|path| {
            let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
            (path, engine.load(&bytes).unwrap_or_else(|e| panic!("{path} does not load: {e}")))
        })
        .collect();
    let mut rounds = vec![Vec::with_capacity(ROUNDS); components.len()];
    for _ in 0..ROUNDS {
        for ((_, component), samples) in components.iter().zip(&mut rounds) {
            let started = Instant::now();
            for _ in 0..CALLS {
                raw_call(component, snapshot, Some(black_box(program.text()))).0.expect("validates");
            }
            samples.push(started.elapsed().as_secs_f64() * 1e6 / f64::from(CALLS));
        }
    }
    for ((path, component), mut samples) in components.iter().zip(rounds) {
        samples.sort_by(f64::total_cmp);
        // Fuel is deterministic: the guest's own work, free of the drift.
        let (result, cost) = raw_call(component, snapshot, Some(program.text()));
        result.expect("validates");
        println!(
            "{path}: fastest round {:.1} µs/call, median round {:.1} µs/call, fuel {}",
            samples[0],
            samples[ROUNDS / 2],
            cost.fuel
        );
    }
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let engine = Engine::new(Bounds::default(), None).expect("the engine starts");
    let component = engine.load(pilotage_bundled::WORKFLOW).expect("workflow loads");
    let snapshot = demo_snapshot();
    if let Ok(list) = std::env::var("PILOTAGE_BENCH_COMPARE") {
        compare_components(&engine, &component, &snapshot, &list);
        return;
    }
    validate_benches(&mut criterion, &component, &snapshot);
    report_fuel(&component, &snapshot);
    load_benches(&mut criterion);
    spin_deadline();
    criterion.final_summary();
}
