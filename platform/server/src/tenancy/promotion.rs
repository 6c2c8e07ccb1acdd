//! Promoted programs (Part II §3.5, §5.4): an immutable body under a
//! content-derived `program_ref`, the baseline of every entry it
//! references, and the catalog entry that publishes it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use pilotage_engine::catalog::CatalogSnapshot;
use pilotage_engine::catalog::version::canonical_json;
use pilotage_protocol::catalog::CatalogEntry;

/// A promoted program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromotedProgram {
    /// Content-derived and immutable: a different body gets another ref.
    pub program_ref: String,
    /// The Language.
    pub language: String,
    /// The body, as the program argument's JSON value.
    pub body: Value,
    /// Load-bearing fields of each referenced entry at promotion.
    pub baseline: BTreeMap<String, Value>,
    /// The published catalog entry.
    pub entry: CatalogEntry,
    /// Who promoted it.
    pub promoter: String,
}

/// The reference of a body: `prog_` and 24 hex digits of the SHA-256 of
/// the Language, the canonical body, the declared input schema and the
/// baseline. The same content promoted against the same catalog always
/// gets the same reference; a changed body, or a promotion again after the
/// referenced entries changed (Part II §5.4: a new reference and a new
/// baseline), gets a new one.
pub(crate) fn program_ref(
    language: &str,
    body: &Value,
    input_schema: &Value,
    baseline: &BTreeMap<String, Value>,
) -> String {
    let baseline = serde_json::to_value(baseline).unwrap_or(Value::Null);
    let mut hasher = Sha256::new();
    for part in [language.to_owned(), canonical_json(body), canonical_json(input_schema), canonical_json(&baseline)] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    format!("prog_{}", &hex::encode(hasher.finalize())[..24])
}

/// The baseline of `references` in `catalog`: each entry's load-bearing
/// fields (Part II §5.4). Entries missing from the catalog are left out.
pub(crate) fn baseline(catalog: &CatalogSnapshot, references: &[String]) -> BTreeMap<String, Value> {
    references.iter().filter_map(|id| catalog.get(id).map(|entry| (id.clone(), entry.baseline()))).collect()
}

/// The entries whose load-bearing fields differ from the baseline now
/// (changed, or no longer visible): any one makes the reference terminal
/// (`promotion_drift`).
pub(crate) fn drifted(program: &PromotedProgram, catalog: &CatalogSnapshot) -> Vec<String> {
    program
        .baseline
        .iter()
        .filter(|(id, recorded)| catalog.get(id).map(CatalogEntry::baseline).as_ref() != Some(*recorded))
        .map(|(id, _)| id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilotage_protocol::risk::RiskHints;
    use serde_json::json;

    fn entry(id: &str, kind: &str) -> CatalogEntry {
        CatalogEntry {
            id: id.into(),
            kind: kind.into(),
            name: id.into(),
            description: None,
            input_schema: Some(json!({"type": "object"})),
            output_schema: None,
            risk: "safe".into(),
            risk_hints: RiskHints::SAFE,
            tags: vec![],
            languages: None,
            revision: None,
        }
    }

    #[test]
    fn references_follow_content() {
        let schema = json!({"type": "object"});
        let none = BTreeMap::new();
        let a = program_ref("workflow/v1", &json!({"steps": [], "x": 1}), &schema, &none);
        let same = program_ref("workflow/v1", &json!({"x": 1, "steps": []}), &schema, &none);
        let other = program_ref("workflow/v1", &json!({"steps": [1]}), &schema, &none);
        assert_eq!(a, same);
        assert_ne!(a, other);
        assert!(a.starts_with("prog_"));
        let drifted = BTreeMap::from([("cap".to_owned(), json!({"kind": "capability"}))]);
        assert_ne!(
            program_ref("workflow/v1", &json!({"steps": [], "x": 1}), &schema, &drifted),
            a,
            "a new baseline is a new reference"
        );
    }

    #[test]
    fn drift_is_a_load_bearing_change_or_a_disappearance() {
        let before = CatalogSnapshot::hashed(vec![entry("a", "capability"), entry("b", "capability")]);
        let program = PromotedProgram {
            program_ref: "prog_x".into(),
            language: "workflow/v1".into(),
            body: json!({}),
            baseline: baseline(&before, &["a".into(), "b".into()]),
            entry: entry("prog_x", "workflow_program"),
            promoter: "dev".into(),
        };
        assert!(drifted(&program, &before).is_empty());
        let mut renamed = entry("a", "capability");
        renamed.name = "A renamed".into();
        renamed.description = Some("new words".into());
        assert!(drifted(&program, &CatalogSnapshot::hashed(vec![renamed, entry("b", "capability")])).is_empty());
        assert_eq!(
            drifted(&program, &CatalogSnapshot::hashed(vec![entry("a", "document"), entry("b", "capability")])),
            ["a"]
        );
        assert_eq!(drifted(&program, &CatalogSnapshot::hashed(vec![entry("a", "capability")])), ["b"]);
    }
}
