"""Declared closed sets and the closed-sets guide (Part II §1.5, §5.2).

The guest SDK's `closed_sets` module (guest-sdk/src/closed_sets.rs) in
Python: the reserved diagnostic codes and run statuses, the statuses the
platform reports itself, the guide renderer that writes the closed-sets
guide from the same `LanguageInfo` the component describes (so the guide
lists exactly what the engine emits), and the content version of a guide
(FNV-1a 64 over its UTF-8 bytes). A guide rendered here is byte for byte
the one the Rust SDK renders from the same tables.
"""

from wit_world.imports.describe_types import CodeInfo, Guide, GuideLevel, KindInfo, RiskInfo, StatusInfo
from wit_world.imports.types import RiskHints

RESERVED_CODES = [
    ("constraint", "A finding the validator cannot classify more precisely."),
    ("input_binding", "The request's `input` does not fit the program; `path` points into `input`."),
    (
        "context_binding",
        "The request's `context` is missing, unexpected or malformed; `path` points into `context`.",
    ),
]
"""The reserved diagnostic codes with their meanings (Part II §5.5)."""

RESERVED_RUN_STATUSES = [
    ("success", True, True, "The program completed."),
    (
        "validation_error",
        False,
        False,
        "Refused: the program, input or context is invalid; diagnostics explain why. Nothing ran.",
    ),
    (
        "catalog_drift",
        False,
        False,
        "Refused: `expected_catalog_version` is no longer current. Nothing ran; look up and validate again.",
    ),
    (
        "promotion_drift",
        False,
        False,
        "Refused: an entry the promoted program uses changed since promotion. Nothing ran; promote again.",
    ),
    ("partial", False, True, "Execution began and did not complete; the trace shows how far it got."),
    ("error", False, True, "The Run failed and no more specific status applies."),
]
"""The reserved run statuses (Part II §5.7): (status, ok, side effects possible, meaning)."""

PLATFORM_RUN_STATUSES = [
    (
        "timeout",
        False,
        True,
        "The Run reached the platform's wall-time bound and was stopped; the trace shows the steps before it.",
    ),
    (
        "resource_exhausted",
        False,
        True,
        "The Run reached a platform bound on fuel (steps), memory, stack depth, invocations or trace size"
        " and was stopped. Or it could not start for want of the server's capacity: then nothing ran, the"
        " response has no trace and carries `retry_after_ms`, and the same request (same idempotency key)"
        " may be sent again after that many milliseconds.",
    ),
    (
        "engine_fault",
        False,
        True,
        "The Language engine broke the platform's contract (it trapped, called outside its plan, or its trace"
        " did not match the calls it made); the Run was failed rather than reported as a success.",
    ),
]
"""Statuses the platform reports on any Language's started Runs: (status, ok, side effects possible, meaning)."""

SUMMARY_OUTPUT_MAX_BYTES = 256
"""Bytes of compact JSON up to which a `summary` trace keeps a step output whole (the platform's setting)."""
SUMMARY_PREVIEW_CHARS = 120
"""Characters of JSON text kept in a truncation marker's preview (the platform's setting)."""
SUMMARY_OUTPUTS_MAX_BYTES = 16384
"""Bytes of compact JSON the outputs of one `summary` trace may take in all (the platform's setting)."""


def diagnostic_codes(own):
    """Diagnostic codes: the reserved three, then the Language's own (code, meaning) pairs."""
    return [CodeInfo(code=code, meaning=meaning) for code, meaning in RESERVED_CODES + own]


def _status(row):
    status, ok, side_effects, meaning = row
    return StatusInfo(status=status, ok=ok, side_effects=side_effects, meaning=meaning)


def run_statuses(own):
    """Run statuses: the reserved six, the platform's three, then the Language's own."""
    return [_status(row) for row in RESERVED_RUN_STATUSES + PLATFORM_RUN_STATUSES + own]


def step_statuses(own):
    """Step statuses, as declared (no reserved additions)."""
    return [_status(row) for row in own]


def entry_kinds(own):
    """Catalog entry kinds from (kind, callable, meaning) rows (Part II §5.2)."""
    return [KindInfo(kind=kind, callable=callable_, meaning=meaning) for kind, callable_, meaning in own]


def risk_levels(own):
    """Risk levels from (risk, readOnly, destructive, openWorld, meaning) rows (Part II §5.3)."""
    return [
        RiskInfo(risk=risk, hints=RiskHints(read_only=read_only, destructive=destructive, open_world=open_world), meaning=meaning)
        for risk, read_only, destructive, open_world, meaning in own
    ]


def content_version(body):
    """A version derived from content: FNV-1a 64 over the UTF-8 bytes, 16 hex digits (Part II §5.2)."""
    hash_ = 0xCBF29CE484222325
    for byte in body.encode():
        hash_ = ((hash_ ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{hash_:016x}"


def guide(id_, title, level, topics, body):
    """A Markdown guide whose `version` follows its body; topic bodies are left empty."""
    return Guide(
        id=id_,
        title=title,
        level=level,
        topics=list(topics),
        version=content_version(body),
        format="text/markdown",
        body=body,
        topic_bodies=[],
    )


def _yes_no(flag):
    return "yes" if flag else "no"


def _bool(flag):
    return "true" if flag else "false"


def render(id_, info, prose):
    """The closed-sets guide (level `reference`, topic `closed-sets`) for `info`.

    `prose` maps `scope_rules`, `parameter_binding`, `step_ids`,
    `decisions` and `output` to the author's text; a missing one has no
    section. The guide's `version` follows its body.
    """
    lines = []
    line = lines.append
    line(f"# {info.name}: closed sets")
    line("")
    line("Every value below is closed for this Language version. Branch on these values, never on message text.")
    line("")
    line("## Diagnostic codes")
    line("")
    line("| code | meaning |")
    line("|---|---|")
    for code in info.diagnostic_codes:
        line(f"| `{code.code}` | {code.meaning} |")
    line("")
    line(
        "`constraint`, `input_binding` and `context_binding` are reserved by Pilotage. Severity is `error`"
        " (the program is invalid) or `warning` (it stays valid)."
    )
    line("")
    if info.features.catalog:
        line("## Catalog entry kinds")
        line("")
        line("| kind | callable | meaning |")
        line("|---|---|---|")
        for kind in info.entry_kinds:
            line(f"| `{kind.kind}` | {_yes_no(kind.callable)} | {kind.meaning} |")
        line("")
    if info.features.catalog or info.features.plan:
        line("## Risk levels")
        line("")
        line("| risk | readOnly | destructive | openWorld | meaning |")
        line("|---|---|---|---|---|")
        for level in info.risk_levels:
            hints = level.hints
            line(
                f"| `{level.risk}` | {_bool(hints.read_only)} | {_bool(hints.destructive)}"
                f" | {_bool(hints.open_world)} | {level.meaning} |"
            )
        line("")
        line("A plan's `max_risk_hints` aggregates its steps: readOnly is the AND, destructive and openWorld the OR.")
        line("")
    for heading, key in [
        ("Scope rules", "scope_rules"),
        ("Parameter binding", "parameter_binding"),
        ("Step identifiers", "step_ids"),
        ("Decisions", "decisions"),
    ]:
        text = prose.get(key)
        if text is not None:
            line(f"## {heading}")
            line("")
            line(text.rstrip())
            line("")
    if info.features.execute:
        for heading, statuses in [
            ("Run outcome statuses", info.run_statuses),
            ("Step outcome statuses", info.step_statuses),
        ]:
            line(f"## {heading}")
            line("")
            line("| status | ok | side effects possible | meaning |")
            line("|---|---|---|---|")
            for status in statuses:
                line(f"| `{status.status}` | {_bool(status.ok)} | {_yes_no(status.side_effects)} | {status.meaning} |")
            line("")
        line("An unknown failed status must be read as `partial`.")
        line("")
        line("## Summary traces")
        line("")
        line(
            "At `summary`, steps carry `id`, `outcome`, `t_ms`, decisions and `output`, never `input`. An output"
            f" whose compact JSON text is at most {SUMMARY_OUTPUT_MAX_BYTES} bytes is kept whole; a longer one is"
            ' replaced by `{"truncated": true, "bytes": N, "preview": "<first'
            f' {SUMMARY_PREVIEW_CHARS} characters of the JSON text>…"}}`, where N is the byte length of the full'
            " JSON text. When the output is an object, the marker also carries `scalars`: its top-level members"
            " whose values are numbers, booleans or null (counts and flags stay readable as fields). The outputs"
            f" of one summary trace take at most {SUMMARY_OUTPUTS_MAX_BYTES} bytes of that JSON in all: from the"
            " first step whose output would pass it, steps carry no `output` (fetch the trace at `full` for them)."
        )
        line("")
        output = prose.get("output")
        if output is not None:
            line("## Run output")
            line("")
            line(output.rstrip())
            line("")
    body = "".join(text + "\n" for text in lines)
    return guide(
        id_, f"{info.name}: closed sets (codes, statuses, kinds, risk, rules)", GuideLevel.REFERENCE, ["closed-sets"], body
    )
