// recipe/v1 in JavaScript: the JavaScript twin of languages/recipe (the
// example Language of docs/writing-a-language.md), built into a component of
// the WIT world `language` of `pilotage:language@1.2.0` by componentize-js (build.mjs).
//
// A recipe is a JSON object with `steps` and an optional `output`. A step
// calls a catalog entry (`{"id", "call", "with"}`) or guards calls with a
// condition (`{"id", "if": {"is", "equals"}, "then": [calls]}`). A string
// that starts with `$` reads a value: `$input.NAME…` or `$STEP.FIELD…`.
//
// It declares, validates, binds and executes exactly as the Rust one does
// (languages/recipe/src/lib.rs), with the guest SDK's helpers ported beside
// it (closed sets and their guide, close-match hints, argument checks, risk
// labels), and is held to the same conformance binding
// (tests/conformance/recipe.json, platform/tests/all/language_js.rs).
//
// Cost: the component embeds SpiderMonkey and interprets this file, so a
// call burns far more fuel than the Rust one (docs/writing-a-language.md,
// "In another source language: JavaScript"). Top-level code runs once, at
// build time (componentize-js snapshots the initialized engine with Wizer):
// `describe`'s answer, guides included, is computed there, not per call.
//
// WIT mapping (componentize-js): records are objects with camelCase fields,
// `option<T>` is `T | undefined`, a variant is `{tag, val}`, an enum a
// kebab-case string, `u64` a BigInt; an import returning `result` returns
// its `ok` value and throws an error whose `payload` is the `err` value.

import { get as catalogGet, ids as catalogIds } from 'pilotage:language/catalog@1.2.0';
import { invoke } from 'pilotage:language/effects@1.2.0';
// Written by build.mjs from languages/recipe/guides/core.md.
import { CORE } from './core-guide.js';

// ---------------------------------------------------------------------------
// Closed sets (Part II §1.5), each declared once; the code and `describe`
// read the same tables.

/** Diagnostic codes besides the reserved three (Part II §5.5), with meanings. */
export const CODES = [
  ['malformed_program', 'Error. The program is not a JSON object with `steps` (an array) and an optional `output`.'],
  ['malformed_step', 'Error. A step is not `{id, call, with}` or `{id, if, then}`; a `then` holds call steps only.'],
  ['duplicate_step_id', 'Error. Two steps share an `id`.'],
  ['reserved_character', 'Error. A step `id` contains `#` or `/`, which Pilotage reserves for trace ids.'],
  ['unknown_entry', 'Error. `call` names no catalog entry visible to you; the hint names close ones.'],
  ['not_callable', 'Error. `call` names an entry whose kind cannot be called.'],
  [
    'argument_mismatch',
    'Error. `with` lacks a property the entry requires, has one it refuses, or a literal of the wrong type.',
  ],
  ['bad_condition', 'Error. An `if` is not `{"is": VALUE, "equals": VALUE}`.'],
  ['unknown_reference', 'Error. A `$` reference is malformed or names no call step visible at that place.'],
  ['unknown_field', "Warning. `$STEP.FIELD` reads a field the entry's `output_schema` does not list."],
];
/** Entry kinds: (kind, callable, meaning). */
const KINDS = [
  ['capability', true, 'An action or query over HTTP; `call` it with a `with` that fits its `input_schema`.'],
];
/** Step statuses: (status, ok, side effects possible, meaning). */
const STEP_STATUSES = [
  ['success', true, true, "The step completed; a call's entry was invoked."],
  ['error', false, true, 'The entry failed (effects possible) or a `$` reference could not be read (nothing ran).'],
];
const SCOPE =
  'A `$STEP` reference reads a call step before it: a top-level one, or an earlier one of the same `then`. Steps inside a `then` are not visible after their `if` (it may not have run).';
const BINDING =
  '`input` is an object holding every `NAME` the recipe reads as `$input.NAME`; a missing one is an `input_binding` diagnostic at `/NAME`. A recipe that reads no input accepts any. No `context` is taken.';
const DECISIONS =
  'An `if` entry carries one decision: `took` is `then` or `else`; `because` shows the value read, e.g. `$profile.tier ("gold") equals "gold": true`. A field that is missing reads as `null` in a condition.';
const OUTPUT =
  "`output` is the recipe's `output` with each `$` reference replaced by its value, absent when the recipe has none or the Run failed. A Run that fails is `partial` once an entry was invoked, `error` before.";

// The guest SDK's tables (guest-sdk/src/closed_sets.rs, language.rs).

/** The reserved diagnostic codes with their meanings (Part II §5.5). */
const RESERVED_CODES = [
  ['constraint', 'A finding the validator cannot classify more precisely.'],
  ['input_binding', "The request's `input` does not fit the program; `path` points into `input`."],
  [
    'context_binding',
    "The request's `context` is missing, unexpected or malformed; `path` points into `context`.",
  ],
];
/** The reserved run statuses (Part II §5.7): (status, ok, side effects possible, meaning). */
const RESERVED_RUN_STATUSES = [
  ['success', true, true, 'The program completed.'],
  [
    'validation_error',
    false,
    false,
    'Refused: the program, input or context is invalid; diagnostics explain why. Nothing ran.',
  ],
  [
    'catalog_drift',
    false,
    false,
    'Refused: `expected_catalog_version` is no longer current. Nothing ran; look up and validate again.',
  ],
  [
    'promotion_drift',
    false,
    false,
    'Refused: an entry the promoted program uses changed since promotion. Nothing ran; promote again.',
  ],
  ['partial', false, true, 'Execution began and did not complete; the trace shows how far it got.'],
  ['error', false, true, 'The Run failed and no more specific status applies.'],
];
/** Statuses the platform reports on any Language's started Runs. */
const PLATFORM_RUN_STATUSES = [
  [
    'timeout',
    false,
    true,
    "The Run reached the platform's wall-time bound and was stopped; the trace shows the steps before it.",
  ],
  [
    'resource_exhausted',
    false,
    true,
    "The Run reached a platform bound on fuel (steps), memory, stack depth, invocations or trace size and was stopped. Or it could not start for want of the server's capacity: then nothing ran, the response has no trace and carries `retry_after_ms`, and the same request (same idempotency key) may be sent again after that many milliseconds.",
  ],
  [
    'engine_fault',
    false,
    true,
    "The Language engine broke the platform's contract (it trapped, called outside its plan, or its trace did not match the calls it made); the Run was failed rather than reported as a success.",
  ],
];
/** The five standard risk levels: (risk, readOnly, destructive, openWorld, meaning) (Part II §5.3). */
const STANDARD_RISK_LEVELS = [
  ['safe', true, false, false, 'Reads state inside this service; no change.'],
  ['external_read', true, false, true, 'Reads from a system outside this service.'],
  ['write', false, false, false, 'Changes state inside this service, reversibly.'],
  [
    'external_write',
    false,
    false,
    true,
    'Changes state in, or sends to, a system outside this service (for example an email).',
  ],
  ['destructive', false, true, false, 'Deletes or irreversibly alters state.'],
];
/** Bytes of compact JSON up to which a `summary` trace keeps a step output whole (the platform's setting). */
const SUMMARY_OUTPUT_MAX_BYTES = 256;
/** Characters of JSON text kept in a truncation marker's preview (the platform's setting). */
const SUMMARY_PREVIEW_CHARS = 120;
/** Bytes of compact JSON the outputs of one `summary` trace may take in all (the platform's setting). */
const SUMMARY_OUTPUTS_MAX_BYTES = 16384;

const SAFE = { readOnly: true, destructive: false, openWorld: false };

/** The highest standard risk level that `hints` reach (Part II §5.3). */
function riskLabel(hints) {
  if (hints.destructive) return 'destructive';
  if (hints.readOnly) return hints.openWorld ? 'external_read' : 'safe';
  return hints.openWorld ? 'external_write' : 'write';
}

/** Aggregates risk hints (Part II §5.3): AND of readOnly, OR of the rest. */
function aggregate(steps) {
  const max = { ...SAFE };
  for (const step of steps) {
    max.readOnly = max.readOnly && step.riskHints.readOnly;
    max.destructive = max.destructive || step.riskHints.destructive;
    max.openWorld = max.openWorld || step.riskHints.openWorld;
  }
  return max;
}

// ---------------------------------------------------------------------------
// Describe (Part II §5.1, §5.2), computed at build time.

const status = ([name, ok, sideEffects, meaning]) => ({ status: name, ok, sideEffects, meaning });

/** A short version string derived from content: FNV-1a 64 over UTF-8, 16 hex digits (Part II §5.2). */
function contentVersion(body) {
  let hash = 0xcbf29ce484222325n;
  const mix = (byte) => {
    hash = BigInt.asUintN(64, (hash ^ BigInt(byte)) * 0x100000001b3n);
  };
  for (const character of body) {
    const point = character.codePointAt(0);
    if (point < 0x80) {
      mix(point);
    } else if (point < 0x800) {
      mix(0xc0 | (point >> 6));
      mix(0x80 | (point & 0x3f));
    } else if (point < 0x10000) {
      mix(0xe0 | (point >> 12));
      mix(0x80 | ((point >> 6) & 0x3f));
      mix(0x80 | (point & 0x3f));
    } else {
      mix(0xf0 | (point >> 18));
      mix(0x80 | ((point >> 12) & 0x3f));
      mix(0x80 | ((point >> 6) & 0x3f));
      mix(0x80 | (point & 0x3f));
    }
  }
  return hash.toString(16).padStart(16, '0');
}

/** A Markdown guide whose `version` follows its body. */
function guide(id, title, level, topics, body) {
  return { id, title, level, topics, version: contentVersion(body), format: 'text/markdown', body, topicBodies: [] };
}

/**
 * The closed-sets guide (level `reference`, topic `closed-sets`) for `info`,
 * written as guest-sdk/src/closed_sets.rs `render` writes it, so the guide
 * lists exactly what the engine emits (Part II §5.2).
 */
function render(id, info, prose) {
  const lines = [];
  const line = (text) => lines.push(text);
  line(`# ${info.name}: closed sets`);
  line('');
  line('Every value below is closed for this Language version. Branch on these values, never on message text.');
  line('');
  line('## Diagnostic codes');
  line('');
  line('| code | meaning |');
  line('|---|---|');
  for (const { code, meaning } of info.diagnosticCodes) line(`| \`${code}\` | ${meaning} |`);
  line('');
  line(
    '`constraint`, `input_binding` and `context_binding` are reserved by Pilotage. Severity is `error` (the program is invalid) or `warning` (it stays valid).',
  );
  line('');
  if (info.features.catalog) {
    line('## Catalog entry kinds');
    line('');
    line('| kind | callable | meaning |');
    line('|---|---|---|');
    for (const { kind, callable, meaning } of info.entryKinds) {
      line(`| \`${kind}\` | ${callable ? 'yes' : 'no'} | ${meaning} |`);
    }
    line('');
  }
  if (info.features.catalog || info.features.plan) {
    line('## Risk levels');
    line('');
    line('| risk | readOnly | destructive | openWorld | meaning |');
    line('|---|---|---|---|---|');
    for (const { risk, hints, meaning } of info.riskLevels) {
      line(`| \`${risk}\` | ${hints.readOnly} | ${hints.destructive} | ${hints.openWorld} | ${meaning} |`);
    }
    line('');
    line(
      "A plan's `max_risk_hints` aggregates its steps: readOnly is the AND, destructive and openWorld the OR.",
    );
    line('');
  }
  const sections = [
    ['Scope rules', prose.scopeRules],
    ['Parameter binding', prose.parameterBinding],
    ['Step identifiers', prose.stepIds],
    ['Decisions', prose.decisions],
  ];
  for (const [heading, text] of sections) {
    if (text !== undefined) {
      line(`## ${heading}`);
      line('');
      line(text.trimEnd());
      line('');
    }
  }
  if (info.features.execute) {
    for (const [heading, statuses] of [
      ['Run outcome statuses', info.runStatuses],
      ['Step outcome statuses', info.stepStatuses],
    ]) {
      line(`## ${heading}`);
      line('');
      line('| status | ok | side effects possible | meaning |');
      line('|---|---|---|---|');
      for (const { status: name, ok, sideEffects, meaning } of statuses) {
        line(`| \`${name}\` | ${ok} | ${sideEffects ? 'yes' : 'no'} | ${meaning} |`);
      }
      line('');
    }
    line('An unknown failed status must be read as `partial`.');
    line('');
    line('## Summary traces');
    line('');
    line(
      `At \`summary\`, steps carry \`id\`, \`outcome\`, \`t_ms\`, decisions and \`output\`, never \`input\`. An output whose compact JSON text is at most ${SUMMARY_OUTPUT_MAX_BYTES} bytes is kept whole; a longer one is replaced by \`{"truncated": true, "bytes": N, "preview": "<first ${SUMMARY_PREVIEW_CHARS} characters of the JSON text>…"}\`, where N is the byte length of the full JSON text. When the output is an object, the marker also carries \`scalars\`: its top-level members whose values are numbers, booleans or null (counts and flags stay readable as fields). The outputs of one summary trace take at most ${SUMMARY_OUTPUTS_MAX_BYTES} bytes of that JSON in all: from the first step whose output would pass it, steps carry no \`output\` (fetch the trace at \`full\` for them).`,
    );
    line('');
    if (prose.output !== undefined) {
      line('## Run output');
      line('');
      line(prose.output.trimEnd());
      line('');
    }
  }
  const body = lines.map((text) => `${text}\n`).join('');
  return {
    id,
    title: `${info.name}: closed sets (codes, statuses, kinds, risk, rules)`,
    level: 'reference',
    topics: ['closed-sets'],
    version: contentVersion(body),
    format: 'text/markdown',
    body,
    topicBodies: [],
  };
}

function describeInfo() {
  const info = {
    name: 'recipe/v1',
    title: 'Recipes: calls to catalog entries, guarded by conditions',
    programKind: 'json',
    programArgument: 'recipe',
    locator: 'json-pointer',
    execution: 'immediate',
    trace: 'full',
    traceSubprogram: 'opaque',
    contextSchema: undefined,
    features: { plan: true, catalog: true, execute: true, testRun: false, promotion: false },
    diagnosticCodes: RESERVED_CODES.concat(CODES).map(([code, meaning]) => ({ code, meaning })),
    runStatuses: RESERVED_RUN_STATUSES.concat(PLATFORM_RUN_STATUSES).map(status),
    stepStatuses: STEP_STATUSES.map(status),
    entryKinds: KINDS.map(([kind, callable, meaning]) => ({ kind, callable, meaning })),
    riskLevels: STANDARD_RISK_LEVELS.map(([risk, readOnly, destructive, openWorld, meaning]) => ({
      risk,
      hints: { readOnly, destructive, openWorld },
      meaning,
    })),
    guides: [],
  };
  const prose = { scopeRules: SCOPE, parameterBinding: BINDING, decisions: DECISIONS, output: OUTPUT };
  const closed = render('recipe-closed-sets', info, prose);
  const topics = ['grammar', 'references', 'conditions', 'example'];
  const core = guide('recipe-core', 'recipe/v1: steps, references, conditions', 'core', topics, CORE);
  info.guides = [core, closed];
  return info;
}

const INFO = describeInfo();

/** The self-description (Part II §5.1, §5.2). */
export function describe() {
  return INFO;
}

// ---------------------------------------------------------------------------
// Small helpers shared with the guest SDK (diag.rs, pointer.rs, hints.rs).

const hasOwn = (object, key) => Object.prototype.hasOwnProperty.call(object, key);
const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);
const isReference = (value) => typeof value === 'string' && value.startsWith('$');

function diagnostic(severity, code, path, message, hint) {
  return { severity, code, path: { tag: 'pointer', val: path }, range: undefined, message, hint };
}

/** One RFC 6901 token appended to pointer text (`~` → `~0`, `/` → `~1`). */
function pushToken(pointer, token) {
  if (token.includes('~') || token.includes('/')) {
    token = token.replaceAll('~', '~0').replaceAll('/', '~1');
  }
  return `${pointer}/${token}`;
}

/** JSON text of a parsed value, or `null` when there is none. */
const text = (value) => JSON.stringify(value === undefined ? null : value);

/** JSON text parsed, or `null` when absent or not JSON. */
function parse(source) {
  if (source === undefined) return null;
  try {
    return JSON.parse(source);
  } catch {
    return null;
  }
}

/** Strings ordered by code point (Rust's `str` order), for sorted candidate lists. */
function byCodePoint(a, b) {
  const left = Array.from(a);
  const right = Array.from(b);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const difference = left[i].codePointAt(0) - right[i].codePointAt(0);
    if (difference !== 0) return difference;
  }
  return left.length - right.length;
}

// Close-match hints over the names the caller can see (Part II §10.3): the
// guest SDK's `hints::hint`, on strsim's (unrestricted) Damerau–Levenshtein
// distance over Unicode scalar values.

/** Minimum normalized similarity for a name to count as a close match. */
const MIN_SIMILARITY = 0.7;

/** Damerau–Levenshtein distance (adjacent transpositions, unrestricted edits) of two code-point arrays. */
function damerauLevenshtein(a, b) {
  const rows = a.length + 2;
  const columns = b.length + 2;
  const infinity = a.length + b.length;
  const table = new Array(rows * columns).fill(0);
  const at = (i, j) => i * columns + j;
  table[at(0, 0)] = infinity;
  for (let i = 0; i <= a.length; i++) {
    table[at(i + 1, 0)] = infinity;
    table[at(i + 1, 1)] = i;
  }
  for (let j = 0; j <= b.length; j++) {
    table[at(0, j + 1)] = infinity;
    table[at(1, j + 1)] = j;
  }
  const lastRow = new Map();
  for (let i = 1; i <= a.length; i++) {
    let lastMatchColumn = 0;
    for (let j = 1; j <= b.length; j++) {
      const k = lastRow.get(b[j - 1]) ?? 0;
      const l = lastMatchColumn;
      let cost = 1;
      if (a[i - 1] === b[j - 1]) {
        cost = 0;
        lastMatchColumn = j;
      }
      table[at(i + 1, j + 1)] = Math.min(
        table[at(i, j)] + cost,
        table[at(i + 1, j)] + 1,
        table[at(i, j + 1)] + 1,
        table[at(k, l)] + (i - k - 1) + 1 + (j - l - 1),
      );
    }
    lastRow.set(a[i - 1], i);
  }
  return table[at(a.length + 1, b.length + 1)];
}

function normalizedDamerauLevenshtein(a, b) {
  const left = Array.from(a);
  const right = Array.from(b);
  if (left.length === 0 && right.length === 0) return 1;
  return 1 - damerauLevenshtein(left, right) / Math.max(left.length, right.length);
}

function similarity(a, b) {
  return Math.max(normalizedDamerauLevenshtein(a, b), normalizedDamerauLevenshtein(a.toLowerCase(), b.toLowerCase()));
}

function isClose(a, b) {
  const aFolded = a.toLowerCase();
  const bFolded = b.toLowerCase();
  const begins = (longer, shorter) => Array.from(shorter).length >= 3 && longer.startsWith(shorter);
  return (
    similarity(a, b) >= MIN_SIMILARITY ||
    damerauLevenshtein(Array.from(aFolded), Array.from(bFolded)) <= 1 ||
    begins(aFolded, bFolded) ||
    begins(bFolded, aFolded)
  );
}

/** Up to `limit` candidates close to `name`, best first; ties keep the candidates' order. */
function closeMatches(name, candidates, limit) {
  const scored = [];
  candidates.forEach((candidate, order) => {
    if (candidate !== name && isClose(name, candidate)) scored.push([similarity(name, candidate), order, candidate]);
  });
  scored.sort((x, y) => y[0] - x[0] || x[1] - y[1]);
  return scored.slice(0, limit).map(([, , candidate]) => candidate);
}

/** `close match: X` (or `close matches: X, Y`), or `undefined` when nothing visible is close. */
function hint(name, candidates) {
  const close = closeMatches(name, candidates, 3);
  if (close.length === 0) return undefined;
  return close.length === 1 ? `close match: ${close[0]}` : `close matches: ${close.join(', ')}`;
}

// Arguments against an entry's `input_schema` (guest-sdk/src/language.rs
// `argument_mismatches`): a required property missing, one the schema
// refuses, a literal of the wrong JSON type.

function hasType(value, type) {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
    case 'object':
      return isObject(value);
    case 'array':
      return Array.isArray(value);
    case 'null':
      return value === null;
    default:
      return true;
  }
}

/** The mismatches of `args` (an object) against `entry`'s input schema: `{argument?, message, hint?}`. */
function argumentMismatches(entry, args) {
  const schema = parse(entry.inputSchema);
  const properties = isObject(schema) ? schema.properties : undefined;
  if (!isObject(properties)) return [];
  const id = entry.id;
  const found = [];
  if (Array.isArray(schema.required)) {
    for (const required of schema.required) {
      if (typeof required === 'string' && !hasOwn(args, required)) {
        found.push({ argument: undefined, message: `'${id}' requires '${required}'`, hint: undefined });
      }
    }
  }
  for (const name of Object.keys(args)) {
    const value = args[name];
    const known = hasOwn(properties, name);
    const declared = known && isObject(properties[name]) ? properties[name].type : undefined;
    if (!known && schema.additionalProperties === false) {
      const close = hint(name, Object.keys(properties));
      found.push({ argument: name, message: `'${id}' takes no '${name}'`, hint: close });
    } else if (typeof declared === 'string' && !isReference(value) && !hasType(value, declared)) {
      found.push({ argument: name, message: `'${name}' of '${id}' is a JSON ${declared}, not ${text(value)}` });
    }
  }
  return found;
}

// ---------------------------------------------------------------------------
// Validate (Part II §6.4): diagnostics with a locator and hints, and the
// plan when no error was found (Part II §5.6). Side-effect free.

/** Walks a recipe, collecting diagnostics, plan steps and references. */
class Check {
  constructor() {
    this.diagnostics = [];
    this.plan = [];
    this.references = [];
    this.ids = new Set();
  }

  error(code, at, message, close) {
    this.diagnostics.push(diagnostic('error', code, at, message, close));
  }

  /** Checks one step at pointer `at`; `arm` is the guard's id inside a `then`. */
  step(step, at, arm, scope) {
    const id = isObject(step) ? step.id : undefined;
    if (typeof id !== 'string') {
      return this.error('malformed_step', at, 'a step is an object with a string `id`');
    }
    if (id.includes('#') || id.includes('/')) {
      const fixed = id.replaceAll('#', '_').replaceAll('/', '_');
      this.error(
        'reserved_character',
        `${at}/id`,
        `step id '${id}' contains '#' or '/'`,
        `rename it, e.g. '${fixed}'`,
      );
    }
    if (this.ids.has(id)) {
      this.error('duplicate_step_id', `${at}/id`, `step id '${id}' is used twice`);
    }
    this.ids.add(id);
    const only = (names) => Object.keys(step).every((key) => names.includes(key));
    if (hasOwn(step, 'call') && only(['id', 'call', 'with'])) {
      this.call(step, id, at, arm, scope);
    } else if (hasOwn(step, 'if') && arm === undefined && only(['id', 'if', 'then'])) {
      this.guard(step, id, at, scope);
    } else {
      const shape =
        arm !== undefined ? 'a `then` step is {id, call, with}' : 'a step is {id, call, with} or {id, if, then}';
      this.error('malformed_step', at, `step '${id}': ${shape}`);
    }
  }

  call(step, id, at, arm, scope) {
    const args = hasOwn(step, 'with') ? step.with : {};
    if (!isObject(args)) {
      return this.error('malformed_step', `${at}/with`, '`with` is an object of arguments');
    }
    this.reads(args, `${at}/with`, scope);
    const name = typeof step.call === 'string' ? step.call : '';
    const entry = catalogGet(name);
    if (entry === undefined) {
      const close = hint(name, catalogIds(undefined));
      return this.error('unknown_entry', `${at}/call`, `no catalog entry '${name}'`, close);
    }
    if (!KINDS.some(([kind, callable]) => kind === entry.kind && callable)) {
      return this.error('not_callable', `${at}/call`, `'${name}' is a ${entry.kind} and cannot be called`);
    }
    for (const mismatch of argumentMismatches(entry, args)) {
      const here = mismatch.argument === undefined ? `${at}/with` : pushToken(`${at}/with`, mismatch.argument);
      this.error('argument_mismatch', here, mismatch.message, mismatch.hint);
    }
    if (!this.references.includes(name)) this.references.push(name);
    this.plan.push({
      id,
      calls: name,
      arm: arm === undefined ? undefined : { branch: arm, label: 'then' },
      loop: undefined,
      risk: riskLabel(entry.riskHints),
      riskHints: entry.riskHints,
    });
    scope.add(id, parse(entry.outputSchema));
  }

  guard(step, id, at, scope) {
    const condition = step.if;
    const shaped = isObject(condition) && Object.keys(condition).length === 2;
    if (shaped && hasOwn(condition, 'is') && hasOwn(condition, 'equals')) {
      this.reads(condition, `${at}/if`, scope);
    } else {
      this.error('bad_condition', `${at}/if`, 'a condition is {"is": VALUE, "equals": VALUE}');
    }
    this.plan.push({ id, calls: undefined, arm: undefined, loop: undefined, risk: 'safe', riskHints: SAFE });
    if (!Array.isArray(step.then)) {
      return this.error('malformed_step', `${at}/then`, '`then` is an array of call steps');
    }
    // Arm steps see what the `if` sees; nothing they add outlives it.
    const inner = scope.copy();
    step.then.forEach((armStep, i) => this.step(armStep, `${at}/then/${i}`, id, inner));
  }

  /**
   * Checks every `$` reference inside `value`, found at pointer `at`.
   * Kept lean: validation runs under the validation fuel bound, and an
   * interpreted walk costs far more per item than the Rust one. An item's
   * pointer is built only when the item is a container or a reference not
   * already known to read well (`scope.clean`), and a run of equal items
   * costs one comparison each: a program repeating one reference 90,000
   * times (the binding's `resource_exhausted` case) is checked with less
   * fuel than the Rust component needs (docs/writing-a-language.md).
   */
  reads(value, at, scope) {
    if (typeof value === 'string') {
      if (value.charCodeAt(0) === 36 /* $ */ && !scope.clean.has(value)) this.reference(value, at, scope);
    } else if (Array.isArray(value)) {
      const clean = scope.clean;
      let last; // the last item known to read well
      for (let i = 0; i < value.length; i++) {
        const item = value[i];
        if (item === last) continue;
        if (typeof item === 'string') {
          if (clean.has(item)) {
            last = item;
          } else if (item.charCodeAt(0) === 36) {
            this.reference(item, `${at}/${i}`, scope);
          }
        } else if (item !== null && typeof item === 'object') {
          this.reads(item, `${at}/${i}`, scope);
        }
      }
    } else if (value !== null && typeof value === 'object') {
      for (const name of Object.keys(value)) this.reads(value[name], pushToken(at, name), scope);
    }
  }

  /** Checks one `$` reference; remembers it in `scope.clean` when it reads well. */
  reference(reference, at, scope) {
    const path = reference.slice(1).split('.');
    if (path.includes('') || (path[0] === 'input' && path.length < 2)) {
      return this.error('unknown_reference', at, `'${reference}' is not $input.NAME… or $STEP.FIELD…`);
    }
    const root = path[0];
    if (root === 'input') {
      scope.clean.add(reference);
      return;
    }
    if (!scope.steps.has(root)) {
      const close = hint(root, [...scope.steps.keys()].sort(byCodePoint));
      return this.error('unknown_reference', at, `'${reference}': no call step '${root}' is visible here`, close);
    }
    const schema = scope.steps.get(root);
    const fields = isObject(schema) ? schema.properties : undefined;
    if (path.length > 1 && isObject(fields) && !hasOwn(fields, path[1])) {
      const field = path[1];
      const close = hint(field, Object.keys(fields));
      const message = `'${root}' lists no output field '${field}'`;
      this.diagnostics.push(diagnostic('warning', 'unknown_field', at, message, close));
      return;
    }
    scope.clean.add(reference);
  }
}

/**
 * The call steps visible at a place (`steps`: id → the entry's output
 * schema), and the references known to read them without a finding
 * (`clean`, emptied whenever a step is added).
 */
class Scope {
  constructor(steps = new Map()) {
    this.steps = steps;
    this.clean = new Set();
  }

  add(id, schema) {
    this.steps.set(id, schema);
    this.clean.clear();
  }

  /** A copy for an arm: what it adds does not outlive it. */
  copy() {
    return new Scope(new Map(this.steps));
  }
}

/** Validates `program` against the caller's catalog (Part II §6.4), with its plan (Part II §5.6). */
export function validate(program, _context) {
  const check = new Check();
  let doc;
  try {
    doc = JSON.parse(program);
  } catch {
    doc = undefined;
  }
  if (isObject(doc) && hasOwn(doc, 'steps') && Object.keys(doc).every((key) => key === 'steps' || key === 'output')) {
    const scope = new Scope();
    if (Array.isArray(doc.steps)) {
      doc.steps.forEach((step, i) => check.step(step, `/steps/${i}`, undefined, scope));
    } else {
      check.error('malformed_program', '/steps', '`steps` is an array');
    }
    if (hasOwn(doc, 'output')) check.reads(doc.output, '/output', scope);
  } else {
    check.error(
      'malformed_program',
      '',
      'a recipe is an object with `steps` and an optional `output`',
      'start from {"steps": []}',
    );
  }
  const valid = check.diagnostics.every((found) => found.severity === 'warning');
  return {
    diagnostics: check.diagnostics,
    plan: valid ? { steps: check.plan, maxRisk: riskLabel(aggregate(check.plan)) } : undefined,
    references: check.references,
    statements: [],
  };
}

// ---------------------------------------------------------------------------
// Bind input (Part II §6.5.5): every `$input.NAME` the recipe reads must be
// a member of `input`; `input_binding` findings point into `input`.

/** Checks `input` (JSON text) against the names `program` reads as `$input.NAME`. */
export function bindInput(program, input) {
  // Every name read, in program order, once per reading (as the Rust one
  // reports them). Lean like `Check.reads`: it runs under the validation
  // fuel bound before every Run, and a run of equal items costs one
  // comparison each.
  const read = [];
  const name = (text) => (text.startsWith('$input.') ? text.slice('$input.'.length).split('.')[0] : undefined);
  const names = (value) => {
    if (typeof value === 'string') {
      const found = name(value);
      if (found !== undefined) read.push(found);
    } else if (Array.isArray(value)) {
      let last;
      let lastName;
      for (let i = 0; i < value.length; i++) {
        const item = value[i];
        if (typeof item === 'string') {
          if (item !== last) {
            last = item;
            lastName = name(item);
          }
          if (lastName !== undefined) read.push(lastName);
        } else if (item !== null && typeof item === 'object') {
          names(item);
        }
      }
    } else if (value !== null && typeof value === 'object') {
      for (const key of Object.keys(value)) names(value[key]);
    }
  };
  names(parse(program));
  const members = parse(input);
  if (read.length === 0) return [];
  if (!isObject(members)) {
    return [diagnostic('error', 'input_binding', '', `input must be an object holding ${read.join(', ')}`)];
  }
  return read
    .filter((name) => !hasOwn(members, name))
    .map((name) => diagnostic('error', 'input_binding', pushToken('', name), `input lacks '${name}'`));
}

// ---------------------------------------------------------------------------
// Execute (Part II §6.5): each call through `effects.invoke`, a flat trace
// with one decision per `if` (Part II §5.8.2); a failure is `partial` once
// an entry was invoked, `error` before (Part II §5.7).

const SUCCESS = { ok: true, status: 'success', error: undefined };
const failure = (statusName, message) => ({ ok: false, status: statusName, error: message });

/** JSON values equal as serde_json compares them: deep, members in any order. */
function equal(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === b.length && a.every((item, i) => equal(item, b[i]));
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => hasOwn(b, key) && equal(a[key], b[key]));
}

/** Why a Run stops: a `$` reference that cannot be read, or a call that failed. */
class Stop extends Error {}

class Run {
  constructor(input) {
    this.values = new Map([['input', parse(input)]]);
    this.trace = [];
    this.invoked = false;
  }

  /** Runs one step; throws `Stop` (its message says why) when the Run must stop. */
  step(step) {
    if (!isObject(step)) step = {};
    const id = typeof step.id === 'string' ? step.id : '';
    if (hasOwn(step, 'if')) {
      const condition = isObject(step.if) ? step.if : {};
      let is;
      try {
        is = this.resolve(condition.is ?? null);
      } catch (error) {
        if (!(error instanceof Stop)) throw error;
        is = null;
      }
      const equals = condition.equals ?? null;
      const took = equal(is, equals);
      const because = `${text(condition.is)} (${text(is)}) equals ${text(equals)}: ${took}`;
      const label = took ? 'then' : 'else';
      this.trace.push({
        id,
        calls: undefined,
        input: undefined,
        output: undefined,
        outcome: SUCCESS,
        tMs: undefined,
        decisions: [{ at: id, took: label, because }],
      });
      if (took && Array.isArray(step.then)) {
        for (const armStep of step.then) this.step(armStep);
      }
      return;
    }
    const entry = typeof step.call === 'string' ? step.call : '';
    let input = null;
    let output = null;
    let message;
    try {
      input = this.resolve(hasOwn(step, 'with') ? step.with : {});
    } catch (error) {
      if (!(error instanceof Stop)) throw error;
      message = `step '${id}': ${error.message}`;
    }
    if (message === undefined) {
      this.invoked = true;
      try {
        const answer = invoke(id, entry, JSON.stringify(input));
        try {
          output = JSON.parse(answer);
        } catch (error) {
          message = `step '${id}': the entry's output is not JSON: ${error.message}`;
        }
      } catch (error) {
        // The `err` of the import's result: refused(string) or failed(string).
        const payload = error?.payload;
        message = `step '${id}': ${payload && typeof payload.val === 'string' ? payload.val : String(error)}`;
      }
    }
    this.trace.push({
      id,
      calls: entry,
      input: text(input),
      output: message === undefined ? text(output) : 'null',
      outcome: message === undefined ? SUCCESS : failure('error', message),
      tMs: undefined,
      decisions: [],
    });
    if (message !== undefined) throw new Stop(message);
    this.values.set(id, output);
  }

  /** `template` with every `$` reference replaced by the value it reads. */
  resolve(template) {
    if (typeof template === 'string') {
      if (!template.startsWith('$')) return template;
      const parts = template.slice(1).split('.');
      const root = parts[0];
      if (!this.values.has(root)) throw new Stop(`'${root}' has no value`);
      let value = this.values.get(root);
      for (let i = 1; i < parts.length; i++) {
        const field = parts[i];
        if (!isObject(value) || !hasOwn(value, field)) {
          throw new Stop(`'${template}': no field '${field}' in ${text(value)}`);
        }
        value = value[field];
      }
      return value;
    }
    if (Array.isArray(template)) {
      // Equal items read equal values: a run of them is resolved once.
      const resolved = new Array(template.length);
      let last;
      let lastValue;
      for (let i = 0; i < template.length; i++) {
        const item = template[i];
        if (i === 0 || item !== last || typeof item === 'object') {
          last = item;
          lastValue = this.resolve(item);
        }
        resolved[i] = lastValue;
      }
      return resolved;
    }
    if (template !== null && typeof template === 'object') {
      const resolved = {};
      for (const key of Object.keys(template)) {
        const value = this.resolve(template[key]);
        if (key === '__proto__') {
          // Assigning would set the prototype; the member must stay a member.
          Object.defineProperty(resolved, key, { value, enumerable: true, writable: true, configurable: true });
        } else {
          resolved[key] = value;
        }
      }
      return resolved;
    }
    return template;
  }
}

/** Runs a validated program with its input (Part II §6.5), every effect through `effects.invoke`. */
export function execute(request) {
  const doc = parse(request.program);
  const run = new Run(request.input);
  let output;
  let message;
  try {
    const steps = isObject(doc) && Array.isArray(doc.steps) ? doc.steps : [];
    for (const step of steps) run.step(step);
    if (isObject(doc) && hasOwn(doc, 'output')) output = text(run.resolve(doc.output));
  } catch (error) {
    if (!(error instanceof Stop)) throw error;
    message = error.message;
  }
  return {
    outcome: message === undefined ? SUCCESS : failure(run.invoked ? 'partial' : 'error', message),
    output: message === undefined ? output : undefined,
    steps: run.trace,
    stats: undefined,
  };
}
