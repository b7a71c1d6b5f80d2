//! `Net`: where a lab's or benchmark's programs run — loopback, or a `LabNetwork` with a host
//! per role — with what the lab does on those hosts: addresses for servers, commands and
//! threads placed on a host, waiting for a server's address to be free, sweeping what a point
//! left behind, and the congestion control in use.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::error::RigError;
use crate::network::LabNetwork;
use crate::ports::free_port;
use crate::process::kill_processes_in_namespace;

/// Longest wait for a server's address to be free before it starts.
const PORT_FREE_LIMIT: Duration = Duration::from_secs(10);

/// The network servers and clients run on.
pub enum Net {
    /// Every role on 127.0.0.1, each server on a fresh port.
    Loopback,
    /// A host per role in network namespaces.
    Namespaces(LabNetwork),
}

impl Net {
    /// The address of a role's host.
    pub fn ip(&self, role: &str) -> Result<IpAddr, RigError> {
        match self {
            Net::Loopback => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            Net::Namespaces(lab) => Ok(IpAddr::V4(lab.addr(role)?)),
        }
    }

    /// An address for a new server of `role`: a free port on loopback, `port` in the lab.
    pub fn listen_addr(&self, role: &str, port: u16) -> Result<SocketAddr, RigError> {
        Ok(match self {
            Net::Loopback => SocketAddr::new(self.ip(role)?, free_port()?),
            Net::Namespaces(_) => SocketAddr::new(self.ip(role)?, port),
        })
    }

    /// The address clients use for the switch: the virtual IP in the lab (the switch owns
    /// it), a free loopback port otherwise.
    pub fn switch_addr(&self, port: u16) -> Result<SocketAddr, RigError> {
        Ok(match self {
            Net::Loopback => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), free_port()?),
            Net::Namespaces(lab) => SocketAddr::new(IpAddr::V4(lab.vip()), port),
        })
    }

    /// A command that will run on `role`'s host.
    pub fn command(&self, role: &str, program: &Path) -> Result<Command, RigError> {
        let mut cmd = Command::new(program);
        if let Net::Namespaces(lab) = self {
            lab.enter(role, &mut cmd)?;
        }
        Ok(cmd)
    }

    /// Run `f` on a thread placed on `role`'s host.
    pub fn on_host<T: Send, E: From<RigError> + Send>(
        &self,
        role: &str,
        f: impl FnOnce() -> Result<T, E> + Send,
    ) -> Result<T, E> {
        match self {
            Net::Namespaces(lab) => lab.on_host(role, f),
            Net::Loopback => std::thread::scope(|s| {
                s.spawn(f).join().unwrap_or_else(|_| {
                    Err(RigError::System {
                        call: format!("thread on {role}"),
                        error: std::io::Error::other("panicked"),
                    }
                    .into())
                })
            }),
        }
    }

    /// The namespace lab, if that is where this runs.
    pub fn lab(&self) -> Option<&LabNetwork> {
        match self {
            Net::Namespaces(lab) => Some(lab),
            Net::Loopback => None,
        }
    }

    /// Wait until nothing on `role`'s host listens where a server is to listen on `addrs`
    /// (the previous point's server may still be letting go: NGINX workers outlive their
    /// master by a moment); the kernel of that host is asked, not the process table. Loopback
    /// servers take fresh ports and need no wait.
    pub fn wait_until_free(&self, role: &str, addrs: &[SocketAddr]) -> Result<(), RigError> {
        if self.lab().is_none() {
            return Ok(());
        }
        self.on_host(role, || {
            addrs.iter().try_for_each(|&a| crate::network::listeners::wait_until_free(a, PORT_FREE_LIMIT))
        })
    }

    /// SIGKILL whatever still runs on the lab's hosts (a server's orphaned children), between
    /// points and before a point is tried again.
    pub fn sweep_hosts(&self) {
        if let Net::Namespaces(lab) = self {
            for h in lab.hosts() {
                kill_processes_in_namespace(&h.namespace);
            }
        }
    }

    /// The TCP congestion control connections here use: the lab's (see `congestion.rs`), or
    /// the machine's default on loopback.
    pub fn congestion_control(&self) -> String {
        match self {
            Net::Namespaces(lab) => lab.congestion_control().to_string(),
            Net::Loopback => std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
                .map_or_else(|_| "unknown".into(), |c| c.trim().to_string()),
        }
    }

    /// A short description for reports.
    pub fn describe(&self) -> &'static str {
        match self {
            Net::Loopback => "loopback",
            Net::Namespaces(_) => "namespaces",
        }
    }
}
