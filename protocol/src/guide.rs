//! Guides and the learn results (Part II §5.2, §6.2; Part III §4.1).

use serde::{Deserialize, Deserializer, Serialize};

/// The reserved topic identifier of the closed-sets guide (Part II §5.2).
pub const CLOSED_SETS_TOPIC: &str = "closed-sets";

/// Recommended upper bound of a core guide's body, in bytes (Part II §5.2).
pub const CORE_GUIDE_MAX_BYTES: u64 = 8192;

/// A guide's level (Part II §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuideLevel {
    /// The small guide every Client reads first.
    Core,
    /// Complete enumerations and detail.
    Reference,
    /// Worked examples.
    Examples,
}

impl<'de> Deserialize<'de> for GuideLevel {
    /// Unknown levels are read as `reference` (Part II §1.3).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(match text.as_str() {
            "core" => GuideLevel::Core,
            "examples" => GuideLevel::Examples,
            _ => GuideLevel::Reference,
        })
    }
}

/// One guide's metadata, and its body in the fetch form (Part II §5.2,
/// Part III §4.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Guide {
    /// Unique among all guides of the Server.
    pub id: String,
    /// Human-readable title.
    pub title: String,
    /// `core`, `reference` or `examples`.
    pub level: GuideLevel,
    /// Topic identifiers; `closed-sets` is reserved.
    pub topics: Vec<String>,
    /// The Language taught.
    pub language: String,
    /// Changes whenever the content changes.
    pub version: String,
    /// UTF-8 size of the body in bytes.
    pub size_bytes: u64,
    /// Informative token estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_estimate: Option<u64>,
    /// Media type of the body; absent means `text/markdown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The body; only in the fetch form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

impl Guide {
    /// Whether this is the closed-sets guide.
    pub fn is_closed_sets(&self) -> bool {
        self.topics.iter().any(|topic| topic == CLOSED_SETS_TOPIC)
    }

    /// The same metadata without the body (the index form).
    pub fn without_body(&self) -> Guide {
        Guide { body: None, ..self.clone() }
    }
}

/// The index form of learn (Part III §4.1): metadata, no bodies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuideIndexResult {
    /// Every guide of the Language.
    pub guides: Vec<Guide>,
}

/// The fetch and topic forms of learn (Part III §4.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuideFetchResult {
    /// The guide, with `body`.
    pub guide: Guide,
}

/// A rough token estimate for a text: one token per four bytes, rounded up.
/// Informative only (Part II §5.2 `tokens_estimate`).
pub fn estimate_tokens(body: &str) -> u64 {
    (body.len() as u64).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_level_reads_as_reference() {
        let level: GuideLevel = serde_json::from_str("\"tutorial\"").unwrap();
        assert_eq!(level, GuideLevel::Reference);
        let level: GuideLevel = serde_json::from_str("\"core\"").unwrap();
        assert_eq!(level, GuideLevel::Core);
    }

    #[test]
    fn index_form_drops_the_body() {
        let guide = Guide {
            id: "core".into(),
            title: "t".into(),
            level: GuideLevel::Core,
            topics: vec!["closed-sets".into()],
            language: "workflow/v1".into(),
            version: "1".into(),
            size_bytes: 4,
            tokens_estimate: Some(1),
            format: None,
            body: Some("body".into()),
        };
        assert!(guide.is_closed_sets());
        let text = serde_json::to_value(guide.without_body()).unwrap();
        assert!(text.get("body").is_none());
    }
}
