//! The optional resource surface (Part III §8.3, §3.2): the manifest, each
//! of the caller's Languages' guide index and guides, and its catalog, as
//! MCP resources. A resource's content is the corresponding tool response
//! itself: the same operation answers, for the same caller, and the text is
//! the same JSON the tool's text block carries (conformance item 12), so
//! visibility is exactly the tools'. The tools stay the required path.
//! The MCP Apps views (`ui://`, `apps`) are listed and read here too; they
//! mirror no tool and are the same for every caller.

use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};
use serde_json::{Value, json};

use super::apps;
use crate::operations::{self, Context, OpError};
use pilotage_protocol::resources::ResourceRef;

/// The contents' media type: every resource is a tool response's JSON.
const JSON: &str = "application/json";

/// The answer of the tool that `resource` mirrors, for `context`'s caller.
fn answer(context: &Context, resource: &ResourceRef) -> Result<Value, OpError> {
    match resource {
        ResourceRef::Manifest => Ok(operations::discover::manifest(context).value.clone()),
        ResourceRef::GuideIndex { language } => operations::learn::get_guide(context, &json!({"language": language})),
        ResourceRef::Guide { language, id } => {
            operations::learn::get_guide(context, &json!({"language": language, "id": id}))
        }
        ResourceRef::Catalog { language, cursor } => {
            let mut args = json!({"language": language, "verb": "list"});
            if let Some(cursor) = cursor {
                args["cursor"] = json!(cursor);
            }
            operations::lookup::catalog(context, &args)
        }
    }
}

/// [`answer`] as JSON text, as `CallToolResult::structured` writes the
/// tool's text block (the manifest's kept ready, like the tool's).
fn answer_text(context: &Context, resource: &ResourceRef) -> Result<String, OpError> {
    match resource {
        ResourceRef::Manifest => Ok(operations::discover::manifest(context).text.clone()),
        other => answer(context, other).map(|value| value.to_string()),
    }
}

fn resource(uri: String, name: String, description: String) -> Resource {
    let mut raw = Resource::new(uri, name);
    raw.description = Some(description);
    raw.mime_type = Some(JSON.to_owned());
    raw
}

/// Counts a resource request against the tenant's `requests_per_second`
/// as a tool call is counted.
///
/// # Errors
/// -32000 with the quota's message, and as `data` the request error a tool
/// call would have answered (`bounds_exceeded`): a resource request has no
/// `isError` result to carry it.
pub(crate) fn admit(context: &Context) -> Result<(), McpError> {
    context.tenant.admit_request().map_err(|exceeded| bounds_exceeded(exceeded.to_string()))
}

/// A resource request refused by a bound: -32000 with the request error
/// `bounds_exceeded` saying which as `data`.
pub(crate) fn bounds_exceeded(message: String) -> McpError {
    let error = pilotage_protocol::request_error::RequestError::new(
        pilotage_protocol::request_error::RequestErrorKind::BoundsExceeded,
        message.clone(),
    );
    McpError::new(rmcp::model::ErrorCode(-32000), message, serde_json::to_value(&error).ok())
}

/// Every resource the caller can read: the manifest, then per Language
/// its guide index, each guide, and its catalog's first page, then the
/// two MCP Apps views (when the tenant has a Language, whose tools declare
/// them).
pub(crate) fn list(context: &Context) -> Vec<Resource> {
    let mut resources = vec![resource(
        ResourceRef::Manifest.uri(),
        "Pilotage manifest".to_owned(),
        "The Languages accepted here and their tools (the pilotage_manifest answer)".to_owned(),
    )];
    for slot in context.tenant.languages() {
        let language = slot.entry.name.clone();
        let index = ResourceRef::GuideIndex { language: language.clone() };
        resources.push(resource(
            index.uri(),
            format!("{language} guides"),
            format!("The guide index of {language} (pilotage_get_guide with its language)"),
        ));
        if let Ok(answer) = answer(context, &index) {
            for guide in answer["guides"].as_array().into_iter().flatten() {
                let Some(id) = guide["id"].as_str() else { continue };
                let title = guide["title"].as_str().unwrap_or(id);
                resources.push(resource(
                    ResourceRef::Guide { language: language.clone(), id: id.to_owned() }.uri(),
                    format!("{language}: {title}"),
                    format!("The {language} guide '{id}' (pilotage_get_guide with its language and id)"),
                ));
            }
        }
        if slot.description().features.catalog {
            resources.push(resource(
                ResourceRef::Catalog { language: language.clone(), cursor: None }.uri(),
                format!("{language} catalog"),
                format!(
                    "The catalog of {language} as you may see it, first page (pilotage_catalog verb list; next pages at ?cursor=)"
                ),
            ));
        }
    }
    if !context.tenant.languages().is_empty() {
        resources.extend(apps::list());
    }
    resources
}

/// The URI templates of the surface.
pub(crate) fn templates() -> Vec<ResourceTemplate> {
    let template = |uri: &str, name: &str, description: &str| {
        let mut raw = ResourceTemplate::new(uri, name);
        raw.description = Some(description.to_owned());
        raw.mime_type = Some(JSON.to_owned());
        raw
    };
    vec![
        template(
            "pilotage://guides/{language}",
            "Guide index",
            "A Language's guide index; the Language identifier percent-encoded (workflow%2Fv1)",
        ),
        template("pilotage://guides/{language}/{id}", "Guide", "One guide of a Language"),
        template(
            "pilotage://catalog/{language}",
            "Catalog",
            "A Language's catalog as the caller may see it, first page; ?cursor= for the next",
        ),
    ]
}

/// Resource not found for `uri`: `data` is `more` (an object; anything
/// else is dropped) with the member `uri` (SEP-2164: a client learns which
/// of its reads failed without matching ids).
pub(crate) fn not_found(message: String, uri: &str, more: Option<serde_json::Value>) -> McpError {
    let mut data = match more {
        Some(serde_json::Value::Object(members)) => members,
        _ => serde_json::Map::new(),
    };
    data.insert("uri".to_owned(), serde_json::Value::String(uri.to_owned()));
    McpError::resource_not_found(message, Some(serde_json::Value::Object(data)))
}

/// Reads `uri` for `context`'s caller: the tool's answer as the text of
/// one JSON content; a `ui://` URI is a view's document (`apps::read`).
///
/// # Errors
/// Resource not found (-32002; rmcp sends -32602 to 2026-07-28 peers, as
/// that revision asks) for a URI of no known form, a `ui://` URI that is no
/// view, and for what the tool answers with a request error (an unknown
/// Language or guide, a bad cursor), the request error as `data`; `data`
/// always names the `uri` asked for (SEP-2164).
pub(crate) fn read(context: &Context, uri: &str) -> Result<ReadResourceResult, McpError> {
    if apps::is_ui(uri) {
        return apps::read(uri).map_err(|error| not_found(error.to_string(), uri, None));
    }
    let Some(resource) = ResourceRef::parse(uri) else {
        return Err(not_found(
            format!(
                "'{uri}' is none of pilotage://manifest, pilotage://guides/{{language}}[/{{id}}], pilotage://catalog/{{language}}"
            ),
            uri,
            None,
        ));
    };
    match answer_text(context, &resource) {
        Ok(text) => Ok(ReadResourceResult::new(vec![ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(JSON.to_owned()),
            text,
            meta: None,
        }])),
        Err(OpError::Request(error)) => {
            Err(not_found(error.error.message.clone(), uri, serde_json::to_value(&error).ok()))
        }
        Err(OpError::Structural(message)) => Err(McpError::invalid_params(message, None)),
    }
}
