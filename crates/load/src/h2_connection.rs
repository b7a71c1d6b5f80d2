//! `H2Connection`: one simulated client speaking HTTP/2 (`--h2`): one connection (`H2Link`)
//! carrying up to `--streams` requests at once. Each stream is a `Lane` running the loop of an
//! HTTP/1.1 client without pipelining — a request, or a session's requests one after another;
//! think time; open-loop arrivals — counted the same way: every measured request ends answered
//! (checked as over HTTP/1.1), failed, or outstanding at the window's end.

use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use h2::client::ResponseFuture;
use tokio::time::Sleep;
use xxhash_rust::xxh3::Xxh3;

use crate::accounting::NotSentReason;
use crate::connection::{Flow, WorkerShared, mix};
use crate::exchange::{Fault, check_response, count_response};
use crate::h2_link::{H2Handle, H2Link};
use crate::h2_stream::{error_kind, had_goaway, read_response};
use crate::response_reader::ResponseSummary;
use crate::stats::ErrorKind;
use crate::think_time::ThinkSampler;
use crate::workload::JobFeed;

/// The pause after a request whose stream could not be opened (do not spin on a server that
/// refuses connections).
const RETRY_PAUSE: Duration = Duration::from_millis(10);

/// A simulated HTTP/2 client; see the module documentation.
pub struct H2Connection {
    slot: usize,
    shared: Rc<WorkerShared>,
}

impl H2Connection {
    /// Client number `slot` (run inside the worker's `LocalSet`).
    pub fn new(slot: usize, shared: Rc<WorkerShared>) -> H2Connection {
        H2Connection { slot, shared }
    }

    /// Run every stream until the workload, the request budget or the time is used up.
    pub async fn run(self) {
        let link = Rc::new(H2Link::new(self.slot, self.shared.clone()));
        let lanes: Vec<_> = (0..self.shared.settings.streams.max(1))
            .map(|lane| {
                let lane = Lane::new(self.slot, lane, self.shared.clone(), link.clone());
                tokio::task::spawn_local(lane.run())
            })
            .collect();
        for lane in lanes {
            if let Err(e) = lane.await
                && e.is_panic()
            {
                link.close();
                std::panic::resume_unwind(e.into_panic());
            }
        }
        link.close();
    }
}

/// What one job of a lane is: an open-loop arrival's time (and whether it was late), and the
/// requests of it already taken from the budget.
#[derive(Clone, Copy, Debug)]
struct Job {
    scheduled: Option<(Instant, bool)>,
    prepaid: usize,
}

/// One request of a job as a lane sends it.
#[derive(Clone, Copy, Debug)]
struct Outgoing {
    template: u32,
    /// Its latency is measured from here when it is late (the arrival's scheduled time).
    from: Instant,
    late: bool,
    measured: bool,
    /// The open-loop arrival itself (counted scheduled when taken).
    arrival: bool,
    /// A request of an open-loop job (a later request of a session is scheduled when sent).
    open_loop: bool,
}

/// A request on a stream, not yet answered.
#[derive(Clone, Copy, Debug)]
struct Sent {
    latency_from: Instant,
    measured: bool,
}

/// One stream of a client's connection, with the loop of a client of its own.
struct Lane {
    shared: Rc<WorkerShared>,
    link: Rc<H2Link>,
    feed: JobFeed,
    think: ThinkSampler,
    timer: Pin<Box<Sleep>>,
    batch: Vec<u32>,
    hasher: Box<Xxh3>,
    inflight: Option<Sent>,
    /// A measured open-loop arrival counted as scheduled and not yet sent.
    arrival_pending: bool,
}

impl Lane {
    /// Stream `lane` of client `slot`: lane 0 draws what an HTTP/1.1 client `slot` would.
    fn new(slot: usize, lane: usize, shared: Rc<WorkerShared>, link: Rc<H2Link>) -> Lane {
        let settings = &shared.settings;
        let seed = settings.seed ^ (lane as u64).wrapping_mul(0xA24B_AED4_963E_E407);
        let feed = JobFeed::new(shared.plan.clone(), mix(seed, slot), shared.timing.start);
        let think = ThinkSampler::new(settings.think, mix(seed ^ 0x0074_6869_6e6b, slot));
        let far = tokio::time::Instant::now() + Duration::from_secs(86_400 * 365);
        Lane {
            link,
            feed,
            think,
            timer: Box::pin(tokio::time::sleep_until(far)),
            batch: Vec::with_capacity(16),
            hasher: Box::new(Xxh3::new()),
            inflight: None,
            arrival_pending: false,
            shared,
        }
    }

    async fn run(mut self) {
        let mut first = true;
        while !self.shared.run_over(Instant::now()) {
            if !first && !self.think.is_none() {
                let pause = self.think.next_pause();
                if self.wait_until(Instant::now() + pause).await == Flow::Stop {
                    break;
                }
            }
            first = false;
            let Some(job) = self.next_job().await else { break };
            if self.run_job(job).await == Flow::Stop {
                break;
            }
        }
        self.settle();
    }

    /// The next job into `batch`: in open loop at the next arrival's time (its budget taken
    /// when it is reserved, as an HTTP/1.1 client does); `None` when the lane is to stop.
    async fn next_job(&mut self) -> Option<Job> {
        let shared = self.shared.clone();
        let arrival = shared.arrivals.as_ref().map(|q| q.borrow_mut().take(Instant::now()));
        let mut prepaid = 0;
        if let Some(a) = arrival
            && a.scheduled >= shared.timing.warmup_end
        {
            if !shared.budget.take() {
                return None;
            }
            prepaid = 1;
            if shared.timing.run_end.is_none_or(|end| a.scheduled < end) {
                shared.stats.borrow_mut().accounting.scheduled += 1;
                self.arrival_pending = true;
            }
        }
        if let Some(a) = arrival
            && a.scheduled > Instant::now()
            && self.wait_until(a.scheduled).await == Flow::Stop
        {
            return None;
        }
        self.batch.clear();
        let found = if shared.settings.sessions {
            self.feed.next_session(&mut self.batch).is_some()
        } else {
            self.feed.next_request().map(|t| self.batch.push(t)).is_some()
        };
        if !found {
            shared.give_back(prepaid);
            self.workload_ended();
            return None;
        }
        Some(Job { scheduled: arrival.map(|a| (a.scheduled, a.late)), prepaid })
    }

    /// Send the job's requests one after another, each answered (or failed) before the next.
    async fn run_job(&mut self, job: Job) -> Flow {
        let Job { scheduled, mut prepaid } = job;
        for i in 0..self.batch.len() {
            let now = Instant::now();
            let (from, late) = match scheduled {
                Some((at, late)) if i == 0 => (at, late),
                _ => (now, false),
            };
            let measured = from >= self.shared.timing.warmup_end;
            if measured {
                if prepaid > 0 {
                    prepaid -= 1;
                } else if !self.shared.budget.take() {
                    return Flow::Stop;
                }
            }
            let open_loop = scheduled.is_some();
            let request = Outgoing {
                template: self.batch[i],
                from,
                late,
                measured,
                arrival: i == 0 && open_loop,
                open_loop,
            };
            if self.exchange(request).await == Flow::Stop {
                return Flow::Stop;
            }
        }
        self.shared.give_back(prepaid);
        Flow::Continue
    }

    /// One request: open its stream, wait for the answer, check and count it.
    async fn exchange(&mut self, r: Outgoing) -> Flow {
        let (response, mut handle) = match self.open_stream(r.template).await {
            Ok(opened) => opened,
            Err(Fault::Stop) => return Flow::Stop,
            Err(Fault::Error(kind)) => {
                if r.measured {
                    self.count_sent(&r);
                    self.count_failed(kind);
                }
                return self.wait_until(Instant::now() + RETRY_PAUSE).await;
            }
        };
        let now = Instant::now();
        if r.measured {
            self.count_sent(&r);
        }
        let sent = Sent { latency_from: if r.late { r.from } else { now }, measured: r.measured };
        self.inflight = Some(sent);
        match self.await_response(response, r.template, now).await {
            Ok(summary) => {
                self.inflight = None;
                self.complete(r.template, handle.server, summary, sent);
            }
            Err(Fault::Stop) => return Flow::Stop,
            Err(Fault::Error(kind)) => {
                self.inflight = None;
                // A stream the server took, then lost when it closed the connection after its
                // GOAWAY, ended with the GOAWAY.
                let kind = match kind {
                    ErrorKind::Closed if had_goaway(&mut handle.send) => ErrorKind::GoAway,
                    kind => kind,
                };
                if r.measured {
                    self.count_failed(kind);
                }
            }
        }
        Flow::Continue
    }

    /// Send the request for `template` on a new stream of the link's connection (opened if
    /// need be): its response to come, and the connection's handle. A connection that takes no
    /// new stream (a GOAWAY came) is retired and the request sent on a new one, once.
    async fn open_stream(&mut self, template: u32) -> Result<(ResponseFuture, H2Handle), Fault> {
        let shared = self.shared.clone();
        let t = &shared.plan.templates[template as usize];
        let mut retried = false;
        loop {
            let handle = self.link.handle(self.timer.as_mut()).await?;
            if shared.run_over(Instant::now()) {
                return Err(Fault::Stop);
            }
            // Plans hold only targets HTTP/2 can carry (`sendable_path`).
            let request = self
                .link
                .origin(handle.server)
                .request(t.method, &t.target)
                .ok_or(Fault::Error(ErrorKind::Protocol))?;
            let sent = match handle.send.clone().ready().await {
                Ok(mut send) => send.send_request(request, true).map(|(response, _)| response),
                Err(e) => Err(e),
            };
            match sent {
                Ok(response) => return Ok((response, handle)),
                Err(e) => {
                    self.link.retire(handle.generation);
                    if retried {
                        return Err(Fault::Error(error_kind(&e)));
                    }
                    retried = true;
                }
            }
        }
    }

    /// The response on a stream sent at `sent_at`, within the timeout (then `Timeout`: the
    /// stream is reset, the connection kept) and the run (then `Stop`).
    async fn await_response(
        &mut self,
        response: ResponseFuture,
        template: u32,
        sent_at: Instant,
    ) -> Result<ResponseSummary, Fault> {
        let shared = self.shared.clone();
        let t = &shared.plan.templates[template as usize];
        let timeout_at = sent_at + shared.settings.timeout;
        let deadline = shared.timing.run_end.map_or(timeout_at, |e| e.min(timeout_at));
        self.timer.as_mut().reset(deadline.into());
        let hasher = t.expect.wants_checksum(t.head_only).then_some(&mut *self.hasher);
        let answer = tokio::select! {
            biased;
            r = read_response(response, hasher) => Some(r),
            () = &mut self.timer => None,
        };
        match answer {
            Some(Ok(summary)) => Ok(summary),
            Some(Err(e)) => Err(Fault::Error(error_kind(&e))),
            None if shared.run_over(Instant::now()) => Err(Fault::Stop),
            None => Err(Fault::Error(ErrorKind::Timeout)),
        }
    }

    /// A response arrived: charge it the bytes read since the last, check it, count it.
    fn complete(&mut self, template: u32, server: usize, mut summary: ResponseSummary, sent: Sent) {
        summary.wire_bytes = self.link.take_read_bytes();
        let now = Instant::now();
        let shared = &self.shared;
        let t = &shared.plan.templates[template as usize];
        let mut stats = shared.stats.borrow_mut();
        let base = &shared.settings.servers[server].base;
        check_response(&mut stats, t, &summary, base, shared.settings.max_samples);
        if sent.measured {
            stats.dynamic_requests += u64::from(t.dynamic);
            count_response(&mut stats, &shared.live, &summary, sent.latency_from, now);
        }
    }

    /// A measured request went out (or its stream could not be opened), late or not.
    fn count_sent(&mut self, r: &Outgoing) {
        if r.late {
            self.shared.count_error(ErrorKind::Late, 1);
        }
        let mut stats = self.shared.stats.borrow_mut();
        stats.accounting.sent += 1;
        if r.arrival {
            self.arrival_pending = false;
        } else if r.open_loop {
            stats.accounting.scheduled += 1;
        }
    }

    /// A measured request failed with `kind`.
    fn count_failed(&self, kind: ErrorKind) {
        self.shared.count_error(kind, 1);
        self.shared.stats.borrow_mut().count_failure(kind, 1);
    }

    /// Wait until `when` (or the end of the run).
    async fn wait_until(&mut self, when: Instant) -> Flow {
        let end = self.shared.timing.run_end.map_or(when, |e| e.min(when));
        self.timer.as_mut().reset(end.into());
        (&mut self.timer).await;
        if self.shared.run_over(Instant::now()) { Flow::Stop } else { Flow::Continue }
    }

    /// The workload has nothing left: an arrival taken for it is not sent.
    fn workload_ended(&mut self) {
        self.shared.workload_ended.set(true);
        if std::mem::take(&mut self.arrival_pending) {
            self.shared.stats.borrow_mut().accounting.not_sent.add(NotSentReason::WorkloadEnded, 1);
        }
    }

    /// At the end: a request still on its stream is outstanding (its latency censored at the
    /// window's end), and an arrival taken and not sent is not sent.
    fn settle(&mut self) {
        let end = self.shared.timing.run_end.unwrap_or_else(Instant::now);
        let mut stats = self.shared.stats.borrow_mut();
        if let Some(sent) = self.inflight.take().filter(|s| s.measured) {
            let waited = end.saturating_duration_since(sent.latency_from).as_micros();
            stats.count_outstanding(u64::try_from(waited).unwrap_or(u64::MAX));
        }
        if std::mem::take(&mut self.arrival_pending) {
            stats.accounting.not_sent.add(NotSentReason::WindowEnded, 1);
        }
    }
}
