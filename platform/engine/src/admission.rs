//! Fair admission to the node's component pools (issue: "Runs that wait
//! cost nothing"; ARCHITECTURE.md, "Capacity").
//!
//! Every component call a request makes takes a [`Permit`] from its pool's
//! gate first ([`Admission::admit`]): at once when the call's [`Need`]
//! fits and nobody waits, else in a bounded queue. When capacity frees, it
//! goes to the waiting tenant that holds the smallest share of the pool
//! (its dominant share over component instances, core instances, memories
//! and tables: dominant-resource fairness; between equal shares, the
//! tenant served longest ago), the earliest of its calls first, so a
//! tenant holding much never takes a freed place while a tenant holding
//! less waits, and a tenant whose calls are short and many does not pass
//! every freed place to itself. A call that cannot be queued (the node's or
//! its tenant's queue is full) or waits longer than its pool's bound is
//! refused with a [`Refused`] that says when to retry: never a trap, never
//! a fault.
//!
//! The last `LIGHT_RESERVE_PERCENT` of each pool is kept for tenants that
//! hold fewer than `LIGHT_CALLS` places: however many Runs busy tenants
//! keep waiting, a quiet tenant's call finds a place at once.
//!
//! Validation and execution have gates of their own, so Runs can never
//! take the capacity validations need. A sub-Run (a promoted program
//! called by a Run) takes its place with [`Admission::admit_nested`]: it
//! never waits (its parent already holds a place, and waiting could
//! deadlock a pool full of parents) and may use the share of the pool kept
//! out of admission for it.
//!
//! Invariant: the pool's totals are never exceeded by admitted calls, so
//! wasmtime's pooling allocator never refuses an admitted instantiation;
//! a permit's capacity is returned when it is dropped, whatever the call's
//! fate.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::capacity::{Capacity, Need, PoolTotals, ResolvedCapacity};
use pilotage_telemetry::metrics::{CapacityPool, Metrics};

/// Share of each pool's admitted part, in percent, that only tenants
/// holding fewer than [`LIGHT_CALLS`] places may fill: however many Runs the
/// busy tenants keep waiting, a tenant that arrives with a call or two finds
/// a place at once.
pub const LIGHT_RESERVE_PERCENT: u64 = 10;

/// A tenant holding fewer places than this is light: it may use the
/// light tenants' reserve ([`LIGHT_RESERVE_PERCENT`]).
pub const LIGHT_CALLS: u32 = 2;

/// Which pool a call runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    /// `describe`, `validate`, `bind-input`.
    Validation,
    /// `execute`, `deploy` (Runs).
    Execution,
}

impl Pool {
    /// The pool's name as operators read it (`validation`, `execution`).
    pub fn as_str(self) -> &'static str {
        match self {
            Pool::Validation => "validation",
            Pool::Execution => "execution",
        }
    }

    fn label(self) -> CapacityPool {
        match self {
            Pool::Validation => CapacityPool::Validation,
            Pool::Execution => CapacityPool::Execution,
        }
    }
}

/// Why a call was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalReason {
    /// The node's queue (`queue_length`) was full.
    QueueFull,
    /// The tenant already had `queue_per_tenant` calls waiting.
    TenantQueueFull,
    /// The call waited its pool's longest wait without a place freeing.
    Waited,
    /// A sub-Run found no room left in the pool, even in the share kept
    /// for sub-Runs.
    NoRoom,
}

impl RefusalReason {
    /// The reason as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::QueueFull => "queue_full",
            RefusalReason::TenantQueueFull => "tenant_queue_full",
            RefusalReason::Waited => "waited",
            RefusalReason::NoRoom => "no_room",
        }
    }
}

/// Occurs when a call cannot have a place in its pool now. Retryable: the
/// message and [`Refused::retry_after_ms`] say when to try again.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// The pool.
    pub pool: Pool,
    /// Why.
    pub reason: RefusalReason,
    /// When a retry is likely to find a place, in milliseconds: about how
    /// long the pool's calls have been holding their places lately.
    pub retry_after_ms: u64,
    message: String,
}

impl Refused {
    fn new(pool: Pool, reason: RefusalReason, retry_after_ms: u64, waiting: usize) -> Refused {
        let what = match pool {
            Pool::Validation => "validation",
            Pool::Execution => "Runs",
        };
        let why = match reason {
            RefusalReason::QueueFull => format!("its queue is full ({waiting} calls waiting)"),
            RefusalReason::TenantQueueFull => "this tenant already has its most calls waiting".to_owned(),
            RefusalReason::Waited => "no place freed in time".to_owned(),
            RefusalReason::NoRoom => "none is left for calls a Run makes itself".to_owned(),
        };
        Refused {
            pool,
            reason,
            retry_after_ms,
            message: format!(
                "the server's capacity for {what} is in use ({why}); nothing ran: retry in about {retry_after_ms} ms"
            ),
        }
    }
}

/// The gates of both pools. Cheap to clone.
#[derive(Clone)]
pub struct Admission {
    validation: Arc<Gate>,
    execution: Arc<Gate>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").finish_non_exhaustive()
    }
}

/// One pool's gate.
struct Gate {
    pool: Pool,
    totals: [u64; 4],
    /// What admitted (non-nested) calls may hold together: the totals less
    /// the share kept for sub-Runs.
    limits: [u64; 4],
    /// What calls of tenants holding [`LIGHT_CALLS`] or more may hold
    /// together: the last [`LIGHT_RESERVE_PERCENT`] of `limits` is kept
    /// for tenants holding fewer.
    heavy_limits: [u64; 4],
    wait: Duration,
    /// Calls waiting in either pool (the node's `queue_length`).
    queued: Arc<AtomicU32>,
    queue_length: u32,
    queue_per_tenant: u32,
    state: Mutex<GateState>,
    metrics: Metrics,
}

#[derive(Default)]
struct GateState {
    in_use: [u64; 4],
    tenants: HashMap<Arc<str>, TenantState>,
    waiting: usize,
    next_seq: u64,
    /// Places granted so far (each tenant remembers when it last got one).
    grants: u64,
    /// Recent time a call held its place, in ms (exponential average).
    hold_ms: f64,
}

#[derive(Default)]
struct TenantState {
    held: [u64; 4],
    calls: u32,
    queue: VecDeque<Arc<Waiter>>,
    /// `grants` when this tenant last got a place (0: not while it has
    /// held or waited without a pause).
    last_grant: u64,
}

struct Waiter {
    seq: u64,
    need: [u64; 4],
    granted: AtomicBool,
    wake: tokio::sync::Notify,
}

/// A place in a pool, held for one component call. Dropping it gives the
/// place back and hands it to the next waiting call.
#[must_use]
pub struct Permit {
    gate: Arc<Gate>,
    tenant: Arc<str>,
    need: [u64; 4],
    since: Instant,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit").field("pool", &self.gate.pool).field("tenant", &self.tenant).finish()
    }
}

impl Permit {
    /// The pool this place is in.
    pub fn pool(&self) -> Pool {
        self.gate.pool
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let held = self.since.elapsed();
        let mut state = self.gate.lock();
        state.release(&self.tenant, self.need);
        // A slow decay: a retry hint follows how long places are held
        // lately, not the last call alone.
        state.hold_ms = state.hold_ms * 0.95 + held.as_secs_f64() * 1000.0 * 0.05;
        self.gate.dispatch(&mut state);
    }
}

impl GateState {
    fn release(&mut self, tenant: &Arc<str>, need: [u64; 4]) {
        for (used, taken) in self.in_use.iter_mut().zip(need) {
            *used = used.saturating_sub(taken);
        }
        if let Some(state) = self.tenants.get_mut(tenant) {
            for (held, taken) in state.held.iter_mut().zip(need) {
                *held = held.saturating_sub(taken);
            }
            state.calls = state.calls.saturating_sub(1);
            if state.calls == 0 && state.queue.is_empty() {
                self.tenants.remove(tenant);
            }
        }
    }

    fn take(&mut self, tenant: &Arc<str>, need: [u64; 4]) {
        for (used, taken) in self.in_use.iter_mut().zip(need) {
            *used += taken;
        }
        self.grants += 1;
        let grants = self.grants;
        let state = self.tenants.entry(tenant.clone()).or_default();
        for (held, taken) in state.held.iter_mut().zip(need) {
            *held += taken;
        }
        state.calls += 1;
        state.last_grant = grants;
    }

    fn fits(&self, need: [u64; 4], bounds: &[u64; 4]) -> bool {
        self.in_use.iter().zip(need).zip(bounds).all(|((used, taken), bound)| used + taken <= *bound)
    }
}

impl Gate {
    fn new(pool: Pool, totals: PoolTotals, capacity: &Capacity, queued: Arc<AtomicU32>, metrics: Metrics) -> Gate {
        let totals = totals.as_need().parts().map(u64::from);
        let kept = u64::from(capacity.nested_percent.min(90));
        let limits = totals.map(|total| (total - total * kept / 100).max(1));
        let heavy_limits = limits.map(|limit| (limit - limit * LIGHT_RESERVE_PERCENT / 100).max(1));
        let wait = Duration::from_millis(match pool {
            Pool::Validation => capacity.validation_wait_ms,
            Pool::Execution => capacity.run_wait_ms,
        });
        Gate {
            pool,
            totals,
            limits,
            heavy_limits,
            wait,
            queued,
            queue_length: capacity.queue_length,
            queue_per_tenant: capacity.queue_per_tenant,
            state: Mutex::new(GateState::default()),
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// When a refused call may find a place: how long places have been
    /// held lately, at least `floor`.
    fn retry_after_ms(&self, state: &GateState, floor: Duration) -> u64 {
        (state.hold_ms as u64).max(floor.as_millis() as u64).clamp(100, 30_000)
    }

    /// What `tenant`'s next call may fill: the whole admitted part while
    /// it holds fewer than [`LIGHT_CALLS`], else all but the light
    /// tenants' reserve.
    fn bound_for(&self, state: &GateState, tenant: &str) -> &[u64; 4] {
        if state.tenants.get(tenant).map_or(0, |held| held.calls) < LIGHT_CALLS {
            &self.limits
        } else {
            &self.heavy_limits
        }
    }

    /// The tenant's dominant share of the admitted part of the pool.
    fn share(&self, held: &[u64; 4]) -> f64 {
        held.iter().zip(&self.limits).map(|(held, limit)| *held as f64 / *limit as f64).fold(0.0, f64::max)
    }

    /// Grants freed capacity to waiters, the smallest holder first.
    fn dispatch(&self, state: &mut GateState) {
        while state.waiting > 0 {
            let mut candidates: Vec<(f64, u64, u64, Arc<str>)> = state
                .tenants
                .iter()
                .filter_map(|(tenant, held)| {
                    held.queue.front().map(|head| (self.share(&held.held), held.last_grant, head.seq, tenant.clone()))
                })
                .collect();
            candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
            let chosen = candidates.into_iter().find_map(|(_, _, _, tenant)| {
                let need = state.tenants.get(&tenant)?.queue.front()?.need;
                state.fits(need, self.bound_for(state, &tenant)).then_some(tenant)
            });
            let Some(tenant) = chosen else { return };
            let Some(waiter) = state.tenants.get_mut(&tenant).and_then(|held| held.queue.pop_front()) else { return };
            state.waiting -= 1;
            self.queued.fetch_sub(1, Ordering::SeqCst);
            state.take(&tenant, waiter.need);
            waiter.granted.store(true, Ordering::SeqCst);
            waiter.wake.notify_one();
        }
    }

    fn permit(self: &Arc<Self>, tenant: Arc<str>, need: [u64; 4]) -> Permit {
        Permit { gate: self.clone(), tenant, need, since: Instant::now() }
    }

    async fn admit(self: &Arc<Self>, tenant: &str, need: Need) -> Result<Permit, Refused> {
        let need = need.parts().map(u64::from);
        let tenant: Arc<str> = Arc::from(tenant);
        let waiter = {
            let mut state = self.lock();
            if state.waiting == 0 && state.fits(need, self.bound_for(&state, &tenant)) {
                state.take(&tenant, need);
                return Ok(self.permit(tenant, need));
            }
            let queued_by_tenant = state.tenants.get(&tenant).map_or(0, |held| held.queue.len());
            let refusal = if queued_by_tenant >= self.queue_per_tenant as usize {
                Some(RefusalReason::TenantQueueFull)
            } else if self.queued.load(Ordering::SeqCst) >= self.queue_length {
                Some(RefusalReason::QueueFull)
            } else {
                None
            };
            if let Some(reason) = refusal {
                self.metrics.capacity_refusal(self.pool.label(), reason.as_str());
                let retry = self.retry_after_ms(&state, Duration::from_secs(1));
                return Err(Refused::new(self.pool, reason, retry, state.waiting));
            }
            state.next_seq += 1;
            let waiter = Arc::new(Waiter {
                seq: state.next_seq,
                need,
                granted: AtomicBool::new(false),
                wake: tokio::sync::Notify::new(),
            });
            state.tenants.entry(tenant.clone()).or_default().queue.push_back(waiter.clone());
            state.waiting += 1;
            self.queued.fetch_add(1, Ordering::SeqCst);
            self.dispatch(&mut state);
            waiter
        };
        let started = Instant::now();
        let mut waiting = Waiting { gate: self, tenant: &tenant, waiter: &waiter, settled: false };
        let woken = tokio::time::timeout(self.wait, waiter.wake.notified()).await.is_ok();
        let mut state = self.lock();
        waiting.settled = true;
        let granted = waiter.granted.load(Ordering::SeqCst);
        if !granted {
            waiting.remove(&mut state);
            // It waited the whole bound without a place freeing: a retry
            // sooner than that would likely meet the same.
            let retry = self.retry_after_ms(&state, self.wait);
            let waited = state.waiting;
            drop(state);
            self.metrics.capacity_refusal(self.pool.label(), RefusalReason::Waited.as_str());
            return Err(Refused::new(self.pool, RefusalReason::Waited, retry, waited));
        }
        drop(state);
        debug_assert!(woken || granted);
        self.metrics.capacity_wait(self.pool.label(), started.elapsed());
        Ok(self.permit(tenant.clone(), need))
    }

    fn admit_nested(self: &Arc<Self>, tenant: &str, need: Need) -> Result<Permit, Refused> {
        let need = need.parts().map(u64::from);
        let tenant: Arc<str> = Arc::from(tenant);
        let mut state = self.lock();
        if state.fits(need, &self.totals) {
            state.take(&tenant, need);
            return Ok(self.permit(tenant, need));
        }
        self.metrics.capacity_refusal(self.pool.label(), RefusalReason::NoRoom.as_str());
        let retry = self.retry_after_ms(&state, Duration::from_secs(1));
        Err(Refused::new(self.pool, RefusalReason::NoRoom, retry, state.waiting))
    }

    fn usage(&self) -> (PoolUsage, Vec<TenantUsage>) {
        let state = self.lock();
        let [component_instances, core_instances, memories, tables] = self.totals;
        let usage = PoolUsage {
            pool: self.pool,
            calls: state.in_use[0],
            core_instances: state.in_use[1],
            memories: state.in_use[2],
            tables: state.in_use[3],
            waiting: state.waiting as u64,
            total: PoolTotals {
                component_instances: component_instances as u32,
                core_instances: core_instances as u32,
                memories: memories as u32,
                tables: tables as u32,
            },
            admitted_calls: self.limits[0],
            saturation: state
                .in_use
                .iter()
                .zip(&self.limits)
                .map(|(used, limit)| *used as f64 / *limit as f64)
                .fold(0.0, f64::max),
        };
        let tenants = state
            .tenants
            .iter()
            .map(|(tenant, held)| TenantUsage {
                tenant: tenant.to_string(),
                pool: self.pool,
                calls: held.calls,
                waiting: held.queue.len() as u32,
                share: self.share(&held.held),
            })
            .collect();
        (usage, tenants)
    }
}

/// A call waiting in a queue; dropped before it is settled (its request
/// was cancelled), it leaves the queue, or gives back the place it was
/// granted meanwhile.
struct Waiting<'a> {
    gate: &'a Arc<Gate>,
    tenant: &'a Arc<str>,
    waiter: &'a Arc<Waiter>,
    settled: bool,
}

impl Waiting<'_> {
    fn remove(&mut self, state: &mut GateState) {
        let Some(held) = state.tenants.get_mut(self.tenant) else { return };
        let before = held.queue.len();
        held.queue.retain(|waiter| !Arc::ptr_eq(waiter, self.waiter));
        if held.queue.len() < before {
            state.waiting -= 1;
            self.gate.queued.fetch_sub(1, Ordering::SeqCst);
        }
        if held.calls == 0 && held.queue.is_empty() {
            state.tenants.remove(self.tenant);
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let mut state = self.gate.lock();
        if self.waiter.granted.load(Ordering::SeqCst) {
            state.release(self.tenant, self.waiter.need);
        } else {
            self.remove(&mut state);
        }
        self.gate.dispatch(&mut state);
    }
}

/// How much of one pool is in use now.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PoolUsage {
    /// The pool.
    pub pool: Pool,
    /// Calls holding a place (component instances in use).
    pub calls: u64,
    /// Core instances in use.
    pub core_instances: u64,
    /// Memories in use.
    pub memories: u64,
    /// Tables in use.
    pub tables: u64,
    /// Calls waiting for a place.
    pub waiting: u64,
    /// The pool's totals.
    pub total: PoolTotals,
    /// Calls admission lets in together (the totals less the share kept
    /// for sub-Runs).
    pub admitted_calls: u64,
    /// The largest fraction of any admitted total in use (0.0–1.0 and a
    /// little over with sub-Runs).
    pub saturation: f64,
}

/// One tenant's use of one pool.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TenantUsage {
    /// The tenant.
    pub tenant: String,
    /// The pool.
    pub pool: Pool,
    /// Calls holding a place.
    pub calls: u32,
    /// Calls waiting.
    pub waiting: u32,
    /// Its dominant share of the pool's admitted part (0.0–1.0).
    pub share: f64,
}

/// Both pools' use and every tenant holding or waiting for a place.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CapacityUsage {
    /// Validation, then execution.
    pub pools: [PoolUsage; 2],
    /// Tenants with calls holding or waiting, by pool.
    pub tenants: Vec<TenantUsage>,
}

/// The share of a pool's admitted part in use from which the node calls
/// itself saturated (`CapacityUsage::saturated`; the server's `/readyz`
/// then answers 503, so a balancer steers new sessions elsewhere).
pub const SATURATED_AT: f64 = 0.9;

impl CapacityUsage {
    /// Whether the node should take no new sessions: a call is waiting in
    /// either pool, or one is at least `threshold` (0.0–1.0) full.
    pub fn saturated(&self, threshold: f64) -> bool {
        self.pools.iter().any(|pool| pool.waiting > 0 || pool.saturation >= threshold)
    }
}

impl Admission {
    /// Gates for pools of `resolved` totals under `capacity`'s queue
    /// bounds, recording waits and refusals in `metrics`.
    pub fn new(resolved: ResolvedCapacity, capacity: &Capacity, metrics: Metrics) -> Admission {
        let queued = Arc::new(AtomicU32::new(0));
        Admission {
            validation: Arc::new(Gate::new(
                Pool::Validation,
                resolved.validation,
                capacity,
                queued.clone(),
                metrics.clone(),
            )),
            execution: Arc::new(Gate::new(Pool::Execution, resolved.execution, capacity, queued, metrics)),
        }
    }

    fn gate(&self, pool: Pool) -> &Arc<Gate> {
        match pool {
            Pool::Validation => &self.validation,
            Pool::Execution => &self.execution,
        }
    }

    /// A place in `pool` for a call of `tenant` needing `need`: at once
    /// when it fits and nobody waits, else after waiting its turn.
    ///
    /// # Errors
    /// [`Refused`] when the queue is full or no place freed within the
    /// pool's longest wait.
    pub async fn admit(&self, pool: Pool, tenant: &str, need: Need) -> Result<Permit, Refused> {
        self.gate(pool).admit(tenant, need).await
    }

    /// A place for a call a Run makes itself (a sub-Run and its
    /// validation): never waits, and may use the share kept for such
    /// calls.
    ///
    /// # Errors
    /// [`Refused`] ([`RefusalReason::NoRoom`]) when the whole pool is in
    /// use.
    pub fn admit_nested(&self, pool: Pool, tenant: &str, need: Need) -> Result<Permit, Refused> {
        self.gate(pool).admit_nested(tenant, need)
    }

    /// Both pools' use now.
    pub fn usage(&self) -> CapacityUsage {
        let (validation, mut tenants) = self.validation.usage();
        let (execution, more) = self.execution.usage();
        tenants.extend(more);
        tenants.sort_by(|a, b| (a.pool as u8, &a.tenant).cmp(&(b.pool as u8, &b.tenant)));
        CapacityUsage { pools: [validation, execution], tenants }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(run_instances: u32, wait_ms: u64) -> Admission {
        let capacity = Capacity {
            validation_instances: 2,
            run_instances,
            run_core_instances: 1000,
            run_memories: 1000,
            run_tables: 1000,
            nested_percent: 0,
            queue_per_tenant: 8,
            run_wait_ms: wait_ms,
            ..Capacity::default()
        };
        Admission::new(capacity.resolve(1, 1), &capacity, Metrics::new().unwrap())
    }

    const ONE: Need = Need { component_instances: 1, core_instances: 1, memories: 1, tables: 1 };

    #[tokio::test]
    async fn a_freed_place_goes_to_the_tenant_holding_least() {
        let admission = admission(2, 5_000);
        let heavy1 = admission.admit(Pool::Execution, "heavy", ONE).await.unwrap();
        let _heavy2 = admission.admit(Pool::Execution, "heavy", ONE).await.unwrap();
        // The heavy tenant queues first, the quiet one second.
        let heavy3 = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(Pool::Execution, "heavy", ONE).await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let quiet = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(Pool::Execution, "quiet", ONE).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(admission.usage().pools[1].waiting, 2);
        drop(heavy1);
        let quiet = quiet.await.unwrap().expect("the quiet tenant gets the freed place");
        assert!(!heavy3.is_finished(), "the heavy tenant still waits");
        drop(quiet);
        heavy3.await.unwrap().expect("then the heavy tenant");
    }

    #[tokio::test]
    async fn between_equal_shares_the_tenant_served_longest_ago_goes_first() {
        let admission = admission(1, 5_000);
        let busy = admission.admit(Pool::Execution, "busy", ONE).await.unwrap();
        let mut queued = Vec::new();
        for _ in 0..3 {
            let admission = admission.clone();
            queued.push(tokio::spawn(async move { admission.admit(Pool::Execution, "busy", ONE).await }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let quiet = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(Pool::Execution, "quiet", ONE).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        // On release both hold nothing; the quiet tenant, never served,
        // goes before the busy one's older calls.
        drop(busy);
        let quiet = quiet.await.unwrap().expect("the quiet tenant is served next");
        assert!(queued.iter().all(|task| !task.is_finished()));
        drop(quiet);
        for task in queued {
            drop(task.await.unwrap().expect("then the busy tenant's, one by one"));
        }
    }

    #[tokio::test]
    async fn the_last_places_are_kept_for_light_tenants() {
        // 20 places: the busy tenant may fill 18; the quiet one gets in.
        let admission = admission(20, 50);
        let mut busy = Vec::new();
        for _ in 0..18 {
            busy.push(admission.admit(Pool::Execution, "busy", ONE).await.unwrap());
        }
        let refused = admission.admit(Pool::Execution, "busy", ONE).await.unwrap_err();
        assert_eq!(refused.reason, RefusalReason::Waited);
        assert!(refused.retry_after_ms >= 100, "at least the wait it had: {refused:?}");
        let quiet = admission.admit(Pool::Execution, "quiet", ONE).await.expect("a light tenant finds a place");
        let second = admission.admit(Pool::Execution, "quiet", ONE).await.expect("a second call is still light");
        let third = admission.admit(Pool::Execution, "quiet", ONE).await.unwrap_err();
        assert_eq!(third.reason, RefusalReason::Waited, "holding two, it is light no longer");
        drop((quiet, second, busy));
    }

    #[tokio::test]
    async fn a_wait_past_its_bound_is_a_retryable_refusal_and_leaves_the_queue() {
        let admission = admission(1, 50);
        let held = admission.admit(Pool::Execution, "a", ONE).await.unwrap();
        let refused = admission.admit(Pool::Execution, "b", ONE).await.unwrap_err();
        assert_eq!(refused.reason, RefusalReason::Waited);
        assert!(refused.retry_after_ms >= 100);
        assert!(refused.to_string().contains("retry in about"), "{refused}");
        assert_eq!(admission.usage().pools[1].waiting, 0);
        drop(held);
        // The place is free again for anyone.
        let again = admission.admit(Pool::Execution, "b", ONE).await.unwrap();
        assert_eq!(admission.usage().pools[1].calls, 1);
        drop(again);
        assert_eq!(admission.usage().pools[1].calls, 0);
        assert!(admission.usage().tenants.is_empty());
    }

    #[tokio::test]
    async fn a_tenants_queue_is_bounded() {
        let admission = admission(1, 5_000);
        let _held = admission.admit(Pool::Execution, "a", ONE).await.unwrap();
        let mut waiting = Vec::new();
        for _ in 0..8 {
            let admission = admission.clone();
            waiting.push(tokio::spawn(async move { admission.admit(Pool::Execution, "a", ONE).await.map(drop) }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let refused = admission.admit(Pool::Execution, "a", ONE).await.unwrap_err();
        assert_eq!(refused.reason, RefusalReason::TenantQueueFull);
        // Another tenant may still queue.
        let other = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(Pool::Execution, "b", ONE).await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(admission.usage().pools[1].waiting, 9);
        for task in waiting {
            task.abort();
        }
        other.abort();
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_nothing_behind() {
        let admission = admission(1, 5_000);
        let held = admission.admit(Pool::Execution, "a", ONE).await.unwrap();
        let waiting = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(Pool::Execution, "b", ONE).await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(admission.usage().pools[1].waiting, 0);
        drop(held);
        assert_eq!(admission.usage().pools[1].calls, 0);
    }

    #[tokio::test]
    async fn validation_capacity_is_apart_from_runs_and_nested_calls_never_wait() {
        let admission = admission(1, 5_000);
        let _run = admission.admit(Pool::Execution, "a", ONE).await.unwrap();
        // Runs are full; validations are not.
        let validation = admission.admit(Pool::Validation, "b", ONE).await.unwrap();
        assert_eq!(validation.pool(), Pool::Validation);
        // A nested call finds no room in a full pool and is refused at once.
        let refused = admission.admit_nested(Pool::Execution, "a", ONE).unwrap_err();
        assert_eq!(refused.reason, RefusalReason::NoRoom);
    }
}
