"""Interoperability check of resource subscriptions across replicas: the
official Python SDK (`mcp`), connected to one replica over the initialize
handshake, subscribes to the workflow/v1 catalog resource (Part III §8.3);
the script then changes the catalog through another replica's admin API,
and the session must receive notifications/resources/updated for that URI,
read the new content (still the catalog tool's answer, byte for byte), and,
once unsubscribed, hear nothing of a further change (issue 30 item 1).

Usage: python3 updated.py MCP_URL ADMIN_BASE ADMIN_TOKEN
Prints one JSON line {"sdk": ..., "ok": bool, "checks": [...]} and exits 0
when every check passed, 1 on a mismatch, 2 on bad usage.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.request
from typing import Any

from report import check, run
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation, ResourceUpdatedNotification

CATALOG = "pilotage://catalog/workflow%2Fv1"
REQUEST_TIMEOUT_S = 10.0
UPDATED_WITHIN_S = 10.0
QUIET_FOR_S = 3.0
SCENARIO_TIMEOUT_S = 60.0

seen: list[str] = []



def put_entry(admin_base: str, token: str, entry_id: str) -> int:
    """PUTs `entry_id` into the demo tenant's catalog through `admin_base`;
    returns the HTTP status."""
    entry = {
        "id": entry_id,
        "kind": "capability",
        "name": f"Interop {entry_id}",
        "description": "Added through another replica by the interoperability check.",
        "input_schema": {"type": "object"},
        "risk": "safe",
        "risk_hints": {"readOnly": True, "destructive": False, "openWorld": False},
    }
    request = urllib.request.Request(
        f"{admin_base}/admin/v1/tenants/demo/catalog/entries/{entry_id}",
        data=json.dumps(entry).encode(),
        method="PUT",
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
        return response.status


async def on_message(message: Any) -> None:
    if isinstance(message, ResourceUpdatedNotification):
        seen.append(str(message.params.uri))


async def updates(count: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if sum(1 for uri in seen if uri == CATALOG) >= count:
            return True
        await asyncio.sleep(0.05)
    return False


async def both(session: ClientSession) -> tuple[str, str]:
    """The catalog resource's text and the catalog tool's text."""
    read = await session.read_resource(CATALOG)
    tool = await session.call_tool(
        "pilotage_catalog", {"language": "workflow/v1", "verb": "list"}, read_timeout_seconds=REQUEST_TIMEOUT_S
    )
    contents = getattr(read, "contents", [])
    return (getattr(contents[0], "text", "") if contents else "", tool.content[0].text)


async def scenario(url: str, admin_base: str, token: str) -> None:
    async with streamable_http_client(url) as (read_stream, write_stream):
        async with ClientSession(
            read_stream,
            write_stream,
            read_timeout_seconds=REQUEST_TIMEOUT_S,
            message_handler=on_message,
            client_info=Implementation(name="pilotage-interop-updated", version="1.0"),
        ) as session:
            await session.initialize()
            capabilities = session.server_capabilities
            resources = capabilities.resources if capabilities else None
            check("initialize: resources with subscribe", resources is not None and resources.subscribe is True)
            before, tool = await both(session)
            check("the catalog resource is the tool answer, byte for byte", before == tool)
            await session.subscribe_resource(CATALOG)
            check("resources/subscribe: accepted", True)

            added = f"cap_interop_py_{int(time.time() * 1000)}"
            status = await asyncio.to_thread(put_entry, admin_base, token, added)
            check("the other replica accepts the catalog change", status < 300, status)
            started = time.monotonic()
            arrived = await updates(1, UPDATED_WITHIN_S)
            check(
                "notifications/resources/updated arrives for the subscribed catalog",
                arrived,
                {"seen": seen, "waited_s": round(time.monotonic() - started, 3)},
            )
            check("every update names a URI the client subscribed to", all(uri == CATALOG for uri in seen), seen)
            after, tool = await both(session)
            check("the re-read catalog holds the new entry", added in after)
            check("and is still the tool answer, byte for byte", after == tool)
            check("and differs from the content before", after != before)

            await session.unsubscribe_resource(CATALOG)
            count = len(seen)
            status = await asyncio.to_thread(put_entry, admin_base, token, f"{added}_again")
            check("a second change is accepted", status < 300, status)
            await asyncio.sleep(QUIET_FOR_S)
            check("resources/unsubscribe: no update after it", len(seen) == count, seen)



if __name__ == "__main__":
    sys.exit(run("MCP_URL ADMIN_BASE ADMIN_TOKEN", scenario, SCENARIO_TIMEOUT_S))
