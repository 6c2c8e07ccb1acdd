//! The edge's part of the 2025-11-25 task form (`mcp::tasks_2025`): what
//! rmcp's types cannot carry in that revision's shapes is put right here,
//! on the JSON of the request and of its answer.
//!
//! - an `initialize` answered with 2025-11-25 or earlier gets the `tasks`
//!   server capability beside the Tasks extension;
//! - inside a session, `tools/list` moves each execute tool's mark to its
//!   `execution` (`taskSupport: "optional"`);
//! - inside a session, a `tools/call` with `params.task` loses that field
//!   and is marked, and the task handle it is answered with becomes
//!   `{task: {…}}`;
//! - inside a session, `tasks/get` and `tasks/cancel` naming a task of this
//!   form are renamed to the form's own methods, and `tasks/result` and
//!   `tasks/list` are marked.
//!
//! Invariant: a request outside a session, or one in the extension form,
//! passes unchanged; only requests this module marks reach the form's
//! handlers.

use serde_json::{Map, Value};

use crate::mcp::tasks_2025::{self, CANCEL, EXECUTION_MARK, GET, ID_PREFIX, LIST, RESULT};

/// The request `_meta` key of per-request client capabilities.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// How the answer to a request is put in the 2025-11-25 shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// The `tasks` capability when the negotiated revision has it.
    Initialize,
    /// Execute tools' `execution`.
    ToolsList,
    /// The task handle as `{task}`.
    Call,
}

/// What [`plan`] made of a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct FormPlan {
    /// How its answer is rewritten, if it is.
    pub answer: Option<Answer>,
    /// The request gets the form's mark.
    pub mark: bool,
    /// The request's JSON was changed and must be sent on as changed.
    pub rewritten: bool,
}

/// The plan for one JSON-RPC request (`message`, changed in place where
/// the plan says so); `in_session` when it carries `Mcp-Session-Id`.
pub(super) fn plan(message: &mut Value, in_session: bool) -> FormPlan {
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return FormPlan::default();
    };
    if method == "initialize" {
        return FormPlan { answer: Some(Answer::Initialize), ..FormPlan::default() };
    }
    if !in_session {
        return FormPlan::default();
    }
    match method {
        "tools/list" => FormPlan { answer: Some(Answer::ToolsList), mark: true, rewritten: false },
        "tools/call" => {
            let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) else {
                return FormPlan::default();
            };
            if params.remove("task").is_none() {
                return FormPlan::default();
            }
            // rmcp answers a task handle only to a client that declared the
            // Tasks extension; this form's client asked for the task by
            // `params.task`, which is the same ask: it is said in the
            // request's capabilities.
            let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Some(meta) = meta.as_object_mut() {
                let declared = meta.entry(CLIENT_CAPABILITIES).or_insert_with(|| Value::Object(Map::new()));
                if let Some(declared) = declared.as_object_mut() {
                    let extensions = declared.entry("extensions").or_insert_with(|| Value::Object(Map::new()));
                    if let Some(extensions) = extensions.as_object_mut() {
                        extensions.entry(rmcp::model::TASKS_EXTENSION_ID).or_insert_with(|| Value::Object(Map::new()));
                    }
                }
            }
            FormPlan { answer: Some(Answer::Call), mark: true, rewritten: true }
        }
        "tasks/get" | "tasks/cancel" => {
            let ours =
                message.pointer("/params/taskId").and_then(Value::as_str).is_some_and(|id| id.starts_with(ID_PREFIX));
            if !ours {
                return FormPlan::default();
            }
            let renamed = if method == "tasks/get" { GET } else { CANCEL };
            message["method"] = Value::from(renamed);
            FormPlan { answer: None, mark: true, rewritten: true }
        }
        RESULT | LIST => FormPlan { answer: None, mark: true, rewritten: false },
        _ => FormPlan::default(),
    }
}

/// Puts the JSON-RPC response `message` to a request planned `answer` in
/// the 2025-11-25 shape. An error response, or a result of another shape,
/// is left as it is.
pub(super) fn finish(answer: Answer, message: &mut Value) {
    let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else {
        return;
    };
    match answer {
        Answer::Initialize => {
            let negotiated = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
            // Revisions are dates, so they order as text.
            if negotiated > "2025-11-25" || negotiated.is_empty() {
                return;
            }
            let declares_tasks = result
                .get("capabilities")
                .and_then(|capabilities| capabilities.get("extensions"))
                .and_then(|extensions| extensions.get(rmcp::model::TASKS_EXTENSION_ID))
                .is_some();
            if let Some(capabilities) = result.get_mut("capabilities").and_then(Value::as_object_mut)
                && declares_tasks
            {
                capabilities.insert("tasks".to_owned(), tasks_2025::capability());
            }
        }
        Answer::ToolsList => {
            let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else { return };
            for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
                let Some(meta) = tool.get_mut("_meta").and_then(Value::as_object_mut) else { continue };
                let Some(execution) = meta.remove(EXECUTION_MARK) else { continue };
                if meta.is_empty() {
                    tool.remove("_meta");
                }
                tool.insert("execution".to_owned(), execution);
            }
        }
        Answer::Call => {
            if result.get("resultType").and_then(Value::as_str) != Some("task") {
                return;
            }
            let Some(task) = tasks_2025::task_shape(&Value::Object(result.clone())) else { return };
            let mut handle = Map::new();
            handle.insert("task".to_owned(), task);
            if let Some(meta) = result.remove("_meta") {
                handle.insert("_meta".to_owned(), meta);
            }
            *result = handle;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_session_requests_of_the_form_are_planned() {
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run_workflow", "arguments": {}, "task": {"ttl": 60000}}});
        let mut outside = call.clone();
        assert_eq!(plan(&mut outside, false), FormPlan::default(), "no session, no form");
        assert!(outside.pointer("/params/task").is_some(), "left as it came");
        assert_eq!(plan(&mut call, true), FormPlan { answer: Some(Answer::Call), mark: true, rewritten: true });
        assert_eq!(call.pointer("/params/task"), None);
        assert_eq!(
            call.pointer("/params/_meta/io.modelcontextprotocol~1clientCapabilities/extensions"),
            Some(&json!({"io.modelcontextprotocol/tasks": {}})),
            "the ask for a task is said as rmcp reads it"
        );
        assert_eq!(call.pointer("/params/name"), Some(&json!("run_workflow")));

        let mut plain = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}});
        assert_eq!(plan(&mut plain, true), FormPlan::default(), "a call without params.task is today's call");

        let mut ours = json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
            "params": {"taskId": format!("{ID_PREFIX}00")}});
        assert!(plan(&mut ours, true).mark);
        assert_eq!(ours["method"], json!(GET));
        let mut extension = json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/cancel",
            "params": {"taskId": "task_00"}});
        assert_eq!(plan(&mut extension, true), FormPlan::default(), "an extension-form task stays with rmcp");
        assert_eq!(extension["method"], json!("tasks/cancel"));

        let mut list = json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/list"});
        assert_eq!(plan(&mut list, true), FormPlan { answer: None, mark: true, rewritten: false });
        assert_eq!(plan(&mut list, false), FormPlan::default(), "the stateless revision has no tasks/list");
        let mut init = json!({"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": {}});
        assert_eq!(plan(&mut init, false).answer, Some(Answer::Initialize));
    }

    #[test]
    fn answers_take_the_forms_shapes() {
        let mut initialize = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}});
        finish(Answer::Initialize, &mut initialize);
        assert_eq!(initialize.pointer("/result/capabilities/tasks"), Some(&tasks_2025::capability()));
        let mut later = json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2026-07-28",
            "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}});
        finish(Answer::Initialize, &mut later);
        assert_eq!(later.pointer("/result/capabilities/tasks"), None, "not a capability after 2025-11-25");

        let mut tools = json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
            {"name": "run_x", "_meta": {EXECUTION_MARK: {"taskSupport": "optional"}}},
            {"name": "validate_x", "_meta": {"k": 1}},
            {"name": "run_y", "_meta": {"k": 2, EXECUTION_MARK: {"taskSupport": "optional"}}}]}});
        finish(Answer::ToolsList, &mut tools);
        assert_eq!(
            tools["result"]["tools"],
            json!([{"name": "run_x", "execution": {"taskSupport": "optional"}},
                   {"name": "validate_x", "_meta": {"k": 1}},
                   {"name": "run_y", "_meta": {"k": 2}, "execution": {"taskSupport": "optional"}}])
        );

        let mut handle = json!({"jsonrpc": "2.0", "id": 3, "result": {"resultType": "task", "taskId": "t",
            "status": "working", "createdAt": "a", "lastUpdatedAt": "b", "ttlMs": 10, "pollIntervalMs": 5,
            "_meta": {"m": 1}}});
        finish(Answer::Call, &mut handle);
        assert_eq!(
            handle["result"],
            json!({"task": {"taskId": "t", "status": "working", "createdAt": "a", "lastUpdatedAt": "b",
                "ttl": 10, "pollInterval": 5}, "_meta": {"m": 1}})
        );
        let mut error = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "no"}});
        let before = error.clone();
        finish(Answer::Call, &mut error);
        assert_eq!(error, before);
    }
}
