//! `ClientConnection`: one simulated client on a worker's event loop. It takes jobs from its
//! `JobFeed` (closed loop: after the last one and any think time; open loop: at its worker's
//! next `ArrivalQueue` arrival), writes their pre-rendered requests (up to the pipeline depth
//! before reading), reads and checks the answers in order, and counts them in `ThreadStats`:
//! every measured request ends answered, failed, or outstanding at the window's end (its
//! latency censored there), and an open-loop arrival it took and never sent is counted too.
//! Buffers are reused for the whole run: no allocation or lock per request.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use crate::accounting::NotSentReason;
use crate::exchange::{Fault, check_response, connect_within, count_response, read_response};
use crate::h2_stream::H2Origin;
use crate::load_stream::{LoadStream, TlsTarget};
use crate::open_loop::ArrivalQueue;
use crate::response_reader::{ResponseReader, ResponseSummary};
use crate::stats::{ErrorKind, LiveCounters, ThreadStats};
use crate::think_time::{ThinkSampler, ThinkTime};
use crate::workload::{JobFeed, WorkloadPlan};

/// One server the load is spread over.
#[derive(Clone, Debug)]
pub struct ServerTarget {
    pub addr: SocketAddr,
    /// `Host: …\r\n`, `Connection: close\r\n` without keep-alive, and the blank line.
    pub head_tail: Box<[u8]>,
    /// `http://host:port` (or `https://`), for mismatch reports.
    pub base: String,
    /// How to speak TLS to it (`https://` targets).
    pub tls: Option<TlsTarget>,
}

/// Settings every connection of a run shares.
#[derive(Clone, Debug)]
pub struct RunSettings {
    pub servers: Vec<ServerTarget>,
    pub depth: usize,
    pub keepalive: bool,
    pub timeout: Duration,
    pub think: ThinkTime,
    pub sessions: bool,
    pub seed: u64,
    pub max_samples: usize,
    /// Speak HTTP/2 (`H2Connection`s instead of `ClientConnection`s).
    pub h2: bool,
    /// HTTP/2: streams in flight per connection.
    pub streams: usize,
    /// HTTP/2: each server's `:scheme` and `:authority` (empty without `h2`).
    pub origins: Vec<H2Origin>,
}

/// When the run started, when the warm-up ends and when no new request may start.
#[derive(Clone, Copy, Debug)]
pub struct RunTiming {
    pub start: Instant,
    pub warmup_end: Instant,
    pub run_end: Option<Instant>,
}

/// The measured requests a run may still send (`--requests`), shared by every thread.
#[derive(Debug)]
pub struct RequestBudget {
    limit: Option<u64>,
    taken: AtomicU64,
}

impl RequestBudget {
    /// A budget of `limit` requests (`None`: unlimited).
    pub fn new(limit: Option<u64>) -> RequestBudget {
        RequestBudget { limit, taken: AtomicU64::new(0) }
    }

    /// Take one request from the budget; false once it is spent.
    pub fn take(&self) -> bool {
        match self.limit {
            None => true,
            Some(n) => self.taken.fetch_add(1, Ordering::Relaxed) < n,
        }
    }

    /// Give back a request taken but not sent.
    pub fn give_back(&self) {
        if self.limit.is_some() {
            self.taken.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// What a worker thread's connections share (single-threaded: no locks).
pub struct WorkerShared {
    pub plan: Arc<WorkloadPlan>,
    pub settings: Arc<RunSettings>,
    pub budget: Arc<RequestBudget>,
    pub timing: RunTiming,
    pub stats: RefCell<ThreadStats>,
    pub live: Arc<LiveCounters>,
    /// Open loop: this thread's arrivals.
    pub arrivals: Option<RefCell<ArrivalQueue>>,
    /// A connection ended because the workload had nothing left to send.
    pub workload_ended: Cell<bool>,
}

impl WorkerShared {
    /// Whether the run's end has passed at `now`.
    pub(crate) fn run_over(&self, now: Instant) -> bool {
        self.timing.run_end.is_some_and(|end| now >= end)
    }

    /// Return `n` requests taken from the budget and not sent.
    pub(crate) fn give_back(&self, n: usize) {
        for _ in 0..n {
            self.budget.give_back();
        }
    }

    /// Count `n` errors of `kind`.
    pub(crate) fn count_error(&self, kind: ErrorKind, n: u64) {
        self.stats.borrow_mut().errors.add(kind, n);
        self.live.add_errors(n);
    }
}

/// A request written and not yet answered.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    template: u32,
    /// Latency is measured from here: the send time, or the scheduled time if late.
    latency_from: Instant,
    /// The timeout runs from here.
    sent_at: Instant,
    measured: bool,
    /// An open-loop arrival itself (not a later request of its session).
    arrival: bool,
}

/// Whether a client goes on after a step, or stops (its run is over).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Stop,
}

/// A simulated client; see the module documentation.
pub struct ClientConnection {
    slot: usize,
    shared: Rc<WorkerShared>,
    stream: Option<LoadStream>,
    /// Each server's TLS settings as this client holds them (its own session store).
    tls: Vec<Option<TlsTarget>>,
    /// Responses completed on the current connection.
    served: u64,
    connects: usize,
    server: usize,
    reader: ResponseReader,
    wbuf: Vec<u8>,
    inflight: VecDeque<InFlight>,
    batch: Vec<u32>,
    feed: JobFeed,
    think: ThinkSampler,
    timer: Pin<Box<Sleep>>,
    /// A measured open-loop arrival counted as scheduled and not yet sent.
    arrival_pending: bool,
}

/// A client's own seed from the run's: a different stream of draws for every client.
pub(crate) fn mix(seed: u64, slot: usize) -> u64 {
    seed ^ (slot as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl ClientConnection {
    /// Client number `slot` (must be created inside the worker's runtime).
    pub fn new(slot: usize, shared: Rc<WorkerShared>) -> ClientConnection {
        let settings = &shared.settings;
        let depth = settings.depth;
        let feed = JobFeed::new(shared.plan.clone(), mix(settings.seed, slot), shared.timing.start);
        let think = ThinkSampler::new(settings.think, mix(settings.seed ^ 0x0074_6869_6e6b, slot));
        let far = tokio::time::Instant::now() + Duration::from_secs(86_400 * 365);
        ClientConnection {
            slot,
            stream: None,
            tls: settings.servers.iter().map(|s| s.tls.as_ref().map(TlsTarget::for_one_client)).collect(),
            served: 0,
            connects: 0,
            server: slot % settings.servers.len().max(1),
            reader: ResponseReader::new(),
            wbuf: Vec::with_capacity(4096),
            inflight: VecDeque::with_capacity(depth),
            batch: Vec::with_capacity(depth.max(16)),
            feed,
            think,
            timer: Box::pin(tokio::time::sleep_until(far)),
            arrival_pending: false,
            shared,
        }
    }

    fn run_over(&self, now: Instant) -> bool {
        self.shared.timing.run_end.is_some_and(|end| now >= end)
    }

    /// Run until the workload, the request budget or the time is used up.
    pub async fn run(mut self) {
        let mut first = true;
        loop {
            if self.run_over(Instant::now()) {
                break;
            }
            if !first && !self.think.is_none() {
                let pause = self.think.next_pause();
                if self.wait_until(Instant::now() + pause).await == Flow::Stop {
                    break;
                }
            }
            first = false;
            let arrival = self.shared.arrivals.as_ref().map(|q| q.borrow_mut().take(Instant::now()));
            // A measured arrival takes its budget when reserved, so that once the budget is
            // spent no connection sleeps until an arrival that will never be sent.
            let mut prepaid = 0;
            if let Some(a) = arrival
                && a.scheduled >= self.shared.timing.warmup_end
            {
                if !self.shared.budget.take() {
                    break;
                }
                prepaid = 1;
                if self.shared.timing.run_end.is_none_or(|end| a.scheduled < end) {
                    self.shared.stats.borrow_mut().accounting.scheduled += 1;
                    self.arrival_pending = true;
                }
            }
            if let Some(a) = arrival
                && a.scheduled > Instant::now()
                && self.wait_until(a.scheduled).await == Flow::Stop
            {
                break;
            }
            let barrier = if self.shared.settings.sessions {
                match self.feed.next_session(&mut self.batch) {
                    Some(barrier) => barrier,
                    None => {
                        self.shared.give_back(prepaid);
                        self.workload_ended();
                        break;
                    }
                }
            } else {
                self.batch.clear();
                let n = if arrival.is_some() { 1 } else { self.shared.settings.depth };
                while self.batch.len() < n {
                    match self.feed.next_request() {
                        Some(t) => self.batch.push(t),
                        None => break,
                    }
                }
                if self.batch.is_empty() {
                    self.shared.give_back(prepaid);
                    self.workload_ended();
                    break;
                }
                false
            };
            let scheduled = arrival.map(|a| (a.scheduled, a.late));
            if self.run_batch(scheduled, barrier, prepaid).await == Flow::Stop {
                break;
            }
        }
        self.settle();
        self.close();
    }

    /// At the end: requests still in flight are outstanding (their latency censored at the
    /// window's end), and an arrival taken and not sent is not sent, and why.
    fn settle(&mut self) {
        let end = self.shared.timing.run_end.unwrap_or_else(Instant::now);
        let mut stats = self.shared.stats.borrow_mut();
        for f in self.inflight.drain(..).filter(|f| f.measured) {
            let waited = end.saturating_duration_since(f.latency_from).as_micros();
            stats.count_outstanding(u64::try_from(waited).unwrap_or(u64::MAX));
        }
        if std::mem::take(&mut self.arrival_pending) {
            stats.accounting.not_sent.add(NotSentReason::WindowEnded, 1);
        }
    }

    /// The workload has nothing left: an arrival taken for it is not sent.
    fn workload_ended(&mut self) {
        self.shared.workload_ended.set(true);
        if std::mem::take(&mut self.arrival_pending) {
            self.shared.stats.borrow_mut().accounting.not_sent.add(NotSentReason::WorkloadEnded, 1);
        }
    }

    /// Wait until `when` (or the end of the run).
    async fn wait_until(&mut self, when: Instant) -> Flow {
        let end = self.shared.timing.run_end.map_or(when, |e| e.min(when));
        self.timer.as_mut().reset(end.into());
        (&mut self.timer).await;
        if self.run_over(Instant::now()) { Flow::Stop } else { Flow::Continue }
    }

    /// Send the requests of `self.batch` and read their answers, at most `depth` in flight
    /// (only the first while `barrier` holds, until it is answered). `scheduled`: the open
    /// loop arrival time and whether it was late.
    /// `prepaid`: requests of the batch already taken from the budget.
    async fn run_batch(
        &mut self,
        scheduled: Option<(Instant, bool)>,
        barrier: bool,
        mut prepaid: usize,
    ) -> Flow {
        let depth = self.shared.settings.depth;
        let warmup_end = self.shared.timing.warmup_end;
        let mut end = self.batch.len();
        let (mut sent, mut done) = (0, 0);
        let mut budget_spent = false;
        let mut retried = false;
        while done < end {
            let limit = if barrier && done == 0 { 1 } else { depth };
            if sent < end && sent - done < limit {
                if self.stream.is_none() {
                    // Take the budget for the request about to go out before opening a
                    // connection for it, so a spent budget opens no connection.
                    let now = Instant::now();
                    let from = if sent == 0 { scheduled.map_or(now, |s| s.0) } else { now };
                    let measured = from >= warmup_end;
                    if measured && prepaid == 0 {
                        if !self.shared.budget.take() {
                            end = sent;
                            budget_spent = true;
                            continue;
                        }
                        prepaid += 1;
                    }
                    match self.connect().await {
                        Ok(()) => {}
                        Err(Fault::Stop) => return Flow::Stop,
                        Err(Fault::Error(kind)) => {
                            if measured {
                                prepaid -= 1;
                                if sent == 0 && scheduled.is_some_and(|s| s.1) {
                                    self.shared.count_error(ErrorKind::Late, 1);
                                }
                                self.shared.count_error(kind, 1);
                                self.count_sent(sent == 0 && scheduled.is_some(), scheduled.is_some());
                                self.shared.stats.borrow_mut().count_failure(kind, 1);
                            }
                            sent += 1;
                            done += 1;
                            // Do not spin on a server that refuses connections.
                            if self.wait_until(now + Duration::from_millis(10)).await == Flow::Stop {
                                return Flow::Stop;
                            }
                            continue;
                        }
                    }
                }
                let now = Instant::now();
                if self.run_over(now) {
                    return Flow::Stop;
                }
                self.wbuf.clear();
                let shared = self.shared.clone();
                let server = &shared.settings.servers[self.server];
                while sent < end && sent - done < limit {
                    let (from, late) = match scheduled {
                        Some((at, late)) if sent == 0 => (at, late),
                        _ => (now, false),
                    };
                    let measured = from >= warmup_end;
                    if measured {
                        if prepaid > 0 {
                            prepaid -= 1;
                        } else if !self.shared.budget.take() {
                            end = sent;
                            budget_spent = true;
                            break;
                        }
                        if late {
                            self.shared.count_error(ErrorKind::Late, 1);
                        }
                        self.count_sent(sent == 0 && scheduled.is_some(), scheduled.is_some());
                    }
                    let t = self.batch[sent];
                    self.wbuf.extend_from_slice(&self.shared.plan.templates[t as usize].line);
                    self.wbuf.extend_from_slice(&server.head_tail);
                    self.inflight.push_back(InFlight {
                        template: t,
                        latency_from: if late { from } else { now },
                        sent_at: now,
                        measured,
                        arrival: sent == 0 && scheduled.is_some(),
                    });
                    sent += 1;
                }
                if !self.wbuf.is_empty() {
                    match self.write_out().await {
                        Ok(()) => {}
                        Err(Fault::Stop) => return Flow::Stop,
                        Err(Fault::Error(kind)) => {
                            done += self.fail_inflight(kind);
                            self.close();
                            continue;
                        }
                    }
                }
            }
            if self.inflight.is_empty() {
                continue;
            }
            match self.read_one().await {
                Ok(summary) => {
                    self.complete(&summary);
                    done += 1;
                    if !summary.keep_alive || !self.shared.settings.keepalive {
                        done += self.fail_inflight(ErrorKind::Closed);
                        self.close();
                    } else if self.inflight.is_empty() && self.reader.buffered() > 0 {
                        // Bytes that answer no request: the server is out of step.
                        self.shared.count_error(ErrorKind::Framing, 1);
                        self.close();
                    }
                }
                Err(Fault::Stop) => return Flow::Stop,
                Err(Fault::Error(ErrorKind::Closed))
                    if !retried && self.served > 0 && !self.reader.in_response() =>
                {
                    // A reused connection closed before any byte of the answer (an idle
                    // keep-alive connection the server timed out): send again, once.
                    retried = true;
                    let n = self.inflight.len();
                    self.unsend_inflight(scheduled.is_some());
                    sent -= n;
                    prepaid += n;
                    self.close();
                }
                Err(Fault::Error(kind)) => {
                    done += self.fail_inflight(kind);
                    self.close();
                }
            }
        }
        self.shared.give_back(prepaid);
        if budget_spent { Flow::Stop } else { Flow::Continue }
    }

    async fn connect(&mut self) -> Result<(), Fault> {
        let servers = &self.shared.settings.servers;
        self.server = (self.slot + self.connects) % servers.len();
        self.connects += 1;
        let addr = servers[self.server].addr;
        let (timeout, run_end) = (self.shared.settings.timeout, self.shared.timing.run_end);
        let stream = connect_within(addr, self.timer.as_mut(), timeout, run_end).await?;
        let stream = match &self.tls[self.server] {
            None => LoadStream::Plain(stream),
            Some(tls) => self.handshake(stream, tls, timeout).await?,
        };
        self.stream = Some(stream);
        self.served = 0;
        self.reader.reset();
        self.shared.stats.borrow_mut().connections += 1;
        Ok(())
    }

    /// The TLS handshake on a new connection (the connect timeout covers it too), counted
    /// with its duration; a failed one is a connect error.
    async fn handshake(
        &self,
        tcp: tokio::net::TcpStream,
        tls: &TlsTarget,
        timeout: Duration,
    ) -> Result<LoadStream, Fault> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        match locus_tls::connect(tcp, tls.config.clone(), tls.name.clone(), deadline).await {
            Ok(session) => {
                let us = started.elapsed().as_micros().try_into().unwrap_or(u64::MAX);
                self.shared.stats.borrow_mut().handshakes.record(session.negotiated().resumed, us);
                Ok(LoadStream::Tls(Box::new(session)))
            }
            Err(_) if self.run_over(Instant::now()) => Err(Fault::Stop),
            Err(_) => Err(Fault::Error(ErrorKind::Connect)),
        }
    }

    /// Write `wbuf` whole (over TLS, until no record is left queued).
    async fn write_out(&mut self) -> Result<(), Fault> {
        let Some(stream) = self.stream.as_mut() else { return Err(Fault::Error(ErrorKind::Closed)) };
        let mut written = 0;
        let mut armed = false;
        while written < self.wbuf.len() || stream.has_queued_output() {
            let step = match self.wbuf.get(written..).filter(|rest| !rest.is_empty()) {
                Some(rest) => stream.try_write(rest),
                None => stream.try_flush().map(|()| 0),
            };
            match step {
                Ok(0) if written < self.wbuf.len() => return Err(Fault::Error(ErrorKind::Closed)),
                Ok(n) => {
                    written += n;
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => return Err(Fault::Error(ErrorKind::Closed)),
            }
            let now = Instant::now();
            if !armed {
                let deadline = self.shared.timing.run_end.map_or(now + self.shared.settings.timeout, |e| {
                    e.min(now + self.shared.settings.timeout)
                });
                self.timer.as_mut().reset(deadline.into());
                armed = true;
            }
            let ready = tokio::select! {
                biased;
                r = stream.writable() => Some(r),
                () = &mut self.timer => None,
            };
            match ready {
                Some(Ok(())) => {}
                Some(Err(_)) => return Err(Fault::Error(ErrorKind::Closed)),
                None if self.run_over(Instant::now()) => return Err(Fault::Stop),
                None => return Err(Fault::Error(ErrorKind::Timeout)),
            }
        }
        Ok(())
    }

    /// Read until the oldest request in flight is answered.
    async fn read_one(&mut self) -> Result<ResponseSummary, Fault> {
        let front = *self.inflight.front().ok_or(Fault::Error(ErrorKind::Framing))?;
        let template = &self.shared.plan.templates[front.template as usize];
        let head_only = template.head_only;
        let hash = template.expect.wants_checksum(head_only);
        let timeout_at = front.sent_at + self.shared.settings.timeout;
        read_response(
            self.stream.as_mut(),
            &mut self.reader,
            self.timer.as_mut(),
            timeout_at,
            self.shared.timing.run_end,
            |r| r.poll_response(head_only, hash),
        )
        .await
    }

    /// The oldest request in flight was answered with `summary`.
    fn complete(&mut self, summary: &ResponseSummary) {
        let Some(f) = self.inflight.pop_front() else { return };
        self.served += 1;
        let now = Instant::now();
        let template = &self.shared.plan.templates[f.template as usize];
        let mut stats = self.shared.stats.borrow_mut();
        let settings = &self.shared.settings;
        check_response(
            &mut stats,
            template,
            summary,
            &settings.servers[self.server].base,
            settings.max_samples,
        );
        if f.measured {
            stats.dynamic_requests += u64::from(template.dynamic);
            count_response(&mut stats, &self.shared.live, summary, f.latency_from, now);
        }
    }

    /// A measured request went out (or its connection failed): `arrival`, the open-loop
    /// arrival itself (counted scheduled when taken); other requests of an open-loop session
    /// count as scheduled now.
    fn count_sent(&mut self, arrival: bool, open_loop: bool) {
        let mut stats = self.shared.stats.borrow_mut();
        stats.accounting.sent += 1;
        if arrival {
            self.arrival_pending = false;
        } else if open_loop {
            stats.accounting.scheduled += 1;
        }
    }

    /// The requests in flight are to be sent again: take back what `count_sent` counted.
    fn unsend_inflight(&mut self, open_loop: bool) {
        let mut stats = self.shared.stats.borrow_mut();
        for f in self.inflight.drain(..).filter(|f| f.measured) {
            stats.accounting.sent -= 1;
            if f.arrival {
                self.arrival_pending = true;
            } else if open_loop {
                stats.accounting.scheduled -= 1;
            }
        }
    }

    /// Every request in flight failed with `kind`; returns how many there were.
    fn fail_inflight(&mut self, kind: ErrorKind) -> usize {
        let n = self.inflight.len();
        let measured = self.inflight.iter().filter(|f| f.measured).count() as u64;
        if measured > 0 {
            self.shared.count_error(kind, measured);
            self.shared.stats.borrow_mut().count_failure(kind, measured);
        }
        self.inflight.clear();
        n
    }

    fn close(&mut self) {
        self.stream = None;
        self.reader.reset();
        self.served = 0;
    }
}
