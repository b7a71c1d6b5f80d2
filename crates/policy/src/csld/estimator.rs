//! CSLD's load estimator (LE): every period it plays each node's queued tasks onto the
//! node's CPU and disk cost boards (step 1: CPU/disk frontiers, cache-miss prediction from
//! the disk-read history, slow-start split of large responses), then folds the boards into
//! one load index L_k per node by the miss-ratio and CPU-load threshold cascade (step 2).

use super::CsldParams;
use super::board::CostBoard;
use super::history::DiskHistory;
use super::stats::{PeriodCounts, StatsWindow};
use super::tables::FileRefs;
use super::task::{Task, TaskKind};

const MS: u64 = 1_000_000;

/// One node as LE models it.
#[derive(Debug)]
struct NodeModel {
    /// Tasks sniffed since the last period boundary (Q_k).
    queue: Vec<Task>,
    ccb: CostBoard,
    dcb: CostBoard,
    /// CPU and disk frontiers TC_k, TD_k (ns).
    tc: u64,
    td: u64,
    history: DiskHistory,
}

/// What playing one task needs besides the node.
struct StepEnv<'a> {
    params: &'a CsldParams,
    refs: &'a mut FileRefs,
    counts: &'a mut PeriodCounts,
    /// `[statics, misses]` of this node this period.
    node_counts: &'a mut [u64; 2],
}

fn blocks(size: u64, block: u64) -> u64 {
    size.div_ceil(block)
}

impl NodeModel {
    fn new(p: &CsldParams) -> NodeModel {
        NodeModel {
            queue: Vec::new(),
            ccb: CostBoard::new(p.slots as usize, p.slot_ms * MS),
            dcb: CostBoard::new(p.slots as usize, p.slot_ms * MS),
            tc: 0,
            td: 0,
            history: DiskHistory::new(p.history_secs),
        }
    }

    fn clear(&mut self) {
        self.queue.clear();
        self.ccb.reset(0);
        self.dcb.reset(0);
        self.tc = 0;
        self.td = 0;
        self.history.clear();
    }

    /// Charge `cost` of CPU at the CPU frontier and move it on.
    fn cpu(&mut self, cost: u64) {
        self.ccb.add(self.tc, cost);
        self.tc = self.tc.saturating_add(cost);
    }

    /// Charge `cost` of disk at the disk frontier and move it on.
    fn disk(&mut self, cost: u64, env: &mut StepEnv<'_>) {
        self.dcb.add(self.td, cost);
        self.td = self.td.saturating_add(cost);
        env.counts.dcost = env.counts.dcost.saturating_add(cost);
        env.counts.disk_reads += 1;
    }

    /// LE step 1 for one task of node `k`.
    fn play(&mut self, k: usize, task: &Task, env: &mut StepEnv<'_>) {
        let p = env.params;
        self.tc = self.tc.max(task.ts);
        self.cpu(task.ccost);
        self.td = self.td.max(self.tc);
        let mut charged = task.ccost;
        match task.kind {
            TaskKind::Conn => {}
            TaskKind::Dyn if task.dcost > 0 => self.disk(task.dcost, env),
            TaskKind::Static => self.predict(k, task, env),
            TaskKind::Dyn | TaskKind::Ims | TaskKind::Inv => {}
        }
        if task.kind != TaskKind::Conn {
            env.counts.requests += 1;
        }
        charged = charged.saturating_add(self.transmit(task.size, task.rtt, p));
        env.counts.ccost = env.counts.ccost.saturating_add(charged);
    }

    /// Predict whether a static request misses node `k`'s cache; a miss reads the file at
    /// the disk frontier and is recorded in the history.
    fn predict(&mut self, k: usize, task: &Task, env: &mut StepEnv<'_>) {
        let p = env.params;
        let last = env.refs.refs(task.file)[k];
        let miss =
            last == 0 || self.history.bytes_since(last - 1, self.tc).is_none_or(|read| read > p.cache_bytes);
        env.counts.statics += 1;
        env.node_counts[0] += 1;
        let seen = if miss {
            env.counts.misses += 1;
            env.node_counts[1] += 1;
            let read = p.disk_ns.saturating_add(blocks(task.size, 4096).saturating_mul(p.disk_ns_per_block));
            self.disk(read, env);
            self.history.add(self.td, task.size);
            self.td
        } else {
            self.tc
        };
        // Stored plus one so that 0 keeps meaning "never".
        env.refs.refs(task.file)[k] = seen.saturating_add(1);
    }

    /// Charge transmitting `size` bytes; returns the CPU charged. A response that does not
    /// fit the send buffer goes out by slow start: part j (cwnd_j segments, cwnd doubling
    /// from `initial_cwnd`) at one RTT after part j − 1; only part 0 moves the frontier.
    fn transmit(&mut self, size: u64, rtt: u64, p: &CsldParams) -> u64 {
        if size == 0 {
            return 0;
        }
        let cost = blocks(size, 512).saturating_mul(p.send_ns_per_512);
        if size <= p.send_buffer {
            self.cpu(cost);
            return cost;
        }
        let cost_upto = |bytes: u64| (cost as u128 * bytes as u128 / size as u128) as u64;
        let start = self.tc;
        let (mut sent, mut cwnd, mut j) = (0u64, p.initial_cwnd.max(1), 0u64);
        while sent < size {
            let part = (size - sent).min(cwnd.saturating_mul(p.mss.max(1)));
            let part_cost = cost_upto(sent + part) - cost_upto(sent);
            if j == 0 {
                self.cpu(part_cost);
            } else {
                self.ccb.add(start.saturating_add(j.saturating_mul(rtt)), part_cost);
            }
            sent += part;
            cwnd = cwnd.saturating_mul(2);
            j += 1;
        }
        cost
    }
}

/// The load estimator over every node, run lazily at period boundaries.
#[derive(Debug)]
pub(crate) struct Estimator {
    params: CsldParams,
    period_ns: u64,
    slot_ns: u64,
    nodes: Vec<NodeModel>,
    up: Vec<bool>,
    refs: FileRefs,
    stats: StatsWindow,
    counts: PeriodCounts,
    node_counts: Vec<[u64; 2]>,
    /// T_{i+1}, the next boundary; `None` before the first call.
    next_boundary: Option<u64>,
    /// Time ran past the last representable boundary: estimation stops.
    exhausted: bool,
    /// Boundaries after which every board slot and statistic has been replaced, so a
    /// longer idle gap may be jumped.
    max_catch_up: u64,
    loads: Vec<f64>,
    predicted_misses: u64,
    static_requests: u64,
}

impl Estimator {
    /// An estimator for `nodes` nodes; `params` must pass `CsldParams::check`.
    pub(crate) fn new(nodes: usize, params: &CsldParams) -> Estimator {
        let period_ns = params.period_ms * MS;
        let horizon_periods = (params.slots as u64 * params.slot_ms).div_ceil(params.period_ms);
        Estimator {
            params: *params,
            period_ns,
            slot_ns: params.slot_ms * MS,
            nodes: (0..nodes).map(|_| NodeModel::new(params)).collect(),
            up: vec![true; nodes],
            refs: FileRefs::new(nodes, params.max_files),
            stats: StatsWindow::new(params.stats_periods as usize, nodes),
            counts: PeriodCounts::default(),
            node_counts: vec![[0; 2]; nodes],
            next_boundary: None,
            exhausted: false,
            max_catch_up: horizon_periods.max(params.stats_periods as u64) + 1,
            loads: vec![0.0; nodes],
            predicted_misses: 0,
            static_requests: 0,
        }
    }

    /// Queue `task` for `node` (ignored for a node the estimator does not model).
    pub(crate) fn push(&mut self, node: usize, task: Task) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.queue.push(task);
        }
    }

    /// A new connection to `node` at `ts`: queue its setup and count it for N_r.
    pub(crate) fn conn_opened(&mut self, node: usize, ts: u64) {
        if node < self.nodes.len() {
            self.counts.conns += 1;
            self.push(node, Task::conn(ts, &self.params));
        }
    }

    /// Run LE for every period boundary up to `now`; whether any ran.
    pub(crate) fn advance(&mut self, now: u64) -> bool {
        let period = self.period_ns;
        let mut boundary = match self.next_boundary {
            Some(b) => b,
            // The first boundary after the first time seen (or none, at the end of time).
            None => (now / period + 1).checked_mul(period).unwrap_or_else(|| {
                self.exhausted = true;
                u64::MAX
            }),
        };
        let mut steps = 0;
        let mut ran = false;
        while !self.exhausted && boundary <= now {
            if steps == self.max_catch_up {
                // Everything older is gone from boards and statistics: jump to the last.
                boundary += (now - boundary) / self.period_ns * self.period_ns;
            }
            self.run_period(boundary);
            ran = true;
            steps += 1;
            match boundary.checked_add(self.period_ns) {
                Some(b) => boundary = b,
                None => self.exhausted = true,
            }
        }
        self.next_boundary = Some(boundary);
        ran
    }
}

impl Estimator {
    /// LE at boundary `t` = T_{i+1}: recycle the slots of P_i and older, play the queues
    /// (step 1), close the period's statistics, aggregate (step 2).
    fn run_period(&mut self, t: u64) {
        let period_start = self.slot_of(t.saturating_sub(self.period_ns));
        let next = self.slot_of(t);
        let mut env_counts = std::mem::take(&mut self.counts);
        for (k, node) in self.nodes.iter_mut().enumerate() {
            for board in [&mut node.ccb, &mut node.dcb] {
                board.advance_to(period_start);
                board.clear(period_start, next);
            }
            let mut queue = std::mem::take(&mut node.queue);
            let mut env = StepEnv {
                params: &self.params,
                refs: &mut self.refs,
                counts: &mut env_counts,
                node_counts: &mut self.node_counts[k],
            };
            for task in &queue {
                node.play(k, task, &mut env);
            }
            queue.clear();
            node.queue = queue;
        }
        self.predicted_misses += env_counts.misses;
        self.static_requests += env_counts.statics;
        self.stats.push(&env_counts, &self.node_counts);
        self.node_counts.iter_mut().for_each(|c| *c = [0; 2]);
        self.aggregate(next);
    }

    fn slot_of(&self, t: u64) -> u64 {
        t / self.slot_ns
    }

    /// LE step 2: L_k from the boards' slots from absolute slot `next` (P_{i+1}) on.
    fn aggregate(&mut self, next: u64) {
        let p = &self.params;
        let per = self.period_ns / self.slot_ns;
        let period = self.period_ns as f64;
        let mr = self.stats.miss_ratio();
        let c_p = self.stats.ccost_per_node_period();
        let c_r = self.stats.ccost_per_request().unwrap_or_else(|| self.nominal_request_cpu()).max(1.0);
        let c_m = self.stats.dcost_per_read().unwrap_or_else(|| self.nominal_read()).max(1.0);
        for (k, node) in self.nodes.iter().enumerate() {
            if !self.up[k] {
                self.loads[k] = 0.0;
                continue;
            }
            let ccb1 = node.ccb.sum(next, next + per) as f64;
            let ccb12 = node.ccb.sum(next, next + 2 * per) as f64;
            let load = if mr < p.miss_l {
                let cpu = if c_p < p.load_l * period {
                    ccb1
                } else if c_p < p.load_m * period {
                    ccb12
                } else {
                    node.ccb.sum_from(next) as f64
                };
                let mut l = cpu / c_r;
                if self.stats.node_miss_ratio(k) > p.miss_m {
                    l += node.dcb.sum(next, next + 2 * per) as f64 / c_m;
                }
                l
            } else {
                let mut l = node.dcb.sum_from(next) as f64 / c_m;
                if mr < p.miss_h {
                    l += ccb1 / c_r;
                    if c_p > p.load_h * period || (c_p > p.load_m * period && mr < p.miss_m) {
                        l += (ccb12 - ccb1) / c_r;
                    }
                }
                l
            };
            self.loads[k] = load;
        }
    }

    /// C_r before any request was seen: a connection's setup and teardown plus a static
    /// request of the default size.
    fn nominal_request_cpu(&self) -> f64 {
        let p = &self.params;
        let send = blocks(p.default_size, 512).saturating_mul(p.send_ns_per_512);
        (2 * p.conn_ns).saturating_add(p.basic_ns).saturating_add(send) as f64
    }

    /// C_m before any disk read was predicted: a read of the default size.
    fn nominal_read(&self) -> f64 {
        let p = &self.params;
        p.disk_ns.saturating_add(blocks(p.default_size, 4096).saturating_mul(p.disk_ns_per_block)) as f64
    }

    /// Put `node` in or out of the estimation; out clears everything known of it.
    pub(crate) fn set_up(&mut self, node: usize, up: bool) {
        let Some(model) = self.nodes.get_mut(node) else { return };
        self.up[node] = up;
        if !up {
            model.clear();
            self.refs.forget_node(node);
            self.stats.forget_node(node);
            self.node_counts[node] = [0; 2];
            self.loads[node] = 0.0;
        }
    }

    /// Whether `node` is modelled and up.
    pub(crate) fn is_up(&self, node: usize) -> bool {
        self.up.get(node).copied().unwrap_or(false)
    }

    /// L_k of every node after the last period.
    pub(crate) fn loads(&self) -> &[f64] {
        &self.loads
    }

    /// N_r: mean new connections per period over the statistics window.
    pub(crate) fn conns_per_period(&self) -> f64 {
        self.stats.conns_per_period()
    }

    /// Static requests played so far, and those predicted to miss.
    pub(crate) fn static_requests(&self) -> u64 {
        self.static_requests
    }

    pub(crate) fn predicted_misses(&self) -> u64 {
        self.predicted_misses
    }

    /// Documents in the file table.
    pub(crate) fn files(&self) -> usize {
        self.refs.len()
    }

    /// Work on node `k`'s CPU and disk boards in slots `[from, to)`.
    #[cfg(test)]
    fn board_sums(&self, k: usize, from: u64, to: u64) -> (u64, u64) {
        (self.nodes[k].ccb.sum(from, to), self.nodes[k].dcb.sum(from, to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> CsldParams {
        CsldParams { history_secs: 10, ..CsldParams::default() }
    }

    fn task(ts_ms: u64, kind: TaskKind, file: u64, size: u64) -> Task {
        Task { ts: ts_ms * MS, rtt: 150 * MS, kind, ccost: 213_000, dcost: 0, size, file }
    }

    /// Slots of 50 ms: slot s starts at s·50 ms.
    fn slot(ms: u64) -> u64 {
        ms / 50
    }

    #[test]
    fn a_predicted_miss_charges_the_disk_board_and_a_hit_does_not() {
        let mut e = Estimator::new(2, &params());
        e.advance(0);
        e.push(0, task(10, TaskKind::Static, 1, 4096));
        assert!(e.advance(200 * MS));
        let read = 15_600_000 + 300_000;
        assert_eq!(e.board_sums(0, slot(0), slot(200)).1, read, "a cold reference misses");
        assert_eq!((e.static_requests(), e.predicted_misses()), (1, 1));
        // The same document again on the same node: a hit, no disk work.
        e.push(0, task(250, TaskKind::Static, 1, 4096));
        e.advance(400 * MS);
        assert_eq!(e.board_sums(0, slot(200), slot(10_000)).1, 0);
        assert_eq!((e.static_requests(), e.predicted_misses()), (2, 1));
        // On the other node it is a cold miss again.
        e.push(1, task(450, TaskKind::Static, 1, 4096));
        e.advance(600 * MS);
        assert_eq!(e.board_sums(1, slot(400), slot(10_000)).1, read);
        assert_eq!(e.board_sums(0, slot(400), slot(10_000)).1, 0);
    }

    #[test]
    fn a_second_reference_within_cache_size_predicts_a_hit_and_beyond_it_a_miss() {
        let mut e = Estimator::new(1, &CsldParams { cache_bytes: 30_000, ..params() });
        e.advance(0);
        // A, then B (20 000 bytes read since A: within the cache), then A: a hit.
        e.push(0, task(10, TaskKind::Static, 1, 5_000));
        e.push(0, task(20, TaskKind::Static, 2, 20_000));
        e.push(0, task(30, TaskKind::Static, 1, 5_000));
        e.advance(200 * MS);
        assert_eq!((e.static_requests(), e.predicted_misses()), (3, 2));
        // C (40 000 bytes) pushes everything read since A past the cache: A misses.
        e.push(0, task(210, TaskKind::Static, 3, 40_000));
        e.push(0, task(220, TaskKind::Static, 1, 5_000));
        e.advance(400 * MS);
        assert_eq!((e.static_requests(), e.predicted_misses()), (5, 4));
    }

    #[test]
    fn an_old_reference_predicts_a_miss() {
        let mut e = Estimator::new(1, &params());
        e.advance(0);
        e.push(0, task(10, TaskKind::Static, 1, 100));
        e.advance(200 * MS);
        e.push(0, task(5_000, TaskKind::Static, 1, 100));
        e.advance(5_200 * MS);
        assert_eq!(e.predicted_misses(), 1, "5 s later, within the 10 s history: a hit");
        e.push(0, task(16_000, TaskKind::Static, 1, 100));
        e.advance(16_200 * MS);
        assert_eq!(e.predicted_misses(), 2, "11 s after the last reference: beyond the history");
    }

    #[test]
    fn large_responses_split_by_slow_start_land_one_rtt_apart() {
        let mut e = Estimator::new(1, &params());
        e.advance(0);
        let size = 100_000;
        e.push(0, Task { ts: 0, rtt: 150 * MS, kind: TaskKind::Dyn, ccost: 0, dcost: 0, size, file: 0 });
        e.advance(200 * MS);
        // Parts of 2, 4, 8, 16, 32 segments of 1460 bytes and the 9 480-byte rest.
        let parts = [2_920u64, 5_840, 11_680, 23_360, 46_720, 9_480];
        assert_eq!(parts.iter().sum::<u64>(), size);
        let cost = size.div_ceil(512) * 37_000;
        let upto = |b: u64| (cost as u128 * b as u128 / size as u128) as u64;
        let mut sent = 0;
        for (j, part) in parts.iter().enumerate() {
            // Part j lands at j·150 ms, i.e. slot 3j; the slots between stay empty.
            let s = 3 * j as u64;
            assert_eq!(e.board_sums(0, s, s + 1).0, upto(sent + part) - upto(sent), "part {j}");
            assert_eq!(e.board_sums(0, s + 1, s + 3).0, 0, "after part {j}");
            sent += part;
        }
        assert_eq!(e.board_sums(0, 0, 200).0, cost);
        assert_eq!(e.nodes[0].tc, upto(parts[0]), "only part 0 moves the CPU frontier");
    }

    #[test]
    fn small_responses_go_out_at_once() {
        let mut e = Estimator::new(1, &params());
        e.advance(0);
        e.push(
            0,
            Task { ts: 0, rtt: 150 * MS, kind: TaskKind::Dyn, ccost: 5, dcost: 7, size: 16 << 10, file: 0 },
        );
        e.advance(200 * MS);
        let cost = 32 * 37_000;
        assert_eq!(e.board_sums(0, 0, 1), (5 + cost, 7));
        assert_eq!(e.nodes[0].tc, 5 + cost);
        assert_eq!(e.nodes[0].td, 5 + 7);
    }

    #[test]
    fn a_long_idle_gap_is_jumped_not_replayed() {
        let mut e = Estimator::new(3, &params());
        e.advance(0);
        e.conn_opened(0, 0);
        e.push(0, Task { ccost: 300 * MS, ..task(10, TaskKind::Dyn, 0, 100) });
        e.advance(200 * MS);
        assert!(e.loads()[0] > 0.0, "work left over into the next period");
        // A century later: far more periods than the boards and statistics span.
        let later = 100 * 365 * 24 * 3600 * 1_000 * MS;
        assert!(e.advance(later));
        assert_eq!(e.loads(), &[0.0; 3]);
        assert_eq!(e.conns_per_period(), 0.0);
        assert_eq!(e.next_boundary, Some((later / (200 * MS) + 1) * 200 * MS));
        // At the end of time estimation stops instead of looping.
        assert!(e.advance(u64::MAX));
        assert!(!e.advance(u64::MAX));
    }

    #[test]
    fn cpu_heavy_node_gets_the_larger_load_index() {
        let mut e = Estimator::new(2, &params());
        e.advance(0);
        for node in 0..2 {
            e.conn_opened(node, MS);
        }
        e.push(0, Task { ccost: 300 * MS, ..task(1, TaskKind::Dyn, 0, 100) });
        e.push(1, Task { ccost: MS, ..task(1, TaskKind::Dyn, 0, 100) });
        e.advance(200 * MS);
        let l = e.loads();
        assert!(l[0] > 10.0 * l[1], "{l:?}");
        e.set_up(0, false);
        assert_eq!(e.loads()[0], 0.0);
        assert!(!e.is_up(0) && e.is_up(1));
    }
}
