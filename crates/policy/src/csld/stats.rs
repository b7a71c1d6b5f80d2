//! `StatsWindow`: CSLD's workload statistics over the last `stats_periods` periods — the
//! predicted miss ratio (cluster and per node), mean CPU cost per request, mean disk cost
//! per miss, mean CPU cost per node per period and mean new connections per period.

/// What one period contributed, cluster-wide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PeriodCounts {
    /// New connections.
    pub(crate) conns: u64,
    /// Requests (static, IMS, invalid and dynamic).
    pub(crate) requests: u64,
    /// Static requests, and those predicted to miss.
    pub(crate) statics: u64,
    pub(crate) misses: u64,
    /// CPU cost of every task, ns.
    pub(crate) ccost: u64,
    /// Disk cost, ns, and the disk reads it came from.
    pub(crate) dcost: u64,
    pub(crate) disk_reads: u64,
}

impl PeriodCounts {
    fn add(&mut self, o: &PeriodCounts, sign: bool) {
        let f = |a: &mut u64, b: u64| *a = if sign { a.saturating_add(b) } else { a.saturating_sub(b) };
        f(&mut self.conns, o.conns);
        f(&mut self.requests, o.requests);
        f(&mut self.statics, o.statics);
        f(&mut self.misses, o.misses);
        f(&mut self.ccost, o.ccost);
        f(&mut self.dcost, o.dcost);
        f(&mut self.disk_reads, o.disk_reads);
    }
}

/// Sliding sums over the last `periods` periods, cluster-wide and per node (static requests
/// and predicted misses).
#[derive(Debug)]
pub(crate) struct StatsWindow {
    periods: usize,
    nodes: usize,
    cursor: usize,
    filled: usize,
    cluster: Vec<PeriodCounts>,
    /// `[statics, misses]` per period and node, `period * nodes + node`.
    per_node: Vec<[u64; 2]>,
    sum: PeriodCounts,
    node_sum: Vec<[u64; 2]>,
}

impl StatsWindow {
    /// An empty window of `periods` (≥ 1) periods over `nodes` nodes.
    pub(crate) fn new(periods: usize, nodes: usize) -> StatsWindow {
        let periods = periods.max(1);
        StatsWindow {
            periods,
            nodes,
            cursor: 0,
            filled: 0,
            cluster: vec![PeriodCounts::default(); periods],
            per_node: vec![[0; 2]; periods * nodes],
            sum: PeriodCounts::default(),
            node_sum: vec![[0; 2]; nodes],
        }
    }

    /// Close a period with these counts, dropping the oldest one.
    pub(crate) fn push(&mut self, counts: &PeriodCounts, node_counts: &[[u64; 2]]) {
        let old = std::mem::replace(&mut self.cluster[self.cursor], *counts);
        self.sum.add(&old, false);
        self.sum.add(counts, true);
        let row = &mut self.per_node[self.cursor * self.nodes..(self.cursor + 1) * self.nodes];
        for ((slot, sum), new) in row.iter_mut().zip(&mut self.node_sum).zip(node_counts) {
            for j in 0..2 {
                sum[j] = sum[j].saturating_sub(slot[j]).saturating_add(new[j]);
            }
            *slot = *new;
        }
        self.cursor = (self.cursor + 1) % self.periods;
        self.filled = (self.filled + 1).min(self.periods);
    }

    /// Forget `node`'s per-node counts.
    pub(crate) fn forget_node(&mut self, node: usize) {
        if node >= self.nodes {
            return;
        }
        for p in 0..self.periods {
            self.per_node[p * self.nodes + node] = [0; 2];
        }
        self.node_sum[node] = [0; 2];
    }

    fn ratio(num: u64, den: u64) -> Option<f64> {
        (den > 0).then(|| num as f64 / den as f64)
    }

    /// MR: predicted misses per static request (0 with no static request).
    pub(crate) fn miss_ratio(&self) -> f64 {
        Self::ratio(self.sum.misses, self.sum.statics).unwrap_or(0.0)
    }

    /// MR_k for `node`.
    pub(crate) fn node_miss_ratio(&self, node: usize) -> f64 {
        let [statics, misses] = self.node_sum.get(node).copied().unwrap_or([0; 2]);
        Self::ratio(misses, statics).unwrap_or(0.0)
    }

    /// C_r: CPU ns per request, if any request was seen.
    pub(crate) fn ccost_per_request(&self) -> Option<f64> {
        Self::ratio(self.sum.ccost, self.sum.requests)
    }

    /// C_m: disk ns per disk read, if any was predicted.
    pub(crate) fn dcost_per_read(&self) -> Option<f64> {
        Self::ratio(self.sum.dcost, self.sum.disk_reads)
    }

    /// C_p: CPU ns per node per period over the periods closed so far.
    pub(crate) fn ccost_per_node_period(&self) -> f64 {
        Self::ratio(self.sum.ccost, (self.filled * self.nodes) as u64).unwrap_or(0.0)
    }

    /// N_r: new connections per period, cluster-wide, over the periods closed so far.
    pub(crate) fn conns_per_period(&self) -> f64 {
        Self::ratio(self.sum.conns, self.filled as u64).unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_means_cover_only_the_last_periods() {
        let mut w = StatsWindow::new(2, 2);
        let busy = PeriodCounts {
            conns: 10,
            requests: 10,
            statics: 8,
            misses: 2,
            ccost: 1_000,
            dcost: 60,
            disk_reads: 3,
        };
        w.push(&busy, &[[8, 2], [0, 0]]);
        assert_eq!((w.miss_ratio(), w.node_miss_ratio(0), w.node_miss_ratio(1)), (0.25, 0.25, 0.0));
        assert_eq!((w.ccost_per_request(), w.dcost_per_read()), (Some(100.0), Some(20.0)));
        assert_eq!((w.ccost_per_node_period(), w.conns_per_period()), (500.0, 10.0));
        w.push(&PeriodCounts::default(), &[[0, 0], [0, 0]]);
        assert_eq!((w.ccost_per_node_period(), w.conns_per_period()), (250.0, 5.0));
        w.push(&PeriodCounts::default(), &[[0, 0], [0, 0]]);
        assert_eq!((w.miss_ratio(), w.ccost_per_request(), w.conns_per_period()), (0.0, None, 0.0));
        w.push(&busy, &[[0, 0], [4, 4]]);
        w.forget_node(1);
        assert_eq!(w.node_miss_ratio(1), 0.0);
    }
}
