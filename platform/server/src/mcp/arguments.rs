//! The structural check of `tools/call` arguments (Part III §7.1
//! "Deterministic schema-fault routing"): the arguments are checked against
//! the very `inputSchema` the tool advertises, and any violation is a
//! carrier error (JSON-RPC -32602) before the operation runs.
//!
//! This routes every fault class to exactly one channel because of how the
//! schemas are built (`tools::input_schema`):
//!
//! - the access tools carry the binding-defined strict schemas (Part III
//!   §4.1, §4.2): a missing `language` or `verb`, a `verb` outside its
//!   enum, a `limit` below its minimum, a member of the wrong JSON type are
//!   all schema violations, hence carrier errors;
//! - the loop tools carry permissive schemas (Part III §4.6): only a
//!   missing required member or a wrong JSON type can violate them, and
//!   those are exactly the structural faults §4.6 makes carrier-level.
//!
//! What no schema expresses stays with the operation, on the request-error
//! or diagnostic channel: an unknown Language, guide or entry, a member not
//! applicable to the chosen verb, an undeclared sub-feature, an unknown
//! `trace_level`, program invalidity. None of the schemas sets
//! `additionalProperties: false` (the binding's schemas do not either), so
//! an unknown member is never a carrier error.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::Value;

/// The arguments of one `tools/call`, taken out of the request by the HTTP
/// edge (`http::compat`), which parses each body once: rmcp is handed the
/// message with an empty object in their place, so it never parses the
/// program again (issue: performance, round two), and `call_tool` takes
/// them from here. Absent on stdio, and for arguments that are not an
/// object (those stay in the message, where rmcp's type refuses them).
///
/// Travels in the request's HTTP `Parts` extensions, which rmcp hands to
/// the handler with the request it belongs to and no other.
#[derive(Clone, Debug)]
pub(crate) struct EdgeArguments(pub(crate) Arc<serde_json::Map<String, Value>>);

impl EdgeArguments {
    /// The arguments, moved out when nothing else holds them.
    pub(crate) fn into_map(self) -> serde_json::Map<String, Value> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }
}

/// Compiled validators by a key that determines the schema (see
/// [`check_keyed`]). Tool schemas are few and fixed per Language, so
/// compiling each once keeps the check to a walk of the arguments.
static VALIDATORS: LazyLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Most distinct schemas kept compiled; past it the cache starts over
/// (Languages come and go, each with its own program argument).
const MAX_CACHED_SCHEMAS: usize = 256;

fn validator(
    key: &str,
    schema: impl FnOnce() -> Value,
) -> Result<Arc<jsonschema::Validator>, jsonschema::ValidationError<'static>> {
    let mut cache = VALIDATORS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(found) = cache.get(key) {
        return Ok(found.clone());
    }
    let compiled = Arc::new(jsonschema::validator_for(&schema())?);
    if cache.len() >= MAX_CACHED_SCHEMAS {
        cache.clear();
    }
    cache.insert(key.to_owned(), compiled.clone());
    Ok(compiled)
}

/// Checks `arguments` against `schema`, the `inputSchema` of `tool`
/// (compiled once per distinct schema text).
///
/// # Errors
/// As [`check_keyed`].
#[cfg(test)]
pub(crate) fn check(tool: &str, schema: &Value, arguments: &Value) -> Result<(), InvalidArguments> {
    check_keyed(tool, &schema.to_string(), || schema.clone(), arguments)
}

/// Checks `arguments` against the `inputSchema` of `tool` that `schema`
/// builds, compiled once per `key`: the caller's key must determine the
/// schema (the MCP layer uses the tool's role and, for a loop tool, its
/// component's SHA-256), so a call neither builds nor serializes the
/// schema once its validator is compiled (issue: performance).
///
/// # Errors
/// [`InvalidArguments`], whose message is the JSON-RPC -32602's: it names
/// the tool and every violation with its location in the arguments (a
/// JSON Pointer), e.g. `invalid arguments for tool 'pilotage_catalog': at
/// /verb: "fetch" is not one of ["list","get","changed_since"]`. A schema
/// that does not compile (a fault of this server, not of the caller) is
/// reported the same way, and logged.
pub(crate) fn check_keyed(
    tool: &str,
    key: &str,
    schema: impl FnOnce() -> Value,
    arguments: &Value,
) -> Result<(), InvalidArguments> {
    let validator = validator(key, schema).map_err(|error| {
        tracing::error!(%tool, %error, "a tool's input schema does not compile");
        InvalidArguments { tool: tool.to_owned(), violations: vec!["its input schema cannot be checked".into()] }
    })?;
    // The common case answers without gathering errors.
    if validator.is_valid(arguments) {
        return Ok(());
    }
    let violations: Vec<String> = validator
        .iter_errors(arguments)
        .map(|error| {
            let location = error.instance_path().to_string();
            let location = if location.is_empty() { "the top level".to_owned() } else { location };
            format!("at {location}: {error}")
        })
        .collect();
    if violations.is_empty() { Ok(()) } else { Err(InvalidArguments { tool: tool.to_owned(), violations }) }
}

/// Occurs when a call's arguments do not satisfy its tool's `inputSchema`
/// (Part III §7.1: a JSON-RPC -32602, whose message this is).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid arguments for tool '{tool}': {}", violations.join("; "))]
pub(crate) struct InvalidArguments {
    /// The tool called.
    pub tool: String,
    /// Each violation, with its location in the arguments.
    pub violations: Vec<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mcp::schemas;

    /// Every kind of violation of the strict catalog schema is caught, and
    /// what the schema allows passes (Part III §4.2, §7.1).
    #[test]
    fn the_catalog_schema_is_strict_for_every_kind_of_violation() {
        let schema = schemas::catalog_input();
        let check = |arguments: Value| check("pilotage_catalog", &schema, &arguments);
        check(json!({"language": "workflow/v1", "verb": "list"})).unwrap();
        check(json!({"language": "workflow/v1", "verb": "list", "limit": 1, "unknown": true})).unwrap();
        for (arguments, expect) in [
            (json!({"language": "workflow/v1", "verb": "fetch"}), "at /verb"),
            (json!({"language": "workflow/v1", "verb": 3}), "at /verb"),
            (json!({"language": "workflow/v1"}), "\"verb\" is a required property"),
            (json!({"verb": "list"}), "\"language\" is a required property"),
            (json!({"language": ["workflow/v1"], "verb": "list"}), "at /language"),
            (json!({"language": "workflow/v1", "verb": "list", "limit": 0}), "at /limit"),
            (json!({"language": "workflow/v1", "verb": "list", "limit": "10"}), "at /limit"),
            (json!({"language": "workflow/v1", "verb": "get", "id": null}), "at /id"),
        ] {
            let message = check(arguments.clone()).unwrap_err().to_string();
            assert!(message.starts_with("invalid arguments for tool 'pilotage_catalog': "), "{message}");
            assert!(message.contains(expect), "{arguments}: {message}");
        }
    }

    #[test]
    fn the_guide_schema_requires_a_string_language() {
        let schema = schemas::guide_input();
        check("pilotage_get_guide", &schema, &json!({"language": "sql/postgres-15", "id": "core"})).unwrap();
        assert!(check("pilotage_get_guide", &schema, &json!({})).unwrap_err().to_string().contains("\"language\""));
        assert!(
            check("pilotage_get_guide", &schema, &json!({"language": "x", "topic": 1}))
                .unwrap_err()
                .to_string()
                .contains("/topic")
        );
    }
}
