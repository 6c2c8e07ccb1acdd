//! The lookup operation's `list` and `get` over a snapshot (Part II §6.3):
//! filters, free-text search, and opaque, stable cursors.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::snapshot::CatalogSnapshot;
use pilotage_protocol::catalog::{CatalogEntry, CatalogListResult};

/// Page size when the request gives no `limit`.
pub(crate) const DEFAULT_PAGE: usize = 50;
/// The largest page served; larger `limit`s are capped (Part III §4.2).
pub(crate) const MAX_PAGE: usize = 200;

/// A `list` request's filters.
#[derive(Clone, Debug, Default)]
pub struct ListQuery<'a> {
    /// Only entries of this kind.
    pub kind: Option<&'a str>,
    /// Only entries carrying this tag.
    pub tag: Option<&'a str>,
    /// Free text, matched case-insensitively against id, name, description
    /// and tags (every word must match).
    pub q: Option<&'a str>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<&'a str>,
    /// Page size.
    pub limit: Option<usize>,
}

/// Occurs when a cursor was not issued by this server.
#[derive(Debug, thiserror::Error)]
#[error("the cursor is not one this server issued; pass next_cursor back unchanged, or omit it to start over")]
pub struct BadCursor;

/// An opaque cursor for "entries after `id`".
pub fn cursor_after(id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("after:{id}"))
}

fn decode_cursor(cursor: &str) -> Result<String, BadCursor> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| BadCursor)?;
    let text = String::from_utf8(bytes).map_err(|_| BadCursor)?;
    text.strip_prefix("after:").map(str::to_owned).ok_or(BadCursor)
}

fn matches(entry: &CatalogEntry, query: &ListQuery<'_>, words: &[String]) -> bool {
    if query.kind.is_some_and(|kind| entry.kind != kind) {
        return false;
    }
    if query.tag.is_some_and(|tag| !entry.tags.iter().any(|t| t == tag)) {
        return false;
    }
    if words.is_empty() {
        return true;
    }
    let haystack =
        format!("{} {} {} {}", entry.id, entry.name, entry.description.as_deref().unwrap_or(""), entry.tags.join(" "))
            .to_lowercase();
    // Every query word must begin a word of the entry: whole
    // whitespace-separated words (`cap_read`) or their alphanumeric parts
    // (`profile` in `cap_read_user_profile`), so "c" does not match "doc1".
    let tokens: Vec<&str> = haystack
        .split_whitespace()
        .chain(haystack.split(|c: char| !c.is_alphanumeric()))
        .filter(|token| !token.is_empty())
        .collect();
    words.iter().all(|word| tokens.iter().any(|token| token.starts_with(word.as_str())))
}

/// One page of visible entries in id order.
///
/// # Errors
/// [`BadCursor`] for a cursor this server did not issue.
pub fn list(snapshot: &CatalogSnapshot, query: &ListQuery<'_>) -> Result<CatalogListResult, BadCursor> {
    let after = query.cursor.map(decode_cursor).transpose()?;
    let limit = query.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let words: Vec<String> = query.q.map(|q| q.split_whitespace().map(str::to_lowercase).collect()).unwrap_or_default();
    let mut items: Vec<CatalogEntry> = Vec::with_capacity(limit.min(64));
    let mut more = false;
    for entry in snapshot.entries_after(after.as_deref()).filter(|entry| matches(entry, query, &words)) {
        if items.len() == limit {
            more = true;
            break;
        }
        items.push(entry.clone());
    }
    let next_cursor = if more { items.last().map(|last| cursor_after(&last.id)) } else { None };
    Ok(CatalogListResult { items, next_cursor, catalog_version: snapshot.catalog_version().to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilotage_protocol::risk::RiskHints;

    fn entry(id: &str, tags: &[&str]) -> CatalogEntry {
        CatalogEntry {
            id: id.into(),
            kind: if id.starts_with("doc") { "document".into() } else { "capability".into() },
            name: format!("Name of {id}"),
            description: Some("reads user profiles".into()),
            input_schema: None,
            output_schema: None,
            risk: "safe".into(),
            risk_hints: RiskHints::SAFE,
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            languages: None,
            revision: None,
        }
    }

    fn snapshot() -> CatalogSnapshot {
        CatalogSnapshot::hashed(vec![entry("a", &["x"]), entry("b", &[]), entry("c", &["x"]), entry("doc1", &[])])
    }

    #[test]
    fn pages_cover_every_entry_exactly_once() {
        let snapshot = snapshot();
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = list(&snapshot, &ListQuery { cursor: cursor.as_deref(), limit: Some(1), ..Default::default() })
                .unwrap();
            seen.extend(page.items.iter().map(|e| e.id.clone()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, ["a", "b", "c", "doc1"]);
    }

    #[test]
    fn filters_and_search_narrow_the_list() {
        let snapshot = snapshot();
        let tagged = list(&snapshot, &ListQuery { tag: Some("x"), ..Default::default() }).unwrap();
        assert_eq!(tagged.items.len(), 2);
        let documents = list(&snapshot, &ListQuery { kind: Some("document"), ..Default::default() }).unwrap();
        assert_eq!(documents.items.len(), 1);
        let found = list(&snapshot, &ListQuery { q: Some("NAME of C"), ..Default::default() }).unwrap();
        assert_eq!(found.items.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["c"]);
        assert!(found.next_cursor.is_none());
        let partial = list(&snapshot, &ListQuery { q: Some("profil"), ..Default::default() }).unwrap();
        assert_eq!(partial.items.len(), 4, "a word's beginning matches");
        let inside = list(&snapshot, &ListQuery { q: Some("rofile"), ..Default::default() }).unwrap();
        assert!(inside.items.is_empty(), "the middle of a word does not");
    }

    #[test]
    fn foreign_cursors_are_refused() {
        assert!(list(&snapshot(), &ListQuery { cursor: Some("not-a-cursor!"), ..Default::default() }).is_err());
        assert!(
            list(&snapshot(), &ListQuery { cursor: Some(&URL_SAFE_NO_PAD.encode("x")), ..Default::default() }).is_err()
        );
    }
}
