//! The TCP congestion control of a lab's hosts, set without touching the machine: a
//! per-route `congctl` on every host's LAN route (the kernel then gives that algorithm to both
//! ends of every lab connection, whatever the machine's default or allowed list), checked by a
//! probe connection that reads `TCP_CONGESTION` on both ends. Where no way works, the lab runs
//! with what the namespaces have and says so.

use std::fmt;
use std::net::{TcpListener, TcpStream};

use serde::Serialize;

use crate::error::RigError;
use crate::network::topology::{LAN_PREFIX_LEN, LabNetwork, ip};

/// The congestion control a lab's connections use, and the one it asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CongestionControl {
    /// What the lab asked for (`cubic` unless a bench chose another).
    pub wanted: String,
    /// What a probe connection between two lab hosts got, on both ends.
    pub used: String,
    /// Why `used` differs from `wanted`, when it does.
    pub note: Option<String>,
}

impl CongestionControl {
    /// Whether the lab got what it asked for.
    pub fn as_wanted(&self) -> bool {
        self.wanted == self.used
    }
}

impl fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.note {
            None => write!(f, "{}", self.used),
            Some(note) => write!(f, "{} ({} could not be set: {note})", self.used, self.wanted),
        }
    }
}

/// The algorithms the kernel has loaded, for error messages.
fn available() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The congestion control of a connected socket.
fn of_socket(stream: &TcpStream) -> Result<String, RigError> {
    let name = socket2::SockRef::from(stream)
        .tcp_congestion()
        .map_err(|e| RigError::system("getsockopt(TCP_CONGESTION)", e))?;
    Ok(String::from_utf8_lossy(&name).trim_end_matches('\0').to_string())
}

impl LabNetwork {
    /// Give every lab connection the TCP congestion control `name`, through a per-route
    /// `congctl` on each host's LAN route, and check it with a probe connection. Nothing of
    /// the machine changes: a namespace may only make an algorithm of the machine's allowed
    /// list its default, but a route may name any the kernel has. An algorithm the kernel
    /// lacks, or a probe that got another, is an error (the lab keeps what it had).
    pub fn set_congestion_control(&self, name: &str) -> Result<(), RigError> {
        let refused = |message: String| RigError::CongestionControl {
            name: name.to_string(),
            message,
            available: available(),
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(refused("not an algorithm name".into()));
        }
        for h in self.hosts() {
            let subnet = format!("{}/{LAN_PREFIX_LEN}", self.lan_subnet());
            let src = h.addr.to_string();
            let args = [
                "-n",
                &h.namespace,
                "route",
                "replace",
                &subnet,
                "dev",
                "eth0",
                "proto",
                "kernel",
                "scope",
                "link",
                "src",
                &src,
                "congctl",
                name,
            ];
            ip(&args).map_err(|e| refused(e.to_string()))?;
        }
        let used = self.probe_congestion_control()?;
        if used != name {
            return Err(refused(format!("the routes name it, but a probe connection got `{used}`")));
        }
        self.record_congestion_control(CongestionControl { wanted: name.into(), used, note: None });
        Ok(())
    }

    /// Like [`LabNetwork::set_congestion_control`], but a lab that cannot have `name` runs with
    /// what its namespaces have, and [`LabNetwork::congestion_control`] says why.
    pub(crate) fn prefer_congestion_control(&self, name: &str) -> Result<(), RigError> {
        match self.set_congestion_control(name) {
            Ok(()) => Ok(()),
            Err(RigError::CongestionControl { message, .. }) => {
                let used = self.probe_congestion_control()?;
                self.record_congestion_control(CongestionControl {
                    wanted: name.into(),
                    used,
                    note: Some(message),
                });
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The congestion control of a connection from the client host to the switch host, read
    /// on both ends; an error if the two ends differ.
    pub fn probe_congestion_control(&self) -> Result<String, RigError> {
        let switch = self.addr("switch")?;
        let listener = self.on_host("switch", || {
            TcpListener::bind((switch, 0))
                .map_err(|e| RigError::system("probe listener in the switch host", e))
        })?;
        let port = listener.local_addr().map_err(|e| RigError::system("probe listener address", e))?.port();
        let client = self.on_host("client", || {
            TcpStream::connect((switch, port))
                .map_err(|e| RigError::system("probe connection from the client", e))
        })?;
        let (server, _) = listener.accept().map_err(|e| RigError::system("probe accept", e))?;
        let (active, passive) = (of_socket(&client)?, of_socket(&server)?);
        if active != passive {
            return Err(RigError::CongestionControl {
                name: active.clone(),
                message: format!("the probe's two ends differ: client {active}, switch {passive}"),
                available: available(),
            });
        }
        Ok(active)
    }
}
