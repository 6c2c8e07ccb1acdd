"""The official Python MCP SDK (`mcp`) signing in through a real OpenID
provider (provider.mjs) and calling a Pilotage server, unattended: the SDK
discovers the protected-resource metadata from the 401, registers itself,
sends the user to sign in (this script fills in the provider's development
forms, as a person would), exchanges the code with PKCE and the resource
indicator, and calls tools with the token.

Usage: flow.py <MCP URL> <server base URL> <a workflow/v1 program as JSON>;
prints one JSON report and exits 0, or prints why and exits 1.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT = "http://127.0.0.1:9/callback"


class Memory:
    """Tokens and the registration, kept in memory as a CLI agent's would be."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Person:
    """Signs in at the provider's pages, as a person in a browser would."""

    def __init__(self) -> None:
        self.asked: dict[str, str] = {}
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, url: str) -> None:
        self.asked = {name: values[0] for name, values in parse_qs(urlparse(url).query).items()}
        async with httpx2.AsyncClient(follow_redirects=False) as browser:
            here = url
            for _ in range(12):
                response = await browser.get(here)
                location = response.headers.get("location")
                if location and location.startswith(REDIRECT):
                    query = parse_qs(urlparse(location).query)
                    if "error" in query:
                        raise RuntimeError(f"the provider refused: {query.get('error_description')}")
                    self.result = AuthorizationCodeResult(
                        code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
                    )
                    return
                if location:
                    here = urljoin(here, location)
                    continue
                page = response.text
                action = re.search(r'action="([^"]+)"', page)
                prompt = re.search(r'name="prompt" value="([a-z]+)"', page)
                if not action or not prompt:
                    raise RuntimeError(f"no form at {here} ({response.status_code}): {page[:300]}")
                form = {"prompt": prompt.group(1)}
                if prompt.group(1) == "login":
                    form |= {"login": "erin", "password": "any"}
                posted = await browser.post(urljoin(here, action.group(1)), data=form)
                here = urljoin(here, posted.headers["location"])
        raise RuntimeError("the sign-in did not end")

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None, "no sign-in happened"
        return self.result


def part(token: str, index: int) -> dict:
    segment = token.split(".")[index]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


async def main(mcp_url: str, base: str, program: str) -> None:
    person, storage = Person(), Memory()
    auth = OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="pilotage-oauth-interop-py",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=person.redirect,
        callback_handler=person.callback,
    )
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with streamable_http_client(mcp_url, http_client=http) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream) as session:
                await session.initialize()
                manifest = await session.call_tool("pilotage_manifest", {})
                validated = await session.call_tool("validate_workflow", {"workflow": json.loads(program)})
    token = storage.tokens.access_token if storage.tokens else ""
    async with httpx2.AsyncClient() as plain:
        admin = await plain.get(f"{base}/admin/v1/tenants", headers={"authorization": f"Bearer {token}"})
    languages = [entry.get("name") for entry in (manifest.structured_content or {}).get("languages", [])]
    print(
        json.dumps(
            {
                "asked_scope": person.asked.get("scope"),
                "asked_resource": person.asked.get("resource"),
                "registered": storage.client is not None,
                "token_type": part(token, 0).get("typ"),
                "token_audience": part(token, 1).get("aud"),
                "languages": languages,
                "validated": not validated.is_error,
                "validate_result": validated.structured_content,
                "admin_status": admin.status_code,
                "admin_message": admin.json().get("error", {}).get("message"),
                "refresh_token": storage.tokens is not None and storage.tokens.refresh_token is not None,
            }
        )
    )


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:4]))
    except Exception as error:  # noqa: BLE001 - the report names any failure
        print(f"the OAuth flow failed: {error!r}", file=sys.stderr)
        sys.exit(1)
