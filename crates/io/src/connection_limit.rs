//! `ConnectionLimit`: how many connections are open against a maximum, shared by a server's
//! threads; `ConnectionSlot`: one open connection's place in it, given back when the slot is
//! dropped.
//!
//! An RAII slot rather than a counter each path adds to and takes from: the place is given
//! back however the connection ends (served, refused on the way, its task cancelled at drain,
//! a panic), so the count cannot leak, and a connection that changes hands (a node's
//! connection restored after a handoff) carries its place with it. A slot costs what the
//! counter did: one atomic add to claim, one to give back, and no allocation (the slot holds a
//! clone of the limit's `Arc`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Open connections and the most that may be open at once.
#[derive(Debug)]
pub struct ConnectionLimit {
    open: AtomicUsize,
    max: usize,
}

impl ConnectionLimit {
    /// A limit of `max` open connections, none open yet.
    pub fn new(max: usize) -> Arc<ConnectionLimit> {
        Arc::new(ConnectionLimit { open: AtomicUsize::new(0), max })
    }

    /// A place for one more connection, unless `max` are open already.
    pub fn claim(self: &Arc<Self>) -> Option<ConnectionSlot> {
        let open = self.open.fetch_add(1, Relaxed);
        if open >= self.max {
            self.open.fetch_sub(1, Relaxed);
            return None;
        }
        Some(ConnectionSlot(self.clone()))
    }

    /// A place for a connection that must be served whatever the count (one the server
    /// already holds and cannot turn away, such as the switch's connection restored after a
    /// node refused it): counted like the others, even past `max`.
    pub fn claim_always(self: &Arc<Self>) -> ConnectionSlot {
        self.open.fetch_add(1, Relaxed);
        ConnectionSlot(self.clone())
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Relaxed)
    }

    /// The most that may be open at once.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// One open connection's place in a [`ConnectionLimit`], from `claim` until dropped.
#[derive(Debug)]
pub struct ConnectionSlot(Arc<ConnectionLimit>);

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_past_the_maximum_is_refused_and_leaves_the_count_as_it_was() {
        let limit = ConnectionLimit::new(2);
        let (a, b) = (limit.claim(), limit.claim());
        assert!(a.is_some() && b.is_some());
        assert!(limit.claim().is_none());
        assert_eq!(limit.open(), 2);
        assert_eq!(limit.max(), 2);
    }

    #[test]
    fn a_slot_released_on_drop_frees_its_place() {
        let limit = ConnectionLimit::new(1);
        let slot = limit.claim().unwrap();
        assert!(limit.claim().is_none());
        drop(slot);
        assert_eq!(limit.open(), 0);
        assert!(limit.claim().is_some(), "the freed place is claimed again");
    }

    #[test]
    fn a_slot_in_a_task_that_is_cancelled_is_given_back() {
        let limit = ConnectionLimit::new(1);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let slot = limit.claim().unwrap();
        rt.spawn(async move {
            std::future::pending::<()>().await;
            drop(slot);
        });
        drop(rt);
        assert_eq!(limit.open(), 0);
    }

    #[test]
    fn a_place_claimed_always_is_counted_past_the_maximum_and_given_back() {
        let limit = ConnectionLimit::new(1);
        let first = limit.claim().unwrap();
        let restored = limit.claim_always();
        assert_eq!(limit.open(), 2);
        assert!(limit.claim().is_none());
        drop((first, restored));
        assert_eq!(limit.open(), 0);
    }

    #[test]
    fn a_zero_limit_admits_nothing() {
        assert!(ConnectionLimit::new(0).claim().is_none());
    }
}
