//! Compiled functions kept in memory between compilations (Cranelift's
//! incremental compilation), so a rebuilt component whose functions mostly
//! did not change compiles in a fraction of its first compilation.
//!
//! Why: the compiled-code [`cache`](crate::cache) is keyed by the SHA-256 of
//! a component's bytes, which is right for a restart but useless to a
//! Language author whose build is not byte-reproducible. componentize-js
//! embeds a random temporary path and a few snapshot constants in each
//! build: two builds of the same sources differ in 2 of 12,679 functions
//! (measured on recipe-js), and each took about 7 s to compile in a release
//! build. Keyed by each function's own compiled form, the other 12,677 are
//! reused.
//!
//! Bounded: at most [`FunctionCache::new`]'s `max_bytes` of keys and
//! values are held, in two generations. Inserts go to the young one; when
//! it is full it becomes the old one and the previous old one is dropped. A
//! hit in the old generation is copied into the young one, so what the
//! last builds used survives and what no build reads any more goes.
//!
//! Nothing here can change what a component computes: Cranelift checks
//! that a cached function was compiled from the same input (its key is a
//! hash of the function's IR and the compiler's settings), and a miss just
//! compiles.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// One generation: entries and the bytes they hold.
#[derive(Debug, Default)]
struct Generation {
    entries: HashMap<Vec<u8>, Vec<u8>>,
    bytes: usize,
}

impl Generation {
    fn add(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let (key_len, value_len) = (key.len(), value.len());
        match self.entries.insert(key, value) {
            // The key was counted with the value it replaces.
            Some(previous) => self.bytes = self.bytes - previous.len() + value_len,
            None => self.bytes += key_len + value_len,
        }
    }
}

/// Compiled functions for Cranelift's incremental compilation, bounded in
/// bytes (see the module doc). Shared by every compilation of one engine.
#[derive(Debug)]
pub struct FunctionCache {
    max_bytes: usize,
    generations: Mutex<(Generation, Generation)>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// How a [`FunctionCache`] has served: lookups that found a compiled
/// function, lookups that had to compile, and what it holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionCacheStats {
    /// Functions reused instead of compiled.
    pub hits: u64,
    /// Functions compiled (not found).
    pub misses: u64,
    /// Bytes held now (keys and compiled functions).
    pub bytes: usize,
}

impl FunctionCache {
    /// A cache holding at most `max_bytes` (keys and compiled functions
    /// together, in bytes) across its two generations.
    pub fn new(max_bytes: usize) -> FunctionCache {
        FunctionCache {
            max_bytes,
            generations: Mutex::new((Generation::default(), Generation::default())),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Lookups so far.
    pub fn stats(&self) -> FunctionCacheStats {
        FunctionCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: self.bytes(),
        }
    }

    /// The bytes held now (both generations).
    pub fn bytes(&self) -> usize {
        let generations = self.generations.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        generations.0.bytes + generations.1.bytes
    }

    /// Adds an entry to the young generation, turning it old first when
    /// the entry would not fit in half the bound.
    fn insert_young(&self, generations: &mut (Generation, Generation), key: Vec<u8>, value: Vec<u8>) -> bool {
        let size = key.len() + value.len();
        let half = self.max_bytes / 2;
        if size > half {
            return false;
        }
        if generations.0.bytes + size > half {
            generations.1 = std::mem::take(&mut generations.0);
        }
        generations.0.add(key, value);
        true
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let mut generations = self.generations.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = match generations.0.entries.get(key) {
            Some(value) => Some(value.clone()),
            None => {
                // Promoted so that what is read survives the next turn.
                let old = generations.1.entries.remove(key);
                if let Some(value) = &old {
                    generations.1.bytes -= key.len() + value.len();
                    self.insert_young(&mut generations, key.to_vec(), value.clone());
                }
                old
            }
        };
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found.map(Cow::Owned)
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let mut generations = self.generations.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.insert_young(&mut generations, key.to_vec(), value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::CacheStore as _;

    #[test]
    fn a_stored_function_is_found_and_an_unknown_one_is_not() {
        let cache = FunctionCache::new(1 << 20);
        assert!(cache.get(b"f").is_none());
        assert!(cache.insert(b"f", vec![1, 2, 3]));
        assert_eq!(cache.get(b"f").as_deref(), Some(&[1u8, 2, 3][..]));
        assert_eq!(cache.stats(), FunctionCacheStats { hits: 1, misses: 1, bytes: 1 + 3 });
    }

    #[test]
    fn the_cache_never_holds_more_than_its_bound() {
        let cache = FunctionCache::new(1000);
        for index in 0..100u32 {
            cache.insert(&index.to_le_bytes(), vec![0; 96]);
            assert!(cache.bytes() <= 1000, "{} bytes held", cache.bytes());
        }
        // The latest entries are kept, the first ones are gone.
        assert!(cache.get(&99u32.to_le_bytes()).is_some());
        assert!(cache.get(&0u32.to_le_bytes()).is_none());
        // An entry larger than a generation is refused, not stored.
        assert!(!cache.insert(b"big", vec![0; 600]));
        assert!(cache.get(b"big").is_none());
    }

    #[test]
    fn a_function_read_from_the_old_generation_survives_the_next_turn() {
        let cache = FunctionCache::new(1000);
        cache.insert(b"kept", vec![7; 96]);
        for index in 0..4u32 {
            cache.insert(&index.to_le_bytes(), vec![0; 96]);
        }
        // `kept` is old now; reading it promotes it.
        assert!(cache.get(b"kept").is_some());
        for index in 4..8u32 {
            cache.insert(&index.to_le_bytes(), vec![0; 96]);
        }
        assert_eq!(cache.get(b"kept").as_deref(), Some(&[7u8; 96][..]));
        assert!(cache.bytes() <= 1000);
    }

    #[test]
    fn replacing_an_entry_counts_its_bytes_once() {
        let cache = FunctionCache::new(1 << 20);
        cache.insert(b"f", vec![0; 100]);
        cache.insert(b"f", vec![0; 10]);
        assert_eq!(cache.bytes(), 1 + 10);
    }
}
