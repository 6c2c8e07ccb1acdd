"""The report every Python interoperability script prints: its checks, and
one JSON line {"sdk", "ok", "passed", "failed"} at the end, read by
platform/cli/tests/all/interop.rs."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

checks: list[dict[str, Any]] = []


def check(name: str, passed: Any, detail: Any = None) -> None:
    """Records one check; `detail` explains a failure."""
    entry: dict[str, Any] = {"name": name, "ok": bool(passed)}
    if detail is not None:
        entry["detail"] = detail if isinstance(detail, (str, int, float, bool, list, dict)) else repr(detail)
    checks.append(entry)


def leaves(error: BaseException) -> list[BaseException]:
    """The innermost exceptions of an exception group (anyio task groups wrap them)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def run(usage: str, scenario: Callable[..., Awaitable[None]], timeout_s: float) -> int:
    """Runs `scenario(*argv)` bounded by `timeout_s`, prints the report and
    returns the exit status: 0 when every check passed, 1 on a mismatch, 2
    on bad usage (`usage` names the arguments)."""
    arguments = sys.argv[1:]
    if len(arguments) != len(usage.split()):
        sys.stderr.write(f"usage: python3 {sys.argv[0]} {usage}\n")
        return 2
    try:
        asyncio.run(asyncio.wait_for(scenario(*arguments), timeout_s))
    except Exception as error:  # report, never hang or die silently
        check("the scenario completes", False, [f"{type(leaf).__name__}: {leaf}" for leaf in leaves(error)])
    failed = [entry for entry in checks if not entry["ok"]]
    ok = bool(checks) and not failed
    print(json.dumps({"sdk": f"mcp {version('mcp')}", "ok": ok, "passed": len(checks) - len(failed), "failed": failed}))
    return 0 if ok else 1
