//! `Simulation`: the discrete-event engine. Requests from a closed loop of clients (or an
//! open Poisson or trace-timed stream) pass the front-end (`FrontEnd`: the switch's own
//! `Cluster` and policy, plus the admission limit S and its FIFO queue), then a node's CPU
//! (setup), its cache, a disk (or another node's memory under WRR/GMS), the CPU again
//! (transmit, teardown). Time is an integer ns clock; randomness comes only from the seed.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;
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
use crate::node_model::{NO_SLOT, NodeModel, WaitList};
use crate::report::{NodeReport, SimReport};
use crate::workload::Workload;

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
    /// The remote-memory fetch (WRR/GMS) started by this request is done.
    FetchDone(u32),
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
        };
        debug_assert!(payload < 1 << 29, "at most 2^29 requests in flight");
        kind << 29 | payload
    }

    #[inline]
    fn decode(code: u32) -> Event {
        let payload = code & ((1 << 29) - 1);
        match code >> 29 {
            0 => Event::FrontEndDone(payload),
            1 => Event::Arrive(payload),
            2 => Event::SetupDone(payload),
            3 => Event::ReadDone(payload),
            4 => Event::FetchDone(payload),
            5 => Event::Complete(payload),
            6 => Event::OpenArrival,
            _ => Event::NodeChange(payload),
        }
    }
}

/// A request in flight.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// Position in the trace.
    request: u64,
    target: u32,
    node: u32,
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
        let replacement = cfg.cache.replacement;
        let track = (dir.is_some() && matches!(replacement, Replacement::Lru | Replacement::Lfu))
            .then_some(w.targets().len());
        let nodes = (0..n)
            .map(|_| {
                NodeModel::new(cfg.disks, capacity, max_object, replacement, cfg.idle_threshold(), track)
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
            gms: matches!(cfg.policy, crate::SimPolicy::WrrGms),
            track_fetching: matches!(cfg.policy, crate::SimPolicy::LbGc),
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
                Event::ReadDone(slot) => self.fetched(slot, now, true),
                Event::FetchDone(slot) => self.fetched(slot, now, false),
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
        let slot = Slot { request: self.next_request as u64, target, node: 0, issued: now, next: NO_SLOT };
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

    // ---- a request on its node ----

    /// The request reaches its node: a hit runs setup, transmit and teardown as one CPU
    /// job; a miss runs setup and looks again.
    #[inline]
    fn arrive(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        let n = s.node as usize;
        let meta = self.w.targets()[s.target as usize];
        let node = &mut self.nodes[n];
        node.counters.requests += 1;
        if let Some(class) = meta.class {
            node.counters.dynamic += 1;
            let cpu = self.setup_cpu
                + self.costs.dynamic_fixed_ns
                + self.costs.class_cpu_ns(class, &mut self.rng)
                + self.costs.transmit_ns(meta.size)
                + self.costs.conn_teardown_ns;
            let done = node.cpu.submit(now, cpu);
            self.events.push(done, Event::Complete(slot));
            return;
        }
        if node.cache.get(&s.target).is_some() {
            self.local_hit(n, s.target, now);
            let cpu = self.setup_cpu + self.costs.transmit_ns(meta.size) + self.costs.conn_teardown_ns;
            let done = self.nodes[n].cpu.submit(now, cpu);
            self.events.push(done, Event::Complete(slot));
        } else {
            let done = node.cpu.submit(now, self.setup_cpu);
            self.events.push(done, Event::SetupDone(slot));
        }
    }

    #[inline]
    fn local_hit(&mut self, n: usize, doc: u32, now: u64) {
        let node = &mut self.nodes[n];
        node.counters.local_hits += 1;
        if !node.last_use.is_empty() {
            node.last_use[doc as usize] = now;
        }
        if self.track_fetching
            && let Some(dir) = &self.dir
        {
            dir.set_fetching(doc, n, false);
        }
    }

    /// Setup done after a miss: hit now, join a read in progress, or start one (from disk,
    /// or under WRR/GMS from another node's memory).
    fn setup_done(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        let n = s.node as usize;
        let doc = s.target;
        let size = self.w.targets()[doc as usize].size;
        if self.nodes[n].cache.get(&doc).is_some() {
            self.local_hit(n, doc, now);
            let done =
                self.nodes[n].cpu.submit(now, self.costs.transmit_ns(size) + self.costs.conn_teardown_ns);
            self.events.push(done, Event::Complete(slot));
            return;
        }
        match self.nodes[n].reads.entry(doc) {
            Entry::Occupied(mut e) => {
                let list = e.get_mut();
                self.slots[list.tail as usize].next = slot;
                list.tail = slot;
                return;
            }
            Entry::Vacant(e) => {
                e.insert(WaitList { head: slot, tail: slot });
            }
        }
        if self.gms
            && let Some(holder) = self.remote_holder(n, doc)
        {
            let cpu = self.costs.gms_sender_ns(size);
            let h = &mut self.nodes[holder];
            h.counters.remote_sends += 1;
            h.cache.get(&doc);
            if !h.last_use.is_empty() {
                h.last_use[doc as usize] = now;
            }
            let sent = h.cpu.submit(now, cpu);
            self.events.push(sent + self.costs.gms.latency_ns, Event::FetchDone(slot));
            return;
        }
        let disk = self.w.targets()[doc as usize].popularity_rank as u64 % self.disks;
        let node = &mut self.nodes[n];
        node.counters.disk_reads += 1;
        let done = node.disks[disk as usize].submit_read(now, size, &self.costs);
        self.events.push(done, Event::ReadDone(slot));
    }

    /// Under WRR/GMS: another up node whose memory holds `doc`, the first after `n`.
    fn remote_holder(&self, n: usize, doc: u32) -> Option<usize> {
        let dir = self.dir.as_ref()?;
        let mask = dir.holders(doc) & self.up_mask() & !(1u64 << n);
        if mask == 0 {
            return None;
        }
        let start = (n + 1) % 64;
        let k = mask.rotate_right(start as u32).trailing_zeros() as usize;
        Some((start + k) % 64)
    }

    #[inline]
    fn up_mask(&self) -> u64 {
        self.up_mask
    }

    /// The file is in memory: cache it, and every request waiting for it transmits.
    fn fetched(&mut self, slot: u32, now: u64, from_disk: bool) {
        let s = self.slots[slot as usize];
        let n = s.node as usize;
        let doc = s.target;
        let size = self.w.targets()[doc as usize].size;
        self.store(n, doc, now, true);
        if self.track_fetching
            && let Some(dir) = &self.dir
        {
            dir.set_fetching(doc, n, false);
        }
        let Some(list) = self.nodes[n].reads.remove(&doc) else { return };
        let cpu = self.costs.transmit_ns(size) + self.costs.conn_teardown_ns;
        let mut waiter = list.head;
        while waiter != NO_SLOT {
            let node = &mut self.nodes[n];
            if from_disk {
                node.counters.misses += 1;
            } else {
                node.counters.remote_hits += 1;
            }
            let done = node.cpu.submit(now, cpu);
            self.events.push(done, Event::Complete(waiter));
            let next = self.slots[waiter as usize].next;
            self.slots[waiter as usize].next = NO_SLOT;
            waiter = next;
        }
    }

    /// Put `doc` in node `n`'s cache, keeping the directory current; under WRR/GMS a
    /// document evicted while no other node holds it moves to the node with the globally
    /// oldest content (`forward`; documents that leaves evicts are dropped).
    fn store(&mut self, n: usize, doc: u32, now: u64, forward: bool) {
        let size = self.w.targets()[doc as usize].size;
        if size > self.max_object {
            return;
        }
        self.evicted.clear();
        let evicted = &mut self.evicted;
        let node = &mut self.nodes[n];
        node.cache.insert_with_evictions(doc, (), size, self.gds_cost, |k, ()| evicted.push(k));
        let Some(dir) = &self.dir else { return };
        dir.set_held(doc, n, true);
        if self.track_fetching {
            dir.set_fetching(doc, n, false);
        }
        let track = !node.last_use.is_empty();
        if track {
            node.last_use[doc as usize] = now;
        }
        let mut last_victim_use = None;
        for &v in evicted.iter() {
            dir.set_held(v, n, false);
            if track {
                last_victim_use = Some(node.last_use[v as usize]);
            }
        }
        match self.replacement {
            Replacement::Gds | Replacement::Gdsf => dir.set_age_floor(n, node.cache.inflation().to_bits()),
            Replacement::Lru | Replacement::Lfu => {
                if let Some(t) = last_victim_use {
                    dir.set_age_floor(n, t);
                }
            }
        }
        dir.set_free_bytes(n, self.capacity.saturating_sub(node.cache.used_bytes()));
        if !(forward && self.gms) {
            return;
        }
        let mut singles = std::mem::take(&mut self.forward);
        singles.clear();
        singles.extend(self.evicted.iter().copied().filter(|&v| dir.holders(v) == 0));
        if !singles.is_empty() {
            let others = self.up_mask() & !(1u64 << n);
            let dir = dir.clone();
            for &v in &singles {
                if let Some(j) = dir.oldest_node(others, self.w.targets()[v as usize].size, None) {
                    self.store(j, v, now, false);
                }
            }
        }
        self.forward = singles;
    }

    /// Transmit and teardown done: the request completes; the front-end admits the next
    /// and, in a closed loop, the client sends its next request.
    #[inline]
    fn complete(&mut self, slot: u32, now: u64) {
        let s = self.slots[slot as usize];
        let hash = self.w.targets()[s.target as usize].hash;
        self.fe.complete(NodeId(s.node), hash, now);
        if let Some(log) = &mut self.log {
            log.push(FrontEndEvent::Complete { at: now, node: s.node, target_hash: hash });
        }
        let load = self.fe.nodes()[s.node as usize].load;
        self.nodes[s.node as usize].meter.set(now, load);
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
        self.delays.clear();
    }

    // ---- results ----

    fn finish(mut self) -> SimRun {
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
