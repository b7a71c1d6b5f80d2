//! HAProxy in front of the nodes: `balance uri` + consistent hashing + `hash-balance-factor
//! 150`, round robin or least connections; its configuration and the server on the switch
//! host.

use std::net::SocketAddr;
use std::path::Path;

use crate::error::RigError;
use crate::network::Net;
use crate::programs::require_program;
use crate::servers::server::{Server, start};

/// How HAProxy picks a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HaproxyBalance {
    /// `balance uri`, `hash-type consistent`, `hash-balance-factor 150`.
    UriChashBounded,
    /// `balance roundrobin`.
    RoundRobin,
    /// `balance leastconn`.
    LeastConn,
}

impl HaproxyBalance {
    /// The backend lines.
    fn config(self) -> &'static str {
        match self {
            HaproxyBalance::UriChashBounded => {
                "  balance uri\n  hash-type consistent\n  hash-balance-factor 150\n"
            }
            HaproxyBalance::RoundRobin => "  balance roundrobin\n",
            HaproxyBalance::LeastConn => "  balance leastconn\n",
        }
    }
}

/// The HAProxy configuration for a keep-alive HTTP proxy in front of `nodes`.
pub fn haproxy_config(
    listen: SocketAddr,
    nodes: &[(String, SocketAddr)],
    balance: HaproxyBalance,
    threads: u32,
) -> String {
    let servers: String = nodes.iter().map(|(name, addr)| format!("  server {name} {addr}\n")).collect();
    // maxconn is bounded by the 20,000-descriptor limit of these machines (two per connection).
    format!(
        "global\n  nbthread {threads}\n  maxconn 9000\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  timeout http-keep-alive 60s\n  option http-keep-alive\n\
         frontend lab\n  bind {listen}\n  default_backend nodes\n\
         backend nodes\n{}{servers}",
        balance.config()
    )
}

/// HAProxy on the switch host.
pub fn haproxy(
    net: &Net,
    scratch: &Path,
    listen: SocketAddr,
    nodes: &[(String, SocketAddr)],
    balance: HaproxyBalance,
    threads: u32,
) -> Result<Server, RigError> {
    let bin = require_program("haproxy", "haproxy")?;
    let path = scratch.join("haproxy.cfg");
    std::fs::write(&path, haproxy_config(listen, nodes, balance, threads))
        .map_err(|e| RigError::io(&path, e))?;
    let mut cmd = net.command("switch", &bin)?;
    cmd.arg("-db").arg("-f").arg(&path);
    start(net, "switch", "haproxy", cmd, listen, None, scratch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<(String, SocketAddr)> {
        vec![
            ("node1".into(), "10.253.0.11:80".parse().unwrap()),
            ("node2".into(), "10.253.0.12:80".parse().unwrap()),
        ]
    }

    #[test]
    fn haproxy_configs_hash_the_uri_with_bounded_loads_or_go_round_robin() {
        let listen = "10.253.0.100:80".parse().unwrap();
        let c = haproxy_config(listen, &nodes(), HaproxyBalance::UriChashBounded, 2);
        for line in ["balance uri", "hash-type consistent", "hash-balance-factor 150", "nbthread 2"] {
            assert!(c.contains(line), "{line} missing:\n{c}");
        }
        assert!(c.contains("server node2 10.253.0.12:80") && c.contains("bind 10.253.0.100:80"));
        let rr = haproxy_config(listen, &nodes(), HaproxyBalance::RoundRobin, 1);
        assert!(rr.contains("balance roundrobin") && !rr.contains("hash-type"));
    }
}
