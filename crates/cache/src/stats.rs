//! Counters a `DocCache` keeps about its lookups, insertions and evictions.

use serde::{Deserialize, Serialize};

/// Cumulative counters of one cache. `DocCache::clear` keeps them; `DocCache::reset_stats`
/// zeroes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    /// `get` calls that found the key.
    pub hits: u64,
    /// `get` calls that did not find the key.
    pub misses: u64,
    /// Objects stored by `insert`, including ones that replaced an object under the same key.
    pub insertions: u64,
    /// Objects evicted to make room for an insertion or to fit a `resize` (not `remove`d or
    /// replaced ones).
    pub evictions: u64,
    /// Sum of the sizes of the evicted objects.
    pub evicted_bytes: u64,
    /// Insertions refused because the object was over the per-object limit or the capacity.
    pub rejected_too_large: u64,
}

impl CacheStats {
    /// `hits / (hits + misses)`, or 0 before the first lookup.
    pub fn hit_ratio(&self) -> f64 {
        let lookups = self.hits + self.misses;
        if lookups == 0 { 0.0 } else { self.hits as f64 / lookups as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_ratio_is_zero_without_lookups_and_a_fraction_after() {
        assert_eq!(CacheStats::default().hit_ratio(), 0.0);
        let stats = CacheStats { hits: 3, misses: 1, ..CacheStats::default() };
        assert_eq!(stats.hit_ratio(), 0.75);
    }
}
