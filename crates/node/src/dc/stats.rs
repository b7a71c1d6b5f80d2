//! Counters of DC mode (`DcStats`), node-wide atomics, reported in the `dc` object of
//! `/locus/status` and as `locus_node_dc_*` in `/metrics`. Control requests from peers are
//! counted here only, never as client requests.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

/// Why a fetch of a copy from its home gave nothing usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FetchFailure {
    /// No answer in time.
    Timeout,
    /// Connection refused, reset or closed before an answer: the home is down.
    Refused,
    /// The body ended before its Content-Length.
    Truncated,
    /// More bytes than the Content-Length, or larger than a copy may be.
    Oversized,
    /// Not HTTP, no Content-Length, or a status other than 200, 304 and the definite answers
    /// passed on (`fetch::is_definite_answer`).
    BadReply,
    /// The home refused the request as not a member's (403 with `X-Locus-Peer-Refused`:
    /// the peer keys differ, or without keys this node's address is not the one it knows).
    Unauthorized,
}

impl FetchFailure {
    pub const ALL: [FetchFailure; 6] = [
        FetchFailure::Timeout,
        FetchFailure::Refused,
        FetchFailure::Truncated,
        FetchFailure::Oversized,
        FetchFailure::BadReply,
        FetchFailure::Unauthorized,
    ];

    pub fn label(self) -> &'static str {
        match self {
            FetchFailure::Timeout => "timeout",
            FetchFailure::Refused => "refused",
            FetchFailure::Truncated => "truncated",
            FetchFailure::Oversized => "oversized",
            FetchFailure::BadReply => "bad_reply",
            FetchFailure::Unauthorized => "unauthorized",
        }
    }
}

/// The counters.
#[derive(Default)]
pub struct DcStats {
    /// Copies fetched from homes (200), one per fetch however many requests waited.
    pub fetches_ok: AtomicU64,
    failures: [AtomicU64; 6],
    /// Co-op validations answered 304 (copy kept) and 200 (copy replaced).
    pub validations_304: AtomicU64,
    pub validations_200: AtomicU64,
    /// Copies sent to co-ops as the home (`/~dc/fetch` answered 200).
    pub fetches_served: AtomicU64,
    /// Deletion notices sent (co-op) and received (home).
    pub notices_sent: AtomicU64,
    pub notices_received: AtomicU64,
    /// Invalidations and updates sent (home) and received (co-op).
    pub invalidations_sent: AtomicU64,
    pub invalidations_received: AtomicU64,
    /// Replica requests answered from this node's store, and after a fetch.
    pub replica_hits: AtomicU64,
    pub replica_fetched: AtomicU64,
    /// HTML responses rewritten (home pages with a replicated target, copies).
    pub rewritten_pages: AtomicU64,
    /// Copies of pages that could not be parsed (served unmodified).
    pub unmodifiable_copies: AtomicU64,
    /// Balancer decisions applied to this home's map.
    pub placements: AtomicU64,
    pub revocations: AtomicU64,
    /// Pings and map pulls sent; control requests refused (403, 400, 404, 405).
    pub pings_sent: AtomicU64,
    pub map_pulls: AtomicU64,
    pub control_refused: AtomicU64,
    /// Documents of this home whose version moved since start.
    pub documents_changed: AtomicU64,
}

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// A snapshot of `DcStats`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DcSnapshot {
    pub fetches_ok: u64,
    pub fetch_failures: Vec<(String, u64)>,
    pub validations_304: u64,
    pub validations_200: u64,
    pub fetches_served: u64,
    pub notices_sent: u64,
    pub notices_received: u64,
    pub invalidations_sent: u64,
    pub invalidations_received: u64,
    pub replica_hits: u64,
    pub replica_fetched: u64,
    pub rewritten_pages: u64,
    pub unmodifiable_copies: u64,
    pub placements: u64,
    pub revocations: u64,
    pub pings_sent: u64,
    pub map_pulls: u64,
    pub control_refused: u64,
    pub documents_changed: u64,
}

impl DcStats {
    pub fn failed(&self, why: FetchFailure) {
        add(&self.failures[why as usize], 1);
    }

    pub fn snapshot(&self) -> DcSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DcSnapshot {
            fetches_ok: get(&self.fetches_ok),
            fetch_failures: FetchFailure::ALL
                .iter()
                .map(|&f| (f.label().to_string(), get(&self.failures[f as usize])))
                .collect(),
            validations_304: get(&self.validations_304),
            validations_200: get(&self.validations_200),
            fetches_served: get(&self.fetches_served),
            notices_sent: get(&self.notices_sent),
            notices_received: get(&self.notices_received),
            invalidations_sent: get(&self.invalidations_sent),
            invalidations_received: get(&self.invalidations_received),
            replica_hits: get(&self.replica_hits),
            replica_fetched: get(&self.replica_fetched),
            rewritten_pages: get(&self.rewritten_pages),
            unmodifiable_copies: get(&self.unmodifiable_copies),
            placements: get(&self.placements),
            revocations: get(&self.revocations),
            pings_sent: get(&self.pings_sent),
            map_pulls: get(&self.map_pulls),
            control_refused: get(&self.control_refused),
            documents_changed: get(&self.documents_changed),
        }
    }
}

/// Gauges of a DC node's state now, for `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct DcGauges {
    pub own_load: f64,
    /// (server name, load, age in ms) of every peer with a report.
    pub loads: Vec<(String, f64, u64)>,
    pub replicated_docs: u64,
    pub map_entries: u64,
    pub store_bytes: u64,
    pub store_quota: u64,
    pub store_copies: u64,
    pub unmodifiable_pages: u64,
}

impl DcSnapshot {
    /// Register the `dc_*` metrics.
    pub fn register(&self, registry: &mut Registry, gauges: &DcGauges) {
        let counter = crate::admin::register_counter;
        let gauge = crate::admin::register_gauge;
        counter(registry, "dc_fetches_ok", "Copies fetched from their homes", self.fetches_ok);
        let failures = Family::<Vec<(String, String)>, Counter>::default();
        for (reason, n) in &self.fetch_failures {
            failures.get_or_create(&vec![("reason".to_string(), reason.clone())]).inc_by(*n);
        }
        registry.register("dc_fetch_failures", "Fetches from a home that gave nothing usable", failures);
        let validations = Family::<Vec<(String, String)>, Counter>::default();
        validations.get_or_create(&vec![("status".into(), "304".into())]).inc_by(self.validations_304);
        validations.get_or_create(&vec![("status".into(), "200".into())]).inc_by(self.validations_200);
        registry.register("dc_validations", "Co-op validations with the home, by answer", validations);
        for (name, help, v) in [
            ("dc_fetches_served", "Copies sent to co-ops as the home", self.fetches_served),
            ("dc_notices_sent", "Deletion notices sent to homes", self.notices_sent),
            ("dc_notices_received", "Deletion notices received as the home", self.notices_received),
            ("dc_invalidations_sent", "Invalidations and updates sent to co-ops", self.invalidations_sent),
            ("dc_invalidations_received", "Invalidations and updates received", self.invalidations_received),
            ("dc_replica_hits", "Replica requests served from the store", self.replica_hits),
            ("dc_replica_fetched", "Replica requests served after a fetch", self.replica_fetched),
            ("dc_rewritten_pages", "HTML responses rewritten", self.rewritten_pages),
            ("dc_unmodifiable_copies", "Page copies served unmodified", self.unmodifiable_copies),
            ("dc_placements", "Copies placed in this home's replica map", self.placements),
            ("dc_revocations", "Copies revoked from this home's replica map", self.revocations),
            ("dc_pings_sent", "Pings sent to peers", self.pings_sent),
            ("dc_map_pulls", "Replica map pulls from homes", self.map_pulls),
            ("dc_control_refused", "Control requests refused", self.control_refused),
            ("dc_documents_changed", "Documents of this home whose version moved", self.documents_changed),
        ] {
            counter(registry, name, help, v);
        }
        let g: Gauge<f64, AtomicU64> = Gauge::default();
        g.set(gauges.own_load);
        registry.register("dc_own_load", "This node's load (connections per second, smoothed)", g);
        let loads = Family::<Vec<(String, String)>, Gauge<f64, AtomicU64>>::default();
        let ages = Family::<Vec<(String, String)>, Gauge>::default();
        for (name, load, age) in &gauges.loads {
            loads.get_or_create(&vec![("server".to_string(), name.clone())]).set(*load);
            ages.get_or_create(&vec![("server".to_string(), name.clone())])
                .set((*age).min(i64::MAX as u64) as i64);
        }
        registry.register("dc_peer_load", "Last load reported by each peer", loads);
        registry.register("dc_peer_load_age_ms", "Age of each peer's last load report", ages);
        gauge(
            registry,
            "dc_replicated_docs",
            "This home's documents on more than one server",
            gauges.replicated_docs,
        );
        gauge(registry, "dc_map_entries", "Replica map entries over every home", gauges.map_entries);
        gauge(registry, "dc_store_bytes", "Bytes of replicas held", gauges.store_bytes);
        gauge(registry, "dc_store_quota_bytes", "Replica store quota", gauges.store_quota);
        gauge(registry, "dc_store_copies", "Replicas held", gauges.store_copies);
        gauge(
            registry,
            "dc_unmodifiable_pages",
            "This home's pages served unmodified",
            gauges.unmodifiable_pages,
        );
    }
}
