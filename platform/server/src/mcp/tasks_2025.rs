//! The 2025-11-25 form of MCP tasks, beside the Tasks extension that
//! [`super::tasks`] implements: a session client that augments a
//! `tools/call` with `params.task` gets its execute as a task created and
//! run exactly as in the extension form, and `tasks/get`, `tasks/result`,
//! `tasks/list` and `tasks/cancel` answer in that revision's shapes (a
//! flat `Task` with `ttl` and `pollInterval`; the result of the call from
//! `tasks/result`).
//!
//! Invariant: only a request the HTTP edge marked with [`Form2025`] is
//! served here (`http::compat` marks the form's requests inside a session
//! and renames `tasks/get` and `tasks/cancel` of this form's tasks to
//! [`GET`] and [`CANCEL`], which rmcp's own task types cannot answer in
//! this shape); the same names unmarked are unknown methods, so nothing
//! here is reachable on the stateless revision.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::ErrorCode;
use serde_json::{Map, Value, json};

use super::tasks::{cancel, current, storage, task};
use crate::operations::Context;

pub(crate) use super::tasks::FORM_2025_ID_PREFIX as ID_PREFIX;

/// The method `tasks/get` of this form's tasks is renamed to by the edge.
pub(crate) const GET: &str = "pilotage/2025-11-25/tasks/get";

/// The method `tasks/cancel` of this form's tasks is renamed to by the
/// edge.
pub(crate) const CANCEL: &str = "pilotage/2025-11-25/tasks/cancel";

/// `tasks/result`: the result of the task's request, once it ended.
pub(crate) const RESULT: &str = "tasks/result";

/// `tasks/list`: the caller's tasks, newest first.
pub(crate) const LIST: &str = "tasks/list";

/// The `_meta` key a listed execute tool carries for the edge, which
/// moves its value to the tool's `execution` (a field rmcp's `Tool` does
/// not have) and removes the key.
pub(crate) const EXECUTION_MARK: &str = "pilotage/execution";

/// The `_meta` key naming the task a result belongs to.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// How many tasks a `tasks/list` page holds.
const PAGE: i64 = 50;

/// How long `tasks/cancel` waits for the Run to stop at its next
/// invocation boundary before answering the task as it then stands.
const CANCEL_WAIT: Duration = Duration::from_secs(3);

/// How often a waiting `tasks/result` or `tasks/cancel` reads the task.
const WAIT_STEP: Duration = Duration::from_millis(100);

/// The mark of a request in this form, put on the HTTP request by the
/// edge: `deadline` is when the edge stops waiting for the answer, so a
/// blocking `tasks/result` answers before it rather than wait unseen.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Form2025 {
    /// When the edge's request timeout ends.
    pub deadline: tokio::time::Instant,
}

/// The server's `tasks` capability in this form: tasks listed and
/// cancelled, `tools/call` task-augmentable.
pub(crate) fn capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// This form's `Task` from the extension form's (rmcp's `Task`
/// serialized: `ttlMs`, `pollIntervalMs` in place of `ttl`,
/// `pollInterval`); `None` when `value` has no `taskId`.
pub(crate) fn task_shape(value: &Value) -> Option<Value> {
    let from = value.as_object()?;
    from.get("taskId")?.as_str()?;
    let mut task = Map::new();
    for key in ["taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt"] {
        if let Some(field) = from.get(key) {
            task.insert(key.to_owned(), field.clone());
        }
    }
    task.insert("ttl".to_owned(), from.get("ttlMs").cloned().unwrap_or(Value::Null));
    if let Some(poll) = from.get("pollIntervalMs") {
        task.insert("pollInterval".to_owned(), poll.clone());
    }
    Some(Value::Object(task))
}

/// The answer to a request of this form.
///
/// # Errors
/// -32601 for a method this form does not have; -32602 for missing
/// params, a task the caller cannot see, an unreadable cursor or the
/// cancellation of an ended task; a failed task's own error from
/// `tasks/result`; internal on a store failure.
pub(super) async fn serve(context: &Context, method: &str, params: &Value, form: Form2025) -> Result<Value, McpError> {
    let task_id = || {
        params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| McpError::invalid_params(format!("{method} needs params {{taskId}}"), None))
    };
    match method {
        GET => Ok(shaped(&current(context, task_id()?).await?)),
        RESULT => result(context, task_id()?, form).await,
        LIST => list(context, params.get("cursor")).await,
        CANCEL => cancel_now(context, task_id()?, form).await,
        _ => Err(McpError::new(ErrorCode::METHOD_NOT_FOUND, method.to_owned(), None)),
    }
}

fn shaped(row: &pilotage_store::TaskRow) -> Value {
    task_shape(&serde_json::to_value(task(row)).unwrap_or(Value::Null)).unwrap_or(Value::Null)
}

fn is_terminal(row: &pilotage_store::TaskRow) -> bool {
    row.status != "working"
}

/// `tasks/result`: waits until the task ended (or the edge's deadline is
/// near), then answers the call's result with the related-task `_meta`,
/// or the failed call's error.
async fn result(context: &Context, task_id: &str, form: Form2025) -> Result<Value, McpError> {
    let give_up = form.deadline.checked_sub(Duration::from_secs(1)).unwrap_or(form.deadline);
    let row = loop {
        let row = current(context, task_id).await?;
        if is_terminal(&row) {
            break row;
        }
        if tokio::time::Instant::now() + WAIT_STEP >= give_up {
            return Err(McpError::new(
                ErrorCode::INTERNAL_ERROR,
                "the task is still working past this request's time: ask tasks/result again, or poll tasks/get",
                None,
            ));
        }
        tokio::time::sleep(WAIT_STEP).await;
    };
    let stored = row.result.as_deref().and_then(|text| serde_json::from_str::<Value>(text).ok());
    match (row.status.as_str(), stored) {
        ("failed", Some(error)) => Err(serde_json::from_value::<McpError>(error)
            .unwrap_or_else(|_| McpError::internal_error(row.status_message.clone().unwrap_or_default(), None))),
        ("failed", None) => Err(McpError::internal_error(row.status_message.clone().unwrap_or_default(), None)),
        (_, Some(Value::Object(mut result))) => {
            let meta = result.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(RELATED_TASK.to_owned(), json!({"taskId": row.task_id}));
            }
            Ok(Value::Object(result))
        }
        _ => Err(McpError::internal_error(format!("the task ended ({}) without a recorded result", row.status), None)),
    }
}

/// `tasks/list`: a page of the caller's unexpired tasks, newest first;
/// the cursor is opaque to the client (creation time and id of the last
/// task of the page before).
async fn list(context: &Context, cursor: Option<&Value>) -> Result<Value, McpError> {
    let bad_cursor = || McpError::invalid_params("the cursor is not one this server gave", None);
    let before = match cursor {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            let (created, id) = text.split_once('.').ok_or_else(bad_cursor)?;
            Some((created.parse::<i64>().map_err(|_| bad_cursor())?, id.to_owned()))
        }
        Some(_) => return Err(bad_cursor()),
    };
    let principal = &context.caller.principal;
    let now = context.platform.clock().now_ms();
    let rows = context
        .platform
        .store()
        .tasks_of(principal.owner(), now, before.as_ref().map(|(c, id)| (*c, id.as_str())), PAGE)
        .await
        .map_err(|error| storage(&error))?;
    let mut answer = Map::new();
    answer.insert("tasks".to_owned(), Value::Array(rows.iter().map(shaped).collect()));
    if rows.len() as i64 == PAGE
        && let Some(last) = rows.last()
    {
        answer.insert("nextCursor".to_owned(), Value::String(format!("{}.{}", last.created_at, last.task_id)));
    }
    Ok(Value::Object(answer))
}

/// `tasks/cancel`: an ended task cannot be cancelled (-32602); a working
/// one is asked to stop at its Run's next invocation boundary, and the
/// answer is the task once it stopped, or as it stands after a short wait.
async fn cancel_now(context: &Context, task_id: &str, form: Form2025) -> Result<Value, McpError> {
    let row = current(context, task_id).await?;
    if is_terminal(&row) {
        return Err(McpError::invalid_params(
            format!("the task has already ended ({}); only a working task can be cancelled", row.status),
            None,
        ));
    }
    cancel(context, task_id).await?;
    let until = (tokio::time::Instant::now() + CANCEL_WAIT).min(form.deadline);
    loop {
        let row = current(context, task_id).await?;
        if is_terminal(&row) || tokio::time::Instant::now() + WAIT_STEP >= until {
            return Ok(shaped(&row));
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_task_takes_this_forms_shape() {
        let extension = json!({"resultType": "task", "taskId": "task_2025_ab", "status": "working",
            "statusMessage": "the Run is running", "createdAt": "2026-12-04T10:00:00Z",
            "lastUpdatedAt": "2026-12-04T10:00:01Z", "ttlMs": 3600000, "pollIntervalMs": 500});
        assert_eq!(
            task_shape(&extension),
            Some(json!({"taskId": "task_2025_ab", "status": "working", "statusMessage": "the Run is running",
                "createdAt": "2026-12-04T10:00:00Z", "lastUpdatedAt": "2026-12-04T10:00:01Z",
                "ttl": 3600000, "pollInterval": 500}))
        );
        // No ttl means unlimited, which this form says with null.
        assert_eq!(task_shape(&json!({"taskId": "t", "status": "completed"})).unwrap()["ttl"], Value::Null);
        assert_eq!(task_shape(&json!({"content": []})), None);
        assert_eq!(task_shape(&json!("task")), None);
    }
}
