//! The MCP server card and its AI Catalog through the real endpoint
//! (issue 30 item 3): what a registry reads before connecting agrees with
//! what `initialize` then says; public to any origin (unlike `/mcp`);
//! revalidated with its ETag; and a card setting the card would not accept
//! stops the server's start.

use serde_json::Value;

use crate::endpoint::{Backend, client, server, settings};

const CARD: &str = "application/mcp-server-card+json";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_card_agrees_with_initialize_and_revalidates() {
    let mut configured = settings(Backend::Sqlite).await;
    configured.server_card.description = Some("Programs checked before they run, proven after".into());
    let server = server(configured.clone()).await;
    let base = format!("http://{}", server.addr);
    let http = reqwest::Client::new();
    let card_url = format!("{base}/mcp/server-card");
    let response = http.get(&card_url).header("accept", CARD).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], CARD);
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert!(headers["cache-control"].to_str().unwrap().contains("max-age"));
    let etag = headers["etag"].to_str().unwrap().to_owned();
    let card: Value = response.json().await.unwrap();
    assert_eq!(card["$schema"], "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json");
    assert_eq!(card["description"], "Programs checked before they run, proven after");
    let name = card["name"].as_str().unwrap();
    assert_eq!(name.matches('/').count(), 1, "{name}");

    // What the card says, initialize says too.
    let mcp = client(&server.mcp_url()).await;
    let info = mcp.peer_info().unwrap().clone();
    let server_info = info.server_info.clone().expect("serverInfo");
    assert_eq!(card["version"], server_info.version.as_str());
    assert_eq!(card["title"].as_str(), server_info.title.as_deref());
    let remotes = card["remotes"].as_array().unwrap();
    assert_eq!(remotes[0]["type"], "streamable-http");
    assert_eq!(remotes[0]["url"], server.mcp_url());
    let negotiated = info.protocol_version.to_string();
    assert!(remotes[0]["supportedProtocolVersions"].as_array().unwrap().iter().any(|v| *v == negotiated.as_str()));
    assert_eq!(remotes[1]["url"], format!("{base}/t/{{tenant}}/mcp"));
    assert!(remotes[1]["variables"]["tenant"]["isRequired"].as_bool().unwrap());
    let _ = mcp.cancel().await;

    // Revalidation: the same ETag (strong or weak) is 304 with no body; another is the card.
    for tag in [etag.clone(), format!("W/{etag}"), format!("\"other\", {etag}")] {
        let again = http.get(&card_url).header("if-none-match", &tag).send().await.unwrap();
        assert_eq!(again.status(), 304, "{tag}");
        assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
        assert!(again.bytes().await.unwrap().is_empty());
    }
    let changed = http.get(&card_url).header("if-none-match", "\"other\"").send().await.unwrap();
    assert_eq!(changed.status(), 200);

    // Any origin reads the card and its preflight passes; the same
    // origin is refused on /mcp itself.
    let foreign = "https://elsewhere.example";
    let preflight = http
        .request(reqwest::Method::OPTIONS, &card_url)
        .header("origin", foreign)
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "if-none-match")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    assert_eq!(preflight.headers()["access-control-allow-methods"], "GET");
    assert!(preflight.headers()["access-control-allow-headers"].to_str().unwrap().contains("If-None-Match"));
    let read = http.get(&card_url).header("origin", foreign).send().await.unwrap();
    assert_eq!(read.status(), 200);
    let refused = http
        .post(server.mcp_url())
        .header("origin", foreign)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);

    // The AI Catalog points at the card.
    let catalog = http.get(format!("{base}/.well-known/ai-catalog.json")).send().await.unwrap();
    assert_eq!(catalog.headers()["content-type"], "application/ai-catalog+json");
    let catalog: Value = catalog.json().await.unwrap();
    let entry = &catalog["entries"][0];
    assert_eq!((entry["type"].as_str(), entry["url"].as_str()), (Some(CARD), Some(card_url.as_str())));
    assert!(entry["identifier"].as_str().unwrap().starts_with("urn:air:"), "{entry}");
    server.stop().await;

    // A card setting the card cannot carry stops the start.
    for edit in [
        |s: &mut pilotage_server::settings::Settings| s.server_card.name = Some("no slash".into()),
        |s: &mut pilotage_server::settings::Settings| s.server_card.description = Some("x".repeat(101)),
        |s: &mut pilotage_server::settings::Settings| s.server_card.website_url = Some("ftp://x".into()),
    ] {
        let mut bad = configured.clone();
        edit(&mut bad);
        assert!(pilotage_server::start::start(bad, &[]).await.is_err());
    }
}
