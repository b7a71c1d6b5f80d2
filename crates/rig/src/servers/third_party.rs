//! The third-party servers the lab and the benchmarks compare Locus with, their configuration
//! templates and how they start: HAProxy in front of the nodes (`balance uri` + consistent
//! hashing with a bounded load, round robin, least connections or `random(2)`, with the knobs
//! an operator tunes: balance factor, `avalanche`, weights, per-server `maxconn` with a queue)
//! and NGINX as a keep-alive reverse proxy (`hash $request_uri consistent`, round robin, least
//! connections or `random two least_conn`) or as a static server with sendfile on a node's host;
//! each can listen with TLS instead (OpenSSL, the lab's certificate and shared ticket keys).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::error::RigError;
use crate::network::Net;
use crate::programs::require_program;
use crate::servers::server::{Server, start};
use crate::servers::tls_files::TlsFiles;

/// Where a proxy listens: an address, with TLS when `tls` is given.
#[derive(Clone, Copy, Debug)]
pub struct Listen<'a> {
    pub addr: SocketAddr,
    pub tls: Option<&'a TlsFiles>,
}

impl From<SocketAddr> for Listen<'_> {
    fn from(addr: SocketAddr) -> Self {
        Listen { addr, tls: None }
    }
}

/// How HAProxy picks a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HaproxyBalance {
    /// `balance uri`, `hash-type consistent`, `hash-balance-factor` (150 unless tuned).
    UriChashBounded,
    /// `balance roundrobin`.
    RoundRobin,
    /// `balance leastconn`.
    LeastConn,
    /// `balance random(2)`: the less loaded of two servers drawn at random.
    Random2,
}

/// The knobs of an HAProxy backend beyond its balance; `Default` is HAProxy's own defaults
/// with the lab's bounded-load factor (150).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HaproxyTuning {
    /// `hash-balance-factor` of a bounded-load hash (percent of the mean load; 100 < f).
    pub hash_balance_factor: u32,
    /// `hash-type consistent sdbm avalanche`: the key's hash mixed again before the ring.
    pub avalanche: bool,
    /// `weight` of every server (HAProxy's default is 1; a consistent-hash ring gets 16 points
    /// per unit of weight, so a higher weight spreads the keys more evenly).
    pub weight: Option<u32>,
    /// Per-server `maxconn`: requests beyond it wait in the backend's queue (`timeout queue`).
    pub maxconn: Option<u32>,
}

impl Default for HaproxyTuning {
    fn default() -> HaproxyTuning {
        HaproxyTuning { hash_balance_factor: 150, avalanche: false, weight: None, maxconn: None }
    }
}

impl HaproxyTuning {
    /// The settings that differ from the defaults, as `factor=125 avalanche weight=100` (empty
    /// when none does); only those that apply to `balance`.
    pub fn describe(&self, balance: HaproxyBalance) -> String {
        let d = HaproxyTuning::default();
        let mut parts = Vec::new();
        if balance == HaproxyBalance::UriChashBounded {
            if self.hash_balance_factor != d.hash_balance_factor {
                parts.push(format!("factor={}", self.hash_balance_factor));
            }
            if self.avalanche {
                parts.push("avalanche".to_string());
            }
        }
        if let Some(w) = self.weight {
            parts.push(format!("weight={w}"));
        }
        if let Some(m) = self.maxconn {
            parts.push(format!("maxconn={m}"));
        }
        parts.join(" ")
    }
}

impl HaproxyBalance {
    /// The backend lines.
    fn config(self, tuning: &HaproxyTuning) -> String {
        match self {
            HaproxyBalance::UriChashBounded => format!(
                "  balance uri\n  hash-type consistent{}\n  hash-balance-factor {}\n",
                // HAProxy 2.6 takes the modifier after the function: sdbm is its default.
                if tuning.avalanche { " sdbm avalanche" } else { "" },
                tuning.hash_balance_factor
            ),
            HaproxyBalance::RoundRobin => "  balance roundrobin\n".into(),
            HaproxyBalance::LeastConn => "  balance leastconn\n".into(),
            HaproxyBalance::Random2 => "  balance random(2)\n".into(),
        }
    }
}

/// The HAProxy configuration for a keep-alive HTTP proxy in front of `nodes`, listening with
/// TLS when `tls` is given.
pub fn haproxy_config(
    listen: Listen<'_>,
    nodes: &[(String, SocketAddr)],
    balance: HaproxyBalance,
    tuning: &HaproxyTuning,
    threads: u32,
) -> String {
    let mut server_options = String::new();
    if let Some(w) = tuning.weight {
        server_options.push_str(&format!(" weight {w}"));
    }
    if let Some(m) = tuning.maxconn {
        server_options.push_str(&format!(" maxconn {m}"));
    }
    let servers: String =
        nodes.iter().map(|(name, addr)| format!("  server {name} {addr}{server_options}\n")).collect();
    // A queued request waits as long as the load generator would (its timeout is at most 10 s).
    let queue = if tuning.maxconn.is_some() { "  timeout queue 10s\n" } else { "" };
    let (global_tls, bind_tls) = match listen.tls {
        Some(t) => (
            "  ssl-default-bind-options ssl-min-ver TLSv1.2\n  tune.ssl.cachesize 100000\n".to_string(),
            format!(
                " ssl crt {} alpn h2,http/1.1 tls-ticket-keys {}",
                t.bundle.display(),
                t.ticket_keys.display()
            ),
        ),
        None => (String::new(), String::new()),
    };
    // maxconn is bounded by the 20,000-descriptor limit of these machines (two per connection).
    format!(
        "global\n  nbthread {threads}\n  maxconn 9000\n{global_tls}\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  timeout http-keep-alive 60s\n  option http-keep-alive\n\
         frontend lab\n  bind {}{bind_tls}\n  default_backend nodes\n\
         backend nodes\n{}{queue}{servers}",
        listen.addr,
        balance.config(tuning)
    )
}

/// HAProxy on the switch host.
pub fn haproxy(
    net: &Net,
    scratch: &Path,
    listen: Listen<'_>,
    nodes: &[(String, SocketAddr)],
    balance: HaproxyBalance,
    tuning: &HaproxyTuning,
    threads: u32,
) -> Result<Server, RigError> {
    let bin = require_program("haproxy", "haproxy")?;
    let path = scratch.join("haproxy.cfg");
    std::fs::write(&path, haproxy_config(listen, nodes, balance, tuning, threads))
        .map_err(|e| RigError::io(&path, e))?;
    let mut cmd = net.command("switch", &bin)?;
    cmd.arg("-db").arg("-f").arg(&path);
    start(net, "switch", "haproxy", cmd, listen.addr, None, scratch)
}

/// Check an HAProxy configuration with `haproxy -c` before a run depends on it: the error
/// names the configuration and gives HAProxy's own message.
pub fn check_haproxy_config(
    scratch: &Path,
    balance: HaproxyBalance,
    tuning: &HaproxyTuning,
    threads: u32,
) -> Result<(), RigError> {
    let bin = require_program("haproxy", "haproxy")?;
    let path = scratch.join("haproxy-check.cfg");
    let nodes = [("node1".to_string(), SocketAddr::from(([127, 0, 0, 1], 1)))];
    let text = haproxy_config(SocketAddr::from(([127, 0, 0, 1], 2)).into(), &nodes, balance, tuning, threads);
    std::fs::write(&path, text).map_err(|e| RigError::io(&path, e))?;
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("-c").arg("-f").arg(&path);
    run_check(cmd, format!("haproxy -c ({balance:?} {})", tuning.describe(balance)))
}

/// Check an NGINX proxy configuration with `nginx -t`.
pub fn check_nginx_config(scratch: &Path, balance: NginxBalance, workers: u32) -> Result<(), RigError> {
    let bin = require_program("nginx", "nginx")?;
    let dir = nginx_prefix(&scratch.join("nginx-check"))?;
    let path = dir.join("nginx.conf");
    let nodes = [("node1".to_string(), SocketAddr::from(([127, 0, 0, 1], 1)))];
    let text =
        nginx_proxy_config(&dir, SocketAddr::from(([127, 0, 0, 1], 2)).into(), &nodes, balance, workers);
    std::fs::write(&path, text).map_err(|e| RigError::io(&path, e))?;
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("-t").arg("-c").arg(&path).arg("-p").arg(&dir);
    run_check(cmd, format!("nginx -t ({balance:?})"))
}

/// Run a configuration check; its stderr is the error when it fails.
fn run_check(mut cmd: std::process::Command, command: String) -> Result<(), RigError> {
    let out =
        cmd.output().map_err(|e| RigError::Command { command: command.clone(), message: e.to_string() })?;
    if out.status.success() {
        return Ok(());
    }
    let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(RigError::Command { command, message })
}

/// How NGINX picks an upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NginxBalance {
    /// `hash $request_uri consistent`.
    UriChash,
    /// The default round robin.
    RoundRobin,
    /// `least_conn`.
    LeastConn,
    /// `random two least_conn`: the server with fewer connections of two drawn at random.
    RandomTwoLeastConn,
}

/// The `http` block's common lines; temporary files under `dir`.
pub(super) fn nginx_http_common(dir: &str) -> String {
    format!(
        "  access_log off;\n  tcp_nodelay on;\n  keepalive_requests 1000000;\n  keepalive_timeout 60s;\n\
         \x20 default_type application/octet-stream;\n\
         \x20 client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n  fastcgi_temp_path {dir}/fastcgi;\n  uwsgi_temp_path {dir}/uwsgi;\n  scgi_temp_path {dir}/scgi;\n"
    )
}

/// A `server` block's `listen` lines: cleartext, or TLS with the certificate, a shared session
/// cache and the shared ticket key.
fn nginx_listen(listen: Listen<'_>) -> String {
    let addr = listen.addr;
    match listen.tls {
        None => format!("    listen {addr};\n"),
        Some(t) => format!(
            "    listen {addr} ssl http2;\n    ssl_certificate {};\n    ssl_certificate_key {};\n\
             \x20   ssl_protocols TLSv1.2 TLSv1.3;\n    ssl_session_cache shared:SSL:64m;\n\
             \x20   ssl_session_tickets on;\n    ssl_session_ticket_key {};\n",
            t.cert.display(),
            t.key.display(),
            t.ticket_key_nginx.display()
        ),
    }
}

/// The NGINX configuration of a reverse proxy with keep-alive connections to `nodes`,
/// listening with TLS when `tls` is given.
pub fn nginx_proxy_config(
    dir: &Path,
    listen: Listen<'_>,
    nodes: &[(String, SocketAddr)],
    balance: NginxBalance,
    workers: u32,
) -> String {
    let d = dir.display().to_string();
    let hash = match balance {
        NginxBalance::UriChash => "    hash $request_uri consistent;\n",
        NginxBalance::RoundRobin => "",
        NginxBalance::LeastConn => "    least_conn;\n",
        NginxBalance::RandomTwoLeastConn => "    random two least_conn;\n",
    };
    let servers: String = nodes.iter().map(|(_, addr)| format!("    server {addr};\n")).collect();
    format!(
        "user root;\nmaster_process on;\ndaemon off;\nworker_processes {workers};\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 8192; }}\n\
         http {{\n{}\
         \x20 upstream nodes {{\n{hash}{servers}    keepalive 256;\n    keepalive_requests 1000000;\n  }}\n\
         \x20 server {{\n{}    location / {{\n      proxy_pass http://nodes;\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_set_header Host $host;\n      proxy_buffers 32 16k;\n      proxy_max_temp_file_size 0;\n    }}\n  }}\n}}\n",
        nginx_http_common(&d),
        nginx_listen(listen)
    )
}

/// NGINX as a keep-alive reverse proxy on the switch host.
pub fn nginx_proxy(
    net: &Net,
    scratch: &Path,
    listen: Listen<'_>,
    nodes: &[(String, SocketAddr)],
    balance: NginxBalance,
    workers: u32,
) -> Result<Server, RigError> {
    let bin = require_program("nginx", "nginx")?;
    let dir = nginx_prefix(scratch)?;
    let path = dir.join("nginx.conf");
    std::fs::write(&path, nginx_proxy_config(&dir, listen, nodes, balance, workers))
        .map_err(|e| RigError::io(&path, e))?;
    let mut cmd = net.command("switch", &bin)?;
    cmd.arg("-c").arg(&path).arg("-p").arg(&dir);
    start(net, "switch", "nginx", cmd, listen.addr, None, scratch)
}

/// NGINX's folder in `scratch`, made and given as an absolute path: NGINX takes a relative
/// `-c` and the relative paths in its configuration from its prefix (`-p`), not from the
/// working directory, so a relative scratch folder (`--out lab-out/…`) would be doubled.
pub(super) fn nginx_prefix(scratch: &Path) -> Result<PathBuf, RigError> {
    let dir = std::path::absolute(scratch.join("nginx")).map_err(|e| RigError::io(scratch, e))?;
    std::fs::create_dir_all(&dir).map_err(|e| RigError::io(&dir, e))?;
    Ok(dir)
}

/// NGINX with one worker process, sendfile and an open-file cache, serving `root` on `role`'s
/// host (port 8080 in the lab, 8443 with TLS).
pub fn nginx_static(
    net: &Net,
    scratch: &Path,
    role: &str,
    root: &Path,
    tls: Option<&TlsFiles>,
) -> Result<Server, RigError> {
    let bin = require_program("nginx", "nginx")?;
    let addr = net.listen_addr(role, if tls.is_some() { 8443 } else { 8080 })?;
    let dir = nginx_prefix(scratch)?;
    let root = std::path::absolute(root).map_err(|e| RigError::io(root, e))?;
    let d = dir.display().to_string();
    let config = format!(
        "master_process off;\ndaemon off;\nworker_processes 1;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 16384; }}\n\
         http {{\n{}  sendfile on;\n  tcp_nopush on;\n  open_file_cache max=10000 inactive=60s;\n\
         \x20 server {{\n{}    root {};\n  }}\n}}\n",
        nginx_http_common(&d),
        nginx_listen(Listen { addr, tls }),
        root.display()
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, config).map_err(|e| RigError::io(&path, e))?;
    let mut cmd = net.command(role, &bin)?;
    cmd.arg("-c").arg(&path).arg("-p").arg(&dir);
    start(net, role, "nginx", cmd, addr, None, scratch)
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
        let listen: SocketAddr = "10.253.0.100:80".parse().unwrap();
        let c = haproxy_config(
            listen.into(),
            &nodes(),
            HaproxyBalance::UriChashBounded,
            &HaproxyTuning::default(),
            2,
        );
        for line in ["balance uri", "hash-type consistent\n", "hash-balance-factor 150", "nbthread 2"] {
            assert!(c.contains(line), "{line} missing:\n{c}");
        }
        assert!(c.contains("server node2 10.253.0.12:80\n") && c.contains("bind 10.253.0.100:80"));
        assert!(!c.contains("timeout queue"), "no queue without maxconn");
        let rr =
            haproxy_config(listen.into(), &nodes(), HaproxyBalance::RoundRobin, &HaproxyTuning::default(), 1);
        assert!(rr.contains("balance roundrobin") && !rr.contains("hash-type"));
    }

    #[test]
    fn haproxy_tuning_sets_the_factor_avalanche_weights_and_a_queue_and_describes_what_differs() {
        let listen: SocketAddr = "10.253.0.100:80".parse().unwrap();
        let t =
            HaproxyTuning { hash_balance_factor: 125, avalanche: true, weight: Some(100), maxconn: Some(8) };
        let c = haproxy_config(listen.into(), &nodes(), HaproxyBalance::UriChashBounded, &t, 2);
        for line in [
            "hash-type consistent sdbm avalanche\n",
            "hash-balance-factor 125\n",
            "server node1 10.253.0.11:80 weight 100 maxconn 8\n",
            "timeout queue 10s",
        ] {
            assert!(c.contains(line), "{line} missing:\n{c}");
        }
        assert_eq!(t.describe(HaproxyBalance::UriChashBounded), "factor=125 avalanche weight=100 maxconn=8");
        assert_eq!(
            t.describe(HaproxyBalance::LeastConn),
            "weight=100 maxconn=8",
            "no hash knobs off the hash"
        );
        assert_eq!(HaproxyTuning::default().describe(HaproxyBalance::UriChashBounded), "");
        let r =
            haproxy_config(listen.into(), &nodes(), HaproxyBalance::Random2, &HaproxyTuning::default(), 2);
        assert!(r.contains("balance random(2)\n"), "{r}");
    }

    #[test]
    fn nginx_proxy_keeps_upstream_connections_alive_and_hashes_the_uri() {
        let c = nginx_proxy_config(
            Path::new("/tmp/x"),
            SocketAddr::from(([10, 253, 0, 100], 80)).into(),
            &nodes(),
            NginxBalance::UriChash,
            2,
        );
        for line in [
            "hash $request_uri consistent;",
            "keepalive 256;",
            "proxy_http_version 1.1;",
            "proxy_set_header Connection \"\";",
            "server 10.253.0.11:80;",
            "worker_processes 2;",
        ] {
            assert!(c.contains(line), "{line} missing:\n{c}");
        }
        let rr = nginx_proxy_config(
            Path::new("/tmp/x"),
            SocketAddr::from(([10, 253, 0, 100], 80)).into(),
            &nodes(),
            NginxBalance::RoundRobin,
            1,
        );
        assert!(!rr.contains("hash "));
        let p2 = nginx_proxy_config(
            Path::new("/tmp/x"),
            SocketAddr::from(([10, 253, 0, 100], 80)).into(),
            &nodes(),
            NginxBalance::RandomTwoLeastConn,
            1,
        );
        assert!(p2.contains("    random two least_conn;\n"), "{p2}");
    }
}
