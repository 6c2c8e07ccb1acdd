//! The node's capacity for component calls (issue: "Runs that wait cost
//! nothing"): how many fresh instances may exist at once, and what each
//! Language needs of it.
//!
//! Calls run in two pools of their own, because they cost the node in two
//! different ways:
//!
//! - **validation** (`describe`, `validate`, `bind-input`): short and bound
//!   by CPU (no import awaits anything), so more of them at once than the
//!   node has cores only interleaves them. Their slots keep the pages a
//!   call touched resident between calls, which is what makes a small
//!   validation cheap; with few slots that memory stays small and is the
//!   same before and after a burst.
//! - **execution** (`execute`, `deploy`): a Run mostly waits on the
//!   tenant's upstreams, so thousands may be in flight at once, each a
//!   suspended task. Their slots keep nothing resident: a slot's dirtied
//!   pages and its fiber stack are handed back to the kernel when the Run
//!   ends, so a burst's memory comes back as soon as it is over.
//!
//! [`Capacity`] holds the totals of both pools as named bounds (0 = derived
//! for the node, [`Capacity::resolve`]); [`Need`] is what one call of a
//! given Language takes of them, counted when the Language is loaded.

use serde::{Deserialize, Serialize};

/// The pools' totals and the admission queue's bounds. A total of 0 is
/// derived for the node when the engine starts ([`Capacity::resolve`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Capacity {
    /// Validation calls (`describe`, `validate`, `bind-input`) running at
    /// once on this node, all tenants together. 0 (default): four per
    /// core, at least 8. More only interleaves CPU-bound calls, and each
    /// slot keeps up to 4 MiB of its last call resident.
    pub validation_instances: u32,
    /// Core module instances the validation pool holds. 0 (default): 32 per
    /// validation instance (a CPython Language links 38, a Rust one 1–4).
    pub validation_core_instances: u32,
    /// Runs (`execute`, `deploy`) in flight at once on this node, waiting
    /// ones included. 0 (default): one per 4 MiB of the node's memory,
    /// between 256 and 4,096. Each pooled instance reserves 4 GiB of
    /// address space (no memory) for its linear memory.
    pub run_instances: u32,
    /// Core module instances the execution pool holds. 0 (default): four
    /// per Run instance.
    pub run_core_instances: u32,
    /// Linear memories the execution pool holds. 0 (default): one per Run
    /// instance.
    pub run_memories: u32,
    /// Tables the execution pool holds. 0 (default): two per Run instance.
    pub run_tables: u32,
    /// Share of each pool, in percent, kept out of admission for calls a
    /// Run makes itself (a promoted program's sub-Run), which never wait
    /// in the queue (their parent already holds its place). Default 10.
    pub nested_percent: u32,
    /// Calls waiting for capacity on this node, both pools together.
    /// Default 4,096. Past it, a call is refused at once (retryable).
    pub queue_length: u32,
    /// Calls one tenant may have waiting. Default 64. Past it, the
    /// tenant's next call is refused at once (retryable).
    pub queue_per_tenant: u32,
    /// Longest wait for validation capacity, in milliseconds. Default
    /// 2,000. Past it: request error `bounds_exceeded` with
    /// `retry_after_ms`.
    pub validation_wait_ms: u64,
    /// Longest wait for execution capacity, in milliseconds. Default
    /// 10,000. Past it: the Run is refused before anything runs, outcome
    /// `resource_exhausted` with `retry_after_ms`.
    pub run_wait_ms: u64,
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity {
            validation_instances: 0,
            validation_core_instances: 0,
            run_instances: 0,
            run_core_instances: 0,
            run_memories: 0,
            run_tables: 0,
            nested_percent: 10,
            queue_length: 4096,
            queue_per_tenant: 64,
            validation_wait_ms: 2_000,
            run_wait_ms: 10_000,
        }
    }
}

/// What one pool holds: every total wasmtime's pooling allocator bounds.
/// Each call takes one component instance and one fiber stack, and the
/// core instances, memories and tables of its [`Need`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PoolTotals {
    /// Component instances (one per call in flight; also the fiber
    /// stacks).
    pub component_instances: u32,
    /// Core module instances.
    pub core_instances: u32,
    /// Linear memories.
    pub memories: u32,
    /// Tables.
    pub tables: u32,
}

impl PoolTotals {
    /// The totals as a [`Need`]-shaped vector, for admission.
    pub(crate) fn as_need(self) -> Need {
        Need {
            component_instances: self.component_instances,
            core_instances: self.core_instances,
            memories: self.memories,
            tables: self.tables,
        }
    }
}

/// Both pools' totals, resolved for this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ResolvedCapacity {
    /// The validation pool.
    pub validation: PoolTotals,
    /// The execution pool.
    pub execution: PoolTotals,
}

impl ResolvedCapacity {
    /// Whether one call needing `need` fits in each pool at all.
    ///
    /// # Errors
    /// What it needs of which pool, and the setting to raise, when a pool
    /// holds less than one call takes.
    pub(crate) fn holds(&self, need: Need) -> Result<(), String> {
        let names = ["component instances", "core instances", "memories", "tables"];
        for (pool, totals, prefix) in
            [("validation", self.validation, "validation"), ("execution", self.execution, "run")]
        {
            for ((needed, total), name) in need.parts().into_iter().zip(totals.as_need().parts()).zip(names) {
                if needed > total {
                    return Err(format!(
                        "one call needs {needed} {name}; the {pool} pool holds {total} in all (raise capacity.{prefix}_{})",
                        name.replace(' ', "_")
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Defaults for tools that run a few calls (the CLI's `language check`,
/// tests, benches): small pools, so that many engines in one process do
/// not reserve terabytes of address space.
pub const TOOL_CAPACITY: Capacity = Capacity {
    validation_instances: 16,
    validation_core_instances: 512,
    run_instances: 64,
    run_core_instances: 2048,
    run_memories: 128,
    run_tables: 256,
    nested_percent: 10,
    queue_length: 1024,
    queue_per_tenant: 1024,
    validation_wait_ms: 2_000,
    run_wait_ms: 10_000,
};

/// The node's logical cores (1 when it cannot be read).
fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// The node's memory in bytes, from `/proc/meminfo` (`MemTotal`), or 1 GiB
/// when it cannot be read.
fn node_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(1 << 30)
}

impl Capacity {
    /// The totals of both pools, the zeros derived for this node: four
    /// validation instances per core (at least 8); one Run instance per 4
    /// MiB of memory (between 256 and 4,096); 32 core instances per
    /// validation instance, and four core instances, one memory and two
    /// tables per Run instance. Validation memories and tables follow from
    /// `max_memories` and `max_tables` per component, so that any
    /// component the engine accepts fits.
    pub fn resolve(&self, max_memories: u32, max_tables: u32) -> ResolvedCapacity {
        let or = |value: u32, derived: u32| if value == 0 { derived.max(1) } else { value };
        let validation_instances = or(self.validation_instances, (4 * cores()).max(8));
        let run_instances = or(self.run_instances, ((node_memory_bytes() >> 22) as u32).clamp(256, 4096));
        ResolvedCapacity {
            validation: PoolTotals {
                component_instances: validation_instances,
                core_instances: or(self.validation_core_instances, validation_instances.saturating_mul(32)),
                memories: validation_instances.saturating_mul(max_memories),
                tables: validation_instances.saturating_mul(max_tables),
            },
            execution: PoolTotals {
                component_instances: run_instances,
                core_instances: or(self.run_core_instances, run_instances.saturating_mul(4)),
                memories: or(self.run_memories, run_instances),
                tables: or(self.run_tables, run_instances.saturating_mul(2)),
            },
        }
    }
}

/// What one call of a component takes of a pool: one component instance
/// and the core instances, memories and tables it creates when it is
/// instantiated. Counted once, when the component is loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Need {
    /// Component instances (always 1 for a call).
    pub component_instances: u32,
    /// Core module instances the component instantiates.
    pub core_instances: u32,
    /// Linear memories its core instances define.
    pub memories: u32,
    /// Tables its core instances define.
    pub tables: u32,
}

impl Need {
    /// The need's members in a fixed order (component instances, core
    /// instances, memories, tables).
    pub(crate) fn parts(self) -> [u32; 4] {
        [self.component_instances, self.core_instances, self.memories, self.tables]
    }

    /// Counts what instantiating `bytes` (a component) creates: every core
    /// module instantiation in it (nested components included) and the
    /// memories and tables wasmtime reports its modules define. When the
    /// bytes cannot be read that way, the per-component maxima are assumed.
    pub(crate) fn of(bytes: &[u8], component: &wasmtime::component::Component, maxima: Need) -> Need {
        let core_instances = count_core_instantiations(bytes).unwrap_or(maxima.core_instances);
        let (memories, tables) = match component.resources_required() {
            Some(required) => (required.num_memories, required.num_tables),
            None => (maxima.memories, maxima.tables),
        };
        Need { component_instances: 1, core_instances: core_instances.max(1), memories, tables }
    }
}

/// Core module instantiations in a component binary, at any nesting.
fn count_core_instantiations(bytes: &[u8]) -> Option<u32> {
    use wasmparser::{Instance, Parser, Payload};
    let mut count = 0u32;
    for payload in Parser::new(0).parse_all(bytes) {
        if let Payload::InstanceSection(section) = payload.ok()? {
            for instance in section {
                if matches!(instance.ok()?, Instance::Instantiate { .. }) {
                    count += 1;
                }
            }
        }
    }
    Some(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeros_are_derived_and_set_values_kept() {
        let resolved = Capacity::default().resolve(4, 8);
        assert!(resolved.validation.component_instances >= 8);
        assert_eq!(resolved.validation.core_instances, resolved.validation.component_instances * 32);
        assert_eq!(resolved.validation.memories, resolved.validation.component_instances * 4);
        assert!((256..=4096).contains(&resolved.execution.component_instances));
        assert_eq!(resolved.execution.core_instances, resolved.execution.component_instances * 4);
        let set = Capacity { run_instances: 3000, run_memories: 5000, ..Capacity::default() }.resolve(4, 8);
        assert_eq!(set.execution.component_instances, 3000);
        assert_eq!(set.execution.core_instances, 12_000);
        assert_eq!(set.execution.memories, 5000);
        assert_eq!(set.execution.tables, 6000);
    }

    #[test]
    fn a_need_larger_than_a_pool_is_named_with_its_setting() {
        let resolved = Capacity { run_instances: 4, run_core_instances: 16, ..Capacity::default() }.resolve(4, 8);
        let small = Need { component_instances: 1, core_instances: 4, memories: 1, tables: 1 };
        assert_eq!(resolved.holds(small), Ok(()));
        let python = Need { core_instances: 38, ..small };
        let refused = resolved.holds(python).unwrap_err();
        assert!(refused.contains("38 core instances") && refused.contains("capacity.run_core_instances"), "{refused}");
    }

    #[test]
    fn bytes_that_are_not_a_component_count_nothing() {
        assert_eq!(count_core_instantiations(b"not wasm"), None);
    }
}
