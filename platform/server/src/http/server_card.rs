//! The MCP server card and the AI Catalog that points at it, for
//! registries and hosts that learn a server before connecting (MCP
//! server-card extension v1):
//! - `GET /mcp/server-card` (the MCP endpoint's URL + `/server-card`, the
//!   location the extension reserves): `application/mcp-server-card+json`
//!   with the server's identity, version, and its remotes (the shared
//!   endpoint and the per-tenant one as a URL template), each with the
//!   protocol versions this server negotiates and, under JWT
//!   authentication, the `Authorization` header it requires;
//! - `GET /.well-known/ai-catalog.json`: `application/ai-catalog+json`,
//!   one entry naming the card's URL.
//!
//! Both are public, read-only and the same for every caller: no
//! authentication, any origin (CORS `*`, `OPTIONS` preflight answered), a
//! strong `ETag` answered with 304 on `If-None-Match`, and one hour of
//! caching. The documents are built once from the settings at start-up, so
//! they never contradict what `initialize` and `server/discover` say.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::auth::AuthMode;
use crate::settings::Settings;

/// The card's media type.
const CARD_TYPE: &str = "application/mcp-server-card+json";
/// The catalog's media type.
const CATALOG_TYPE: &str = "application/ai-catalog+json";
/// The card's schema, which its `$schema` must name.
const CARD_SCHEMA: &str = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json";
/// What the card says when the operator does not.
const DEFAULT_DESCRIPTION: &str = "Write programs against live systems, check them before they run, prove results";

/// One document, its bytes and strong validator.
#[derive(Clone)]
struct Document {
    body: axum::body::Bytes,
    etag: HeaderValue,
    media_type: &'static str,
}

impl Document {
    fn new(value: &Value, media_type: &'static str) -> Document {
        let body = serde_json::to_vec_pretty(value).unwrap_or_default();
        let digest = Sha256::digest(&body);
        let etag = HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..16])))
            .unwrap_or_else(|_| HeaderValue::from_static("\"0\""));
        Document { body: body.into(), etag, media_type }
    }
}

/// The card for `settings`, as JSON.
pub(crate) fn card(settings: &Settings) -> Value {
    let public = settings.public_url();
    let versions: Vec<String> = rmcp::model::ProtocolVersion::KNOWN_VERSIONS.iter().map(ToString::to_string).collect();
    let headers = match settings.auth.mode {
        AuthMode::Jwt => json!([{"name": "Authorization", "isRequired": true, "isSecret": true,
            "description": "Bearer token from an issuer this server trusts (see /.well-known/oauth-protected-resource)"}]),
        AuthMode::Dev => json!([]),
    };
    let remote = |url: String| {
        let mut remote = json!({"type": "streamable-http", "url": url, "supportedProtocolVersions": versions});
        if headers.as_array().is_some_and(|h| !h.is_empty()) {
            remote["headers"] = headers.clone();
        }
        remote
    };
    let mut tenant = remote(format!("{public}/t/{{tenant}}/mcp"));
    tenant["variables"] = json!({"tenant": {"description": "Your tenant's id", "isRequired": true}});
    let identity = &settings.server_card;
    let mut card = json!({
        "$schema": CARD_SCHEMA,
        "name": identity.name.clone().unwrap_or_else(|| default_name(&public)),
        "version": env!("CARGO_PKG_VERSION"),
        "title": identity.title.as_deref().unwrap_or("Pilotage Platform"),
        "description": identity.description.as_deref().unwrap_or(DEFAULT_DESCRIPTION),
        "remotes": [remote(format!("{public}/mcp")), tenant],
        "_meta": {pilotage_protocol::EXTENSION_ID: {"version": pilotage_protocol::PILOTAGE_VERSION,
                                                   "manifest_tool": pilotage_protocol::MANIFEST_TOOL}},
    });
    if let Some(url) = &identity.website_url {
        card["websiteUrl"] = json!(url);
    }
    if !identity.icons.is_empty() {
        card["icons"] = identity
            .icons
            .iter()
            .map(|icon| {
                let mut value = json!({"src": icon.src});
                if let Some(mime) = &icon.mime_type {
                    value["mimeType"] = json!(mime);
                }
                if !icon.sizes.is_empty() {
                    value["sizes"] = json!(icon.sizes);
                }
                value
            })
            .collect();
    }
    card
}

/// `example.com` → `com.example/pilotage`; an address or a name that is
/// not a DNS name gives `localhost/pilotage`.
fn default_name(public: &str) -> String {
    let host = reqwest::Url::parse(public).ok().and_then(|url| url.domain().map(str::to_owned));
    match host {
        Some(host) if host.contains('.') => {
            let reversed: Vec<&str> = host.split('.').rev().collect();
            format!("{}/pilotage", reversed.join("."))
        }
        Some(host) if host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') => format!("{host}/pilotage"),
        _ => "localhost/pilotage".to_owned(),
    }
}

/// The AI Catalog entry's identifier for the card `name`
/// (`com.example/pilotage` → `urn:air:example.com:mcp:pilotage`).
fn identifier(name: &str) -> String {
    let (namespace, server) = name.split_once('/').unwrap_or((name, "pilotage"));
    let publisher: Vec<&str> = namespace.split('.').rev().collect();
    format!("urn:air:{}:mcp:{server}", publisher.join("."))
}

async fn serve(State(document): State<Document>, request: HeaderMap) -> Response {
    let matched = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.trim_start_matches("W/") == document.etag.to_str().unwrap_or_default()
        });
    let mut response = if matched {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = Response::new(Body::from(document.body.clone()));
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(document.media_type));
        response
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, document.etag.clone());
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    cors(headers);
    response
}

async fn preflight() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    cors(response.headers_mut());
    response
}

/// Public metadata: any origin may read it (the extension asks for these).
fn cors(headers: &mut HeaderMap) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static("Content-Type, If-None-Match"));
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("ETag"));
}

/// The two routes, their documents built now from `settings`.
pub(crate) fn router(settings: &Settings) -> Router {
    let card = card(settings);
    let name = card["name"].as_str().unwrap_or("localhost/pilotage").to_owned();
    let catalog = json!({"specVersion": "1.0", "entries": [{
        "identifier": identifier(&name),
        "type": CARD_TYPE,
        "url": format!("{}/mcp/server-card", settings.public_url()),
    }]});
    let card_route = Router::new()
        .route("/mcp/server-card", get(serve).options(preflight))
        .with_state(Document::new(&card, CARD_TYPE));
    let catalog_route = Router::new()
        .route("/.well-known/ai-catalog.json", get(serve).options(preflight))
        .with_state(Document::new(&catalog, CATALOG_TYPE));
    card_route.merge(catalog_route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_public_host() {
        assert_eq!(default_name("https://pilotage.example.com"), "com.example.pilotage/pilotage");
        assert_eq!(default_name("http://127.0.0.1:8480"), "localhost/pilotage");
        assert_eq!(default_name("http://localhost:8480"), "localhost/pilotage");
        assert_eq!(identifier("com.example.pilotage/pilotage"), "urn:air:pilotage.example.com:mcp:pilotage");
    }

    #[test]
    fn a_card_under_jwt_names_the_header_it_requires() {
        let mut settings = Settings::default();
        assert!(card(&settings)["remotes"][0].get("headers").is_none(), "dev auth asks for no header");
        settings.auth.mode = AuthMode::Jwt;
        settings.public_url = Some("https://pilotage.example.com".into());
        let card = card(&settings);
        assert_eq!(card["remotes"][0]["url"], "https://pilotage.example.com/mcp");
        assert_eq!(card["remotes"][1]["url"], "https://pilotage.example.com/t/{tenant}/mcp");
        for remote in card["remotes"].as_array().unwrap() {
            assert_eq!(remote["headers"][0]["name"], "Authorization");
            assert_eq!(remote["headers"][0]["isSecret"], true);
        }
        assert!(card["description"].as_str().unwrap().chars().count() <= 100);
    }
}
