//! The OpenAPI 3.1 description of the admin API, served at
//! `/admin/v1/openapi.json`.

use serde_json::{Value, json};

fn op(summary: &str, responses: &[(&str, &str)], body: Option<Value>, parameters: &[&str]) -> Value {
    let mut operation = json!({"summary": summary, "security": [{"bearer": []}], "responses": {}});
    for (status, description) in responses {
        operation["responses"][*status] = json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Any"}}}});
    }
    if let Some(body) = body {
        operation["requestBody"] = json!({"required": true, "content": body});
    }
    if !parameters.is_empty() {
        operation["parameters"] = Value::Array(
            parameters
                .iter()
                .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
                .collect(),
        );
    }
    operation
}

/// `operation` with its request body optional.
fn body_optional(mut operation: Value) -> Value {
    operation["requestBody"]["required"] = json!(false);
    operation
}

fn json_body(schema: &str) -> Option<Value> {
    Some(json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}))
}

/// The document: the API's description, its request schemas
/// ([`schemas`]) and its paths ([`paths`]).
pub(crate) fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Pilotage Platform admin API",
            "version": "1",
            "description": "Tenants, Language components, catalog entries, data sources, secrets, deployments, runs and the audit log. Authenticate with the operator token or a bearer token holding pilotage:admin (every tenant) or pilotage:tenant-admin (its own tenant). Errors are {\"error\": {\"code\", \"message\", \"field\"?, \"findings\"?}}. The credential is checked before any body is read; a JSON body larger than admin_max_body_bytes (default 4 MiB), or an upload larger than max_component_bytes (default 32 MiB), is refused with 413 body_too_large."
        },
        "servers": [{"url": "/admin/v1"}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas()
        },
        "paths": paths()
    })
}

/// The schemas of the request bodies, under `#/components/schemas/`
/// (`Any` for the responses, whose shapes the summaries describe).
fn schemas() -> Value {
    json!({
        "Any": {},
        "TenantCreate": {"type": "object", "required": ["id"], "properties": {
            "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,62}$"}, "name": {"type": "string"},
            "quotas": {"$ref": "#/components/schemas/Quotas"}, "egress": {"$ref": "#/components/schemas/Egress"}}},
        "TenantPatch": {"type": "object", "properties": {"name": {"type": "string"}, "disabled": {"type": "boolean"},
            "quotas": {"$ref": "#/components/schemas/Quotas"}, "egress": {"$ref": "#/components/schemas/Egress"},
            "issuers": {"type": "array", "items": {"$ref": "#/components/schemas/Issuer"},
                "description": "The identity providers trusted for the tenant (operator only; replaces the list). Their tokens act in this tenant only and never grant pilotage:admin."}}},
        "Issuer": {"type": "object", "required": ["issuer", "jwks_url"], "properties": {
            "issuer": {"type": "string", "description": "The tokens' iss, byte for byte."},
            "jwks_url": {"type": "string"},
            "algorithms": {"type": "array", "items": {"type": "string", "enum": ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]}},
            "tenant_from": {"type": "string", "enum": ["claim", "resource"]},
            "tenant_claim": {"type": "string"},
            "audience": {"type": "string", "description": "The aud its tokens carry for the MCP resource, when not its URL."},
            "admin_audience": {"type": "string"},
            "scopes": {"type": "array", "items": {"type": "string"}},
            "access_token_type": {"type": "boolean", "description": "Require typ at+jwt (RFC 9068)."},
            "dpop": {"type": "boolean", "description": "It issues DPoP-bound tokens (RFC 9449): accepted with a valid proof."},
            "roles_claim": {"type": "string", "description": "The claim naming the person's groups or roles (groups, roles)."},
            "role_scopes": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                "description": "The scopes each value of roles_claim grants, within what the issuer may grant."}}},
        "Egress": {"type": "object", "additionalProperties": false,
            "description": "Where the tenant may make the platform connect (operator only). Without rules: public addresses only (unless the server's egress.allow_private).",
            "properties": {
            "allow": {"type": "array", "items": {"type": "string"}, "description": "CIDRs (10.1.0.0/16, a bare address) and host names (broker.example.com, *.example.com)."},
            "mqtt_topic_prefix": {"type": "string", "description": "Every MQTT filter of the tenant is this topic or below it."}}},
        "Decision": {"type": "object", "properties": {
            "comment": {"type": "string", "maxLength": 500, "description": "Why; kept in the audit record."}
        }},
        "Quotas": {"type": "object", "properties": {
            "max_concurrent_runs": {"type": "integer", "minimum": 0},
            "requests_per_second": {"type": "integer", "minimum": 0},
            "max_stored_run_bytes": {"type": "integer", "minimum": 0},
            "max_deployments": {"type": "integer", "minimum": 0},
            "max_firings_per_minute": {"type": "integer", "minimum": 0},
            "task_wall_time_ms": {"type": "integer", "minimum": 1, "maximum": 86_400_000_u64}}},
        "Entry": {"type": "object", "required": ["id", "kind", "name", "risk", "risk_hints"], "properties": {
            "id": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}, "description": {"type": "string"},
            "input_schema": {"type": "object"}, "output_schema": {"type": ["object", "null"]}, "risk": {"type": "string"},
            "risk_hints": {"type": "object", "required": ["readOnly", "destructive", "openWorld"], "properties": {
                "readOnly": {"type": "boolean"}, "destructive": {"type": "boolean"}, "openWorld": {"type": "boolean"}}},
            "tags": {"type": "array", "items": {"type": "string"}}, "languages": {"type": "array", "items": {"type": "string"}},
            "visibility": {"type": "array", "items": {"type": "string"}, "description": "Scopes a caller must hold to see the entry."},
            "binding": {"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}, "timeout_ms": {"type": "integer"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Values may reference secrets as {secret:NAME}."}}}}},
        "Apply": {"type": "object", "required": ["entries"], "properties": {"entries": {"type": "array", "items": {"$ref": "#/components/schemas/Entry"}}}},
        "Secret": {"type": "object", "required": ["value"], "properties": {"value": {"type": "string"}}},
        "DataSource": {"type": "object", "required": ["url", "schemas"], "additionalProperties": false, "properties": {
            "language": {"type": "string", "default": "sql/postgres-15", "description": "One data source per Language per tenant."},
            "url": {"type": "string", "description": "postgres://user:password@host:port/database; sealed at rest, never returned."},
            "schemas": {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^[A-Za-z0-9_]{1,63}$"},
                "description": "Schemas whose relations form the catalog; statements run with every relation schema-qualified, never through search_path."},
            "relations": {"type": "array", "items": {"type": "string"}, "description": "Only these schema.relation are visible."},
            "visibility": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                "description": "Scopes needed to see a relation, keyed by schema.relation or schema (the more specific wins)."},
            "bounds": {"type": "object", "additionalProperties": false, "properties": {
                "max_connections": {"type": "integer", "minimum": 1, "maximum": 64, "default": 4},
                "connect_timeout_ms": {"type": "integer", "minimum": 1, "default": 5000},
                "statement_timeout_ms": {"type": "integer", "minimum": 1, "default": 5000},
                "max_rows": {"type": "integer", "minimum": 0, "default": 1000},
                "max_bytes": {"type": "integer", "minimum": 0, "default": 262144}}},
            "refresh_interval_s": {"type": "integer", "minimum": 5, "default": 300}}},
        "Activate": {"type": "object", "required": ["sha256"], "properties": {"sha256": {"type": "string"}}}
    })
}

/// Every route of the admin router with its operations: summary,
/// responses (the shared 400, 401 and 403 added to each), request body
/// and path parameters.
fn paths() -> Value {
    let errors = [
        ("400", "a field is invalid; error.field names it"),
        ("401", "no or bad credential"),
        ("403", "the credential does not cover this"),
    ];
    let with = |ok: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        ok.iter().chain(errors.iter()).copied().collect()
    };
    json!({
        "/tenants": {
            "get": op("List tenants", &with(&[("200", "the tenants")]), None, &[]),
            "post": op("Create a tenant (idempotent: 200 when it exists)", &with(&[("201", "created"), ("200", "already existed")]), json_body("TenantCreate"), &[])
        },
        "/tenants/{tenant}": {
            "get": op("Get a tenant", &with(&[("200", "the tenant"), ("404", "no such tenant")]), None, &["tenant"]),
            "patch": op("Rename, disable or enable a tenant, or change its quotas, egress rules or trusted issuers", &with(&[("200", "updated")]), json_body("TenantPatch"), &["tenant"]),
            "delete": op("Delete a tenant and everything it owns", &with(&[("204", "deleted"), ("404", "no such tenant")]), None, &["tenant"])
        },
        "/tenants/{tenant}/languages": {
            "get": op("List uploaded Language versions with their lint reports", &with(&[("200", "the Languages")]), None, &["tenant"]),
            "post": op("Upload a Language component: compiled, described and linted; refused (422) with the findings on a lint error", &with(&[("201", "installed and active"), ("422", "not a loadable component, or lint errors")]),
                Some(json!({"application/wasm": {"schema": {"type": "string", "format": "binary"}}})), &["tenant"])
        },
        "/tenants/{tenant}/languages/{family}/{version}": {
            "get": op("The active version of a Language, its manifest entry and lint report", &with(&[("200", "the Language")]), None, &["tenant", "family", "version"]),
            "delete": op("Retire a Language (its tools disappear)", &with(&[("204", "retired")]), None, &["tenant", "family", "version"])
        },
        "/tenants/{tenant}/languages/{family}/{version}/activate": {
            "post": op("Serve an uploaded version", &with(&[("200", "activated")]), json_body("Activate"), &["tenant", "family", "version"])
        },
        "/tenants/{tenant}/catalog/entries": {
            "get": op("List catalog entries (?after=&limit=)", &with(&[("200", "a page of entries")]), None, &["tenant"])
        },
        "/tenants/{tenant}/catalog/entries/{id}": {
            "put": op("Put an entry (idempotent)", &with(&[("201", "added"), ("200", "replaced or unchanged")]), json_body("Entry"), &["tenant", "id"]),
            "get": op("Get an entry", &with(&[("200", "the entry"), ("404", "no such entry")]), None, &["tenant", "id"]),
            "delete": op("Delete an entry", &with(&[("204", "deleted"), ("404", "no such entry")]), None, &["tenant", "id"])
        },
        "/tenants/{tenant}/catalog/apply": {
            "post": op("Make the catalog exactly these entries (idempotent); reports added, modified and removed", &with(&[("200", "the report")]), json_body("Apply"), &["tenant"])
        },
        "/tenants/{tenant}/data-sources": {
            "get": op("List data sources (never their URLs), with each one's last catalog refresh", &with(&[("200", "the data sources")]), None, &["tenant"])
        },
        "/tenants/{tenant}/data-sources/{name}": {
            "put": op("Register or replace a data source; the database must answer and is introspected before the change is kept", &with(&[("200", "attached, with the catalog change"), ("409", "another data source serves this Language"), ("422", "the database cannot be used")]), json_body("DataSource"), &["tenant", "name"]),
            "get": op("Get a data source", &with(&[("200", "the data source"), ("404", "no such data source")]), None, &["tenant", "name"]),
            "delete": op("Detach a data source and remove its catalog entries", &with(&[("204", "deleted"), ("404", "no such data source")]), None, &["tenant", "name"])
        },
        "/tenants/{tenant}/data-sources/{name}/refresh": {
            "post": op("Introspect now; reports the catalog change", &with(&[("200", "the catalog change"), ("422", "the database cannot be used")]), None, &["tenant", "name"])
        },
        "/tenants/{tenant}/secrets": {
            "get": op("List secret names (values are never returned)", &with(&[("200", "the names")]), None, &["tenant"])
        },
        "/tenants/{tenant}/secrets/{name}": {
            "put": op("Store a secret, encrypted at rest. Names: letters, digits, _ and -; webhook:<source> is a webhook source's signing key, mqtt:<broker> an MQTT broker's {\"url\", \"username\"?, \"password\"?} (checked)", &with(&[("200", "stored")]), json_body("Secret"), &["tenant", "name"]),
            "delete": op("Delete a secret", &with(&[("204", "deleted")]), None, &["tenant", "name"])
        },
        "/tenants/{tenant}/deployments": {
            "get": op("List deployed programs (deployed by agents through execute with mode \"deploy\")", &with(&[("200", "the deployments")]), None, &["tenant"])
        },
        "/tenants/{tenant}/deployments/{name}": {
            "get": op("Get a deployment with its body and latest firings (?firings=, default 20), each with its run_id and outcome status", &with(&[("200", "the deployment"), ("404", "no such deployment")]), None, &["tenant", "name"]),
            "delete": op("Remove a deployment; its firings' Runs stay until their retention ends", &with(&[("204", "removed"), ("404", "no such deployment")]), None, &["tenant", "name"])
        },
        "/tenants/{tenant}/deployments/{name}/disable": {
            "post": op("Stop a deployment's triggers", &with(&[("200", "the deployment, disabled"), ("404", "no such deployment")]), None, &["tenant", "name"])
        },
        "/tenants/{tenant}/deployments/{name}/enable": {
            "post": op("Resume a deployment's triggers; schedule ticks missed while disabled never fire", &with(&[("200", "the deployment, enabled"), ("404", "no such deployment")]), None, &["tenant", "name"])
        },
        "/tenants/{tenant}/runs": {
            "get": op("List stored runs (?subject=&language=&limit=)", &with(&[("200", "the runs")]), None, &["tenant"])
        },
        "/tenants/{tenant}/runs/{run_id}": {
            "get": op("Get a stored run with its record", &with(&[("200", "the run"), ("404", "no such run")]), None, &["tenant", "run_id"])
        },
        "/tenants/{tenant}/usage": {
            "get": op("What the tenant's Runs used per UTC day, by kind and outcome, with totals (?from=YYYY-MM-DD&to=YYYY-MM-DD, default the last 30 days, at most 366; ?format=csv or Accept: text/csv for CSV); kept when Runs expire", &with(&[("200", "the usage"), ("400", "a bad day or range")]), None, &["tenant"])
        },
        "/usage": {
            "get": op("Every tenant's usage per UTC day (operators; as /tenants/{tenant}/usage)", &with(&[("200", "the usage"), ("400", "a bad day or range")]), None, &[])
        },
        "/tenants/{tenant}/policy": {
            "get": op("The tenant's policy on risk and its version", &with(&[("200", "the policy")]), None, &["tenant"]),
            "put": op("Set the tenant's policy on risk (operator only; replaces it whole)", &with(&[("200", "the policy")]), json_body("Any"), &["tenant"])
        },
        "/tenants/{tenant}/approvals": {
            "get": op("List approval requests, newest first (?state=pending|approved|rejected|used|expired&limit=)", &with(&[("200", "the approvals")]), None, &["tenant"])
        },
        "/tenants/{tenant}/approvals/{id}": {
            "get": op("Get an approval request with what it is for", &with(&[("200", "the approval"), ("404", "no such approval")]), None, &["tenant", "id"])
        },
        "/tenants/{tenant}/approvals/{id}/approve": {
            "post": body_optional(op("Approve a pending request (never the asker's own), with an optional comment kept in the audit record", &with(&[("200", "the approval"), ("400", "a comment over 500 characters, or a body of another shape"), ("404", "no such approval"), ("409", "not pending: decided, used or expired")]), json_body("Decision"), &["tenant", "id"]))
        },
        "/tenants/{tenant}/approvals/{id}/reject": {
            "post": body_optional(op("Reject a pending request (never the asker's own), with an optional comment kept in the audit record", &with(&[("200", "the approval"), ("400", "a comment over 500 characters, or a body of another shape"), ("404", "no such approval"), ("409", "not pending: decided, used or expired")]), json_body("Decision"), &["tenant", "id"]))
        },
        "/audit": {
            "get": op("The audit log, newest first (?limit=)", &with(&[("200", "the records")]), None, &[])
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_names_every_route_of_the_router() {
        let document = super::document();
        for path in [
            "/tenants",
            "/tenants/{tenant}/languages",
            "/tenants/{tenant}/catalog/apply",
            "/tenants/{tenant}/secrets/{name}",
            "/tenants/{tenant}/data-sources/{name}",
            "/tenants/{tenant}/data-sources/{name}/refresh",
            "/tenants/{tenant}/deployments/{name}/disable",
            "/tenants/{tenant}/usage",
            "/usage",
            "/audit",
        ] {
            assert!(document["paths"].get(path).is_some(), "{path} is undocumented");
        }
    }

    #[test]
    fn every_schema_reference_resolves_and_decisions_take_an_optional_comment() {
        let document = super::document();
        let text = document.to_string();
        for reference in text.split("\"#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(document["components"]["schemas"].get(name).is_some(), "{name} is referenced, not defined");
        }
        let approve = &document["paths"]["/tenants/{tenant}/approvals/{id}/approve"]["post"];
        assert_eq!(approve["requestBody"]["required"], false);
        assert_eq!(document["components"]["schemas"]["Decision"]["properties"]["comment"]["maxLength"], 500);
    }
}
