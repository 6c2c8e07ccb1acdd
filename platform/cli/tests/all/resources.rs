//! The resource surface through the real endpoint (Part III §8.3, issue 30
//! item 1): every resource the server lists reads as exactly the text of
//! the tool answer it mirrors (conformance item 12), for callers of
//! different visibility too; the manifest names the index resources; bad
//! URIs are -32002; a Language's arrival is announced as a resource
//! change, with `resources/updated` for a subscribed guide index, and a
//! catalog change updates a subscribed catalog resource; the official
//! TypeScript and Python SDK clients hear of a change made through another
//! replica.

use rmcp::model::ClientConfig;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents, SubscribeRequestParams};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use crate::endpoint::{Backend, client, client_as, server, settings};

type Client = RunningService<RoleClient, ClientConfig>;

async fn read(client: &rmcp::Peer<RoleClient>, uri: &str) -> Result<String, rmcp::ServiceError> {
    let result = client.read_resource(ReadResourceRequestParams::new(uri)).await?;
    match &result.contents[..] {
        [ResourceContents::TextResourceContents { text, mime_type, .. }] => {
            assert_eq!(mime_type.as_deref(), Some("application/json"));
            Ok(text.clone())
        }
        other => panic!("one text content expected: {other:?}"),
    }
}

/// The text block of the tool answer `uri` mirrors.
async fn tool_text(client: &Client, uri: &str) -> String {
    let resource = pilotage_protocol::resources::ResourceRef::parse(uri).expect("a surface URI");
    use pilotage_protocol::resources::ResourceRef as R;
    let (tool, args) = match resource {
        R::Manifest => ("pilotage_manifest", json!({})),
        R::GuideIndex { language } => ("pilotage_get_guide", json!({"language": language})),
        R::Guide { language, id } => ("pilotage_get_guide", json!({"language": language, "id": id})),
        R::Catalog { language, cursor } => {
            let mut args = json!({"language": language, "verb": "list"});
            if let Some(cursor) = cursor {
                args["cursor"] = json!(cursor);
            }
            ("pilotage_catalog", args)
        }
    };
    let Value::Object(arguments) = args else { unreachable!() };
    let result = client.call_tool(CallToolRequestParams::new(tool).with_arguments(arguments)).await.unwrap();
    result.content[0].as_text().expect("a text block").text.clone()
}

/// Every listed resource reads as its tool's text; returns the URIs.
async fn every_resource_equals_its_tool(client: &Client) -> Vec<String> {
    let listed = client.list_all_resources().await.unwrap();
    let mut uris = Vec::new();
    for resource in listed {
        if resource.uri.starts_with("ui://") || resource.uri.starts_with("skill://") {
            // An MCP Apps view and a skill's SKILL.md mirror no tool
            // (mcp_apps.rs and skills.rs read them).
            continue;
        }
        let text = read(client, &resource.uri).await.unwrap();
        assert_eq!(text, tool_text(client, &resource.uri).await, "{}", resource.uri);
        uris.push(resource.uri.clone());
    }
    uris
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_mirror_the_tools_byte_for_byte() {
    let server = server(settings(Backend::Sqlite).await).await;
    let client = client(&server.mcp_url()).await;
    let capabilities = client.peer_info().unwrap().capabilities.resources.clone().expect("resources declared");
    assert_eq!((capabilities.subscribe, capabilities.list_changed), (Some(true), Some(true)));
    let uris = every_resource_equals_its_tool(&client).await;
    for expected in ["pilotage://manifest", "pilotage://guides/workflow%2Fv1", "pilotage://catalog/workflow%2Fv1"] {
        assert!(uris.iter().any(|uri| uri == expected), "{expected} missing from {uris:?}");
    }
    assert!(uris.iter().any(|uri| uri.starts_with("pilotage://guides/workflow%2Fv1/")), "a guide is listed: {uris:?}");
    // The manifest names the index resources (Part III §3, reference fields).
    let manifest: Value = serde_json::from_str(&read(&client, "pilotage://manifest").await.unwrap()).unwrap();
    let workflow = manifest["languages"].as_array().unwrap().iter().find(|l| l["name"] == "workflow/v1").unwrap();
    assert_eq!(workflow["guides_resource"], "pilotage://guides/workflow%2Fv1");
    assert_eq!(workflow["catalog_resource"], "pilotage://catalog/workflow%2Fv1");
    crate::support::assert_schema("Manifest", &manifest);
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates.len(), 3, "{templates:?}");

    // Bad URIs: not our form, an unknown Language, an unknown guide.
    for bad in ["pilotage://nothing", "pilotage://guides/nosuch%2Fv9", "pilotage://guides/workflow%2Fv1/nosuch"] {
        match read(&client, bad).await {
            Err(rmcp::ServiceError::McpError(error)) => {
                assert_eq!(error.code.0, -32002, "{bad}: {error:?}");
                // SEP-2164: the error names the URI it is about.
                assert_eq!(error.data.as_ref().map(|data| data["uri"].clone()), Some(json!(bad)), "{error:?}");
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
    let _ = client.cancel().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_are_scoped_like_the_tools() {
    let world = crate::tenancy::two_tenants().await;
    let url = world.server.mcp_url();
    let ann = client_as(&url, Some(&world.token("acme", "ann", "pilotage:mcp"))).await;
    let bob = client_as(&url, Some(&world.token("acme", "bob", "pilotage:mcp finance"))).await;
    let gus = client_as(&url, Some(&world.token("globex", "gus", "pilotage:mcp"))).await;
    let catalog = "pilotage://catalog/workflow%2Fv1";
    let mut seen = Vec::new();
    for caller in [&ann, &bob, &gus] {
        every_resource_equals_its_tool(caller).await;
        seen.push(read(caller, catalog).await.unwrap());
    }
    assert!(!seen[0].contains("cap_secret") && seen[1].contains("cap_secret"), "finance sees its entry");
    assert!(seen[2].contains("globex's profile service") && !seen[2].contains("acme"), "{}", seen[2]);
    for caller in [ann, bob, gus] {
        let _ = caller.cancel().await;
    }
}

/// A client of the 2025-11-25 revision (session-bound subscriptions) that
/// records the notifications it receives.
#[derive(Clone, Default)]
pub(crate) struct Recorder(pub(crate) std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl rmcp::ClientHandler for Recorder {
    /// `resources/subscribe` is the session-bound form, up to 2025-11-25.
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default().with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25)
    }
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(format!("updated {}", params.uri));
    }
    async fn on_resource_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.0.lock().unwrap().push("list_changed".to_owned());
    }
}

impl Recorder {
    /// Waits (at most 5 s) until `notification` has been heard `times`;
    /// returns everything heard.
    pub(crate) async fn heard(&self, notification: &str, times: usize) -> Vec<String> {
        for _ in 0..100 {
            let heard = self.0.lock().unwrap().clone();
            if heard.iter().filter(|n| *n == notification).count() >= times {
                return heard;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("{notification} not heard {times} times: {:?}", self.0.lock().unwrap())
    }
}

/// A server with an operator token and a tenant `acme` of no Language, and
/// a [`Recorder`] connected as `ann` of `acme`.
pub(crate) async fn acme_recorded() -> (pilotage_server::start::Server, RunningService<RoleClient, Recorder>, Recorder)
{
    let mut configured = settings(Backend::Sqlite).await;
    configured.admin_token = Some(crate::tenancy::ADMIN_TOKEN.to_owned());
    let data_dir = configured.data_dir.clone();
    let server = server(configured).await;
    let (status, _) =
        crate::tenancy::admin(&server, reqwest::Method::POST, "/tenants", Some(json!({"id": "acme"}))).await;
    assert_eq!(status, 201);
    let audience = format!("http://{}/mcp", server.addr);
    let dev = pilotage_server::auth::dev::DevTokens::load(&data_dir, audience).unwrap();
    let token = dev.mint("acme", "ann", &["pilotage:mcp".to_owned()], 600).unwrap();
    let recorder = Recorder::default();
    let mut config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(server.mcp_url());
    config = config.auth_header(token);
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
    use rmcp::ServiceExt;
    let client = recorder.clone().serve(transport).await.unwrap();
    (server, client, recorder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe is the session-bound form this test drives
async fn a_new_language_is_announced_to_resource_subscribers() {
    let (server, client, recorder) = acme_recorded().await;
    let index = "pilotage://guides/workflow%2Fv1";
    // Before the Language arrives its index is not found; subscribing is
    // still allowed (the URI is of this surface), a foreign URI is not.
    assert!(client.read_resource(ReadResourceRequestParams::new(index)).await.is_err());
    client.subscribe(SubscribeRequestParams::new(index)).await.unwrap();
    assert!(client.subscribe(SubscribeRequestParams::new("https://elsewhere/x")).await.is_err());
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 1, "only the manifest: {resources:?}");
    crate::tenancy::upload_language(&server, "acme", pilotage_bundled::WORKFLOW).await;
    let mut heard = Vec::new();
    for _ in 0..100 {
        heard = recorder.0.lock().unwrap().clone();
        if heard.iter().any(|n| n == "list_changed") && heard.iter().any(|n| n == &format!("updated {index}")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(heard.iter().any(|n| n == "list_changed"), "{heard:?}");
    assert!(heard.contains(&format!("updated {index}")), "{heard:?}");
    assert!(client.read_resource(ReadResourceRequestParams::new(index)).await.is_ok());
    assert!(client.list_all_resources().await.unwrap().len() > 1);

    // A catalog change (here through the admin API) updates a subscribed
    // catalog resource, and only that one: the guide index hears nothing.
    let catalog = "pilotage://catalog/workflow%2Fv1";
    client.subscribe(SubscribeRequestParams::new(catalog)).await.unwrap();
    let before = read(&client, catalog).await.unwrap();
    let index_updates = |heard: &[String]| heard.iter().filter(|n| **n == format!("updated {index}")).count();
    let index_before = index_updates(&recorder.0.lock().unwrap());
    let entry = json!({"id": "cap_new", "kind": "capability", "name": "cap_new", "description": "new",
        "input_schema": {"type": "object"}, "risk": "safe",
        "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}});
    let (status, body) =
        crate::tenancy::admin(&server, reqwest::Method::PUT, "/tenants/acme/catalog/entries/cap_new", Some(entry))
            .await;
    assert_eq!(status, 201, "{body}");
    let mut updated = false;
    for _ in 0..100 {
        if recorder.0.lock().unwrap().contains(&format!("updated {catalog}")) {
            updated = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(updated, "{:?}", recorder.0.lock().unwrap());
    let after = read(&client, catalog).await.unwrap();
    assert!(!before.contains("cap_new") && after.contains("cap_new"));
    assert_eq!(index_updates(&recorder.0.lock().unwrap()), index_before, "the guide index did not change");

    // A change to an entry the subscriber cannot see changes nothing it
    // reads (its catalog_version included), so it is not announced to it
    // (issue 46 item 11); the next change it can see is.
    let catalog_updates = |heard: &[String]| heard.iter().filter(|n| **n == format!("updated {catalog}")).count();
    let hidden = json!({"id": "cap_hidden", "kind": "capability", "name": "cap_hidden", "description": "finance only",
        "input_schema": {"type": "object"}, "risk": "safe", "visibility": ["finance"],
        "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}});
    let (status, body) =
        crate::tenancy::admin(&server, reqwest::Method::PUT, "/tenants/acme/catalog/entries/cap_hidden", Some(hidden))
            .await;
    assert_eq!(status, 201, "{body}");
    // Three turns of the one-second catalog watch.
    tokio::time::sleep(std::time::Duration::from_millis(3_000)).await;
    let heard = recorder.0.lock().unwrap().clone();
    assert_eq!(catalog_updates(&heard), 1, "{heard:?}");
    assert_eq!(read(&client, catalog).await.unwrap(), after, "the subscriber's catalog did not change");
    let (status, _) =
        crate::tenancy::admin(&server, reqwest::Method::DELETE, "/tenants/acme/catalog/entries/cap_new", None).await;
    assert!(status < 300, "{status}");
    for _ in 0..100 {
        if catalog_updates(&recorder.0.lock().unwrap()) >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let heard = recorder.0.lock().unwrap().clone();
    assert_eq!(catalog_updates(&heard), 2, "{heard:?}");

    // Resource requests count against the tenant's requests_per_second as
    // tool calls do; past it, -32000 carries the bounds_exceeded request error.
    let quotas = json!({"quotas": {"max_concurrent_runs": 16, "requests_per_second": 1, "max_stored_run_bytes": 1_000_000,
                                   "max_deployments": 10, "max_firings_per_minute": 10}});
    let (status, body) = crate::tenancy::admin(&server, reqwest::Method::PATCH, "/tenants/acme", Some(quotas)).await;
    assert_eq!(status, 200, "{body}");
    let mut refused = None;
    for _ in 0..5 {
        if let Err(rmcp::ServiceError::McpError(error)) = read(&client, index).await {
            refused = Some(error);
            break;
        }
    }
    let refused = refused.expect("a read past the quota is refused");
    assert_eq!(refused.code.0, -32000, "{refused:?}");
    assert_eq!(refused.data.as_ref().unwrap()["error"]["kind"], "bounds_exceeded", "{refused:?}");
    let _ = client.cancel().await;
    server.stop().await;
}

/// The official TypeScript and Python SDK clients, each subscribed to a
/// catalog resource on replica B, hear `notifications/resources/updated`
/// after the catalog changed through replica A's admin API (the change
/// crosses through the PostgreSQL store's change log), read the new content
/// equal to the tool's, and hear nothing once unsubscribed
/// (`tests/interop/{ts,py}/updated.*`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_clients_hear_of_a_catalog_change_made_through_another_replica() {
    use crate::fleet::{ADMIN_TOKEN, replica_process};
    pilotage_client::install_crypto_provider();
    let database_url = crate::endpoint::postgres_schema().await;
    let data_dir = std::env::temp_dir().join(crate::endpoint::unique("pilotage-resources-fleet"));
    // One after the other: the first creates the shared secrets.
    let a = replica_process(&data_dir, &database_url, &[]).await;
    let b = replica_process(&data_dir, &database_url, &[]).await;
    let args = vec![format!("http://{}/mcp", b.addr), format!("http://{}", a.addr), ADMIN_TOKEN.to_owned()];
    let node = crate::interop::typescript_sdk().to_owned();
    crate::interop::sdk_passes_with(node, "tests/interop/ts/updated.mjs", args.clone(), 10).await;
    let python = crate::interop::python_sdk();
    crate::interop::sdk_passes_with(python, "tests/interop/py/updated.py", args, 10).await;
    drop((a, b));
}

/// Subscriptions are bounded (docs/architecture.md, "Resources"): a session
/// follows at most 64 resources (subscribing again to one it follows is
/// fine; after an unsubscribe there is room again), a URI is at most
/// 1,024 bytes, and each subscribe counts against the tenant's
/// `requests_per_second` as a read does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe is the session-bound form this test drives
async fn subscriptions_are_bounded_per_session_by_uri_length_and_by_the_request_quota() {
    let mut configured = settings(Backend::Sqlite).await;
    configured.admin_token = Some(crate::tenancy::ADMIN_TOKEN.into());
    let server = server(configured).await;
    let client = client(&server.mcp_url()).await;
    let guide = |index: usize| format!("pilotage://guides/workflow%2Fv1/g{index}");
    let refused_code = |result: Result<(), rmcp::ServiceError>| match result {
        Err(rmcp::ServiceError::McpError(error)) => (error.code.0, error.message.to_string()),
        other => panic!("refused expected: {other:?}"),
    };
    for index in 0..64 {
        client.subscribe(SubscribeRequestParams::new(guide(index))).await.unwrap();
    }
    let (code, message) = refused_code(client.subscribe(SubscribeRequestParams::new(guide(64))).await);
    assert_eq!(code, -32000, "{message}");
    assert!(message.contains("at most 64"), "{message}");
    client.subscribe(SubscribeRequestParams::new(guide(3))).await.unwrap();
    client.unsubscribe(rmcp::model::UnsubscribeRequestParams::new(guide(3))).await.unwrap();
    client.subscribe(SubscribeRequestParams::new(guide(64))).await.unwrap();
    let long = format!("pilotage://guides/workflow%2Fv1/{}", "x".repeat(2048));
    let (code, message) = refused_code(client.subscribe(SubscribeRequestParams::new(long)).await);
    assert_eq!(code, -32602, "{message}");
    assert!(message.contains("1024 bytes"), "{message}");
    // Another session has room of its own.
    let other = crate::endpoint::client(&server.mcp_url()).await;
    other.subscribe(SubscribeRequestParams::new(guide(100))).await.unwrap();
    // Subscribes spend the tenant's requests per second.
    let (status, body) = crate::tenancy::admin(
        &server,
        reqwest::Method::PATCH,
        "/tenants/demo",
        Some(json!({"quotas": {"requests_per_second": 2}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let mut refused = 0;
    for index in 0..20 {
        if let Err(rmcp::ServiceError::McpError(error)) =
            other.subscribe(SubscribeRequestParams::new(guide(200 + index))).await
        {
            assert!(error.message.contains("requests_per_second"), "{error:?}");
            refused += 1;
        }
    }
    assert!(refused > 0, "20 subscribes at once went past a quota of 2 per second unrefused");
    let _ = client.cancel().await;
    let _ = other.cancel().await;
    server.stop().await;
}
