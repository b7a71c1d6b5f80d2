//! The process-driven engine's event loop and front side: Poisson (or trace-timed)
//! arrivals, one connection per request, the policy's `assign` at the SYN, the node's
//! backlog check (a dropped SYN is retried after 3 s and 6 s, each retry a new connection
//! through the dispatcher) and the kernel's connection setup, the once-a-second pool maintenance and, for policies that read
//! node reports, the periodic poll: a snapshot, a `GET /` probe and the poll's CPU overhead.

use std::time::Duration;

use locus_core::NodeId;
use locus_policy::PolicyConfig;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Exp};

use super::node::ApacheNode;
use super::stats::Measure;
use crate::config::{Arrivals, SimConfig};
use crate::cost_model::CostModel;
use crate::engine::SimRun;
use crate::error::SimError;
use crate::event_queue::{EventCode, EventQueue};
use crate::frontend::{FrontEnd, FrontEndEvent, FrontEndLimit, build_policy_with};
use crate::sim_policy::SimPolicy;
use crate::workload::{RequestKind, Workload};

/// CPU job id of a fork (the pool's).
pub(super) const FORK_JOB: u32 = u32::MAX;
/// CPU job id of work no process waits for: a poll's overhead burst, the kernel's setup.
pub(super) const KERNEL_JOB: u32 = u32::MAX - 1;
/// `Conn::request` of a probe.
pub(super) const PROBE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
pub(super) enum Event {
    /// A connection's SYN reaches the front-end (first attempt or retry).
    Connect(u32),
    /// The connection's request reaches its node (one RTT after the SYN).
    RequestArrives(u32),
    /// The node's CPU finishes a job (valid if it is the node's scheduled completion).
    CpuDone(u32),
    /// The disk read this connection waits for is done.
    ReadDone(u32),
    /// The rest of the connection's response fits in the send buffer.
    SendDrained(u32),
    OpenArrival,
    Maintenance,
    Poll,
}

impl EventCode for Event {
    fn encode(self) -> u32 {
        let (kind, payload) = match self {
            Event::Connect(c) => (0, c),
            Event::RequestArrives(c) => (1, c),
            Event::CpuDone(n) => (2, n),
            Event::ReadDone(c) => (3, c),
            Event::SendDrained(c) => (4, c),
            Event::OpenArrival => (5, 0),
            Event::Maintenance => (6, 0),
            Event::Poll => (7, 0),
        };
        debug_assert!(payload < 1 << 29);
        kind << 29 | payload
    }

    fn decode(code: u32) -> Event {
        let p = code & ((1 << 29) - 1);
        match code >> 29 {
            0 => Event::Connect(p),
            1 => Event::RequestArrives(p),
            2 => Event::CpuDone(p),
            3 => Event::ReadDone(p),
            4 => Event::SendDrained(p),
            5 => Event::OpenArrival,
            6 => Event::Maintenance,
            _ => Event::Poll,
        }
    }
}

/// Where a connection is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Stage {
    /// SYN accepted by the kernel; the request has not arrived yet.
    #[default]
    Handshake,
    /// Established, waiting in the node's backlog for a process.
    Backlog,
    /// Basic processing (and the IMS/INV reply or the dynamic page's CPU).
    Pre,
    /// Waiting for the disk.
    Disk,
    /// Transmitting a response larger than the send buffer.
    Transmit,
    /// Blocked until the rest of the response fits in the send buffer.
    Drain,
    /// (Transmit and) teardown.
    Teardown,
}

/// One connection (a request's current attempt, or a probe).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Conn {
    /// Position in the trace (`PROBE` for a probe).
    pub request: u32,
    pub target: u32,
    pub kind: RequestKind,
    pub node: u32,
    /// When the first attempt's SYN was sent.
    pub issued: u64,
    pub rtt: u64,
    /// When the request reaches the node.
    pub arrive_at: u64,
    /// Attempts dropped so far.
    pub attempt: u8,
    pub stage: Stage,
}

impl Conn {
    pub fn is_probe(&self) -> bool {
        self.request == PROBE
    }
}

/// The engine's state.
pub(super) struct Engine<'w> {
    pub w: &'w Workload,
    pub cfg: &'w SimConfig,
    pub costs: CostModel,
    pub fe: FrontEnd,
    pub nodes: Vec<ApacheNode>,
    pub events: EventQueue<Event>,
    pub conns: Vec<Conn>,
    free: Vec<u32>,
    /// Requests' connections not finished (including ones waiting to retry; probes aside) —
    /// the run ends with none and no arrival left.
    live: usize,
    next_request: usize,
    poisson: Option<Exp<f64>>,
    pub rng: SmallRng,
    poll: Option<(u64, u64)>,
    pub m: Measure,
    pub log: Option<Vec<FrontEndEvent>>,
    pub done: Vec<u32>,
}

/// Run `cfg` over `w` on the process-driven back end.
pub(crate) fn run(w: &Workload, cfg: &SimConfig, record: bool) -> Result<SimRun, SimError> {
    let mut e = Engine::new(w, cfg, record)?;
    e.events.push(w.times().map_or(0, |t| t[0]), Event::OpenArrival);
    e.events.push(1_000_000_000, Event::Maintenance);
    if let Some((period, _)) = e.poll {
        e.events.push(period, Event::Poll);
    }
    while let Some((now, ev)) = e.events.pop() {
        match ev {
            Event::Connect(c) => e.connect(c, now),
            Event::RequestArrives(c) => e.request_arrives(c, now),
            Event::CpuDone(n) => e.cpu_done(n as usize, now),
            Event::ReadDone(c) => e.read_done(c, now),
            Event::SendDrained(c) => e.send_drained(c, now),
            Event::OpenArrival => e.open_arrival(now),
            Event::Maintenance => e.maintenance(now),
            Event::Poll => e.poll(now),
        }
    }
    Ok(e.finish())
}

impl<'w> Engine<'w> {
    fn new(w: &'w Workload, cfg: &'w SimConfig, record: bool) -> Result<Engine<'w>, SimError> {
        if !cfg.node_events.is_empty() {
            return Err(SimError::Config("the apache back end does not take node events".into()));
        }
        let n = cfg.nodes as usize;
        let costs = cfg.effective_costs();
        let inputs = w.policy_inputs(&costs);
        let policy = build_policy_with(&cfg.policy, n, cfg.t_low, cfg.t_high, None, &inputs)?;
        let slow_start = Duration::from_millis(cfg.slow_start_ms);
        let fe = FrontEnd::around(policy, n, cfg.t_low, cfg.t_high, FrontEndLimit::None, slow_start);
        let overhead = match &cfg.policy {
            SimPolicy::Switch(PolicyConfig::WrrMetrics { variant }) => variant.overhead().as_nanos() as u64,
            _ => 0,
        };
        let poll = fe.report_period().map(|p| (p.as_nanos().max(1) as u64, overhead));
        let poisson = match cfg.arrivals {
            Arrivals::Poisson { rate } => Some(Exp::new(rate).map_err(|e| SimError::Config(e.to_string()))?),
            Arrivals::Trace => None,
            Arrivals::Closed { .. } => {
                return Err(SimError::Config("the apache back end needs open-loop arrivals".into()));
            }
        };
        let mut fe = fe;
        let mut nodes: Vec<ApacheNode> = (0..n).map(|_| ApacheNode::new(cfg)).collect();
        if cfg.apache.warm_caches {
            for (k, node) in nodes.iter_mut().enumerate() {
                // A content sniffer learns the warm start as if it had seen these requests.
                for id in node.warm(w, cfg.cache_capacity()) {
                    fe.observe(NodeId(k as u32), &w.request_info(id), Duration::ZERO, 0);
                }
            }
        }
        Ok(Engine {
            w,
            cfg,
            costs,
            fe,
            nodes,
            events: EventQueue::with_capacity(4096),
            conns: Vec::with_capacity(4096),
            free: Vec::new(),
            live: 0,
            next_request: 0,
            poisson,
            rng: SmallRng::seed_from_u64(cfg.seed),
            poll,
            m: Measure::new(w.len(), cfg.warmup_requests),
            log: record.then(Vec::new),
            done: Vec::new(),
        })
    }

    fn finished(&self) -> bool {
        self.next_request >= self.w.len() && self.live == 0
    }

    fn new_conn(&mut self, conn: Conn) -> u32 {
        if !conn.is_probe() {
            self.live += 1;
        }
        match self.free.pop() {
            Some(i) => {
                self.conns[i as usize] = conn;
                i
            }
            None => {
                self.conns.push(conn);
                (self.conns.len() - 1) as u32
            }
        }
    }

    pub(super) fn free_conn(&mut self, c: u32) {
        if !self.conns[c as usize].is_probe() {
            self.live -= 1;
        }
        self.free.push(c);
    }

    fn open_arrival(&mut self, now: u64) {
        let index = self.next_request;
        let Some(&target) = self.w.requests().get(index) else { return };
        self.next_request += 1;
        let predictions = || {
            self.fe.load_estimates().filter(|e| e.static_requests > 0 || self.fe.policy().name() == "csld")
        };
        if index as u64 == self.m.warmup {
            let p = predictions().map(|e| (e.static_requests, e.predicted_misses));
            self.m.start(now, &mut self.nodes, p);
        }
        if self.next_request == self.w.len() {
            let p = predictions().map(|e| (e.static_requests, e.predicted_misses));
            self.m.stop(now, &mut self.nodes, p);
        }
        let kind = self.w.kinds()[index];
        let conn = Conn { request: index as u32, target, kind, issued: now, ..Conn::default() };
        let c = self.new_conn(conn);
        self.connect(c, now);
        if self.next_request < self.w.len() {
            let next = match (&self.poisson, self.w.times()) {
                (Some(exp), _) => now + (exp.sample(&mut self.rng) * 1e9).round() as u64,
                (None, Some(times)) => times[self.next_request].max(now),
                (None, None) => now,
            };
            self.events.push(next, Event::OpenArrival);
        }
    }

    /// A SYN (first or retry) reaches the front-end: pick a node, then its backlog.
    fn connect(&mut self, c: u32, now: u64) {
        let conn = self.conns[c as usize];
        let node = if conn.is_probe() {
            NodeId(conn.node)
        } else {
            let info = self.w.request_info_at(conn.request as usize);
            let Some(node) = self.fe.assign(&info, now) else {
                self.give_up(c);
                return;
            };
            if let Some(log) = &mut self.log {
                log.push(FrontEndEvent::Assign {
                    at: now,
                    request: conn.request as u64,
                    target: conn.target,
                    node: node.0,
                });
            }
            self.nodes[node.index()].meter.set(now, self.fe.nodes()[node.index()].load);
            node
        };
        let rtt = if conn.is_probe() { 0 } else { self.costs.rtt.sample(&mut self.rng) };
        let measured = self.m.counts(conn.request);
        {
            let conn = &mut self.conns[c as usize];
            conn.node = node.0;
            conn.rtt = rtt;
            conn.arrive_at = now + rtt;
        }
        if measured {
            self.m.syns += 1;
        }
        let n = node.index();
        if self.nodes[n].backlog.is_full() {
            self.reject(c, now, measured);
            return;
        }
        self.conns[c as usize].stage = Stage::Handshake;
        self.run_cpu(n, now, self.costs.conn_setup_ns, KERNEL_JOB);
        self.events.push(now + rtt, Event::RequestArrives(c));
    }

    /// The node's backlog was full: the SYN is dropped; the client retries later or gives up.
    fn reject(&mut self, c: u32, now: u64, measured: bool) {
        let conn = self.conns[c as usize];
        if !conn.is_probe() {
            self.complete_at_front_end(&conn, now);
        }
        if measured {
            self.m.rejected += 1;
        }
        match self.cfg.apache.retry_delays_s.get(conn.attempt as usize) {
            Some(&delay) => {
                if measured {
                    self.m.retries += 1;
                }
                self.conns[c as usize].attempt += 1;
                self.events.push(now + (delay * 1e9).round() as u64, Event::Connect(c));
            }
            None => self.give_up(c),
        }
    }

    fn give_up(&mut self, c: u32) {
        let conn = self.conns[c as usize];
        if conn.is_probe() {
            self.nodes[conn.node as usize].probe_out = false;
        } else if self.m.counts(conn.request) {
            self.m.failed += 1;
        }
        self.free_conn(c);
    }

    /// Tell the front-end the connection is over (teardown or a dropped SYN).
    pub(super) fn complete_at_front_end(&mut self, conn: &Conn, now: u64) {
        let hash = self.w.targets()[conn.target as usize].hash;
        self.fe.complete(NodeId(conn.node), hash, now);
        if let Some(log) = &mut self.log {
            log.push(FrontEndEvent::Complete { at: now, node: conn.node, target_hash: hash });
        }
        let n = conn.node as usize;
        self.nodes[n].meter.set(now, self.fe.nodes()[n].load);
    }

    /// Apache's once-a-second pool maintenance on every node.
    fn maintenance(&mut self, now: u64) {
        if self.finished() {
            return;
        }
        let fork_ns = (self.cfg.apache.fork_ns as f64 / self.cfg.cpu_speed).round() as u64;
        for n in 0..self.nodes.len() {
            let spawn = self.nodes[n].pool.maintain();
            for _ in 0..spawn {
                self.run_cpu(n, now, fork_ns, FORK_JOB);
            }
        }
        self.events.push(now + 1_000_000_000, Event::Maintenance);
    }

    /// The metrics poll: every node reports its host metrics, pays the poll's CPU and gets
    /// a `GET /` probe (whose time is reported when it is answered).
    fn poll(&mut self, now: u64) {
        let Some((period, overhead)) = self.poll else { return };
        if self.finished() {
            return;
        }
        for n in 0..self.nodes.len() {
            let report = self.nodes[n].snapshot();
            self.fe.report(NodeId(n as u32), &report, now);
            if overhead > 0 {
                self.run_cpu(n, now, overhead, KERNEL_JOB);
            }
            if !self.nodes[n].probe_out {
                self.nodes[n].probe_out = true;
                let probe = Conn {
                    request: PROBE,
                    target: 0,
                    kind: RequestKind::Static,
                    node: n as u32,
                    issued: now,
                    ..Conn::default()
                };
                let c = self.new_conn(probe);
                self.connect(c, now);
            }
        }
        self.events.push(now + period, Event::Poll);
    }
}
