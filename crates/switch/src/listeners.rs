//! The sockets a switch serves on: one client listener per worker (a SO_REUSEPORT group), as
//! many HTTPS listeners or none, the admin listener and the control socket. Bound at start,
//! or handed over by the switch being upgraded; then fitted to the new configuration, which
//! can add a listener but not move one (a new address takes a restart).

use crate::config::SwitchConfig;
use crate::server::SwitchError;
use locus_io::BindRetry;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;

/// A switch's listening sockets.
pub struct Listeners {
    pub clients: Vec<TcpListener>,
    pub tls: Vec<TcpListener>,
    pub admin: Option<TcpListener>,
    pub control: Option<UnixListener>,
}

/// How many of each a handover carries, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListenerCounts {
    pub clients: usize,
    pub tls: usize,
    pub admin: bool,
    pub control: bool,
}

impl ListenerCounts {
    pub fn total(&self) -> usize {
        self.clients + self.tls + self.admin as usize + self.control as usize
    }
}

impl Listeners {
    /// Bind everything `cfg` names, `workers` client listeners (and HTTPS ones).
    pub fn bind(cfg: &SwitchConfig, workers: usize) -> Result<Listeners, SwitchError> {
        let clients = locus_io::bind_listeners(cfg.listen, workers, BindRetry::PATIENT)
            .map_err(|error| SwitchError::Listen { addr: cfg.listen, error })?;
        Ok(Listeners { clients, ..Listeners::bind_extras(cfg, workers)? })
    }

    /// Handed-over sockets, fitted to `cfg`: a listener it no longer names is closed (with a
    /// warning: its queued connections go with it), one it adds is bound; one whose address
    /// changed keeps serving the old address until a restart (warned).
    pub fn fitted_to(mut self, cfg: &SwitchConfig) -> Result<Listeners, SwitchError> {
        let moved = |what: &str, from: Option<std::net::SocketAddr>, to: Option<std::net::SocketAddr>| {
            if from.is_some() && to.is_some() && from != to {
                tracing::warn!(what, from = ?from, to = ?to, "upgrade: the handed-over socket keeps its address; a new one takes a restart");
            }
        };
        moved("listen", self.clients.first().and_then(|l| l.local_addr().ok()), Some(cfg.listen));
        let fresh = Listeners::bind_missing(cfg, &self)?;
        match cfg.listen_tls {
            Some(a) if !self.tls.is_empty() => moved("listen_tls", self.tls[0].local_addr().ok(), Some(a)),
            Some(_) => self.tls = fresh.tls,
            None if !self.tls.is_empty() => {
                tracing::warn!("upgrade: the new configuration has no listen_tls; the HTTPS listeners close");
                self.tls.clear();
            }
            None => {}
        }
        match (cfg.admin, &self.admin) {
            (Some(a), Some(l)) => moved("admin", l.local_addr().ok(), Some(a)),
            (Some(_), None) => self.admin = fresh.admin,
            (None, _) => self.admin = None,
        }
        match (&cfg.control_socket, &self.control) {
            (Some(_), Some(_)) => {}
            (Some(_), None) => self.control = fresh.control,
            (None, _) => self.control = None,
        }
        Ok(self)
    }

    /// The sockets `cfg` names that `have` lacks, bound now (client listeners never lack).
    fn bind_missing(cfg: &SwitchConfig, have: &Listeners) -> Result<Listeners, SwitchError> {
        let mut want = cfg.clone();
        if !have.tls.is_empty() {
            want.listen_tls = None;
        }
        if have.admin.is_some() {
            want.admin = None;
        }
        if have.control.is_some() {
            want.control_socket = None;
        }
        Listeners::bind_extras(&want, have.clients.len())
    }

    /// `bind` without the client listeners.
    fn bind_extras(cfg: &SwitchConfig, workers: usize) -> Result<Listeners, SwitchError> {
        let listen_err = |addr, error| SwitchError::Listen { addr, error };
        let tls = match cfg.listen_tls {
            Some(a) => {
                locus_io::bind_listeners(a, workers, BindRetry::PATIENT).map_err(|e| listen_err(a, e))?
            }
            None => Vec::new(),
        };
        let admin = match cfg.admin {
            Some(a) => Some(locus_io::bind_listener(a, false).map_err(|e| listen_err(a, e))?),
            None => None,
        };
        let control = match &cfg.control_socket {
            Some(path) => Some(
                crate::control::socket::bind(path)
                    .map_err(|error| SwitchError::ControlSocket { path: path.clone(), error })?,
            ),
            None => None,
        };
        Ok(Listeners { clients: Vec::new(), tls, admin, control })
    }

    /// Second descriptors of the same sockets (kept for a handover while the first serve).
    pub fn try_clone(&self) -> std::io::Result<Listeners> {
        Ok(Listeners {
            clients: self.clients.iter().map(TcpListener::try_clone).collect::<Result<_, _>>()?,
            tls: self.tls.iter().map(TcpListener::try_clone).collect::<Result<_, _>>()?,
            admin: self.admin.as_ref().map(TcpListener::try_clone).transpose()?,
            control: self.control.as_ref().map(UnixListener::try_clone).transpose()?,
        })
    }

    pub fn counts(&self) -> ListenerCounts {
        ListenerCounts {
            clients: self.clients.len(),
            tls: self.tls.len(),
            admin: self.admin.is_some(),
            control: self.control.is_some(),
        }
    }

    /// Every descriptor, in `ListenerCounts` order.
    pub fn raw_fds(&self) -> Vec<RawFd> {
        let mut fds: Vec<RawFd> = self.clients.iter().chain(&self.tls).map(AsRawFd::as_raw_fd).collect();
        fds.extend(self.admin.as_ref().map(AsRawFd::as_raw_fd));
        fds.extend(self.control.as_ref().map(AsRawFd::as_raw_fd));
        fds
    }

    /// The sockets of `fds`, received in `counts` order.
    pub fn from_fds(counts: ListenerCounts, fds: Vec<OwnedFd>) -> std::io::Result<Listeners> {
        if fds.len() != counts.total() {
            return Err(std::io::Error::other(format!(
                "{} descriptors received, {} announced",
                fds.len(),
                counts.total()
            )));
        }
        let mut fds = fds.into_iter();
        let mut tcp = |n: usize| -> std::io::Result<Vec<TcpListener>> {
            (0..n)
                .map(|_| {
                    let l = TcpListener::from(fds.next().expect("counted"));
                    l.set_nonblocking(true)?;
                    Ok(l)
                })
                .collect()
        };
        let clients = tcp(counts.clients)?;
        let tls = tcp(counts.tls)?;
        let admin = if counts.admin { tcp(1)?.pop() } else { None };
        let control = match counts.control {
            true => {
                let l = UnixListener::from(fds.next().expect("counted"));
                l.set_nonblocking(true)?;
                Some(l)
            }
            false => None,
        };
        Ok(Listeners { clients, tls, admin, control })
    }
}
