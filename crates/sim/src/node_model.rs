//! `NodeModel`: one simulated back-end — a CPU queue, one or more disk queues, the node's
//! own `DocCache` (whole files, chosen replacement, u32 keys with a fast hasher), the reads
//! in progress that later requests for the same file join, and `LoadMeter`, which integrates
//! the node's load over time for mean load and idle time.

use std::collections::HashMap;

use locus_cache::{DocCache, Replacement};

use crate::directory::BuildIdHasher;
use crate::network::NodeLink;
use crate::queues::{CpuQueue, DiskQueue};

/// No slot (end of a wait list).
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// Requests waiting for one file to arrive in memory: a list threaded through the engine's
/// request slots, oldest first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitList {
    pub head: u32,
    pub tail: u32,
}

/// Integrates a node's load (requests assigned and not completed) over time.
#[derive(Clone, Debug, Default)]
pub struct LoadMeter {
    load: u32,
    since: u64,
    start: u64,
    /// Loads below this count as idle (`ceil` of the fractional threshold).
    idle_below: u32,
    idle_ns: u64,
    load_ns: u128,
    max_load: u32,
}

impl LoadMeter {
    /// A meter at load 0 from time 0; loads below `threshold` count as idle.
    pub fn new(threshold: f64) -> LoadMeter {
        LoadMeter { idle_below: threshold.max(0.0).ceil() as u32, ..LoadMeter::default() }
    }

    /// The load changed to `load` at `now`.
    #[inline]
    pub fn set(&mut self, now: u64, load: u32) {
        self.advance(now);
        self.load = load;
        self.max_load = self.max_load.max(load);
    }

    #[inline]
    fn advance(&mut self, now: u64) {
        let dt = now.saturating_sub(self.since);
        if self.load < self.idle_below {
            self.idle_ns += dt;
        }
        self.load_ns += self.load as u128 * dt as u128;
        self.since = self.since.max(now);
    }

    /// Forget everything before `now` (end of warm-up).
    pub fn restart(&mut self, now: u64) {
        self.advance(now);
        self.start = now;
        self.idle_ns = 0;
        self.load_ns = 0;
        self.max_load = self.load;
    }

    /// (idle share, mean load, max load) from the start to `end`.
    pub fn finish(&mut self, end: u64) -> (f64, f64, u32) {
        self.advance(end);
        let span = end.saturating_sub(self.start);
        if span == 0 {
            return (if self.load < self.idle_below { 1.0 } else { 0.0 }, self.load as f64, self.max_load);
        }
        (self.idle_ns as f64 / span as f64, self.load_ns as f64 / span as f64, self.max_load)
    }
}

/// Per-node counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeCounters {
    /// Requests that reached the node.
    pub requests: u64,
    /// Static requests served from the node's own memory.
    pub local_hits: u64,
    /// Static requests served from another node's memory (WRR/GMS, cooperative caching).
    pub remote_hits: u64,
    /// Static requests that waited for a disk read (their own or a shared one).
    pub misses: u64,
    /// Dynamic requests.
    pub dynamic: u64,
    /// Disk (or file-server) reads started.
    pub disk_reads: u64,
    /// Documents this node sent from its memory to another node (WRR/GMS, cooperative
    /// caching).
    pub remote_sends: u64,
}

/// One simulated back-end node.
pub struct NodeModel {
    pub(crate) cpu: CpuQueue,
    pub(crate) disks: Vec<DiskQueue>,
    pub(crate) cache: DocCache<u32, (), BuildIdHasher>,
    pub(crate) reads: HashMap<u32, WaitList, BuildIdHasher>,
    /// Last use of each document on this node, for the LRU/LFU age floor of the directory
    /// (empty unless needed).
    pub(crate) last_use: Vec<u64>,
    pub(crate) meter: LoadMeter,
    pub(crate) counters: NodeCounters,
    /// CPU and disk busy time at the start of measurement.
    pub(crate) busy_at_start: (u64, u64),
    /// The node's network link, if links are modelled.
    pub(crate) link: Option<NodeLink>,
    /// TX and RX busy time and bytes at the start of measurement.
    pub(crate) link_at_start: [u64; 4],
}

impl NodeModel {
    /// A node with `disks` disks and a cache of `capacity` bytes (objects up to
    /// `max_object`), counting loads below `idle_threshold` as idle.
    pub fn new(
        disks: u32,
        capacity: u64,
        max_object: u64,
        replacement: Replacement,
        idle_threshold: f64,
        track_last_use: Option<usize>,
    ) -> NodeModel {
        NodeModel {
            cpu: CpuQueue::default(),
            disks: vec![DiskQueue::default(); disks.max(1) as usize],
            cache: DocCache::with_hasher(capacity, max_object, replacement, BuildIdHasher),
            reads: HashMap::with_hasher(BuildIdHasher),
            last_use: track_last_use.map_or_else(Vec::new, |docs| vec![0; docs]),
            meter: LoadMeter::new(idle_threshold),
            counters: NodeCounters::default(),
            busy_at_start: (0, 0),
            link: None,
            link_at_start: [0; 4],
        }
    }

    /// Disk time used so far, over all disks.
    pub fn disk_busy_ns(&self) -> u64 {
        self.disks.iter().map(DiskQueue::busy_ns).sum()
    }

    /// Forget counters before `now` (end of warm-up).
    pub(crate) fn restart(&mut self, now: u64) {
        self.counters = NodeCounters::default();
        self.meter.restart(now);
        self.busy_at_start = (self.cpu.busy_ns(), self.disk_busy_ns());
        self.link_at_start = self.link_counters();
    }

    /// TX busy ns, RX busy ns, TX bytes, RX bytes so far (zeros without a link).
    pub(crate) fn link_counters(&self) -> [u64; 4] {
        self.link.as_ref().map_or([0; 4], |l| [l.tx.busy_ns(), l.rx.busy_ns(), l.tx.bytes(), l.rx.bytes()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_meter_integrates_idle_time_and_mean_load() {
        let mut m = LoadMeter::new(2.0);
        m.set(10, 1); // 0..10 at 0: idle
        m.set(30, 3); // 10..30 at 1: idle
        m.set(70, 0); // 30..70 at 3: busy
        let (idle, mean, max) = m.finish(100); // 70..100 at 0: idle
        assert!((idle - 0.6).abs() < 1e-12, "{idle}");
        assert!((mean - (20.0 + 120.0) / 100.0).abs() < 1e-12, "{mean}");
        assert_eq!(max, 3);
    }
}
