// Interoperability check: drives a Pilotage MCP server with the official
// TypeScript SDK client over Streamable HTTP (Part III §9.3–9.4 scenario)
// and checks that the SDK accepts every result against the tool's declared
// outputSchema, request errors included (Part III §6, §7.2).
//
// Usage: node client.mjs http://127.0.0.1:PORT/mcp
// Prints one JSON line {"sdk": ..., "ok": bool, "checks": [...]} and exits
// 0 when every check passed, 1 on a mismatch, 2 on bad usage.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { check, finish } from './report.mjs';

const EXPECTED_TOOLS = [
    'pilotage_manifest',
    'pilotage_get_guide',
    'pilotage_catalog',
    'validate_workflow',
    'run_workflow',
    'trace_workflow',
    'promote_workflow',
];
const LANGUAGE = 'workflow/v1';
const TYPO_PROGRAM = { steps: [{ id: 'profile', kind: 'call', capability: 'cap_read_user_profil' }] };
const CORRECTED_PROGRAM = {
    steps: [{ id: 'profile', kind: 'call', capability: 'cap_read_user_profile', with: { user_id: '$.input.userId' } }],
    output: { name: '$.steps.profile.output.name' },
};
const UNKNOWN_RUN_ID = 'run_does_not_exist_0000';
/** Longest time one request may take, in milliseconds. */
const REQUEST_TIMEOUT_MS = 10_000;

/**
 * The SDK's own default validator (Ajv), wrapped to count how often the
 * client asks it to check a tool result, so a skipped check is noticed.
 */
class CountingValidator {
    constructor() {
        this.inner = new AjvJsonSchemaValidator();
        this.checked = 0;
        this.rejected = [];
    }

    getValidator(schema) {
        const check = this.inner.getValidator(schema);
        return (input) => {
            this.checked += 1;
            const result = check(input);
            if (!result.valid) this.rejected.push(result.errorMessage);
            return result;
        };
    }
}

/**
 * Calls a tool through the SDK (which validates structuredContent against
 * the tool's outputSchema) and checks the envelope; `label` names the step
 * in the report.
 */
async function call(client, validator, label, name, args) {
    const before = validator.checked;
    let result;
    try {
        result = await client.callTool({ name, arguments: args }, undefined, { timeout: REQUEST_TIMEOUT_MS });
    } catch (error) {
        check(`${label}: the SDK accepts the result`, false, String(error?.message ?? error));
        return undefined;
    }
    check(`${label}: the SDK accepts the result`, true);
    check(`${label}: the SDK checked structuredContent against outputSchema`, validator.checked === before + 1);
    const structured = result.structuredContent;
    const text = result.content?.length === 1 && result.content[0].type === 'text' ? result.content[0].text : undefined;
    let agrees = false;
    try {
        agrees = text !== undefined && JSON.stringify(JSON.parse(text)) === JSON.stringify(structured);
    } catch {
        agrees = false;
    }
    check(`${label}: one text block with the structuredContent JSON`, agrees);
    return { isError: result.isError === true, structured: structured ?? {} };
}

/**
 * The resource surface (Part III §8.3) through the SDK: listed, templated,
 * and read as exactly the text of the tool answer each mirrors.
 */
async function resources(client) {
    const options = { timeout: REQUEST_TIMEOUT_MS };
    check('initialize: server declares resources', client.getServerCapabilities()?.resources !== undefined);
    const { resources: listed } = await client.listResources(undefined, options);
    const uris = listed.map((resource) => resource.uri);
    const index = 'pilotage://guides/workflow%2Fv1';
    check('resources/list: the manifest and the workflow guide index', uris.includes('pilotage://manifest') && uris.includes(index), uris);
    const { resourceTemplates } = await client.listResourceTemplates(undefined, options);
    check('resources/templates/list: three templates', resourceTemplates.length === 3, resourceTemplates.length);
    const read = await client.readResource({ uri: index }, options);
    const tool = await client.callTool({ name: 'pilotage_get_guide', arguments: { language: LANGUAGE } }, undefined, options);
    check(
        'resources/read: the guide index is the tool answer, byte for byte',
        read.contents.length === 1 && read.contents[0].text === tool.content[0].text,
    );
    let code;
    try {
        await client.readResource({ uri: 'pilotage://guides/nosuch%2Fv9' }, options);
    } catch (error) {
        code = error?.code;
    }
    check('resources/read: an unknown Language is -32002', code === -32002, code);
}

async function scenario(url) {
    const validator = new CountingValidator();
    const client = new Client(
        { name: 'pilotage-interop-ts', version: '1.0.0' },
        { capabilities: {}, jsonSchemaValidator: validator },
    );
    const transport = new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport, { timeout: REQUEST_TIMEOUT_MS });
    try {
        check('initialize: server declares tools', client.getServerCapabilities()?.tools !== undefined);
        check(
            'initialize: instructions name pilotage_manifest',
            (client.getInstructions() ?? '').includes('pilotage_manifest'),
        );
        check('initialize: a session id was issued', typeof transport.sessionId === 'string');

        const { tools } = await client.listTools(undefined, { timeout: REQUEST_TIMEOUT_MS });
        const names = tools.map((tool) => tool.name);
        const missing = EXPECTED_TOOLS.filter((name) => !names.includes(name));
        check('tools/list: every Pilotage tool is listed', missing.length === 0, missing.length ? { missing } : undefined);
        const withoutSchema = EXPECTED_TOOLS.filter((name) => !tools.find((tool) => tool.name === name)?.outputSchema);
        check(
            'tools/list: every tool declares an outputSchema',
            withoutSchema.length === 0,
            withoutSchema.length ? { withoutSchema } : undefined,
        );
        // Control: the SDK's validator is not vacuous: it rejects a result
        // missing the required outcome.
        const runTool = tools.find((tool) => tool.name === 'run_workflow');
        if (runTool?.outputSchema) {
            const control = new AjvJsonSchemaValidator().getValidator(runTool.outputSchema);
            check('control: the SDK validator rejects {"run_id"} for run_workflow', !control({ run_id: 'r' }).valid);
        }

        const manifest = await call(client, validator, 'manifest', 'pilotage_manifest', {});
        if (manifest) {
            check('manifest: success', !manifest.isError);
            check(
                'manifest: lists workflow/v1',
                (manifest.structured.languages ?? []).some((language) => language.name === LANGUAGE),
            );
        }

        const invalid = await call(client, validator, 'validate (typo)', 'validate_workflow', { workflow: TYPO_PROGRAM });
        if (invalid) {
            const first = invalid.structured.diagnostics?.[0] ?? {};
            check('validate (typo): valid false', !invalid.isError && invalid.structured.valid === false);
            check(
                'validate (typo): hint names cap_read_user_profile',
                typeof first.hint === 'string' && first.hint.includes('cap_read_user_profile'),
                first.hint,
            );
        }

        const valid = await call(client, validator, 'validate (corrected)', 'validate_workflow', { workflow: CORRECTED_PROGRAM });
        const catalogVersion = valid?.structured.catalog_version;
        if (valid) {
            check('validate (corrected): valid true', !valid.isError && valid.structured.valid === true);
            check('validate (corrected): catalog_version given', typeof catalogVersion === 'string');
        }

        const run = await call(client, validator, 'run', 'run_workflow', {
            workflow: CORRECTED_PROGRAM,
            input: { userId: '42' },
            store: true,
            trace_level: 'full',
            expected_catalog_version: catalogVersion,
        });
        const runId = run?.structured.run_id;
        if (run) {
            check('run: outcome success', !run.isError && run.structured.outcome?.status === 'success', run.structured.outcome);
            check('run: output.name is Amira Hassan', run.structured.output?.name === 'Amira Hassan', run.structured.output);
            check('run: full trace with one step', run.structured.trace?.level === 'full' && run.structured.trace?.steps?.length === 1);
        }

        if (typeof runId === 'string') {
            const fetched = await call(client, validator, 'trace', 'trace_workflow', { run_id: runId });
            if (fetched) {
                check('trace: success', !fetched.isError && fetched.structured.outcome?.status === 'success');
                check(
                    'trace: same trace as the run returned',
                    JSON.stringify(fetched.structured.trace) === JSON.stringify(run.structured.trace),
                );
            }
        } else {
            check('run: run_id given', false);
        }

        const unknownRun = await call(client, validator, 'trace (unknown run_id)', 'trace_workflow', { run_id: UNKNOWN_RUN_ID });
        if (unknownRun) {
            check('trace (unknown run_id): isError true', unknownRun.isError);
            check(
                'trace (unknown run_id): error.kind not_found',
                unknownRun.structured.error?.kind === 'not_found',
                unknownRun.structured.error?.kind,
            );
        }

        const unknownGuide = await call(client, validator, 'guide (unknown id)', 'pilotage_get_guide', {
            language: LANGUAGE,
            id: 'no-such-guide',
        });
        if (unknownGuide) {
            check('guide (unknown id): isError true', unknownGuide.isError);
            check(
                'guide (unknown id): error.kind not_found',
                unknownGuide.structured.error?.kind === 'not_found',
                unknownGuide.structured.error?.kind,
            );
        }
        await resources(client);
        check('the SDK validator rejected nothing', validator.rejected.length === 0, validator.rejected);
    } finally {
        // Ends the session (DELETE) and closes the connection.
        await transport.terminateSession().catch(() => {});
        await client.close();
    }
}

async function main() {
    const url = process.argv[2];
    if (!url) {
        process.stderr.write('usage: node client.mjs http://HOST:PORT/mcp\n');
        process.exit(2);
    }
    try {
        await scenario(url);
    } catch (error) {
        check('the scenario completes', false, String(error?.stack ?? error));
    }
    finish();
}

await main();
