//! `SwitchServer`: starts the switch — one thread per worker, each with a current-thread
//! runtime accepting on its own SO_REUSEPORT listener (`locus_io::bind_listeners`) — plus a
//! control thread for health checks and the admin listener; and stops it gracefully
//! (`locus_io::drain`: stop accepting, let the sessions finish, exit). Accept errors are shed
//! from or backed off from as `locus_io::AcceptBackoff` says; connections past
//! `max_connections` are answered 503.

use crate::access_log::{AccessLog, open_sink};
use crate::config::SwitchConfig;
use crate::forward::write_error_response;
use crate::listeners::Listeners;
use crate::open_files::{MAX_REJECTING, shed_answer};
use crate::session::{serve, serve_tls};
use crate::state::Shared;
use crate::worker::Worker;
use crate::{admin, health};
use locus_io::{AcceptBackoff, AcceptRecovery, ConnectionLimit, Shedding};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// Why the switch could not start.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error(transparent)]
    Config(#[from] crate::ConfigError),
    #[error("cannot listen on {addr}: {error}")]
    Listen { addr: SocketAddr, error: std::io::Error },
    #[error("cannot open access log {path}: {error}")]
    AccessLog { path: String, error: std::io::Error },
    #[error("cannot start thread: {0}")]
    Thread(std::io::Error),
    #[error(transparent)]
    Handoff(#[from] crate::handoff::HandoffSetupError),
    #[error(transparent)]
    OpenFiles(#[from] locus_io::TooFewDescriptors),
    #[error(transparent)]
    Takeover(#[from] crate::upgrade::TakeoverError),
    #[error("cannot serve the control socket {path}: {error}")]
    ControlSocket { path: std::path::PathBuf, error: std::io::Error },
}

/// A running switch.
pub struct SwitchServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    admin_addr: Option<SocketAddr>,
    threads: Vec<JoinHandle<()>>,
    /// The runtime API's socket file, removed at shutdown.
    _control_socket: Option<crate::control::socket::SocketFile>,
}

impl SwitchServer {
    /// Validate `config`, raise the open-file limit and fit `max_connections` to it (see
    /// `open_files::plan`), bind every listener and start the threads.
    pub fn start(config: SwitchConfig) -> Result<SwitchServer, SwitchError> {
        SwitchServer::start_on(config, None)
    }

    /// `start`, on the listening sockets of the switch serving the control socket `from`
    /// (a binary upgrade): it hands them over (SCM_RIGHTS), this switch starts on them and
    /// says so, and the old one stops accepting and drains. Connections waiting in the
    /// sockets' queues are accepted here; none is refused in between.
    pub fn start_taking_over(
        config: SwitchConfig,
        from: &std::path::Path,
    ) -> Result<SwitchServer, SwitchError> {
        let mut takeover = crate::upgrade::Takeover::request(from)?;
        let server = SwitchServer::start_on(config, takeover.listeners.take())?;
        // The service manager hears of the new main process before the old one steps down.
        locus_io::service_notify::took_over();
        takeover.confirm(&server.shared)?;
        Ok(server)
    }

    fn start_on(mut config: SwitchConfig, inherited: Option<Listeners>) -> Result<SwitchServer, SwitchError> {
        config.validate()?;
        config.limits.max_connections = crate::open_files::connection_limit(&config)?;
        let mut shared = Shared::new(config)?;
        if matches!(shared.config().mode, crate::Mode::Handoff | crate::Mode::L4) {
            shared.handoff = Some(crate::handoff::HandoffPlane::start(&shared.config())?);
        }
        let shared = Arc::new(shared);
        let cfg = shared.config();
        let sockets = match inherited {
            Some(l) => l.fitted_to(&cfg)?,
            None => Listeners::bind(&cfg, cfg.worker_count())?,
        };
        let workers = sockets.clients.len();
        let addr = sockets.clients[0]
            .local_addr()
            .map_err(|e| SwitchError::Listen { addr: cfg.listen, error: e })?;
        let tls_addr = sockets.tls.first().and_then(|l| l.local_addr().ok());
        if let Some(a) = tls_addr {
            let _ = shared.https_port.set(a.port());
        }
        let admin_addr = sockets.admin.as_ref().and_then(|l| l.local_addr().ok());
        *shared.upgrade_sockets.lock() = Some(sockets.try_clone().map_err(SwitchError::Thread)?);
        let Listeners { clients: listeners, tls, admin: admin_listener, control } = sockets;
        let mut tls_listeners: Vec<Option<std::net::TcpListener>> = tls.into_iter().map(Some).collect();
        tls_listeners.resize_with(workers, || None);
        let control_file = cfg
            .control_socket
            .clone()
            .filter(|_| control.is_some())
            .map(|path| crate::control::socket::SocketFile::new(path, shared.clone()));
        let mut logs = Vec::new();
        for _ in 0..workers {
            logs.push(match &cfg.access_log {
                Some(path) => Some(AccessLog::new(open_sink(path).map_err(|source| {
                    SwitchError::AccessLog { path: path.display().to_string(), error: source }
                })?)),
                None => None,
            });
        }

        let mut threads = Vec::new();
        let rejecting = ConnectionLimit::new(MAX_REJECTING);
        for (i, (listener, log)) in listeners.into_iter().zip(logs).enumerate() {
            let listeners = (listener, tls_listeners[i].take());
            let shared = shared.clone();
            let rejecting = rejecting.clone();
            // Subscribed here, before `start` returns: a shutdown sent before the thread got
            // as far as subscribing would otherwise be the value it starts from, and
            // `changed()` would never fire (the worker kept accepting, `shutdown` hung).
            let shutdown = shared.shutdown_tx.subscribe();
            let t = std::thread::Builder::new()
                .name(format!("locus-switch-{i}"))
                .spawn(move || worker_thread(shared, listeners, log, rejecting, shutdown))
                .map_err(SwitchError::Thread)?;
            threads.push(t);
        }
        let control_shared = shared.clone();
        let t = std::thread::Builder::new()
            .name("locus-switch-control".into())
            .spawn(move || control_thread(control_shared, admin_listener, control))
            .map_err(SwitchError::Thread)?;
        threads.push(t);
        tracing::info!(%addr, workers, policy = shared.config().policy.name(), nodes = shared.nodes.len(), "switch started");
        Ok(SwitchServer { shared, addr, tls_addr, admin_addr, threads, _control_socket: control_file })
    }

    /// The client-facing address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Put `config` in force without closing a connection (SIGHUP, `locus ctl reload`): nodes
    /// added, removed (their requests finish) or re-weighted, the policy and its parameters,
    /// limits, health, HTTP and TLS settings. A configuration that does not check is refused
    /// with the error and the running one stays. See `reload.rs`.
    pub fn reload(&self, config: SwitchConfig) -> Result<crate::ReloadReport, crate::ReloadError> {
        self.shared.reload(config)
    }

    /// Where the runtime API's `reload` reads the configuration again (the file and flags the
    /// switch started with); without it `reload` is refused with that reason.
    pub fn set_config_source(&self, source: crate::state::ConfigSource) {
        let _ = self.shared.config_source.set(source);
    }

    /// What to do once this switch has handed its sockets over to a newer one (after it has
    /// stopped accepting): `locus switch` ends the process as SIGTERM does.
    pub fn on_handed_over(&self, exit: Box<dyn Fn() + Send + Sync>) {
        let _ = self.shared.on_handed_over.set(exit);
    }

    /// Whether this switch has handed its sockets over to a newer one (it is draining for
    /// good, and no longer the service's main process).
    pub fn handed_over(&self) -> bool {
        self.shared.handed_over.load(Relaxed)
    }

    /// The runtime API's socket, if configured (a binary upgrade asks it for the sockets).
    pub fn control_socket(&self) -> Option<std::path::PathBuf> {
        self.shared.config().control_socket.clone()
    }

    /// Carry out one runtime-API command line as `who` (what `locus ctl` sends): the JSON
    /// answer, `ok` true or false.
    pub fn control(&self, line: &str, who: &str) -> serde_json::Value {
        crate::control::socket::answer_line(&self.shared, line.as_bytes(), who)
    }

    /// The HTTPS address, if configured.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The admin address, if configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The status document served at `/locus/status`.
    pub fn status(&self) -> serde_json::Value {
        admin::status_json(&self.shared)
    }

    /// Whether the node named `name` is in the view.
    pub fn node_is_up(&self, name: &str) -> Option<bool> {
        let node = self.shared.nodes.find(name)?;
        Some(self.shared.dispatcher.is_up(node))
    }

    /// Client connections open now.
    pub fn connections(&self) -> usize {
        self.shared.connections.open()
    }

    /// Stop accepting, let in-flight requests finish (up to the drain timeout), close idle
    /// connections, and return when every thread has stopped.
    pub fn shutdown(self) {
        tracing::info!("switch shutting down");
        self.shared.shutting_down.store(true, Relaxed);
        self.shared.shutdown_tx.send_replace(true);
        for t in self.threads {
            let _ = t.join();
        }
        if let Some(plane) = &self.shared.handoff {
            plane.release_forwarder(self.shared.handed_over.load(Relaxed));
        }
        // Drained: the switch that took over from this one sees the connection end.
        self.shared.successor.lock().take();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime")
}

fn worker_thread(
    shared: Arc<Shared>,
    (listener, tls_listener): (std::net::TcpListener, Option<std::net::TcpListener>),
    log: Option<AccessLog>,
    rejecting: Arc<ConnectionLimit>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let rt = runtime();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let (listener, tls_listener) =
            match (TcpListener::from_std(listener), tls_listener.map(TcpListener::from_std).transpose()) {
                (Ok(l), Ok(t)) => (l, t),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::error!("worker cannot use its listener: {e}");
                    return;
                }
            };
        let worker = Rc::new(Worker::new(shared.clone(), log));
        crate::handoff::start_links(&worker, shutdown.clone());
        let sweeper = {
            let worker = worker.clone();
            tokio::task::spawn_local(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(500));
                loop {
                    tick.tick().await;
                    worker.pool.borrow_mut().sweep(Instant::now());
                    if let Some(log) = &worker.log {
                        log.borrow_mut().flush();
                    }
                }
            })
        };
        let acceptor = Acceptor { worker: worker.clone(), rejecting: rejecting.clone(), tls: None };
        match &tls_listener {
            None => acceptor.run(&listener, shutdown).await,
            Some(tls_listener) => {
                let tls = Acceptor { worker: worker.clone(), rejecting, tls: shared.tls.clone() };
                tokio::join!(acceptor.run(&listener, shutdown.clone()), tls.run(tls_listener, shutdown));
            }
        }
        drop(tls_listener);
        // Stop accepting and let the sessions finish, up to the drain timeout; the ones still
        // open then are closed with the worker's event loop.
        locus_io::drain(listener, &worker.sessions, shared.config().limits.drain_timeout()).await;
        sweeper.abort();
        if let Some(log) = &worker.log {
            log.borrow_mut().flush();
        }
    });
}

/// One worker's accept loop: what it keeps from one connection to the next.
struct Acceptor {
    worker: Rc<Worker>,
    /// Over-limit connections being answered 503, across workers (at most `MAX_REJECTING`).
    rejecting: Arc<ConnectionLimit>,
    /// On the TLS listener: its service (handshakes, counters).
    tls: Option<Arc<locus_tls::TlsService>>,
}

impl Acceptor {
    /// Accept on `listener` until `shutdown` turns true.
    async fn run(&self, listener: &TcpListener, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let shared = &self.worker.shared;
        // A TLS client could not read a cleartext 503: it is just closed.
        let mut shedding = Shedding::new(if self.tls.is_some() { Vec::new() } else { shed_answer() });
        let mut backoff = AcceptBackoff::new();
        loop {
            let accepted = tokio::select! {
                biased;
                _ = shutdown.changed() => break,
                r = listener.accept() => r,
            };
            // A failed accept may still yield a connection: one taken with the spare
            // descriptor once descriptors were free again.
            let (stream, peer) = match accepted {
                Ok(c) => c,
                Err(e) => match backoff.recover("worker", &mut shedding, listener, e).await {
                    AcceptRecovery::Admitted(stream, peer) => (stream, peer),
                    AcceptRecovery::Shed => {
                        shared.counters.shed_no_descriptors.fetch_add(1, Relaxed);
                        continue;
                    }
                    AcceptRecovery::AcceptAgain | AcceptRecovery::Paused => continue,
                },
            };
            shared.counters.accepted.fetch_add(1, Relaxed);
            let Some(stream) = shedding.admit(stream) else {
                shared.counters.shed_no_descriptors.fetch_add(1, Relaxed);
                continue;
            };
            self.admit(stream, peer, &shutdown);
        }
    }

    /// Serve `stream` unless `max_connections` are open: then answer it 503 (at most
    /// `MAX_REJECTING` at once across workers, past which it is just closed).
    fn admit(&self, stream: TcpStream, peer: SocketAddr, shutdown: &tokio::sync::watch::Receiver<bool>) {
        let shared = &self.worker.shared;
        // Held by the session until it ends, however it ends.
        let Some(slot) = shared.connections.claim() else {
            shared.counters.rejected_over_limit.fetch_add(1, Relaxed);
            // A TLS client could not read a cleartext 503: it is just closed.
            if self.tls.is_none()
                && let Some(refusing) = self.rejecting.claim()
            {
                tokio::task::spawn_local(async move {
                    refuse_over_limit(stream).await;
                    drop(refusing);
                });
            }
            return;
        };
        let (worker, shutdown) = (self.worker.clone(), shutdown.clone());
        match &self.tls {
            None => self.worker.sessions.spawn_local(serve(worker, stream, peer, shutdown, slot)),
            Some(tls) => {
                self.worker.sessions.spawn_local(serve_tls(worker, stream, peer, shutdown, slot, tls.clone()))
            }
        };
    }
}

/// Answer a connection over the limit with 503 and close it without reading a request.
async fn refuse_over_limit(mut stream: TcpStream) {
    let mut out = Vec::with_capacity(200);
    write_error_response(&mut out, 503, true);
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(&out).await?;
        stream.shutdown().await
    })
    .await;
}

/// Run the health checks and metrics polls of each node slot in service, starting them for
/// the slots a reload adds or brings back (a retired slot's end by themselves), until
/// shutdown; the tasks, to stop.
async fn watch_node_slots(
    shared: &Arc<Shared>,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut reloads = shared.nodes_changed.subscribe();
    let mut tasks: Vec<Vec<tokio::task::JoinHandle<()>>> = Vec::new();
    loop {
        let table = shared.nodes.all();
        tasks.resize_with(table.len(), Vec::new);
        for (i, info) in table.iter().enumerate() {
            let running = &mut tasks[i];
            if info.is_retired() || running.iter().any(|t| !t.is_finished()) {
                continue;
            }
            let node = locus_core::NodeId(i as u32);
            *running = vec![health::spawn_check(shared, node)];
            running.extend(crate::metrics_poll::spawn_poll(shared, node));
        }
        tokio::select! {
            _ = shutdown.wait_for(|&stop| stop) => return tasks.into_iter().flatten().collect(),
            changed = reloads.changed() => if changed.is_err() { return tasks.into_iter().flatten().collect() },
        }
    }
}

fn control_thread(
    shared: Arc<Shared>,
    admin_listener: Option<std::net::TcpListener>,
    control: Option<std::os::unix::net::UnixListener>,
) {
    let rt = runtime();
    rt.block_on(async move {
        let mut shutdown = shared.shutdown_tx.subscribe();
        let admin = admin_listener.map(|l| tokio::spawn(admin::serve(shared.clone(), l)));
        let control = control.map(|l| tokio::spawn(crate::control::socket::serve(shared.clone(), l)));
        let housekeeping = crate::handoff::spawn_housekeeping(shared.clone());
        let l4_policy = crate::handoff::spawn_l4_policy(shared.clone());
        let _discovery = crate::discovery::spawn(shared.clone()); // ends by itself at shutdown
        let node_tasks = watch_node_slots(&shared, &mut shutdown).await;
        for c in node_tasks {
            c.abort();
        }
        for h in housekeeping.into_iter().chain(l4_policy) {
            h.abort();
        }
        for a in admin.into_iter().chain(control) {
            a.abort();
        }
    });
}
