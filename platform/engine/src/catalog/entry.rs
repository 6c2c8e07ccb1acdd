//! A catalog entry as the platform stores it: the protocol's entry, the
//! scopes that see it (Part II §5.4 visibility) and where a callable entry
//! is served.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::binding::HttpBinding;
use super::version::entry_hash;
use pilotage_protocol::catalog::CatalogEntry;

/// A catalog entry as the platform stores it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredEntry {
    /// The entry as the protocol defines it.
    pub entry: CatalogEntry,
    /// Scopes a caller must hold (all of them) to see the entry; empty
    /// means visible to every caller of the tenant.
    #[serde(default)]
    pub visibility: Vec<String>,
    /// Where a callable entry is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<HttpBinding>,
    /// Hash of the entry's defined fields, `revision` excluded.
    #[serde(skip)]
    hash: [u8; 32],
    /// The schemas as JSON text, made on first use.
    #[serde(skip)]
    schema_text: SchemaText,
}

/// An entry's `input_schema` and `output_schema` as JSON text. Every
/// validation that resolves the entry hands its schemas to the Language as
/// text; serializing them on each call was a measurable share of a
/// validation, so the text is made once per stored entry (entries are
/// immutable: a change stores a new entry).
#[derive(Clone, Debug, Default)]
struct SchemaText(OnceLock<(Option<String>, Option<String>)>);

/// A cache, not part of the entry's value.
impl PartialEq for SchemaText {
    fn eq(&self, _: &SchemaText) -> bool {
        true
    }
}

impl StoredEntry {
    /// A stored entry; `visibility` is normalized (sorted, deduplicated).
    pub fn new(entry: CatalogEntry, mut visibility: Vec<String>, binding: Option<HttpBinding>) -> StoredEntry {
        visibility.sort();
        visibility.dedup();
        let hash = entry_hash(&entry);
        StoredEntry { entry, visibility, binding, hash, schema_text: SchemaText::default() }
    }

    /// `(input_schema, output_schema)` as compact JSON text, computed on
    /// the first call and kept.
    pub(crate) fn schema_text(&self) -> &(Option<String>, Option<String>) {
        self.schema_text.0.get_or_init(|| {
            let text = |schema: &Option<serde_json::Value>| schema.as_ref().map(serde_json::Value::to_string);
            (text(&self.entry.input_schema), text(&self.entry.output_schema))
        })
    }

    /// Whether a caller holding `scopes` sees this entry.
    pub(crate) fn visible_to(&self, scopes: &BTreeSet<String>) -> bool {
        self.visibility.iter().all(|scope| scopes.contains(scope))
    }

    /// The aggregate group: one visibility class × one `languages` value.
    pub(crate) fn group(&self) -> String {
        let languages = match &self.entry.languages {
            None => "*".to_owned(),
            Some(names) => {
                let mut names = names.clone();
                names.sort();
                names.join(",")
            }
        };
        format!("{}|{languages}", self.visibility.join(","))
    }

    pub(crate) fn entry_hash(&self) -> [u8; 32] {
        if self.hash == [0; 32] { entry_hash(&self.entry) } else { self.hash }
    }
}
