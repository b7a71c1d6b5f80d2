//! Servers started to be reloaded in place: HAProxy in master-worker mode (the listening
//! sockets passed from the old worker to the new; `expose-fd listeners` and `-x`) or as
//! plain processes each replacing the last with `-sf` (every one binding its own listeners),
//! and NGINX with a master process, in front of weighted nodes and configured from files the
//! caller rewrites between reloads (`start_server`, the rig's own start, runs any command on a
//! host and waits for it).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::RigError;
use crate::network::Net;
use crate::programs::require_program;
use crate::servers::server::{Server, start};
use crate::servers::third_party::{nginx_http_common, nginx_prefix};

/// A node behind a reloadable proxy: its name, address and weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedNode {
    pub name: String,
    pub addr: SocketAddr,
    pub weight: u32,
}

/// HAProxy's configuration for reloads: a keep-alive HTTP proxy on `listen`, weighted round
/// robin over `nodes`, `threads` threads, in master-worker mode if `master_worker`; with
/// `stats_socket`, an admin socket there with `expose-fd listeners` (a new process may take
/// the listening sockets from it).
pub fn haproxy_reloadable_config(
    listen: SocketAddr,
    nodes: &[WeightedNode],
    threads: u32,
    master_worker: bool,
    stats_socket: Option<&Path>,
) -> String {
    let mode = if master_worker { "  master-worker\n" } else { "" };
    let socket = match stats_socket {
        Some(path) => format!("  stats socket {} mode 600 level admin expose-fd listeners\n", path.display()),
        None => String::new(),
    };
    let servers: String =
        nodes.iter().map(|n| format!("  server {} {} weight {}\n", n.name, n.addr, n.weight)).collect();
    format!(
        "global\n{mode}  nbthread {threads}\n  maxconn 9000\n{socket}\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  timeout http-keep-alive 60s\n  option http-keep-alive\n\
         frontend lab\n  bind {listen}\n  default_backend nodes\n\
         backend nodes\n  balance roundrobin\n{servers}"
    )
}

/// HAProxy in master-worker mode (`-W -db`) on the switch host, reading `config` (written by
/// the caller), with `-x stats_socket`. `kill -USR2 <pid>` reloads: the master executes
/// itself again and its new worker takes the listening sockets from the old one over their
/// socket pair (HAProxy 2.6 does so in master-worker mode whatever the configuration says;
/// `expose-fd listeners` on the stats socket and `-x` are what its manual names for it).
pub fn haproxy_master_worker(
    net: &Net,
    scratch: &Path,
    config: &Path,
    listen: SocketAddr,
    stats_socket: &Path,
) -> Result<Server, RigError> {
    let bin = require_program("haproxy", "haproxy")?;
    let mut cmd = net.command("switch", &bin)?;
    cmd.arg("-W").arg("-db").arg("-f").arg(config).arg("-x").arg(stats_socket);
    start(net, "switch", "haproxy", cmd, listen, None, scratch)
}

/// The command of a plain HAProxy process (no master) on the switch host reading `config`,
/// in the foreground; with `finish`, it binds its own listeners (SO_REUSEPORT beside theirs)
/// and then tells those processes to stop accepting and finish (`-sf`): the reload HAProxy
/// had before master-worker mode, without socket transfer.
pub fn haproxy_replacing(net: &Net, config: &Path, finish: &[u32]) -> Result<Command, RigError> {
    let bin = require_program("haproxy", "haproxy")?;
    let mut cmd = net.command("switch", &bin)?;
    cmd.arg("-db").arg("-f").arg(config);
    if !finish.is_empty() {
        cmd.arg("-sf").args(finish.iter().map(u32::to_string));
    }
    Ok(cmd)
}

/// The NGINX configuration of a keep-alive reverse proxy on `listen` with a master process
/// and `workers` workers, weighted round robin over `nodes`; its pid file is `dir/nginx.pid`.
pub fn nginx_reloadable_config(
    dir: &Path,
    listen: SocketAddr,
    nodes: &[WeightedNode],
    workers: u32,
) -> String {
    let d = dir.display().to_string();
    let servers: String =
        nodes.iter().map(|n| format!("    server {} weight={};\n", n.addr, n.weight)).collect();
    format!(
        "user root;\nmaster_process on;\ndaemon off;\nworker_processes {workers};\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 8192; }}\n\
         http {{\n{}\
         \x20 upstream nodes {{\n{servers}    keepalive 256;\n    keepalive_requests 1000000;\n  }}\n\
         \x20 server {{\n    listen {listen};\n    location / {{\n      proxy_pass http://nodes;\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_set_header Host $host;\n    }}\n  }}\n}}\n",
        nginx_http_common(&d)
    )
}

/// Where a reloadable NGINX keeps its files: its prefix folder (`-p`), its configuration
/// (`-c`) and its pid file.
#[derive(Clone, Debug)]
pub struct NginxFiles {
    pub prefix: PathBuf,
    pub config: PathBuf,
    pub pid_file: PathBuf,
}

impl NginxFiles {
    /// The files of an NGINX whose scratch folder is `scratch` (the folder is made).
    pub fn in_scratch(scratch: &Path) -> Result<NginxFiles, RigError> {
        let prefix = nginx_prefix(scratch)?;
        Ok(NginxFiles { config: prefix.join("nginx.conf"), pid_file: prefix.join("nginx.pid"), prefix })
    }

    /// `nginx -c CONFIG -p PREFIX` followed by `args` (e.g. `-s reload`, `-t`).
    pub fn command(&self, net: &Net, args: &[&str]) -> Result<Command, RigError> {
        let bin = require_program("nginx", "nginx")?;
        let mut cmd = net.command("switch", &bin)?;
        cmd.arg("-c").arg(&self.config).arg("-p").arg(&self.prefix).args(args);
        Ok(cmd)
    }
}

/// NGINX with a master process on the switch host, reading `files.config` (written by the
/// caller).
pub fn nginx_reloadable(
    net: &Net,
    scratch: &Path,
    files: &NginxFiles,
    listen: SocketAddr,
) -> Result<Server, RigError> {
    let cmd = files.command(net, &[])?;
    start(net, "switch", "nginx", cmd, listen, None, scratch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes() -> Vec<WeightedNode> {
        vec![
            WeightedNode { name: "node1".into(), addr: "10.253.0.11:80".parse().unwrap(), weight: 1 },
            WeightedNode { name: "node2".into(), addr: "10.253.0.12:80".parse().unwrap(), weight: 3 },
        ]
    }

    #[test]
    fn haproxy_reload_config_weights_its_servers_and_exposes_the_listeners_when_asked() {
        let listen = "10.253.0.100:80".parse().unwrap();
        let sock = Path::new("/tmp/h.sock");
        let c = haproxy_reloadable_config(listen, &nodes(), 1, true, Some(sock));
        for line in [
            "  master-worker\n",
            "  stats socket /tmp/h.sock mode 600 level admin expose-fd listeners\n",
            "  balance roundrobin\n",
            "  server node2 10.253.0.12:80 weight 3\n",
        ] {
            assert!(c.contains(line), "{line} missing:\n{c}");
        }
        let plain = haproxy_reloadable_config(listen, &nodes(), 1, false, None);
        assert!(!plain.contains("stats socket") && !plain.contains("master-worker"), "{plain}");
    }

    #[test]
    fn nginx_reloadable_config_weights_its_upstreams_and_keeps_a_master() {
        let c = nginx_reloadable_config(Path::new("/tmp/n"), "10.253.0.100:80".parse().unwrap(), &nodes(), 1);
        for line in [
            "master_process on;",
            "pid /tmp/n/nginx.pid;",
            "server 10.253.0.12:80 weight=3;",
            "listen 10.253.0.100:80;",
        ] {
            assert!(c.contains(line), "{line} missing:\n{c}");
        }
    }
}
