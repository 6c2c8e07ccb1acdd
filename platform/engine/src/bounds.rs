//! The resource bounds every evaluation of a program runs under
//! (Part II §10.1). Each is a named setting with a default, a unit and a
//! documented failure mode; none can be switched off.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Bounds for one kind of call into a Language component (validation or
/// execution).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallBounds {
    /// Wasm fuel (≈ instructions) the component may burn in this call.
    /// Overrun: `bounds_exceeded` (validation) or `resource_exhausted`
    /// (execution).
    pub fuel: u64,
    /// Wall-time budget for the call, host calls included, in
    /// milliseconds. Checked at every `EPOCH_TICK` (10 ms) while the
    /// guest computes, where it also yields to the runtime. Overrun: `bounds_exceeded` (validation) or
    /// `timeout` (execution).
    pub wall_time_ms: u64,
}

/// Every bound, with its default. Units are in the field names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Bounds {
    /// Bounds of `describe`, `validate` and `bind-input`.
    pub validation: CallBounds,
    /// Bounds of `execute`.
    pub execution: CallBounds,
    /// Linear memory one component instance may grow to, in bytes. A
    /// component's initial memory counts: the bundled Languages start at
    /// about 1.7 MiB (1 MiB stack, data, a 512 KiB allocation arena).
    /// Overrun: the guest's allocation fails and it traps; reported as
    /// `bounds_exceeded` / `resource_exhausted`.
    pub memory_bytes: u64,
    /// Wasm stack the component may use, in bytes (bounds recursion).
    /// Overrun: `bounds_exceeded` / `resource_exhausted`.
    pub wasm_stack_bytes: u64,
    /// Core WebAssembly module instances one component may create when it
    /// is instantiated (each of its modules, linked at instantiation, is
    /// one). Bounds the share of the engine's pool (1,024 core instances
    /// in all, so at least 32 concurrent instances at the default) one
    /// instance can take. Components built from Rust or JavaScript use a
    /// handful; CPython built by componentize-py with its WASI stubs uses
    /// 38.
    /// At most 1,024. Overrun: the component is refused when it is loaded
    /// (`not a valid WebAssembly component`).
    pub core_instances_per_component: u32,
    /// Largest program accepted, in bytes of its JSON text or text.
    /// Overrun: `bounds_exceeded`, before the component is called.
    pub program_bytes: u64,
    /// Deepest JSON nesting accepted in a JSON program. Overrun:
    /// `bounds_exceeded`, before the component is called.
    pub nesting_depth: u32,
    /// Invocations one Run may make (sub-program Runs included). Overrun:
    /// the invocation is refused and the Run ends `resource_exhausted`.
    pub invocations_per_run: u32,
    /// Nesting of promoted programs calling promoted programs. Overrun:
    /// the call is refused and the Run ends `resource_exhausted`.
    pub expansion_depth: u32,
    /// Largest result a component may return (diagnostics, plan, trace and
    /// output together, as JSON text), in bytes. Overrun:
    /// `bounds_exceeded` / `resource_exhausted`.
    pub result_bytes: u64,
    /// Largest input or output of one invocation, in bytes of JSON text.
    /// Overrun: that invocation fails (the step fails).
    pub invocation_bytes: u64,
    /// Wall time for one HTTP invocation, in milliseconds, unless the
    /// entry's binding sets a lower one.
    pub invocation_timeout_ms: u64,
}

/// How often the engine's epoch advances; deadlines are checked at this
/// granularity.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            validation: CallBounds { fuel: 2_000_000_000, wall_time_ms: 2_000 },
            execution: CallBounds { fuel: 20_000_000_000, wall_time_ms: 30_000 },
            memory_bytes: 64 << 20,
            wasm_stack_bytes: 512 << 10,
            core_instances_per_component: 32,
            program_bytes: 1 << 20,
            nesting_depth: 64,
            invocations_per_run: 1_000,
            expansion_depth: 4,
            result_bytes: 8 << 20,
            invocation_bytes: 4 << 20,
            invocation_timeout_ms: 10_000,
        }
    }
}

impl Default for CallBounds {
    fn default() -> Self {
        Bounds::default().validation
    }
}

impl CallBounds {
    /// The wall-time budget as a duration.
    pub(crate) fn wall_time(&self) -> Duration {
        Duration::from_millis(self.wall_time_ms)
    }
}
