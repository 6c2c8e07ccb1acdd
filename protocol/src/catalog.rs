//! Catalog entries and the lookup results (Part II §5.4, §6.3).

use serde::{Deserialize, Deserializer, Serialize};

use super::risk::RiskHints;

/// One environment-bound name (Part II §5.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatalogEntry {
    /// Stable identifier, unique within the catalog.
    pub id: String,
    /// Member of the Language's engine-defined kind set.
    pub kind: String,
    /// Human-readable name.
    pub name: String,
    /// Server-authored description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Input shape; mandatory for callable kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<serde_json::Value>,
    /// Output shape when statically known. A present `null` is kept.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::present")]
    pub output_schema: Option<serde_json::Value>,
    /// Engine-defined risk level.
    pub risk: String,
    /// Generic risk booleans.
    pub risk_hints: RiskHints,
    /// Informative grouping labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Languages that may reference this entry; absent means all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub languages: Option<Vec<String>>,
    /// Opaque token that changes when the entry changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

impl CatalogEntry {
    /// Whether a Language may reference this entry (absence of `languages`
    /// means every Language may).
    pub fn usable_by(&self, language: &str) -> bool {
        self.languages.as_ref().is_none_or(|names| names.iter().any(|name| name == language))
    }

    /// The load-bearing fields recorded in a promotion baseline, as one
    /// JSON value: `kind`, `input_schema`, `output_schema`, `risk`,
    /// `risk_hints`, `languages`; never `revision`, `name`, `description`
    /// or `tags` (Part II §5.4).
    pub fn baseline(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": self.kind,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "risk": self.risk,
            "risk_hints": self.risk_hints,
            "languages": self.languages,
        })
    }
}

/// The `list` response (Part II §6.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatalogListResult {
    /// One page of visible entries.
    pub items: Vec<CatalogEntry>,
    /// Present iff more results remain; opaque.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The caller's catalog version.
    pub catalog_version: String,
}

/// The `get` response (Part II §6.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatalogGetResult {
    /// The entry.
    pub entry: CatalogEntry,
    /// The caller's catalog version.
    pub catalog_version: String,
}

/// How an entry changed (Part II §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The entry became visible.
    Added,
    /// The entry disappeared.
    Removed,
    /// A defined field changed.
    Modified,
}

impl<'de> Deserialize<'de> for ChangeKind {
    /// Unknown values are read as `modified` (Part II §1.3).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(match text.as_str() {
            "added" => ChangeKind::Added,
            "removed" => ChangeKind::Removed,
            _ => ChangeKind::Modified,
        })
    }
}

/// One change in a `changed_since` response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogChange {
    /// The entry id.
    pub id: String,
    /// What happened to it.
    pub change: ChangeKind,
}

/// The `changed_since` response (Part II §6.3).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatalogChangedResult {
    /// The current version.
    pub catalog_version: String,
    /// Changes since the supplied version.
    pub changes: Vec<CatalogChange>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_ignores_descriptive_fields() {
        let entry: CatalogEntry = serde_json::from_value(serde_json::json!({
            "id": "a", "kind": "capability", "name": "A", "risk": "safe",
            "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false},
            "input_schema": {"type": "object"}, "revision": "r1", "tags": ["x"]
        }))
        .unwrap();
        let mut renamed = entry.clone();
        renamed.name = "Another".into();
        renamed.description = Some("new words".into());
        renamed.revision = Some("r2".into());
        renamed.tags = vec!["y".into()];
        assert_eq!(entry.baseline(), renamed.baseline());
        let mut retyped = entry.clone();
        retyped.input_schema = Some(serde_json::json!({"type": "string"}));
        assert_ne!(entry.baseline(), retyped.baseline());
    }

    #[test]
    fn usable_by_defaults_to_every_language() {
        let mut entry: CatalogEntry = serde_json::from_value(serde_json::json!({
            "id": "a", "kind": "k", "name": "A", "risk": "safe",
            "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}
        }))
        .unwrap();
        assert!(entry.usable_by("workflow/v1"));
        entry.languages = Some(vec!["sql/postgres-15".into()]);
        assert!(!entry.usable_by("workflow/v1"));
    }

    #[test]
    fn unknown_change_reads_as_modified() {
        let change: CatalogChange = serde_json::from_str(r#"{"id":"a","change":"renamed"}"#).unwrap();
        assert_eq!(change.change, ChangeKind::Modified);
    }
}
