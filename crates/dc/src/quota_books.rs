//! The Resource-Aware home's books: per co-op, the documents of this home placed there with
//! their sizes, their total A_s, and the co-op's quota Q_s (a default, or set per co-op). A
//! booking that would take A_s over Q_s is refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::ServerId;

/// Per co-op placements and quotas of one home.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuotaBooks {
    default_quota: u64,
    quotas: BTreeMap<ServerId, u64>,
    placed: BTreeMap<ServerId, BTreeMap<Arc<str>, u64>>,
    used: BTreeMap<ServerId, u64>,
}

impl QuotaBooks {
    /// Books where every co-op's quota is `default_quota` bytes until `set_quota`.
    pub fn new(default_quota: u64) -> QuotaBooks {
        QuotaBooks { default_quota, ..QuotaBooks::default() }
    }

    /// Q_s.
    pub fn quota(&self, coop: ServerId) -> u64 {
        self.quotas.get(&coop).copied().unwrap_or(self.default_quota)
    }

    /// Sets Q_s (e.g. from configuration or the co-op's reported free bytes plus A_s). A
    /// quota below A_s makes the next balancing round revoke until A_s fits.
    pub fn set_quota(&mut self, coop: ServerId, quota: u64) {
        self.quotas.insert(coop, quota);
    }

    /// A_s: bytes of this home's documents placed on `coop`.
    pub fn used(&self, coop: ServerId) -> u64 {
        self.used.get(&coop).copied().unwrap_or(0)
    }

    /// Q_s - A_s, or 0 when over quota.
    pub fn room(&self, coop: ServerId) -> u64 {
        self.quota(coop).saturating_sub(self.used(coop))
    }

    /// Whether `path` is booked on `coop`.
    pub fn contains(&self, coop: ServerId, path: &str) -> bool {
        self.placed.get(&coop).is_some_and(|docs| docs.contains_key(path))
    }

    /// The documents booked on `coop` with their sizes, by path.
    pub fn docs(&self, coop: ServerId) -> impl Iterator<Item = (&Arc<str>, u64)> + '_ {
        self.placed.get(&coop).into_iter().flat_map(|docs| docs.iter().map(|(p, &s)| (p, s)))
    }

    /// Co-ops with at least one booking.
    pub fn coops(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.placed.iter().filter(|(_, docs)| !docs.is_empty()).map(|(&s, _)| s)
    }

    /// Books `path` of `size` bytes on `coop`; refused (false) if already booked or if A_s
    /// would exceed Q_s.
    pub fn book(&mut self, coop: ServerId, path: Arc<str>, size: u64) -> bool {
        if self.contains(coop, &path) || size > self.room(coop) {
            return false;
        }
        self.placed.entry(coop).or_default().insert(path, size);
        *self.used.entry(coop).or_insert(0) += size;
        true
    }

    /// Removes `path` from `coop`'s books, returning its size.
    pub fn unbook(&mut self, coop: ServerId, path: &str) -> Option<u64> {
        let size = self.placed.get_mut(&coop)?.remove(path)?;
        if let Some(used) = self.used.get_mut(&coop) {
            *used -= size;
        }
        Some(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn books_refuse_bookings_over_quota_and_track_totals() {
        let mut b = QuotaBooks::new(100);
        let s = ServerId(1);
        assert!(b.book(s, "/a".into(), 60));
        assert!(!b.book(s, "/a".into(), 10));
        assert!(!b.book(s, "/b".into(), 41));
        assert!(b.book(s, "/b".into(), 40));
        assert_eq!((b.used(s), b.room(s)), (100, 0));
        assert_eq!(b.unbook(s, "/a"), Some(60));
        assert_eq!(b.unbook(s, "/a"), None);
        assert_eq!(b.used(s), 40);
        b.set_quota(s, 10);
        assert_eq!(b.room(s), 0);
        assert_eq!(b.coops().collect::<Vec<_>>(), [s]);
    }
}
