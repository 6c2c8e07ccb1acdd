//! Starting the real server on a loopback port and speaking MCP to it over
//! HTTP (Part IV §4.3): an rmcp client for the protocol, raw HTTP for the
//! carrier-level cases.

use std::sync::atomic::{AtomicU32, Ordering};

use pilotage_platform::config::Settings;
use pilotage_platform::protocol::EXTENSION_ID;
use pilotage_platform::server::{Server, start};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ExtensionCapabilities, Implementation,
    JsonObject,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// Which database a test server uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A fresh SQLite file.
    Sqlite,
    /// A fresh schema in the machine's PostgreSQL.
    Postgres,
}

/// The PostgreSQL server the tests use.
pub fn postgres_url() -> String {
    std::env::var("PILOTAGE_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A unique name for this process and call.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst))
}

/// Drops, once per process, the schemas that earlier test processes left
/// in the shared database: names made by [`unique`] end in `_<pid>_<n>`,
/// and a schema whose process is gone is nobody's.
async fn sweep_stale_schemas(connection: &mut sqlx::PgConnection) {
    static SWEPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SWEPT.swap(true, Ordering::SeqCst) || !std::path::Path::new("/proc/self").exists() {
        return;
    }
    let names: Vec<String> =
        sqlx::query_scalar("SELECT nspname::text FROM pg_namespace WHERE nspname ~ '^pilotage_[a-z_]+_[0-9]+_[0-9]+$'")
            .fetch_all(&mut *connection)
            .await
            .unwrap_or_default();
    for name in names {
        let pid = name.rsplit('_').nth(1).unwrap_or_default();
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let drop = format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE");
            let _ = sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&mut *connection).await;
        }
    }
}

/// Creates a fresh PostgreSQL schema and returns a URL whose connections
/// use it.
pub async fn postgres_schema() -> String {
    use sqlx::Connection;
    let schema = unique("pilotage_test");
    let mut connection =
        sqlx::PgConnection::connect(&postgres_url()).await.expect("PostgreSQL at 127.0.0.1:5432 (see .ci/run)");
    sweep_stale_schemas(&mut connection).await;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}"))).execute(&mut connection).await.unwrap();
    let separator = if postgres_url().contains('?') { '&' } else { '?' };
    format!("{}{separator}options=-c%20search_path%3D{schema}", postgres_url())
}

/// Settings for a test server: loopback on a free port, a fresh data
/// folder, the demo tenant without its SQL part (tests that need it set
/// `demo_postgres`).
pub async fn settings(backend: Backend) -> Settings {
    let data_dir = std::env::temp_dir().join(unique("pilotage-test"));
    let database_url = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(postgres_schema().await),
    };
    let mut settings =
        Settings { listen: "127.0.0.1:0".parse().unwrap(), data_dir, database_url, ..Settings::default() };
    settings.bounds = crate::support::test_bounds();
    settings.request_timeout_ms = settings.bounds.execution.wall_time_ms + 10_000;
    settings.demo_postgres = "off".to_owned();
    settings
}

/// Starts a server.
pub async fn server(settings: Settings) -> Server {
    start(settings).await.expect("the server starts")
}

/// An MCP client connected to `url`, declaring the Pilotage extension.
pub async fn client(url: &str) -> RunningService<RoleClient, ClientConfig> {
    pilotage_platform::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
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

/// Checks the Part III §6 envelope: `structuredContent` present and one
/// text block with the same JSON.
pub fn envelope_agrees(result: &CallToolResult) -> Value {
    let structured = result.structured_content.clone().expect("structuredContent is always present");
    assert_eq!(result.content.len(), 1, "one content block");
    let text = result.content[0].as_text().expect("a text block").text.clone();
    let parsed: Value = serde_json::from_str(&text).expect("the text block is JSON");
    assert_eq!(parsed, structured, "content and structuredContent differ");
    structured
}

/// Posts a raw body to `/mcp` with the given headers.
pub async fn raw_post(url: &str, body: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    pilotage_platform::install_crypto_provider();
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
