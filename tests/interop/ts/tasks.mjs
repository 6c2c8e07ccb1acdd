// Interoperability check of long Runs as MCP tasks in the 2025-11-25 form:
// the official TypeScript SDK client learns from tools/list that
// run_workflow may run as a task, drives one to completion while polling,
// lists it, reads its result again, and cancels a second one at its next
// invocation boundary (issue 30 item 2).
//
// The server must have the capability cap_slow_effect (one slow effect per
// call) in the tenant's catalog; the Rust test that starts the script
// registers it and counts the effects.
//
// Usage: node tasks.mjs http://127.0.0.1:PORT/mcp
// Prints one JSON line {"sdk": ..., "ok": bool, "checks": [...]} and exits
// 0 when every check passed, 1 on a mismatch, 2 on bad usage.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { check, finish } from './report.mjs';

/** Longest time one request may take, in milliseconds. */
const REQUEST_TIMEOUT_MS = 10_000;
const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/** A workflow calling the slow capability once per item. */
function slowRun(items) {
    return {
        workflow: {
            input: { items: 'array' },
            steps: [
                {
                    id: 'each',
                    kind: 'for_each',
                    over: '$.input.items',
                    as: 'item',
                    do: [{ id: 'effect', kind: 'call', capability: 'cap_slow_effect', with: { n: '$.item' } }],
                },
            ],
            output: { done: true },
        },
        input: { items: Array.from({ length: items }, (_, i) => i + 1) },
        store: true,
    };
}

/** The JSON-RPC error code of what `work` threw, or undefined. */
async function codeOf(work) {
    try {
        await work();
    } catch (error) {
        return error?.code;
    }
    return undefined;
}

async function completion(client) {
    const options = { timeout: REQUEST_TIMEOUT_MS };
    const seen = [];
    let taskId;
    let result;
    let failure;
    for await (const message of client.experimental.tasks.callToolStream(
        { name: 'run_workflow', arguments: slowRun(3) },
        undefined,
        options,
    )) {
        if (message.type === 'taskCreated') taskId = message.task.taskId;
        if (message.type === 'taskStatus') seen.push(message.task.status);
        if (message.type === 'result') result = message.result;
        if (message.type === 'error') failure = String(message.error?.message ?? message.error);
    }
    check('task: created with an id', typeof taskId === 'string' && taskId.length > 20, taskId);
    check('task: polled while working', seen.includes('working'), seen);
    check('task: ended completed', seen.at(-1) === 'completed', seen);
    check('task: no error from the stream', failure === undefined, failure);
    const structured = result?.structuredContent ?? {};
    check('task: the ordinary execute result, outcome success', structured.outcome?.status === 'success', structured.outcome);
    check('task: the output of the Run', JSON.stringify(structured.output) === JSON.stringify({ done: true }), structured.output);
    check('task: a full record with a run_id', typeof structured.run_id === 'string', structured.run_id);
    if (typeof taskId !== 'string') return;

    const task = await client.experimental.tasks.getTask(taskId, options);
    check('tasks/get: completed, with ttl and pollInterval', task.status === 'completed' && typeof task.ttl === 'number' && typeof task.pollInterval === 'number', task);
    check('tasks/get: the status message names the Run', (task.statusMessage ?? '').includes(structured.run_id ?? '?'), task.statusMessage);
    const again = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, options);
    check(
        'tasks/result: the same result again',
        JSON.stringify(again.structuredContent) === JSON.stringify(result?.structuredContent),
    );
    check('tasks/result: names its task in _meta', again._meta?.[RELATED_TASK]?.taskId === taskId, again._meta);
    const { tasks } = await client.experimental.tasks.listTasks(undefined, options);
    check('tasks/list: lists the task', tasks.some((listed) => listed.taskId === taskId && listed.status === 'completed'), tasks.length);
    check(
        'tasks/cancel: an ended task cannot be cancelled (-32602)',
        (await codeOf(() => client.experimental.tasks.cancelTask(taskId, options))) === -32602,
    );
}

async function cancellation(client) {
    const options = { timeout: REQUEST_TIMEOUT_MS };
    const stream = client.experimental.tasks.callToolStream(
        { name: 'run_workflow', arguments: slowRun(10) },
        undefined,
        options,
    );
    const first = await stream.next();
    const taskId = first.value?.type === 'taskCreated' ? first.value.task.taskId : undefined;
    check('cancel: a task was created', typeof taskId === 'string', first.value);
    if (typeof taskId !== 'string') return;
    // Let the Run make at least one invocation before cancelling it.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    const cancelled = await client.experimental.tasks.cancelTask(taskId, options);
    check('tasks/cancel: answers the task', cancelled.taskId === taskId, cancelled);
    let last;
    let failure;
    for await (const message of stream) {
        if (message.type === 'taskStatus') last = message.task.status;
        if (message.type === 'error') failure = String(message.error?.message ?? message.error);
    }
    check('cancel: the task ended cancelled', last === 'cancelled' || cancelled.status === 'cancelled', { last, answered: cancelled.status });
    check('cancel: the SDK reports the cancellation', (failure ?? '').includes('cancelled'), failure);
    const stopped = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, options);
    const outcome = stopped.structuredContent?.outcome ?? {};
    check('cancel: the Run is partial, its error says cancelled', outcome.status === 'partial' && (outcome.error ?? '').startsWith('cancelled'), outcome);
    const steps = stopped.structuredContent?.trace?.steps ?? [];
    check('cancel: what already ran is in the trace', steps.some((step) => step.calls === 'cap_slow_effect'), steps.length);
}

async function scenario(url) {
    const client = new Client({ name: 'pilotage-interop-ts-tasks', version: '1.0.0' }, { capabilities: {} });
    const transport = new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport, { timeout: REQUEST_TIMEOUT_MS });
    try {
        const tasks = client.getServerCapabilities()?.tasks;
        check('initialize: the tasks capability with task-augmented tools/call', tasks?.requests?.tools?.call !== undefined, tasks);
        check('initialize: tasks can be listed and cancelled', tasks?.list !== undefined && tasks?.cancel !== undefined, tasks);
        const { tools } = await client.listTools(undefined, { timeout: REQUEST_TIMEOUT_MS });
        const support = (name) => tools.find((tool) => tool.name === name)?.execution?.taskSupport;
        check('tools/list: run_workflow may run as a task', support('run_workflow') === 'optional', support('run_workflow'));
        check('tools/list: validate_workflow does not', support('validate_workflow') === undefined, support('validate_workflow'));
        await completion(client);
        await cancellation(client);
        // A task-augmented call of a tool that does not run as a task.
        let code;
        for await (const message of client.experimental.tasks.callToolStream(
            { name: 'validate_workflow', arguments: { workflow: slowRun(1).workflow } },
            undefined,
            { timeout: REQUEST_TIMEOUT_MS, task: {} },
        )) {
            if (message.type === 'error') code = [message.error?.code, String(message.error?.message)];
        }
        check('tools/call with params.task of validate_workflow: -32601', code?.[0] === -32601, code);
        check(
            'tasks/get: an unknown task is -32602',
            (await codeOf(() => client.experimental.tasks.getTask('task_2025_00000000000000000000000000000000'))) === -32602,
        );
    } finally {
        await transport.terminateSession().catch(() => {});
        await client.close();
    }
}

async function main() {
    const url = process.argv[2];
    if (!url) {
        process.stderr.write('usage: node tasks.mjs http://HOST:PORT/mcp\n');
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
