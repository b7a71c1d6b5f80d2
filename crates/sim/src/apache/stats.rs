//! `Measure`: what the process-driven engine counts over the measured requests (those
//! after the warm-up in trace order) — server latencies, SYNs, drops, retries, failures,
//! client delays, and the CPU/disk busy time between the first and the last measured
//! arrival — and the `SimReport` it makes of them.

use super::engine::{Engine, PROBE};
use super::node::ApacheNode;
use crate::engine::SimRun;
use crate::report::{NodeReport, ServerMetrics, SimReport};

/// Counts over the measured requests.
#[derive(Debug, Default)]
pub(super) struct Measure {
    /// Requests before this position in the trace are warm-up.
    pub warmup: u64,
    pub syns: u64,
    pub rejected: u64,
    pub retries: u64,
    pub failed: u64,
    /// Server latencies, ns.
    pub latencies: Vec<u64>,
    /// Client view: first SYN to the end of the connection, ns.
    pub delays: Vec<u64>,
    /// First and last measured arrival.
    pub start: Option<u64>,
    pub stop: Option<u64>,
    /// The policy's (static requests, predicted misses) counts at the start and the end.
    pub predictions: [Option<(u64, u64)>; 2],
}

impl Measure {
    pub fn new(requests: usize, warmup: u64) -> Measure {
        let measured = (requests as u64).saturating_sub(warmup) as usize;
        Measure { warmup, latencies: Vec::with_capacity(measured), ..Measure::default() }
    }

    /// Whether request `request` (a trace position, or `PROBE`) is measured.
    #[inline]
    pub fn counts(&self, request: u32) -> bool {
        request != PROBE && request as u64 >= self.warmup
    }

    /// The first measured request arrives (`predictions`: the policy's counts now).
    pub fn start(&mut self, now: u64, nodes: &mut [ApacheNode], predictions: Option<(u64, u64)>) {
        self.start = Some(now);
        self.predictions[0] = predictions;
        for node in nodes {
            node.busy_from = node.busy(now);
            node.meter.restart(now);
            node.counts = Default::default();
        }
    }

    /// The last request arrives: utilisation is measured up to here.
    pub fn stop(&mut self, now: u64, nodes: &mut [ApacheNode], predictions: Option<(u64, u64)>) {
        self.stop = Some(now);
        self.predictions[1] = predictions;
        for node in nodes {
            node.busy_to = Some(node.busy(now));
        }
    }
}

/// Mean and nearest-rank `q` quantile of `v` (reordered), in the unit of `v`.
pub(super) fn mean_and_quantile(v: &mut [u64], q: f64) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let mean = v.iter().map(|&d| d as f64).sum::<f64>() / v.len() as f64;
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    let (_, x, _) = v.select_nth_unstable(rank - 1);
    (mean, *x as f64)
}

impl Engine<'_> {
    /// Each node's report over the measured period `span` (ns) ending at `stop`.
    fn node_reports(&mut self, stop: u64, span: f64) -> Vec<NodeReport> {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let mut per_node = Vec::with_capacity(self.nodes.len());
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let (idle, mean_load, max_load) = node.meter.finish(stop);
            let to = node.busy_to.unwrap_or(node.busy_from);
            let c = node.counts;
            per_node.push(NodeReport {
                node: i as u32,
                requests: c.requests,
                hit_ratio: ratio(c.hits as f64, (c.hits + c.misses) as f64),
                mean_load,
                max_load,
                idle_ratio: idle,
                cpu_utilization: ratio(to.0.saturating_sub(node.busy_from.0) as f64, span),
                disk_utilization: ratio(to.1.saturating_sub(node.busy_from.1) as f64, span),
                disk_reads: c.disk_reads,
                remote_sends: 0,
                link: None,
            });
        }
        per_node
    }

    /// The report of the run.
    pub(super) fn finish(mut self) -> SimRun {
        let (start, stop) = (self.m.start.unwrap_or(0), self.m.stop.unwrap_or(0));
        let span = stop.saturating_sub(start) as f64;
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let per_node = self.node_reports(stop, span);
        let sum =
            |f: fn(&super::node::NodeCounts) -> u64| self.nodes.iter().map(|n| f(&n.counts)).sum::<u64>();
        let (hits, misses, reads) = (sum(|c| c.hits), sum(|c| c.misses), sum(|c| c.disk_reads));
        let cpu: Vec<f64> = per_node.iter().map(|n| n.cpu_utilization).collect();
        let (lat_mean, lat_p90) = mean_and_quantile(&mut self.m.latencies, 0.9);
        let (delay_mean, delay_p99) = mean_and_quantile(&mut self.m.delays, 0.99);
        let server = ServerMetrics {
            latency_mean_s: lat_mean / 1e9,
            latency_p90_s: lat_p90 / 1e9,
            served: self.m.latencies.len() as u64,
            syns: self.m.syns,
            rejected_syns: self.m.rejected,
            rejection_ratio: ratio(self.m.rejected as f64, self.m.syns as f64),
            retries: self.m.retries,
            failed_requests: self.m.failed,
            cpu_utilization: cpu.iter().sum::<f64>() / cpu.len().max(1) as f64,
            cpu_utilization_max: cpu.iter().copied().fold(0.0, f64::max),
            cpu_utilization_min: cpu.iter().copied().fold(f64::INFINITY, f64::min).min(1e9),
            max_processes: self.nodes.iter().map(|n| n.pool.max_seen).max().unwrap_or(0),
            forks: self.nodes.iter().map(|n| n.pool.forks).sum(),
            predicted_miss_ratio: match self.m.predictions {
                [Some((s0, m0)), Some((s1, m1))] if s1 > s0 => {
                    Some(m1.saturating_sub(m0) as f64 / (s1 - s0) as f64)
                }
                _ => None,
            },
        };
        let cfg = self.cfg;
        let statics = (hits + misses) as f64;
        let measured = self.m.delays.len() as u64;
        let report = SimReport {
            policy: cfg.policy.name().to_string(),
            nodes: cfg.nodes,
            rps: ratio(measured as f64, span / 1e9),
            miss_ratio: ratio(misses as f64, statics),
            idle_ratio: per_node.iter().map(|n| n.idle_ratio).sum::<f64>() / per_node.len().max(1) as f64,
            mean_delay_ms: delay_mean / 1e6,
            label: cfg.policy.label(),
            p99_delay_ms: delay_p99 / 1e6,
            hit_ratio: ratio(hits as f64, statics),
            remote_hit_ratio: 0.0,
            requests: self.w.len() as u64,
            measured_requests: measured,
            sim_seconds: span / 1e9,
            disk_reads: reads,
            idle_threshold: cfg.idle_threshold(),
            admission_limit: None,
            max_in_flight: self.fe.max_in_flight(),
            clients: None,
            preset: cfg.preset.name().to_string(),
            cache_bytes: cfg.cache_capacity(),
            replacement: cfg.cache.replacement.to_string(),
            cpu_speed: cfg.cpu_speed,
            memory_scale: cfg.memory_scale,
            disks: 1,
            seed: cfg.seed,
            per_node,
            server: Some(server),
            file_server: None,
        };
        SimRun { report, front_end_log: self.log.unwrap_or_default() }
    }
}
