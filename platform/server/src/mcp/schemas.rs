//! Tool input and output schemas (Part III §4, §6).
//!
//! Output schemas are objects whose `anyOf` covers every success shape of
//! the tool and the request-error shape (Part III §6), written out in full:
//! no `$ref` or `$defs`, because common MCP clients mishandle references
//! and drop non-object output schemas. Input schemas of loop tools are
//! permissive (Part III §4.6): JSON types only, no value enums on reserved
//! members, never `additionalProperties: false`.

use serde_json::{Value, json};

fn boolean() -> Value {
    json!({"type": "boolean"})
}

fn string() -> Value {
    json!({"type": "string"})
}

/// `RiskHints`.
pub(crate) fn risk_hints() -> Value {
    json!({
        "type": "object",
        "properties": {"readOnly": boolean(), "destructive": boolean(), "openWorld": boolean()},
        "required": ["readOnly", "destructive", "openWorld"]
    })
}

fn text_position() -> Value {
    json!({
        "type": "object",
        "properties": {"line": {"type": "integer", "minimum": 1}, "column": {"type": "integer", "minimum": 1}},
        "required": ["line", "column"]
    })
}

fn text_range() -> Value {
    json!({"type": "object", "properties": {"start": text_position(), "end": text_position()}, "required": ["start", "end"]})
}

fn diagnostic() -> Value {
    json!({
        "type": "object",
        "properties": {
            "severity": {"type": "string", "enum": ["error", "warning"]},
            "code": string(),
            "path": {"anyOf": [string(), text_range()]},
            "range": text_range(),
            "message": string(),
            "hint": string()
        },
        "required": ["severity", "code", "path", "message"]
    })
}

fn plan() -> Value {
    json!({
        "type": "object",
        "properties": {
            "steps": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "id": string(),
                    "calls": string(),
                    "arm": {"type": "object", "properties": {"branch": string(), "label": string()}, "required": ["branch", "label"]},
                    "loop": string(),
                    "risk": string(),
                    "risk_hints": risk_hints()
                },
                "required": ["id", "risk", "risk_hints"]
            }},
            "max_risk": string(),
            "max_risk_hints": risk_hints()
        },
        "required": ["steps", "max_risk", "max_risk_hints"]
    })
}

fn outcome() -> Value {
    json!({
        "type": "object",
        "properties": {"ok": boolean(), "status": string(), "error": {"type": ["string", "null"]}},
        "required": ["ok", "status", "error"]
    })
}

fn trace() -> Value {
    json!({
        "type": "object",
        "properties": {
            "run_id": string(),
            "level": {"type": "string", "enum": ["summary", "full"]},
            "steps": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "id": string(),
                    "calls": string(),
                    "input": {},
                    "output": {},
                    "outcome": outcome(),
                    "t_ms": {"type": "integer", "minimum": 0},
                    "decisions": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"at": string(), "took": string(), "because": string()},
                        "required": ["at", "took", "because"]
                    }}
                },
                "required": ["id", "outcome"]
            }},
            "stats": {"type": "object"}
        },
        "required": ["run_id", "level", "steps"]
    })
}

/// `CatalogEntry`.
pub(crate) fn catalog_entry() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": string(),
            "kind": string(),
            "name": string(),
            "description": string(),
            "input_schema": {"type": "object"},
            "output_schema": {"type": ["object", "null"]},
            "risk": string(),
            "risk_hints": risk_hints(),
            "tags": {"type": "array", "items": string()},
            "languages": {"type": "array", "items": string()},
            "revision": string()
        },
        "required": ["id", "kind", "name", "risk", "risk_hints"]
    })
}

fn guide(with_body: bool) -> Value {
    let mut guide = json!({
        "type": "object",
        "properties": {
            "id": string(),
            "title": string(),
            "level": {"type": "string", "enum": ["core", "reference", "examples"]},
            "topics": {"type": "array", "items": string()},
            "language": string(),
            "version": string(),
            "size_bytes": {"type": "integer", "minimum": 0},
            "tokens_estimate": {"type": "integer", "minimum": 0},
            "format": string(),
            "body": string()
        },
        "required": ["id", "title", "level", "topics", "language", "version", "size_bytes"]
    });
    if with_body {
        if let Some(required) = guide["required"].as_array_mut() {
            required.push(json!("body"));
        }
    } else {
        guide["not"] = json!({"required": ["body"]});
    }
    guide
}

/// The request-error shape (Part III §7.2).
pub(crate) fn request_error() -> Value {
    json!({
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {"kind": string(), "message": string()},
                "required": ["kind", "message"]
            },
            "catalog_version": string()
        },
        "required": ["error"]
    })
}

fn capability_declaration() -> Value {
    let value = json!({"anyOf": [boolean(), {"type": "object", "properties": {
        "search": boolean(), "changed_since": boolean(), "topic_fetch": boolean(),
        "test_run": boolean(), "idempotency": boolean(), "narrate": boolean()
    }}]});
    json!({"type": "object", "properties": {
        "guides": value, "catalog": value, "validate": value, "plan": value, "execute": value, "trace_fetch": value
    }})
}

fn manifest() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pilotage": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$"},
            "languages": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "properties": {
                    "name": string(),
                    "title": string(),
                    "guides": {"const": "pilotage_get_guide"},
                    "catalog": {"const": "pilotage_catalog"},
                    "guides_resource": string(),
                    "catalog_resource": string(),
                    "loop": {"type": "object", "properties": {"validate": string(), "execute": string(), "trace": string()}, "required": ["validate"]},
                    "capabilities": capability_declaration(),
                    "locator": {"type": "string", "enum": ["json-pointer", "text-range"]},
                    "context_schema": {"type": "object"},
                    "execution": {"type": "string", "enum": ["immediate", "deploy", "both"]},
                    "trace": {"type": "string", "enum": ["summary", "full"]},
                    "trace_subprogram": {"type": "string", "enum": ["opaque", "expanded"]},
                    "retention": string(),
                    "promotion_authority": {"type": "string", "enum": ["caller", "promoter"]}
                },
                "required": ["name", "title", "guides", "loop", "locator"]
            }},
            "capabilities": capability_declaration()
        },
        "required": ["pilotage", "languages"]
    })
}

fn union(shapes: Vec<Value>) -> Value {
    let mut any_of = shapes;
    any_of.push(request_error());
    json!({"type": "object", "anyOf": any_of})
}

/// Output schema of `pilotage_manifest`.
pub(crate) fn manifest_output() -> Value {
    union(vec![manifest()])
}

/// Output schema of `pilotage_get_guide`: index, fetch, error.
pub(crate) fn guide_output() -> Value {
    union(vec![
        json!({"type": "object", "properties": {"guides": {"type": "array", "items": guide(false)}}, "required": ["guides"]}),
        json!({"type": "object", "properties": {"guide": guide(true)}, "required": ["guide"]}),
    ])
}

/// Output schema of `pilotage_catalog`: list, get, changed_since, error.
pub(crate) fn catalog_output() -> Value {
    union(vec![
        json!({"type": "object", "properties": {
            "items": {"type": "array", "items": catalog_entry()}, "next_cursor": string(), "catalog_version": string()
        }, "required": ["items", "catalog_version"]}),
        json!({"type": "object", "properties": {"entry": catalog_entry(), "catalog_version": string()}, "required": ["entry", "catalog_version"]}),
        json!({"type": "object", "properties": {
            "catalog_version": string(),
            "changes": {"type": "array", "items": {"type": "object", "properties": {
                "id": string(), "change": {"type": "string", "enum": ["added", "removed", "modified"]}
            }, "required": ["id", "change"]}}
        }, "required": ["catalog_version", "changes"]}),
    ])
}

fn validate_response() -> Value {
    json!({"type": "object", "properties": {
        "valid": boolean(),
        "diagnostics": {"type": "array", "items": diagnostic()},
        "catalog_version": string(),
        "plan": plan(),
        "references": {"type": "array", "items": string()}
    }, "required": ["valid", "diagnostics"]})
}

/// Output schema of a validate tool.
pub(crate) fn validate_output() -> Value {
    union(vec![validate_response()])
}

/// Output schema of an execute tool.
pub(crate) fn execute_output() -> Value {
    union(vec![json!({"type": "object", "properties": {
        "run_id": string(),
        "outcome": outcome(),
        "output": {},
        "diagnostics": {"type": "array", "items": diagnostic()},
        "trace": trace()
    }, "required": ["run_id", "outcome"]})])
}

/// Output schema of a trace-fetch tool.
pub(crate) fn trace_output() -> Value {
    union(vec![json!({"type": "object", "properties": {
        "run_id": string(), "outcome": outcome(), "output": {}, "trace": trace(), "narration": string()
    }, "required": ["run_id", "outcome", "trace"]})])
}

/// Output schema of a promote tool: the promotion, or the validation
/// response of an invalid program.
pub(crate) fn promote_output() -> Value {
    union(vec![
        json!({"type": "object", "properties": {
            "program_ref": string(), "entry": catalog_entry(), "catalog_version": string()
        }, "required": ["program_ref", "entry", "catalog_version"]}),
        validate_response(),
    ])
}

/// Input schema of `pilotage_manifest`: no members (Part III §3.1).
pub(crate) fn manifest_input() -> Value {
    json!({"type": "object", "properties": {}})
}

/// Input schema of `pilotage_get_guide` (Part III §4.1).
pub(crate) fn guide_input() -> Value {
    json!({"type": "object", "properties": {
        "language": {"type": "string", "description": "A Language name from the manifest, e.g. workflow/v1."},
        "id": {"type": "string", "description": "A guide id from the index; omit for the index."},
        "topic": {"type": "string", "description": "One topic of the guide, where guides.topic_fetch is declared."}
    }, "required": ["language"]})
}

/// Input schema of `pilotage_catalog` (Part III §4.2).
pub(crate) fn catalog_input() -> Value {
    json!({"type": "object", "properties": {
        "language": {"type": "string", "description": "A Language name from the manifest."},
        "verb": {"type": "string", "enum": ["list", "get", "changed_since"]},
        "kind": {"type": "string", "description": "list: only entries of this kind."},
        "tag": {"type": "string", "description": "list: only entries with this tag."},
        "q": {"type": "string", "description": "list: free-text search, where catalog.search is declared."},
        "cursor": {"type": "string", "description": "list: the previous page's next_cursor, unchanged."},
        "limit": {"type": "integer", "minimum": 1, "description": "list: page size (capped at 200)."},
        "id": {"type": "string", "description": "get: the entry id."},
        "catalog_version": {"type": "string", "description": "changed_since: the baseline token."}
    }, "required": ["language", "verb"]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_no_refs(value: &Value) {
        match value {
            Value::Object(map) => {
                assert!(!map.contains_key("$ref") && !map.contains_key("$defs"), "reference found");
                assert!(map.get("additionalProperties") != Some(&Value::Bool(false)));
                map.values().for_each(assert_no_refs);
            }
            Value::Array(items) => items.iter().for_each(assert_no_refs),
            _ => {}
        }
    }

    #[test]
    fn output_schemas_are_self_contained_object_unions() {
        for schema in [
            manifest_output(),
            guide_output(),
            catalog_output(),
            validate_output(),
            execute_output(),
            trace_output(),
            promote_output(),
        ] {
            assert_eq!(schema["type"], "object");
            assert!(schema["anyOf"].as_array().unwrap().len() >= 2);
            assert_no_refs(&schema);
            assert!(jsonschema::validator_for(&schema).is_ok());
        }
    }

    #[test]
    fn every_output_schema_accepts_a_request_error() {
        let error = json!({"error": {"kind": "not_found", "message": "m"}, "catalog_version": "cv_1"});
        for schema in [
            manifest_output(),
            guide_output(),
            catalog_output(),
            validate_output(),
            execute_output(),
            trace_output(),
            promote_output(),
        ] {
            assert!(jsonschema::validator_for(&schema).unwrap().is_valid(&error));
        }
        assert!(!jsonschema::validator_for(&execute_output()).unwrap().is_valid(&json!({"run_id": "r"})));
    }
}
