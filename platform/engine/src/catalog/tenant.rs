//! One tenant's catalog: its entries with visibility scopes and bindings,
//! the per-group aggregates that make `catalog_version` cost O(groups),
//! and the change log behind `changed_since` (Part II §5.4, §6.3).
//!
//! The entry map is shared copy-on-write: readers take an `Arc` of the
//! current map (a snapshot) and never block writers; a write builds the
//! next map. Writes are rare (catalog administration, promotions); reads
//! happen on every request.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::entry::StoredEntry;
use super::snapshot::CatalogSnapshot;
use super::version::{Aggregate, combine};
use pilotage_protocol::catalog::{CatalogChange, ChangeKind};

/// One group's membership rule and aggregate.
#[derive(Clone, Debug, Default)]
struct Group {
    visibility: Vec<String>,
    languages: Option<Vec<String>>,
    aggregate: Aggregate,
}

impl Group {
    fn seen_by(&self, scopes: &BTreeSet<String>, language: &str) -> bool {
        self.visibility.iter().all(|scope| scopes.contains(scope))
            && self.languages.as_ref().is_none_or(|names| names.iter().any(|name| name == language))
    }
}

/// One change, kept for `changed_since`.
#[derive(Clone, Debug)]
struct Change {
    seq: u64,
    id: String,
    before: Option<Arc<StoredEntry>>,
}

/// How many changes and issued tokens are remembered for `changed_since`;
/// older baselines answer `unknown_baseline`.
pub(crate) const CHANGE_HORIZON: usize = 10_000;

/// What a write did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ApplyReport {
    /// Entries that did not exist.
    pub added: Vec<String>,
    /// Entries whose content changed.
    pub modified: Vec<String>,
    /// Entries deleted.
    pub removed: Vec<String>,
}

/// A tenant's catalog.
#[derive(Debug, Default)]
pub struct TenantCatalog {
    entries: Arc<BTreeMap<String, Arc<StoredEntry>>>,
    groups: BTreeMap<String, Group>,
    seq: u64,
    changes: VecDeque<Change>,
    /// (scope key, language, token) → the change sequence when issued.
    issued: BTreeMap<(String, String, String), u64>,
    issued_order: VecDeque<(String, String, String)>,
}

/// Scopes as one stable key.
fn scope_key(scopes: &BTreeSet<String>) -> String {
    scopes.iter().cloned().collect::<Vec<_>>().join(" ")
}

impl TenantCatalog {
    /// An empty catalog.
    pub fn new() -> TenantCatalog {
        TenantCatalog::default()
    }

    /// Inserts or replaces entries and removes `remove`, recording each
    /// real change. An entry replaced by identical content is not a change.
    pub fn apply(&mut self, upserts: Vec<StoredEntry>, remove: &[String]) -> ApplyReport {
        let mut next = (*self.entries).clone();
        let mut report = ApplyReport::default();
        for stored in upserts {
            let stored = Arc::new(StoredEntry::new(stored.entry, stored.visibility, stored.binding));
            let id = stored.entry.id.clone();
            let before = next.get(&id).cloned();
            match &before {
                Some(old) if old.entry_hash() == stored.entry_hash() && old.visibility == stored.visibility => {
                    if old.binding != stored.binding {
                        next.insert(id, stored);
                    }
                    continue;
                }
                Some(old) => {
                    self.unaggregate(old);
                    report.modified.push(id.clone());
                }
                None => report.added.push(id.clone()),
            }
            self.aggregate(&stored);
            self.record(id.clone(), before);
            next.insert(id, stored);
        }
        for id in remove {
            if let Some(old) = next.remove(id) {
                self.unaggregate(&old);
                self.record(id.clone(), Some(old));
                report.removed.push(id.clone());
            }
        }
        self.entries = Arc::new(next);
        report
    }

    /// How many changes the catalog has taken since it was made (one per
    /// entry added, changed or removed): a cheap way to tell that it
    /// changed.
    pub fn changes_seen(&self) -> u64 {
        self.seq
    }

    fn record(&mut self, id: String, before: Option<Arc<StoredEntry>>) {
        self.seq += 1;
        self.changes.push_back(Change { seq: self.seq, id, before });
        while self.changes.len() > CHANGE_HORIZON {
            self.changes.pop_front();
        }
    }

    fn aggregate(&mut self, stored: &StoredEntry) {
        let group = self.groups.entry(stored.group()).or_insert_with(|| Group {
            visibility: stored.visibility.clone(),
            languages: stored.entry.languages.clone(),
            aggregate: Aggregate::default(),
        });
        group.aggregate.add(&stored.entry_hash());
    }

    fn unaggregate(&mut self, stored: &StoredEntry) {
        let key = stored.group();
        if let Some(group) = self.groups.get_mut(&key) {
            group.aggregate.remove(&stored.entry_hash());
            if group.aggregate.count == 0 {
                self.groups.remove(&key);
            }
        }
    }

    /// The `catalog_version` for a caller holding `scopes`, for `language`:
    /// O(groups). The token is remembered so `changed_since` can use it as
    /// a baseline.
    pub fn version(&mut self, scopes: &BTreeSet<String>, language: &str) -> String {
        let version = self.compute_version(scopes, language);
        let key = (scope_key(scopes), language.to_owned(), version.clone());
        if !self.issued.contains_key(&key) {
            self.issued.insert(key.clone(), self.seq);
            self.issued_order.push_back(key);
            while self.issued_order.len() > CHANGE_HORIZON {
                if let Some(old) = self.issued_order.pop_front() {
                    self.issued.remove(&old);
                }
            }
        }
        version
    }

    /// The version without remembering it.
    pub fn compute_version(&self, scopes: &BTreeSet<String>, language: &str) -> String {
        combine(
            self.groups
                .iter()
                .filter(|(_, group)| group.seen_by(scopes, language))
                .map(|(key, group)| (key.as_str(), &group.aggregate)),
        )
    }

    /// A snapshot for a caller holding `scopes`, for `language`, with its
    /// version.
    pub fn snapshot(&mut self, scopes: &BTreeSet<String>, language: &str) -> CatalogSnapshot {
        let version = self.version(scopes, language);
        CatalogSnapshot::view(self.entries.clone(), scopes.clone(), language, version)
    }

    /// Every stored entry, visible or not (for administration).
    pub fn all(&self) -> impl Iterator<Item = &Arc<StoredEntry>> {
        self.entries.values()
    }

    /// One stored entry, visible or not (for administration).
    pub fn stored(&self, id: &str) -> Option<&Arc<StoredEntry>> {
        self.entries.get(id)
    }

    /// Changes visible to a caller since `baseline`, or `None` when the
    /// baseline is unknown in this caller's scope (never issued to this
    /// scope, or older than the remembered horizon).
    pub fn changed_since(
        &self,
        scopes: &BTreeSet<String>,
        language: &str,
        baseline: &str,
    ) -> Option<Vec<CatalogChange>> {
        let key = (scope_key(scopes), language.to_owned(), baseline.to_owned());
        let since = *self.issued.get(&key)?;
        if since < self.seq && self.changes.front().is_none_or(|first| first.seq > since + 1) {
            return None;
        }
        let sees = |stored: &StoredEntry| stored.visible_to(scopes) && stored.entry.usable_by(language);
        // The state of each entry at `since` is the `before` of its first
        // change after `since`.
        let mut then: BTreeMap<&str, Option<&Arc<StoredEntry>>> = BTreeMap::new();
        for change in self.changes.iter().filter(|change| change.seq > since) {
            then.entry(change.id.as_str()).or_insert(change.before.as_ref());
        }
        let mut changes = Vec::new();
        for (id, before) in then {
            let was = before.filter(|stored| sees(stored));
            let now = self.entries.get(id).filter(|stored| sees(stored));
            let change = match (was, now) {
                (None, Some(_)) => ChangeKind::Added,
                (Some(_), None) => ChangeKind::Removed,
                (Some(a), Some(b)) if a.entry_hash() != b.entry_hash() => ChangeKind::Modified,
                _ => continue,
            };
            changes.push(CatalogChange { id: id.to_owned(), change });
        }
        Some(changes)
    }
}

/// A tenant's catalog shared by every request of the tenant: each use
/// holds its lock only for the closure, and readers take a
/// [`CatalogSnapshot`] to work against without it.
#[derive(Debug, Default)]
pub struct SharedCatalog(Mutex<TenantCatalog>);

impl SharedCatalog {
    /// Runs `f` on the catalog under its lock. Keep `f` short.
    pub fn with<R>(&self, f: impl FnOnce(&mut TenantCatalog) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilotage_protocol::catalog::CatalogEntry;
    use pilotage_protocol::risk::RiskHints;

    fn entry(id: &str, description: &str) -> CatalogEntry {
        CatalogEntry {
            id: id.into(),
            kind: "capability".into(),
            name: id.into(),
            description: Some(description.into()),
            input_schema: Some(serde_json::json!({"type": "object"})),
            output_schema: None,
            risk: "safe".into(),
            risk_hints: RiskHints::SAFE,
            tags: vec![],
            languages: None,
            revision: None,
        }
    }

    fn stored(id: &str, description: &str, visibility: &[&str]) -> StoredEntry {
        StoredEntry::new(entry(id, description), visibility.iter().map(|s| (*s).to_owned()).collect(), None)
    }

    fn scopes(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn version_moves_only_for_visible_changes() {
        let mut catalog = TenantCatalog::new();
        catalog.apply(vec![stored("a", "x", &[]), stored("secret", "s", &["finance"])], &[]);
        let public = scopes(&[]);
        let finance = scopes(&["finance"]);
        let before_public = catalog.version(&public, "workflow/v1");
        let before_finance = catalog.version(&finance, "workflow/v1");
        assert_ne!(before_public, before_finance);
        catalog.apply(vec![stored("secret", "changed", &["finance"])], &[]);
        assert_eq!(catalog.version(&public, "workflow/v1"), before_public, "invisible change moved the token");
        assert_ne!(catalog.version(&finance, "workflow/v1"), before_finance);
        catalog.apply(vec![stored("a", "x", &[])], &[]);
        assert_eq!(catalog.version(&public, "workflow/v1"), before_public, "identical content is no change");
    }

    #[test]
    fn the_incremental_version_equals_a_recomputation() {
        let mut incremental = TenantCatalog::new();
        incremental.apply(vec![stored("a", "1", &[]), stored("b", "2", &["x"])], &[]);
        incremental.apply(vec![stored("a", "3", &[])], &["b".to_owned()]);
        let mut fresh = TenantCatalog::new();
        fresh.apply(vec![stored("a", "3", &[])], &[]);
        assert_eq!(incremental.compute_version(&scopes(&["x"]), "l/1"), fresh.compute_version(&scopes(&["x"]), "l/1"));
    }

    #[test]
    fn snapshots_hide_invisible_entries() {
        let mut catalog = TenantCatalog::new();
        catalog.apply(vec![stored("a", "x", &[]), stored("secret", "s", &["finance"])], &[]);
        let snapshot = catalog.snapshot(&scopes(&[]), "workflow/v1");
        assert!(snapshot.get("secret").is_none());
        assert_eq!(snapshot.ids(None), vec!["a"]);
        let finance = catalog.snapshot(&scopes(&["finance"]), "workflow/v1");
        assert!(finance.get("secret").is_some());
    }

    #[test]
    fn changed_since_reports_visible_changes_in_scope() {
        let mut catalog = TenantCatalog::new();
        catalog.apply(vec![stored("a", "x", &[]), stored("b", "y", &[]), stored("secret", "s", &["finance"])], &[]);
        let public = scopes(&[]);
        let baseline = catalog.version(&public, "workflow/v1");
        catalog.apply(
            vec![stored("a", "x2", &[]), stored("c", "z", &[]), stored("secret", "s2", &["finance"])],
            &["b".to_owned()],
        );
        let mut changes = catalog.changed_since(&public, "workflow/v1", &baseline).unwrap();
        changes.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(
            changes,
            vec![
                CatalogChange { id: "a".into(), change: ChangeKind::Modified },
                CatalogChange { id: "b".into(), change: ChangeKind::Removed },
                CatalogChange { id: "c".into(), change: ChangeKind::Added },
            ]
        );
        assert!(catalog.changed_since(&public, "workflow/v1", "cv_unknown_baseline").is_none());
        // A token issued to another scope is unknown here.
        let finance_token = catalog.version(&scopes(&["finance"]), "workflow/v1");
        assert!(catalog.changed_since(&public, "workflow/v1", &finance_token).is_none());
    }

    #[test]
    fn a_visibility_change_reads_as_added_or_removed() {
        let mut catalog = TenantCatalog::new();
        catalog.apply(vec![stored("a", "x", &["finance"])], &[]);
        let public = scopes(&[]);
        let baseline = catalog.version(&public, "l/1");
        catalog.apply(vec![stored("a", "x", &[])], &[]);
        assert_eq!(
            catalog.changed_since(&public, "l/1", &baseline).unwrap(),
            vec![CatalogChange { id: "a".into(), change: ChangeKind::Added }]
        );
    }
}
