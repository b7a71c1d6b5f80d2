//! `SwitchServer`: starts the switch — one thread per worker, each with a current-thread
//! runtime accepting on its own SO_REUSEPORT listener — plus a control thread for health
//! checks and the admin listener; and stops it gracefully (stop accepting, drain, exit).

use crate::access_log::{AccessLog, open_sink};
use crate::config::SwitchConfig;
use crate::forward::write_error_response;
use crate::open_files::{MAX_REJECTING, accept_failed, shed_answer};
use crate::session::serve;
use crate::state::Shared;
use crate::worker::Worker;
use crate::{admin, health};
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
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
}

/// A running switch.
pub struct SwitchServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    threads: Vec<JoinHandle<()>>,
}

fn bind_listener(addr: SocketAddr, reuse_port: bool) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket.into())
}

/// How often, and how far apart, the client-facing listener's bind is tried again while its
/// address is in use — NGINX's rule (5 × 500 ms): a switch restarted right after its
/// predecessor exited can find the address held for a moment by sockets still being torn down.
const LISTEN_RETRIES: u32 = 5;
const LISTEN_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// [`bind_listener`], tried again `retries` times `pause` apart while the address is in use.
fn bind_listener_patiently(
    addr: SocketAddr,
    reuse_port: bool,
    retries: u32,
    pause: Duration,
) -> std::io::Result<std::net::TcpListener> {
    let mut tries = 0;
    loop {
        match bind_listener(addr, reuse_port) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && tries < retries => {
                tries += 1;
                tracing::warn!(%addr, error = %e, "listen address in use; trying again ({tries}/{retries})");
                std::thread::sleep(pause);
            }
            other => return other,
        }
    }
}

impl SwitchServer {
    /// Validate `config`, raise the open-file limit and fit `max_connections` to it (see
    /// `open_files::plan`), bind every listener and start the threads.
    pub fn start(mut config: SwitchConfig) -> Result<SwitchServer, SwitchError> {
        config.validate()?;
        config.limits.max_connections = crate::open_files::connection_limit(&config)?;
        let workers = config.worker_count();
        let mut shared = Shared::new(config)?;
        if matches!(shared.config.mode, crate::Mode::Handoff | crate::Mode::L4) {
            shared.handoff = Some(crate::handoff::HandoffPlane::start(&shared.config)?);
        }
        let shared = Arc::new(shared);
        let cfg = &shared.config;
        let listen_err = |addr, source| SwitchError::Listen { addr, error: source };
        let first = bind_listener_patiently(cfg.listen, true, LISTEN_RETRIES, LISTEN_RETRY_PAUSE)
            .map_err(|e| listen_err(cfg.listen, e))?;
        let addr = first.local_addr().map_err(|e| listen_err(cfg.listen, e))?;
        let mut listeners = vec![first];
        for _ in 1..workers {
            listeners.push(bind_listener(addr, true).map_err(|e| listen_err(addr, e))?);
        }
        let admin_listener = match cfg.admin {
            Some(a) => Some(bind_listener(a, false).map_err(|e| listen_err(a, e))?),
            None => None,
        };
        let admin_addr = admin_listener.as_ref().and_then(|l| l.local_addr().ok());
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
        let rejecting = Arc::new(AtomicUsize::new(0));
        for (i, (listener, log)) in listeners.into_iter().zip(logs).enumerate() {
            let shared = shared.clone();
            let rejecting = rejecting.clone();
            // Subscribed here, before `start` returns: a shutdown sent before the thread got
            // as far as subscribing would otherwise be the value it starts from, and
            // `changed()` would never fire (the worker kept accepting, `shutdown` hung).
            let shutdown = shared.shutdown_tx.subscribe();
            let t = std::thread::Builder::new()
                .name(format!("locus-switch-{i}"))
                .spawn(move || worker_thread(shared, listener, log, rejecting, shutdown))
                .map_err(SwitchError::Thread)?;
            threads.push(t);
        }
        let control_shared = shared.clone();
        let t = std::thread::Builder::new()
            .name("locus-switch-control".into())
            .spawn(move || control_thread(control_shared, admin_listener))
            .map_err(SwitchError::Thread)?;
        threads.push(t);
        tracing::info!(%addr, workers, policy = shared.config.policy.name(), nodes = shared.nodes.len(), "switch started");
        Ok(SwitchServer { shared, addr, admin_addr, threads })
    }

    /// The client-facing address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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
        let i = self.shared.nodes.iter().position(|n| n.name == name)?;
        Some(self.shared.dispatcher.is_up(locus_core::NodeId(i as u32)))
    }

    /// Client connections open now.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Relaxed)
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
            plane.release_forwarder();
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime")
}

fn worker_thread(
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    log: Option<AccessLog>,
    rejecting: Arc<AtomicUsize>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let rt = runtime();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = match TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
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
        let max = shared.config.limits.max_connections;
        let mut shedding = locus_io::Shedding::new(shed_answer());
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
                Err(e) => match accept_failed(&shared, &mut shedding, &listener, e).await {
                    Some(c) => c,
                    None => continue,
                },
            };
            shared.counters.accepted.fetch_add(1, Relaxed);
            let Some(stream) = shedding.admit(stream) else {
                shared.counters.shed_no_descriptors.fetch_add(1, Relaxed);
                continue;
            };
            let open = shared.connections.fetch_add(1, Relaxed) + 1;
            if open > max {
                shared.connections.fetch_sub(1, Relaxed);
                shared.counters.rejected_over_limit.fetch_add(1, Relaxed);
                if rejecting.fetch_add(1, Relaxed) < MAX_REJECTING {
                    let rejecting = rejecting.clone();
                    tokio::task::spawn_local(async move {
                        refuse_over_limit(stream).await;
                        rejecting.fetch_sub(1, Relaxed);
                    });
                } else {
                    rejecting.fetch_sub(1, Relaxed);
                    drop(stream);
                }
                continue;
            }
            tokio::task::spawn_local(serve(worker.clone(), stream, peer, shutdown.clone()));
        }
        drop(listener);
        let deadline = Instant::now() + shared.config.limits.drain_timeout();
        while worker.active.get() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if worker.active.get() > 0 {
            tracing::warn!(open = worker.active.get(), "drain timeout: closing connections still open");
        }
        sweeper.abort();
        if let Some(log) = &worker.log {
            log.borrow_mut().flush();
        }
    });
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

fn control_thread(shared: Arc<Shared>, admin_listener: Option<std::net::TcpListener>) {
    let rt = runtime();
    rt.block_on(async move {
        let mut shutdown = shared.shutdown_tx.subscribe();
        let checks = health::spawn_checks(shared.clone());
        let admin = admin_listener.map(|l| tokio::spawn(admin::serve(shared.clone(), l)));
        let housekeeping = crate::handoff::spawn_housekeeping(shared.clone());
        let _ = shutdown.wait_for(|&stop| stop).await;
        for c in checks {
            c.abort();
        }
        if let Some(h) = housekeeping {
            h.abort();
        }
        if let Some(a) = admin {
            a.abort();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_port() -> std::net::TcpListener {
        std::net::TcpListener::bind("127.0.0.1:0").unwrap()
    }

    #[test]
    fn a_listen_address_freed_while_retrying_is_bound() {
        let holder = held_port();
        let addr = holder.local_addr().unwrap();
        let freer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(holder);
        });
        let bound = bind_listener_patiently(addr, true, 50, Duration::from_millis(20)).unwrap();
        assert_eq!(bound.local_addr().unwrap(), addr);
        freer.join().unwrap();
    }

    #[test]
    fn a_listen_address_held_past_the_retries_is_an_address_in_use_error() {
        let holder = held_port();
        let addr = holder.local_addr().unwrap();
        let err = bind_listener_patiently(addr, true, 2, Duration::from_millis(5)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
        drop(holder);
    }
}
