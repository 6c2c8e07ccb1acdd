"""recipe/v1 in Python, the twin of languages/recipe (docs/writing-a-language.md).

A recipe is a JSON object with `steps` and an optional `output`. A step
calls a catalog entry (`{"id", "call", "with"}`) or guards calls with a
condition (`{"id", "if": {"is", "equals"}, "then": [calls]}`). A string
that starts with `$` reads a value: `$input.NAME…` or `$STEP.FIELD…`.

It declares, validates, binds and executes exactly as the Rust one does
(languages/recipe/src/lib.rs), with the guest SDK's helpers ported beside
it (closed_sets, hints, catalog_calls, and json_text for serde_json's way
with JSON text), and is held to the same conformance binding
(tests/conformance/recipe.json, platform/cli/tests/all/language_py.rs).

componentize-py (build.py) makes this module the component of the WIT
world `language`: the class `WitWorld` is its exports, `catalog` and
`effects` its imports. Module-level code runs once, at build time
(componentize-py snapshots the initialized interpreter), so `describe`'s
answer, guides included, is computed there, not per call.

WIT mapping (componentize-py): records are dataclasses with snake_case
fields, `option<T>` is `T` or None, a variant case is a class holding
`value`, an enum an `Enum`; an import returning `result` returns its `ok`
value and raises `Err` whose `value` is the `err` case.
"""

import wit_world
from componentize_py_types import Err
from wit_world.imports import catalog, effects
from wit_world.imports.describe_types import (
    ExecutionMode,
    Features,
    GuideLevel,
    LanguageInfo,
    LocatorDialect,
    ProgramKind,
    SubprogramTracing,
    TraceCeiling,
)
from wit_world.imports.run_types import Arm, Decision, Outcome, Plan, PlanStep, RunResult, TraceStep, Validation
from wit_world.imports.types import Diagnostic, Locator_Pointer, Severity

import closed_sets
import json_text
from catalog_calls import STANDARD_RISK_LEVELS, aggregate, argument_mismatches, risk_label, safe
from core_guide import CORE  # written by build.py from languages/recipe/guides/core.md
from hints import hint
from json_text import equal, is_reference, parse, push_token, text

# ---------------------------------------------------------------------------
# Closed sets (Part II §1.5), each declared once; the code and `describe`
# read the same tables.

CODES = [
    ("malformed_program", "Error. The program is not a JSON object with `steps` (an array) and an optional `output`."),
    ("malformed_step", "Error. A step is not `{id, call, with}` or `{id, if, then}`; a `then` holds call steps only."),
    ("duplicate_step_id", "Error. Two steps share an `id`."),
    ("reserved_character", "Error. A step `id` contains `#` or `/`, which Pilotage reserves for trace ids."),
    ("unknown_entry", "Error. `call` names no catalog entry visible to you; the hint names close ones."),
    ("not_callable", "Error. `call` names an entry whose kind cannot be called."),
    (
        "argument_mismatch",
        "Error. `with` lacks a property the entry requires, has one it refuses, or a literal of the wrong type.",
    ),
    ("bad_condition", 'Error. An `if` is not `{"is": VALUE, "equals": VALUE}`.'),
    ("unknown_reference", "Error. A `$` reference is malformed or names no call step visible at that place."),
    ("unknown_field", "Warning. `$STEP.FIELD` reads a field the entry's `output_schema` does not list."),
]
"""Diagnostic codes besides the reserved three (Part II §5.5), with meanings."""

KINDS = [("capability", True, "An action or query over HTTP; `call` it with a `with` that fits its `input_schema`.")]
"""Entry kinds: (kind, callable, meaning)."""

STEP_STATUSES = [
    ("success", True, True, "The step completed; a call's entry was invoked."),
    ("error", False, True, "The entry failed (effects possible) or a `$` reference could not be read (nothing ran)."),
]
"""Step statuses: (status, ok, side effects possible, meaning)."""

SCOPE = (
    "A `$STEP` reference reads a call step before it: a top-level one, or an earlier one of the same `then`."
    " Steps inside a `then` are not visible after their `if` (it may not have run)."
)
BINDING = (
    "`input` is an object holding every `NAME` the recipe reads as `$input.NAME`; a missing one is an"
    " `input_binding` diagnostic at `/NAME`. A recipe that reads no input accepts any. No `context` is taken."
)
DECISIONS = (
    "An `if` entry carries one decision: `took` is `then` or `else`; `because` shows the value read, e.g."
    ' `$profile.tier ("gold") equals "gold": true`. A field that is missing reads as `null` in a condition.'
)
OUTPUT = (
    "`output` is the recipe's `output` with each `$` reference replaced by its value, absent when the recipe"
    " has none or the Run failed. A Run that fails is `partial` once an entry was invoked, `error` before."
)


def _describe():
    info = LanguageInfo(
        name="recipe/v1",
        title="Recipes: calls to catalog entries, guarded by conditions",
        program_kind=ProgramKind.JSON,
        program_argument="recipe",
        locator=LocatorDialect.JSON_POINTER,
        execution=ExecutionMode.IMMEDIATE,
        trace=TraceCeiling.FULL,
        trace_subprogram=SubprogramTracing.OPAQUE,
        context_schema=None,
        features=Features(plan=True, catalog=True, execute=True, test_run=False, promotion=False),
        diagnostic_codes=closed_sets.diagnostic_codes(CODES),
        run_statuses=closed_sets.run_statuses([]),
        step_statuses=closed_sets.step_statuses(STEP_STATUSES),
        entry_kinds=closed_sets.entry_kinds(KINDS),
        risk_levels=closed_sets.risk_levels(STANDARD_RISK_LEVELS),
        guides=[],
    )
    prose = {"scope_rules": SCOPE, "parameter_binding": BINDING, "decisions": DECISIONS, "output": OUTPUT}
    closed = closed_sets.render("recipe-closed-sets", info, prose)
    topics = ["grammar", "references", "conditions", "example"]
    core = closed_sets.guide("recipe-core", "recipe/v1: steps, references, conditions", GuideLevel.CORE, topics, CORE)
    info.guides = [core, closed]
    return info


INFO = _describe()
"""The self-description, computed once (at build time)."""

# ---------------------------------------------------------------------------
# Validate (Part II §6.4): diagnostics with a locator and hints, and the
# plan when no error was found (Part II §5.6). Side-effect free.


def _diagnostic(severity, code, at, message, close=None):
    return Diagnostic(
        severity=severity, code=code, path=Locator_Pointer(at), range=None, message=message, hint=close
    )


class Check:
    """Walks a recipe, collecting diagnostics, plan steps and references."""

    def __init__(self):
        self.diagnostics = []
        self.plan = []
        self.references = []
        self.ids = set()

    def error(self, code, at, message, close=None):
        """Records an error at pointer `at`."""
        self.diagnostics.append(_diagnostic(Severity.ERROR, code, at, message, close))

    def step(self, step, at, arm, scope):
        """Checks one step at pointer `at`; `arm` is the guard's id inside a `then`, else None."""
        id_ = step.get("id") if isinstance(step, dict) else None
        if not isinstance(id_, str):
            return self.error("malformed_step", at, "a step is an object with a string `id`")
        if "#" in id_ or "/" in id_:
            fixed = id_.replace("#", "_").replace("/", "_")
            self.error(
                "reserved_character", f"{at}/id", f"step id '{id_}' contains '#' or '/'", f"rename it, e.g. '{fixed}'"
            )
        if id_ in self.ids:
            self.error("duplicate_step_id", f"{at}/id", f"step id '{id_}' is used twice")
        self.ids.add(id_)
        if "call" in step and all(key in ("id", "call", "with") for key in step):
            self.call(step, id_, at, arm, scope)
        elif "if" in step and arm is None and all(key in ("id", "if", "then") for key in step):
            self.guard(step, id_, at, scope)
        else:
            shape = "a `then` step is {id, call, with}" if arm is not None else "a step is {id, call, with} or {id, if, then}"
            self.error("malformed_step", at, f"step '{id_}': {shape}")

    def call(self, step, id_, at, arm, scope):
        """Checks a call step: its arguments, its entry, and what it adds to the scope."""
        arguments = step.get("with", {})
        if not isinstance(arguments, dict):
            return self.error("malformed_step", f"{at}/with", "`with` is an object of arguments")
        self.reads(arguments, f"{at}/with", scope)
        name = step["call"] if isinstance(step["call"], str) else ""
        entry = catalog.get(name)
        if entry is None:
            close = hint(name, catalog.ids(None))
            return self.error("unknown_entry", f"{at}/call", f"no catalog entry '{name}'", close)
        if not any(kind == entry.kind and callable_ for kind, callable_, _ in KINDS):
            return self.error("not_callable", f"{at}/call", f"'{name}' is a {entry.kind} and cannot be called")
        for mismatch in argument_mismatches(entry, arguments, lambda value: not is_reference(value)):
            here = f"{at}/with" if mismatch.argument is None else push_token(f"{at}/with", mismatch.argument)
            self.error("argument_mismatch", here, mismatch.message, mismatch.hint)
        if name not in self.references:
            self.references.append(name)
        self.plan.append(
            PlanStep(
                id=id_,
                calls=name,
                arm=None if arm is None else Arm(branch=arm, label="then"),
                loop=None,
                risk=risk_label(entry.risk_hints),
                risk_hints=entry.risk_hints,
            )
        )
        scope.add(id_, parse(entry.output_schema))

    def guard(self, step, id_, at, scope):
        """Checks a guard: its condition, then its arm's call steps in a scope of their own."""
        condition = step["if"]
        if isinstance(condition, dict) and len(condition) == 2 and "is" in condition and "equals" in condition:
            self.reads(condition, f"{at}/if", scope)
        else:
            self.error("bad_condition", f"{at}/if", 'a condition is {"is": VALUE, "equals": VALUE}')
        self.plan.append(PlanStep(id=id_, calls=None, arm=None, loop=None, risk="safe", risk_hints=safe()))
        then = step.get("then")
        if not isinstance(then, list):
            return self.error("malformed_step", f"{at}/then", "`then` is an array of call steps")
        # Arm steps see what the `if` sees; nothing they add outlives it.
        inner = scope.copy()
        for index, arm_step in enumerate(then):
            self.step(arm_step, f"{at}/then/{index}", id_, inner)

    def reads(self, value, at, scope):
        """Checks every `$` reference inside `value`, found at pointer `at`.

        Kept lean, as it runs under the validation fuel bound: an item's
        pointer is built only when the item is a container or a reference
        not already known to read well (`scope.clean`), so a program
        repeating one reference 90,000 times costs a set lookup per item.
        """
        if isinstance(value, str):
            if value.startswith("$") and value not in scope.clean:
                self.reference(value, at, scope)
        elif isinstance(value, list):
            clean = scope.clean
            for index, item in enumerate(value):
                if isinstance(item, str):
                    if item.startswith("$") and item not in clean:
                        self.reference(item, f"{at}/{index}", scope)
                elif isinstance(item, (list, dict)):
                    self.reads(item, f"{at}/{index}", scope)
        elif isinstance(value, dict):
            for name, member in value.items():
                self.reads(member, push_token(at, name), scope)

    def reference(self, reference, at, scope):
        """Checks one `$` reference; remembers it in `scope.clean` when it reads well."""
        path = reference[1:].split(".")
        if "" in path or (path[0] == "input" and len(path) < 2):
            return self.error("unknown_reference", at, f"'{reference}' is not $input.NAME… or $STEP.FIELD…")
        root = path[0]
        if root == "input":
            scope.clean.add(reference)
            return None
        if root not in scope.steps:
            close = hint(root, sorted(scope.steps))
            return self.error("unknown_reference", at, f"'{reference}': no call step '{root}' is visible here", close)
        schema = scope.steps[root]
        fields = schema.get("properties") if isinstance(schema, dict) else None
        if len(path) > 1 and isinstance(fields, dict) and path[1] not in fields:
            field = path[1]
            close = hint(field, list(fields))
            message = f"'{root}' lists no output field '{field}'"
            self.diagnostics.append(_diagnostic(Severity.WARNING, "unknown_field", at, message, close))
            return None
        scope.clean.add(reference)
        return None


class Scope:
    """The call steps visible at a place, and the references known to read them cleanly.

    `steps` maps a step id to its entry's output schema; `clean` holds the
    references that were checked without a finding, and is emptied
    whenever a step is added (a reference's verdict may change then).
    """

    def __init__(self, steps=None):
        self.steps = {} if steps is None else steps
        self.clean = set()

    def add(self, id_, schema):
        """Makes call step `id_` visible, with its entry's output schema."""
        self.steps[id_] = schema
        self.clean = set()

    def copy(self):
        """A copy for an arm: what it adds does not outlive it."""
        return Scope(dict(self.steps))


def validate(program):
    """Validates `program` (JSON text) against the caller's catalog, with its plan when valid."""
    check = Check()
    doc = parse(program)
    if isinstance(doc, dict) and "steps" in doc and all(key in ("steps", "output") for key in doc):
        scope = Scope()
        if isinstance(doc["steps"], list):
            for index, step in enumerate(doc["steps"]):
                check.step(step, f"/steps/{index}", None, scope)
        else:
            check.error("malformed_program", "/steps", "`steps` is an array")
        if "output" in doc:
            check.reads(doc["output"], "/output", scope)
    else:
        check.error(
            "malformed_program", "", "a recipe is an object with `steps` and an optional `output`", 'start from {"steps": []}'
        )
    valid = all(found.severity == Severity.WARNING for found in check.diagnostics)
    plan = None
    if valid:
        plan = Plan(steps=check.plan, max_risk=risk_label(aggregate(step.risk_hints for step in check.plan)))
    return Validation(diagnostics=check.diagnostics, plan=plan, references=check.references, statements=[])


# ---------------------------------------------------------------------------
# Bind input (Part II §6.5.5): every `$input.NAME` the recipe reads must be
# a member of `input`; `input_binding` findings point into `input`.


def _input_names(value, read):
    """Appends to `read` every NAME that `value` reads as `$input.NAME…`, once per reading."""
    if isinstance(value, str):
        if value.startswith("$input."):
            read.append(value[7:].split(".", 1)[0])
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                if item.startswith("$input."):
                    read.append(item[7:].split(".", 1)[0])
            elif isinstance(item, (list, dict)):
                _input_names(item, read)
    elif isinstance(value, dict):
        for member in value.values():
            _input_names(member, read)


def bind_input(program, input_):
    """`input_binding` findings of `input_` (JSON text) for the names `program` reads."""
    read = []
    _input_names(parse(program), read)
    members = parse(input_)
    if not read:
        return []
    if not isinstance(members, dict):
        return [_diagnostic(Severity.ERROR, "input_binding", "", "input must be an object holding " + ", ".join(read))]
    return [
        _diagnostic(Severity.ERROR, "input_binding", push_token("", name), f"input lacks '{name}'")
        for name in read
        if name not in members
    ]


# ---------------------------------------------------------------------------
# Execute (Part II §6.5): each call through `effects.invoke`, a flat trace
# with one decision per `if` (Part II §5.8.2); a failure is `partial` once
# an entry was invoked, `error` before (Part II §5.7).


def _success():
    return Outcome(ok=True, status="success", error=None)


class Stop(Exception):
    """Why a Run stops: a `$` reference that cannot be read, or a call that failed."""


class Run:
    """The values read so far (`input` and each call step's output), the trace, and whether anything was invoked."""

    def __init__(self, input_):
        self.values = {"input": parse(input_)}
        self.trace = []
        self.invoked = False

    def step(self, step):
        """Runs one step; raises Stop (its message says why) when the Run must stop."""
        if not isinstance(step, dict):
            step = {}
        id_ = step.get("id") if isinstance(step.get("id"), str) else ""
        if "if" in step:
            condition = step["if"] if isinstance(step["if"], dict) else {}
            condition_is = condition.get("is")
            try:
                value = self.resolve(condition_is)
            except Stop:
                value = None
            equals = condition.get("equals")
            took = equal(value, equals)
            because = f"{text(condition_is)} ({text(value)}) equals {text(equals)}: {'true' if took else 'false'}"
            label = "then" if took else "else"
            decision = Decision(at=id_, took=label, because=because)
            self.trace.append(
                TraceStep(
                    id=id_, calls=None, input=None, output=None, outcome=_success(), t_ms=None, decisions=[decision]
                )
            )
            then = step.get("then")
            if took and isinstance(then, list):
                for arm_step in then:
                    self.step(arm_step)
            return
        entry = step.get("call") if isinstance(step.get("call"), str) else ""
        arguments = None
        output = None
        message = None
        try:
            arguments = self.resolve(step.get("with", {}))
        except Stop as stop:
            message = f"step '{id_}': {stop}"
        if message is None:
            self.invoked = True
            try:
                answer = effects.invoke(id_, entry, text(arguments))
            except Err as refused:
                # refused(string) or failed(string): the case's `value` says why.
                message = f"step '{id_}': {refused.value.value}"
            else:
                try:
                    output = json_text.decode(answer)
                except ValueError as error:
                    message = f"step '{id_}': the entry's output is not JSON: {error}"
        outcome = _success() if message is None else Outcome(ok=False, status="error", error=message)
        self.trace.append(
            TraceStep(
                id=id_,
                calls=entry,
                input=text(arguments),
                output=text(output if message is None else None),
                outcome=outcome,
                t_ms=None,
                decisions=[],
            )
        )
        if message is not None:
            raise Stop(message)
        self.values[id_] = output

    def resolve(self, template):
        """`template` with every `$` reference replaced by the value it reads; raises Stop when one cannot be read."""
        if isinstance(template, str):
            if not template.startswith("$"):
                return template
            parts = template[1:].split(".")
            root = parts[0]
            if root not in self.values:
                raise Stop(f"'{root}' has no value")
            value = self.values[root]
            for field in parts[1:]:
                if not isinstance(value, dict) or field not in value:
                    raise Stop(f"'{template}': no field '{field}' in {text(value)}")
                value = value[field]
            return value
        if isinstance(template, list):
            # Equal references read equal values: a run of one is resolved once.
            resolved = []
            last = None
            last_value = None
            for item in template:
                if isinstance(item, str):
                    if last is None or item != last:
                        last = item
                        last_value = self.resolve(item)
                    resolved.append(last_value)
                else:
                    resolved.append(self.resolve(item))
            return resolved
        if isinstance(template, dict):
            return {name: self.resolve(member) for name, member in template.items()}
        return template


def execute(request):
    """Runs a validated program with its input (Part II §6.5), every effect through `effects.invoke`."""
    doc = parse(request.program)
    run = Run(request.input)
    output = None
    message = None
    try:
        steps = doc.get("steps") if isinstance(doc, dict) else None
        for step in steps if isinstance(steps, list) else []:
            run.step(step)
        if isinstance(doc, dict) and "output" in doc:
            output = text(run.resolve(doc["output"]))
    except Stop as stop:
        message = str(stop)
    if message is None:
        outcome = _success()
    else:
        outcome = Outcome(ok=False, status="partial" if run.invoked else "error", error=message)
    return RunResult(outcome=outcome, output=output if message is None else None, steps=run.trace, stats=None)


class WitWorld(wit_world.WitWorld):
    """The component's exports: the world `language` of pilotage:language@1.2.0."""

    def describe(self):
        """The self-description (Part II §5.1, §5.2)."""
        return INFO

    def validate(self, program, context):
        """Diagnostics, plan and references of `program` (Part II §6.4); recipe/v1 takes no context."""
        return validate(program)

    def bind_input(self, program, input):
        """`input_binding` findings of `input` for `program` (Part II §6.5.5)."""
        return bind_input(program, input)

    def execute(self, request):
        """Runs a validated program (Part II §6.5)."""
        return execute(request)
