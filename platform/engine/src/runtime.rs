//! The wasmtime engines that run Language components (ARCHITECTURE.md,
//! "The Language component"; Part II §10.1 bounded evaluation).
//!
//! - [`Engine`]: two wasmtime engines with the component model, fuel,
//!   epoch interruption and a bounded wasm stack, one per pool
//!   (`capacity`): validation calls in slots that keep their pages
//!   resident, Runs in slots that keep nothing; an epoch ticker thread; the
//!   linker with the Language imports and a WASI p2 that grants nothing;
//!   the node's [`Admission`].
//! - [`Component`]: one loaded Language: compiled (or loaded from the
//!   on-disk cache) once, pre-instantiated in both engines, described, and
//!   its [`Need`] of a pool counted. Loads of the same bytes share one
//!   loaded component (by SHA-256), so a tenant that publishes a Language
//!   another tenant already uses costs no code.
//! - [`Call`]: one call into a fresh instance in a fresh store, made with
//!   wasmtime's async API: the guest runs on a fiber, host imports that
//!   wait (`invoke`, `sql.query`) await on the runtime, and a guest that
//!   never waits yields to the runtime at every epoch tick, so no call
//!   holds a thread while it waits or starves the other tasks while it
//!   computes.
//!
//! Every call gets a fresh `Store` with fuel, a memory cap and a
//! wall-time deadline checked at each epoch tick; a trap drops the
//! instance, never the process. Failures come back as [`CallError`],
//! classified so the caller can choose the spec's channel: a request error
//! during validation, an outcome during execution.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{ComponentExportIndex, HasSelf, Instance, Linker};
use wasmtime::{Config, PoolingAllocationConfig, Store, Trap, UpdateDeadline};

use crate::admission::Admission;
use crate::bounds::{Bounds, CallBounds, EPOCH_TICK};
use crate::capacity::{Capacity, Need, PoolTotals, ResolvedCapacity, TOOL_CAPACITY};
use crate::clock::Clock;
use crate::description::LanguageDescription;
use crate::error::{CallError, EngineError};
use crate::function_cache::{FunctionCache, FunctionCacheStats};
use crate::host::{CallContext, HostState};
use pilotage_telemetry::metrics::{BoundKind, CallLabel, GuaranteeKind, Metrics};

use crate::wit::pilotage::language::{describe_types, run_types, types};
use crate::wit::{Language, LanguagePre};

/// Bytes of each pooled validation memory kept resident between calls
/// and reset in place (only the dirtied pages, where the kernel offers
/// PAGEMAP_SCAN). Covers a Rust guest's 1 MiB stack, its data and a few
/// MiB of heap; memory a call touches beyond this is released with
/// `madvise`. Runs keep nothing (`capacity`).
pub(crate) const KEEP_RESIDENT_BYTES: usize = 4 << 20;

/// Bytes of each pooled validation table kept resident between calls
/// (see [`KEEP_RESIDENT_BYTES`]).
pub(crate) const KEEP_RESIDENT_TABLE_BYTES: usize = 64 << 10;

/// How long past a Run's deadline its guest may still run to report what
/// the deadline stopped (a statement the data source cancelled at it, the
/// rollback awaited first) before the engine interrupts it.
const REPORT_GRACE: Duration = Duration::from_millis(100);

/// Memories one component may define (each pooled slot reserves address
/// space for this many).
const MAX_MEMORIES_PER_COMPONENT: u32 = 4;

/// Tables one component may define.
const MAX_TABLES_PER_COMPONENT: u32 = 8;

/// The platform's wasm engines. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

/// One wasmtime engine and its linker: the validation pool's or the
/// execution pool's.
struct Side {
    wasmtime: wasmtime::Engine,
    linker: Linker<HostState>,
}

struct EngineInner {
    validation: Side,
    execution: Side,
    bounds: Bounds,
    capacity: ResolvedCapacity,
    admission: Admission,
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

/// The pooling allocator of one pool: its totals, the per-component
/// maxima, and what a released slot keeps resident.
fn pool_config(bounds: &Bounds, totals: PoolTotals, keep_resident: bool) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(totals.component_instances)
        .total_core_instances(totals.core_instances)
        .total_memories(totals.memories)
        .total_tables(totals.tables)
        // One fiber stack per call in flight.
        .total_stacks(totals.component_instances)
        .max_memory_size(bounds.memory_bytes as usize)
        .max_component_instance_size(1 << 20)
        .max_core_instances_per_component(bounds.core_instances_per_component)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .table_elements(20_000)
        .pagemap_scan(wasmtime::Enabled::Auto);
    if keep_resident {
        // Every call gets a fresh instance in a reused slot. By default a
        // released slot's memory is handed back with `madvise`, so the
        // next call page-faults on every page it touches (and the process
        // pays TLB shootdowns); measured, that was about half of a small
        // validation's wall time. With PAGEMAP_SCAN (Linux 6.7+) wasmtime
        // finds the pages the call dirtied and resets just those to the
        // component's initial image with `memset`, keeping them resident.
        pool.linear_memory_keep_resident(KEEP_RESIDENT_BYTES).table_keep_resident(KEEP_RESIDENT_TABLE_BYTES);
    } else {
        // Runs: a slot keeps nothing once its Run ends. wasmtime 48 never
        // releases what a slot keeps (`Engine::release_idle_pool_memory`
        // comes in 50), so keeping pages here would hold a burst's memory
        // for good: every slot a burst used would keep its pages.
        pool.linear_memory_keep_resident(0).table_keep_resident(0).async_stack_keep_resident(0);
    }
    pool
}

/// One engine's configuration: everything but the pool is the same for
/// both, so compiled code moves between them.
fn side(
    bounds: &Bounds,
    totals: PoolTotals,
    keep_resident: bool,
    function_cache: Option<&Arc<FunctionCache>>,
) -> Result<Side, EngineError> {
    let config_error = |e: wasmtime::Error| EngineError::Config(format!("{e:#}"));
    let mut config = Config::new();
    config
        .consume_fuel(true)
        .epoch_interruption(true)
        .max_wasm_stack(bounds.wasm_stack_bytes as usize)
        // The fiber stack holds the guest's wasm stack and the host's
        // frames while it polls an import's future.
        .async_stack_size((bounds.wasm_stack_bytes as usize + (1 << 20)).max(2 << 20))
        // Runs' stacks are zeroed (handed back with `madvise`) when the Run
        // ends, so a burst of waiting Runs leaves no stack memory behind.
        .async_stack_zeroing(!keep_resident)
        .allocation_strategy(pool_config(bounds, totals, keep_resident));
    // For profiling a Language: `perf report` can then name the
    // functions of compiled components (docs/architecture.md).
    if std::env::var_os("PILOTAGE_PERFMAP").is_some_and(|v| v == "1") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if let Some(cache) = function_cache {
        config.enable_incremental_compilation(cache.clone()).map_err(config_error)?;
    }
    let wasmtime = wasmtime::Engine::new(&config).map_err(config_error)?;
    let mut linker = Linker::new(&wasmtime);
    crate::host::add_wasi_without_grants(&mut linker).map_err(config_error)?;
    Language::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state).map_err(config_error)?;
    Ok(Side { wasmtime, linker })
}

impl Engine {
    /// Creates the engines with `bounds` and small pools (for tools and
    /// tests: [`TOOL_CAPACITY`]), caching compiled code under `cache_dir`
    /// when given, and starts the epoch ticker.
    ///
    /// # Errors
    /// [`EngineError::Config`] when wasmtime rejects the configuration.
    pub fn new(bounds: Bounds, cache_dir: Option<PathBuf>) -> Result<Engine, EngineError> {
        Engine::with_capacity(bounds, &TOOL_CAPACITY, cache_dir, None)
    }

    /// As [`Engine::new`] with small pools, and when `function_cache` is
    /// given, every compilation reuses the compiled functions it holds and
    /// adds its own (Cranelift's incremental compilation): a rebuilt
    /// component whose bytes differ but whose functions mostly do not
    /// compiles in a fraction of the time.
    ///
    /// # Errors
    /// [`EngineError::Config`] when wasmtime rejects the configuration.
    pub fn with_function_cache(
        bounds: Bounds,
        cache_dir: Option<PathBuf>,
        function_cache: Option<Arc<FunctionCache>>,
    ) -> Result<Engine, EngineError> {
        Engine::with_capacity(bounds, &TOOL_CAPACITY, cache_dir, function_cache)
    }

    /// The engines of a server: pools of `capacity` (resolved for this
    /// node, `Capacity::resolve`), `bounds` for every call, compiled code
    /// cached under `cache_dir`, and incremental compilation through
    /// `function_cache` (a Language author's loop, `serve --language`).
    ///
    /// # Errors
    /// [`EngineError::Config`] when wasmtime rejects the configuration
    /// (a pool larger than the address space, say).
    pub fn with_capacity(
        bounds: Bounds,
        capacity: &Capacity,
        cache_dir: Option<PathBuf>,
        function_cache: Option<Arc<FunctionCache>>,
    ) -> Result<Engine, EngineError> {
        let resolved = capacity.resolve(MAX_MEMORIES_PER_COMPONENT, MAX_TABLES_PER_COMPONENT);
        let validation = side(&bounds, resolved.validation, true, function_cache.as_ref())?;
        let execution = side(&bounds, resolved.execution, false, None)?;
        let config_key = crate::cache::config_key(&validation.wasmtime);
        let engines = [validation.wasmtime.weak(), execution.wasmtime.weak()];
        std::thread::Builder::new()
            .name("pilotage-epoch".into())
            .spawn(move || {
                loop {
                    let mut alive = false;
                    for weak in &engines {
                        if let Some(engine) = weak.upgrade() {
                            engine.increment_epoch();
                            alive = true;
                        }
                    }
                    if !alive {
                        return;
                    }
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(|e| EngineError::Config(format!("cannot start the epoch ticker: {e}")))?;
        let metrics = Metrics::new().map_err(|e| EngineError::Config(e.to_string()))?;
        Ok(Engine {
            inner: Arc::new(EngineInner {
                admission: Admission::new(resolved, capacity, metrics.clone()),
                validation,
                execution,
                bounds,
                capacity: resolved,
                cache_dir,
                config_key,
                loaded: Mutex::new(HashMap::new()),
                code_loads: AtomicU64::new(0),
                function_cache,
                metrics,
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
    /// engine): component calls, bounds, capacity, and everything the
    /// platform around it records (`telemetry::metrics`).
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

    /// Both pools' totals, as resolved for this node.
    pub fn capacity(&self) -> &ResolvedCapacity {
        &self.inner.capacity
    }

    /// The node's admission to both pools (`admission`).
    pub fn admission(&self) -> &Admission {
        &self.inner.admission
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

    /// Loads a component from its bytes. Blocking (it compiles): call it
    /// where a thread may block (`spawn_blocking`), never on an async
    /// worker.
    ///
    /// When a component with the same bytes (the same SHA-256) is already
    /// loaded on this engine and still in use, returns a handle on it: the
    /// compiled code, the pre-instantiations and the description are
    /// shared, nothing is compiled, read or described again. Only
    /// immutable things are shared; every call still gets its own fresh
    /// store under its own bounds. Otherwise the code comes from the
    /// compiled-code cache when an artifact for these bytes, this wasmtime
    /// and this configuration exists, else by compiling (and caching) it;
    /// the same code is then loaded into the execution engine, both are
    /// pre-instantiated and `describe` is called. Two first loads of the
    /// same bytes at the same moment may both compile; either result is
    /// correct and the later one is shared from then on.
    ///
    /// # Errors
    /// [`EngineError`] when the bytes do not compile, the component imports
    /// what the platform does not grant, or `describe` fails.
    pub fn load(&self, bytes: &[u8]) -> Result<Component, EngineError> {
        let sha256 = hex::encode(Sha256::digest(bytes));
        if let Some(shared) = self.loaded(&sha256) {
            return Ok(shared);
        }
        self.inner.code_loads.fetch_add(1, Ordering::SeqCst);
        let inner = &self.inner;
        let (compiled, from_cache) = crate::cache::load_or_compile(
            &inner.validation.wasmtime,
            inner.cache_dir.as_deref(),
            &inner.config_key,
            &sha256,
            bytes,
        )?;
        let for_runs = crate::cache::load_into(
            &inner.execution.wasmtime,
            &compiled,
            inner.cache_dir.as_deref(),
            &inner.config_key,
            &sha256,
            bytes,
        )?;
        let maxima = Need {
            component_instances: 1,
            core_instances: inner.bounds.core_instances_per_component,
            memories: MAX_MEMORIES_PER_COMPONENT,
            tables: MAX_TABLES_PER_COMPONENT,
        };
        let need = Need::of(bytes, &compiled, maxima);
        inner.capacity.holds(need).map_err(EngineError::Capacity)?;
        let validation = Code::new(&inner.validation, &compiled)?;
        let execution = Code::new(&inner.execution, &for_runs)?;
        // Both engines build their copy-on-write memory images on a first
        // instantiation, here rather than on a tenant's first call.
        let bounds = &inner.bounds.validation;
        for (code, pool) in [(&validation, &inner.validation), (&execution, &inner.execution)] {
            let (mut store, fueled) = self.store(&pool.wasmtime, bounds, CallContext::describe(), Duration::ZERO);
            fueled.map_err(|e| EngineError::Config(format!("cannot set fuel: {e:#}")))?;
            futures::executor::block_on(instantiate_first(&code.pre, &mut store))?;
        }
        let described = futures::executor::block_on(async {
            let mut call = self.start_code(&validation, CallKind::Validation, bounds, CallContext::describe()).await?;
            call.describe().await
        })
        .map_err(|e| EngineError::Describe(e.to_string()))?;
        let loaded = Arc::new(Loaded {
            validation,
            execution,
            need,
            sha256,
            from_cache,
            description: crate::host::description_from_wit(described),
        });
        self.register(&loaded);
        Ok(Component { engine: self.clone(), loaded })
    }

    /// A fresh store of `wasmtime` for one call under `call_bounds`, with
    /// the memory limiter and the wall-time deadline set; the result of
    /// setting its fuel beside it (fuel is always enabled, so that fails
    /// only on a host defect).
    ///
    /// At every epoch tick the guest yields to the runtime, so a guest
    /// that computes without end cannot hold a worker thread; past the
    /// deadline (plus `grace`) the tick interrupts it (`Trap::Interrupt`).
    fn store(
        &self,
        wasmtime: &wasmtime::Engine,
        call_bounds: &CallBounds,
        context: CallContext,
        grace: Duration,
    ) -> (Store<HostState>, wasmtime::Result<()>) {
        let mut store =
            Store::new(wasmtime, HostState::new(self.inner.bounds.memory_bytes, context, self.inner.clock.clone()));
        store.limiter(|state| &mut state.limits);
        let fueled = store.set_fuel(call_bounds.fuel);
        let deadline = Instant::now() + call_bounds.wall_time() + grace;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now())))
            }
        });
        (store, fueled)
    }

    /// Instantiates `code` in a fresh store for one call.
    async fn start_code<'c>(
        &self,
        code: &'c Code,
        kind: CallKind,
        call_bounds: &CallBounds,
        context: CallContext,
    ) -> Result<Call<'c>, CallError> {
        let started = Instant::now();
        let side = match kind {
            CallKind::Validation => &self.inner.validation,
            CallKind::Execution => &self.inner.execution,
        };
        // A Run's statements stop at the Run's own deadline (the data
        // source's timeout is the time the Run has left); its guest is
        // interrupted `REPORT_GRACE` later, so it can still report the
        // statement that was stopped (the host judges the Run `timeout`
        // either way: `execution`).
        let grace = match kind {
            CallKind::Validation => Duration::ZERO,
            CallKind::Execution => REPORT_GRACE,
        };
        let (mut store, fueled) = self.store(&side.wasmtime, call_bounds, context, grace);
        fueled.map_err(|e| CallError::Host(format!("cannot set fuel: {e:#}")))?;
        let memory_bytes = self.inner.bounds.memory_bytes;
        let instance = code.pre.instance_pre().instantiate_async(&mut store).await.map_err(|error| {
            let denied = store.data().limits.denied;
            classify(&error, denied, call_bounds, memory_bytes)
        });
        let metrics = &self.inner.metrics;
        let label = kind.label();
        let instance = match instance {
            Ok(instance) => instance,
            Err(error) => {
                count_failure(metrics, label, &error);
                return Err(error);
            }
        };
        Ok(Call {
            store,
            instance,
            exports: &code.exports,
            call_bounds: call_bounds.clone(),
            memory_bytes,
            label,
            metrics: metrics.clone(),
            started,
        })
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
async fn instantiate_first(pre: &LanguagePre<HostState>, store: &mut Store<HostState>) -> Result<(), EngineError> {
    let mut waits = [50, 200].into_iter();
    loop {
        match pre.instantiate_async(&mut *store).await {
            Ok(_) => return Ok(()),
            Err(error) => {
                let text = format!("{error:#}");
                match waits.next() {
                    Some(ms) if text.contains("seals to the memfd") => {
                        tracing::warn!(%text, "sealing a component's memory image failed; retrying");
                        std::thread::sleep(Duration::from_millis(ms));
                    }
                    _ => return Err(EngineError::Imports(text)),
                }
            }
        }
    }
}

/// Which bounds a call runs under, and in which pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// `describe`, `validate`, `bind-input`: the validation pool.
    Validation,
    /// `execute`, `deploy`: the execution pool.
    Execution,
}

impl CallKind {
    fn label(self) -> CallLabel {
        match self {
            CallKind::Validation => CallLabel::Validation,
            CallKind::Execution => CallLabel::Execution,
        }
    }
}

/// A loaded Language component. Cheap to clone; calls may run
/// concurrently, each in its own store. Every handle on the same bytes
/// loaded on one engine shares one `Loaded` (see [`Engine::load`]).
#[derive(Clone)]
pub struct Component {
    engine: Engine,
    loaded: Arc<Loaded>,
}

/// One engine's compiled copy of a component, pre-instantiated.
struct Code {
    pre: LanguagePre<HostState>,
    exports: ExportIndices,
}

impl Code {
    /// Pre-instantiates `compiled` with `side`'s linker. Every export's
    /// type is checked once, here: the generated `LanguagePre` checks all
    /// four, so a component whose `execute` does not match the world
    /// fails to load instead of failing its first Run.
    fn new(side: &Side, compiled: &wasmtime::component::Component) -> Result<Code, EngineError> {
        let instance_pre = side.linker.instantiate_pre(compiled).map_err(|e| EngineError::Imports(format!("{e:#}")))?;
        let pre = LanguagePre::new(instance_pre).map_err(|e| EngineError::Imports(format!("{e:#}")))?;
        Ok(Code { pre, exports: ExportIndices::of(compiled)? })
    }
}

/// What a loaded component holds, shared by every handle on the same
/// bytes: immutable once loaded. No per-call or per-tenant state lives
/// here.
struct Loaded {
    validation: Code,
    execution: Code,
    need: Need,
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

    /// What one call of this component takes of a pool (counted when it
    /// was loaded): the admission weighs its calls by it.
    pub fn need(&self) -> Need {
        self.loaded.need
    }

    /// Whether the component exports `deploy` (world `deploying-language`),
    /// so its programs can be installed.
    pub fn exports_deploy(&self) -> bool {
        self.loaded.validation.exports.deploy.is_some()
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
    /// compiled code, pre-instantiations and description in memory.
    pub fn shares_code_with(&self, other: &Component) -> bool {
        Arc::ptr_eq(&self.loaded, &other.loaded)
    }

    /// The engine this component runs on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// A fresh instance in a fresh store under the engine's bounds for
    /// `kind`, in `kind`'s pool, with `context` as the store's call
    /// context: one [`Call`].
    ///
    /// # Errors
    /// [`CallError`] when instantiation fails: [`CallError::Capacity`]
    /// when the pool is full, else a bound or a trap of the component's
    /// start.
    pub async fn start(&self, kind: CallKind, context: CallContext) -> Result<Call<'_>, CallError> {
        let bounds = &self.engine.inner.bounds;
        let call_bounds = match kind {
            CallKind::Validation => &bounds.validation,
            CallKind::Execution => &bounds.execution,
        };
        self.start_under(kind, call_bounds, context).await
    }

    /// Like [`Component::start`], under `call_bounds` instead of the
    /// engine's bounds for `kind` (a task Run's longer wall time, Part II
    /// §10.1: still a bound, set per tenant).
    pub(crate) async fn start_under(
        &self,
        kind: CallKind,
        call_bounds: &CallBounds,
        context: CallContext,
    ) -> Result<Call<'_>, CallError> {
        let code = match kind {
            CallKind::Validation => &self.loaded.validation,
            CallKind::Execution => &self.loaded.execution,
        };
        self.engine.start_code(code, kind, call_bounds, context).await
    }
}

/// One call into a fresh instance: call one export, then
/// [`Call::finish`]. The guest runs on a fiber of its own; each export
/// method awaits until the guest returns, traps or reaches a bound. After
/// a trap the instance cannot be entered again (a further call fails as a
/// trap).
pub struct Call<'c> {
    store: Store<HostState>,
    instance: Instance,
    exports: &'c ExportIndices,
    call_bounds: CallBounds,
    memory_bytes: u64,
    label: CallLabel,
    metrics: Metrics,
    started: Instant,
}

impl Call<'_> {
    /// Classifies a failed export call and counts it.
    fn failed(&self, error: &wasmtime::Error) -> CallError {
        let error = classify(error, self.store.data().limits.denied, &self.call_bounds, self.memory_bytes);
        count_failure(&self.metrics, self.label, &error);
        error
    }

    /// Calls `describe`.
    ///
    /// # Errors
    /// [`CallError`]: a trap, a bound, or an export whose type does not
    /// match the world.
    pub async fn describe(&mut self) -> Result<describe_types::LanguageInfo, CallError> {
        let result: wasmtime::Result<_> = async {
            let func = self
                .instance
                .get_typed_func::<(), (describe_types::LanguageInfo,)>(&mut self.store, &self.exports.describe)?;
            Ok(func.call_async(&mut self.store, ()).await?.0)
        }
        .await;
        result.map_err(|error| self.failed(&error))
    }

    /// Calls `validate(program, context)`.
    ///
    /// # Errors
    /// As [`Call::describe`].
    pub async fn validate(&mut self, program: &str, context: Option<&str>) -> Result<run_types::Validation, CallError> {
        let result: wasmtime::Result<_> = async {
            let func = self.instance.get_typed_func::<(&str, Option<&str>), (run_types::Validation,)>(
                &mut self.store,
                &self.exports.validate,
            )?;
            Ok(func.call_async(&mut self.store, (program, context)).await?.0)
        }
        .await;
        result.map_err(|error| self.failed(&error))
    }

    /// Calls `bind-input(program, input)`.
    ///
    /// # Errors
    /// As [`Call::describe`].
    pub(crate) async fn bind_input(
        &mut self,
        program: &str,
        input: Option<&str>,
    ) -> Result<Vec<types::Diagnostic>, CallError> {
        let result: wasmtime::Result<_> = async {
            let func = self.instance.get_typed_func::<(&str, Option<&str>), (Vec<types::Diagnostic>,)>(
                &mut self.store,
                &self.exports.bind_input,
            )?;
            Ok(func.call_async(&mut self.store, (program, input)).await?.0)
        }
        .await;
        result.map_err(|error| self.failed(&error))
    }

    /// Calls `execute(request)`.
    ///
    /// # Errors
    /// As [`Call::describe`].
    pub(crate) async fn execute(&mut self, request: &run_types::RunRequest) -> Result<run_types::RunResult, CallError> {
        let result: wasmtime::Result<_> = async {
            let func = self.instance.get_typed_func::<(&run_types::RunRequest,), (run_types::RunResult,)>(
                &mut self.store,
                &self.exports.execute,
            )?;
            Ok(func.call_async(&mut self.store, (request,)).await?.0)
        }
        .await;
        result.map_err(|error| self.failed(&error))
    }

    /// Calls `deploy(request)` (world `deploying-language`, 1.2.0).
    ///
    /// # Errors
    /// As [`Call::describe`]; also when the component does not export
    /// `deploy`.
    pub(crate) async fn deploy(
        &mut self,
        request: &run_types::RunRequest,
    ) -> Result<run_types::DeployResult, CallError> {
        let result: wasmtime::Result<_> = async {
            let Some(index) = &self.exports.deploy else {
                wasmtime::bail!(
                    "the component does not export 'deploy' (world deploying-language of pilotage:language@1.2.0), so it cannot install programs"
                );
            };
            let func = self
                .instance
                .get_typed_func::<(&run_types::RunRequest,), (run_types::DeployResult,)>(&mut self.store, index)?;
            Ok(func.call_async(&mut self.store, (request,)).await?.0)
        }
        .await;
        result.map_err(|error| self.failed(&error))
    }

    /// Ends the call: counts its fuel and time, and returns the store's
    /// final call context (for the host's record of invocations and the
    /// component's log) with the cost.
    pub fn finish(self) -> (CallContext, CallCost) {
        let fuel = self.call_bounds.fuel.saturating_sub(self.store.get_fuel().unwrap_or(0));
        let cost = CallCost { fuel, wall: self.started.elapsed() };
        self.metrics.component_call(self.label, cost.fuel, cost.wall);
        (self.store.into_data().call, cost)
    }
}

/// Counts a failed call under its bound or as a guarantee violation.
fn count_failure(metrics: &Metrics, call: CallLabel, error: &CallError) {
    match error {
        CallError::Fuel => metrics.bound_trip(call, BoundKind::Fuel),
        CallError::Memory(_) => metrics.bound_trip(call, BoundKind::Memory),
        CallError::Timeout(_) => metrics.bound_trip(call, BoundKind::Deadline),
        CallError::Stack => metrics.bound_trip(call, BoundKind::Stack),
        CallError::ResultTooLarge { .. } => metrics.bound_trip(call, BoundKind::ResultBytes),
        CallError::Trap(_) => metrics.guarantee_violation(GuaranteeKind::Trap),
        CallError::Capacity(_) | CallError::Host(_) => {}
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

fn classify(error: &wasmtime::Error, memory_denied: bool, call_bounds: &CallBounds, memory_bytes: u64) -> CallError {
    if let Some(full) = error.downcast_ref::<wasmtime::PoolConcurrencyLimitError>() {
        return CallError::Capacity(full.to_string());
    }
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
