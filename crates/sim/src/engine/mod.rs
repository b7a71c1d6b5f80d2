//! `Simulation`: the discrete-event engine. Requests from a closed loop of clients (or an
//! open Poisson or trace-timed stream) pass the front-end (`FrontEnd`: the switch's own
//! `Cluster` and policy, plus the admission limit S and its FIFO queue), then a node's CPU
//! (setup), its cache, a disk or the shared file server (or another node's memory under
//! WRR/GMS and cooperative caching), the CPU again (transmit, teardown) and, with links, the
//! node's TX link (`serve`). Time is an integer ns clock; randomness comes only from the seed.

mod results;
mod serve;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use locus_cache::Replacement;
use locus_core::NodeId;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Exp};

use crate::config::{Arrivals, Backend, SimConfig};
use crate::cost_model::CostModel;
use crate::directory::CacheDirectory;
use crate::error::SimError;
use crate::event_queue::{EventCode, EventQueue};
use crate::frontend::{FrontEnd, FrontEndEvent};
use crate::network::{CloneCost, FileServer, NodeLink, Storage};
use crate::node_model::{NO_SLOT, NodeModel};
use crate::report::SimReport;
use crate::sim_policy::SimPolicy;
use crate::workload::Workload;
use serve::Source;

/// Something that happens at a point of simulated time; the payload is a request slot
/// (or a node-event index).
#[derive(Clone, Copy, Debug)]
enum Event {
    /// The front-end's CPU finished with the request (only with a front-end cost).
    FrontEndDone(u32),
    /// The request reaches its node (after the client RTT).
    Arrive(u32),
    /// Connection setup done on the node's CPU; look in the cache again.
    SetupDone(u32),
    /// The disk read started by this request is done.
    ReadDone(u32),
    /// The remote-memory fetch (WRR/GMS, cooperative caching) started by this request is
    /// done.
    FetchDone(u32),
    /// Cooperative caching: the holder has the file ready to send over the links.
    FetchSend(u32),
    /// Socket Cloning: the entry node accepted, parsed and cloned; the owner takes over.
    Cloned(u32),
    /// The serving node's CPU is done; the response goes out through its TX link.
    Transmit(u32),
    /// Transmit and teardown done: the request completes.
    Complete(u32),
    /// The next open-loop request arrives.
    OpenArrival,
    /// `SimConfig::node_events[i]` happens.
    NodeChange(u32),
}

impl EventCode for Event {
    #[inline]
    fn encode(self) -> u32 {
        let (kind, payload) = match self {
            Event::FrontEndDone(s) => (0, s),
            Event::Arrive(s) => (1, s),
            Event::SetupDone(s) => (2, s),
            Event::ReadDone(s) => (3, s),
            Event::FetchDone(s) => (4, s),
            Event::Complete(s) => (5, s),
            Event::OpenArrival => (6, 0),
            Event::NodeChange(i) => (7, i),
            Event::FetchSend(s) => (8, s),
            Event::Cloned(s) => (9, s),
            Event::Transmit(s) => (10, s),
        };
        debug_assert!(payload < 1 << 28, "at most 2^28 requests in flight");
        kind << 28 | payload
    }

    #[inline]
    fn decode(code: u32) -> Event {
        let payload = code & ((1 << 28) - 1);
        match code >> 28 {
            0 => Event::FrontEndDone(payload),
            1 => Event::Arrive(payload),
            2 => Event::SetupDone(payload),
            3 => Event::ReadDone(payload),
            4 => Event::FetchDone(payload),
            5 => Event::Complete(payload),
            6 => Event::OpenArrival,
            7 => Event::NodeChange(payload),
            8 => Event::FetchSend(payload),
            9 => Event::Cloned(payload),
            _ => Event::Transmit(payload),
        }
    }
}

/// A request in flight.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// Position in the trace.
    request: u64,
    target: u32,
    /// The node serving it (under Socket Cloning the owner once cloned).
    node: u32,
    /// The node the front-end sent it to (its load is counted there).
    entry: u32,
    /// The node a cooperative fetch for it reads from.
    holder: u32,
    /// When the client issued it.
    issued: u64,
    /// Next request waiting for the same file (`NO_SLOT`: none).
    next: u32,
}

/// A configured simulation of one point over a workload.
pub struct Simulation<'w> {
    workload: &'w Workload,
    config: SimConfig,
    record: bool,
}

/// The outcome of a run: the report and, if recorded, the front-end's event log.
#[derive(Debug, Clone)]
pub struct SimRun {
    pub report: SimReport,
    pub front_end_log: Vec<FrontEndEvent>,
}

/// Run one point and return its report.
pub fn simulate(workload: &Workload, config: &SimConfig) -> Result<SimReport, SimError> {
    Ok(Simulation::new(workload, config.clone())?.run()?.report)
}

impl<'w> Simulation<'w> {
    /// Check `config` against `workload`.
    pub fn new(workload: &'w Workload, config: SimConfig) -> Result<Simulation<'w>, SimError> {
        config.validate()?;
        if workload.is_empty() {
            return Err(SimError::EmptyTrace);
        }
        if matches!(config.arrivals, Arrivals::Trace) && workload.times().is_none() {
            return Err(SimError::Config("trace arrivals need a trace with a time on every record".into()));
        }
        Ok(Simulation { workload, config, record: false })
    }

    /// Also record every front-end event (assign, complete, node up/down) in `SimRun`.
    pub fn recording(mut self) -> Simulation<'w> {
        self.record = true;
        self
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Run to the end of the trace (on the configured back end).
    pub fn run(&self) -> Result<SimRun, SimError> {
        match self.config.backend {
            Backend::Fifo => Engine::new(self.workload, &self.config, self.record)?.run(),
            Backend::Apache => crate::apache::run(self.workload, &self.config, self.record),
        }
    }
}

struct Engine<'w> {
    w: &'w Workload,
    cfg: &'w SimConfig,
    costs: CostModel,
    /// CPU of a static request before the cache lookup (setup + basic processing).
    setup_cpu: u64,
    fe: FrontEnd,
    nodes: Vec<NodeModel>,
    dir: Option<Arc<CacheDirectory>>,
    gms: bool,
    /// Cooperative caching, with whether the requester keeps the copy it fetched.
    coop: Option<bool>,
    /// Socket Cloning, and its costs (the clone's entry and owner shares).
    cloning: bool,
    cloning_cost: CloneCost,
    clone_entry_ns: u64,
    clone_owner_ns: u64,
    /// Nodes have network links (`NodeModel::link`).
    links: bool,
    file_server: Option<FileServer>,
    /// The file server's (service busy, TX busy, TX bytes, reads) at the start of measurement.
    fs_at_start: [u64; 4],
    /// Keep the directory's "fetching" bits (only LB/GC reads them).
    track_fetching: bool,
    /// Nodes in the view, as a bit mask (nodes 0..64).
    up_mask: u64,
    replacement: Replacement,
    capacity: u64,
    max_object: u64,
    gds_cost: f64,
    disks: u64,
    events: EventQueue<Event>,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    /// Requests waiting for admission, in arrival order.
    waiting: VecDeque<u32>,
    fe_cpu: crate::queues::CpuQueue,
    next_request: usize,
    closed: bool,
    clients: Option<u32>,
    poisson: Option<Exp<f64>>,
    rng: SmallRng,
    rtt: bool,
    completed: u64,
    completed_at_start: u64,
    measuring: bool,
    measure_start: u64,
    last_completion: u64,
    delays: Vec<u64>,
    evicted: Vec<u32>,
    forward: Vec<u32>,
    log: Option<Vec<FrontEndEvent>>,
    admission_limit: Option<usize>,
}

impl<'w> Engine<'w> {
    fn new(w: &'w Workload, cfg: &'w SimConfig, record: bool) -> Result<Engine<'w>, SimError> {
        let n = cfg.nodes as usize;
        let capacity = cfg.cache_capacity();
        let max_object = cfg.max_object();
        let dir = cfg.policy.needs_directory().then(|| {
            let docs: Vec<(u64, u64)> = w.targets().iter().map(|t| (t.hash, t.size)).collect();
            Arc::new(CacheDirectory::new(n, capacity, max_object, &docs))
        });
        let fe = FrontEnd::new(
            &cfg.policy,
            n,
            cfg.t_low,
            cfg.t_high,
            cfg.frontend_limit,
            Duration::from_millis(cfg.slow_start_ms),
            dir.clone(),
        )?;
        let replacement = cfg.policy.replacement().unwrap_or(cfg.cache.replacement);
        let track = (matches!(cfg.policy, SimPolicy::LbGc | SimPolicy::WrrGms)
            && matches!(replacement, Replacement::Lru | Replacement::Lfu))
        .then_some(w.targets().len());
        let nodes = (0..n)
            .map(|_| {
                let mut node =
                    NodeModel::new(cfg.disks, capacity, max_object, replacement, cfg.idle_threshold(), track);
                node.link = cfg.links.as_ref().map(NodeLink::new);
                node
            })
            .collect();
        let admission_limit = fe.admission_limit();
        let (closed, clients, poisson) = match cfg.arrivals {
            Arrivals::Closed { .. } => (true, Some(cfg.clients(admission_limit)), None),
            Arrivals::Poisson { rate } => {
                (false, None, Some(Exp::new(rate).map_err(|e| SimError::Config(e.to_string()))?))
            }
            Arrivals::Trace => (false, None, None),
        };
        let costs = cfg.effective_costs();
        let mut events = EventQueue::with_capacity(1024);
        for (i, e) in cfg.node_events.iter().enumerate() {
            events.push((e.at_s * 1e9).round() as u64, Event::NodeChange(i as u32));
        }
        let slot_capacity = clients.map_or(1024, |c| c as usize).min(w.len());
        Ok(Engine {
            w,
            cfg,
            setup_cpu: costs.conn_setup_ns + costs.request_cpu_ns,
            rtt: !costs.rtt.is_none(),
            costs,
            fe,
            nodes,
            gms: matches!(cfg.policy, SimPolicy::WrrGms),
            coop: match cfg.policy {
                SimPolicy::CoopCache { keep_copy, .. } => Some(keep_copy),
                _ => None,
            },
            cloning: matches!(cfg.policy, SimPolicy::SocketCloning),
            cloning_cost: cfg.cloning.clone(),
            clone_entry_ns: cfg.cloning.entry_ns(),
            clone_owner_ns: cfg.cloning.owner_ns(),
            links: cfg.links.is_some(),
            file_server: match &cfg.storage {
                Storage::LocalDisk => None,
                Storage::FileServer(m) => Some(FileServer::new(m)),
            },
            fs_at_start: [0; 4],
            track_fetching: matches!(cfg.policy, SimPolicy::LbGc),
            up_mask: if n >= 64 { u64::MAX } else { (1u64 << n) - 1 },
            dir,
            replacement,
            capacity,
            max_object,
            gds_cost: cfg.cache.gds_cost,
            disks: cfg.disks.max(1) as u64,
            events,
            slots: Vec::with_capacity(slot_capacity),
            free_slots: Vec::with_capacity(slot_capacity),
            waiting: VecDeque::with_capacity(slot_capacity),
            fe_cpu: Default::default(),
            next_request: 0,
            closed,
            clients,
            poisson,
            rng: SmallRng::seed_from_u64(cfg.seed),
            completed: 0,
            completed_at_start: 0,
            measuring: cfg.warmup_requests == 0,
            measure_start: 0,
            last_completion: 0,
            delays: Vec::with_capacity(w.len()),
            evicted: Vec::new(),
            forward: Vec::new(),
            log: record.then(Vec::new),
            admission_limit,
        })
    }

    fn run(mut self) -> Result<SimRun, SimError> {
        if self.closed {
            for _ in 0..self.clients.unwrap_or(1) {
                if !self.issue_next(0) {
                    break;
                }
            }
        } else {
            let first = self.w.times().map_or(0, |t| t[0]);
            self.events.push(first, Event::OpenArrival);
        }
        while let Some((now, event)) = self.events.pop() {
            match event {
                Event::Complete(slot) => self.complete(slot, now),
                Event::SetupDone(slot) => self.setup_done(slot, now),
                Event::ReadDone(slot) => self.fetched(slot, now, Source::Storage),
                Event::FetchDone(slot) => self.fetched(slot, now, Source::Remote),
                Event::FetchSend(slot) => self.fetch_send(slot, now),
                Event::Cloned(slot) => self.cloned(slot, now),
                Event::Transmit(slot) => self.transmit(slot, now),
                Event::Arrive(slot) => self.arrive(slot, now),
                Event::FrontEndDone(slot) => self.admit(slot, now),
                Event::OpenArrival => self.open_arrival(now),
                Event::NodeChange(i) => self.node_change(i as usize, now),
            }
        }
        Ok(self.finish())
    }

    // ---- clients and front-end ----

    /// Issue the next request of the trace at `now`; false when the trace is exhausted.
    fn issue_next(&mut self, now: u64) -> bool {
        let Some(&target) = self.w.requests().get(self.next_request) else { return false };
        let slot = Slot {
            request: self.next_request as u64,
            target,
            node: 0,
            entry: 0,
            holder: 0,
            issued: now,
            next: NO_SLOT,
        };
        self.next_request += 1;
        let index = match self.free_slots.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        if self.costs.frontend_ns > 0 {
            let done = self.fe_cpu.submit(now, self.costs.frontend_ns);
            self.events.push(done, Event::FrontEndDone(index));
        } else {
            self.admit(index, now);
        }
        true
    }

    fn open_arrival(&mut self, now: u64) {
        if !self.issue_next(now) {
            return;
        }
        if self.next_request >= self.w.len() {
            return;
        }
        let next = match (&self.poisson, self.w.times()) {
            (Some(exp), _) => now + (exp.sample(&mut self.rng) * 1e9).round() as u64,
            (None, Some(times)) => times[self.next_request].max(now),
            (None, None) => now,
        };
        self.events.push(next, Event::OpenArrival);
    }

    /// A request reaches the front-end's admission check.
    #[inline]
    fn admit(&mut self, slot: u32, now: u64) {
        if !(self.waiting.is_empty() && self.fe.has_room() && self.dispatch(slot, now)) {
            self.waiting.push_back(slot);
        }
    }

    /// Admit waiting requests while there is room.
    #[inline]
    fn drain_waiting(&mut self, now: u64) {
        while let Some(&slot) = self.waiting.front() {
            if !self.fe.has_room() || !self.dispatch(slot, now) {
                break;
            }
            self.waiting.pop_front();
        }
    }

    /// Ask the policy for a node and send the request there; false if no node is up.
    #[inline]
    fn dispatch(&mut self, slot: u32, now: u64) -> bool {
        let target = self.slots[slot as usize].target;
        let Some(node) = self.fe.assign(&self.w.request_info(target), now) else { return false };
        let n = node.index();
        self.slots[slot as usize].node = node.0;
        self.slots[slot as usize].entry = node.0;
        if let Some(log) = &mut self.log {
            let request = self.slots[slot as usize].request;
            log.push(FrontEndEvent::Assign { at: now, request, target, node: node.0 });
        }
        let load = self.fe.nodes()[n].load;
        self.nodes[n].meter.set(now, load);
        if self.track_fetching
            && let Some(dir) = &self.dir
            && self.w.targets()[target as usize].class.is_none()
            && dir.holders(target) & (1 << n) == 0
        {
            dir.set_fetching(target, n, true);
        }
        if self.rtt {
            let rtt = self.costs.rtt.sample(&mut self.rng);
            self.events.push(now + rtt, Event::Arrive(slot));
        } else {
            self.arrive(slot, now);
        }
        true
    }

    fn node_change(&mut self, i: usize, now: u64) {
        let e = &self.cfg.node_events[i];
        let (node, up) = (e.node, e.up);
        self.fe.set_up(NodeId(node), up, now);
        if node < 64 {
            self.up_mask = if up { self.up_mask | 1 << node } else { self.up_mask & !(1 << node) };
        }
        if let Some(log) = &mut self.log {
            log.push(FrontEndEvent::SetUp { at: now, node, up });
        }
        self.drain_waiting(now);
    }

    /// Transmit and teardown done: the request completes; the front-end admits the next
    /// and, in a closed loop, the client sends its next request.
    #[inline]
    fn complete(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        let hash = self.w.targets()[s.target as usize].hash;
        self.fe.complete(NodeId(s.entry), hash, now);
        if let Some(log) = &mut self.log {
            log.push(FrontEndEvent::Complete { at: now, node: s.entry, target_hash: hash });
        }
        let load = self.fe.nodes()[s.entry as usize].load;
        self.nodes[s.entry as usize].meter.set(now, load);
        if self.measuring {
            self.delays.push(now - s.issued);
        }
        self.completed += 1;
        self.last_completion = now;
        self.free_slots.push(slot);
        if !self.measuring && self.completed >= self.cfg.warmup_requests {
            self.start_measuring(now);
        }
        self.drain_waiting(now);
        if self.closed {
            self.issue_next(now);
        }
    }

    fn start_measuring(&mut self, now: u64) {
        self.measuring = true;
        self.measure_start = now;
        self.completed_at_start = self.completed;
        for node in &mut self.nodes {
            node.restart(now);
        }
        if let Some(fs) = &self.file_server {
            let (service, tx, bytes) = fs.busy();
            self.fs_at_start = [service, tx, bytes, fs.reads()];
        }
        self.delays.clear();
    }
}
