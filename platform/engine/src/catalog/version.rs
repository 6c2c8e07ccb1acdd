//! `catalog_version`: an opaque, deterministic content hash over every
//! defined field of every visible entry except `revision` (Part II §5.4,
//! Part IV §3). Stable across processes, restarts and replicas; it changes
//! iff a visible entry is added, removed, or changes a defined field.
//!
//! Computed from per-group aggregates: each entry contributes a 256-bit
//! hash, added (mod 2^128 per lane) into the aggregate of its group (one
//! visibility class × one `languages` value). A caller's version combines
//! the aggregates of the groups it can see, so a request costs O(groups),
//! not O(entries), and adding then removing an entry restores the token.

use sha2::{Digest, Sha256};

use pilotage_protocol::catalog::CatalogEntry;

/// The canonical JSON text of a value: object keys sorted at every level,
/// no insignificant whitespace. Equal values give equal text whatever the
/// key order they arrived in.
pub fn canonical_json(value: &serde_json::Value) -> String {
    fn write(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (index, key) in keys.into_iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(key.clone()).to_string());
                    out.push(':');
                    write(&map[key], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The hash of one entry's defined fields, `revision` excluded.
pub(crate) fn entry_hash(entry: &CatalogEntry) -> [u8; 32] {
    let mut value = serde_json::to_value(entry).unwrap_or(serde_json::Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.remove("revision");
    }
    Sha256::digest(canonical_json(&value).as_bytes()).into()
}

/// An order-independent multiset aggregate of entry hashes: two 128-bit
/// lanes, each a wrapping sum. Adding and removing are inverse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Aggregate {
    /// Entries in the group.
    pub count: u64,
    /// Sum of the first 16 bytes of each entry hash.
    pub low: u128,
    /// Sum of the last 16 bytes of each entry hash.
    pub high: u128,
}

impl Aggregate {
    fn lanes(hash: &[u8; 32]) -> (u128, u128) {
        let mut low = [0u8; 16];
        let mut high = [0u8; 16];
        low.copy_from_slice(&hash[..16]);
        high.copy_from_slice(&hash[16..]);
        (u128::from_le_bytes(low), u128::from_le_bytes(high))
    }

    /// Adds one entry hash.
    pub fn add(&mut self, hash: &[u8; 32]) {
        let (low, high) = Aggregate::lanes(hash);
        self.count += 1;
        self.low = self.low.wrapping_add(low);
        self.high = self.high.wrapping_add(high);
    }

    /// Removes one entry hash previously added.
    pub fn remove(&mut self, hash: &[u8; 32]) {
        let (low, high) = Aggregate::lanes(hash);
        self.count = self.count.saturating_sub(1);
        self.low = self.low.wrapping_sub(low);
        self.high = self.high.wrapping_sub(high);
    }
}

/// Combines group aggregates into a token. `groups` yields (group key,
/// aggregate); empty groups are skipped and order does not matter.
pub(crate) fn combine<'a>(groups: impl IntoIterator<Item = (&'a str, &'a Aggregate)>) -> String {
    let mut parts: Vec<(&str, &Aggregate)> = groups.into_iter().filter(|(_, aggregate)| aggregate.count > 0).collect();
    parts.sort_by(|a, b| a.0.cmp(b.0));
    let mut hasher = Sha256::new();
    for (key, aggregate) in parts {
        hasher.update((key.len() as u64).to_le_bytes());
        hasher.update(key.as_bytes());
        hasher.update(aggregate.count.to_le_bytes());
        hasher.update(aggregate.low.to_le_bytes());
        hasher.update(aggregate.high.to_le_bytes());
    }
    format!("cv_{}", hex::encode(&hasher.finalize()[..12]))
}

/// The version of a set of entries seen as one group (no visibility
/// classes): for snapshots built outside a tenant catalog.
pub fn content_version<'a>(entries: impl Iterator<Item = &'a CatalogEntry>) -> String {
    let mut aggregate = Aggregate::default();
    for entry in entries {
        aggregate.add(&entry_hash(entry));
    }
    combine([("all", &aggregate)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilotage_protocol::risk::RiskHints;

    fn entry(id: &str, description: &str) -> CatalogEntry {
        CatalogEntry {
            id: id.into(),
            kind: "capability".into(),
            name: id.into(),
            description: Some(description.into()),
            input_schema: Some(serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {}}})),
            output_schema: None,
            risk: "safe".into(),
            risk_hints: RiskHints::SAFE,
            tags: vec![],
            languages: None,
            revision: Some("r1".into()),
        }
    }

    #[test]
    fn version_is_order_independent_and_ignores_revision() {
        let a = entry("a", "x");
        let b = entry("b", "y");
        let one = content_version([a.clone(), b.clone()].iter());
        let two = content_version([b.clone(), a.clone()].iter());
        assert_eq!(one, two);
        let mut revised = a.clone();
        revised.revision = Some("r2".into());
        assert_eq!(content_version([revised, b.clone()].iter()), one);
    }

    #[test]
    fn version_changes_on_add_remove_and_any_defined_field() {
        let base = content_version([entry("a", "x")].iter());
        assert_ne!(content_version([entry("a", "changed")].iter()), base);
        assert_ne!(content_version([entry("a", "x"), entry("b", "y")].iter()), base);
        assert_ne!(content_version(std::iter::empty()), base);
    }

    #[test]
    fn key_order_inside_schemas_does_not_matter() {
        let mut reordered = entry("a", "x");
        reordered.input_schema = Some(
            serde_json::from_str(r#"{"properties": {"b": {}, "a": {"type": "string"}}, "type": "object"}"#).unwrap(),
        );
        assert_eq!(entry_hash(&reordered), entry_hash(&entry("a", "x")));
    }

    #[test]
    fn aggregates_add_and_remove_inversely() {
        let mut aggregate = Aggregate::default();
        let before = combine([("g", &aggregate)]);
        let hash = entry_hash(&entry("a", "x"));
        aggregate.add(&hash);
        assert_ne!(combine([("g", &aggregate)]), before);
        aggregate.remove(&hash);
        assert_eq!(combine([("g", &aggregate)]), before);
    }
}
