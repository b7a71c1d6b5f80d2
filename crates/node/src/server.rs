//! `NodeServer`: a running node. One thread per worker, each with its own single-threaded
//! event loop and its own SO_REUSEPORT listener on the shared address (the kernel spreads
//! connections; a connection never changes thread), an admin thread, the CPU pool, and with
//! `[handoff]` the handoff agent's thread, whose restored connections are adopted by the
//! workers round-robin (each worker's loop also takes them from its adoption queue).
//! The soft open-file limit is raised and `max_connections` fitted to it at start. The accept
//! loop is the one `locus_io` gives both servers: listeners from `bind_listeners`, new
//! connections shed with a 503 when descriptors run short (`Shedding`), other accept errors
//! backed off from (`AcceptBackoff`), one `ConnectionSlot` per open connection, and shutdown
//! by `drain` (stop accepting, close idle connections, let in-flight requests finish within
//! the drain timeout), after which it all is joined. With `[coop]`, a thread of its own
//! checks the peers and sends the cache's insert/evict notices. `reload` puts a new
//! configuration in force in place (see the `reload` module).

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use locus_handoff::ControlKey;
use locus_io::{AcceptBackoff, AcceptRecovery, BindRetry, Pipe, Shedding, SpliceError, TaskTracker};
use parking_lot::RwLock;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::admin::serve_admin;
use crate::class_table::ClassTable;
use crate::config::{ConfigError, HandoffConfig, NodeConfig, available_cpus};
use crate::connection::{self, Transport};
use crate::context::{NodeContext, WorkerContext, count};
use crate::coop::node::{CoopNode, observer};
use crate::coop::notices::run_coop_background;
use crate::cpu::model::CpuModel;
use crate::cpu::pool::CpuPool;
use crate::dc::background::run_dc_background;
use crate::dc::fetch::DcWorker;
use crate::dc::node::DcNode;
use crate::doc_store::DocStore;
use crate::document_root::DocumentRoot;
use crate::error::NodeError;
use crate::handoff::agent::{AdoptedConnection, HandoffAgent, cloned_connection_id};
use crate::handoff::request_router::RequestRouter;
use crate::listen_queue::ListenQueue;
use crate::live_settings::LiveSettings;
use crate::miss::MissSource;
use crate::node_metrics::{NodeMetrics, NodeStats};
use crate::open_files::shed_answer;
use crate::origin::OriginAddr;
use crate::peer_link::PeerKey;
use crate::peer_requests::PeerRequests;
use crate::reload::{NodeReloadError, NodeReloadReport, Reloader};
use crate::storage_model::{DiskSet, StorageModel};
use crate::tls_accept::tls_handshake;

/// A running node; see the module documentation. Dropping it shuts it down like `shutdown`.
pub struct NodeServer {
    addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    handoff_addr: Option<SocketAddr>,
    node: Arc<NodeContext>,
    /// The configuration in force, and what puts a new one in force.
    reloader: Reloader,
    shutdown: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

/// The next restored connection for this worker; never resolves without an adoption queue
/// (or once the agent is gone).
async fn next_adopted(
    adoptions: &mut Option<mpsc::UnboundedReceiver<AdoptedConnection>>,
) -> AdoptedConnection {
    if let Some(queue) = adoptions
        && let Some(adopted) = queue.recv().await
    {
        return adopted;
    }
    *adoptions = None;
    std::future::pending().await
}

/// Serve a connection restored after `Go`: the unsent part of its send queue first, then the
/// node's own HTTP handling with per-request routing, or a kernel relay to the upstream.
/// `Closed` is reported when it ends here.
async fn serve_adopted(adopted: AdoptedConnection, w: &WorkerContext, agent: Arc<HandoffAgent>) {
    let AdoptedConnection { stream, slot, id, unsent, tls } = adopted;
    let mut stream = match TcpStream::from_std(stream) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%id, error = %e, "adopting a restored connection failed");
            agent.connection_closed(id);
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    let limit = w.node.settings().keepalive_timeout;
    if !unsent.is_empty() {
        let written = tokio::time::timeout(limit, stream.write_all(&unsent)).await;
        if !matches!(written, Ok(Ok(()))) {
            tracing::warn!(%id, bytes = unsent.len(), "writing the unsent part of the send queue failed");
            agent.connection_closed(id);
            return;
        }
        w.counters().sent(unsent.len() as u64);
    }
    match agent.upstream() {
        Some(addr) => {
            relay_to_upstream(&stream, addr, limit, id).await;
            agent.connection_closed(id);
        }
        None => {
            let transport = match tls {
                None => Transport::Plain(stream),
                Some(session) => match locus_tls::TlsStream::continued(stream, *session) {
                    Ok(tls) => Transport::Tls(Box::new(tls)),
                    Err(e) => {
                        tracing::warn!(%id, error = %e, "continuing a handed-off TLS session failed");
                        agent.connection_closed(id);
                        return;
                    }
                },
            };
            let end = connection::serve(transport, w, Some(RequestRouter::handed_off(agent, id))).await;
            tracing::debug!(%id, ?end, "handed-off connection done");
        }
    }
    drop(slot);
}

/// Connect to the upstream at `addr` and join it to `client` in the kernel (`locus_io::tunnel_through`,
/// two new pipes, closed after) until both directions end or nothing moves for `limit`.
async fn relay_to_upstream(
    client: &TcpStream,
    addr: SocketAddr,
    limit: Duration,
    id: impl std::fmt::Display,
) {
    match tokio::time::timeout(limit, TcpStream::connect(addr)).await {
        Ok(Ok(upstream)) => {
            let _ = upstream.set_nodelay(true);
            let relayed = async {
                let pipes =
                    [Pipe::new().map_err(SpliceError::Client)?, Pipe::new().map_err(SpliceError::Node)?];
                locus_io::tunnel_through(client, &upstream, pipes, limit).await
            };
            if let Err(e) = relayed.await {
                tracing::debug!(%id, upstream = %addr, error = %e, "upstream relay ended");
            }
        }
        Ok(Err(e)) => tracing::warn!(%id, upstream = %addr, error = %e, "connecting to the upstream failed"),
        Err(_) => tracing::warn!(%id, upstream = %addr, "connecting to the upstream timed out"),
    }
}

/// One worker's accept loop: what it keeps from one connection to the next.
struct Acceptor {
    w: Arc<WorkerContext>,
    /// The handoff agent, when it routes requests of connections cloned to it.
    cloning: Option<Arc<HandoffAgent>>,
    shedding: Shedding,
    /// The connections in flight, waited for at shutdown.
    connections: TaskTracker,
}

impl Acceptor {
    /// Serve `stream`, just accepted from `peer`, unless it took one of the last descriptors
    /// (answered 503 by `shedding`) or `max_connections` are open (closed at once).
    fn admit(&mut self, stream: TcpStream, peer: SocketAddr) {
        let node = &self.w.node;
        let Some(stream) = self.shedding.admit(stream) else {
            count(&node.metrics.connections_refused);
            return;
        };
        let Some(slot) = node.claim_connection() else {
            count(&node.metrics.connections_refused);
            drop(stream);
            return;
        };
        count(&node.metrics.connections_total);
        let _ = stream.set_nodelay(true);
        let router = self.cloning.as_ref().and_then(|agent| {
            let local = stream.local_addr().ok()?;
            let id = cloned_connection_id(peer, local).filter(|_| agent.clones(local))?;
            Some(RequestRouter::cloned(agent.clone(), id))
        });
        let w = self.w.clone();
        self.connections.spawn(async move {
            let transport = match &w.node.tls {
                None => Transport::Plain(stream),
                Some(tls) => match tls_handshake(tls, stream, &w.node).await {
                    Some(t) => t,
                    None => return drop(slot),
                },
            };
            connection::serve(transport, &w, router).await;
            drop(slot);
        });
    }

    /// Serve a connection restored after a handoff (its slot came with it).
    fn adopt(&mut self, adopted: AdoptedConnection) {
        count(&self.w.node.metrics.connections_total);
        if let Some(agent) = self.w.handoff.clone() {
            let w = self.w.clone();
            self.connections.spawn(async move { serve_adopted(adopted, &w, agent).await });
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    w: Arc<WorkerContext>,
    mut adoptions: Option<mpsc::UnboundedReceiver<AdoptedConnection>>,
) {
    let node = w.node.clone();
    let mut shutdown = w.shutdown.clone();
    let mut backoff = AcceptBackoff::new();
    let cloning = w.handoff.clone().filter(|a| a.clone_mode());
    let shedding = Shedding::new(shed_answer(&node.node_headers));
    let mut acceptor = Acceptor { w, cloning, shedding, connections: TaskTracker::new() };
    let counted = node.listen_queue.register(listener.as_raw_fd());
    loop {
        let accepted = tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            adopted = next_adopted(&mut adoptions) => {
                acceptor.adopt(adopted);
                continue;
            }
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => acceptor.admit(stream, peer),
            Err(e) => {
                count(&node.metrics.accept_errors);
                match backoff.recover("worker", &mut acceptor.shedding, &listener, e).await {
                    AcceptRecovery::Shed => count(&node.metrics.connections_refused),
                    AcceptRecovery::Admitted(stream, peer) => acceptor.admit(stream, peer),
                    AcceptRecovery::AcceptAgain | AcceptRecovery::Paused => {}
                }
            }
        }
    }
    // Withdrawn from the accept-queue count before `drain` closes the listener.
    drop(counted);
    let drain = node.settings().drain_timeout();
    // Whatever is still open after the drain is closed when the event loop shuts down.
    locus_io::drain(listener, &acceptor.connections, drain).await;
}

fn runtime(name: &str) -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(64)
        .thread_name(format!("{name}-io"))
        .build()
}

/// Run `body` on a new thread with its own event loop; the thread reports through `ready`
/// once `setup` (run inside the event loop) succeeded.
fn spawn_event_loop<S, F, Fut>(
    name: String,
    setup: S,
    ready: std::sync::mpsc::Sender<io::Result<()>>,
) -> io::Result<JoinHandle<()>>
where
    S: FnOnce() -> io::Result<F> + Send + 'static,
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    std::thread::Builder::new().name(name.clone()).spawn(move || {
        let rt = match runtime(&name) {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let body = match rt.block_on(async { setup() }) {
            Ok(body) => body,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        rt.block_on(body());
        rt.shutdown_timeout(Duration::from_secs(1));
    })
}

/// The listeners of a node, bound before any thread starts.
struct Listeners {
    /// One per worker on the client-facing address.
    workers: Vec<std::net::TcpListener>,
    admin: Option<std::net::TcpListener>,
    /// The handoff agent's control listener, with its configuration and key.
    handoff: Option<(HandoffConfig, ControlKey, std::net::TcpListener)>,
}

impl Listeners {
    /// Bind the client-facing listeners (a port still held by a node just stopped is waited
    /// for, see `BindRetry::PATIENT`), the admin one and the handoff agent's.
    fn bind(config: &NodeConfig, workers: usize) -> Result<Listeners, NodeError> {
        let bind =
            |addr| locus_io::bind_listener(addr, false).map_err(|error| NodeError::Bind { addr, error });
        let client = locus_io::bind_listeners(config.listen, workers, BindRetry::PATIENT)
            .map_err(|error| NodeError::Bind { addr: config.listen, error })?;
        let admin = config.admin.map(bind).transpose()?;
        let handoff = match &config.handoff {
            Some(h) => Some((h.clone(), h.control_key()?, bind(h.listen)?)),
            None => None,
        };
        Ok(Listeners { workers: client, admin, handoff })
    }

    /// The client-facing, admin and handoff addresses.
    fn addrs(&self) -> io::Result<(SocketAddr, Option<SocketAddr>, Option<SocketAddr>)> {
        let addr = self.workers[0].local_addr()?;
        let admin = self.admin.as_ref().map(|l| l.local_addr()).transpose()?;
        let handoff = self.handoff.as_ref().map(|(_, _, l)| l.local_addr()).transpose()?;
        Ok((addr, admin, handoff))
    }
}

/// What the connections of a node started with `config` share.
fn node_context(
    config: &NodeConfig,
    workers: usize,
    origin: Option<OriginAddr>,
    coop: Option<Arc<CoopNode>>,
    dc: Option<Arc<DcNode>>,
) -> Result<NodeContext, NodeError> {
    let cpu_threads = if config.cpu_threads == 0 { available_cpus() } else { config.cpu_threads };
    let root = match DocumentRoot::new(&config.root) {
        Ok(root) => Some(root),
        Err(_) if origin.is_some() => None,
        Err(source) => return Err(NodeError::Root { path: config.root.clone(), error: source }),
    };
    let classes = Arc::new(ClassTable::new(&config.classes, config.seed)?);
    Ok(NodeContext {
        name: config.name.clone(),
        node_headers: Bytes::from(format!(
            "Server: locus\r\nX-Locus-Node: {}\r\n{}",
            config.name,
            if dc.is_some() { "X-Locus-DC: home\r\n" } else { "" }
        )),
        live: RwLock::new(Arc::new(LiveSettings::new(config, classes))),
        root,
        origin,
        store: DocStore::new(
            config.cache.capacity.bytes(),
            config.cache.max_object.bytes(),
            config.cache.replacement,
            config.cache.revalidate_ms,
        ),
        storage: config.storage.map(StorageModel::new),
        class_disk: DiskSet::new(1),
        cpu: CpuPool::new(cpu_threads, "node").map_err(NodeError::Start)?,
        cpu_model: config.cpu.map(|c| CpuModel::new(c, "node")).transpose().map_err(NodeError::Start)?,
        metrics: NodeMetrics::new(workers, config.limits.max_connections),
        listen_queue: ListenQueue::default(),
        coop,
        dc,
        shutting_down: Default::default(),
        tls: config
            .tls
            .clone()
            .map(|t| locus_tls::TlsService::new(t, &[locus_tls::ALPN_HTTP1], std::time::SystemTime::now()))
            .transpose()?
            .map(Arc::new),
    })
}

/// Cooperative caching's and DC mode's shared state (at most one of them is configured), and
/// the peer key they were made with.
type PeerModes = (Option<Arc<CoopNode>>, Option<Arc<DcNode>>, Option<PeerKey>);

/// Cooperative caching's and DC mode's shared state, for a node listening on `addr`, with
/// the peer key if one is configured (read here, once); without one, a warning that peer
/// requests are told by their source address.
fn peer_modes(config: &NodeConfig, addr: SocketAddr) -> Result<PeerModes, NodeError> {
    if config.coop.is_none() && config.dc.is_none() {
        return Ok((None, None, None));
    }
    let key = config.peer_key()?;
    if key.is_none() {
        tracing::warn!(
            "no peer_key_file: coop and DC requests between nodes are told by their source address \
             alone, so any process on a member's host can make them, and a member whose requests \
             leave from an address the others do not know is refused; set peer_key_file (the same \
             key on every member) to tell them by signature"
        );
    }
    let coop = match &config.coop {
        Some(c) => Some(Arc::new(
            CoopNode::new(c, addr, config.cache.max_object.bytes(), key.clone())
                .map_err(ConfigError::Invalid)?,
        )),
        None => None,
    };
    let dc = match &config.dc {
        Some(c) => Some(Arc::new(DcNode::new(c, addr, config, key.clone()).map_err(ConfigError::Invalid)?)),
        None => None,
    };
    Ok((coop, dc, key))
}

/// The handoff agent for `config` (none without `[handoff]`), and each worker's queue of the
/// connections it restores.
fn handoff_agent(
    node: &Arc<NodeContext>,
    config: Option<&HandoffConfig>,
    workers: usize,
) -> (Option<Arc<HandoffAgent>>, Vec<Option<mpsc::UnboundedReceiver<AdoptedConnection>>>) {
    let Some(h) = config else { return (None, (0..workers).map(|_| None).collect()) };
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..workers).map(|_| mpsc::unbounded_channel()).unzip();
    let agent = Arc::new(HandoffAgent::new(node.clone(), h, senders));
    (Some(agent), receivers.into_iter().map(Some).collect())
}

/// Wait until each of `threads` threads has reported on `ready` that it started.
fn wait_for_threads(
    threads: usize,
    ready: &std::sync::mpsc::Receiver<io::Result<()>>,
) -> Result<(), NodeError> {
    for _ in 0..threads {
        match ready.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(NodeError::Start(e)),
            Err(_) => return Err(NodeError::Start(io::Error::other("a node thread exited during start"))),
        }
    }
    Ok(())
}

impl NodeServer {
    /// Start a node: bind its listeners, start its threads, return once it accepts.
    pub fn start(mut config: NodeConfig) -> Result<NodeServer, NodeError> {
        config.load_class_file()?;
        config.validate()?;
        let configured = config.clone();
        let workers = if config.workers == 0 { available_cpus() } else { config.workers };
        config.limits.max_connections = crate::open_files::connection_limit(&config, workers)?;
        let origin = match &config.origin {
            Some(o) => Some(o.parse::<OriginAddr>().map_err(ConfigError::Invalid)?),
            None => None,
        };
        let listeners = Listeners::bind(&config, workers)?;
        let (addr, admin_addr, handoff_addr) = listeners.addrs().map_err(NodeError::Start)?;
        let (coop, dc, peer_key) = peer_modes(&config, addr)?;
        let node = Arc::new(node_context(&config, workers, origin.clone(), coop.clone(), dc.clone())?);
        if let Some(coop) = &coop {
            node.store.set_observer(observer(coop));
        }
        let (shutdown, shutdown_rx) = watch::channel(false);
        let reloader = Reloader::new(node.clone(), addr, configured, peer_key);
        let mut server = NodeServer {
            addr,
            admin_addr,
            handoff_addr,
            node: node.clone(),
            reloader,
            shutdown,
            threads: Vec::new(),
        };
        let (agent, mut adoptions) = handoff_agent(&node, config.handoff.as_ref(), workers);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        for (index, listener) in listeners.workers.into_iter().enumerate() {
            let w = Arc::new(WorkerContext {
                index,
                node: node.clone(),
                miss: MissSource::new(origin.as_ref(), coop.as_ref()),
                peer_requests: PeerRequests::new(coop.is_some(), dc.is_some()),
                peer_pool: Default::default(),
                dc: dc.clone().map(DcWorker::new),
                handoff: agent.clone(),
                shutdown: shutdown_rx.clone(),
            });
            let adoption = adoptions[index].take();
            let setup = move || {
                let listener = TcpListener::from_std(listener)?;
                Ok(move || accept_loop(listener, w, adoption))
            };
            server.spawn(format!("node-w{index}"), setup, &ready_tx)?;
        }
        if let Some(listener) = listeners.admin {
            let (node, rx) = (node.clone(), shutdown_rx.clone());
            let setup = move || {
                let listener = TcpListener::from_std(listener)?;
                Ok(move || serve_admin(listener, node, rx))
            };
            server.spawn("node-admin".into(), setup, &ready_tx)?;
        }
        if let (Some((_, key, listener)), Some(agent)) = (listeners.handoff, agent) {
            let rx = shutdown_rx.clone();
            let setup = move || {
                let listener = TcpListener::from_std(listener)?;
                Ok(move || agent.run(listener, key, rx))
            };
            server.spawn("node-handoff".into(), setup, &ready_tx)?;
        }
        if let Some(coop) = coop {
            let rx = shutdown_rx.clone();
            server.spawn("node-coop".into(), move || Ok(move || run_coop_background(coop, rx)), &ready_tx)?;
        }
        if let Some(dc) = dc {
            let (rx, node) = (shutdown_rx.clone(), node.clone());
            server.spawn("node-dc".into(), move || Ok(move || run_dc_background(node, dc, rx)), &ready_tx)?;
        }
        drop(ready_tx);
        wait_for_threads(server.threads.len(), &ready_rx)?;
        tracing::info!(name = %config.name, %addr, admin = ?admin_addr, handoff = ?handoff_addr, workers, "node started");
        Ok(server)
    }

    /// Start the thread `name` (see `spawn_event_loop`), to be joined at shutdown.
    fn spawn<S, F, Fut>(
        &mut self,
        name: String,
        setup: S,
        ready: &std::sync::mpsc::Sender<io::Result<()>>,
    ) -> Result<(), NodeError>
    where
        S: FnOnce() -> io::Result<F> + Send + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = ()>,
    {
        let thread = spawn_event_loop(name, setup, ready.clone()).map_err(NodeError::Start)?;
        self.threads.push(thread);
        Ok(())
    }

    /// The address the node serves HTTP (or HTTPS) on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether the client listener speaks TLS.
    pub fn serves_tls(&self) -> bool {
        self.node.tls.is_some()
    }

    /// Put `config` in force without closing a connection (SIGHUP): the cache's size
    /// (shrinking evicts), classes, limits and timeouts, server names, TLS certificates and
    /// ticket keys (read again), cooperative caching's peers and settings, DC mode's threshold,
    /// replication and consistency, the peer key. Settings that need new sockets or threads
    /// keep their running value and are named in the report (and logged as warnings). A
    /// configuration that does not check is refused with the error and the running one stays;
    /// requests under way finish with the settings they began with. See `reload`.
    pub fn reload(&self, config: NodeConfig) -> Result<NodeReloadReport, NodeReloadError> {
        self.reloader.reload(config)
    }

    /// Count a reload that was refused before it came here (SIGHUP with a file that does not
    /// parse or check), and log `why`; the running configuration stays.
    pub fn refuse_reload(&self, why: &dyn std::fmt::Display) {
        self.reloader.refuse(why);
    }

    /// The admin listener's address, if configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The handoff agent's control listener address, if the agent runs.
    pub fn handoff_addr(&self) -> Option<SocketAddr> {
        self.handoff_addr
    }

    /// The node's counters now.
    pub fn stats(&self) -> NodeStats {
        self.node.metrics.snapshot()
    }

    /// DC mode: add server `server` to the set of this home's document `path` (canonical site
    /// path), as the balancer would; false without DC mode, for an unknown path or server, or
    /// if it is there already.
    pub fn dc_place(&self, path: &str, server: &str) -> bool {
        self.node.dc.as_ref().is_some_and(|dc| dc.place(path, server))
    }

    /// The `/locus/status` document.
    pub fn status(&self) -> serde_json::Value {
        crate::admin::status_json(&self.node)
    }

    /// Stop accepting, close idle connections, let in-flight requests finish (within the
    /// drain timeout), and return once every thread has stopped.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.node.shutting_down.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.shutdown.send(true);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.node.cpu.shutdown();
        if let Some(model) = &self.node.cpu_model {
            model.shutdown();
        }
        tracing::info!(name = %self.node.name, "node stopped");
    }
}

impl Drop for NodeServer {
    fn drop(&mut self) {
        self.stop();
    }
}
