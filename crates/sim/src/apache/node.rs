//! `ApacheNode`: the state of one process-driven back end — CPU (`NodeCpu`), pool, backlog, disk,
//! cache, the reads in progress that later misses join, the counts a metrics poll reports,
//! and what it did while measured.

use std::collections::HashMap;

use locus_cache::DocCache;
use locus_core::NodeReport;

use super::backlog::Backlog;
use super::cpu::NodeCpu;
use super::credit::CreditCpu;
use super::pool::Pool;
use crate::config::{CpuModel, SimConfig};
use crate::directory::BuildIdHasher;
use crate::node_model::LoadMeter;
use crate::queues::DiskQueue;
use crate::workload::Workload;

/// What a node did, counted from the start of measurement.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NodeCounts {
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    pub disk_reads: u64,
}

/// One simulated Apache node.
pub(super) struct ApacheNode {
    pub cpu: NodeCpu,
    /// Time of the CPU-completion event now scheduled (`u64::MAX`: none).
    pub cpu_event: u64,
    pub pool: Pool,
    pub backlog: Backlog,
    pub disk: DiskQueue,
    pub cache: DocCache<u32, (), BuildIdHasher>,
    /// Document → connections waiting for its read, the reader first.
    pub reads: HashMap<u32, Vec<u32>, BuildIdHasher>,
    /// Processes waiting for the disk (queued or reading).
    pub disk_wait: u32,
    /// Processes serving a static (or IMS/INV) request / a dynamic one.
    pub static_active: u32,
    pub dynamic_active: u32,
    /// A probe sent and not yet answered.
    pub probe_out: bool,
    /// Response time of the latest answered probe (every report carries it).
    pub last_probe: Option<std::time::Duration>,
    pub meter: LoadMeter,
    pub counts: NodeCounts,
    /// CPU and disk busy time at the start and end of measurement.
    pub busy_from: (u64, u64),
    pub busy_to: Option<(u64, u64)>,
}

impl ApacheNode {
    pub fn new(cfg: &SimConfig) -> ApacheNode {
        ApacheNode {
            cpu: match cfg.apache.cpu {
                CpuModel::Ps => NodeCpu::processor_sharing(),
                CpuModel::Credit => NodeCpu::Credit(CreditCpu::new(cfg.apache.slice_ns)),
            },
            cpu_event: u64::MAX,
            pool: Pool::new(&cfg.apache),
            backlog: Backlog::new(cfg.apache.backlog),
            disk: DiskQueue::default(),
            cache: DocCache::with_hasher(
                cfg.cache_capacity(),
                cfg.max_object(),
                cfg.cache.replacement,
                BuildIdHasher,
            ),
            reads: HashMap::with_hasher(BuildIdHasher),
            disk_wait: 0,
            static_active: 0,
            dynamic_active: 0,
            probe_out: false,
            last_probe: None,
            meter: LoadMeter::new(cfg.idle_threshold()),
            counts: NodeCounts::default(),
            busy_from: (0, 0),
            busy_to: None,
        }
    }

    /// Fill the cache with the most requested static documents of `w` that fit, inserting
    /// the least requested of them first (so the most requested are most recently used);
    /// returns them in that order.
    pub fn warm(&mut self, w: &Workload, capacity: u64) -> Vec<u32> {
        let mut order: Vec<u32> = (0..w.targets().len() as u32)
            .filter(|&id| {
                let t = &w.targets()[id as usize];
                t.class.is_none() && !t.missing && t.size > 0
            })
            .collect();
        order.sort_by_key(|&id| w.targets()[id as usize].popularity_rank);
        let mut used = 0u64;
        let fits = order
            .iter()
            .take_while(|&&id| {
                used += w.targets()[id as usize].size;
                used <= capacity
            })
            .count();
        order.truncate(fits);
        order.reverse();
        for &id in &order {
            self.cache.insert(id, (), w.targets()[id as usize].size, 1.0);
        }
        order
    }

    /// What a poll reads now: the host metrics and the latest probe's response time.
    pub fn snapshot(&self) -> NodeReport {
        NodeReport {
            listen_queue: self.backlog.len() as u32,
            disk_wait: self.disk_wait,
            static_active: self.static_active,
            dynamic_active: self.dynamic_active,
            probe: self.last_probe,
        }
    }

    /// (CPU, disk) busy time up to `now`.
    pub fn busy(&self, now: u64) -> (u64, u64) {
        let disk_ahead = self.disk.free_at().saturating_sub(now);
        (self.cpu.busy_until(now), self.disk.busy_ns().saturating_sub(disk_ahead))
    }
}
