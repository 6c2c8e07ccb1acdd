//! A catalog snapshot: the entries one caller can see for one Language,
//! pinned for the whole of one validation or execution (Part II §6.4
//! "catalog snapshot"), with the `catalog_version` of exactly that view.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::protocol::catalog::CatalogEntry;

/// An immutable view of the visible catalog of one Language. Cheap to
/// clone. Invisible entries are not in it at all, so nothing built from it
/// can name them (Part II §10.3).
#[derive(Clone, Debug, Default)]
pub struct CatalogSnapshot {
    entries: Arc<BTreeMap<String, CatalogEntry>>,
    catalog_version: Arc<str>,
}

impl CatalogSnapshot {
    /// A snapshot of `entries` (already filtered to what the caller sees and
    /// the Language may use) with its version token.
    pub fn new(entries: impl IntoIterator<Item = CatalogEntry>, catalog_version: impl Into<Arc<str>>) -> Self {
        let entries = entries.into_iter().map(|entry| (entry.id.clone(), entry)).collect();
        CatalogSnapshot { entries: Arc::new(entries), catalog_version: catalog_version.into() }
    }

    /// A snapshot whose version is the content hash of its entries
    /// (Part IV §3), for single-scope uses such as `pilotage language check`.
    pub fn hashed(entries: Vec<CatalogEntry>) -> Self {
        let version = super::version::content_version(entries.iter());
        CatalogSnapshot::new(entries, version)
    }

    /// One entry.
    pub fn get(&self, id: &str) -> Option<&CatalogEntry> {
        self.entries.get(id)
    }

    /// Every entry id, optionally of one kind, in id order.
    pub fn ids(&self, kind: Option<&str>) -> Vec<String> {
        self.entries
            .values()
            .filter(|entry| kind.is_none_or(|k| entry.kind == k))
            .map(|entry| entry.id.clone())
            .collect()
    }

    /// Every entry, in id order.
    pub fn entries(&self) -> impl Iterator<Item = &CatalogEntry> {
        self.entries.values()
    }

    /// How many entries are visible.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is visible.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `catalog_version` of this view.
    pub fn catalog_version(&self) -> &str {
        &self.catalog_version
    }
}
