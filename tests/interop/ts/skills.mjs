// Interoperability check of the guides served as Agent Skills (the MCP
// Skills extension, SEP-2640): the official TypeScript SDK client has no
// methods of its own for the extension, so it sends `skills/list` and
// `skills/get` as raw requests through its `request`, reads every file of
// every skill with `resources/read`, verifies each against the entry's
// size and sha256 digest, parses SKILL.md's frontmatter with a real YAML
// parser (the `yaml` package) and compares it with the entry, and checks
// that each file is the body `pilotage_get_guide` answers, byte for byte.
//
// Usage: node skills.mjs http://127.0.0.1:PORT/mcp
// Prints one JSON line {"sdk": ..., "ok": bool, "checks": [...]} and exits
// 0 when every check passed, 1 on a mismatch, 2 on bad usage.

import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { parse as parseYaml } from 'yaml';
import { check, finish } from './report.mjs';

const EXTENSION = 'io.modelcontextprotocol/skills';
/** Longest time one request may take, in milliseconds. */
const REQUEST_TIMEOUT_MS = 10_000;
/** Agent Skills' naming rule: lowercase letters and digits, single inner hyphens. */
const SKILL_NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;

const options = { timeout: REQUEST_TIMEOUT_MS };

/** A raw request the SDK has no method for; the result as sent. */
async function raw(client, method, params) {
    return client.request({ method, params }, ResultSchema.passthrough(), options);
}

/** The error code a request fails with, or undefined when it succeeds. */
async function codeOf(promise) {
    try {
        await promise;
        return undefined;
    } catch (error) {
        return error?.code;
    }
}

/** SKILL.md split into its parsed frontmatter and the body after it. */
function splitSkillMd(text) {
    if (!text.startsWith('---\n')) return null;
    const end = text.indexOf('\n---\n', 3);
    if (end < 0) return null;
    return { frontmatter: parseYaml(text.slice(4, end + 1)), body: text.slice(end + 5) };
}

/** The text of `uri` as `resources/read` answers it. */
async function readText(client, uri) {
    const read = await client.readResource({ uri }, options);
    return { text: read.contents?.[0]?.text ?? '', mimeType: read.contents?.[0]?.mimeType, count: read.contents?.length };
}

/** The guides of `language`, each with its body, as the guide tool answers. */
async function guides(client, language) {
    const call = async (args) => {
        const result = await client.callTool({ name: 'pilotage_get_guide', arguments: args }, undefined, options);
        return result.structuredContent;
    };
    const index = await call({ language });
    const bodies = new Map();
    for (const guide of index.guides ?? []) {
        const fetched = await call({ language, id: guide.id });
        bodies.set(guide.id, { level: guide.level, body: fetched.guide.body });
    }
    return bodies;
}

/** Every check of one skill entry; `language` is the Language it teaches. */
async function oneSkill(client, skill) {
    const name = skill.frontmatter?.name;
    const label = `skill ${name}`;
    check(`${label}: a valid skill name`, SKILL_NAME.test(name ?? '') && name.length <= 64, name);
    check(`${label}: its uri ends in its name and SKILL.md`, skill.uri === `skill://pilotage/${name}/SKILL.md`, skill.uri);
    const description = skill.frontmatter?.description ?? '';
    check(`${label}: a description of 1 to 1024 characters`, description.length > 0 && [...description].length <= 1024);
    const language = skill.frontmatter?.metadata?.language;
    check(`${label}: metadata names its Language`, typeof language === 'string', skill.frontmatter);
    check(`${label}: resources is a complete list`, Array.isArray(skill.resources), skill.resources);
    const files = Array.isArray(skill.resources) ? skill.resources : [];
    check(`${label}: SKILL.md is listed`, files.some((file) => file.uri === skill.uri));

    const got = await raw(client, 'skills/get', { uri: skill.uri });
    check(`${label}: skills/get answers the listed entry`, isDeepStrictEqual(got.skill, skill), got);

    const bodies = await guides(client, language);
    check(`${label}: one file per guide`, files.length === bodies.size, { files: files.length, guides: bodies.size });
    for (const file of files) {
        const { text, mimeType, count } = await readText(client, file.uri);
        const bytes = Buffer.from(text, 'utf8');
        const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
        check(`${file.uri}: one content`, count === 1, count);
        check(`${file.uri}: size and digest as listed`, bytes.length === file.size && digest === file.digest, {
            size: bytes.length,
            listed: file.size,
            digest,
            listedDigest: file.digest,
        });
        if (file.uri === skill.uri) {
            const split = splitSkillMd(text);
            check(`${file.uri}: text/markdown`, mimeType === 'text/markdown', mimeType);
            check(`${file.uri}: frontmatter equals the entry's`, split && isDeepStrictEqual(split.frontmatter, skill.frontmatter), split?.frontmatter);
            const core = [...bodies.values()].find((guide) => guide.level === 'core');
            check(`${file.uri}: the body is the core guide, byte for byte`, split && core && split.body === core.body);
        } else {
            const id = decodeURIComponent(file.uri.slice(`skill://pilotage/${name}/references/`.length).replace(/\.[a-z]+$/, ''));
            const guide = bodies.get(id);
            check(`${file.uri}: the guide '${id}', byte for byte`, guide !== undefined && text === guide.body, id);
        }
    }
    return language;
}

async function main() {
    const [url] = process.argv.slice(2);
    if (!url) {
        console.error('usage: node skills.mjs MCP_URL');
        process.exit(2);
    }
    const client = new Client({ name: 'pilotage-interop-skills', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport, options);
    const capabilities = client.getServerCapabilities();
    check('initialize: the skills extension is declared', capabilities?.extensions?.[EXTENSION] !== undefined, capabilities);
    check('initialize: with resources, as skills ride on them', capabilities?.resources !== undefined);

    const listed = await raw(client, 'skills/list', {});
    const skills = Array.isArray(listed.skills) ? listed.skills : [];
    check('skills/list: one skill or more', skills.length > 0, listed);
    const languages = [];
    for (const skill of skills) {
        languages.push(await oneSkill(client, skill));
    }
    check('skills/list: the workflow/v1 skill among them', languages.includes('workflow/v1'), languages);
    const { structuredContent: manifest } = await client.callTool({ name: 'pilotage_manifest', arguments: {} }, undefined, options);
    const named = (manifest.languages ?? []).map((language) => language.name).sort();
    check('one skill per Language of the manifest', isDeepStrictEqual([...languages].sort(), named), { languages, named });

    const { resources } = await client.listResources(undefined, options);
    const listedMd = resources.filter((resource) => resource.uri.startsWith('skill://'));
    check(
        'resources/list: each SKILL.md, named and described from its frontmatter',
        listedMd.length === skills.length &&
            skills.every((skill) =>
                listedMd.some(
                    (resource) =>
                        resource.uri === skill.uri &&
                        resource.name === skill.frontmatter.name &&
                        resource.description === skill.frontmatter.description &&
                        resource.mimeType === 'text/markdown',
                ),
            ),
        listedMd,
    );

    // The bad cases: no skill at the URI is -32602 (SEP-2640 "Error Handling").
    const unknown = await codeOf(raw(client, 'skills/get', { uri: 'skill://pilotage/nosuch-v9/SKILL.md' }));
    check('skills/get: an unknown skill is -32602', unknown === -32602, unknown);
    const notSkillMd = skills[0]?.resources?.find?.((file) => file.uri !== skills[0].uri)?.uri;
    if (notSkillMd) {
        const code = await codeOf(raw(client, 'skills/get', { uri: notSkillMd }));
        check('skills/get: a file that is not a SKILL.md is -32602', code === -32602, code);
    }
    const missing = await codeOf(client.readResource({ uri: 'skill://pilotage/workflow-v1/references/nosuch.md' }, options));
    check('resources/read: an unknown skill file is resource-not-found', missing === -32002 || missing === -32602, missing);
    await client.close();
}

try {
    await main();
} catch (error) {
    check('the scenario completes', false, String(error?.stack ?? error));
}
finish();
