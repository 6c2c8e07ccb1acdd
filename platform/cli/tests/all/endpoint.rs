//! Starting the real server on a loopback port and speaking MCP to it over
//! HTTP (Part IV §4.3): an rmcp client for the protocol, raw HTTP for the
//! carrier-level cases.

use pilotage_protocol::EXTENSION_ID;
pub use pilotage_test_support::{Backend, postgres_schema, postgres_url, server, settings, unique};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ExtensionCapabilities, Implementation,
    JsonObject,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// An MCP client connected to `url`, declaring the Pilotage extension.
pub async fn client(url: &str) -> RunningService<RoleClient, ClientConfig> {
    client_as(url, None).await
}

/// [`client`] presenting `token` as its bearer token.
pub async fn client_as(url: &str, token: Option<&str>) -> RunningService<RoleClient, ClientConfig> {
    pilotage_client::install_crypto_provider();
    let mut config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let mut capabilities = ClientCapabilities::default();
    let mut extensions = ExtensionCapabilities::new();
    extensions.insert(EXTENSION_ID.to_owned(), JsonObject::new());
    capabilities.extensions = Some(extensions);
    ClientConfig::new(capabilities, Implementation::new("pilotage-tests", "1.0"))
        .serve(transport)
        .await
        .expect("the client connects")
}

/// Calls a tool; JSON-RPC errors are returned as `Err`.
pub async fn call(
    client: &RunningService<RoleClient, ClientConfig>,
    name: &str,
    args: Value,
) -> Result<CallToolResult, rmcp::ServiceError> {
    let arguments = match args {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    client.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)).await
}

/// Calls a tool that must answer with `isError: false`, returning its
/// `structuredContent` after checking the text block carries the same JSON.
pub async fn ok(client: &RunningService<RoleClient, ClientConfig>, name: &str, args: Value) -> Value {
    let result = call(client, name, args).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(result.is_error, Some(false), "{name}: {:?}", result.structured_content);
    envelope_agrees(&result)
}

/// Calls a tool that must answer with a request error, returning its
/// `structuredContent`.
pub async fn request_error(client: &RunningService<RoleClient, ClientConfig>, name: &str, args: Value) -> Value {
    let result = call(client, name, args).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(result.is_error, Some(true), "{name}: expected a request error, got {:?}", result.structured_content);
    let content = envelope_agrees(&result);
    crate::support::assert_schema("RequestError", &content);
    content
}

/// Above this many bytes of JSON, a Run's text block is a summary
/// (`mcp::content` in the server).
pub const CONTENT_JSON_MAX_BYTES: usize = 24 * 1024;

/// Checks the Part III §6 envelope: `structuredContent` present and one
/// text block, with the same JSON, or (for a larger result) a short
/// human-readable summary.
pub fn envelope_agrees(result: &CallToolResult) -> Value {
    let structured = result.structured_content.clone().expect("structuredContent is always present");
    assert_eq!(result.content.len(), 1, "one content block");
    let text = result.content[0].as_text().expect("a text block").text.clone();
    if structured.to_string().len() > CONTENT_JSON_MAX_BYTES {
        assert!(text.len() < 4096, "a large result's text is a short summary, not {} bytes", text.len());
        assert!(serde_json::from_str::<Value>(&text).is_err(), "a large result's text is not its JSON");
        return structured;
    }
    let parsed: Value = serde_json::from_str(&text).expect("the text block is JSON");
    assert_eq!(parsed, structured, "content and structuredContent differ");
    structured
}

/// Posts a raw body to `/mcp` with the given headers.
pub async fn raw_post(url: &str, body: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    pilotage_client::install_crypto_provider();
    let client = reqwest::Client::new();
    let mut request = client.post(url).body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("the server answers")
}

/// The spec's Part III §9.4 program.
pub fn spec_program() -> Value {
    json!({
        "steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profile", "with": {"user_id": "$.input.userId"}}],
        "output": {"name": "$.steps.profile.output.name"}
    })
}
