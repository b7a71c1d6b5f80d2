//! Counters of a running node: one cache-line-aligned block per worker thread (so the hot
//! path never shares a counter between cores), summed on read into `NodeStats`, plus the
//! node-wide connection limit (its open count is the connection gauge), handoff counters and
//! the count of configuration reloads applied and refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use locus_io::ConnectionLimit;

use serde::Serialize;

/// Status codes counted separately; anything else is counted as "other".
pub const COUNTED_STATUSES: [u16; 18] =
    [200, 206, 301, 304, 400, 403, 404, 405, 408, 413, 416, 417, 431, 500, 502, 503, 504, 505];

fn status_slot(status: u16) -> usize {
    COUNTED_STATUSES.iter().position(|&s| s == status).unwrap_or(COUNTED_STATUSES.len())
}

/// Whether a static response was served from the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheStatus {
    Hit,
    Miss,
    /// Not cacheable (too large, or the cache is disabled).
    Bypass,
    /// A local miss served from a peer's memory (cooperative caching); counted as a miss.
    Remote,
}

impl CacheStatus {
    /// The `X-Locus-Cache` header line.
    pub fn header_line(self) -> &'static [u8] {
        match self {
            CacheStatus::Hit => b"X-Locus-Cache: hit\r\n",
            CacheStatus::Miss => b"X-Locus-Cache: miss\r\n",
            CacheStatus::Bypass => b"X-Locus-Cache: bypass\r\n",
            CacheStatus::Remote => b"X-Locus-Cache: remote\r\n",
        }
    }
}

/// One worker's counters.
#[repr(align(128))]
#[derive(Default)]
pub struct WorkerCounters {
    requests: AtomicU64,
    bytes_sent: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    bypass: AtomicU64,
    dynamic: AtomicU64,
    /// Requests started minus requests finished (wrapping; summed as signed).
    in_flight: AtomicU64,
    /// Requests whose connection closed with their response still unsent.
    unanswered: AtomicU64,
    /// Requests being served here now, static and dynamic (wrapping; summed as signed).
    static_active: AtomicU64,
    dynamic_active: AtomicU64,
    statuses: [AtomicU64; COUNTED_STATUSES.len() + 1],
}

fn bump(c: &AtomicU64, n: u64) {
    // Only the owning worker writes: a load and a store avoid a locked instruction.
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

impl WorkerCounters {
    pub fn request_started(&self) {
        bump(&self.requests, 1);
        bump(&self.in_flight, 1);
    }

    pub fn request_finished(&self, status: u16) {
        bump(&self.in_flight, u64::MAX);
        bump(&self.statuses[status_slot(status)], 1);
    }

    /// The request ended without a response leaving: its connection closed with the
    /// response still queued (a request body that broke its framing). No status is counted.
    pub fn request_unanswered(&self) {
        bump(&self.in_flight, u64::MAX);
        bump(&self.unanswered, 1);
    }

    pub fn sent(&self, bytes: u64) {
        bump(&self.bytes_sent, bytes);
    }

    pub fn cache(&self, status: CacheStatus) {
        match status {
            CacheStatus::Hit => bump(&self.hits, 1),
            CacheStatus::Miss | CacheStatus::Remote => bump(&self.misses, 1),
            CacheStatus::Bypass => bump(&self.bypass, 1),
        }
    }

    pub fn dynamic(&self) {
        bump(&self.dynamic, 1);
    }

    /// A request is being served here from now until the guard drops: static unless it is
    /// made dynamic.
    pub fn active_request(&self) -> ActiveRequest<'_> {
        bump(&self.static_active, 1);
        ActiveRequest { counters: self, dynamic: false }
    }
}

/// One request in service, counted in `static_active` or `dynamic_active` until dropped
/// (however the request ends, including cancellation).
pub struct ActiveRequest<'a> {
    counters: &'a WorkerCounters,
    dynamic: bool,
}

impl ActiveRequest<'_> {
    /// The request turned out to be dynamic (its target matched a class).
    pub fn make_dynamic(&mut self) {
        if !self.dynamic {
            bump(&self.counters.static_active, u64::MAX);
            bump(&self.counters.dynamic_active, 1);
            self.dynamic = true;
        }
    }
}

impl Drop for ActiveRequest<'_> {
    fn drop(&mut self) {
        let c = self.counters;
        bump(if self.dynamic { &c.dynamic_active } else { &c.static_active }, u64::MAX);
    }
}

/// All counters of a node.
pub struct NodeMetrics {
    workers: Box<[WorkerCounters]>,
    /// Open client connections (each holds a slot from `claim`) against `max_connections`.
    pub connections: Arc<ConnectionLimit>,
    /// Connections accepted since start.
    pub connections_total: AtomicU64,
    /// Connections closed at once because `max_connections` were open.
    pub connections_refused: AtomicU64,
    /// Failed accepts on the client listener (out of descriptors, memory or buffers, or a
    /// connection reset before it was taken).
    pub accept_errors: AtomicU64,
    /// Handed-off connections restored and answered `Ready`.
    pub handoffs_accepted: AtomicU64,
    /// Handed-off connections answered `Refused`.
    pub handoffs_refused: AtomicU64,
    /// Connections given back to the switch with `Rehandoff`.
    pub rehandoffs: AtomicU64,
    /// Requests fetched from another node and relayed (back-end forwarding).
    pub backend_forwards: AtomicU64,
    /// `Route` questions sent to the switch.
    pub routes_asked: AtomicU64,
    /// Requests served here because asking the switch gave no usable answer (no channel or
    /// `Hello` yet, the channel lost, no `RouteTo` in time, an unknown peer).
    pub routes_unanswered: AtomicU64,
    /// Live control channels from switches (a gauge).
    pub handoff_channels: AtomicU64,
    /// This node's id in the switch's cluster plus one, from the newest `Hello`; 0 before any
    /// (until then the agent serves every request itself).
    pub handoff_node_id: AtomicU64,
    /// Configuration reloads put in force.
    pub reloads: AtomicU64,
    /// Configuration reloads refused (the running configuration stayed).
    pub reloads_refused: AtomicU64,
}

impl NodeMetrics {
    /// Counters for `workers` workers, and a limit of `max_connections` open connections.
    /// Each worker's block is written only by that worker's thread (a lost update from a
    /// stray writer would only skew a statistic).
    pub fn new(workers: usize, max_connections: usize) -> NodeMetrics {
        NodeMetrics {
            workers: (0..workers.max(1)).map(|_| WorkerCounters::default()).collect(),
            connections: ConnectionLimit::new(max_connections),
            connections_total: AtomicU64::new(0),
            connections_refused: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            handoffs_accepted: AtomicU64::new(0),
            handoffs_refused: AtomicU64::new(0),
            rehandoffs: AtomicU64::new(0),
            backend_forwards: AtomicU64::new(0),
            routes_asked: AtomicU64::new(0),
            routes_unanswered: AtomicU64::new(0),
            handoff_channels: AtomicU64::new(0),
            handoff_node_id: AtomicU64::new(0),
            reloads: AtomicU64::new(0),
            reloads_refused: AtomicU64::new(0),
        }
    }

    /// The counters of worker `i`.
    pub fn worker(&self, i: usize) -> &WorkerCounters {
        &self.workers[i.min(self.workers.len() - 1)]
    }

    /// Sum over workers.
    pub fn snapshot(&self) -> NodeStats {
        let sum = |f: fn(&WorkerCounters) -> &AtomicU64| {
            self.workers.iter().fold(0u64, |acc, w| acc.wrapping_add(f(w).load(Ordering::Relaxed)))
        };
        let mut statuses = [0u64; COUNTED_STATUSES.len() + 1];
        for w in self.workers.iter() {
            for (total, c) in statuses.iter_mut().zip(w.statuses.iter()) {
                *total += c.load(Ordering::Relaxed);
            }
        }
        NodeStats {
            requests: sum(|w| &w.requests),
            hits: sum(|w| &w.hits),
            misses: sum(|w| &w.misses),
            bypass: sum(|w| &w.bypass),
            dynamic: sum(|w| &w.dynamic),
            bytes_sent: sum(|w| &w.bytes_sent),
            in_flight: (sum(|w| &w.in_flight) as i64).max(0) as u64,
            static_active: (sum(|w| &w.static_active) as i64).max(0) as u64,
            dynamic_active: (sum(|w| &w.dynamic_active) as i64).max(0) as u64,
            unanswered: sum(|w| &w.unanswered),
            active_connections: self.connections.open() as u64,
            connections_total: self.connections_total.load(Ordering::Relaxed),
            connections_refused: self.connections_refused.load(Ordering::Relaxed),
            accept_errors: self.accept_errors.load(Ordering::Relaxed),
            handoffs_accepted: self.handoffs_accepted.load(Ordering::Relaxed),
            handoffs_refused: self.handoffs_refused.load(Ordering::Relaxed),
            rehandoffs: self.rehandoffs.load(Ordering::Relaxed),
            backend_forwards: self.backend_forwards.load(Ordering::Relaxed),
            routes_asked: self.routes_asked.load(Ordering::Relaxed),
            routes_unanswered: self.routes_unanswered.load(Ordering::Relaxed),
            handoff_channels: self.handoff_channels.load(Ordering::Relaxed),
            handoff_node_id: self.handoff_node_id.load(Ordering::Relaxed).checked_sub(1),
            reloads: self.reloads.load(Ordering::Relaxed),
            reloads_refused: self.reloads_refused.load(Ordering::Relaxed),
            statuses: COUNTED_STATUSES
                .iter()
                .map(|s| s.to_string())
                .chain(std::iter::once("other".to_string()))
                .zip(statuses)
                .filter(|(_, n)| *n > 0)
                .collect(),
        }
    }
}

/// A snapshot of a node's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodeStats {
    /// Requests whose head was parsed.
    pub requests: u64,
    /// Static responses served from the cache.
    pub hits: u64,
    /// Static responses read from disk or the origin and cached.
    pub misses: u64,
    /// Static responses not cacheable (too large, or the cache is off).
    pub bypass: u64,
    /// Dynamic (class table) responses.
    pub dynamic: u64,
    /// Bytes written to clients (heads and bodies).
    pub bytes_sent: u64,
    /// Requests being handled now.
    pub in_flight: u64,
    /// Requests whose connection closed before their response was sent (not in `statuses`).
    pub unanswered: u64,
    /// Requests served here now (from head parsed to response sent) that are not dynamic.
    pub static_active: u64,
    /// Dynamic (class table) requests served here now.
    pub dynamic_active: u64,
    /// Open client connections.
    pub active_connections: u64,
    pub connections_total: u64,
    pub connections_refused: u64,
    /// Failed accepts on the client listener.
    pub accept_errors: u64,
    /// Handed-off connections taken over (`Ready`).
    pub handoffs_accepted: u64,
    /// Handed-off connections refused (`Refused`).
    pub handoffs_refused: u64,
    /// Connections given back to the switch for another node (`Rehandoff`).
    pub rehandoffs: u64,
    /// Requests fetched from another node and relayed (back-end forwarding).
    pub backend_forwards: u64,
    /// `Route` questions sent to the switch.
    pub routes_asked: u64,
    /// Requests served here for want of a usable `RouteTo`.
    pub routes_unanswered: u64,
    /// Live control channels from switches now.
    pub handoff_channels: u64,
    /// This node's id in the switch's cluster (from the switch's `Hello`), once known.
    pub handoff_node_id: Option<u64>,
    /// Configuration reloads put in force.
    pub reloads: u64,
    /// Configuration reloads refused (the running configuration stayed).
    pub reloads_refused: u64,
    /// Responses per status code (codes with a count only).
    pub statuses: Vec<(String, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_over_workers_and_track_in_flight() {
        let m = NodeMetrics::new(2, 10);
        m.worker(0).request_started();
        m.worker(1).request_started();
        m.worker(1).request_finished(200);
        m.worker(0).cache(CacheStatus::Hit);
        m.worker(1).cache(CacheStatus::Miss);
        m.worker(1).sent(100);
        m.worker(7).sent(1);
        let s = m.snapshot();
        assert_eq!((s.requests, s.in_flight, s.hits, s.misses, s.bytes_sent), (2, 1, 1, 1, 101));
        m.worker(0).request_finished(999);
        let s = m.snapshot();
        assert_eq!(s.in_flight, 0);
        assert_eq!(s.statuses, vec![("200".to_string(), 1), ("other".to_string(), 1)]);
        m.worker(1).request_started();
        m.worker(1).request_unanswered();
        let s = m.snapshot();
        assert_eq!((s.requests, s.in_flight, s.unanswered), (3, 0, 1));
        assert_eq!(s.statuses.iter().map(|(_, n)| n).sum::<u64>(), 2, "no status for an unanswered request");
    }

    #[test]
    fn active_requests_count_as_static_until_made_dynamic_and_end_when_dropped() {
        let m = NodeMetrics::new(2, 10);
        let a = m.worker(0).active_request();
        let mut b = m.worker(1).active_request();
        assert_eq!((m.snapshot().static_active, m.snapshot().dynamic_active), (2, 0));
        b.make_dynamic();
        b.make_dynamic();
        assert_eq!((m.snapshot().static_active, m.snapshot().dynamic_active), (1, 1));
        drop(b);
        assert_eq!((m.snapshot().static_active, m.snapshot().dynamic_active), (1, 0));
        drop(a);
        assert_eq!((m.snapshot().static_active, m.snapshot().dynamic_active), (0, 0));
    }
}
