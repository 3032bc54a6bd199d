//! Reference twin of [`crate::exact::ExactTable`]: a `std::collections::HashMap` wrapper with
//! the same data-path signatures. Unbounded (no `Full`); tests only.

use std::collections::HashMap;
use std::hash::Hash;

/// Exact-match map, the obviously-correct way.
#[derive(Clone, Debug, Default)]
pub struct RefExact<K, V> {
    map: HashMap<K, V>,
}

impl<K: Copy + Eq + Hash, V: Copy> RefExact<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        RefExact { map: HashMap::new() }
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Inserts or updates; returns the old value.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        self.map.insert(k, v)
    }
    /// Removes `k`, returning its value.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        self.map.remove(k)
    }
    /// The value of `k`.
    pub fn lookup(&self, k: &K) -> Option<V> {
        self.map.get(k).copied()
    }
    /// `out[i] = lookup(keys[i])` over the common length; returns the number of hits.
    pub fn lookup_batch(&self, keys: &[K], out: &mut [Option<V>]) -> u64 {
        let mut hits = 0;
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.lookup(k);
            hits += u64::from(o.is_some());
        }
        hits
    }
}
