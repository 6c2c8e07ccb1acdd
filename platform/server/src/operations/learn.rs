//! `learn` (Part II §6.2, Part III §4.1): the guide index, a guide, or one
//! topic of a guide.

use serde::Deserialize;
use serde_json::Value;

use super::{Context, OpError, arguments, request_error};
use pilotage_protocol::capabilities::{Capability, SubFeature};
use pilotage_protocol::guide::{GuideFetchResult, GuideIndexResult};
use pilotage_protocol::request_error::RequestErrorKind;

/// `pilotage_get_guide` arguments.
#[derive(Debug, Deserialize)]
struct GuideArguments {
    language: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    topic: Option<String>,
}

/// Serves `pilotage_get_guide`.
///
/// # Errors
/// `not_found` for an unknown Language, guide or topic (naming the valid
/// choices); `invalid_request` for a topic when `topic_fetch` is not
/// declared, or a topic without an id.
pub(crate) fn get_guide(context: &Context, args: &Value) -> Result<Value, OpError> {
    let args: GuideArguments = arguments(args)?;
    let slot = context.language(&args.language)?;
    let description = slot.description();
    let Some(id) = args.id else {
        if args.topic.is_some() {
            return Err(request_error(
                RequestErrorKind::InvalidRequest,
                "'topic' needs 'id': name the guide the topic belongs to",
            ));
        }
        let guides = description.guides.iter().map(|guide| guide.guide.clone()).collect();
        return Ok(serde_json::to_value(GuideIndexResult { guides }).unwrap_or(Value::Null));
    };
    let Some(guide) = description.guides.iter().find(|guide| guide.guide.id == id) else {
        let ids: Vec<&str> = description.guides.iter().map(|g| g.guide.id.as_str()).collect();
        return Err(request_error(
            RequestErrorKind::NotFound,
            format!("unknown guide '{id}'; guides of {}: {}", args.language, ids.join(", ")),
        ));
    };
    let Some(topic) = args.topic else {
        return Ok(serde_json::to_value(GuideFetchResult { guide: guide.with_body() }).unwrap_or(Value::Null));
    };
    let declared = slot
        .entry
        .effective_capabilities(&context.tenant.manifest().manifest)
        .is_some_and(|map| map.declares(Capability::Guides) && map.declares_sub(SubFeature::TopicFetch));
    if !declared {
        return Err(request_error(
            RequestErrorKind::InvalidRequest,
            format!("{} does not declare guides.topic_fetch: fetch the whole guide by omitting 'topic'", args.language),
        ));
    }
    let Some(body) = guide.topic_bodies.get(&topic) else {
        let topics: Vec<&str> = guide.topic_bodies.keys().map(String::as_str).collect();
        return Err(request_error(
            RequestErrorKind::NotFound,
            format!("unknown topic '{topic}' of guide '{id}'; topics: {}", topics.join(", ")),
        ));
    };
    let mut fetched = guide.with_body();
    fetched.size_bytes = body.len() as u64;
    fetched.tokens_estimate = Some(pilotage_protocol::guide::estimate_tokens(body));
    fetched.body = Some(body.clone());
    Ok(serde_json::to_value(GuideFetchResult { guide: fetched }).unwrap_or(Value::Null))
}
