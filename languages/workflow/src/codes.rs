//! The closed sets of workflow/v1, declared once: the validator and the
//! interpreter emit these constants, and `describe` (and so the
//! closed-sets guide) lists these tables.

/// The document's shape is wrong.
pub const MALFORMED_PROGRAM: &str = "malformed_program";
/// A step lacks a member, has one of the wrong type, or has one its kind
/// does not define.
pub const MALFORMED_STEP: &str = "malformed_step";
/// A step's `kind` is not call, set, branch or for_each.
pub const UNKNOWN_KIND: &str = "unknown_kind";
/// Two steps share an id.
pub const DUPLICATE_STEP_ID: &str = "duplicate_step_id";
/// A step id contains `#` or `/`.
pub const RESERVED_CHARACTER: &str = "reserved_character";
/// A call names no visible catalog entry.
pub const UNKNOWN_CAPABILITY: &str = "unknown_capability";
/// A call names an entry whose kind cannot be called.
pub const NOT_CALLABLE: &str = "not_callable";
/// A call's `with` does not match the entry's `input_schema`.
pub const ARGUMENT_MISMATCH: &str = "argument_mismatch";
/// A path expression or template is malformed.
pub const BAD_EXPRESSION: &str = "bad_expression";
/// A condition is not in the closed condition form.
pub const BAD_CONDITION: &str = "bad_condition";
/// `$.steps.<id>` names no step of the program.
pub const UNKNOWN_STEP_REFERENCE: &str = "unknown_step_reference";
/// `$.steps.<id>` or a loop variable names a value not addressable there.
pub const SCOPE_VIOLATION: &str = "scope_violation";
/// `$.input.<name>` names a parameter the program's `input` does not
/// declare.
pub const UNDECLARED_INPUT: &str = "undeclared_input";
/// The `input` declaration is malformed.
pub const BAD_INPUT_DECLARATION: &str = "bad_input_declaration";
/// Warning: a path reads a field the entry's `output_schema` does not list.
pub const UNKNOWN_OUTPUT_FIELD: &str = "unknown_output_field";
/// Warning: a `set` step's value is never read.
pub const UNUSED_VALUE: &str = "unused_value";

/// Every workflow/v1 diagnostic code besides the reserved three, with its
/// meaning, in the order the closed-sets guide lists them.
pub const OWN_CODES: [(&str, &str); 16] = [
    (
        MALFORMED_PROGRAM,
        "Error. The document is not a JSON object with `steps` (an array), optional `input` (an object) and optional `output`, or it has another top-level member.",
    ),
    (
        MALFORMED_STEP,
        "Error. A step is not an object, lacks `id`, `kind` or a member its kind requires, has a member of the wrong JSON type, or has a member its kind does not define (the hint names the closest member).",
    ),
    (UNKNOWN_KIND, "Error. `kind` is not `call`, `set`, `branch` or `for_each`."),
    (
        DUPLICATE_STEP_ID,
        "Error. Two steps of the program share an `id` (ids are unique across the whole program, arms and bodies included).",
    ),
    (RESERVED_CHARACTER, "Error. A step `id` contains `#` or `/`, which Pilotage reserves for trace identity."),
    (
        UNKNOWN_CAPABILITY,
        "Error. A `call` names no catalog entry visible to you; the hint names visible entries with close ids.",
    ),
    (NOT_CALLABLE, "Error. A `call` names an entry whose kind is not callable."),
    (
        ARGUMENT_MISMATCH,
        "Error. A `call`'s `with` lacks a property the entry's `input_schema` requires, has one the schema forbids, or gives a literal of the wrong JSON type.",
    ),
    (BAD_EXPRESSION, "Error. A path expression or template is malformed (see Path expressions)."),
    (BAD_CONDITION, "Error. An `if` condition is not in the closed condition form."),
    (UNKNOWN_STEP_REFERENCE, "Error. `$.steps.<id>` names no step of the program; the hint names close step ids."),
    (
        SCOPE_VIOLATION,
        "Error. A path reads a step or loop variable that is not addressable at that place (see Scope rules).",
    ),
    (UNDECLARED_INPUT, "Error. `$.input.<name>` names a parameter the program's `input` declaration does not list."),
    (BAD_INPUT_DECLARATION, "Error. The `input` declaration is not an object of `name: type` with a known type."),
    (
        UNKNOWN_OUTPUT_FIELD,
        "Warning. A path reads a field that the called entry's `output_schema` does not list; the program stays valid, but check the name.",
    ),
    (UNUSED_VALUE, "Warning. A `set` step's value is never read by a later path or by `output`."),
];

/// Engine-defined run statuses beyond the reserved and platform ones
/// (none: failures use the reserved `partial` and `error`).
pub const OWN_RUN_STATUSES: [(&str, bool, bool, &str); 0] = [];

/// Step-level statuses: (status, ok, side effects possible, meaning).
pub const STEP_STATUSES: [(&str, bool, bool, &str); 2] = [
    ("success", true, true, "The step completed. For a `call`, the entry was invoked."),
    (
        "error",
        false,
        true,
        "The step failed: the invocation returned an error (effects possible), or a path or condition could not be evaluated (no effect). The Run stops at this step.",
    ),
];

/// The catalog entry kinds workflow/v1 understands: (kind, callable,
/// meaning).
pub const ENTRY_KINDS: [(&str, bool, &str); 2] = [
    (
        "capability",
        true,
        "An action or query reached over HTTP; call it with `kind: call`. Its `input_schema` describes `with`.",
    ),
    (
        "workflow_program",
        true,
        "A promoted workflow, called like a capability; its `input_schema` is the promoted program's input and its risk is at least its body's.",
    ),
];

/// Risk levels: the guest SDK's standard five (safe, external_read, write,
/// external_write, destructive).
pub use pilotage_guest_sdk::language::STANDARD_RISK_LEVELS as RISK_LEVELS;

/// The engine risk label matching aggregate hints: the highest level the
/// hints reach.
pub fn risk_label(read_only: bool, destructive: bool, open_world: bool) -> &'static str {
    pilotage_guest_sdk::language::risk_label(pilotage_guest_sdk::RiskHints { read_only, destructive, open_world })
}
