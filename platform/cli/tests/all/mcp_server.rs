//! The Pilotage MCP server through its real HTTP endpoint: the full loop of
//! Part IV §4.3, every request-error kind and reserved outcome status
//! reachable, carrier errors, durable runs, idempotency and promotion.

use serde_json::{Value, json};

use crate::endpoint::{Backend, call, client, ok, raw_post, request_error, server, settings, spec_program};
use crate::support::assert_schema;

/// discover → learn → lookup → validate invalid → validate corrected →
/// execute with store → fetch the trace (Part IV §4.3), on one backend.
async fn full_loop(backend: Backend) {
    let server = server(settings(backend).await).await;
    let client = client(&server.mcp_url()).await;

    // Initialize: the extension, the welcome text, the inline manifest.
    let info = client.peer_info().expect("initialized");
    assert!(info.capabilities.extensions.as_ref().unwrap().contains_key("io.github.jafarsa0/pilotage"));
    let instructions = info.instructions.clone().unwrap();
    assert!(instructions.contains("Pilotage") && instructions.contains("pilotage_manifest"));
    let inline = info.meta.as_ref().unwrap().get("io.github.jafarsa0/pilotage").unwrap()["manifest"].clone();
    assert_schema("Manifest", &inline);

    // Discover.
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in [
        "pilotage_manifest",
        "pilotage_get_guide",
        "pilotage_catalog",
        "validate_workflow",
        "run_workflow",
        "trace_workflow",
        "promote_workflow",
    ] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    // A run tool offers program_ref only where the Language promotes
    // (workflow/v1 does, automation/1 does not; issue 30 item 5).
    let description = |name: &str| {
        tools.iter().find(|t| t.name == name).and_then(|t| t.description.as_deref()).unwrap_or_default().to_owned()
    };
    assert!(description("run_workflow").contains("program_ref"), "{}", description("run_workflow"));
    let automation = description("run_automation");
    assert!(automation.contains("automation/1") && !automation.contains("program_ref"), "{automation}");
    assert!(!automation.contains("a automation/1"), "{automation}");
    let manifest = ok(&client, "pilotage_manifest", json!({})).await;
    assert_schema("Manifest", &manifest);
    assert_eq!(manifest, inline, "the inline manifest agrees with the tool");

    // Learn.
    let index = ok(&client, "pilotage_get_guide", json!({"language": "workflow/v1"})).await;
    assert_schema("GuideIndexResult", &index);
    let core = index["guides"].as_array().unwrap().iter().find(|g| g["level"] == "core").unwrap()["id"].clone();
    let guide = ok(&client, "pilotage_get_guide", json!({"language": "workflow/v1", "id": core})).await;
    assert_schema("GuideFetchResult", &guide);
    assert!(guide["guide"]["body"].as_str().unwrap().contains("workflow"));

    // Lookup.
    let list = ok(&client, "pilotage_catalog", json!({"language": "workflow/v1", "verb": "list"})).await;
    assert_schema("CatalogListResult", &list);
    let version = list["catalog_version"].as_str().unwrap().to_owned();

    // Validate invalid, then corrected.
    let invalid = ok(
        &client,
        "validate_workflow",
        json!({"workflow": {"steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profil"}]}}),
    )
    .await;
    assert_schema("ValidateResponse", &invalid);
    assert_eq!(invalid["valid"], false);
    assert_eq!(invalid["diagnostics"][0]["hint"], "close match: cap_read_user_profile");
    let valid = ok(&client, "validate_workflow", json!({"workflow": spec_program()})).await;
    assert_eq!(valid["valid"], true);
    assert_eq!(valid["catalog_version"], version.as_str());
    assert_schema("Plan", &valid["plan"]);

    // Execute with store, then fetch.
    let run = ok(
        &client,
        "run_workflow",
        json!({"workflow": spec_program(), "input": {"userId": "42"}, "trace_level": "full",
               "expected_catalog_version": version, "store": true}),
    )
    .await;
    assert_schema("ExecuteResponse", &run);
    assert_eq!(run["outcome"], json!({"ok": true, "status": "success", "error": null}));
    assert_eq!(run["output"], json!({"name": "Amira Hassan"}));
    assert_eq!(run["trace"]["steps"][0]["calls"], "cap_read_user_profile");
    let (_, world) = server.demo_world.as_ref().unwrap();
    assert_eq!(world.calls().get("/users/profile"), Some(&1));
    let fetched = ok(&client, "trace_workflow", json!({"run_id": run["run_id"]})).await;
    assert_schema("TraceFetchResponse", &fetched);
    assert_eq!(fetched["trace"], run["trace"], "one trace, two doors");
    assert_eq!(fetched["outcome"], run["outcome"]);
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_loop_on_sqlite() {
    full_loop(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_loop_on_postgres() {
    full_loop(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn carrier_errors_are_json_rpc_errors() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    match call(&client, "validate_workflw", json!({})).await {
        Err(rmcp::ServiceError::McpError(error)) => assert_eq!(error.code.0, -32602),
        other => panic!("expected -32602, got {other:?}"),
    }
    // A structural fault: the program argument is missing.
    match call(&client, "validate_workflow", json!({})).await {
        Err(rmcp::ServiceError::McpError(error)) => assert_eq!(error.code.0, -32602),
        other => panic!("expected -32602, got {other:?}"),
    }
    let response = raw_post(&server.mcp_url(), "{ not json", &[("content-type", "application/json")]).await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700);
    let response = raw_post(&server.mcp_url(), "[1, 2]", &[("content-type", "application/json")]).await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600);
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_accepting_only_json_gets_json_and_a_session() {
    let server = server(settings(Backend::Sqlite).await).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "plain", "version": "1"}}});
    for accept in [None, Some("application/json"), Some("*/*")] {
        let mut headers = vec![("content-type", "application/json")];
        if let Some(accept) = accept {
            headers.push(("accept", accept));
        }
        let response = raw_post(&server.mcp_url(), &initialize.to_string(), &headers).await;
        assert_eq!(response.status(), 200, "Accept {accept:?}");
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
        let session =
            response.headers().get("mcp-session-id").expect("the session id comes back").to_str().unwrap().to_owned();
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["result"]["capabilities"]["extensions"]["io.github.jafarsa0/pilotage"]["version"], "1.1");
        // The session then serves a plain-JSON tools/list.
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let mut with_session = headers.clone();
        with_session.push(("mcp-session-id", &session));
        with_session.push(("mcp-protocol-version", "2025-11-25"));
        raw_post(&server.mcp_url(), &initialized.to_string(), &with_session).await;
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let response = raw_post(&server.mcp_url(), &list.to_string(), &with_session).await;
        let body: Value = response.json().await.unwrap();
        assert!(body["result"]["tools"].as_array().unwrap().len() >= 6);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_declares_its_schemas_signposts_and_program_declaration() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    for tool in client.list_all_tools().await.unwrap() {
        let output = tool.output_schema.as_ref().expect("every tool declares an outputSchema");
        assert_eq!(output.get("type"), Some(&json!("object")), "{}", tool.name);
        assert!(output.get("anyOf").is_some(), "{}", tool.name);
        let text = serde_json::to_string(&tool).unwrap();
        assert!(!text.contains("$ref") && !text.contains("\"additionalProperties\":false"), "{}", tool.name);
        let description = tool.description.as_deref().unwrap_or("");
        match tool.name.as_ref() {
            "pilotage_manifest" => assert!(description.contains("START HERE") && description.contains("first")),
            "pilotage_get_guide" => assert!(description.contains("Learn stage")),
            "pilotage_catalog" => assert!(description.contains("Lookup stage")),
            "validate_workflow" => {
                assert!(description.contains("Validate stage") && description.contains("workflow/v1"))
            }
            "run_workflow" => assert!(description.contains("Execute stage") && description.contains("workflow/v1")),
            "trace_workflow" => {
                assert!(description.contains("Trace-fetch stage") && description.contains("workflow/v1"))
            }
            "promote_workflow" => assert!(description.contains("not a loop stage")),
            // The bundled automation/1 (no promotion).
            "validate_automation" => {
                assert!(description.contains("Validate stage") && description.contains("automation/1"))
            }
            "run_automation" => {
                assert!(description.contains("Execute stage") && description.contains("automation/1"))
            }
            "trace_automation" => {
                assert!(description.contains("Trace-fetch stage") && description.contains("automation/1"))
            }
            other => panic!("unexpected tool {other}"),
        }
        if ["validate_automation", "run_automation"].contains(&tool.name.as_ref()) {
            let declaration =
                &tool.meta.as_ref().expect("program-valued tools carry _meta").0["io.github.jafarsa0/pilotage"];
            assert_eq!(declaration, &json!({"argument": "rule", "language": "automation/1"}));
        }
        if tool.name == "run_automation" {
            // execution both, test_run declared: the reserved members are in
            // the schema, typed only (Part III §4.4, §4.6).
            let properties = &tool.input_schema["properties"];
            assert_eq!(properties["mode"]["type"], "string", "{properties}");
            assert!(properties["mode"].get("enum").is_none());
            assert_eq!(properties["test_run"]["type"], "boolean", "{properties}");
            assert_eq!(tool.annotations.as_ref().unwrap().destructive_hint, Some(true), "front_door.unlock");
        }
        if ["validate_workflow", "run_workflow", "promote_workflow"].contains(&tool.name.as_ref()) {
            let declaration =
                &tool.meta.as_ref().expect("program-valued tools carry _meta").0["io.github.jafarsa0/pilotage"];
            assert_eq!(declaration, &json!({"argument": "workflow", "language": "workflow/v1"}));
            assert_schema("ProgramDeclaration", declaration);
        }
        if tool.name == "run_workflow" {
            let schema = &tool.input_schema;
            assert!(schema.get("required").is_none(), "runnable selection is not a schema rule");
            assert_eq!(
                schema["properties"]["trace_level"],
                json!({"type": "string", "description": schema["properties"]["trace_level"]["description"]})
            );
            let annotations = tool.annotations.as_ref().unwrap();
            assert_eq!(annotations.destructive_hint, Some(true), "the demo catalog has a destructive entry");
        }
        if tool.name == "validate_workflow" {
            assert_eq!(tool.input_schema["required"], json!(["workflow"]));
            assert_eq!(tool.annotations.as_ref().unwrap().read_only_hint, Some(true));
        }
    }
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_error_kinds_are_reachable() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    let kind = |value: &Value| value["error"]["kind"].as_str().unwrap().to_owned();

    // not_found, naming the choices.
    let error =
        request_error(&client, "pilotage_get_guide", json!({"language": "workflow/v1", "id": "no-such-guide"})).await;
    assert_eq!(kind(&error), "not_found");
    assert!(error["error"]["message"].as_str().unwrap().contains("workflow-core"));
    let error = request_error(&client, "pilotage_get_guide", json!({"language": "workflow/v2"})).await;
    assert!(error["error"]["message"].as_str().unwrap().contains("workflow/v1"));
    let error = request_error(
        &client,
        "pilotage_catalog",
        json!({"language": "workflow/v1", "verb": "get", "id": "no-such-entry"}),
    )
    .await;
    assert_eq!(kind(&error), "not_found");
    assert!(error["catalog_version"].is_string(), "catalog_version rides beside the error");
    assert_eq!(kind(&request_error(&client, "trace_workflow", json!({"run_id": "run_nope"})).await), "not_found");
    assert_eq!(kind(&request_error(&client, "run_workflow", json!({"program_ref": "prog_nope"})).await), "not_found");

    // invalid_request.
    for (tool, args) in [
        ("pilotage_get_guide", json!({"language": "workflow/v1", "id": "workflow-core", "topic": "grammar"})),
        ("pilotage_catalog", json!({"language": "workflow/v1", "verb": "get", "id": "x", "kind": "capability"})),
        ("run_workflow", json!({"workflow": spec_program(), "program_ref": "prog_x"})),
        ("run_workflow", json!({"input": {"x": 1}})),
        ("run_workflow", json!({"workflow": spec_program(), "trace_level": "verbose"})),
        ("run_workflow", json!({"workflow": spec_program(), "test_run": true})),
        ("run_workflow", json!({"workflow": spec_program(), "mode": "immediate"})),
        ("trace_workflow", json!({"run_id": "run_x", "trace_level": "none"})),
    ] {
        let error = request_error(&client, tool, args.clone()).await;
        assert_eq!(kind(&error), "invalid_request", "{tool} {args}");
    }

    // unknown_baseline.
    let error = request_error(
        &client,
        "pilotage_catalog",
        json!({"language": "workflow/v1", "verb": "changed_since", "catalog_version": "cv_unknown_baseline"}),
    )
    .await;
    assert_eq!(kind(&error), "unknown_baseline");

    // idempotency_conflict.
    let args = json!({"workflow": spec_program(), "input": {"userId": "42"}, "idempotency_key": "key-1"});
    ok(&client, "run_workflow", args.clone()).await;
    let mut other = args.clone();
    other["input"] = json!({"userId": "7"});
    assert_eq!(kind(&request_error(&client, "run_workflow", other).await), "idempotency_conflict");
    // The same key with another `store` asks for another thing: a
    // conflict, not the first Run's replay (issue 27 item 3).
    let mut stored = args.clone();
    stored["store"] = json!(true);
    assert_eq!(kind(&request_error(&client, "run_workflow", stored).await), "idempotency_conflict");
    // A test run and then the real Run under one key: the real Run is not
    // answered with the test run's replay. Nor is a deploy.
    let rule = json!({"rule": "porch-check",
                      "conditions": [{"id": "door-opened", "event": "/state", "equals": "open"}],
                      "actions": [{"id": "light-on", "call": "porch_light.turn_on", "with": {"brightness": 40}}]});
    let input = json!({"event": {"device": "front_door", "state": "open"}, "at": "2026-07-14T22:30:00+02:00"});
    let test_run = json!({"rule": rule, "input": input, "mode": "immediate", "test_run": true,
                          "idempotency_key": "test-then-real"});
    let first = ok(&client, "run_automation", test_run.clone()).await;
    assert_eq!(first["outcome"]["ok"], json!(true), "{first}");
    let replayed = ok(&client, "run_automation", test_run.clone()).await;
    assert_eq!(replayed["run_id"], first["run_id"], "the same request replays");
    let mut real = test_run.clone();
    real["test_run"] = json!(false);
    assert_eq!(kind(&request_error(&client, "run_automation", real).await), "idempotency_conflict");
    let mut deploy = test_run.clone();
    deploy["mode"] = json!("deploy");
    deploy.as_object_mut().unwrap().remove("test_run");
    assert_eq!(kind(&request_error(&client, "run_automation", deploy).await), "idempotency_conflict");

    // bounds_exceeded: a program nested beyond the bound.
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!({"a": deep});
    }
    let error = request_error(&client, "validate_workflow", json!({"workflow": {"steps": [], "output": deep}})).await;
    assert_eq!(kind(&error), "bounds_exceeded");
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_true_is_unsupported_when_nothing_is_retained() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.retention = "none".into();
    let server = server(settings).await;
    let client = client(&server.mcp_url()).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(!tools.iter().any(|t| t.name == "trace_workflow"), "no fetch door without retention");
    let error = request_error(
        &client,
        "run_workflow",
        json!({"workflow": spec_program(), "input": {"userId": "42"}, "store": true}),
    )
    .await;
    assert_eq!(error["error"]["kind"], "unsupported");
    let (_, world) = server.demo_world.as_ref().unwrap();
    assert!(world.calls().is_empty(), "nothing ran");
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_outcome_statuses_are_reachable() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    let status = |value: &Value| value["outcome"]["status"].as_str().unwrap().to_owned();
    let (_, world) = server.demo_world.as_ref().unwrap();

    // success
    let run = ok(&client, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}})).await;
    assert_eq!(status(&run), "success");

    // validation_error: an invalid program run directly; no side effects.
    let before = world.calls();
    let run = ok(
        &client,
        "run_workflow",
        json!({"workflow": {"steps": [{"id": "p", "kind": "call", "capability": "cap_read_user_profil"}]}}),
    )
    .await;
    assert_eq!(status(&run), "validation_error");
    assert!(run["diagnostics"].as_array().is_some_and(|d| !d.is_empty()));
    assert!(run["run_id"].is_string() && run.get("trace").is_none());
    assert_schema("ExecuteResponse", &run);
    // ... and input that does not bind.
    let typed = json!({"input": {"userId": "string"}, "steps": spec_program()["steps"].clone()});
    let run = ok(&client, "run_workflow", json!({"workflow": typed, "input": {"userId": 42}})).await;
    assert_eq!(status(&run), "validation_error");
    assert_eq!(run["diagnostics"][0]["code"], "input_binding");
    assert_eq!(run["diagnostics"][0]["path"], "/userId");
    // ... and supplied context.
    let run = ok(&client, "run_workflow", json!({"workflow": spec_program(), "context": {"any": "value"}})).await;
    assert_eq!(run["diagnostics"][0]["code"], "context_binding");
    assert_eq!(world.calls(), before, "refused Runs have no side effects");

    // catalog_drift, and drift is checked before revalidation.
    let run = ok(
        &client,
        "run_workflow",
        json!({"workflow": spec_program(), "input": {"userId": "42"}, "expected_catalog_version": "cv_stale"}),
    )
    .await;
    assert_eq!(status(&run), "catalog_drift");
    assert_eq!(run["outcome"]["error"], "catalog version mismatch");
    let run = ok(
        &client,
        "run_workflow",
        json!({"workflow": {"steps": "not a list"}, "expected_catalog_version": "cv_stale"}),
    )
    .await;
    assert_eq!(status(&run), "catalog_drift");
    assert_eq!(world.calls(), before);

    // partial: the second step fails (user 99 has no orders) after the first ran.
    let program = json!({"steps": [
        {"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "42"}},
        {"id": "orders", "kind": "call", "capability": "cap_list_orders", "with": {"user_id": "99"}}
    ]});
    let run = ok(&client, "run_workflow", json!({"workflow": program})).await;
    assert_eq!(status(&run), "partial");
    assert_eq!(run["outcome"]["ok"], false);
    assert_eq!(run["trace"]["steps"].as_array().unwrap().len(), 2);
    assert!(run.get("output").is_none());

    // error: fails before anything is invoked.
    let program =
        json!({"steps": [{"id": "v", "kind": "set", "value": "$.input.missing"}], "output": "$.steps.v.output"});
    let run = ok(&client, "run_workflow", json!({"workflow": program, "input": {}})).await;
    assert_eq!(status(&run), "error");
    assert!(run["outcome"]["error"].is_string());

    // promotion_drift: promote, change a referenced entry's input_schema, run.
    let promoted = ok(&client, "promote_workflow", json!({"workflow": spec_program(), "input_schema": {"type": "object", "properties": {"userId": {"type": "string"}}, "required": ["userId"]}})).await;
    let reference = promoted["program_ref"].as_str().unwrap().to_owned();
    let run = ok(&client, "run_workflow", json!({"program_ref": reference, "input": {"userId": "42"}})).await;
    assert_eq!(status(&run), "success", "{run}");
    let run = ok(&client, "run_workflow", json!({"program_ref": reference, "input": {"userId": 42}})).await;
    assert_eq!(status(&run), "validation_error");
    assert_eq!(run["diagnostics"][0]["code"], "input_binding");
    let tenant = server.platform.tenant("demo").unwrap();
    let mut changed = tenant.with_catalog(|catalog| catalog.stored("cap_read_user_profile").unwrap().as_ref().clone());
    changed.entry.input_schema = Some(json!({"type": "object", "properties": {"user_id": {"type": "integer"}}}));
    tenant.put_entries(vec![changed]);
    let run = ok(&client, "run_workflow", json!({"program_ref": reference, "input": {"userId": "42"}})).await;
    assert_eq!(status(&run), "promotion_drift");
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_levels_and_the_fetch_door() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    // trace_level none: no inline trace, still fetchable when stored.
    let run = ok(
        &client,
        "run_workflow",
        json!({"workflow": spec_program(), "input": {"userId": "42"}, "trace_level": "none", "store": true}),
    )
    .await;
    assert!(run.get("trace").is_none() && run["outcome"]["ok"] == true);
    let fetched = ok(&client, "trace_workflow", json!({"run_id": run["run_id"]})).await;
    assert_eq!(fetched["trace"]["level"], "full");
    // Fetching at summary returns the lower level, without inputs.
    let summary = ok(&client, "trace_workflow", json!({"run_id": run["run_id"], "trace_level": "summary"})).await;
    assert_eq!(summary["trace"]["level"], "summary");
    assert!(summary["trace"]["steps"][0].get("input").is_none());
    // A summary run.
    let run = ok(
        &client,
        "run_workflow",
        json!({"workflow": spec_program(), "input": {"userId": "42"}, "trace_level": "summary"}),
    )
    .await;
    assert_eq!(run["trace"]["level"], "summary");
    // store false: never written, and the fetch door says not_found.
    let before = server.platform.store().runs_count().await.unwrap();
    let run =
        ok(&client, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}, "store": false}))
            .await;
    assert_eq!(server.platform.store().runs_count().await.unwrap(), before, "store:false wrote a record");
    let unstored = request_error(&client, "trace_workflow", json!({"run_id": run["run_id"]})).await;
    let unknown = request_error(&client, "trace_workflow", json!({"run_id": "run_000000000000000000000000"})).await;
    let refused = ok(
        &client,
        "run_workflow",
        json!({"workflow": spec_program(), "expected_catalog_version": "cv_stale", "store": true}),
    )
    .await;
    let refused = request_error(&client, "trace_workflow", json!({"run_id": refused["run_id"]})).await;
    assert_eq!(unstored, unknown);
    assert_eq!(refused, unknown);
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_concurrent_identical_requests_execute_once() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = std::sync::Arc::new(client(&server.mcp_url()).await);
    let program = json!({"steps": [{"id": "mail", "kind": "call", "capability": "cap_send_email",
        "with": {"to": "ops@example.com", "subject": "once", "body": "exactly once"}}]});
    let args = json!({"workflow": program, "idempotency_key": "send-once", "store": true});
    let mut tasks = Vec::new();
    // More than the tenant's 16 concurrent Runs: a request answered from
    // the idempotency claim takes no Run slot.
    for _ in 0..40 {
        let client = client.clone();
        let args = args.clone();
        tasks.push(tokio::spawn(async move { ok(&client, "run_workflow", args).await }));
    }
    let mut responses = Vec::new();
    for task in tasks {
        responses.push(task.await.unwrap());
    }
    let (_, world) = server.demo_world.as_ref().unwrap();
    assert_eq!(world.calls().get("/outbox/send"), Some(&1), "one execution at the capability service");
    assert!(responses.iter().all(|r| r == &responses[0]), "every response is identical, run_id included");
    assert_eq!(responses[0]["outcome"]["ok"], true);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_run_survives_a_restart_on_postgres() {
    let settings = settings(Backend::Postgres).await;
    let first = server(settings.clone()).await;
    let client = client(&first.mcp_url()).await;
    let run =
        ok(&client, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}, "store": true}))
            .await;
    let before = ok(&client, "trace_workflow", json!({"run_id": run["run_id"]})).await;
    client.cancel().await.unwrap();
    first.stop().await;

    let second = server(settings).await;
    let client = crate::endpoint::client(&second.mcp_url()).await;
    let after = ok(&client, "trace_workflow", json!({"run_id": run["run_id"]})).await;
    assert_eq!(before, after);
    client.cancel().await.unwrap();
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_retention_binds_runs_to_their_session() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.retention = "session".into();
    let server = server(settings).await;
    let first = client(&server.mcp_url()).await;
    let run =
        ok(&first, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}, "store": true})).await;
    ok(&first, "trace_workflow", json!({"run_id": run["run_id"]})).await;
    let second = client(&server.mcp_url()).await;
    let other = request_error(&second, "trace_workflow", json!({"run_id": run["run_id"]})).await;
    let unknown = request_error(&second, "trace_workflow", json!({"run_id": "run_000000000000000000000000"})).await;
    assert_eq!(other, unknown, "another session's run is indistinguishable from none");
    assert_eq!(server.platform.store().runs_count().await.unwrap(), 1);
    // Ending the session deletes its runs.
    first.cancel().await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while server.platform.store().runs_count().await.unwrap() > 0 {
        assert!(std::time::Instant::now() < deadline, "the session's run outlived it");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    second.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_pages_versions_and_changes() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({"language": "workflow/v1", "verb": "list", "limit": 2});
        if let Some(cursor) = &cursor {
            args["cursor"] = json!(cursor);
        }
        let page = ok(&client, "pilotage_catalog", args).await;
        seen.extend(page["items"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap().to_owned()));
        match page.get("next_cursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 7, "{seen:?}");
    assert!(!seen.iter().any(|id| id == "cap_read_payroll"), "an entry needing the 'hr' scope was listed");
    let search =
        ok(&client, "pilotage_catalog", json!({"language": "workflow/v1", "verb": "list", "q": "outbox"})).await;
    assert_eq!(search["items"].as_array().unwrap().len(), 2);
    let first =
        ok(&client, "pilotage_catalog", json!({"language": "workflow/v1", "verb": "list"})).await["catalog_version"]
            .clone();
    let again =
        ok(&client, "pilotage_catalog", json!({"language": "workflow/v1", "verb": "list"})).await["catalog_version"]
            .clone();
    assert_eq!(first, again, "stable without changes");
    let tenant = server.platform.tenant("demo").unwrap();
    let mut changed = tenant.with_catalog(|catalog| catalog.stored("cap_read_outbox").unwrap().as_ref().clone());
    changed.entry.description = Some("Lists the outbox, newest last.".into());
    tenant.put_entries(vec![changed]);
    let bumped =
        ok(&client, "pilotage_catalog", json!({"language": "workflow/v1", "verb": "get", "id": "cap_read_outbox"}))
            .await;
    assert_ne!(bumped["catalog_version"], first, "a description change moves the token");
    let changes = ok(
        &client,
        "pilotage_catalog",
        json!({"language": "workflow/v1", "verb": "changed_since", "catalog_version": first}),
    )
    .await;
    assert_schema("CatalogChangedResult", &changes);
    assert_eq!(changes["changes"], json!([{"id": "cap_read_outbox", "change": "modified"}]));
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_validator_is_internal_and_a_crashing_engine_is_an_outcome() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.demo = false;
    settings.dev_tenant = "lab".into();
    let server = server(settings).await;
    let hostile = server.platform.engine().load(crate::support::HOSTILE).unwrap();
    let tenant = server.platform.install_language("lab", hostile).await;
    tenant.put_entries(vec![pilotage_engine::catalog::StoredEntry::new(
        serde_json::from_value(
            json!({"id": "cap_a", "kind": "capability", "name": "A", "input_schema": {"type": "object"},
            "risk": "safe", "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}}),
        )
        .unwrap(),
        vec![],
        None,
    )]);
    let client = client(&server.mcp_url()).await;
    let error = request_error(&client, "validate_hostile", json!({"program": "validate:trap"})).await;
    assert_eq!(error["error"]["kind"], "internal");
    assert!(!error["error"]["message"].as_str().unwrap().contains("panic"), "internals stay in the log");
    let error = request_error(&client, "validate_hostile", json!({"program": "validate:spin"})).await;
    assert_eq!(error["error"]["kind"], "bounds_exceeded");
    let run = ok(&client, "run_hostile", json!({"program": "execute:trap"})).await;
    assert_eq!(run["outcome"]["status"], "engine_fault");
    assert_eq!(run["outcome"]["ok"], false);
    // The server still serves.
    let fine = ok(&client, "validate_hostile", json!({"program": "fine"})).await;
    assert_eq!(fine["valid"], true);
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installing_a_language_announces_a_tool_list_change() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[derive(Clone)]
    struct Listener(Arc<AtomicU32>);
    impl rmcp::ClientHandler for Listener {
        async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<rmcp::RoleClient>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    let server = server(settings(Backend::Sqlite).await).await;
    pilotage_client::install_crypto_provider();
    let seen = Arc::new(AtomicU32::new(0));
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(server.mcp_url());
    let client = rmcp::ServiceExt::serve(Listener(seen.clone()), transport).await.unwrap();
    let before = client.list_all_tools().await.unwrap().len();
    let hostile = server.platform.engine().load(crate::support::HOSTILE).unwrap();
    server.platform.install_language("demo", hostile).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while seen.load(Ordering::SeqCst) == 0 {
        assert!(std::time::Instant::now() < deadline, "no notifications/tools/list_changed arrived");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let after = client.list_all_tools().await.unwrap();
    assert!(after.len() > before);
    assert!(after.iter().any(|tool| tool.name == "validate_hostile"));
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_calls_a_promoted_program_as_one_opaque_step() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    let inner = json!({"input": {"userId": "string"}, "steps": [
        {"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "$.input.userId"}}
    ], "output": {"name": "$.steps.profile.output.name", "tier": "$.steps.profile.output.tier"}});
    let promoted = ok(
        &client,
        "promote_workflow",
        json!({"workflow": inner, "name": "Greeting card",
        "input_schema": {"type": "object", "properties": {"userId": {"type": "string"}}, "required": ["userId"]}}),
    )
    .await;
    let reference = promoted["program_ref"].as_str().unwrap().to_owned();
    assert_schema("CatalogEntry", &promoted["entry"]);
    assert_eq!(promoted["entry"]["kind"], "workflow_program");
    assert_eq!(promoted["entry"]["risk_hints"]["readOnly"], true);
    // Promoting the same body again gives the same reference.
    let again = ok(
        &client,
        "promote_workflow",
        json!({"workflow": inner, "name": "Greeting card",
        "input_schema": {"type": "object", "properties": {"userId": {"type": "string"}}, "required": ["userId"]}}),
    )
    .await;
    assert_eq!(again["program_ref"], reference.as_str());
    // It is in the catalog, and another workflow can call it.
    let entry =
        ok(&client, "pilotage_catalog", json!({"language": "workflow/v1", "verb": "get", "id": reference})).await;
    assert_eq!(entry["entry"]["name"], "Greeting card");
    let outer = json!({"steps": [{"id": "card", "kind": "call", "capability": reference, "with": {"userId": "42"}}],
                       "output": "$.steps.card.output.name"});
    let run = ok(&client, "run_workflow", json!({"workflow": outer})).await;
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    assert_eq!(run["output"], "Amira Hassan");
    let steps = run["trace"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "opaque: one entry for the sub-program");
    assert_eq!(steps[0]["calls"], reference.as_str());
    // An invalid program is not promoted; its diagnostics come back.
    let invalid = ok(
        &client,
        "promote_workflow",
        json!({"workflow": {"steps": [{"id": "p", "kind": "call", "capability": "nope"}]}}),
    )
    .await;
    assert_eq!(invalid["valid"], false);
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_hosts_and_body_limits() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.max_body_bytes = 64 * 1024;
    let server = server(settings).await;
    let base = format!("http://{}", server.addr);
    pilotage_client::install_crypto_provider();
    let http = reqwest::Client::new();
    assert_eq!(http.get(format!("{base}/healthz")).send().await.unwrap().status(), 200);
    assert_eq!(http.get(format!("{base}/readyz")).send().await.unwrap().status(), 200);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}});
    let response = raw_post(
        &server.mcp_url(),
        &initialize.to_string(),
        &[("content-type", "application/json"), ("host", "evil.example")],
    )
    .await;
    assert_eq!(response.status(), 403, "DNS-rebinding protection refuses foreign Host headers");
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"padding": "x".repeat(100_000)}});
    let response = raw_post(&server.mcp_url(), &big.to_string(), &[("content-type", "application/json")]).await;
    assert_eq!(response.status(), 413);
    server.stop().await;
}

/// A 2026-07-28 client has no session: it learns of tool-list changes,
/// and of resource-list changes and updates of the resources it names, by
/// holding `subscriptions/listen` open (Part III §4.7, §8.3), and only for
/// its own tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_client_hears_tool_list_changes_through_subscriptions_listen() {
    use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};

    let server = server(settings(Backend::Sqlite).await).await;
    pilotage_client::install_crypto_provider();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(server.mcp_url());
    let client = ()
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        )
        .await
        .expect("a 2026-07-28 client connects");
    assert_eq!(client.peer_info().map(|info| info.protocol_version.clone()), Some(ProtocolVersion::V_2026_07_28));
    let index = "pilotage://guides/workflow%2Fv1";
    let requested = SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .resources_list_changed()
        .resource_subscriptions([index.to_owned(), "https://elsewhere.example/x".to_owned()])
        .build();
    let mut subscription = client.listen(requested).await.expect("the server accepts a listen");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));
    assert_eq!(subscription.acknowledged().prompts_list_changed, None, "only what the server sends is accepted");
    // Resources too (Part III §8.3): the list, and this surface's URIs only.
    assert_eq!(subscription.acknowledged().resources_list_changed, Some(true));
    assert_eq!(subscription.acknowledged().resource_subscriptions.as_deref(), Some(&[index.to_owned()][..]));

    // Another tenant's change is not announced here; the demo tenant's is.
    server.platform.add_tenant("elsewhere");
    let elsewhere = server.platform.engine().load(crate::support::HOSTILE).unwrap();
    server.platform.install_language("elsewhere", elsewhere).await;
    let quiet = tokio::time::timeout(std::time::Duration::from_millis(500), subscription.next()).await;
    assert!(quiet.is_err(), "another tenant's change reached this subscription: {quiet:?}");
    let hostile = server.platform.engine().load(crate::support::HOSTILE).unwrap();
    server.platform.install_language("demo", hostile).await;
    let heard = tokio::time::timeout(std::time::Duration::from_secs(5), subscription.next())
        .await
        .expect("a notification within 5 s")
        .expect("the subscription is open");
    assert!(matches!(heard, Some(ServerNotification::ToolListChangedNotification(_))), "{heard:?}");
    let mut resources = Vec::new();
    for _ in 0..2 {
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), subscription.next()).await;
        resources.push(next.expect("a resource notification within 5 s").expect("open"));
    }
    assert!(matches!(resources[0], Some(ServerNotification::ResourceListChangedNotification(_))), "{resources:?}");
    assert!(
        matches!(&resources[1], Some(ServerNotification::ResourceUpdatedNotification(n)) if n.params.uri == index),
        "{resources:?}"
    );
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "validate_hostile"));
    drop(subscription);
    client.cancel().await.unwrap();
    server.stop().await;
}

/// The stored-bytes quota (`max_stored_run_bytes`) counts exactly the
/// records a tenant keeps, from the per-tenant total the store's triggers
/// maintain: every stored Run adds its record's bytes, expiry and deletion
/// take them off, and once the total reaches the quota a retained execute
/// is refused (`bounds_exceeded`) while `store: false` still runs.
async fn stored_run_bytes_follow_the_records(backend: Backend) {
    let server = server(settings(backend).await).await;
    let client = client(&server.mcp_url()).await;
    let store = server.platform.store();
    let summed = async || -> i64 {
        let rows = store.runs_filtered("demo", None, None, 10_000).await.unwrap();
        rows.iter().map(|row| row.record.len() as i64).sum()
    };
    assert_eq!(store.run_bytes_of_tenant("demo").await.unwrap(), 0, "no run stored yet");
    let stored = json!({"workflow": spec_program(), "input": {"userId": "42"}, "store": true});
    for _ in 0..3 {
        ok(&client, "run_workflow", stored.clone()).await;
    }
    let total = store.run_bytes_of_tenant("demo").await.unwrap();
    assert!(total > 0);
    assert_eq!(total, summed().await, "the kept total is the sum of the stored records");
    assert_eq!(store.run_bytes_of_tenant("nobody").await.unwrap(), 0);

    // A quota at the current total refuses the next retained execute and
    // lets an unstored one run.
    let tenant = server.platform.tenant("demo").unwrap();
    tenant.set_quotas(pilotage_server::tenancy::Quotas { max_stored_run_bytes: total as u64, ..tenant.quotas() });
    let refused = request_error(&client, "run_workflow", stored.clone()).await;
    assert_eq!(refused["error"]["kind"], "bounds_exceeded");
    assert!(refused["error"]["message"].as_str().unwrap().contains("max_stored_run_bytes"));
    let unstored =
        ok(&client, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}, "store": false}))
            .await;
    assert_eq!(unstored["outcome"]["status"], "success");
    assert_eq!(store.run_bytes_of_tenant("demo").await.unwrap(), total, "neither call stored anything");

    // Expiry and session end free the bytes (which one applies depends on
    // the retention default), and the quota lets a retained execute in again.
    store.sweep(i64::MAX).await.unwrap();
    store.runs_delete_all_session_bound().await.unwrap();
    assert_eq!(store.run_bytes_of_tenant("demo").await.unwrap(), 0);
    assert_eq!(summed().await, 0);
    ok(&client, "run_workflow", stored).await;
    assert_eq!(store.run_bytes_of_tenant("demo").await.unwrap(), summed().await);
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_run_bytes_on_sqlite() {
    stored_run_bytes_follow_the_records(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_run_bytes_on_postgres() {
    stored_run_bytes_follow_the_records(Backend::Postgres).await;
}

/// Issue 27 item 7: a `for_each` of 1,000 invocations. Its execute result
/// at the default level is far above what MCP hosts show of a tool result,
/// so the text `content` is a short human-readable summary (outcome, step
/// counts, the decisions, how to fetch the rest) while `structuredContent`
/// stays whole; a summary trace (executed or fetched) keeps every step but
/// bounds its outputs in total, a small fraction of the full trace. A
/// small result's text stays its JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_is_summarized_in_content_and_whole_in_structured_content() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    let program = json!({
        "input": {"ids": "array"},
        "steps": [
            {"id": "each", "kind": "for_each", "over": "$.input.ids", "as": "id",
             "do": [{"id": "orders", "kind": "call", "capability": "cap_list_orders", "with": {"user_id": "$.id"}}]},
            {"id": "many", "kind": "branch", "if": {"gt": [1000, 10]}, "then": [], "else": []}
        ],
        "output": {"done": true}
    });
    let ids: Vec<&str> = vec!["42"; 1000];
    let arguments = |level: Option<&str>| {
        let mut arguments = json!({"workflow": program, "input": {"ids": ids}, "store": true});
        if let Some(level) = level {
            arguments["trace_level"] = json!(level);
        }
        arguments
    };
    let result = call(&client, "run_workflow", arguments(None)).await.unwrap();
    let structured = result.structured_content.clone().unwrap();
    assert_eq!(structured["outcome"]["status"], "success", "{structured}");
    let steps = structured["trace"]["steps"].as_array().unwrap();
    assert!(steps.len() > 1000, "structuredContent holds every step: {}", steps.len());
    let full_bytes = structured.to_string().len();
    let text = result.content[0].as_text().unwrap().text.clone();
    assert!(text.len() < 4096 && text.len() * 50 < full_bytes, "{} bytes of text for {full_bytes}", text.len());
    let run_id = structured["run_id"].as_str().unwrap();
    for needle in [
        format!("Run {run_id}: success (ok)"),
        "1002 success".to_owned(),
        "took continue 1000 times".to_owned(),
        "Decisions (".to_owned(),
        "structuredContent".to_owned(),
        format!("trace_workflow {{\"run_id\": \"{run_id}\""),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing from:\n{text}");
    }
    crate::endpoint::envelope_agrees(&result);

    // At summary, inline and fetched: every step, no input, and outputs
    // bounded in total, so the trace is its skeleton (ids, outcomes,
    // decisions) plus at most SUMMARY_OUTPUTS_MAX_BYTES of output.
    let summarized = ok(&client, "run_workflow", arguments(Some("summary"))).await;
    let summary_bytes = summarized["trace"].to_string().len();
    assert_eq!(summarized["trace"]["steps"].as_array().unwrap().len(), steps.len());
    let mut skeleton = structured["trace"].clone();
    for step in skeleton["steps"].as_array_mut().unwrap() {
        let step = step.as_object_mut().unwrap();
        step.remove("input");
        step.remove("output");
    }
    let skeleton_bytes = skeleton.to_string().len();
    // Each output kept also brings its member name.
    let kept =
        summarized["trace"]["steps"].as_array().unwrap().iter().filter(|step| step.get("output").is_some()).count();
    let bound = skeleton_bytes + pilotage_protocol::trace::SUMMARY_OUTPUTS_MAX_BYTES + kept * ",\"output\":".len();
    let trace_bytes = structured["trace"].to_string().len();
    assert!(summary_bytes <= bound, "summary {summary_bytes} bytes, skeleton {skeleton_bytes}, full {trace_bytes}");
    assert!(summary_bytes < trace_bytes, "summary {summary_bytes} bytes, full {trace_bytes}");
    eprintln!(
        "1,000 invocations: result {full_bytes} bytes, text {} bytes, full trace {trace_bytes}, summary trace {summary_bytes}, skeleton {skeleton_bytes}",
        text.len()
    );
    let fetched = ok(&client, "trace_workflow", json!({"run_id": run_id, "trace_level": "summary"})).await;
    assert!(fetched["trace"].to_string().len() <= bound);
    let outputs: usize = fetched["trace"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|step| step.get("output"))
        .map(|output| output.to_string().len())
        .sum();
    assert!(outputs <= pilotage_protocol::trace::SUMMARY_OUTPUTS_MAX_BYTES, "{outputs}");
    let full = call(&client, "trace_workflow", json!({"run_id": run_id, "trace_level": "full"})).await.unwrap();
    assert_eq!(full.structured_content.as_ref().unwrap()["trace"]["steps"].as_array().unwrap().len(), steps.len());
    assert!(!full.content[0].as_text().unwrap().text.starts_with('{'), "the fetched full trace is summarized too");

    // A small result keeps its JSON text.
    let small =
        call(&client, "run_workflow", json!({"workflow": spec_program(), "input": {"userId": "42"}})).await.unwrap();
    let text = small.content[0].as_text().unwrap().text.clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), small.structured_content.unwrap());
    server.stop().await;
}
