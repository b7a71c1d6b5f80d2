//! `NodeServer`: a running node. One thread per worker, each with its own single-threaded
//! event loop and its own SO_REUSEPORT listener on the shared address (the kernel spreads
//! connections; a connection never changes thread), an admin thread, the CPU pool, and with
//! `[handoff]` the handoff agent's thread, whose restored connections are adopted by the
//! workers round-robin (each worker's loop also takes them from its adoption queue).
//! The soft open-file limit is raised and `max_connections` fitted to it at start; short of
//! descriptors, new connections are answered 503 (see `locus_io::Shedding`), and other accept
//! errors back off instead of spinning; shutdown stops accepting, closes idle connections,
//! lets in-flight requests finish within the drain timeout, and joins it all.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use locus_http::Limits;
use locus_io::{Refusal, Shedding};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::admin::serve_admin;
use crate::class_table::ClassTable;
use crate::config::{ConfigError, NodeConfig, available_cpus};
use crate::connection;
use crate::context::{ConnectionSlot, NodeContext, WorkerContext, count};
use crate::cpu_pool::CpuPool;
use crate::doc_store::DocStore;
use crate::document_root::DocumentRoot;
use crate::error::NodeError;
use crate::handoff_agent::{AdoptedConnection, HandoffAgent, cloned_connection_id};
use crate::node_metrics::{NodeMetrics, NodeStats};
use crate::open_files::shed_answer;
use crate::origin::{OriginAddr, OriginPool};
use crate::request_router::RequestRouter;
use crate::storage_model::StorageModel;

/// How long a worker sleeps after an accept error it cannot shed (EMFILE with no spare
/// descriptor, ENOMEM, ENOBUFS).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
const LISTEN_BACKLOG: i32 = 4096;

/// A running node; see the module documentation. Dropping it shuts it down like `shutdown`.
pub struct NodeServer {
    addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    handoff_addr: Option<SocketAddr>,
    node: Arc<NodeContext>,
    shutdown: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

fn bind_listener(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// `n` listeners on `addr`: the first binds (picking the port if it is 0), the others join
/// it with SO_REUSEPORT.
fn bind_listeners(addr: SocketAddr, n: usize) -> io::Result<Vec<std::net::TcpListener>> {
    let first = bind_listener(addr, n > 1)?;
    let bound = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..n {
        listeners.push(bind_listener(bound, true)?);
    }
    Ok(listeners)
}

/// Accept errors that concern one connection only (retry at once) rather than the process
/// (back off).
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(libc::EPROTO)
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
    let AdoptedConnection { stream, slot, id, unsent } = adopted;
    let mut stream = match TcpStream::from_std(stream) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%id, error = %e, "adopting a restored connection failed");
            agent.connection_closed(id);
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    let limit = w.node.keepalive_timeout;
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
            match tokio::time::timeout(limit, TcpStream::connect(addr)).await {
                Ok(Ok(upstream)) => {
                    let _ = upstream.set_nodelay(true);
                    if let Err(e) = crate::upstream_relay::relay(&stream, &upstream, limit).await {
                        tracing::debug!(%id, upstream = %addr, error = %e, "upstream relay ended");
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(%id, upstream = %addr, error = %e, "connecting to the upstream failed")
                }
                Err(_) => tracing::warn!(%id, upstream = %addr, "connecting to the upstream timed out"),
            }
            agent.connection_closed(id);
        }
        None => {
            let end = connection::serve(stream, w, Some(RequestRouter::handed_off(agent, id))).await;
            tracing::debug!(%id, ?end, "handed-off connection done");
        }
    }
    drop(slot);
}

/// Out of descriptors: refuse a connection waiting on `listener` with the spare descriptor
/// (or take it, if descriptors are free again by then). `Err` when that cannot be done and
/// the worker must back off; `Ok(None)` when there is nothing more to do.
async fn shed_waiting(
    shedding: &mut Shedding,
    listener: &TcpListener,
    node: &NodeContext,
    e: &io::Error,
) -> Result<Option<(TcpStream, SocketAddr)>, ()> {
    match shedding.out_of_descriptors(listener, e).await {
        Refusal::Refused => {
            count(&node.metrics.connections_refused);
            Ok(None)
        }
        Refusal::Admitted(stream, peer) => Ok(Some((stream, peer))),
        Refusal::NoneWaiting => Ok(None),
        Refusal::CannotAccept(_) => Err(()),
    }
}

async fn accept_loop(
    listener: TcpListener,
    w: Arc<WorkerContext>,
    mut adoptions: Option<mpsc::UnboundedReceiver<AdoptedConnection>>,
) {
    let node = w.node.clone();
    let mut shutdown = w.shutdown.clone();
    let mut connections = tokio::task::JoinSet::new();
    let mut last_warning: Option<std::time::Instant> = None;
    let cloning = w.handoff.clone().filter(|a| a.clone_mode());
    let mut shedding = Shedding::new(shed_answer(&node.node_headers));
    loop {
        let accepted = tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            adopted = next_adopted(&mut adoptions) => {
                while connections.try_join_next().is_some() {}
                count(&node.metrics.connections_total);
                if let Some(agent) = w.handoff.clone() {
                    let w = w.clone();
                    connections.spawn(async move { serve_adopted(adopted, &w, agent).await });
                }
                continue;
            }
            accepted = listener.accept() => accepted,
        };
        let accepted = match accepted {
            Err(e) if locus_io::is_out_of_descriptors(&e) => {
                match shed_waiting(&mut shedding, &listener, &node, &e).await {
                    Ok(Some(taken)) => Ok(taken),
                    Ok(None) => continue,
                    Err(()) => Err(e),
                }
            }
            other => other,
        };
        match accepted {
            Ok((stream, peer)) => {
                while connections.try_join_next().is_some() {}
                let Some(stream) = shedding.admit(stream) else {
                    count(&node.metrics.connections_refused);
                    continue;
                };
                let Some(slot) = ConnectionSlot::claim(&node) else {
                    count(&node.metrics.connections_refused);
                    drop(stream);
                    continue;
                };
                count(&node.metrics.connections_total);
                let _ = stream.set_nodelay(true);
                let router = cloning.as_ref().and_then(|agent| {
                    let id = cloned_connection_id(peer, stream.local_addr().ok()?)?;
                    Some(RequestRouter::cloned(agent.clone(), id))
                });
                let w = w.clone();
                connections.spawn(async move {
                    connection::serve(stream, &w, router).await;
                    drop(slot);
                });
            }
            Err(e) if is_connection_error(&e) => {}
            Err(e) => {
                if last_warning.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    tracing::warn!(error = %e, "accept failed; backing off");
                    last_warning = Some(std::time::Instant::now());
                }
                tokio::select! {
                    _ = shutdown.changed() => break,
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                }
            }
        }
    }
    drop(listener);
    let drain = Duration::from_millis(node.limits.drain_timeout_ms);
    let finished =
        tokio::time::timeout(drain, async { while connections.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::warn!(open = connections.len(), "drain timeout: closing remaining connections");
    }
    connections.shutdown().await;
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

impl NodeServer {
    /// Start a node: bind its listeners, start its threads, return once it accepts.
    pub fn start(mut config: NodeConfig) -> Result<NodeServer, NodeError> {
        config.load_class_file()?;
        config.validate()?;
        let workers = if config.workers == 0 { available_cpus() } else { config.workers };
        config.limits.max_connections = crate::open_files::connection_limit(&config, workers)?;
        let cpu_threads = if config.cpu_threads == 0 { available_cpus() } else { config.cpu_threads };
        let origin = match &config.origin {
            Some(o) => Some(o.parse::<OriginAddr>().map_err(ConfigError::Invalid)?),
            None => None,
        };
        let root = match DocumentRoot::new(&config.root) {
            Ok(root) => Some(root),
            Err(_) if origin.is_some() => None,
            Err(source) => return Err(NodeError::Root { path: config.root.clone(), error: source }),
        };
        let classes = ClassTable::new(&config.classes, config.seed)?;
        let listeners = bind_listeners(config.listen, workers)
            .map_err(|source| NodeError::Bind { addr: config.listen, error: source })?;
        let addr = listeners[0].local_addr().map_err(NodeError::Start)?;
        let admin_listener = match config.admin {
            Some(a) => {
                let l =
                    bind_listener(a, false).map_err(|source| NodeError::Bind { addr: a, error: source })?;
                Some(l)
            }
            None => None,
        };
        let admin_addr =
            admin_listener.as_ref().map(|l| l.local_addr()).transpose().map_err(NodeError::Start)?;
        let handoff_listener = match &config.handoff {
            Some(h) => {
                let key = h.control_key()?;
                let l = bind_listener(h.listen, false)
                    .map_err(|source| NodeError::Bind { addr: h.listen, error: source })?;
                Some((h.clone(), key, l))
            }
            None => None,
        };
        let handoff_addr = handoff_listener
            .as_ref()
            .map(|(_, _, l)| l.local_addr())
            .transpose()
            .map_err(NodeError::Start)?;

        let node_headers = Bytes::from(format!("Server: locus\r\nX-Locus-Node: {}\r\n", config.name));
        let node = Arc::new(NodeContext {
            name: config.name.clone(),
            node_headers,
            parse_limits: Limits {
                max_head_bytes: config.limits.max_head_bytes.bytes() as usize,
                max_headers: config.limits.max_headers,
            },
            header_timeout: Duration::from_millis(config.limits.header_timeout_ms),
            keepalive_timeout: Duration::from_millis(config.limits.keepalive_timeout_ms),
            limits: config.limits.clone(),
            root,
            origin: origin.clone(),
            store: DocStore::new(
                config.cache.capacity.bytes(),
                config.cache.max_object.bytes(),
                config.cache.replacement,
                config.cache.revalidate_ms,
            ),
            storage: config.storage.map(StorageModel::new),
            classes,
            cpu: CpuPool::new(cpu_threads, "node").map_err(NodeError::Start)?,
            metrics: NodeMetrics::new(workers),
            server_names: config.server_names.clone(),
            shutting_down: Default::default(),
        });

        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut server =
            NodeServer { addr, admin_addr, handoff_addr, node: node.clone(), shutdown, threads: Vec::new() };
        let mut adoptions: Vec<Option<mpsc::UnboundedReceiver<AdoptedConnection>>> = Vec::new();
        let agent = handoff_listener.as_ref().map(|(h, _, _)| {
            let (senders, receivers): (Vec<_>, Vec<_>) =
                (0..workers).map(|_| mpsc::unbounded_channel()).unzip();
            adoptions = receivers.into_iter().map(Some).collect();
            Arc::new(HandoffAgent::new(node.clone(), h, senders))
        });
        adoptions.resize_with(workers, || None);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let mut expected = 0;
        for (index, listener) in listeners.into_iter().enumerate() {
            let w = Arc::new(WorkerContext {
                index,
                node: node.clone(),
                origin_pool: origin.clone().map(OriginPool::new),
                peer_pool: Default::default(),
                handoff: agent.clone(),
                shutdown: shutdown_rx.clone(),
            });
            let adoption = adoptions[index].take();
            let setup = move || {
                let listener = TcpListener::from_std(listener)?;
                Ok(move || accept_loop(listener, w, adoption))
            };
            let thread = spawn_event_loop(format!("node-w{index}"), setup, ready_tx.clone())
                .map_err(NodeError::Start)?;
            server.threads.push(thread);
            expected += 1;
        }
        if let Some(listener) = admin_listener {
            let (node, rx) = (node.clone(), shutdown_rx.clone());
            let setup = move || {
                let listener = TcpListener::from_std(listener)?;
                Ok(move || serve_admin(listener, node, rx))
            };
            let thread =
                spawn_event_loop("node-admin".into(), setup, ready_tx.clone()).map_err(NodeError::Start)?;
            server.threads.push(thread);
            expected += 1;
        }
        if let (Some((_, key, listener)), Some(agent)) = (handoff_listener, agent) {
            let rx = shutdown_rx.clone();
            let setup = move || {
                let listener = TcpListener::from_std(listener)?;
                Ok(move || agent.run(listener, key, rx))
            };
            let thread =
                spawn_event_loop("node-handoff".into(), setup, ready_tx.clone()).map_err(NodeError::Start)?;
            server.threads.push(thread);
            expected += 1;
        }
        drop(ready_tx);
        for _ in 0..expected {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(NodeError::Start(e)),
                Err(_) => {
                    return Err(NodeError::Start(io::Error::other("a node thread exited during start")));
                }
            }
        }
        tracing::info!(name = %config.name, %addr, admin = ?admin_addr, handoff = ?handoff_addr, workers, "node started");
        Ok(server)
    }

    /// The address the node serves HTTP on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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
        tracing::info!(name = %self.node.name, "node stopped");
    }
}

impl Drop for NodeServer {
    fn drop(&mut self) {
        self.stop();
    }
}
