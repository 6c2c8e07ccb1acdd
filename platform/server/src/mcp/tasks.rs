//! `execute` as an MCP task (the Tasks extension,
//! `io.modelcontextprotocol/tasks`): a client that declares the extension
//! gets a task handle at once; the Run goes on in the background under the
//! tenant's longer `task_wall_time_ms` bound; `tasks/get` reports it and,
//! once it ended, carries the ordinary execute result (outcome and trace,
//! unchanged); `tasks/cancel` stops it at its next invocation boundary.
//!
//! Invariants: a task's state lives in the store, so any replica answers
//! for it and a restart loses nothing that finished; a task is its
//! creator's alone (every store query names tenant and subject), and
//! another principal's task id answers exactly like an unknown one; a task
//! is `completed` only when its Run ended and its result was recorded: a
//! task whose replica fell silent is `failed`, never `completed`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CreateTaskResult, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus};
use serde_json::Value;

use super::content::run_envelope;
use crate::operations::execute::{ExecuteAnswer, execute_with};
use crate::operations::{Context, OpError};
use crate::tenancy::LanguageSlot;
use pilotage_engine::clock::rfc3339;
use pilotage_engine::effects::Cancellation;
use pilotage_engine::execution::RunControl;
use pilotage_store::{StoreError, TaskRow};

/// How often a client is asked to poll, in milliseconds.
pub(super) const POLL_INTERVAL_MS: u64 = 500;

/// How long a task and its result are kept after it was created, in
/// milliseconds (one hour).
pub(super) const TTL_MS: i64 = 3_600_000;

/// How often the replica running a task says it is alive and looks for a
/// cancellation asked for through another replica.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// A working task whose runner has not said it is alive for this long is
/// lost (its replica stopped): it is `failed`.
const LOST_AFTER_MS: i64 = 10_000;

/// The one message for a task the caller cannot see.
const UNKNOWN_TASK: &str = "unknown task: it may have expired or not be yours";

/// The status message of a task whose replica stopped while its Run ran.
const LOST: &str = "the server process running this task stopped before its Run finished: the Run's outcome is \
unknown and it may have partly run; nothing is reported as done";

fn unknown() -> McpError {
    McpError::invalid_params(UNKNOWN_TASK, None)
}

pub(super) fn storage(error: &StoreError) -> McpError {
    if error.is_unreachable() {
        // Retryable: the task and its Run are as they were; only the read
        // or write of this request did not happen.
        tracing::warn!(%error, "the store's database is unreachable: a task request was refused as retryable");
        let retry = serde_json::json!({"retry_after_ms": crate::operations::STORAGE_RETRY_MS});
        return McpError::internal_error(
            "the server's storage is unreachable for the moment; retry shortly",
            Some(retry),
        );
    }
    tracing::error!(%error, "store failure serving a task");
    McpError::internal_error("the server's storage failed; the failure was logged", None)
}

/// The id prefix of a task created in the 2025-11-25 form
/// ([`super::tasks_2025`]); the edge routes that form's `tasks/get` and
/// `tasks/cancel` by it. Extension-form ids are `task_` and hex digits, so
/// the two never meet.
pub(crate) const FORM_2025_ID_PREFIX: &str = "task_2025_";

/// A new task id: `task_` (or [`FORM_2025_ID_PREFIX`]) and 32 random hex
/// digits (128 bits).
fn new_task_id(form_2025: bool) -> String {
    let prefix = if form_2025 { FORM_2025_ID_PREFIX } else { "task_" };
    format!("{prefix}{}", hex::encode(rand::random::<[u8; 16]>()))
}

/// Starts `slot`'s execute with `args` as a task of the caller and
/// answers its handle; the Run goes on in the background. `form_2025`:
/// the call asked in the 2025-11-25 form (`params.task`), whose tasks get
/// ids the edge routes to [`super::tasks_2025`].
///
/// # Errors
/// An internal error when the task cannot be stored.
pub(super) async fn start(
    context: Context,
    slot: Arc<LanguageSlot>,
    tool: String,
    args: Value,
    form_2025: bool,
) -> Result<CallToolResponse, McpError> {
    let platform = context.platform.clone();
    let now = platform.clock().now_ms();
    let runner = platform.leases().instance_id().to_owned();
    let row = TaskRow {
        task_id: new_task_id(form_2025),
        tenant: context.caller.principal.tenant.clone(),
        issuer: context.caller.principal.issuer.clone(),
        subject: context.caller.principal.subject.clone(),
        tool,
        status: "working".into(),
        status_message: Some("the Run is running".into()),
        result: None,
        cancel_requested: false,
        runner: runner.clone(),
        heartbeat_at: now,
        ttl_ms: TTL_MS,
        created_at: now,
        updated_at: now,
        expires_at: now + TTL_MS,
    };
    platform.store().task_insert(&row).await.map_err(|error| storage(&error))?;
    let cancellation = Cancellation::default();
    platform.task_started(&row.task_id, cancellation.clone());
    let task_id = row.task_id.clone();
    tokio::spawn(async move {
        let _serving = context.platform.in_flight().enter();
        let control = RunControl {
            wall_time_ms: Some(context.tenant.quotas().task_wall_time_ms.max(1)),
            cancellation: Some(cancellation.clone()),
            max_invocations: None,
        };
        let run = execute_with(&context, &slot, &args, &control);
        tokio::pin!(run);
        let mut beat = tokio::time::interval(HEARTBEAT);
        let store = context.platform.store();
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                _ = beat.tick() => {
                    let now = context.platform.clock().now_ms();
                    match store.tasks_heartbeat(&runner, std::slice::from_ref(&task_id), now).await {
                        Ok(asked) if !asked.is_empty() => cancellation.cancel(),
                        Ok(_) => {}
                        Err(error) => tracing::warn!(%error, %task_id, "cannot record a task's heartbeat"),
                    }
                }
            }
        };
        let trace_tool = slot.exposure.loop_tools.trace.clone();
        let (status, message, result) = ending(result, cancellation.is_cancelled(), trace_tool.as_deref());
        let now = context.platform.clock().now_ms();
        let tenant = &context.caller.principal.tenant;
        match store.task_finish(tenant, &task_id, status, &message, result.as_deref(), now).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(%task_id, "a task ended after it was declared lost"),
            Err(error) => tracing::error!(%error, %task_id, "cannot record a task's end"),
        }
        context.platform.task_ended(&task_id);
    });
    Ok(CallToolResponse::Task(CreateTaskResult::new(task(&row))))
}

/// The terminal status, message and result (JSON text of the tools/call
/// result, or of the JSON-RPC error) of a task whose execute answered
/// `result`.
fn ending(
    result: Result<ExecuteAnswer, OpError>,
    cancel_asked: bool,
    trace_tool: Option<&str>,
) -> (&'static str, String, Option<String>) {
    let response = result.as_ref().ok().map(|answer| &answer.response);
    let outcome = response.map(|response| response.outcome.clone());
    let run_id = response.map(|response| response.run_id.clone());
    match run_envelope(result.map(|answer| answer.to_value()), trace_tool) {
        Ok(CallToolResponse::Complete(call)) => {
            let text = serde_json::to_string(&call).ok();
            let status = outcome.as_ref().map_or("", |o| o.status.as_str());
            let ok = outcome.as_ref().is_some_and(|o| o.ok);
            let cancelled = cancel_asked
                && !ok
                && outcome.as_ref().and_then(|o| o.error.as_deref()).is_some_and(|e| e.starts_with("cancelled"));
            let run = run_id.map(|id| format!(" (run_id {id})")).unwrap_or_default();
            if cancelled {
                ("cancelled", format!("the Run was cancelled and stopped{run}: outcome {status}"), text)
            } else if call.is_error == Some(true) {
                ("completed", "the request was refused before a Run started: see the result".into(), text)
            } else {
                ("completed", format!("the Run ended{run}: outcome {status}"), text)
            }
        }
        Ok(_) => ("failed", "the Run gave no result".into(), None),
        Err(error) => {
            let text = serde_json::to_string(&error).ok();
            ("failed", format!("the request failed: {}", error.message), text)
        }
    }
}

/// The MCP task of `row`.
pub(super) fn task(row: &TaskRow) -> Task {
    let status = match row.status.as_str() {
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "cancelled" => TaskStatus::Cancelled,
        _ => TaskStatus::Working,
    };
    let mut task = Task::new(&row.task_id, status, rfc3339(row.created_at), rfc3339(row.updated_at))
        .with_ttl_ms(row.ttl_ms.max(0) as u64)
        .with_poll_interval_ms(POLL_INTERVAL_MS);
    if let Some(message) = &row.status_message {
        task = task.with_status_message(message);
    }
    task
}

/// The caller's task `task_id` as it stands; a working task whose runner
/// fell silent is recorded `failed` first.
pub(super) async fn current(context: &Context, task_id: &str) -> Result<TaskRow, McpError> {
    let store = context.platform.store();
    let principal = &context.caller.principal;
    let now = context.platform.clock().now_ms();
    let row =
        store.task_get(principal.owner(), task_id, now).await.map_err(|error| storage(&error))?.ok_or_else(unknown)?;
    if row.status == "working" && row.heartbeat_at < now - LOST_AFTER_MS {
        store.task_lose(&principal.tenant, task_id, now - LOST_AFTER_MS, LOST, now).await.map_err(|e| storage(&e))?;
        return store
            .task_get(principal.owner(), task_id, now)
            .await
            .map_err(|error| storage(&error))?
            .ok_or_else(unknown);
    }
    Ok(row)
}

/// `tasks/get`: the task with its payload: the execute result once
/// completed, the JSON-RPC error once failed.
///
/// # Errors
/// -32602 for a task the caller cannot see; internal on a store failure.
pub(super) async fn get(context: &Context, task_id: &str) -> Result<DetailedTask, McpError> {
    let row = current(context, task_id).await?;
    let object = |text: &Option<String>| -> JsonObject {
        text.as_deref().and_then(|text| serde_json::from_str(text).ok()).unwrap_or_default()
    };
    let payload = match row.status.as_str() {
        "completed" => TaskPayload::Completed { result: object(&row.result) },
        "failed" => {
            let mut error = object(&row.result);
            if error.is_empty() {
                error.insert("code".into(), Value::from(-32603));
                error.insert("message".into(), Value::from(row.status_message.clone().unwrap_or_default()));
            }
            TaskPayload::Failed { error }
        }
        "cancelled" => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    Ok(DetailedTask::new(task(&row), payload))
}

/// `tasks/cancel`: asks the caller's working task to stop at its Run's
/// next invocation boundary, on whichever replica runs it. An ended task
/// is left as it is.
///
/// # Errors
/// -32602 for a task the caller cannot see; internal on a store failure.
pub(super) async fn cancel(context: &Context, task_id: &str) -> Result<(), McpError> {
    let row = current(context, task_id).await?;
    if row.status != "working" {
        return Ok(());
    }
    let principal = &context.caller.principal;
    let now = context.platform.clock().now_ms();
    context
        .platform
        .store()
        .task_request_cancel(principal.owner(), task_id, now)
        .await
        .map_err(|error| storage(&error))?;
    context.platform.task_cancel_here(task_id);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_the_two_forms_are_told_apart_by_their_prefix() {
        let ours = new_task_id(true);
        let extension = new_task_id(false);
        assert!(ours.starts_with(FORM_2025_ID_PREFIX), "{ours}");
        assert!(!extension.starts_with(FORM_2025_ID_PREFIX), "{extension}");
        assert_eq!(ours.len(), FORM_2025_ID_PREFIX.len() + 32);
        assert_eq!(extension.len(), "task_".len() + 32);
        assert_ne!(new_task_id(false), extension, "ids are random");
    }
}
