//! Firing deployments: the scheduler every replica runs, and [`fire`],
//! which every trigger source (schedule, webhook, MQTT) goes through.
//!
//! Exactly once across replicas: a schedule tick is taken by moving the
//! deployment's `next_due` from the tick to the next one with a
//! compare-and-set (one replica wins), and every trigger instance is then
//! claimed as a `firings` row (primary key (tenant, deployment, instance)).
//! A replica that dies between its claim and the Run loses that one firing;
//! the next tick is due in the store, so any replica fires it.
//!
//! Missed ticks: a tick found due more than [`MISSED_GRACE_MS`] late (the
//! servers were down or stalled) is not replayed one by one: the
//! deployment fires once, for the latest tick that has passed, with
//! `"late": true` in its event, and the ticks before it are skipped.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use pilotage_engine::clock::rfc3339;
use pilotage_engine::installation::Trigger;
use pilotage_store::{FiringClaim, FiringRow};

use super::model::{Deployment, next_due};
use super::schedule::Schedule;
use crate::operations::execute::new_run_id;
use crate::operations::{Caller, Context};
use crate::tenancy::{Platform, Principal};

/// How late a tick may be found and still count as on time.
pub(crate) const MISSED_GRACE_MS: i64 = 30_000;

/// How long the scheduler sleeps at most between two reads of the store
/// (deployments installed through another replica are seen this soon).
pub(crate) const SCHEDULER_PERIOD: Duration = Duration::from_secs(1);

/// How long firing claims are kept (their Runs follow their own
/// retention).
pub(crate) const KEEP_FIRINGS_MS: i64 = 7 * 86_400_000;

/// Due deployments handled per pass.
const DUE_BATCH: i64 = 256;

/// Runs the scheduler until `shutdown`: fires due schedule ticks, then
/// sleeps until the next tick (at most [`SCHEDULER_PERIOD`]).
pub(crate) async fn scheduler(platform: Platform, shutdown: CancellationToken) {
    let deployments = platform.deployments();
    loop {
        let now = platform.clock().now_ms();
        match platform.store().deployments_due(now, DUE_BATCH).await {
            Ok(rows) => {
                // Every due tick is taken (or lost to another replica)
                // before the store is read again: a tick whose advance had
                // not landed yet would be read as due again at once, and
                // tried again, until it did.
                let taken = futures::future::join_all(rows.into_iter().map(|row| take_tick(&platform, row, now)));
                for tick in taken.await.into_iter().flatten() {
                    let platform = platform.clone();
                    tokio::spawn(async move {
                        let TakenTick { deployment, instance, trigger, event, at, due } = tick;
                        fire(&platform, &deployment, &instance, trigger, event, at, due).await;
                    });
                }
            }
            Err(error) => tracing::warn!(%error, "cannot read due deployments"),
        }
        let next = platform.store().deployments_next_due().await.ok().flatten().unwrap_or(i64::MAX);
        let wait = platform.clock().sleep_until(next, SCHEDULER_PERIOD);
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = deployments.wake.notified() => {}
            () = wait => {}
        }
    }
}

/// A schedule tick this replica took, to fire.
struct TakenTick {
    deployment: Deployment,
    instance: String,
    trigger: Option<Trigger>,
    event: Value,
    at: i64,
    /// The tick's due time (the firing delay is measured from it).
    due: i64,
}

/// Takes one due tick of a deployment: moves its `next_due` on, unless
/// another replica did first (then none).
async fn take_tick(platform: &Platform, row: pilotage_store::DeploymentRow, now: i64) -> Option<TakenTick> {
    let due = row.next_due?;
    let deployment = match Deployment::from_row(row) {
        Ok(deployment) => deployment,
        Err(error) => {
            tracing::error!(%error, "a stored deployment does not decode");
            return None;
        }
    };
    let schedules = deployment.schedules();
    let late = now - due > MISSED_GRACE_MS;
    let tick = if late {
        schedules.iter().filter_map(|schedule| schedule.latest_at_or_before(now)).max().unwrap_or(due).max(due)
    } else {
        due
    };
    let next = next_due(&schedules, now.max(tick));
    let row = &deployment.row;
    match platform.store().deployment_advance(&row.tenant, &row.name, row.version, due, next).await {
        Ok(true) => {}
        Ok(false) => return None,
        Err(error) => {
            tracing::warn!(%error, deployment = %row.name, "cannot take a due tick");
            return None;
        }
    }
    let trigger = deployment
        .triggers
        .iter()
        .find(|trigger| matches!(trigger, Trigger::Schedule { cron, time_zone } if Schedule::parse(cron, time_zone).is_ok_and(|s| s.latest_at_or_before(tick) == Some(tick))))
        .cloned()
        .or_else(|| deployment.triggers.iter().find(|t| matches!(t, Trigger::Schedule { .. })).cloned());
    let mut event = json!({"due": rfc3339(tick)});
    if late {
        event["late"] = Value::Bool(true);
    }
    let at = platform.clock().now_ms();
    Some(TakenTick { deployment, instance: format!("schedule:{tick}"), trigger, event, at, due: tick })
}

/// Fires `deployment` for one trigger instance (`schedule:<tick>`,
/// `webhook:<delivery>`, `mqtt:<message>`): claims the instance, checks
/// the `max_firings_per_minute` quota, and runs the body as the deployer
/// (`operations::firing::fire`) with `at_ms` as its clock. `since_ms` is
/// when the instance happened on the deployments' clock (a tick's due
/// time, an event's receipt), for the `pilotage_firing_delay_seconds`
/// metric. Returns the firing's `run_id`, or none when the instance was
/// already claimed, the quota refused it, or the deployment's tenant or
/// Language is gone (logged and counted).
pub(crate) async fn fire(
    platform: &Platform,
    deployment: &Deployment,
    instance: &str,
    trigger: Option<Trigger>,
    event: Value,
    at_ms: i64,
    since_ms: i64,
) -> Option<String> {
    let row = &deployment.row;
    let store = platform.store();
    let metrics = platform.engine().metrics();
    let kind = trigger.as_ref().map_or("schedule", Trigger::kind);
    let Some(tenant) = platform.tenant(&row.tenant) else {
        metrics.firing(kind, "not_run", None);
        return None;
    };
    let now = platform.clock().now_ms();
    let limit = i64::from(tenant.quotas().max_firings_per_minute);
    let run_id = new_run_id();
    let claim = FiringRow {
        tenant: row.tenant.clone(),
        deployment: row.name.clone(),
        instance: instance.to_owned(),
        version: row.version,
        run_id: run_id.clone(),
        owner: platform.leases().instance_id().to_owned(),
        claimed_at: now,
    };
    // The quota's count and the instance's claim are one step in the
    // store, so concurrent firings on any replica never overshoot it.
    match store.firing_claim_within(&claim, now - 60_000, limit).await {
        Ok(FiringClaim::Claimed) => {}
        Ok(FiringClaim::Taken) => return None,
        Ok(FiringClaim::OverQuota) => {
            tracing::warn!(tenant = %row.tenant, deployment = %row.name, %instance, limit, "quota max_firings_per_minute reached: firing dropped");
            metrics.firing(kind, "dropped", None);
            return None;
        }
        Err(error) => {
            tracing::warn!(%error, "cannot claim a firing");
            return None;
        }
    }
    let Some(slot) = tenant.language(&row.language) else {
        tracing::error!(tenant = %row.tenant, deployment = %row.name, language = %row.language, "the deployment's Language is no longer installed: nothing ran");
        metrics.firing(kind, "not_run", None);
        return None;
    };
    let context = Context {
        platform: platform.clone(),
        caller: Caller {
            principal: Principal {
                tenant: row.tenant.clone(),
                issuer: row.issuer.clone(),
                subject: row.subject.clone(),
                scopes: deployment.scopes.clone(),
            },
            session_id: None,
            address: None,
        },
        tenant,
    };
    let input = json!({"trigger": trigger, "event": event, "at": rfc3339(at_ms)});
    let delay = u64::try_from(platform.clock().now_ms() - since_ms).unwrap_or(0);
    let delay = Some(std::time::Duration::from_millis(delay));
    match crate::operations::firing::fire(&context, &slot, deployment, input, at_ms, &run_id).await {
        Ok(response) => {
            tracing::info!(tenant = %row.tenant, deployment = %row.name, %instance, %run_id, status = %response.outcome.status, "deployment fired");
            metrics.firing(kind, if response.outcome.ok { "ok" } else { "failed" }, delay);
            Some(run_id)
        }
        Err(error) => {
            tracing::error!(tenant = %row.tenant, deployment = %row.name, %instance, %run_id, error = ?error, "a firing could not run");
            metrics.firing(kind, "not_run", delay);
            Some(run_id)
        }
    }
}
