//! Idempotency claims that survive a crash (Part II §6.5.6, Part IV §8).
//!
//! Every claim names the Run it started, its owner (the [instance
//! id](Leases::instance_id) of the server process running it) and a lease.
//! While the Run executes, the owner's [renewal task](renew_while_running)
//! extends the lease every [`IdempotencySettings::renew_ms`]. A process
//! killed mid-Run stops renewing; a retry that then finds the claim with
//! its lease run out takes it over with one conditional update (of two
//! racing retries exactly one wins, on SQLite and PostgreSQL alike) and
//! records the [interrupted outcome](interrupted_response) as the key's
//! result, which every later retry replays. A retry that finds a live
//! claim waits for its Run as before and never takes it over.
//!
//! The interrupted outcome's status is the reserved `partial` (Part II
//! §5.7: "Execution began but did not complete. Side effects may have
//! occurred."; §6.5.6: a started Run that does not complete returns
//! `ok: false` and `partial`): the Run did start, and its invocations may
//! have reached the world before the process died.
//!
//! Not covered: the steps the lost Run completed are not known to the
//! taking-over process, so the interrupted trace has no steps; the lost
//! Run's record is not stored for trace fetch. Leases compare the
//! servers' clocks: replicas sharing a database must agree on the time to
//! well within a lease.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::tenancy::Platform;
use pilotage_protocol::outcome::{Outcome, PARTIAL};
use pilotage_protocol::requests::ExecuteResponse;
use pilotage_protocol::trace::{Trace, TraceLevel};

/// The `error` of the interrupted outcome.
pub(crate) const INTERRUPTED: &str = "interrupted: the server process running this Run stopped before the Run finished \
     (its idempotency claim was no longer renewed); side effects may have occurred";

/// The response recorded for a key whose Run `run_id` was interrupted: the
/// reserved status `partial` (Part II §5.7), no output, and at effective
/// level `summary` or `full` a trace with no steps, since the steps the
/// lost Run completed were never recorded (`stats.interrupted` says so).
pub(crate) fn interrupted_response(run_id: &str, level: TraceLevel) -> ExecuteResponse {
    ExecuteResponse {
        run_id: run_id.to_owned(),
        outcome: Outcome::failure(PARTIAL, INTERRUPTED),
        output: None,
        diagnostics: None,
        trace: (level != TraceLevel::None).then(|| Trace {
            run_id: run_id.to_owned(),
            level,
            steps: Vec::new(),
            stats: Some(serde_json::json!({"interrupted": true, "steps_recorded": false})),
        }),
        retry_after_ms: None,
        assertions: None,
    }
}

/// Renews the leases of this process's Runs in flight every
/// `renew_ms` until `shutdown` is cancelled and no claim is live any more
/// (a graceful shutdown lets Runs in flight finish, so their claims keep
/// being renewed meanwhile), or `grace` after the cancellation.
pub(crate) async fn renew_while_running(platform: Platform, shutdown: CancellationToken, grace: Duration) {
    let leases = platform.leases().clone();
    let mut interval = tokio::time::interval(Duration::from_millis(leases.settings().renew_ms));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stop_by: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled(), if stop_by.is_none() => {
                stop_by = Some(tokio::time::Instant::now() + grace);
            }
            // While stopping, look often whether the last Run has answered.
            _ = tokio::time::sleep(STOPPING_CHECK), if stop_by.is_some() => {}
            _ = interval.tick() => {
                leases.renew(platform.store(), platform.clock().now_ms()).await;
            }
        }
        if stop_by.is_some_and(|deadline| leases.live_count() == 0 || tokio::time::Instant::now() >= deadline) {
            break;
        }
    }
}

/// How often a stopping process looks whether its last claim was released.
const STOPPING_CHECK: Duration = Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interrupted_outcome_is_partial_and_says_side_effects_may_have_occurred() {
        let response = interrupted_response("run_1", TraceLevel::None);
        assert_eq!(response.outcome.status, "partial");
        assert!(!response.outcome.ok && response.outcome.is_consistent());
        assert!(response.outcome.error.as_deref().unwrap().contains("side effects may have occurred"));
        assert!(response.trace.is_none() && response.output.is_none());
        let traced = interrupted_response("run_1", TraceLevel::Summary);
        let trace = traced.trace.unwrap();
        assert_eq!((trace.run_id.as_str(), trace.level, trace.steps.len()), ("run_1", TraceLevel::Summary, 0));
    }
}
