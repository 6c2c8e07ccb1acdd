//! Validation results by (tenant, component, program, catalog_version,
//! context), so an execute after a validate does not validate twice
//! (Part IV §6).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use pilotage_engine::validation::Validated;

/// Cached results by key, and keys in insertion order.
type CacheEntries = (HashMap<String, Arc<Validated>>, VecDeque<String>);

/// Validation results by (tenant, component, program, catalog_version,
/// context), so execute after validate does not validate twice (Part IV
/// §6). Bounded; least recently inserted entries go first.
#[derive(Debug)]
pub struct ValidationCache {
    /// Results by key, and keys in insertion order for eviction.
    entries: Mutex<CacheEntries>,
    capacity: usize,
}

impl ValidationCache {
    /// A cache holding at most `capacity` results.
    pub fn new(capacity: usize) -> ValidationCache {
        ValidationCache { entries: Mutex::new((HashMap::new(), VecDeque::new())), capacity }
    }

    /// The cache key: a hex SHA-256 over the tenant, the component's
    /// SHA-256, the program's digest (`Program::digest`, or
    /// `Program::digest_of_argument` before the program is built), the
    /// catalog version and the context's canonical JSON.
    pub fn key(
        tenant: &str,
        component: &str,
        program: &[u8; 32],
        catalog_version: &str,
        context: Option<&serde_json::Value>,
    ) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        for part in [tenant.as_bytes(), component.as_bytes(), program, catalog_version.as_bytes()] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        let context = context.map(pilotage_engine::catalog::version::canonical_json).unwrap_or_default();
        hasher.update(context.as_bytes());
        hex::encode(hasher.finalize())
    }

    /// A cached result.
    pub fn get(&self, key: &str) -> Option<Arc<Validated>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).0.get(key).cloned()
    }

    /// Caches a result.
    pub fn put(&self, key: String, value: Arc<Validated>) {
        let mut guard = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(key.clone(), value).is_none() {
            order.push_back(key);
        }
        while order.len() > self.capacity {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }
}
