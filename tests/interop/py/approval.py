"""Interoperability check of approvals with the official Python SDK (`mcp`):
an execute the tenant's policy holds is waited on in the same call through
MCP URL-mode elicitation, on the 2025-11-25 revision (a session; the server
sends `elicitation/create`) and on the stateless revision 2026-07-28 (an
`InputRequiredResult`; the SDK answers and retries).

The SDK's elicitation callback plays the person: it checks the request is
URL mode and names the approval page, then approves, rejects or declines
through the admin API (as the operator, never as the asking agent) and
answers the elicitation. The Rust test that starts this script sets the
demo tenant's policy (destructive plans need approval) and checks the
demo capability service saw exactly the approved cancellations.

Usage: python3 approval.py MCP_URL ADMIN_TOKEN
Prints one JSON line {"sdk": ..., "ok": bool, "checks": [...]} and exits 0
when every check passed, 1 on a mismatch, 2 on bad usage.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

from report import check, run
from mcp import Client
from mcp_types import ElicitResult, Implementation

REQUEST_TIMEOUT_S = 30.0
SCENARIO_TIMEOUT_S = 80.0


def cancel(order: str, step: str) -> dict[str, Any]:
    """A workflow that cancels one order: a destructive plan. The step id
    makes each scenario's program its own (an approval is for one program)."""
    return {
        "workflow": {
            "steps": [{"id": step, "kind": "call", "capability": "cap_cancel_order", "with": {"order_id": order}}],
            "output": f"$.steps.{step}.output.status",
        }
    }


class Person:
    """Answers the approval elicitations: decides through the admin API,
    then answers the elicitation with `answer`."""

    def __init__(self, admin_base: str, token: str) -> None:
        self.admin_base = admin_base
        self.token = token
        self.decision: str | None = "approve"
        self.answer = "accept"
        self.seen: list[dict[str, Any]] = []

    def decide(self, approval: str) -> int:
        request = urllib.request.Request(
            f"{self.admin_base}/admin/v1/tenants/demo/approvals/{approval}/{self.decision}",
            method="POST",
            headers={"authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        seen = {"mode": getattr(params, "mode", None), "url": getattr(params, "url", ""),
                "id": getattr(params, "elicitation_id", "")}
        self.seen.append(seen)
        if self.decision is not None and seen["id"]:
            seen["status"] = await asyncio.to_thread(self.decide, seen["id"])
        return ElicitResult(action=self.answer)


async def round_of(revision: str, url: str, token: str) -> None:
    person = Person(url.rsplit("/mcp", 1)[0], token)
    info = Implementation(name=f"pilotage-interop-py-approval-{revision}", version="1.0")
    mode = "legacy" if revision == "2025-11-25" else "auto"
    async with Client(url, read_timeout_seconds=REQUEST_TIMEOUT_S, client_info=info, mode=mode,
                      elicitation_callback=person) as client:
        session = client.session
        negotiated = session.protocol_version
        check(f"{revision}: the revision was negotiated", negotiated == revision, negotiated)

        # Approved in the call: the Run runs and the call answers it.
        tag = revision.replace("-", "_")
        result = await client.call_tool("run_workflow", cancel("o-1001", f"approved_{tag}"))
        structured = result.structured_content or {}
        outcome = structured.get("outcome") or {}
        seen = person.seen[-1] if person.seen else {}
        check(f"{revision}: one URL-mode elicitation", len(person.seen) == 1 and seen.get("mode") == "url", person.seen)
        check(f"{revision}: it names the approval page", str(seen.get("url", "")).endswith(f"/approvals/{seen.get('id')}"), seen)
        check(f"{revision}: the person's approval was recorded", seen.get("status") == 200, seen)
        check(f"{revision}: the approved Run ran in the same call", outcome.get("status") == "success", structured)
        check(f"{revision}: its output", structured.get("output") == "cancelled", structured.get("output"))

        # Rejected in the call: the agent is told, nothing ran.
        person.decision = "reject"
        result = await client.call_tool("run_workflow", cancel("o-1002", f"rejected_{tag}"))
        outcome = (result.structured_content or {}).get("outcome") or {}
        check(f"{revision}: a rejection answers approval_rejected", outcome.get("status") == "approval_rejected", outcome)

        # Declined: the person would not open the page; the call answers
        # at once that approval is still required.
        person.decision = None
        person.answer = "decline"
        result = await client.call_tool("run_workflow", cancel("o-1002", f"declined_{tag}"))
        structured = result.structured_content or {}
        outcome = structured.get("outcome") or {}
        check(f"{revision}: declined: still approval_required", outcome.get("status") == "approval_required", outcome)
        check(f"{revision}: declined: the error says so", "declined" in str(outcome.get("error")), outcome)
        approval = structured.get("approval") or {}
        check(f"{revision}: the approval member names the page", str(approval.get("url", "")).endswith(
            f"/approvals/{approval.get('id')}"), json.dumps(structured)[:400])


async def scenario(url: str, token: str) -> None:
    await round_of("2025-11-25", url, token)
    await round_of("2026-07-28", url, token)


if __name__ == "__main__":
    import sys

    sys.exit(run("MCP_URL ADMIN_TOKEN", scenario, SCENARIO_TIMEOUT_S))
