//! The end of a run: per-node and cluster figures over the measured period (throughput, hit
//! and miss ratios, idle time, CPU, disk and link utilisation, the file server's load) and
//! the delay statistics.

use super::{Engine, SimRun};
use crate::report::{FileServerUse, LinkUse, NodeReport, SimReport};

impl Engine<'_> {
    pub(super) fn finish(mut self) -> SimRun {
        let end = self.last_completion.max(self.measure_start);
        let span = end - self.measure_start;
        let secs = span as f64 / 1e9;
        let ratio = |part: f64, whole: f64| if whole > 0.0 { part / whole } else { 0.0 };
        let mut per_node = Vec::with_capacity(self.nodes.len());
        let (mut hits, mut remote, mut misses, mut reads) = (0u64, 0u64, 0u64, 0u64);
        for (i, node) in self.nodes.iter_mut().enumerate() {
            let (idle, mean_load, max_load) = node.meter.finish(end);
            let c = node.counters;
            hits += c.local_hits;
            remote += c.remote_hits;
            misses += c.misses;
            reads += c.disk_reads;
            let statics = (c.local_hits + c.remote_hits + c.misses) as f64;
            let cpu = node.cpu.busy_ns().saturating_sub(node.busy_at_start.0);
            let disk = node.disk_busy_ns().saturating_sub(node.busy_at_start.1);
            per_node.push(NodeReport {
                node: i as u32,
                requests: c.requests,
                hit_ratio: ratio(c.local_hits as f64, statics),
                mean_load,
                max_load,
                idle_ratio: idle,
                cpu_utilization: ratio(cpu as f64, span as f64),
                disk_utilization: ratio(disk as f64, span as f64 * node.disks.len() as f64),
                disk_reads: c.disk_reads,
                remote_sends: c.remote_sends,
                link: node.link.is_some().then(|| {
                    let now = node.link_counters();
                    let d = |i: usize| now[i].saturating_sub(node.link_at_start[i]);
                    LinkUse {
                        tx_utilization: ratio(d(0) as f64, span as f64),
                        rx_utilization: ratio(d(1) as f64, span as f64),
                        tx_bytes: d(2),
                        rx_bytes: d(3),
                    }
                }),
            });
        }
        let statics = (hits + remote + misses) as f64;
        let measured = self.completed - self.completed_at_start;
        let (mean_delay, p99) = delay_stats(&mut self.delays);
        let cfg = self.cfg;
        let report = SimReport {
            policy: cfg.policy.name().to_string(),
            nodes: cfg.nodes,
            rps: ratio(measured as f64, secs),
            miss_ratio: ratio(misses as f64, statics),
            idle_ratio: per_node.iter().map(|n| n.idle_ratio).sum::<f64>() / per_node.len() as f64,
            mean_delay_ms: mean_delay / 1e6,
            label: cfg.policy.label(),
            p99_delay_ms: p99 / 1e6,
            hit_ratio: ratio(hits as f64, statics),
            remote_hit_ratio: ratio(remote as f64, statics),
            requests: self.w.len() as u64,
            measured_requests: measured,
            sim_seconds: secs,
            disk_reads: reads,
            idle_threshold: cfg.idle_threshold(),
            admission_limit: self.admission_limit,
            max_in_flight: self.fe.max_in_flight(),
            clients: self.clients,
            preset: cfg.preset.name().to_string(),
            cache_bytes: self.capacity,
            replacement: cfg.cache.replacement.to_string(),
            cpu_speed: cfg.cpu_speed,
            memory_scale: cfg.memory_scale,
            disks: cfg.disks,
            seed: cfg.seed,
            per_node,
            server: None,
            file_server: self.file_server.as_ref().map(|fs| {
                let (service, tx, bytes) = fs.busy();
                let at = self.fs_at_start;
                FileServerUse {
                    reads: fs.reads() - at[3],
                    tx_utilization: ratio((tx - at[1]) as f64, span as f64),
                    service_utilization: ratio((service - at[0]) as f64, span as f64),
                    tx_bytes: bytes - at[2],
                }
            }),
        };
        SimRun { report, front_end_log: self.log.unwrap_or_default() }
    }
}

/// Mean and nearest-rank p99 of `delays` (ns), reordering them.
fn delay_stats(delays: &mut [u64]) -> (f64, f64) {
    if delays.is_empty() {
        return (0.0, 0.0);
    }
    let mean = delays.iter().map(|&d| d as f64).sum::<f64>() / delays.len() as f64;
    let rank = ((0.99 * delays.len() as f64).ceil() as usize).clamp(1, delays.len());
    let (_, p99, _) = delays.select_nth_unstable(rank - 1);
    (mean, *p99 as f64)
}
