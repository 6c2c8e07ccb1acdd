//! A catalog snapshot: the entries one caller can see for one Language,
//! pinned for the whole of one validation or execution (Part II §6.4
//! "catalog snapshot"), with the `catalog_version` of exactly that view.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::entry::StoredEntry;
use pilotage_protocol::catalog::CatalogEntry;

/// An immutable view of the visible catalog of one Language. Cheap to
/// clone and to create: it shares the tenant's entry map and filters on
/// access, so no invisible entry can be reached through it (Part II
/// §10.3).
#[derive(Clone, Debug, Default)]
pub struct CatalogSnapshot {
    entries: Arc<BTreeMap<String, Arc<StoredEntry>>>,
    view: Option<Arc<View>>,
    catalog_version: Arc<str>,
}

/// Who is looking, and for which Language.
#[derive(Debug)]
struct View {
    scopes: BTreeSet<String>,
    language: String,
}

impl CatalogSnapshot {
    /// A snapshot of exactly `entries` (already filtered to what the caller
    /// sees and the Language may use) with its version token.
    pub fn new(entries: impl IntoIterator<Item = CatalogEntry>, catalog_version: impl Into<Arc<str>>) -> Self {
        let entries = entries
            .into_iter()
            .map(|entry| (entry.id.clone(), Arc::new(StoredEntry::new(entry, Vec::new(), None))))
            .collect();
        CatalogSnapshot { entries: Arc::new(entries), view: None, catalog_version: catalog_version.into() }
    }

    /// A snapshot whose version is the content hash of its entries
    /// (Part IV §3), for single-scope uses such as `pilotage language check`.
    pub fn hashed(entries: Vec<CatalogEntry>) -> Self {
        let version = super::version::content_version(entries.iter());
        CatalogSnapshot::new(entries, version)
    }

    /// A view of a tenant's entry map for a caller holding `scopes`, for
    /// `language`.
    pub(crate) fn view(
        entries: Arc<BTreeMap<String, Arc<StoredEntry>>>,
        scopes: BTreeSet<String>,
        language: &str,
        catalog_version: String,
    ) -> Self {
        CatalogSnapshot {
            entries,
            view: Some(Arc::new(View { scopes, language: language.to_owned() })),
            catalog_version: catalog_version.into(),
        }
    }

    fn sees(&self, stored: &StoredEntry) -> bool {
        match &self.view {
            None => true,
            Some(view) => stored.visible_to(&view.scopes) && stored.entry.usable_by(&view.language),
        }
    }

    /// One entry, if visible.
    pub fn get(&self, id: &str) -> Option<&CatalogEntry> {
        self.entries.get(id).filter(|stored| self.sees(stored)).map(|stored| &stored.entry)
    }

    /// One entry with its platform-side attributes, if visible.
    pub fn get_stored(&self, id: &str) -> Option<&Arc<StoredEntry>> {
        self.entries.get(id).filter(|stored| self.sees(stored))
    }

    /// Every visible entry id, optionally of one kind, in id order.
    pub fn ids(&self, kind: Option<&str>) -> Vec<String> {
        self.entries().filter(|entry| kind.is_none_or(|k| entry.kind == k)).map(|entry| entry.id.clone()).collect()
    }

    /// Every visible entry, in id order.
    pub fn entries(&self) -> impl Iterator<Item = &CatalogEntry> {
        self.entries.values().filter(|stored| self.sees(stored)).map(|stored| &stored.entry)
    }

    /// Visible entries with ids strictly after `after` (or from the start),
    /// in id order.
    pub(crate) fn entries_after<'a>(&'a self, after: Option<&str>) -> impl Iterator<Item = &'a CatalogEntry> + 'a {
        use std::ops::Bound;
        let start = match after {
            Some(id) => Bound::Excluded(id.to_owned()),
            None => Bound::Unbounded,
        };
        self.entries
            .range::<String, _>((start, Bound::Unbounded))
            .map(|(_, stored)| stored)
            .filter(|stored| self.sees(stored))
            .map(|stored| &stored.entry)
    }

    /// How many entries are visible (a scan).
    pub fn len(&self) -> usize {
        self.entries().count()
    }

    /// Whether nothing is visible.
    pub fn is_empty(&self) -> bool {
        self.entries().next().is_none()
    }

    /// The `catalog_version` of this view.
    pub fn catalog_version(&self) -> &str {
        &self.catalog_version
    }
}
