//! The tool surface of one tenant (Part III §3.4, §4, §5): the fixed
//! access tools, each Language's loop tools and promote tool, their
//! signpost descriptions, annotations, schemas and program declarations,
//! and the MCP Apps view each loop tool declares (`apps`, SEP-1865).

use std::sync::Arc;

use rmcp::model::{JsonObject, MetaObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::apps::{self, View};
use super::schemas;
use crate::operations::narration::QUESTION_MAX_CHARS;
use crate::tenancy::{LanguageSlot, Principal, Tenant};
use pilotage_engine::description::ProgramKind;
use pilotage_protocol::manifest::ExecutionMode;
use pilotage_protocol::retention::Retention;
use pilotage_protocol::{CATALOG_TOOL, GUIDE_TOOL, MANIFEST_TOOL, META_KEY};

/// What a tool does, for dispatch.
#[derive(Clone, Debug)]
pub(crate) enum ToolRole {
    /// `pilotage_manifest`
    Manifest,
    /// `pilotage_get_guide`
    Guide,
    /// `pilotage_catalog`
    Catalog,
    /// A validate loop tool.
    Validate(Arc<LanguageSlot>),
    /// An execute loop tool.
    Execute(Arc<LanguageSlot>),
    /// A trace-fetch loop tool.
    Trace(Arc<LanguageSlot>),
    /// A promote tool.
    Promote(Arc<LanguageSlot>),
}

impl ToolRole {
    /// The Language a loop or promote tool serves; `None` for the access
    /// tools.
    pub(crate) fn slot(&self) -> Option<&Arc<LanguageSlot>> {
        match self {
            ToolRole::Manifest | ToolRole::Guide | ToolRole::Catalog => None,
            ToolRole::Validate(slot) | ToolRole::Execute(slot) | ToolRole::Trace(slot) | ToolRole::Promote(slot) => {
                Some(slot)
            }
        }
    }
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn tool(name: &str, description: String, input: Value, output: Value, annotations: ToolAnnotations) -> Tool {
    Tool::new(name.to_owned(), description, object(input))
        .with_raw_output_schema(object(output))
        .with_annotations(annotations)
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false)
}

fn program_declaration(slot: &LanguageSlot) -> MetaObject {
    let mut meta = MetaObject::new();
    meta.insert(
        META_KEY.to_owned(),
        json!({"argument": slot.description().program_argument, "language": slot.entry.name}),
    );
    meta
}

fn program_schema(slot: &LanguageSlot) -> Value {
    match slot.description().program_kind {
        ProgramKind::Text => json!({"type": "string", "description": format!("The {} program text.", slot.entry.name)}),
        ProgramKind::Json => {
            json!({"description": format!("The {} program (a JSON document; see the core guide).", slot.entry.name)})
        }
    }
}

/// The `inputSchema` a tool of `role` advertises. Access tools carry the
/// binding-defined strict schemas (Part III §4.1, §4.2, §7.1); loop tools
/// carry permissive ones, JSON types and required members only (Part III
/// §4.6), so that a violation of any of them is a structural fault.
pub(crate) fn input_schema(role: &ToolRole) -> Value {
    match role {
        ToolRole::Manifest => schemas::manifest_input(),
        ToolRole::Guide => schemas::guide_input(),
        ToolRole::Catalog => schemas::catalog_input(),
        ToolRole::Validate(slot) => validate_input(slot),
        ToolRole::Execute(slot) => execute_input(slot),
        ToolRole::Trace(_) => trace_input(),
        ToolRole::Promote(slot) => promote_input(slot),
    }
}

/// A key that determines the `inputSchema` of a tool of `role`: the role,
/// and for a Language's tools the SHA-256 of its component (each schema is
/// made from the component's description alone).
pub(crate) fn input_schema_key(role: &ToolRole) -> String {
    match role {
        ToolRole::Manifest => "manifest".to_owned(),
        ToolRole::Guide => "guide".to_owned(),
        ToolRole::Catalog => "catalog".to_owned(),
        ToolRole::Validate(slot) => format!("validate {}", slot.component.sha256()),
        ToolRole::Execute(slot) => format!("execute {}", slot.component.sha256()),
        ToolRole::Trace(_) => "trace".to_owned(),
        ToolRole::Promote(slot) => format!("promote {}", slot.component.sha256()),
    }
}

fn validate_input(slot: &LanguageSlot) -> Value {
    let argument = &slot.description().program_argument;
    json!({"type": "object", "properties": {
        argument: program_schema(slot),
        "context": {"description": "Validation context; only for Languages that declare a context_schema."},
        pilotage_protocol::assertions::MEMBER: {"description": "Optional: the assertions you mean to send with the execute (docs/assertions.md), checked against this program's plan as the execute would check them; the result's x-assertions says whether they fit ({\"checked\", \"fit\", \"diagnostics\"}), the program's own valid and diagnostics are unchanged."}
    }, "required": [argument]})
}

/// Neither runnable is required (Part III §4.6 runnable selection); no
/// reserved member is constrained beyond its JSON type.
fn execute_input(slot: &LanguageSlot) -> Value {
    let description = slot.description();
    let argument = &description.program_argument;
    let mut properties = json!({
        argument: program_schema(slot),
        "program_ref": {"type": "string", "description": "A promoted program's reference, instead of an inline program."},
        "input": {"description": "The Run's input (see the Language's parameter-binding convention)."},
        "context": {"description": "Validation context, as for validate."},
        "trace_level": {"type": "string", "description": "none, summary or full (default: the Language's ceiling)."},
        "expected_catalog_version": {"type": "string", "description": "The catalog_version you validated against; a stale one refuses the Run with catalog_drift."},
        "idempotency_key": {"type": "string", "description": "Repeat a request with the same key to get the first Run's response instead of running again."},
        "store": {"type": "boolean", "description": "true: keep the Run for the trace tool; false: keep nothing."},
        pilotage_protocol::assertions::MEMBER: {"description": "Optional postconditions the platform checks against this Run's trace and output once it ends (docs/assertions.md): each {\"id\", \"target\": {\"output\": \"/pointer\"} or {\"step\": \"id\", \"member\": \"invocations|outcome|output|input|t_ms\", \"pointer\"}, \"check\": one of exists, eq, ne, lt, le, gt, ge, count, equals_input, schema, \"message\"}. A failed one makes a successful Run assertion_failed; the response's x-assertions holds each verdict."}
    });
    if description.features.test_run {
        properties["test_run"] = json!({"type": "boolean"});
    }
    if description.execution == pilotage_protocol::manifest::ExecutionMode::Both {
        properties["mode"] = json!({"type": "string", "description": "immediate or deploy."});
    }
    json!({"type": "object", "properties": properties})
}

/// Every Language with a trace tool declares `trace_fetch.narrate` (the
/// engine's `LanguageDescription::capabilities`), so `question` is always
/// listed; its length bound is the operation's, not a schema rule (Part
/// III §4.6).
fn trace_input() -> Value {
    json!({"type": "object", "properties": {
        "run_id": {"type": "string"},
        "trace_level": {"type": "string", "description": "summary or full (default: as recorded)."},
        "question": {"type": "string", "description": format!(
            "Optional question about the Run (at most {QUESTION_MAX_CHARS} characters), answered in 'narration' from \
             the recorded facts only."
        )}
    }, "required": ["run_id"]})
}

fn promote_input(slot: &LanguageSlot) -> Value {
    let argument = &slot.description().program_argument;
    json!({"type": "object", "properties": {
        argument: program_schema(slot),
        "input_schema": {"type": "object", "description": "JSON Schema of the input the saved program takes (default: any object)."},
        "name": {"type": "string"},
        "description": {"type": "string"}
    }, "required": [argument]})
}

/// Which tool a name denotes for this tenant.
pub(crate) fn role_of(tenant: &Tenant, name: &str) -> Option<ToolRole> {
    match name {
        MANIFEST_TOOL => return Some(ToolRole::Manifest),
        GUIDE_TOOL => return Some(ToolRole::Guide),
        CATALOG_TOOL => {
            return tenant
                .languages()
                .iter()
                .any(|slot| slot.description().features.catalog)
                .then_some(ToolRole::Catalog);
        }
        _ => {}
    }
    for slot in tenant.languages() {
        let loop_tools = &slot.exposure.loop_tools;
        if loop_tools.validate == name {
            return Some(ToolRole::Validate(slot));
        }
        if loop_tools.execute.as_deref() == Some(name) {
            return Some(ToolRole::Execute(slot));
        }
        if loop_tools.trace.as_deref() == Some(name) {
            return Some(ToolRole::Trace(slot));
        }
        if slot.promote_tool().as_deref() == Some(name) {
            return Some(ToolRole::Promote(slot));
        }
    }
    None
}

/// Every tool of `tenant` as `principal` sees it.
pub(crate) fn tools(tenant: &Tenant, principal: &Principal) -> Vec<Tool> {
    let languages = tenant.languages();
    let names: Vec<&str> = languages.iter().map(|slot| slot.entry.name.as_str()).collect();
    let listing = if names.is_empty() { "none yet".to_owned() } else { names.join(", ") };
    let mut tools = vec![
        tool(
            MANIFEST_TOOL,
            format!(
                "START HERE. Entry point of this Pilotage server (io.github.jafarsa0/pilotage): returns the manifest, \
                 which lists the program Languages accepted here ({listing}), where their guides and catalog are, and \
                 the names of each Language's validate, run and trace tools. Call this first, before any other tool."
            ),
            schemas::manifest_input(),
            schemas::manifest_output(),
            read_only(),
        ),
        tool(
            GUIDE_TOOL,
            format!(
                "Learn stage of Pilotage: the guides that teach a Language's grammar ({listing}). Call with {{language}} \
                 for the guide index, then {{language, id}} to read one guide. Read the level 'core' guide first; the \
                 guide with topic 'closed-sets' lists every diagnostic code and status."
            ),
            schemas::guide_input(),
            schemas::guide_output(),
            read_only(),
        ),
    ];
    if languages.iter().any(|slot| slot.description().features.catalog) {
        tools.push(tool(
            CATALOG_TOOL,
            "Lookup stage of Pilotage: the catalog of live names programs may reference (capabilities, tables, \
             promoted programs), as you are allowed to see them. verb 'list' (filters kind, tag, q; pages with \
             cursor), 'get' (one entry by id), 'changed_since' (changes since a catalog_version). Every answer \
             carries the catalog_version to pass to the run tool."
                .to_owned(),
            schemas::catalog_input(),
            schemas::catalog_output(),
            read_only(),
        ));
    }
    for slot in languages {
        tools.extend(language_tools(tenant, principal, &slot));
    }
    tools
}

fn language_tools(tenant: &Tenant, principal: &Principal, slot: &Arc<LanguageSlot>) -> Vec<Tool> {
    let description = slot.description();
    let name = &slot.entry.name;
    let argument = &description.program_argument;
    let loop_tools = &slot.exposure.loop_tools;
    let mut tools = Vec::new();
    tools.push(
        tool(
            &loop_tools.validate,
            format!(
                "Validate stage of Pilotage for the Language {name}: checks one program written in {name} without \
                 running anything. Returns diagnostics (a closed code, a locator into your program, often a hint with \
                 the closest valid name) and, when the program is valid, a plan of every step with its risk. Pass the \
                 program as '{argument}'."
            ),
            validate_input(slot),
            schemas::validate_output(),
            read_only(),
        )
        .with_meta(apps::declare_view(program_declaration(slot), View::Plan)),
    );
    if let Some(execute) = &loop_tools.execute {
        let snapshot = tenant.snapshot(principal, name);
        let destructive = snapshot.entries().any(|entry| entry.risk_hints.destructive);
        let open_world = snapshot.entries().any(|entry| entry.risk_hints.open_world);
        tools.push(
            tool(
                execute,
                execute_description(slot),
                execute_input(slot),
                schemas::execute_output(),
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(destructive)
                    .idempotent(false)
                    .open_world(open_world),
            )
            .with_meta(apps::declare_view(program_declaration(slot), View::Run)),
        );
    }
    if let Some(trace) = &loop_tools.trace {
        tools.push(tool(
            trace,
            format!(
                "Trace-fetch stage of Pilotage for the Language {name}: fetches the stored trace of an earlier Run of \
                 a program written in {name} by its run_id (the same trace the run tool returned), {}.{}",
                kept_for(&slot.exposure.retention),
                if slot.narrates() {
                    " The answer also carries 'narration', prose built from those recorded facts only (answering \
                     'question' when given): it is interpretation, so verify against the trace."
                } else {
                    ""
                }
            ),
            trace_input(),
            schemas::trace_output(),
            read_only(),
        )
        .with_meta(apps::declare_view(MetaObject::new(), View::Run)));
    }
    if let Some(promote) = slot.promote_tool() {
        tools.push(
            tool(
                &promote,
                format!(
                    "Saves a valid program written in {name} for reuse (not a loop stage; it runs nothing). Unlike the run tool, \
                     which executes a program now, this stores the program unchanged under a program_ref and publishes \
                     it in the catalog, with the risk of its body and an input_schema; the run tool can then execute it \
                     by program_ref, and other programs can call it. Pass the program as '{argument}'."
                ),
                promote_input(slot),
                schemas::promote_output(),
                ToolAnnotations::new().read_only(false).destructive(false).idempotent(true).open_world(false),
            )
            .with_meta(program_declaration(slot)),
        );
    }
    tools
}

/// The execute tool's description, from what the Language declares
/// (Part II §1.3 features, execution mode, retention), so it offers only
/// what a call can do: `program_ref` only with promotion, `test_run` only
/// when declared, `mode` only for `both`.
fn execute_description(slot: &LanguageSlot) -> String {
    let description = slot.description();
    let name = &slot.entry.name;
    let argument = &description.program_argument;
    let source = if description.features.promotion {
        format!("inline as '{argument}', or one saved with the promote tool by 'program_ref'")
    } else {
        format!("inline as '{argument}'")
    };
    let what = match description.execution {
        ExecutionMode::Deploy => format!("installs one program written in {name} ({source}) to run on its triggers"),
        ExecutionMode::Both => format!(
            "runs one program written in {name} ({source}) now, or with mode 'deploy' installs it to run on its triggers"
        ),
        _ => format!("runs one program written in {name} ({source})"),
    };
    let mut text = format!(
        "Execute stage of Pilotage for the Language {name}: {what}. The program is validated again first; an invalid \
         program, a stale expected_catalog_version or bad input is refused before anything runs. Returns the outcome, \
         the output and a trace of every step (calls, inputs, outputs, branch and loop decisions)."
    );
    if description.features.test_run {
        text.push_str(" With test_run true, steps that would change anything are simulated, not performed.");
    }
    if slot.exposure.loop_tools.trace.is_some() {
        text.push_str(&format!(" The Run is stored for the trace tool, {}.", kept_for(&slot.exposure.retention)));
    } else {
        text.push_str(" Nothing is stored: the trace comes only with this answer.");
    }
    text
}

/// How long a Run stays retrievable, as a phrase (Part II §6.6).
fn kept_for(retention: &Retention) -> String {
    match retention {
        Retention::None => "not kept".to_owned(),
        Retention::Session => "kept for this session".to_owned(),
        Retention::Duration { text, .. } => format!("kept for at least {text}"),
        _ => "kept per the manifest's retention".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilotage_engine::{Bounds, Engine};

    /// The key the argument check compiles a schema under determines the
    /// schema: slots of one component exposed differently get the same key
    /// and the same schema; different roles get different keys.
    #[test]
    fn the_input_schema_key_determines_the_schema() {
        let engine = Engine::new(Bounds::default(), None).unwrap();
        let component = engine.load(pilotage_bundled::WORKFLOW).unwrap();
        let session = Arc::new(LanguageSlot::new(component.clone(), Retention::Session));
        let none = Arc::new(LanguageSlot::new(component, Retention::None));
        let roles = |slot: &Arc<LanguageSlot>| {
            vec![
                ToolRole::Manifest,
                ToolRole::Guide,
                ToolRole::Catalog,
                ToolRole::Validate(slot.clone()),
                ToolRole::Execute(slot.clone()),
                ToolRole::Trace(slot.clone()),
                ToolRole::Promote(slot.clone()),
            ]
        };
        let mut keys = std::collections::BTreeSet::new();
        for (a, b) in roles(&session).iter().zip(roles(&none).iter()) {
            assert_eq!(input_schema_key(a), input_schema_key(b));
            assert_eq!(input_schema(a), input_schema(b), "{}", input_schema_key(a));
            keys.insert(input_schema_key(a));
        }
        assert_eq!(keys.len(), 7, "{keys:?}");
    }

    /// Every bundled Language's execute description offers what a call can
    /// do and nothing else (issue 30 item 5): `program_ref` only with
    /// promotion, `test_run` only when declared, deploy only for a deploy
    /// mode; and no "a automation/1" for any name.
    #[test]
    fn execute_descriptions_say_only_what_the_language_declares() {
        let engine = Engine::new(Bounds::default(), None).unwrap();
        for (name, bytes) in pilotage_bundled::ALL {
            let component = engine.load(bytes).unwrap();
            for retention in [Retention::None, Retention::Session] {
                let slot = LanguageSlot::new(component.clone(), retention.clone());
                let declared = slot.description();
                let text = execute_description(&slot);
                assert_eq!(text.contains("program_ref"), declared.features.promotion, "{name}: {text}");
                assert_eq!(text.contains("test_run"), declared.features.test_run, "{name}: {text}");
                let deploys = matches!(declared.execution, ExecutionMode::Deploy | ExecutionMode::Both);
                assert_eq!(text.contains("'deploy'") || text.contains("installs"), deploys, "{name}: {text}");
                assert_eq!(text.contains("Nothing is stored"), retention == Retention::None, "{name}: {text}");
                assert!(!text.contains(&format!("a {name}")), "{name}: {text}");
            }
        }
    }
}
