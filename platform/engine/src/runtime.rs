//! The wasmtime engine that runs Language components (ARCHITECTURE.md,
//! "The Language component"; Part II §10.1 bounded evaluation).
//!
//! - [`Engine`]: one wasmtime engine with the component model, fuel, epoch
//!   interruption and a bounded wasm stack; an epoch ticker thread; the
//!   linker with the Language imports and a WASI p2 that grants nothing.
//! - [`Component`]: one loaded Language: compiled (or loaded from the
//!   on-disk cache), pre-instantiated, and described. Loads of the same
//!   bytes share one loaded component (by SHA-256), so a tenant that
//!   publishes a Language another tenant already uses costs no code.
//! - [`cache`]: the compiled-code cache keyed by (component SHA-256,
//!   wasmtime version, engine configuration).
//! - [`host`]: the per-call store data and the host side of the imports.
//! - [`bounds`]: every bound as a named setting.
//!
//! Every call gets a fresh `Store` with fuel, a memory cap and an epoch
//! deadline; a trap drops the instance, never the process. Failures come
//! back as [`CallError`], classified so the caller can choose the spec's
//! channel: a request error during validation, an outcome during
//! execution.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{ComponentExportIndex, HasSelf, Linker};
use wasmtime::{Config, PoolingAllocationConfig, Store, Trap};

use crate::bounds::{Bounds, CallBounds, EPOCH_TICK};
use crate::clock::Clock;
use crate::description::LanguageDescription;
use crate::error::{CallError, EngineError};
use crate::function_cache::{FunctionCache, FunctionCacheStats};
use crate::host::HostState;
use pilotage_telemetry::metrics::{BoundKind, CallLabel, GuaranteeKind, Metrics};

use crate::wit::pilotage::language::{describe_types, run_types, types};
use crate::wit::{Language, LanguagePre};

/// Bytes of each pooled linear memory kept resident between calls and
/// reset in place (only the dirtied pages, where the kernel offers
/// PAGEMAP_SCAN). Covers a Rust guest's 1 MiB stack, its data and a few
/// MiB of heap; memory a call touches beyond this is released with
/// `madvise`. At most `max_unused_warm_slots` (100) idle slots hold it.
pub(crate) const KEEP_RESIDENT_BYTES: usize = 4 << 20;

/// Bytes of each pooled table kept resident between calls (see
/// [`KEEP_RESIDENT_BYTES`]).
pub(crate) const KEEP_RESIDENT_TABLE_BYTES: usize = 64 << 10;

/// The platform's wasm engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    wasmtime: wasmtime::Engine,
    linker: Linker<HostState>,
    bounds: Bounds,
    cache_dir: Option<PathBuf>,
    config_key: String,
    /// Every component loaded and still in use somewhere, by the SHA-256
    /// of its bytes. Weak: the last [`Component`] dropped frees the code.
    loaded: Mutex<HashMap<String, Weak<Loaded>>>,
    /// How many times compiled code was produced (compiled or read from
    /// the on-disk cache) and pre-instantiated.
    code_loads: AtomicU64,
    /// Compiled functions reused across compilations, when enabled.
    function_cache: Option<Arc<FunctionCache>>,
    /// The server's metrics: every call's fuel and time and the bounds it
    /// tripped are counted here, where every call passes.
    metrics: Metrics,
    /// The platform's one clock: `effects.now` of every call, and every
    /// other reading of time by whoever holds the engine.
    clock: Clock,
}

impl Engine {
    /// Creates the engine with `bounds`, caching compiled code under
    /// `cache_dir` when given, and starts the epoch ticker.
    ///
    /// # Errors
    /// [`EngineError::Config`] when wasmtime rejects the configuration.
    pub fn new(bounds: Bounds, cache_dir: Option<PathBuf>) -> Result<Engine, EngineError> {
        Engine::with_function_cache(bounds, cache_dir, None)
    }

    /// As [`Engine::new`], and when `function_cache` is given, every
    /// compilation reuses the compiled functions it holds and adds its own
    /// (Cranelift's incremental compilation): a rebuilt component whose
    /// bytes differ but whose functions mostly do not compiles in a
    /// fraction of the time. For a Language author's loop (`serve
    /// --language`), where builds are not always byte-reproducible.
    ///
    /// # Errors
    /// [`EngineError::Config`] when wasmtime rejects the configuration.
    pub fn with_function_cache(
        bounds: Bounds,
        cache_dir: Option<PathBuf>,
        function_cache: Option<Arc<FunctionCache>>,
    ) -> Result<Engine, EngineError> {
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(256)
            .total_core_instances(1024)
            .total_memories(512)
            .total_tables(1024)
            .total_stacks(0)
            .max_memory_size(bounds.memory_bytes as usize)
            .max_component_instance_size(1 << 20)
            .max_core_instances_per_component(bounds.core_instances_per_component)
            .max_memories_per_component(4)
            .max_tables_per_component(8)
            .table_elements(20_000)
            // Every call gets a fresh instance in a reused slot. By default a
            // released slot's memory is handed back with `madvise`, so the
            // next call page-faults on every page it touches (and the process
            // pays TLB shootdowns); measured, that was about half of a small
            // validation's wall time. With PAGEMAP_SCAN (Linux 6.7+) wasmtime
            // finds the pages the call dirtied and resets just those to the
            // component's initial image with `memset`, keeping them resident.
            .linear_memory_keep_resident(KEEP_RESIDENT_BYTES)
            .table_keep_resident(KEEP_RESIDENT_TABLE_BYTES)
            .pagemap_scan(wasmtime::Enabled::Auto);
        let mut config = Config::new();
        config
            .consume_fuel(true)
            .epoch_interruption(true)
            .max_wasm_stack(bounds.wasm_stack_bytes as usize)
            .allocation_strategy(pool);
        // For profiling a Language: `perf report` can then name the
        // functions of compiled components (docs/architecture.md).
        if std::env::var_os("PILOTAGE_PERFMAP").is_some_and(|v| v == "1") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        if let Some(cache) = &function_cache {
            config.enable_incremental_compilation(cache.clone()).map_err(|e| EngineError::Config(format!("{e:#}")))?;
        }
        let wasmtime = wasmtime::Engine::new(&config).map_err(|e| EngineError::Config(format!("{e:#}")))?;
        let mut linker = Linker::new(&wasmtime);
        crate::host::add_wasi_without_grants(&mut linker).map_err(|e| EngineError::Config(format!("{e:#}")))?;
        Language::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|e| EngineError::Config(format!("{e:#}")))?;
        let config_key = crate::cache::config_key(&wasmtime);
        let weak = wasmtime.weak();
        std::thread::Builder::new()
            .name("pilotage-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(|e| EngineError::Config(format!("cannot start the epoch ticker: {e}")))?;
        Ok(Engine {
            inner: Arc::new(EngineInner {
                wasmtime,
                linker,
                bounds,
                cache_dir,
                config_key,
                loaded: Mutex::new(HashMap::new()),
                code_loads: AtomicU64::new(0),
                function_cache,
                metrics: Metrics::new().map_err(|e| EngineError::Config(e.to_string()))?,
                clock: Clock::system(),
            }),
        })
    }

    /// The key of this engine's compilation settings in the compiled-code
    /// cache.
    pub fn config_key(&self) -> &str {
        &self.inner.config_key
    }

    /// The metrics of the server this engine serves (a fresh registry per
    /// engine): component calls, bounds, and everything the platform
    /// around it records (`telemetry::metrics`).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The clock calls read `effects.now` from (the system clock until
    /// someone freezes it; see [`Clock`]). Clones share it: the server
    /// reads every instant it needs from this one.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// The bounds every call runs under.
    pub fn bounds(&self) -> &Bounds {
        &self.inner.bounds
    }

    /// How many times this engine produced compiled code and its
    /// pre-instantiation (compiling, or reading the on-disk cache). A load
    /// of bytes already loaded and still in use does not count.
    pub fn code_loads(&self) -> u64 {
        self.inner.code_loads.load(Ordering::SeqCst)
    }

    /// How the function cache has served compilations so far, when this
    /// engine has one ([`Engine::with_function_cache`]).
    pub fn function_cache_stats(&self) -> Option<FunctionCacheStats> {
        self.inner.function_cache.as_ref().map(|cache| cache.stats())
    }

    /// The loaded component whose bytes have this SHA-256 (hex), when one
    /// is loaded on this engine and still in use: the same shared handle
    /// [`Engine::load`] would return for those bytes, without needing them.
    pub fn loaded(&self, sha256: &str) -> Option<Component> {
        self.shared(sha256)
    }

    /// The loaded component for these bytes when one is still in use.
    fn shared(&self, sha256: &str) -> Option<Component> {
        let loaded = self.inner.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let shared = loaded.get(sha256)?.upgrade()?;
        Some(Component { engine: self.clone(), loaded: shared })
    }

    /// Records `loaded` as the shared component for its bytes, forgetting
    /// the entries whose components were all dropped.
    fn register(&self, loaded: &Arc<Loaded>) {
        let mut registry = self.inner.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        registry.retain(|_, weak| weak.strong_count() > 0);
        registry.insert(loaded.sha256.clone(), Arc::downgrade(loaded));
    }

    /// Loads a component from its bytes.
    ///
    /// When a component with the same bytes (the same SHA-256) is already
    /// loaded on this engine and still in use, returns a handle on it: the
    /// compiled code, the pre-instantiation and the description are shared,
    /// nothing is compiled, read or described again. Only immutable things
    /// are shared; every call still gets its own fresh store under its own
    /// bounds. Otherwise the code comes from the compiled-code cache when
    /// an artifact for these bytes, this wasmtime and this configuration
    /// exists, else by compiling (and caching) it; then the component is
    /// pre-instantiated and `describe` is called. Two first loads of the
    /// same bytes at the same moment may both compile; either result is
    /// correct and the later one is shared from then on.
    ///
    /// # Errors
    /// [`EngineError`] when the bytes do not compile, the component imports
    /// what the platform does not grant, or `describe` fails.
    pub fn load(&self, bytes: &[u8]) -> Result<Component, EngineError> {
        let sha256 = hex::encode(Sha256::digest(bytes));
        if let Some(shared) = self.shared(&sha256) {
            return Ok(shared);
        }
        self.inner.code_loads.fetch_add(1, Ordering::SeqCst);
        let (compiled, from_cache) = crate::cache::load_or_compile(
            &self.inner.wasmtime,
            self.inner.cache_dir.as_deref(),
            &self.inner.config_key,
            &sha256,
            bytes,
        )?;
        let instance_pre =
            self.inner.linker.instantiate_pre(&compiled).map_err(|e| EngineError::Imports(format!("{e:#}")))?;
        let pre = LanguagePre::new(instance_pre).map_err(|e| EngineError::Imports(format!("{e:#}")))?;
        // Every export's type is checked once, here: instantiating through
        // the generated `Language` checks all four, so a component whose
        // `execute` does not match the world fails to load instead of
        // failing its first run.
        let (mut store, fueled) = self.store(&self.inner.bounds.validation, crate::host::CallContext::describe());
        fueled.map_err(|e| EngineError::Config(format!("cannot set fuel: {e:#}")))?;
        instantiate_first(&pre, &mut store)?;
        drop(store);
        let exports = ExportIndices::of(&compiled)?;
        let undescribed = Component {
            engine: self.clone(),
            loaded: Arc::new(Loaded { pre, exports, sha256, from_cache, description: placeholder_description() }),
        };
        let described = undescribed
            .call(CallKind::Validation, crate::host::CallContext::describe(), |language, store| {
                language.call_describe(store)
            })
            .map_err(|e| EngineError::Describe(e.to_string()))?;
        let Loaded { pre, exports, sha256, from_cache, .. } = Arc::into_inner(undescribed.loaded)
            .ok_or_else(|| EngineError::Describe("the component was shared before it was described".into()))?;
        let loaded = Arc::new(Loaded {
            pre,
            exports,
            sha256,
            from_cache,
            description: crate::host::description_from_wit(described),
        });
        self.register(&loaded);
        Ok(Component { engine: self.clone(), loaded })
    }

    /// A fresh store for one call under `call_bounds`, with the memory
    /// limiter and the epoch deadline set; the result of setting its fuel
    /// beside it (fuel is always enabled, so that fails only on a host
    /// defect).
    fn store(
        &self,
        call_bounds: &CallBounds,
        context: crate::host::CallContext,
    ) -> (Store<HostState>, wasmtime::Result<()>) {
        let mut store = Store::new(
            &self.inner.wasmtime,
            HostState::new(self.inner.bounds.memory_bytes, context, self.inner.clock.clone()),
        );
        store.limiter(|state| &mut state.limits);
        let fueled = store.set_fuel(call_bounds.fuel);
        store.set_epoch_deadline(call_bounds.epoch_ticks());
        store.epoch_deadline_trap();
        (store, fueled)
    }

    /// Loads a component from a file.
    ///
    /// # Errors
    /// As [`Engine::load`], plus [`EngineError::Compile`] when the file
    /// cannot be read.
    pub fn load_file(&self, path: &Path) -> Result<Component, EngineError> {
        let bytes =
            std::fs::read(path).map_err(|e| EngineError::Compile(format!("cannot read {}: {e}", path.display())))?;
        self.load(&bytes)
    }
}

/// The first instantiation of a freshly loaded component, which also
/// builds its copy-on-write memory image (a sealed memfd). Sealing a memfd
/// fails with EBUSY while the kernel still holds a transient reference to
/// one of its pages (`memfd_wait_for_pins`; seen once under memory
/// pressure, on an 18 MB image): that failure is retried twice, after 50
/// and 200 ms, since the image is built again on the next try; any other
/// failure is the component's.
fn instantiate_first(pre: &LanguagePre<HostState>, store: &mut wasmtime::Store<HostState>) -> Result<(), EngineError> {
    let mut waits = [50, 200].into_iter();
    loop {
        match pre.instantiate(&mut *store) {
            Ok(_) => return Ok(()),
            Err(error) => {
                let text = format!("{error:#}");
                match waits.next() {
                    Some(ms) if text.contains("seals to the memfd") => {
                        tracing::warn!(%text, "sealing a component's memory image failed; retrying");
                        std::thread::sleep(std::time::Duration::from_millis(ms));
                    }
                    _ => return Err(EngineError::Imports(text)),
                }
            }
        }
    }
}

fn placeholder_description() -> LanguageDescription {
    crate::host::description_from_wit(crate::wit::pilotage::language::describe_types::LanguageInfo {
        name: String::new(),
        title: String::new(),
        program_kind: crate::wit::pilotage::language::describe_types::ProgramKind::Json,
        program_argument: String::new(),
        locator: crate::wit::pilotage::language::describe_types::LocatorDialect::JsonPointer,
        execution: crate::wit::pilotage::language::describe_types::ExecutionMode::Immediate,
        trace: crate::wit::pilotage::language::describe_types::TraceCeiling::Summary,
        trace_subprogram: crate::wit::pilotage::language::describe_types::SubprogramTracing::Opaque,
        context_schema: None,
        features: crate::wit::pilotage::language::describe_types::Features {
            plan: false,
            catalog: false,
            execute: false,
            test_run: false,
            promotion: false,
        },
        diagnostic_codes: Vec::new(),
        run_statuses: Vec::new(),
        step_statuses: Vec::new(),
        entry_kinds: Vec::new(),
        risk_levels: Vec::new(),
        guides: Vec::new(),
    })
}

/// Which bounds a call runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// `describe`, `validate`, `bind-input`.
    Validation,
    /// `execute`.
    Execution,
}

/// A loaded Language component. Cheap to clone; calls may run
/// concurrently, each in its own store. Every handle on the same bytes
/// loaded on one engine shares one `Loaded` (see [`Engine::load`]).
#[derive(Clone)]
pub struct Component {
    engine: Engine,
    loaded: Arc<Loaded>,
}

/// What a loaded component holds, shared by every handle on the same
/// bytes: immutable once loaded. No per-call or per-tenant state lives
/// here.
struct Loaded {
    pre: LanguagePre<HostState>,
    exports: ExportIndices,
    sha256: String,
    from_cache: bool,
    description: LanguageDescription,
}

impl std::fmt::Debug for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Component")
            .field("name", &self.loaded.description.name)
            .field("sha256", &self.loaded.sha256)
            .finish()
    }
}

/// What one call consumed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallCost {
    /// Fuel used (undercounted when the deadline fired).
    pub fuel: u64,
    /// Wall time of instantiation and the call.
    pub wall: Duration,
}

impl Component {
    /// What the component declared about itself.
    pub fn description(&self) -> &LanguageDescription {
        &self.loaded.description
    }

    /// Whether the component exports `deploy` (world `deploying-language`),
    /// so its programs can be installed.
    pub fn exports_deploy(&self) -> bool {
        self.loaded.exports.deploy.is_some()
    }

    /// Lowercase hex SHA-256 of the component's bytes.
    pub fn sha256(&self) -> &str {
        &self.loaded.sha256
    }

    /// Whether the compiled code came from the on-disk cache (for a shared
    /// component: when it was first loaded).
    pub fn loaded_from_cache(&self) -> bool {
        self.loaded.from_cache
    }

    /// Whether `self` and `other` are one loaded component: the same
    /// compiled code, pre-instantiation and description in memory.
    pub fn shares_code_with(&self, other: &Component) -> bool {
        Arc::ptr_eq(&self.loaded, &other.loaded)
    }

    /// The engine this component runs on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Runs `f` against a fresh instance in a fresh store under the bounds
    /// of `kind`, with `context` as the store's call context. Blocking: run
    /// it on a thread that may block.
    ///
    /// # Errors
    /// [`CallError`] classifying any trap or bound.
    pub fn call<R>(
        &self,
        kind: CallKind,
        context: crate::host::CallContext,
        f: impl FnOnce(&Exports, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.call_with_state(kind, context, f).0
    }

    /// Like [`Component::call`], also returning the store's final call
    /// context (for the host's record of invocations) and the cost.
    pub fn call_with_state<R>(
        &self,
        kind: CallKind,
        context: crate::host::CallContext,
        f: impl FnOnce(&Exports, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> (Result<R, CallError>, crate::host::CallContext, CallCost) {
        let bounds = &self.engine.inner.bounds;
        let call_bounds = match kind {
            CallKind::Validation => bounds.validation.clone(),
            CallKind::Execution => bounds.execution.clone(),
        };
        self.call_under(kind, &call_bounds, context, f)
    }

    /// Like [`Component::call_with_state`], under `call_bounds` instead of
    /// the engine's bounds for `kind` (a task Run's longer wall time, Part
    /// II §10.1: still a bound, set per tenant).
    pub(crate) fn call_under<R>(
        &self,
        kind: CallKind,
        call_bounds: &CallBounds,
        context: crate::host::CallContext,
        f: impl FnOnce(&Exports, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> (Result<R, CallError>, crate::host::CallContext, CallCost) {
        let bounds = &self.engine.inner.bounds;
        let started = std::time::Instant::now();
        let (mut store, fueled) = self.engine.store(call_bounds, context);
        if let Err(e) = fueled {
            return (
                Err(CallError::Host(format!("cannot set fuel: {e:#}"))),
                store.into_data().call,
                CallCost::default(),
            );
        }
        let result = self
            .loaded
            .pre
            .instance_pre()
            .instantiate(&mut store)
            .and_then(|instance| f(&Exports { instance, indices: &self.loaded.exports }, &mut store));
        let fuel = call_bounds.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let cost = CallCost { fuel, wall: started.elapsed() };
        let memory_denied = store.data().limits.denied;
        let result = result.map_err(|error| classify(&error, memory_denied, call_bounds, bounds.memory_bytes));
        let call = match kind {
            CallKind::Validation => CallLabel::Validation,
            CallKind::Execution => CallLabel::Execution,
        };
        let metrics = &self.engine.inner.metrics;
        metrics.component_call(call, cost.fuel, cost.wall);
        if let Err(error) = &result {
            match error {
                CallError::Fuel => metrics.bound_trip(call, BoundKind::Fuel),
                CallError::Memory(_) => metrics.bound_trip(call, BoundKind::Memory),
                CallError::Timeout(_) => metrics.bound_trip(call, BoundKind::Deadline),
                CallError::Stack => metrics.bound_trip(call, BoundKind::Stack),
                CallError::ResultTooLarge { .. } => metrics.bound_trip(call, BoundKind::ResultBytes),
                CallError::Trap(_) => metrics.guarantee_violation(GuaranteeKind::Trap),
                CallError::Host(_) => {}
            }
        }
        (result, store.into_data().call, cost)
    }
}

/// Where the world's four exports sit in one component, looked up once at
/// load.
struct ExportIndices {
    describe: ComponentExportIndex,
    validate: ComponentExportIndex,
    bind_input: ComponentExportIndex,
    execute: ComponentExportIndex,
    /// `deploy`, exported by components of the world `deploying-language`
    /// (1.2.0) only.
    deploy: Option<ComponentExportIndex>,
}

impl ExportIndices {
    fn of(component: &wasmtime::component::Component) -> Result<ExportIndices, EngineError> {
        let index = |name: &str| {
            component
                .get_export_index(None, name)
                .ok_or_else(|| EngineError::Imports(format!("the component does not export '{name}'")))
        };
        Ok(ExportIndices {
            describe: index("describe")?,
            validate: index("validate")?,
            bind_input: index("bind-input")?,
            execute: index("execute")?,
            deploy: component.get_export_index(None, "deploy"),
        })
    }
}

/// The exports of one fresh instance, as a call sees them. Each method
/// fetches only the export it calls: fetching checks the export's type
/// against the world, and checking all four on every call (as the generated
/// `Language` does) was a measurable share of a small validation.
pub struct Exports<'c> {
    instance: wasmtime::component::Instance,
    indices: &'c ExportIndices,
}

impl Exports<'_> {
    /// Calls `describe`.
    ///
    /// # Errors
    /// A trap, a bound, or an export whose type does not match the world.
    pub fn call_describe(&self, store: &mut Store<HostState>) -> wasmtime::Result<describe_types::LanguageInfo> {
        let func =
            self.instance.get_typed_func::<(), (describe_types::LanguageInfo,)>(&mut *store, &self.indices.describe)?;
        Ok(func.call(store, ())?.0)
    }

    /// Calls `validate(program, context)`.
    ///
    /// # Errors
    /// As [`Exports::call_describe`].
    pub fn call_validate(
        &self,
        store: &mut Store<HostState>,
        program: &str,
        context: Option<&str>,
    ) -> wasmtime::Result<run_types::Validation> {
        let func = self
            .instance
            .get_typed_func::<(&str, Option<&str>), (run_types::Validation,)>(&mut *store, &self.indices.validate)?;
        Ok(func.call(store, (program, context))?.0)
    }

    /// Calls `bind-input(program, input)`.
    ///
    /// # Errors
    /// As [`Exports::call_describe`].
    pub(crate) fn call_bind_input(
        &self,
        store: &mut Store<HostState>,
        program: &str,
        input: Option<&str>,
    ) -> wasmtime::Result<Vec<types::Diagnostic>> {
        let func = self
            .instance
            .get_typed_func::<(&str, Option<&str>), (Vec<types::Diagnostic>,)>(&mut *store, &self.indices.bind_input)?;
        Ok(func.call(store, (program, input))?.0)
    }

    /// Calls `execute(request)`.
    ///
    /// # Errors
    /// As [`Exports::call_describe`].
    pub(crate) fn call_execute(
        &self,
        store: &mut Store<HostState>,
        request: &run_types::RunRequest,
    ) -> wasmtime::Result<run_types::RunResult> {
        let func = self
            .instance
            .get_typed_func::<(&run_types::RunRequest,), (run_types::RunResult,)>(&mut *store, &self.indices.execute)?;
        Ok(func.call(store, (request,))?.0)
    }

    /// Calls `deploy(request)` (world `deploying-language`, 1.2.0).
    ///
    /// # Errors
    /// As [`Exports::call_describe`]; also when the component does not
    /// export `deploy`.
    pub(crate) fn call_deploy(
        &self,
        store: &mut Store<HostState>,
        request: &run_types::RunRequest,
    ) -> wasmtime::Result<run_types::DeployResult> {
        let Some(index) = &self.indices.deploy else {
            wasmtime::bail!(
                "the component does not export 'deploy' (world deploying-language of pilotage:language@1.2.0), so it cannot install programs"
            );
        };
        let func = self
            .instance
            .get_typed_func::<(&run_types::RunRequest,), (run_types::DeployResult,)>(&mut *store, index)?;
        Ok(func.call(store, (request,))?.0)
    }
}

fn classify(error: &wasmtime::Error, memory_denied: bool, call_bounds: &CallBounds, memory_bytes: u64) -> CallError {
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => CallError::Fuel,
        Some(Trap::Interrupt) => CallError::Timeout(call_bounds.wall_time_ms),
        Some(Trap::StackOverflow) => CallError::Stack,
        // A denied memory grow makes the guest's allocator abort; deep
        // recursion can exhaust the guest's shadow stack in linear memory.
        Some(_) if memory_denied => CallError::Memory(memory_bytes),
        Some(Trap::MemoryOutOfBounds) => CallError::Stack,
        Some(trap) => CallError::Trap(format!("{trap}")),
        None if memory_denied => CallError::Memory(memory_bytes),
        None => CallError::Trap(format!("{error:#}")),
    }
}
