"""Interoperability check: drives a Pilotage MCP server with the official
Python SDK (`mcp`, streamable HTTP client) through the Part III §9.3-9.4
scenario, and checks that the SDK accepts every result against the tool's
declared outputSchema, request errors included (Part III §6, §7.2).

The scenario runs twice: over the initialize handshake with a session
(`ClientSession.initialize`, MCP 2025-11-25), and over `server/discover`
without a session (the SDK's high-level `Client`, MCP 2026-07-28), so one
script exercises both revisions Part III supports. Each pass makes one Run.

Usage: python3 client.py http://127.0.0.1:PORT/mcp
Prints one JSON line {"sdk": ..., "ok": bool, "checks": [...]} and exits 0
when every check passed, 1 on a mismatch, 2 on bad usage.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any

from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, Implementation

EXPECTED_TOOLS = [
    "pilotage_manifest",
    "pilotage_get_guide",
    "pilotage_catalog",
    "validate_workflow",
    "run_workflow",
    "trace_workflow",
    "promote_workflow",
]
LANGUAGE = "workflow/v1"
TYPO_PROGRAM = {"steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profil"}]}
CORRECTED_PROGRAM = {
    "steps": [
        {"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "$.input.userId"}}
    ],
    "output": {"name": "$.steps.profile.output.name"},
}
UNKNOWN_RUN_ID = "run_does_not_exist_0000"
CLIENT_INFO = Implementation(name="pilotage-interop-py", version="1.0.0")
# Longest time one request may take, in seconds.
REQUEST_TIMEOUT_S = 10.0
# Longest time the whole scenario may take, in seconds.
SCENARIO_TIMEOUT_S = 60.0

checks: list[dict[str, Any]] = []


# The connection mode the checks being recorded belong to.
mode = ""


def check(name: str, passed: bool, detail: Any = None) -> None:
    entry: dict[str, Any] = {"name": f"{mode}: {name}" if mode else name, "ok": bool(passed)}
    if detail is not None:
        entry["detail"] = detail
    checks.append(entry)


async def call(session: ClientSession, label: str, name: str, args: dict[str, Any]) -> tuple[bool, dict[str, Any]] | None:
    """Calls a tool through the SDK and checks the envelope.

    The SDK validates `structuredContent` against the tool's outputSchema
    only when `isError` is false; for request errors this function asks the
    SDK's own validator (`ClientSession.validate_tool_result`) explicitly,
    so both polarities go through the SDK's check.
    """
    try:
        result = await session.call_tool(name, args, read_timeout_seconds=REQUEST_TIMEOUT_S)
    except Exception as error:  # the SDK rejected the result
        check(f"{label}: the SDK accepts the result", False, f"{type(error).__name__}: {error}")
        return None
    is_error = result.is_error is True
    if is_error:
        try:
            await session.validate_tool_result(name, result)
        except Exception as error:
            check(f"{label}: the SDK accepts the result", False, f"{type(error).__name__}: {error}")
            return None
    check(f"{label}: the SDK accepts the result", True)
    structured = result.structured_content
    check(f"{label}: structuredContent present", isinstance(structured, dict))
    agrees = False
    if len(result.content) == 1 and getattr(result.content[0], "type", None) == "text":
        try:
            agrees = json.loads(result.content[0].text) == structured
        except ValueError:
            agrees = False
    check(f"{label}: one text block with the structuredContent JSON", agrees)
    return is_error, structured if isinstance(structured, dict) else {}


async def handshake(url: str) -> None:
    """The scenario over the initialize handshake (MCP 2025-11-25, sessions)."""
    async with streamable_http_client(url) as (read_stream, write_stream):
        async with ClientSession(
            read_stream,
            write_stream,
            read_timeout_seconds=REQUEST_TIMEOUT_S,
            client_info=CLIENT_INFO,
        ) as session:
            result = await session.initialize()
            check("initialize: a handshake revision was negotiated", True, result.protocol_version)
            await loop(session)


async def stateless(url: str) -> None:
    """The scenario over server/discover (MCP 2026-07-28, no session), as
    the SDK's high-level Client negotiates by default."""
    async with Client(url, read_timeout_seconds=REQUEST_TIMEOUT_S, client_info=CLIENT_INFO) as client:
        check(
            "discover: a stateless revision was negotiated",
            client.session.discover_result is not None,
            client.session.protocol_version,
        )
        await loop(client.session)


async def loop(session: ClientSession) -> None:
    """Discover, validate (typo, corrected), run, fetch the trace, and two
    request errors, on a connected session."""
    capabilities = session.server_capabilities
    check("connect: server declares tools", capabilities is not None and capabilities.tools is not None)
    check("connect: instructions name pilotage_manifest", "pilotage_manifest" in (session.instructions or ""))

    listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    missing = [name for name in EXPECTED_TOOLS if name not in tools]
    check("tools/list: every Pilotage tool is listed", not missing, {"missing": missing} if missing else None)
    without_schema = [name for name in EXPECTED_TOOLS if name in tools and not tools[name].output_schema]
    check(
        "tools/list: every tool declares an outputSchema",
        not without_schema,
        {"withoutSchema": without_schema} if without_schema else None,
    )
    # Control: the SDK's check is not vacuous: it rejects a result
    # missing the required outcome.
    if "run_workflow" in tools:
        bogus = CallToolResult(content=[], structured_content={"run_id": "r"})
        try:
            await session.validate_tool_result("run_workflow", bogus)
            rejected = False
        except RuntimeError:
            rejected = True
        check('control: the SDK rejects {"run_id"} for run_workflow', rejected)

    manifest = await call(session, "manifest", "pilotage_manifest", {})
    if manifest:
        is_error, content = manifest
        check("manifest: success", not is_error)
        check(
            "manifest: lists workflow/v1",
            any(language.get("name") == LANGUAGE for language in content.get("languages", [])),
        )

    invalid = await call(session, "validate (typo)", "validate_workflow", {"workflow": TYPO_PROGRAM})
    if invalid:
        is_error, content = invalid
        first = (content.get("diagnostics") or [{}])[0]
        check("validate (typo): valid false", not is_error and content.get("valid") is False)
        hint = first.get("hint")
        check(
            "validate (typo): hint names cap_read_user_profile",
            isinstance(hint, str) and "cap_read_user_profile" in hint,
            hint,
        )

    valid = await call(session, "validate (corrected)", "validate_workflow", {"workflow": CORRECTED_PROGRAM})
    catalog_version = None
    if valid:
        is_error, content = valid
        catalog_version = content.get("catalog_version")
        check("validate (corrected): valid true", not is_error and content.get("valid") is True)
        check("validate (corrected): catalog_version given", isinstance(catalog_version, str))

    run_args: dict[str, Any] = {
        "workflow": CORRECTED_PROGRAM,
        "input": {"userId": "42"},
        "store": True,
        "trace_level": "full",
    }
    if catalog_version is not None:
        run_args["expected_catalog_version"] = catalog_version
    run = await call(session, "run", "run_workflow", run_args)
    run_id = None
    run_trace = None
    if run:
        is_error, content = run
        run_id = content.get("run_id")
        run_trace = content.get("trace")
        outcome = content.get("outcome") or {}
        output = content.get("output")
        check("run: outcome success", not is_error and outcome.get("status") == "success", outcome)
        check(
            "run: output.name is Amira Hassan",
            isinstance(output, dict) and output.get("name") == "Amira Hassan",
            output,
        )
        check(
            "run: full trace with one step",
            isinstance(run_trace, dict) and run_trace.get("level") == "full" and len(run_trace.get("steps", [])) == 1,
        )

    if isinstance(run_id, str):
        fetched = await call(session, "trace", "trace_workflow", {"run_id": run_id})
        if fetched:
            is_error, content = fetched
            check("trace: success", not is_error and (content.get("outcome") or {}).get("status") == "success")
            check("trace: same trace as the run returned", content.get("trace") == run_trace)
    else:
        check("run: run_id given", False)

    unknown_run = await call(session, "trace (unknown run_id)", "trace_workflow", {"run_id": UNKNOWN_RUN_ID})
    if unknown_run:
        is_error, content = unknown_run
        kind = (content.get("error") or {}).get("kind")
        check("trace (unknown run_id): isError true", is_error)
        check("trace (unknown run_id): error.kind not_found", kind == "not_found", kind)

    unknown_guide = await call(
        session, "guide (unknown id)", "pilotage_get_guide", {"language": LANGUAGE, "id": "no-such-guide"}
    )
    if unknown_guide:
        is_error, content = unknown_guide
        kind = (content.get("error") or {}).get("kind")
        check("guide (unknown id): isError true", is_error)
        check("guide (unknown id): error.kind not_found", kind == "not_found", kind)
    await resources(session)


async def resources(session: ClientSession) -> None:
    """The resource surface (Part III §8.3) through the SDK: listed,
    templated, and read as exactly the text of the tool answer it mirrors."""
    capabilities = session.server_capabilities
    check("connect: server declares resources", capabilities is not None and capabilities.resources is not None)
    index = "pilotage://guides/workflow%2Fv1"
    uris = [str(resource.uri) for resource in (await session.list_resources()).resources]
    check("resources/list: the manifest and the workflow guide index", "pilotage://manifest" in uris and index in uris, uris)
    templates = (await session.list_resource_templates()).resource_templates
    check("resources/templates/list: three templates", len(templates) == 3, len(templates))
    read = await session.read_resource(index)
    tool = await session.call_tool("pilotage_get_guide", {"language": LANGUAGE}, read_timeout_seconds=REQUEST_TIMEOUT_S)
    contents = getattr(read, "contents", [])
    check(
        "resources/read: the guide index is the tool answer, byte for byte",
        len(contents) == 1 and getattr(contents[0], "text", None) == tool.content[0].text,
    )
    code = None
    try:
        await session.read_resource("pilotage://guides/nosuch%2Fv9")
    except MCPError as error:
        code = error.code
    # Resource not found: -32002 up to 2025-11-25, -32602 from 2026-07-28.
    expected = -32602 if mode == "stateless" else -32002
    check("resources/read: an unknown Language is resource-not-found", code == expected, code)


async def scenario(url: str) -> None:
    """Both connection modes, each bounded in time; a failure in one is
    reported and does not stop the other."""
    global mode
    for name, connect in (("handshake", handshake), ("stateless", stateless)):
        mode = name
        try:
            await asyncio.wait_for(connect(url), SCENARIO_TIMEOUT_S)
        except Exception as error:  # report, never hang or die silently
            check("the scenario completes", False, [f"{type(leaf).__name__}: {leaf}" for leaf in leaves(error)])
    mode = ""


def leaves(error: BaseException) -> list[BaseException]:
    """The innermost exceptions of an exception group (anyio task groups wrap them)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python3 client.py http://HOST:PORT/mcp\n")
        return 2
    try:
        asyncio.run(scenario(sys.argv[1]))
    except KeyboardInterrupt:
        raise
    failed = [entry for entry in checks if not entry["ok"]]
    ok = bool(checks) and not failed
    report = {
        "sdk": f"mcp {version('mcp')}",
        "ok": ok,
        "passed": len(checks) - len(failed),
        "failed": failed,
        "checks": checks,
    }
    sys.stdout.write(json.dumps(report) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
