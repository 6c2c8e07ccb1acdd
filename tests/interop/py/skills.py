"""Interoperability check of the guides served as Agent Skills (the MCP
Skills extension, SEP-2640): the official Python SDK (`mcp`) has no methods
of its own for the extension, so the session sends `skills/list` and
`skills/get` as raw requests through `send_request`, reads every file of
every skill with `resources/read`, verifies each against the entry's size
and sha256 digest, parses SKILL.md's frontmatter with PyYAML and compares it
with the entry, and checks that each file is the body `pilotage_get_guide`
answers, byte for byte.

Usage: python3 skills.py MCP_URL
Prints one JSON line {"sdk": ..., "ok": bool, "checks": [...]} and exits 0
when every check passed, 1 on a mismatch, 2 on bad usage.
"""

from __future__ import annotations

import hashlib
import re
import sys
from typing import Any
from urllib.parse import unquote

import yaml
from pydantic import TypeAdapter
from report import check, run
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation, Request

EXTENSION = "io.modelcontextprotocol/skills"
REQUEST_TIMEOUT_S = 10.0
SCENARIO_TIMEOUT_S = 60.0
SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
ANY_RESULT = TypeAdapter(dict[str, Any])


async def raw(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request the SDK has no method for; the result as sent."""
    request = Request[dict[str, Any], str](method=method, params=params)
    return await session.send_request(request, ANY_RESULT)


async def code_of(awaitable: Any) -> int | None:
    """The error code a request fails with, or None when it succeeds."""
    try:
        await awaitable
    except MCPError as error:
        return error.code
    return None


def split_skill_md(text: str) -> tuple[Any, str] | None:
    """SKILL.md split into its parsed frontmatter and the body after it."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end < 0:
        return None
    return yaml.safe_load(text[4 : end + 1]), text[end + 5 :]


async def read_text(session: ClientSession, uri: str) -> tuple[str, str | None, int]:
    read = await session.read_resource(uri)
    contents = getattr(read, "contents", [])
    first = contents[0] if contents else None
    return getattr(first, "text", ""), getattr(first, "mime_type", None), len(contents)


async def guides(session: ClientSession, language: str) -> dict[str, dict[str, Any]]:
    """The guides of `language`, each with its level and body, as the guide tool answers."""

    async def call(arguments: dict[str, Any]) -> dict[str, Any]:
        result = await session.call_tool("pilotage_get_guide", arguments, read_timeout_seconds=REQUEST_TIMEOUT_S)
        return result.structured_content or {}

    index = await call({"language": language})
    bodies: dict[str, dict[str, Any]] = {}
    for guide in index.get("guides", []):
        fetched = await call({"language": language, "id": guide["id"]})
        bodies[guide["id"]] = {"level": guide["level"], "body": fetched["guide"]["body"]}
    return bodies


async def one_skill(session: ClientSession, skill: dict[str, Any]) -> str | None:
    frontmatter = skill.get("frontmatter", {})
    name = frontmatter.get("name", "")
    label = f"skill {name}"
    check(f"{label}: a valid skill name", bool(SKILL_NAME.match(name)) and len(name) <= 64, name)
    check(f"{label}: its uri ends in its name and SKILL.md", skill.get("uri") == f"skill://pilotage/{name}/SKILL.md")
    description = frontmatter.get("description", "")
    check(f"{label}: a description of 1 to 1024 characters", 0 < len(description) <= 1024)
    language = (frontmatter.get("metadata") or {}).get("language")
    check(f"{label}: metadata names its Language", isinstance(language, str), frontmatter)
    files = skill.get("resources")
    check(f"{label}: resources is a complete list", isinstance(files, list), files)
    files = files if isinstance(files, list) else []
    check(f"{label}: SKILL.md is listed", any(file["uri"] == skill["uri"] for file in files))

    got = await raw(session, "skills/get", {"uri": skill["uri"]})
    check(f"{label}: skills/get answers the listed entry", got.get("skill") == skill, got)

    bodies = await guides(session, language) if isinstance(language, str) else {}
    check(f"{label}: one file per guide", len(files) == len(bodies), {"files": len(files), "guides": len(bodies)})
    for file in files:
        text, mime_type, count = await read_text(session, file["uri"])
        data = text.encode("utf-8")
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        check(f"{file['uri']}: one content", count == 1, count)
        check(
            f"{file['uri']}: size and digest as listed",
            len(data) == file["size"] and digest == file["digest"],
            {"size": len(data), "listed": file["size"]},
        )
        if file["uri"] == skill["uri"]:
            split = split_skill_md(text)
            check(f"{file['uri']}: text/markdown", mime_type == "text/markdown", mime_type)
            check(f"{file['uri']}: frontmatter equals the entry's", split is not None and split[0] == frontmatter)
            core = next((guide for guide in bodies.values() if guide["level"] == "core"), None)
            check(
                f"{file['uri']}: the body is the core guide, byte for byte",
                split is not None and core is not None and split[1] == core["body"],
            )
        else:
            rest = file["uri"][len(f"skill://pilotage/{name}/references/") :]
            guide_id = unquote(re.sub(r"\.[a-z]+$", "", rest))
            guide = bodies.get(guide_id)
            check(f"{file['uri']}: the guide '{guide_id}', byte for byte", guide is not None and text == guide["body"])
    return language


async def scenario(url: str) -> None:
    async with streamable_http_client(url) as (read_stream, write_stream):
        async with ClientSession(
            read_stream,
            write_stream,
            read_timeout_seconds=REQUEST_TIMEOUT_S,
            client_info=Implementation(name="pilotage-interop-skills", version="1.0"),
        ) as session:
            await session.initialize()
            capabilities = session.server_capabilities
            declared = capabilities.model_dump(by_alias=True) if capabilities else {}
            check("initialize: the skills extension is declared", EXTENSION in (declared.get("extensions") or {}), declared)
            check("initialize: with resources, as skills ride on them", declared.get("resources") is not None)

            listed = await raw(session, "skills/list", {})
            skills = listed.get("skills") if isinstance(listed.get("skills"), list) else []
            check("skills/list: one skill or more", len(skills) > 0, listed)
            languages = [await one_skill(session, skill) for skill in skills]
            check("skills/list: the workflow/v1 skill among them", "workflow/v1" in languages, languages)
            manifest = (await session.call_tool("pilotage_manifest", {})).structured_content or {}
            named = sorted(language["name"] for language in manifest.get("languages", []))
            check("one skill per Language of the manifest", sorted(filter(None, languages)) == named, named)

            resources = (await session.list_resources()).resources
            listed_md = {str(resource.uri): resource for resource in resources if str(resource.uri).startswith("skill://")}
            check(
                "resources/list: each SKILL.md, named and described from its frontmatter",
                len(listed_md) == len(skills)
                and all(
                    skill["uri"] in listed_md
                    and listed_md[skill["uri"]].name == skill["frontmatter"]["name"]
                    and listed_md[skill["uri"]].description == skill["frontmatter"]["description"]
                    and listed_md[skill["uri"]].mime_type == "text/markdown"
                    for skill in skills
                ),
                sorted(listed_md),
            )

            # The bad cases: no skill at the URI is -32602 (SEP-2640 "Error Handling").
            unknown = await code_of(raw(session, "skills/get", {"uri": "skill://pilotage/nosuch-v9/SKILL.md"}))
            check("skills/get: an unknown skill is -32602", unknown == -32602, unknown)
            others = [file["uri"] for file in skills[0]["resources"] if file["uri"] != skills[0]["uri"]] if skills else []
            if others:
                code = await code_of(raw(session, "skills/get", {"uri": others[0]}))
                check("skills/get: a file that is not a SKILL.md is -32602", code == -32602, code)
            missing = await code_of(session.read_resource("skill://pilotage/workflow-v1/references/nosuch.md"))
            check("resources/read: an unknown skill file is resource-not-found", missing in (-32002, -32602), missing)


if __name__ == "__main__":
    sys.exit(run("MCP_URL", scenario, SCENARIO_TIMEOUT_S))
