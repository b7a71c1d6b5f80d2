//! `Dispatcher`: the switch's one lock around the policy `Cluster`, with the front-end
//! admission queue (LARD/R's limit S): a request that finds the cluster full waits in FIFO
//! order and is granted a slot when a request completes. `Assignment` is the RAII proof of a
//! dispatched request; dropping it completes the request on every exit path. `Candidates` is
//! the walk over the nodes one request may be sent to, with the switch's retry rules.

use locus_core::{Method, NodeId, NodeReport, RequestInfo, Time};
use locus_policy::{Cluster, Reconfigured};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Why a request could not be dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    #[error("no node is up")]
    NoNodeUp,
    #[error("waited too long in the admission queue")]
    QueueTimeout,
}

struct Waiter {
    id: u64,
    grant: oneshot::Sender<()>,
}

struct DispatchState {
    cluster: Cluster,
    waiters: VecDeque<Waiter>,
    /// Slots granted to waiters that have not yet assigned.
    reserved: usize,
    next_waiter: u64,
}

impl DispatchState {
    fn has_room(&self) -> bool {
        match self.cluster.admission_limit() {
            Some(limit) => self.cluster.in_flight() + self.reserved < limit,
            None => true,
        }
    }

    fn grant_waiters(&mut self) {
        while !self.waiters.is_empty() && self.has_room() {
            let w = self.waiters.pop_front().expect("non-empty");
            if w.grant.send(()).is_ok() {
                self.reserved += 1;
            }
        }
    }
}

/// The policy, the nodes' load and the admission queue, behind one short lock.
pub struct Dispatcher {
    state: Mutex<DispatchState>,
    epoch: Instant,
    /// The policy reads forwarded requests (`Policy::observes_requests`); a reload may
    /// change the policy.
    observes: AtomicBool,
}

/// A request dispatched to `node`; completes the request when dropped.
pub struct Assignment<'a> {
    pub node: NodeId,
    target_hash: u64,
    dispatcher: &'a Dispatcher,
}

impl Drop for Assignment<'_> {
    fn drop(&mut self) {
        self.dispatcher.complete(self.node, self.target_hash);
    }
}

/// An assignment that outlives the code that made it (a connection handed off to a node
/// stays counted against it until the node reports it closed); give it back with
/// [`Dispatcher::release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a detached assignment must be released, or the node's load never drops"]
pub struct DetachedAssignment {
    pub node: NodeId,
    pub target_hash: u64,
}

impl Assignment<'_> {
    /// Keep the request counted after this value is gone.
    pub fn detach(self) -> DetachedAssignment {
        let d = DetachedAssignment { node: self.node, target_hash: self.target_hash };
        std::mem::forget(self);
        d
    }
}

/// A place in the admission queue; leaving it (by drop) gives back a slot granted meanwhile.
struct QueueTicket<'a> {
    id: u64,
    rx: Option<oneshot::Receiver<()>>,
    dispatcher: &'a Dispatcher,
}

impl Drop for QueueTicket<'_> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else { return };
        let mut st = self.dispatcher.state.lock();
        if let Some(pos) = st.waiters.iter().position(|w| w.id == self.id) {
            st.waiters.remove(pos);
        } else if rx.try_recv().is_ok() {
            // Granted but never used: give the slot to the next in line.
            st.reserved -= 1;
            st.grant_waiters();
        }
    }
}

impl Dispatcher {
    pub fn new(cluster: Cluster) -> Dispatcher {
        let observes = cluster.policy().observes_requests();
        Dispatcher {
            observes: AtomicBool::new(observes),
            state: Mutex::new(DispatchState {
                cluster,
                waiters: VecDeque::new(),
                reserved: 0,
                next_waiter: 0,
            }),
            epoch: Instant::now(),
        }
    }

    /// The policy clock: time since the dispatcher was made.
    pub fn now(&self) -> Time {
        Time(self.epoch.elapsed().as_nanos() as u64)
    }

    /// Dispatch `req`: pick a node now if the admission limit allows, otherwise wait in the
    /// FIFO queue for up to `queue_timeout`.
    pub async fn acquire<'a>(
        &'a self,
        req: &RequestInfo<'_>,
        queue_timeout: Duration,
    ) -> Result<Assignment<'a>, DispatchError> {
        let mut ticket = {
            let mut st = self.state.lock();
            if st.waiters.is_empty() && st.has_room() {
                let now = self.now();
                let node = st.cluster.assign(req, now).ok_or(DispatchError::NoNodeUp)?;
                return Ok(Assignment { node, target_hash: req.target_hash, dispatcher: self });
            }
            if !st.cluster.nodes().iter().any(|n| n.up) {
                return Err(DispatchError::NoNodeUp);
            }
            let (tx, rx) = oneshot::channel();
            let id = st.next_waiter;
            st.next_waiter += 1;
            st.waiters.push_back(Waiter { id, grant: tx });
            QueueTicket { id, rx: Some(rx), dispatcher: self }
        };
        let rx = ticket.rx.as_mut().expect("fresh ticket");
        let granted = matches!(tokio::time::timeout(queue_timeout, rx).await, Ok(Ok(())));
        let mut st = self.state.lock();
        let was_granted = if granted {
            true
        } else if let Some(pos) = st.waiters.iter().position(|w| w.id == ticket.id) {
            st.waiters.remove(pos);
            false
        } else {
            // Granted in the instant the timeout fired.
            ticket.rx.as_mut().is_some_and(|rx| rx.try_recv().is_ok())
        };
        ticket.rx = None;
        if !was_granted {
            return Err(DispatchError::QueueTimeout);
        }
        st.reserved -= 1;
        let now = self.now();
        match st.cluster.assign(req, now) {
            Some(node) => Ok(Assignment { node, target_hash: req.target_hash, dispatcher: self }),
            None => {
                st.grant_waiters();
                Err(DispatchError::NoNodeUp)
            }
        }
    }

    /// Take a detached assignment back: it completes when the returned value is dropped.
    pub fn reattach(&self, d: DetachedAssignment) -> Assignment<'_> {
        Assignment { node: d.node, target_hash: d.target_hash, dispatcher: self }
    }

    /// Complete a detached assignment.
    pub fn release(&self, d: DetachedAssignment) {
        self.complete(d.node, d.target_hash);
    }

    fn complete(&self, node: NodeId, target_hash: u64) {
        let mut st = self.state.lock();
        let now = self.now();
        st.cluster.complete(node, target_hash, now);
        st.grant_waiters();
    }

    /// Apply a reload's policy and node weights (see `Cluster::reconfigure`; `policy` is the
    /// new policy already built, used when the running one cannot take the change).
    pub fn reconfigure(
        &self,
        config: &locus_policy::PolicyConfig,
        params_changed: bool,
        weights: &[u32],
        policy: Box<dyn locus_policy::Policy>,
    ) -> Reconfigured {
        let mut st = self.state.lock();
        let now = self.now();
        let how = st.cluster.reconfigure(config, params_changed, weights, |_| Ok::<_, ()>(policy), now);
        self.observes.store(st.cluster.policy().observes_requests(), Relaxed);
        st.grant_waiters();
        how.expect("the policy was built beforehand")
    }

    /// The weight each node slot has now.
    pub fn weights(&self) -> Vec<u32> {
        self.state.lock().cluster.nodes().iter().map(|n| n.weight).collect()
    }

    /// Put a node in or out of the view. Returns whether anything changed.
    pub fn set_up(&self, node: NodeId, up: bool) -> bool {
        let mut st = self.state.lock();
        let changed = st.cluster.nodes()[node.index()].up != up;
        let now = self.now();
        st.cluster.set_up(node, up, now);
        st.grant_waiters();
        changed
    }

    /// A request was forwarded to `node` over a connection with client round-trip time
    /// `rtt` (the content sniffer's view, `Cluster::observe`).
    pub fn observe(&self, node: NodeId, req: &RequestInfo<'_>, rtt: Duration) {
        if !self.observes.load(Relaxed) {
            return;
        }
        let mut st = self.state.lock();
        let now = self.now();
        st.cluster.observe(node, req, rtt, now);
    }

    /// Whether the policy reads forwarded requests (else `observe` does nothing).
    pub fn observes_requests(&self) -> bool {
        self.observes.load(Relaxed)
    }

    /// `node` reported its own load (a metrics poll completed).
    pub fn report(&self, node: NodeId, report: &NodeReport) {
        let mut st = self.state.lock();
        let now = self.now();
        st.cluster.report(node, report, now);
    }

    /// How often the policy wants every node's report, if it reads reports.
    pub fn report_period(&self) -> Option<Duration> {
        self.state.lock().cluster.report_period()
    }

    /// The policy's per-node weights for the l4 forwarder, if it computes them.
    pub fn l4_weights(&self) -> Option<Vec<f64>> {
        let mut st = self.state.lock();
        let now = self.now();
        st.cluster.l4_weights(now)
    }

    /// Count a connection someone else placed on `node` (the l4 forwarder at a SYN) until
    /// the detached assignment is released; the policy is told through `on_assign`.
    pub fn assign_to(&self, node: NodeId, req: &RequestInfo<'_>) -> DetachedAssignment {
        let mut st = self.state.lock();
        let now = self.now();
        st.cluster.assign_to(node, req, now);
        DetachedAssignment { node, target_hash: req.target_hash }
    }

    /// The policy's load estimates (CSLD, wrr-metrics), for status pages.
    pub fn load_estimates(&self) -> Option<locus_policy::LoadEstimates> {
        self.state.lock().cluster.policy().load_estimates()
    }

    /// Whether a node is in the view.
    pub fn is_up(&self, node: NodeId) -> bool {
        self.state.lock().cluster.nodes()[node.index()].up
    }

    /// A snapshot for status pages: per node (up, load, weight, ramp), in flight, queue
    /// length, admission limit, policy name and mapping size.
    pub fn snapshot(&self) -> DispatchSnapshot {
        let st = self.state.lock();
        DispatchSnapshot {
            nodes: st.cluster.nodes().iter().map(|n| (n.up, n.load, n.weight, n.ramp)).collect(),
            in_flight: st.cluster.in_flight(),
            queued: st.waiters.len(),
            admission_limit: st.cluster.admission_limit(),
            policy: st.cluster.policy().name(),
            mapping_len: st.cluster.policy().mapping_len(),
            assignments: st.cluster.assignments(),
        }
    }
}

/// The nodes one request is offered to, in order: a walk the caller drives until a node
/// works, as a load balancer's selection iterator is walked. The first candidate is the
/// policy's pick; [`Candidates::next`] completes the failed assignment and asks the policy
/// again over the view as it is then (the failed node has left it when passive checks are
/// on), so the request goes where a fresh dispatch would send it.
///
/// Retry rules (the switch's only ones):
/// - Only a request that can be sent twice is retried: an idempotent method with no body
///   ([`Candidates::may_retry`]). Any other request meets one node and one connection.
/// - It moves to the next candidate at most once (two nodes in all), after a connect failure
///   or a failure before any response byte (the node closed or reset the connection), the
///   failed node having been reported to the passive checks. A timeout (504), a malformed
///   response (502), response bytes already sent to the client, or the switch being out of
///   descriptors (503) end the request without a move.
/// - Proxy mode: a reused pooled connection that fails before any response byte (the node had
///   closed it while idle) is replaced by a fresh connection to the same node, at most twice
///   per request ([`Candidates::reconnect`]); that is no move and reports no failure.
pub struct Candidates<'d> {
    dispatcher: &'d Dispatcher,
    queue_timeout: Duration,
    current: Option<Assignment<'d>>,
    retryable: bool,
    moves_left: u8,
    reconnects_left: u8,
}

impl<'d> Candidates<'d> {
    /// Whether a request with this method may be sent twice (`has_body`: it carries a body).
    pub fn may_retry(method: Method, has_body: bool) -> bool {
        method.is_idempotent() && !has_body
    }

    /// Dispatch `req` to its first candidate (queueing as [`Dispatcher::acquire`] does).
    pub async fn first(
        dispatcher: &'d Dispatcher,
        req: &RequestInfo<'_>,
        queue_timeout: Duration,
        retryable: bool,
    ) -> Result<Candidates<'d>, DispatchError> {
        let current = dispatcher.acquire(req, queue_timeout).await?;
        Ok(Candidates::resumed(dispatcher, current, queue_timeout, retryable))
    }

    /// A walk whose first candidate is a dispatch already made (`current`): a request read
    /// again from a connection restored on the switch after its handoff was refused.
    pub fn resumed(
        dispatcher: &'d Dispatcher,
        current: Assignment<'d>,
        queue_timeout: Duration,
        retryable: bool,
    ) -> Candidates<'d> {
        Candidates {
            dispatcher,
            queue_timeout,
            current: Some(current),
            retryable,
            moves_left: 1,
            reconnects_left: 2,
        }
    }

    /// The node of the current candidate.
    pub fn node(&self) -> NodeId {
        self.current.as_ref().expect("a candidate until next fails").node
    }

    /// End the walk at the current candidate, keeping its request counted against the node
    /// after the walk is gone (a connection handed off to it).
    pub fn detach(mut self) -> DetachedAssignment {
        self.current.take().expect("a candidate until next fails").detach()
    }

    /// Whether a stale pooled connection to the current node may be replaced by a fresh one
    /// (counts the reconnection when it may).
    pub fn reconnect(&mut self) -> bool {
        if !self.retryable || self.reconnects_left == 0 {
            return false;
        }
        self.reconnects_left -= 1;
        true
    }

    /// Whether the request may still move to another node.
    pub fn may_move(&self) -> bool {
        self.retryable && self.moves_left > 0
    }

    /// The current node failed: move to the next candidate (only when [`Self::may_move`]).
    /// An error means no node could take the request; the walk is then empty.
    pub async fn next(&mut self, req: &RequestInfo<'_>) -> Result<NodeId, DispatchError> {
        debug_assert!(self.may_move(), "no candidate left to move to");
        self.moves_left -= 1;
        // Complete the failed request first: the policy picks again without it.
        drop(self.current.take());
        let next = self.dispatcher.acquire(req, self.queue_timeout).await?;
        let node = next.node;
        self.current = Some(next);
        Ok(node)
    }
}

/// Point-in-time view of the dispatcher.
#[derive(Debug, Clone)]
pub struct DispatchSnapshot {
    /// (up, load, weight, ramp) per node.
    pub nodes: Vec<(bool, u32, u32, f64)>,
    pub in_flight: usize,
    pub queued: usize,
    pub admission_limit: Option<usize>,
    pub policy: &'static str,
    pub mapping_len: usize,
    /// Requests the policy was asked to place (`on_assign`) since the start.
    pub assignments: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_policy::{PolicyConfig, build};

    fn dispatcher(limit: usize, nodes: usize) -> Dispatcher {
        let config = PolicyConfig::LardR {
            t_low: 1,
            t_high: 2,
            k_secs: 20.0,
            admission_limit: Some(limit),
            max_targets: 100,
        };
        let weights = vec![1; nodes];
        Dispatcher::new(Cluster::new(build(&config, &weights).unwrap(), &weights, Duration::ZERO))
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn requests_over_the_admission_limit_wait_in_fifo_order_and_are_granted_on_complete() {
        let d = dispatcher(2, 2);
        let r = RequestInfo::get("/a");
        let a1 = d.acquire(&r, Duration::from_secs(5)).await.unwrap();
        let a2 = d.acquire(&r, Duration::from_secs(5)).await.unwrap();
        assert_eq!(d.snapshot().in_flight, 2);
        let order = std::cell::RefCell::new(Vec::new());
        let waiter = |n: u32| {
            let d = &d;
            let order = &order;
            async move {
                let a = d.acquire(&RequestInfo::get("/b"), Duration::from_secs(5)).await.unwrap();
                order.borrow_mut().push(n);
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(a);
            }
        };
        let releaser = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(d.snapshot().queued, 2);
            drop(a1);
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(a2);
        };
        tokio::join!(waiter(1), waiter(2), releaser);
        assert_eq!(*order.borrow(), vec![1, 2]);
        let s = d.snapshot();
        assert_eq!((s.in_flight, s.queued), (0, 0));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_queued_request_times_out_and_leaves_the_queue() {
        let d = dispatcher(1, 1);
        let r = RequestInfo::get("/a");
        let _a = d.acquire(&r, Duration::from_secs(1)).await.unwrap();
        let err = d.acquire(&r, Duration::from_millis(50)).await.err();
        assert_eq!(err, Some(DispatchError::QueueTimeout));
        assert_eq!(d.snapshot().queued, 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_cancelled_waiter_gives_its_granted_slot_to_the_next() {
        let d = dispatcher(1, 1);
        let r = RequestInfo::get("/a");
        let a = d.acquire(&r, Duration::from_secs(1)).await.unwrap();
        {
            // Queue, get granted, then be dropped before running.
            let fut = d.acquire(&r, Duration::from_secs(1));
            let mut fut = Box::pin(fut);
            assert!(futures_poll_once(&mut fut).await.is_none());
            drop(a);
            drop(fut);
        }
        let s = d.snapshot();
        assert_eq!((s.in_flight, s.queued), (0, 0));
        let _b = d.acquire(&r, Duration::from_millis(10)).await.unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_detached_assignment_counts_until_released() {
        let d = dispatcher(10, 1);
        let a = d.acquire(&RequestInfo::get("/a"), Duration::from_secs(1)).await.unwrap();
        let detached = a.detach();
        assert_eq!(d.snapshot().in_flight, 1);
        d.release(detached);
        assert_eq!(d.snapshot().in_flight, 0);
        // A walk ended by a handoff: its one assignment stays counted, the policy asked once.
        let c = Candidates::first(&d, &RequestInfo::get("/b"), Duration::from_secs(1), true).await.unwrap();
        let detached = c.detach();
        assert_eq!(d.snapshot().in_flight, 1);
        d.release(detached);
        let s = d.snapshot();
        assert_eq!((s.in_flight, s.assignments), (0, 2));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn no_node_up_is_an_error_not_a_wait() {
        let d = dispatcher(10, 2);
        d.set_up(NodeId(0), false);
        d.set_up(NodeId(1), false);
        let err = d.acquire(&RequestInfo::get("/a"), Duration::from_secs(1)).await.err();
        assert_eq!(err, Some(DispatchError::NoNodeUp));
        assert_eq!(d.snapshot().in_flight, 0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn candidates_start_at_the_pick_and_move_once_after_completing_the_failed_node() {
        let weights = [1, 1, 1];
        let config = PolicyConfig::from_name("rr").unwrap();
        let d = Dispatcher::new(Cluster::new(build(&config, &weights).unwrap(), &weights, Duration::ZERO));
        let r = RequestInfo::get("/a");
        let t = Duration::from_secs(1);
        // rr picks 0, then 1: the walk meets exactly what dispatching twice would.
        let mut c = Candidates::first(&d, &r, t, true).await.unwrap();
        assert_eq!(c.node(), NodeId(0));
        assert!(c.may_move());
        assert_eq!(c.next(&r).await.unwrap(), NodeId(1));
        assert_eq!(d.snapshot().in_flight, 1, "the failed node's request completed first");
        assert!(!c.may_move(), "one move at most");
        drop(c);
        assert_eq!(d.snapshot().in_flight, 0);
        // A request that may not be sent twice has one candidate and no reconnection.
        let mut c = Candidates::first(&d, &r, t, Candidates::may_retry(Method::Post, true)).await.unwrap();
        assert!(!c.may_move() && !c.reconnect());
        // Stale pooled connections: two fresh ones at most.
        let mut c2 = Candidates::first(&d, &r, t, true).await.unwrap();
        assert!(c2.reconnect() && c2.reconnect() && !c2.reconnect());
        assert!(c2.may_move(), "reconnecting is no move");
        drop((c, c2));
        // No node left for the move: the error, and an empty walk.
        let mut c = Candidates::first(&d, &r, t, true).await.unwrap();
        for n in 0..3 {
            d.set_up(NodeId(n), false);
        }
        assert_eq!(c.next(&r).await.err(), Some(DispatchError::NoNodeUp));
        drop(c);
        assert_eq!(d.snapshot().in_flight, 0);
    }

    async fn futures_poll_once<F: std::future::Future + Unpin>(f: &mut F) -> Option<F::Output> {
        use std::task::Poll;
        std::future::poll_fn(|cx| match std::pin::Pin::new(&mut *f).poll(cx) {
            Poll::Ready(v) => Poll::Ready(Some(v)),
            Poll::Pending => Poll::Ready(None),
        })
        .await
    }
}
