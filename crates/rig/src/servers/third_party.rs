//! The third-party servers the lab and the benchmarks compare Locus with, their configuration
//! templates and how they start: HAProxy in front of the nodes (`balance uri` + consistent
//! hashing + `hash-balance-factor 150`, round robin or least connections) and NGINX as a
//! keep-alive reverse proxy (`hash $request_uri consistent`, round robin or least connections)
//! or as a static server with sendfile on a node's host.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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

/// How NGINX picks an upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NginxBalance {
    /// `hash $request_uri consistent`.
    UriChash,
    /// The default round robin.
    RoundRobin,
    /// `least_conn`.
    LeastConn,
}

/// The `http` block's common lines; temporary files under `dir`.
fn nginx_http_common(dir: &str) -> String {
    format!(
        "  access_log off;\n  tcp_nodelay on;\n  keepalive_requests 1000000;\n  keepalive_timeout 60s;\n\
         \x20 default_type application/octet-stream;\n\
         \x20 client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n  fastcgi_temp_path {dir}/fastcgi;\n  uwsgi_temp_path {dir}/uwsgi;\n  scgi_temp_path {dir}/scgi;\n"
    )
}

/// The NGINX configuration of a reverse proxy with keep-alive connections to `nodes`.
pub fn nginx_proxy_config(
    dir: &Path,
    listen: SocketAddr,
    nodes: &[(String, SocketAddr)],
    balance: NginxBalance,
    workers: u32,
) -> String {
    let d = dir.display().to_string();
    let hash = match balance {
        NginxBalance::UriChash => "    hash $request_uri consistent;\n",
        NginxBalance::RoundRobin => "",
        NginxBalance::LeastConn => "    least_conn;\n",
    };
    let servers: String = nodes.iter().map(|(_, addr)| format!("    server {addr};\n")).collect();
    format!(
        "user root;\nmaster_process on;\ndaemon off;\nworker_processes {workers};\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 8192; }}\n\
         http {{\n{}\
         \x20 upstream nodes {{\n{hash}{servers}    keepalive 256;\n    keepalive_requests 1000000;\n  }}\n\
         \x20 server {{\n    listen {listen};\n    location / {{\n      proxy_pass http://nodes;\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_set_header Host $host;\n      proxy_buffers 32 16k;\n      proxy_max_temp_file_size 0;\n    }}\n  }}\n}}\n",
        nginx_http_common(&d)
    )
}

/// NGINX as a keep-alive reverse proxy on the switch host.
pub fn nginx_proxy(
    net: &Net,
    scratch: &Path,
    listen: SocketAddr,
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
    start(net, "switch", "nginx", cmd, listen, None, scratch)
}

/// NGINX's folder in `scratch`, made and given as an absolute path: NGINX takes a relative
/// `-c` and the relative paths in its configuration from its prefix (`-p`), not from the
/// working directory, so a relative scratch folder (`--out lab-out/…`) would be doubled.
fn nginx_prefix(scratch: &Path) -> Result<PathBuf, RigError> {
    let dir = std::path::absolute(scratch.join("nginx")).map_err(|e| RigError::io(scratch, e))?;
    std::fs::create_dir_all(&dir).map_err(|e| RigError::io(&dir, e))?;
    Ok(dir)
}

/// NGINX with one worker process, sendfile and an open-file cache, serving `root` on `role`'s
/// host (port 8080 in the lab).
pub fn nginx_static(net: &Net, scratch: &Path, role: &str, root: &Path) -> Result<Server, RigError> {
    let bin = require_program("nginx", "nginx")?;
    let addr = net.listen_addr(role, 8080)?;
    let dir = nginx_prefix(scratch)?;
    let root = std::path::absolute(root).map_err(|e| RigError::io(root, e))?;
    let d = dir.display().to_string();
    let config = format!(
        "master_process off;\ndaemon off;\nworker_processes 1;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 16384; }}\n\
         http {{\n{}  sendfile on;\n  tcp_nopush on;\n  open_file_cache max=10000 inactive=60s;\n\
         \x20 server {{\n    listen {addr};\n    root {};\n  }}\n}}\n",
        nginx_http_common(&d),
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
        let listen = "10.253.0.100:80".parse().unwrap();
        let c = haproxy_config(listen, &nodes(), HaproxyBalance::UriChashBounded, 2);
        for line in ["balance uri", "hash-type consistent", "hash-balance-factor 150", "nbthread 2"] {
            assert!(c.contains(line), "{line} missing:\n{c}");
        }
        assert!(c.contains("server node2 10.253.0.12:80") && c.contains("bind 10.253.0.100:80"));
        let rr = haproxy_config(listen, &nodes(), HaproxyBalance::RoundRobin, 1);
        assert!(rr.contains("balance roundrobin") && !rr.contains("hash-type"));
    }

    #[test]
    fn nginx_proxy_keeps_upstream_connections_alive_and_hashes_the_uri() {
        let c = nginx_proxy_config(
            Path::new("/tmp/x"),
            "10.253.0.100:80".parse().unwrap(),
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
            "10.253.0.100:80".parse().unwrap(),
            &nodes(),
            NginxBalance::RoundRobin,
            1,
        );
        assert!(!rr.contains("hash "));
    }
}
