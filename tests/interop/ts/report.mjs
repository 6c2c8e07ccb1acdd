// The report every interoperability script prints: its checks, and one
// JSON line {"sdk", "ok", "passed", "failed", "checks"} at the end, read by
// platform/cli/tests/all/interop.rs.

import { readFileSync } from 'node:fs';

/** The installed SDK's version. */
export const sdkVersion = JSON.parse(
    readFileSync(new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url), 'utf8'),
).version;

const checks = [];

/** Records one check; `detail` explains a failure. */
export function check(name, passed, detail) {
    checks.push(detail === undefined ? { name, ok: Boolean(passed) } : { name, ok: Boolean(passed), detail });
}

/** Prints the report and exits: 0 when every check passed, else 1. */
export function finish() {
    const failed = checks.filter((entry) => !entry.ok);
    const ok = checks.length > 0 && failed.length === 0;
    process.stdout.write(
        `${JSON.stringify({ sdk: `@modelcontextprotocol/sdk ${sdkVersion}`, ok, passed: checks.length - failed.length, failed, checks })}\n`,
    );
    process.exit(ok ? 0 : 1);
}
