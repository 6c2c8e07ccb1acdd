//! An execute's idempotency key (Part II §6.5.6): what it fingerprints,
//! the answer it already holds (a replay, or a conflict), its claim by a
//! new Run, and the recording of that Run's response under it, fenced by
//! the claim (`crate::operations::idempotency` for the leases that make a
//! claim survive a crash).

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::answer::ExecuteAnswer;
use super::runnable::Runnable;
use crate::operations::idempotency::interrupted_response;
use crate::operations::leases::LeaseGuard;
use crate::operations::{Context, OpError, request_error, storage_error};
use pilotage_engine::catalog::version::canonical_json;
use pilotage_protocol::request_error::RequestErrorKind;
use pilotage_protocol::requests::{ExecuteRequest, ExecuteResponse};
use pilotage_protocol::retention::Retention;
use pilotage_protocol::trace::TraceLevel;
use pilotage_store::{Claim, HeldClaim, NewClaim, StoreError};

/// An idempotency key and the fingerprints a reuse of it must match.
pub(super) struct KeyPrint {
    /// The key.
    pub key: String,
    /// What runs and how (program or `program_ref`, mode, test run, store).
    runnable_hash: String,
    /// What it is given (input and context).
    input_hash: String,
}

impl KeyPrint {
    /// The fingerprints of `request` running `runnable` of `language`.
    /// Every member that changes what the request does is part of them
    /// (Part II §6.5.6): the same key with another mode, a test run
    /// instead of a real one, or another `store` is a conflict, never the
    /// other request's replay.
    pub(super) fn of(key: &str, language: &str, runnable: &Runnable, request: &ExecuteRequest) -> KeyPrint {
        let doing = format!(
            "mode={};test_run={};store={}",
            request.mode.as_deref().unwrap_or(""),
            request.test_run.unwrap_or(false),
            request.store.map_or("default", |store| if store { "true" } else { "false" })
        );
        let runnable_hash = match runnable {
            Runnable::Inline(program) => sha(&[language, "inline", &canonical_json(program), &doing]),
            Runnable::Promoted(program) => sha(&[language, "ref", &program.program_ref, &doing]),
        };
        let input_hash = sha(&[
            &request.input.as_ref().map(canonical_json).unwrap_or_default(),
            &request.context.as_ref().map(canonical_json).unwrap_or_default(),
        ]);
        KeyPrint { key: key.to_owned(), runnable_hash, input_hash }
    }

    fn matches(&self, held: &HeldClaim) -> bool {
        held.runnable_hash == self.runnable_hash && held.input_hash == self.input_hash
    }
}

fn sha(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// The answer `print`'s key already holds, at `level`: `None` when the
/// key is free.
///
/// # Errors
/// `idempotency_conflict` when the key was used for another request; a
/// store failure; `internal` when the Run holding it never finishes.
pub(super) async fn answered(
    context: &Context,
    print: &KeyPrint,
    level: TraceLevel,
) -> Result<Option<ExecuteAnswer>, OpError> {
    let owner = context.caller.principal.owner();
    let held = context.platform.store().idempotency_get(owner, &print.key).await.map_err(|e| before_run(&e))?;
    match held {
        None => Ok(None),
        Some(held) if !print.matches(&held) => Err(conflict(&print.key)),
        Some(_) => replay(context, &print.key, level).await.map(Some),
    }
}

/// A key's claim by a new Run.
pub(super) enum Claimed {
    /// This Run holds the key, under a lease renewed while it runs.
    Ours(LeaseGuard),
    /// Another Run of the same request holds it: its answer.
    Theirs(Box<ExecuteAnswer>),
}

/// Claims `print`'s key for Run `run_id`, answered at `level` when another
/// Run claimed it first. A claim is kept for [`idempotency_window`] of
/// `retention`.
///
/// # Errors
/// As [`answered`].
pub(super) async fn claim(
    context: &Context,
    print: &KeyPrint,
    run_id: &str,
    retention: &Retention,
    level: TraceLevel,
) -> Result<Claimed, OpError> {
    let principal = &context.caller.principal;
    let leases = context.platform.leases();
    let now = context.platform.clock().now_ms();
    let claim = context
        .platform
        .store()
        .idempotency_claim(&NewClaim {
            principal: principal.owner(),
            key: &print.key,
            runnable_hash: &print.runnable_hash,
            input_hash: &print.input_hash,
            run_id,
            owner: leases.instance_id(),
            now_ms: now,
            lease_expires_at: leases.lease_until(now),
            expires_at: now + idempotency_window(retention).as_millis() as i64,
        })
        .await
        .map_err(|e| before_run(&e))?;
    match claim {
        Claim::Held(held) if !print.matches(&held) => Err(conflict(&print.key)),
        Claim::Held(_) => replay(context, &print.key, level).await.map(|answer| Claimed::Theirs(Box::new(answer))),
        // Renewed while this request is served; a killed process stops
        // renewing, and a retry then records the Run as interrupted.
        Claim::Claimed => Ok(Claimed::Ours(leases.hold(principal.owner(), &print.key, run_id))),
    }
}

fn conflict(key: &str) -> OpError {
    request_error(
        RequestErrorKind::IdempotencyConflict,
        format!(
            "idempotency_key '{key}' was used with another program or input; use a fresh key for a changed request"
        ),
    )
}

/// A store failure of an execute before its Run started (a claim, a
/// replay, the policy's budget, the stored-bytes quota): retryable when the
/// database could not be reached ([`storage_error`]).
pub(super) fn before_run(error: &StoreError) -> OpError {
    storage_error(error, "execute")
}

/// A store failure once the Run started: logged, `internal`.
pub(crate) fn internal(error: &dyn std::fmt::Display) -> OpError {
    tracing::error!(%error, "store failure during execute");
    request_error(RequestErrorKind::Internal, "the server's storage failed; the failure was logged")
}

/// The deduplication window: at least the retention period (Part II
/// §6.5.6), and a day when runs are not retained by duration.
fn idempotency_window(retention: &Retention) -> Duration {
    match retention {
        Retention::Duration { span, .. } => (*span).max(Duration::from_secs(3600)),
        _ => Duration::from_secs(86_400),
    }
}

/// Waits for the Run holding `key` to finish and returns its recorded
/// response. A claim whose lease ran out (its process stopped renewing
/// it) is taken over: the interrupted outcome, at `level`, becomes the
/// key's response (`idempotency.rs`). A live claim is only waited for.
async fn replay(context: &Context, key: &str, level: TraceLevel) -> Result<ExecuteAnswer, OpError> {
    let principal = &context.caller.principal;
    // A live Run answers within its wall time; a dead one's lease runs
    // out within a lease of its last renewal. Waiting out both, the first
    // retry after a crash gets the recorded outcome, never "not finished".
    let patience = Duration::from_millis(context.platform.engine().bounds().execution.wall_time_ms)
        + Duration::from_millis(context.platform.leases().settings().lease_ms)
        + Duration::from_secs(10);
    let started = std::time::Instant::now();
    loop {
        let held =
            context.platform.store().idempotency_get(principal.owner(), key).await.map_err(|e| before_run(&e))?;
        let now = context.platform.clock().now_ms();
        match held {
            Some(HeldClaim { response: Some(response), .. }) => {
                let response: ExecuteResponse = serde_json::from_str(&response).map_err(|e| internal(&e))?;
                return Ok(response.into());
            }
            Some(held) if held.lease_expired(now) => {
                let run_id = held.run_id.clone().unwrap_or_else(super::answer::new_run_id);
                let response = interrupted_response(&run_id, level);
                let text = serde_json::to_string(&response).map_err(|e| internal(&e))?;
                let taken = context
                    .platform
                    .store()
                    .idempotency_take_over(
                        principal.owner(),
                        key,
                        held.run_id.as_deref(),
                        context.platform.leases().instance_id(),
                        now,
                        &text,
                    )
                    .await
                    .map_err(|e| internal(&e))?;
                if taken {
                    tracing::warn!(%run_id, key = %key, owner = ?held.owner, "idempotency claim's lease ran out: Run recorded as interrupted");
                    return Ok(response.into());
                }
                // Renewed, finished or taken over by another retry
                // meanwhile: read it again.
            }
            Some(_) if started.elapsed() < patience => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Some(_) => {
                return Err(request_error(
                    RequestErrorKind::Internal,
                    format!("the Run holding idempotency_key '{key}' has not finished; retry later with the same key"),
                ));
            }
            None => {
                return Err(request_error(
                    RequestErrorKind::Internal,
                    format!("the Run holding idempotency_key '{key}' did not start; retry with the same key"),
                ));
            }
        }
    }
}

/// Records `response` as the answer of `key`, held by Run `run_id`. `None`
/// when it is recorded; the response recorded instead when the claim is no
/// longer this Run's (a retry found its lease run out and recorded the
/// interrupted outcome: `idempotency.rs`).
///
/// # Errors
/// `internal` when the store fails.
pub(super) async fn fence(
    context: &Context,
    key: &str,
    run_id: &str,
    response: &ExecuteResponse,
) -> Result<Option<ExecuteResponse>, OpError> {
    let principal = &context.caller.principal;
    let store = context.platform.store();
    let text = serde_json::to_string(response).map_err(|e| internal(&e))?;
    let recorded = store.idempotency_complete(principal.owner(), key, run_id, &text).await.map_err(|e| internal(&e))?;
    if recorded {
        return Ok(None);
    }
    let held = store.idempotency_get(principal.owner(), key).await.map_err(|e| internal(&e))?;
    let theirs = held
        .and_then(|held| held.response)
        .and_then(|text| serde_json::from_str::<ExecuteResponse>(&text).ok())
        .filter(|theirs| theirs.run_id == run_id);
    if theirs.is_some() {
        tracing::warn!(%run_id, key = %key, "the Run's idempotency claim was taken over before it finished: it answers the outcome recorded then");
    }
    Ok(theirs)
}
