//! What a Language costs the platform, by component (issues: a Language in
//! JavaScript, in Python). Run with `cargo bench --bench language_cost`.
//!
//! Compares the components of `PILOTAGE_BENCH_LANGUAGES` (comma-separated
//! `.wasm` paths of recipe/v1 builds; by default the Rust recipe built by
//! `build.rs` and, when they have been built, its JavaScript twin at
//! `target/recipe-js/recipe.wasm`, which `cargo test --test all language_js`
//! or `npm run build` in `languages/recipe-js` builds, and its Python twin at
//! `target/recipe-py/recipe.wasm`, which `cargo test --test all language_py`
//! or `build.py` in `languages/recipe-py` builds). Prints a Markdown
//! table, one column per component, one row per figure:
//!
//! - component bytes: the file's size;
//! - compile (ms): `Engine::load` on a fresh engine without the
//!   compiled-code cache (Cranelift compilation, then the `describe` call),
//!   median of `PILOTAGE_BENCH_LOADS` loads (default [`LOADS`]). What an
//!   upload or a server start pays once per component; with the cache warm,
//!   a load is a deserialize instead;
//! - load, warm cache (ms): the same with the compiled-code cache holding
//!   the component (a server restart): deserialize, then `describe`;
//! - instantiate (µs): a fresh store and instance, no call (the engine's
//!   `Component::call` with an empty body), median of [`CALLS`]; and its
//!   fuel;
//! - validate (µs) and fuel: the core guide's example program
//!   (`languages/recipe/guides/core.md`, the program an agent writes first)
//!   through `language::validation::validate`, host checks included,
//!   against the demo catalog as the demo principal sees it for recipe/v1;
//!   fuel is the engine's own `CallCost` of the guest call (instantiation
//!   included), to set against the default validation bound;
//! - execute (µs) and fuel: that program run with `{"userId": "42"}`
//!   through `language::execution::execute`, invocations answered
//!   in-process with canned outputs (so the figure is the engine, not
//!   HTTP), against the default execution bound;
//! - validate fuel of three more programs, to show how cost grows: the
//!   empty recipe `{"steps": []}` (the floor of any call), a recipe of
//!   [`STEPS`] call steps, and the largest program of the conformance binding
//!   (`tests/conformance/recipe.json`, `resource_exhausted`: one call and an
//!   `output` of [`REFERENCES`] `$orders` references, about 1 MB), measured
//!   with the validation fuel bound raised so the whole cost shows.
//!
//! Every engine here has the default bounds but one: it allows
//! [`CORE_INSTANCES`] core instances per component, the setting an operator
//! serving the Python twin sets (it links 38; the default allows 32). No
//! figure depends on it.
//!
//! Wall times vary with the machine and its load; fuel (≈ wasm
//! instructions) does not.

/// The allocator the `pilotage` binary runs with (see its `main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use pilotage_engine::catalog::{CatalogSnapshot, TenantCatalog};
use pilotage_engine::effects::Invoker;
use pilotage_engine::execution::{self, ExecutionRequest};
use pilotage_engine::host::CallContext;
use pilotage_engine::validation::{self, Program};
use pilotage_engine::{Bounds, CallBounds, CallCost, CallKind, Component, Engine};
use pilotage_protocol::catalog::CatalogEntry;
use serde_json::{Value, json};

/// Cold loads per component (each compiles the whole component), unless
/// `PILOTAGE_BENCH_LOADS` says otherwise.
const LOADS: usize = 3;
/// Calls per timed figure.
const CALLS: usize = 50;
/// Call steps of the long recipe.
const STEPS: usize = 100;
/// References in the binding's largest program.
const REFERENCES: usize = 90_000;
/// Core instances per component the engines allow (`bounds.core_instances_per_component`).
const CORE_INSTANCES: u32 = 64;

/// The default bounds, with [`CORE_INSTANCES`].
fn bounds() -> Bounds {
    Bounds { core_instances_per_component: CORE_INSTANCES, ..Bounds::default() }
}

/// The workspace root.
fn workspace() -> PathBuf {
    pilotage_test_support::repository()
}

/// The demo catalog offered to recipe/v1, as the demo principal sees it.
fn demo_snapshot() -> CatalogSnapshot {
    let entries = pilotage_server::demo::tenant::demo_entries("http://127.0.0.1:9", &["recipe/v1".to_owned()])
        .expect("the demo catalog parses");
    let mut catalog = TenantCatalog::new();
    catalog.apply(entries, &[]);
    catalog.snapshot(&Default::default(), "recipe/v1")
}

/// The core guide's example program (the block after "```json recipe").
fn example_program() -> Value {
    let guide = std::fs::read_to_string(workspace().join("languages/recipe/guides/core.md")).expect("the core guide");
    let block = guide.split("```json recipe").nth(1).and_then(|rest| rest.split("```").next()).expect("an example");
    serde_json::from_str(block).expect("the example is JSON")
}

/// [`STEPS`] calls reading the same input.
fn long_program() -> Value {
    let steps: Vec<Value> = (0..STEPS)
        .map(|i| json!({"id": format!("profile{i}"), "call": "cap_read_user_profile", "with": {"user_id": "$input.userId"}}))
        .collect();
    json!({"steps": steps, "output": {"name": "$profile0.name"}})
}

/// The binding's `resource_exhausted` program: one call, then an `output`
/// of [`REFERENCES`] references to it.
fn largest_program() -> Value {
    let references = vec![json!("$orders"); REFERENCES];
    json!({
        "steps": [{"id": "orders", "call": "cap_list_orders", "with": {"user_id": "42"}}],
        "output": references,
    })
}

/// Answers every invocation with a canned output.
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
            _ => json!({"flagged": true}),
        })
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn micros(duration: Duration) -> String {
    format!("{:.0}", duration.as_secs_f64() * 1e6)
}

/// The median wall time of [`CALLS`] runs of `f`.
fn timed<R>(mut f: impl FnMut() -> R) -> Duration {
    median(
        (0..CALLS)
            .map(|_| {
                let started = Instant::now();
                black_box(f());
                started.elapsed()
            })
            .collect(),
    )
}

fn json_program(component: &Component, value: &Value) -> Program {
    let bounds = component.engine().bounds();
    Program::from_argument(component.description().program_kind, value, bounds.program_bytes, bounds.nesting_depth)
        .expect("within the host bounds")
}

/// One raw call into a fresh instance: `validate(text)` when given, else
/// nothing beyond instantiation; its cost.
fn raw_call(component: &Component, snapshot: &CatalogSnapshot, text: Option<&str>) -> CallCost {
    block_on(async {
        let mut call = component
            .start(CallKind::Validation, CallContext::validation(snapshot.clone()))
            .await
            .expect("instantiates");
        if let Some(text) = text {
            call.validate(text, None).await.expect("validates");
        }
        call.finish().1
    })
}

/// The fuel of one `validate` call of `value` (instantiation included).
fn validate_fuel(component: &Component, snapshot: &CatalogSnapshot, value: &Value) -> u64 {
    let program = json_program(component, value);
    raw_call(component, snapshot, Some(program.text())).fuel
}

/// The figures of one component: its name, then those of [`rows`].
fn measure(path: &Path, snapshot: &CatalogSnapshot) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let count = std::env::var("PILOTAGE_BENCH_LOADS").ok().and_then(|n| n.parse().ok()).unwrap_or(LOADS).max(1);
    let mut loads = Vec::with_capacity(count);
    let mut loaded = None;
    for _ in 0..count {
        // A fresh engine each time: an engine shares what it has loaded.
        let engine = Engine::new(bounds(), None).expect("the engine starts");
        let started = Instant::now();
        let component =
            engine.load(black_box(&bytes)).unwrap_or_else(|e| panic!("{} does not load: {e}", path.display()));
        loads.push(started.elapsed());
        loaded = Some(component);
    }
    let component = loaded.expect("loaded at least once");
    let name = component.description().name.clone();

    // With the compiled-code cache warm: a restart's load.
    let cache = std::env::temp_dir().join(format!("pilotage-language-cost-{}", std::process::id()));
    Engine::new(bounds(), Some(cache.clone())).expect("the engine starts").load(&bytes).expect("loads");
    let warm: Vec<Duration> = (0..count)
        .map(|_| {
            let engine = Engine::new(bounds(), Some(cache.clone())).expect("the engine starts");
            let started = Instant::now();
            let component = engine.load(black_box(&bytes)).expect("loads");
            let elapsed = started.elapsed();
            assert!(component.loaded_from_cache(), "a warm load compiled");
            elapsed
        })
        .collect();
    let _ = std::fs::remove_dir_all(&cache);

    let instantiate = timed(|| raw_call(&component, snapshot, None));
    let instantiate_cost = raw_call(&component, snapshot, None);

    let example = example_program();
    let program = json_program(&component, &example);
    let validated = block_on(validation::validate(&component, &program, None, snapshot)).expect("validates");
    assert!(validated.response.valid, "{name}: the example must be valid: {:?}", validated.response.diagnostics);
    let validate = timed(|| block_on(validation::validate(&component, &program, None, snapshot)).expect("validates"));

    let input = json!({"userId": "42"});
    let invoker: Arc<dyn Invoker> = Arc::new(CannedInvoker);
    let run = || {
        block_on(execution::execute(
            &component,
            ExecutionRequest {
                program: &program,
                input: Some(&input),
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
    };
    let execution = run();
    assert!(execution.outcome.ok, "{name}: the example must run: {:?}", execution.outcome);
    let execute = timed(run);

    // The largest program, with the fuel bound out of the way.
    let unbounded = Bounds { validation: CallBounds { fuel: 1_000_000_000_000, wall_time_ms: 600_000 }, ..bounds() };
    let roomy = Engine::new(unbounded, None).expect("the engine starts").load(&bytes).expect("loads");

    vec![
        format!("`{}` ({name})", path.strip_prefix(workspace()).unwrap_or(path).display()),
        bytes.len().to_string(),
        median(loads).as_millis().to_string(),
        format!("{:.1}", median(warm).as_secs_f64() * 1e3),
        micros(instantiate),
        instantiate_cost.fuel.to_string(),
        micros(validate),
        validate_fuel(&component, snapshot, &example).to_string(),
        micros(execute),
        execution.fuel.to_string(),
        validate_fuel(&component, snapshot, &json!({"steps": []})).to_string(),
        validate_fuel(&roomy, snapshot, &long_program()).to_string(),
        validate_fuel(&roomy, snapshot, &largest_program()).to_string(),
    ]
}

/// The table's rows, after the component's path.
fn rows() -> [String; 12] {
    [
        "component bytes".into(),
        "compile, no cache (ms)".into(),
        "load, warm cache (ms)".into(),
        "instantiate (µs)".into(),
        "instantiate fuel".into(),
        "validate the core guide's example (µs)".into(),
        "validate the core guide's example, fuel".into(),
        "execute it, canned invocations (µs)".into(),
        "execute it, fuel".into(),
        "validate `{\"steps\": []}`, fuel".into(),
        format!("validate {STEPS} call steps, fuel"),
        format!("validate {REFERENCES} references (~1 MB), fuel"),
    ]
}

fn main() {
    let list = std::env::var("PILOTAGE_BENCH_LANGUAGES").unwrap_or_else(|_| {
        let mut paths = vec![pilotage_test_support::guest_file("recipe.wasm").display().to_string()];
        for twin in ["target/recipe-js/recipe.wasm", "target/recipe-py/recipe.wasm"] {
            let built = workspace().join(twin);
            if built.is_file() {
                paths.push(built.display().to_string());
            }
        }
        paths.join(",")
    });
    let snapshot = demo_snapshot();
    let defaults = Bounds::default();
    println!(
        "default bounds: validation fuel {}, execution fuel {}; compile: median of the loads, other times: median of {CALLS} calls",
        defaults.validation.fuel, defaults.execution.fuel
    );
    let columns: Vec<Vec<String>> =
        list.split(',').filter(|path| !path.is_empty()).map(|path| measure(Path::new(path), &snapshot)).collect();
    let cells = |row: usize| columns.iter().map(|column| column[row].as_str()).collect::<Vec<_>>().join(" | ");
    println!("| | {} |", cells(0));
    println!("|---|{}", "---:|".repeat(columns.len()));
    for (i, row) in rows().iter().enumerate() {
        println!("| {row} | {} |", cells(i + 1));
    }
}
