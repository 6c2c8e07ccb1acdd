#!/usr/bin/env bash
# Runs the official MCP conformance tool (npm @modelcontextprotocol/conformance,
# `server` mode) against a running MCP server, as recorded in docs/interop.md.
#
# Usage: tests/interop/conformance.sh URL [OUTPUT_DIR]
#   URL         the server's MCP endpoint, e.g. http://127.0.0.1:18480/mcp
#   OUTPUT_DIR  where per-scenario checks.json files go
#               (default: target/mcp-conformance/results)
#
# The tool (0.1.16) imports fs.globSync, which Node.js 20 lacks, so it runs
# on Node.js 22 from the npm package `node@22`; both are installed once into
# target/mcp-conformance/tool. Runs the active suite, then the pending one.
# Exits non-zero when any scenario fails (most failures are expected: see
# docs/interop.md).
set -uo pipefail
cd "$(dirname "$0")/../.."

url=${1:?usage: tests/interop/conformance.sh URL [OUTPUT_DIR]}
out=${2:-target/mcp-conformance/results}
tool=target/mcp-conformance/tool
conformance_version=0.1.16

if [ ! -f "$tool/node_modules/@modelcontextprotocol/conformance/package.json" ] \
    || ! grep -q "\"version\": \"$conformance_version\"" "$tool/node_modules/@modelcontextprotocol/conformance/package.json"; then
    mkdir -p "$tool"
    [ -f "$tool/package.json" ] || echo '{"private": true}' > "$tool/package.json"
    npm install --prefix "$tool" --no-audit --no-fund \
        "@modelcontextprotocol/conformance@$conformance_version" node@22 || exit 1
fi

node22="$tool/node_modules/.bin/node"
cli="$tool/node_modules/@modelcontextprotocol/conformance/dist/index.js"
status=0
for suite in active pending; do
    echo "== suite: $suite"
    "$node22" "$cli" server --url "$url" --suite "$suite" -o "$out/$suite" || status=1
done
exit $status
