//! The optional resource surface's URIs (Part III §8.3, §3.2 manifest
//! resource): `pilotage://manifest`, `pilotage://guides/{language}`,
//! `pilotage://guides/{language}/{id}` and `pilotage://catalog/{language}`,
//! the Language identifier (and a guide id) percent-encoded as one path
//! segment (`workflow/v1` → `workflow%2Fv1`). A catalog URI may carry
//! `?cursor=…` for the pages after the first.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// The manifest resource's URI (Part III §3.2).
pub const MANIFEST_URI: &str = "pilotage://manifest";

/// What RFC 3986 leaves unescaped in a segment: letters, digits, `-._~`.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// One resource of the surface, as a URI names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResourceRef {
    /// The manifest.
    Manifest,
    /// A Language's guide index.
    GuideIndex {
        /// The Language identifier.
        language: String,
    },
    /// One guide.
    Guide {
        /// The Language identifier.
        language: String,
        /// The guide's id.
        id: String,
    },
    /// A Language's catalog, one page.
    Catalog {
        /// The Language identifier.
        language: String,
        /// The page's cursor (none: the first page).
        cursor: Option<String>,
    },
}

fn segment(text: &str) -> String {
    utf8_percent_encode(text, SEGMENT).to_string()
}

fn decoded(text: &str) -> Option<String> {
    let text = percent_decode_str(text).decode_utf8().ok()?.into_owned();
    (!text.is_empty()).then_some(text)
}

impl ResourceRef {
    /// The URI naming this resource.
    pub fn uri(&self) -> String {
        match self {
            ResourceRef::Manifest => MANIFEST_URI.to_owned(),
            ResourceRef::GuideIndex { language } => format!("pilotage://guides/{}", segment(language)),
            ResourceRef::Guide { language, id } => format!("pilotage://guides/{}/{}", segment(language), segment(id)),
            ResourceRef::Catalog { language, cursor: None } => format!("pilotage://catalog/{}", segment(language)),
            ResourceRef::Catalog { language, cursor: Some(cursor) } => {
                format!("pilotage://catalog/{}?cursor={}", segment(language), segment(cursor))
            }
        }
    }

    /// The resource `uri` names; `None` for a URI of no such form (another
    /// scheme, a `/` left unescaped inside a Language identifier, an empty
    /// segment, bad percent-encoding).
    pub fn parse(uri: &str) -> Option<ResourceRef> {
        if uri == MANIFEST_URI {
            return Some(ResourceRef::Manifest);
        }
        if let Some(rest) = uri.strip_prefix("pilotage://catalog/") {
            let (language, cursor) = match rest.split_once("?cursor=") {
                Some((language, cursor)) => (language, Some(decoded(cursor)?)),
                None => (rest, None),
            };
            if language.contains(['/', '?', '#']) {
                return None;
            }
            return Some(ResourceRef::Catalog { language: decoded(language)?, cursor });
        }
        let rest = uri.strip_prefix("pilotage://guides/")?;
        if rest.contains(['?', '#']) {
            return None;
        }
        match rest.split('/').collect::<Vec<_>>()[..] {
            [language] => Some(ResourceRef::GuideIndex { language: decoded(language)? }),
            [language, id] => Some(ResourceRef::Guide { language: decoded(language)?, id: decoded(id)? }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_with_the_language_as_one_segment() {
        let index = ResourceRef::GuideIndex { language: "workflow/v1".into() };
        assert_eq!(index.uri(), "pilotage://guides/workflow%2Fv1");
        for resource in [
            ResourceRef::Manifest,
            index,
            ResourceRef::Guide { language: "sql/postgres-15".into(), id: "core/select".into() },
            ResourceRef::Catalog { language: "automation/1".into(), cursor: None },
            ResourceRef::Catalog { language: "automation/1".into(), cursor: Some("b2Zm=".into()) },
        ] {
            assert_eq!(ResourceRef::parse(&resource.uri()), Some(resource.clone()), "{}", resource.uri());
        }
        for bad in [
            "pilotage://guides/workflow/v1/core/x",
            "pilotage://guides/",
            "pilotage://catalog/workflow/v1",
            "pilotage://guides/%FF",
            "https://example.com/x",
            "pilotage://other",
        ] {
            assert_eq!(ResourceRef::parse(bad), None, "{bad}");
        }
    }
}
