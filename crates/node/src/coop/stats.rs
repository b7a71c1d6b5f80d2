//! Counters of cooperative caching (`CoopStats`), node-wide atomics, reported in the `coop`
//! object of `/locus/status` and as `locus_node_coop_*` in `/metrics`. Requests from peers
//! (lookups, fetches, notices) are counted here only, never as client requests.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

/// Why a try at a peer (a lookup, a fetch, or a batch of notices) gave nothing usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerFailure {
    /// No answer within `timeout_ms`.
    Timeout,
    /// Connection refused, reset or closed: the peer is down.
    Refused,
    /// An answer that is not HTTP, truncated, of the wrong length, or a status other than
    /// 200/404.
    BadReply,
    /// The peer's copy is of another version of the document (validator mismatch).
    Stale,
    /// The peer no longer holds it (a notice not yet, or never, received).
    NotHeld,
    /// The peer refused the request as not a member's (403 with `X-Locus-Peer-Refused`:
    /// the peer keys differ, or without keys this node's address is not the one it knows).
    Unauthorized,
}

impl PeerFailure {
    pub const ALL: [PeerFailure; 6] = [
        PeerFailure::Timeout,
        PeerFailure::Refused,
        PeerFailure::BadReply,
        PeerFailure::Stale,
        PeerFailure::NotHeld,
        PeerFailure::Unauthorized,
    ];

    pub fn label(self) -> &'static str {
        match self {
            PeerFailure::Timeout => "timeout",
            PeerFailure::Refused => "refused",
            PeerFailure::BadReply => "bad_reply",
            PeerFailure::Stale => "stale",
            PeerFailure::NotHeld => "not_held",
            PeerFailure::Unauthorized => "unauthorized",
        }
    }

    /// Whether the peer is avoided for a while after it: it is down, slow or broken.
    pub fn backs_off(self) -> bool {
        matches!(
            self,
            PeerFailure::Timeout | PeerFailure::Refused | PeerFailure::BadReply | PeerFailure::Unauthorized
        )
    }
}

/// The counters.
#[derive(Default)]
pub struct CoopStats {
    /// Client requests answered with a document fetched from a peer.
    pub remote_hits: AtomicU64,
    /// Documents read from storage after a local miss (no peer held them, or every try failed).
    pub storage_reads: AtomicU64,
    /// Documents fetched from peers (one per fetch, however many requests waited for it).
    pub documents_from_peers: AtomicU64,
    pub bytes_from_peers: AtomicU64,
    failures: [AtomicU64; 6],
    /// Lookups and fetches not tried because the peer was being avoided after a failure.
    pub peers_skipped: AtomicU64,
    /// Documents sent to peers from memory (answers to lookups and fetches).
    pub fetches_served: AtomicU64,
    pub bytes_served: AtomicU64,
    /// Lookups and fetches answered 404 (not held, or another version).
    pub not_held_answers: AtomicU64,
    /// Lookups answered (as the home).
    pub lookups_served: AtomicU64,
    /// Coop requests refused with 403 (not a peer's: see the gate's reasons) or 400
    /// (malformed).
    pub refused: AtomicU64,
    pub notices_sent: AtomicU64,
    pub notices_received: AtomicU64,
    /// Notices not delivered (queue full, home down); the home's directory is then stale.
    pub notices_dropped: AtomicU64,
}

/// A snapshot of `CoopStats` plus the directory's size.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CoopSnapshot {
    pub remote_hits: u64,
    pub storage_reads: u64,
    pub documents_from_peers: u64,
    pub bytes_from_peers: u64,
    pub peer_failures: Vec<(String, u64)>,
    pub peers_skipped: u64,
    pub fetches_served: u64,
    pub bytes_served: u64,
    pub not_held_answers: u64,
    pub lookups_served: u64,
    pub refused: u64,
    pub notices_sent: u64,
    pub notices_received: u64,
    pub notices_dropped: u64,
    pub directory_documents: u64,
    pub directory_entries: u64,
}

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl CoopStats {
    pub fn failed(&self, why: PeerFailure) {
        add(&self.failures[why as usize], 1);
    }

    /// The counters now, with the directory's (documents, entries).
    pub fn snapshot(&self, directory: (usize, usize)) -> CoopSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CoopSnapshot {
            remote_hits: get(&self.remote_hits),
            storage_reads: get(&self.storage_reads),
            documents_from_peers: get(&self.documents_from_peers),
            bytes_from_peers: get(&self.bytes_from_peers),
            peer_failures: PeerFailure::ALL
                .iter()
                .map(|&f| (f.label().to_string(), get(&self.failures[f as usize])))
                .collect(),
            peers_skipped: get(&self.peers_skipped),
            fetches_served: get(&self.fetches_served),
            bytes_served: get(&self.bytes_served),
            not_held_answers: get(&self.not_held_answers),
            lookups_served: get(&self.lookups_served),
            refused: get(&self.refused),
            notices_sent: get(&self.notices_sent),
            notices_received: get(&self.notices_received),
            notices_dropped: get(&self.notices_dropped),
            directory_documents: directory.0 as u64,
            directory_entries: directory.1 as u64,
        }
    }
}

impl CoopSnapshot {
    /// Register the `coop_*` metrics; `local_hits` is the node's cache hits.
    pub fn register(&self, registry: &mut Registry, local_hits: u64) {
        let counter = |registry: &mut Registry, name: &str, help: &str, v: u64| {
            let c: Counter = Counter::default();
            c.inc_by(v);
            registry.register(name, help, c);
        };
        counter(registry, "coop_local_hits", "Static requests served from this node's cache", local_hits);
        counter(registry, "coop_remote_hits", "Local misses served from a peer's memory", self.remote_hits);
        counter(registry, "coop_storage_reads", "Local misses read from storage", self.storage_reads);
        counter(
            registry,
            "coop_documents_from_peers",
            "Documents fetched from peers",
            self.documents_from_peers,
        );
        counter(
            registry,
            "coop_bytes_from_peers",
            "Document bytes fetched from peers",
            self.bytes_from_peers,
        );
        let failures = Family::<Vec<(String, String)>, Counter>::default();
        for (reason, n) in &self.peer_failures {
            failures.get_or_create(&vec![("reason".to_string(), reason.clone())]).inc_by(*n);
        }
        registry.register("coop_peer_failures", "Tries at a peer that gave nothing usable", failures);
        counter(
            registry,
            "coop_peers_skipped",
            "Tries skipped: the peer failed recently",
            self.peers_skipped,
        );
        counter(registry, "coop_fetches_served", "Documents sent to peers from memory", self.fetches_served);
        counter(registry, "coop_bytes_served", "Document bytes sent to peers", self.bytes_served);
        counter(registry, "coop_not_held_answers", "Peer requests answered 404", self.not_held_answers);
        counter(registry, "coop_lookups_served", "Holder lookups answered as the home", self.lookups_served);
        counter(registry, "coop_refused", "Coop requests refused (not from a peer, malformed)", self.refused);
        counter(registry, "coop_notices_sent", "Insert/evict notices sent to homes", self.notices_sent);
        counter(registry, "coop_notices_received", "Insert/evict notices received", self.notices_received);
        counter(registry, "coop_notices_dropped", "Insert/evict notices not delivered", self.notices_dropped);
        let g: Gauge = Gauge::default();
        g.set(self.directory_entries.min(i64::MAX as u64) as i64);
        registry.register("coop_directory_entries", "(document, holder) pairs in this home's directory", g);
        let g: Gauge = Gauge::default();
        g.set(self.directory_documents.min(i64::MAX as u64) as i64);
        registry.register("coop_directory_documents", "Documents with a holder in this home's directory", g);
    }
}
