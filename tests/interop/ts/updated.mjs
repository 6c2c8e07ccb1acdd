// Interoperability check of resource subscriptions across replicas: the
// official TypeScript SDK client, connected to one replica, subscribes to
// the workflow/v1 catalog resource (Part III §8.3); the script then changes
// the catalog through another replica's admin API, and the client must
// receive notifications/resources/updated for that URI, read the new
// content (still the catalog tool's answer, byte for byte), and, once
// unsubscribed, hear nothing of a further change (issue 30 item 1).
//
// Usage: node updated.mjs MCP_URL ADMIN_BASE ADMIN_TOKEN
//   MCP_URL     the MCP endpoint of the replica the client talks to
//   ADMIN_BASE  the base URL of another replica (its /admin/v1 is used)
//   ADMIN_TOKEN an operator token for that admin API
// Prints one JSON line {"sdk": ..., "ok": bool, "checks": [...]} and exits
// 0 when every check passed, 1 on a mismatch, 2 on bad usage.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { check, finish } from './report.mjs';

/** Longest time one request may take, in milliseconds. */
const REQUEST_TIMEOUT_MS = 10_000;
/** How long a change may take to reach the subscriber, in milliseconds. */
const UPDATED_WITHIN_MS = 10_000;
/** How long the script listens for a notification that must not come. */
const QUIET_FOR_MS = 3_000;
const CATALOG = 'pilotage://catalog/workflow%2Fv1';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A catalog entry the admin API accepts. */
function entry(id) {
    return {
        id,
        kind: 'capability',
        name: `Interop ${id}`,
        description: 'Added through another replica by the interoperability check.',
        input_schema: { type: 'object' },
        risk: 'safe',
        risk_hints: { readOnly: true, destructive: false, openWorld: false },
    };
}

/** PUTs `id` into the demo tenant's catalog through `adminBase`. */
async function putEntry(adminBase, token, id) {
    const response = await fetch(`${adminBase}/admin/v1/tenants/demo/catalog/entries/${id}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(entry(id)),
    });
    return { status: response.status, body: await response.text() };
}

/** Waits until `seen` holds `count` updates of the catalog, or the bound. */
async function updatesOf(seen, count, within) {
    const deadline = Date.now() + within;
    while (Date.now() < deadline) {
        if (seen.filter((uri) => uri === CATALOG).length >= count) return true;
        await sleep(50);
    }
    return false;
}

/** The text of the catalog resource and of the catalog tool's answer. */
async function both(client) {
    const read = await client.readResource({ uri: CATALOG }, { timeout: REQUEST_TIMEOUT_MS });
    const tool = await client.callTool(
        { name: 'pilotage_catalog', arguments: { language: 'workflow/v1', verb: 'list' } },
        undefined,
        { timeout: REQUEST_TIMEOUT_MS },
    );
    return { resource: read.contents?.[0]?.text ?? '', tool: tool.content?.[0]?.text ?? '' };
}

async function main() {
    const [url, adminBase, token] = process.argv.slice(2);
    if (!url || !adminBase || !token) {
        console.error('usage: node updated.mjs MCP_URL ADMIN_BASE ADMIN_TOKEN');
        process.exit(2);
    }
    const client = new Client({ name: 'pilotage-interop-updated', version: '1.0' });
    const seen = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
        seen.push(notification.params.uri);
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    const capabilities = client.getServerCapabilities()?.resources;
    check('initialize: resources with subscribe', capabilities?.subscribe === true, capabilities);

    const before = await both(client);
    check('the catalog resource is the tool answer, byte for byte', before.resource === before.tool);
    await client.subscribeResource({ uri: CATALOG }, { timeout: REQUEST_TIMEOUT_MS });
    check('resources/subscribe: accepted', true);

    // The change goes through the other replica.
    const added = `cap_interop_${Date.now()}`;
    const put = await putEntry(adminBase, token, added);
    check('the other replica accepts the catalog change', put.status < 300, put);
    const started = Date.now();
    const updated = await updatesOf(seen, 1, UPDATED_WITHIN_MS);
    check('notifications/resources/updated arrives for the subscribed catalog', updated, {
        seen,
        waitedMs: Date.now() - started,
    });
    check('every update names a URI the client subscribed to', seen.every((uri) => uri === CATALOG), seen);
    const after = await both(client);
    check('the re-read catalog holds the new entry', after.resource.includes(added), after.resource.length);
    check('and is still the tool answer, byte for byte', after.resource === after.tool);
    check('and differs from the content before', after.resource !== before.resource);

    // Unsubscribed, a further change is not announced.
    await client.unsubscribeResource({ uri: CATALOG }, { timeout: REQUEST_TIMEOUT_MS });
    const count = seen.length;
    const again = await putEntry(adminBase, token, `${added}_again`);
    check('a second change is accepted', again.status < 300, again);
    await sleep(QUIET_FOR_MS);
    check('resources/unsubscribe: no update after it', seen.length === count, seen);
    await client.close();
}

try {
    await main();
} catch (error) {
    check('the client ran to the end', false, String(error?.stack ?? error));
}
finish();
