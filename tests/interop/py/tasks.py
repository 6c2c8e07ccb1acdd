"""Interoperability check of long Runs as MCP tasks with the official
Python SDK (`mcp`), on the stateless revision (2026-07-28) and the Tasks
extension (`io.modelcontextprotocol/tasks`, `resultType: "task"`).

mcp 2.3.0 ships no task client. Its extension interface (`ClientExtension`)
lets a client claim another result shape of `tools/call` by its
`resultType` and resolve it to the ordinary `CallToolResult`; this script's
extension polls `tasks/get` through the SDK session until the task ends,
so `Client.call_tool` returns the Run's ordinary execute result. A second
task is cancelled with `tasks/cancel` while its Run runs (issue 30 item 2).

The server must have the capability cap_slow_effect in the tenant's
catalog; the Rust test that starts the script registers it and counts the
effects.

Usage: python3 tasks.py http://127.0.0.1:PORT/mcp
Prints one JSON line {"sdk": ..., "ok": bool, "checks": [...]} and exits 0
when every check passed, 1 on a mismatch, 2 on bad usage.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, ClassVar, Literal

from report import check, run
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Implementation, Request, RequestParams, Result

TASKS = "io.modelcontextprotocol/tasks"
REQUEST_TIMEOUT_S = 10.0
SCENARIO_TIMEOUT_S = 60.0
ENDED = ("completed", "failed", "cancelled")




class TaskHandle(Result):
    """The answer to a task-augmented `tools/call`: the task, at once."""

    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskState(Result):
    """A `tasks/get` answer: the task and, once it ended, its result or error."""

    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(RequestParams):
    task_id: str


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    # The task id rides as the request's Mcp-Name header too (SEP-2663).
    name_param: ClassVar[str] = "taskId"
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    name_param: ClassVar[str] = "taskId"
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams


class TaskEnded(Exception):
    """A task that ended other than completed."""

    def __init__(self, state: TaskState) -> None:
        super().__init__(f"task {state.task_id} ended {state.status}: {state.status_message}")
        self.state = state


class Tasks(ClientExtension):
    """The Tasks extension: claims `resultType: "task"` and polls it to its end."""

    identifier = TASKS

    def __init__(self) -> None:
        self.created: list[TaskHandle] = []
        self.seen: dict[str, list[str]] = {}

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self.resolve)]

    async def resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.created.append(handle)
        seen = self.seen.setdefault(handle.task_id, [handle.status])
        while True:
            await asyncio.sleep((handle.poll_interval_ms or 500) / 1000)
            state = await ctx.session.send_request(GetTask(params=TaskParams(task_id=handle.task_id)), TaskState)
            seen.append(state.status)
            if state.status == "completed" and state.result is not None:
                return CallToolResult.model_validate(state.result)
            if state.status in ENDED:
                raise TaskEnded(state)


def slow_run(items: int) -> dict[str, Any]:
    """A workflow calling the slow capability once per item."""
    return {
        "workflow": {
            "input": {"items": "array"},
            "steps": [
                {
                    "id": "each",
                    "kind": "for_each",
                    "over": "$.input.items",
                    "as": "item",
                    "do": [{"id": "effect", "kind": "call", "capability": "cap_slow_effect", "with": {"n": "$.item"}}],
                }
            ],
            "output": {"done": True},
        },
        "input": {"items": list(range(1, items + 1))},
        "store": True,
    }


async def scenario(url: str) -> None:
    tasks = Tasks()
    info = Implementation(name="pilotage-interop-py-tasks", version="1.0")
    async with Client(url, read_timeout_seconds=REQUEST_TIMEOUT_S, client_info=info, extensions=[tasks]) as client:
        session = client.session
        check("a stateless revision was negotiated", session.discover_result is not None, session.protocol_version)

        # To completion: call_tool returns the ordinary result, the SDK
        # having resolved the task handle through the extension.
        result = await client.call_tool("run_workflow", slow_run(3))
        structured = result.structured_content or {}
        outcome = structured.get("outcome") or {}
        check("a task handle was answered and claimed", len(tasks.created) == 1, len(tasks.created))
        task_id = tasks.created[0].task_id if tasks.created else ""
        seen = tasks.seen.get(task_id, [])
        check("tasks/get: working, then completed", "working" in seen and seen[-1] == "completed", seen)
        check("the handle carries ttlMs and pollIntervalMs", bool(tasks.created) and tasks.created[0].ttl_ms is not None)
        check("the ordinary execute result, outcome success", outcome.get("status") == "success", outcome)
        check("the Run's output", structured.get("output") == {"done": True}, structured.get("output"))
        check("the SDK validated it against the tool's outputSchema", result.is_error is not True)

        # To cancellation, after at least one invocation.
        running = asyncio.create_task(client.call_tool("run_workflow", slow_run(10)))
        while len(tasks.created) < 2:
            await asyncio.sleep(0.05)
        second = tasks.created[1].task_id
        await asyncio.sleep(1.2)
        await session.send_request(CancelTask(params=TaskParams(task_id=second)), Result)
        check("tasks/cancel: acknowledged", True)
        ended: TaskState | None = None
        try:
            await asyncio.wait_for(running, 15)
        except TaskEnded as error:
            ended = error.state
        check("cancel: the task ended cancelled", ended is not None and ended.status == "cancelled", tasks.seen.get(second))
        message = (ended.status_message if ended else None) or ""
        check("cancel: its message says the Run was cancelled, outcome partial", "cancelled" in message, message)
        run_id = message.split("run_id ")[1].split(")")[0] if "run_id " in message else ""
        fetched = await client.call_tool("trace_workflow", {"run_id": run_id})
        stored = fetched.structured_content or {}
        stopped = stored.get("outcome") or {}
        check(
            "cancel: the stored Run is partial, its error says cancelled",
            stopped.get("status") == "partial" and str(stopped.get("error", "")).startswith("cancelled"),
            stopped,
        )
        steps = (stored.get("trace") or {}).get("steps") or []
        check("cancel: what already ran is in the trace", any(step.get("calls") == "cap_slow_effect" for step in steps))

        code = None
        try:
            await session.send_request(GetTask(params=TaskParams(task_id="task_" + "0" * 32)), TaskState)
        except MCPError as error:
            code = error.code
        check("tasks/get: an unknown task is -32602", code == -32602, code)



if __name__ == "__main__":
    sys.exit(run("MCP_URL", scenario, SCENARIO_TIMEOUT_S))
