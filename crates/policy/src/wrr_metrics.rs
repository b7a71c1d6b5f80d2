//! `WrrMetricsPolicy`: the CSLD paper's metric-fed WRR baselines (Table 2). Every period
//! each node's load index comes from Eq. 1 over the front-end's active connections (M_i),
//! the probe's response time × the node's connection rate (M_p·rate_k) and the host metrics
//! of its latest report (M_h1..M_h4); WRR_p reads M_p·rate_k alone. Weights as CSLD's.
//!
//! Choices the paper leaves open: f_IO is 1, 2 or 4 for a cluster disk load under 30%, up
//! to 60% or above, the disk load being the share of up nodes whose latest report has a
//! request waiting for the disk (an instantaneous sample of disk utilisation); T_sreq is the
//! cost table's basic processing plus sending the mean document (file table, else CSLD's
//! default size), T_dreq the mean CPU cost of the class table's classes.

use crate::csld::effective_weights;
use crate::csld::weights::{SmoothWrr, weights_from_loads};
use crate::{CsldParams, LoadEstimates, Policy, PolicyInputs, WrrVariant};
use locus_core::{NodeId, NodeReport, NodeStatus, RequestInfo, Time};
use std::time::Duration;

/// Eq. 1's weights of the input, probe and host metrics, and of dynamic work.
const F_I: f64 = 0.1;
const F_P: f64 = 0.45;
const F_H: f64 = 0.45;
const F_DREQ: f64 = 0.1;

/// f_IO for a cluster disk load `busy` (share of nodes with disk waiters, 0..=1).
fn disk_io_factor(busy: f64) -> f64 {
    if busy < 0.3 {
        1.0
    } else if busy <= 0.6 {
        2.0
    } else {
        4.0
    }
}

/// T_dreq / T_sreq from what the caller knows of the site (1 when no class is known).
fn dynamic_to_static_ratio(inputs: &PolicyInputs) -> f64 {
    let p = CsldParams::default();
    let mean_size = inputs
        .files
        .as_ref()
        .filter(|f| !f.is_empty())
        .map(|f| f.iter().map(|(_, i)| i.size as f64).sum::<f64>() / f.len() as f64)
        .unwrap_or(p.default_size as f64);
    let t_sreq = p.basic_ns as f64 + (mean_size / 512.0).ceil() * p.send_ns_per_512 as f64;
    if inputs.classes.is_empty() {
        return 1.0;
    }
    let t_dreq = inputs.classes.iter().map(|c| c.cpu_ns as f64).sum::<f64>() / inputs.classes.len() as f64;
    t_dreq / t_sreq.max(1.0)
}

/// WRR over weights from node-reported metrics, one of Table 2's variants.
#[derive(Debug)]
pub struct WrrMetricsPolicy {
    variant: WrrVariant,
    period_ns: u64,
    /// T_dreq / T_sreq.
    dreq_ratio: f64,
    reports: Vec<Option<NodeReport>>,
    /// Connections assigned to each node since the last boundary.
    assigned: Vec<u64>,
    next_boundary: Option<u64>,
    loads: Vec<f64>,
    weights: Vec<f64>,
    wrr: SmoothWrr,
}

impl WrrMetricsPolicy {
    /// The baseline `variant` over `node_count` nodes.
    pub fn new(node_count: usize, variant: WrrVariant, inputs: &PolicyInputs) -> WrrMetricsPolicy {
        WrrMetricsPolicy {
            variant,
            period_ns: u64::try_from(variant.period().as_nanos()).unwrap_or(u64::MAX).max(1),
            dreq_ratio: dynamic_to_static_ratio(inputs),
            reports: vec![None; node_count],
            assigned: vec![0; node_count],
            next_boundary: None,
            loads: vec![0.0; node_count],
            weights: vec![0.0; node_count],
            wrr: SmoothWrr::default(),
        }
    }

    /// The variant.
    pub fn variant(&self) -> WrrVariant {
        self.variant
    }

    /// W_k after the latest period.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// L_k after the latest period.
    pub fn loads(&self) -> &[f64] {
        &self.loads
    }

    /// Recompute the weights if `now` passed a period boundary: rate_k counts the
    /// connections of the period just ended (none if a whole period passed without a call).
    fn tick(&mut self, nodes: &[NodeStatus], now: Time) {
        let now = now.as_nanos();
        let period = self.period_ns;
        let first = || (now / period).saturating_add(1).saturating_mul(period);
        let boundary = *self.next_boundary.get_or_insert_with(first);
        if now < boundary {
            return;
        }
        if now - boundary >= period {
            self.assigned.fill(0);
        }
        self.recompute(nodes);
        self.assigned.fill(0);
        self.next_boundary = Some(first());
    }

    fn recompute(&mut self, nodes: &[NodeStatus]) {
        let secs = self.period_ns as f64 / 1e9;
        let up = |k: usize| nodes.get(k).is_some_and(|n| n.up);
        let reporting = (0..self.reports.len()).filter(|&k| up(k) && self.reports[k].is_some());
        let busy = reporting.clone().filter(|&k| self.reports[k].is_some_and(|r| r.disk_wait > 0)).count();
        let f_io = disk_io_factor(busy as f64 / reporting.count().max(1) as f64);
        for k in 0..self.loads.len() {
            let report = self.reports[k].unwrap_or_default();
            let m_p = report.probe.map_or(0.0, |d| d.as_secs_f64());
            let rate = self.assigned[k] as f64 / secs;
            self.loads[k] = if self.variant.uses_host_metrics() {
                let m_i = nodes.get(k).map_or(0, |n| n.load) as f64;
                let m_h = report.listen_queue as f64
                    + f_io * report.disk_wait as f64
                    + report.static_active as f64
                    + report.dynamic_active as f64 * self.dreq_ratio * F_DREQ;
                F_I * m_i + F_P * m_p * rate + F_H * m_h
            } else {
                m_p * rate
            };
        }
        let total = self.assigned.iter().sum::<u64>() as f64;
        weights_from_loads(&self.loads, up, total, &mut self.weights);
    }
}

impl Policy for WrrMetricsPolicy {
    fn name(&self) -> &'static str {
        "wrr-metrics"
    }

    fn pick(&mut self, _req: &RequestInfo<'_>, nodes: &[NodeStatus], now: Time) -> Option<NodeId> {
        self.tick(nodes, now);
        self.wrr.pick(&self.weights, nodes)
    }

    fn on_assign(&mut self, node: NodeId, _req: &RequestInfo<'_>, nodes: &[NodeStatus], now: Time) {
        self.tick(nodes, now);
        if let Some(a) = self.assigned.get_mut(node.index()) {
            *a += 1;
        }
    }

    fn on_node_down(&mut self, node: NodeId, _nodes: &[NodeStatus], _now: Time) {
        let k = node.index();
        if k < self.reports.len() {
            self.reports[k] = None;
            self.assigned[k] = 0;
            self.weights[k] = 0.0;
        }
        self.wrr.reset(k);
    }

    fn on_node_up(&mut self, node: NodeId, _nodes: &[NodeStatus], _now: Time) {
        self.wrr.reset(node.index());
    }

    fn on_report(&mut self, node: NodeId, report: &NodeReport, _now: Time) {
        if let Some(r) = self.reports.get_mut(node.index()) {
            *r = Some(*report);
        }
    }

    fn report_period(&self) -> Option<Duration> {
        Some(self.variant.period())
    }

    fn l4_weights(&mut self, nodes: &[NodeStatus], now: Time) -> Option<Vec<f64>> {
        self.tick(nodes, now);
        Some(effective_weights(&self.weights, nodes))
    }

    fn load_estimates(&self) -> Option<LoadEstimates> {
        Some(LoadEstimates {
            weights: self.weights.clone(),
            loads: self.loads.clone(),
            static_requests: 0,
            predicted_misses: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cluster;
    use locus_core::{ClassCost, ResourceKind};

    const MS: u64 = 1_000_000;

    fn cluster(variant: WrrVariant, nodes: usize) -> Cluster {
        let policy = WrrMetricsPolicy::new(nodes, variant, &PolicyInputs::default());
        Cluster::new(Box::new(policy), &vec![1; nodes], Duration::ZERO)
    }

    /// Assign `n` connections during the first period, leaving them open.
    fn warm_up(c: &mut Cluster, n: u64) {
        for i in 0..n {
            c.assign(&RequestInfo::get("/x"), Time(i * MS)).unwrap();
        }
    }

    fn weights_after_reports(variant: WrrVariant, reports: &[NodeReport]) -> Vec<f64> {
        let mut c = cluster(variant, reports.len());
        warm_up(&mut c, 40);
        let period = Time::ZERO + variant.period();
        for (k, r) in reports.iter().enumerate() {
            c.report(NodeId(k as u32), r, Time(period.0 - MS));
        }
        c.l4_weights(period).unwrap()
    }

    #[test]
    fn wrr_metrics_gives_less_weight_to_the_node_reporting_a_long_listen_queue() {
        let quiet = NodeReport { probe: Some(Duration::from_millis(5)), ..NodeReport::default() };
        let queued = NodeReport { listen_queue: 50, ..quiet };
        let w = weights_after_reports(WrrVariant::A, &[quiet, queued, quiet, quiet]);
        assert!(w[1] < w[0] && w[0] == w[2] && w[2] == w[3], "{w:?}");
        assert!((w.iter().sum::<f64>() - 40.0).abs() < 1e-9, "{w:?}");
        // Once a period passes with no connection the weights fall back to an even split.
        let mut c = cluster(WrrVariant::A, 2);
        warm_up(&mut c, 10);
        c.report(NodeId(1), &queued, Time(400 * MS));
        assert!(c.l4_weights(Time(500 * MS)).unwrap()[1] < 5.0);
        assert_eq!(c.l4_weights(Time(1_600 * MS)).unwrap(), [1.0, 1.0]);
    }

    #[test]
    fn wrr_p_uses_only_the_probe() {
        let quiet = NodeReport { probe: Some(Duration::from_millis(5)), ..NodeReport::default() };
        let busy_host =
            NodeReport { listen_queue: 50, disk_wait: 9, static_active: 30, dynamic_active: 20, ..quiet };
        let w = weights_after_reports(WrrVariant::P, &[quiet, busy_host]);
        assert_eq!(w[0], w[1], "host metrics are ignored: {w:?}");
        let slow = NodeReport { probe: Some(Duration::from_millis(80)), ..quiet };
        let w = weights_after_reports(WrrVariant::P, &[quiet, slow]);
        assert!(w[1] < w[0], "{w:?}");
        // The other variants do read the host metrics.
        let w = weights_after_reports(WrrVariant::I, &[quiet, busy_host]);
        assert!(w[1] < w[0], "{w:?}");
    }

    #[test]
    fn disk_io_factor_follows_the_cluster_disk_load() {
        assert_eq!((disk_io_factor(0.0), disk_io_factor(0.29)), (1.0, 1.0));
        assert_eq!((disk_io_factor(0.3), disk_io_factor(0.6)), (2.0, 2.0));
        assert_eq!((disk_io_factor(0.61), disk_io_factor(1.0)), (4.0, 4.0));
        // Disk waiters weigh more when most nodes have some.
        let waiting = |d| NodeReport { disk_wait: d, ..NodeReport::default() };
        let one_busy =
            weights_after_reports(WrrVariant::I, &[waiting(4), waiting(0), waiting(0), waiting(0)]);
        let all_busy =
            weights_after_reports(WrrVariant::I, &[waiting(4), waiting(1), waiting(1), waiting(1)]);
        assert!(one_busy[1] - one_busy[0] < all_busy[1] - all_busy[0], "{one_busy:?} vs {all_busy:?}");
    }

    #[test]
    fn dynamic_to_static_ratio_comes_from_the_class_table() {
        assert_eq!(dynamic_to_static_ratio(&PolicyInputs::default()), 1.0);
        let class = ClassCost { cpu_ns: 30_000_000, disk_ns: 0, size: 0, resource: ResourceKind::Cpu };
        let inputs = PolicyInputs { classes: vec![class].into(), files: None };
        // 8 KiB default document: 213 µs + 16 × 37 µs = 805 µs.
        assert!((dynamic_to_static_ratio(&inputs) - 30_000.0 / 805.0).abs() < 1e-9);
        let p = WrrMetricsPolicy::new(2, WrrVariant::B, &inputs);
        assert_eq!((p.report_period(), p.variant()), (Some(Duration::from_secs(1)), WrrVariant::B));
    }
}
