"""What a Language over a capability catalog shares: risk levels and argument checks.

The guest SDK's `language` and `diag` helpers (guest-sdk/src/language.rs,
diag.rs) in Python: the five standard risk levels with `risk_label`, the
aggregation of risk hints (Part II §5.3), and `argument_mismatches`, which
checks a call's arguments against an entry's `input_schema` the way
agents get them wrong.
"""

from dataclasses import dataclass
from typing import Optional

from wit_world.imports.types import RiskHints

import hints
import json_text

STANDARD_RISK_LEVELS = [
    ("safe", True, False, False, "Reads state inside this service; no change."),
    ("external_read", True, False, True, "Reads from a system outside this service."),
    ("write", False, False, False, "Changes state inside this service, reversibly."),
    (
        "external_write",
        False,
        False,
        True,
        "Changes state in, or sends to, a system outside this service (for example an email).",
    ),
    ("destructive", False, True, False, "Deletes or irreversibly alters state."),
]
"""The five standard risk levels: (risk, readOnly, destructive, openWorld, meaning) (Part II §5.3)."""


def safe():
    """The hints of a step that reads state inside this service (`safe`)."""
    return RiskHints(read_only=True, destructive=False, open_world=False)


def risk_label(risk_hints):
    """The highest standard risk level that `risk_hints` reach (Part II §5.3)."""
    if risk_hints.destructive:
        return "destructive"
    if risk_hints.read_only:
        return "external_read" if risk_hints.open_world else "safe"
    return "external_write" if risk_hints.open_world else "write"


def aggregate(all_hints):
    """The hints of a plan from its steps': AND of read-only, OR of the others (Part II §5.3)."""
    total = safe()
    for step in all_hints:
        total = RiskHints(
            read_only=total.read_only and step.read_only,
            destructive=total.destructive or step.destructive,
            open_world=total.open_world or step.open_world,
        )
    return total


@dataclass
class Mismatch:
    """One finding of `argument_mismatches`."""

    argument: Optional[str]
    """The argument at fault; None for a required one that is missing."""
    message: str
    """What is wrong, naming the entry."""
    hint: Optional[str] = None
    """Close matches among the schema's properties, for an unknown one."""


def _has_type(value, type_name):
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "object":
        return isinstance(value, dict)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "null":
        return value is None
    return True


def argument_mismatches(entry, arguments, is_literal):
    """The mismatches of `arguments` (a dict) against `entry`'s input schema.

    A `required` property missing, a property the schema refuses
    (`additionalProperties: false`), a literal of the wrong JSON `type`.
    Arguments for which `is_literal` is false (references resolved at run
    time) are not type-checked. A schema without `properties` accepts
    everything.
    """
    schema = json_text.parse(entry.input_schema)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    entry_id = entry.id
    found = []
    required = schema.get("required")
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in arguments:
                found.append(Mismatch(None, f"'{entry_id}' requires '{name}'"))
    refuses_others = schema.get("additionalProperties") is False
    for name, value in arguments.items():
        known = name in properties
        declared = properties[name].get("type") if known and isinstance(properties[name], dict) else None
        if not known and refuses_others:
            close = hints.hint(name, list(properties))
            found.append(Mismatch(name, f"'{entry_id}' takes no '{name}'", close))
        elif isinstance(declared, str) and is_literal(value) and not _has_type(value, declared):
            message = f"'{name}' of '{entry_id}' is a JSON {declared}, not {json_text.text(value)}"
            found.append(Mismatch(name, message))
    return found
