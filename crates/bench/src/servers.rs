//! The servers a benchmark starts, each as a child process on a loopback port with its
//! configuration written into the benchmark's scratch folder: Locus nodes and switch (this
//! very executable), HAProxy configured like the papers' content-aware baseline, and NGINX
//! as a tuned single-worker static server.

use crate::procs::{ChildGuard, find_program, free_port, wait_for_port};
use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A started server: its process and address.
pub struct Server {
    pub addr: SocketAddr,
    pub process: ChildGuard,
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn start(name: &str, cmd: Command, addr: SocketAddr, scratch: &Path) -> anyhow::Result<Server> {
    let log = scratch.join(format!("{name}.log"));
    let mut process = ChildGuard::spawn(name, cmd, &log)?;
    wait_for_port(addr, &mut process, Duration::from_secs(10))
        .with_context(|| format!("see {}", log.display()))?;
    Ok(Server { addr, process })
}

/// `locus node` serving `root`.
pub fn locus_node(locus: &Path, scratch: &Path, name: &str, root: &Path, workers: u32) -> anyhow::Result<Server> {
    let addr = loopback(free_port()?);
    let mut cmd = Command::new(locus);
    cmd.arg("node")
        .args(["--listen", &addr.to_string(), "--root"])
        .arg(root)
        .args(["--name", name, "--workers", &workers.to_string()]);
    start(name, cmd, addr, scratch)
}

/// `locus switch` in proxy mode in front of `nodes`.
pub fn locus_switch(
    locus: &Path,
    scratch: &Path,
    nodes: &[SocketAddr],
    policy: &str,
    workers: u32,
    max_connections: usize,
) -> anyhow::Result<Server> {
    let addr = loopback(free_port()?);
    let mut cmd = Command::new(locus);
    cmd.arg("switch").args([
        "--listen",
        &addr.to_string(),
        "--policy",
        policy,
        "--workers",
        &workers.to_string(),
        "--max-connections",
        &max_connections.to_string(),
    ]);
    for (i, n) in nodes.iter().enumerate() {
        cmd.args(["--node", &format!("node{}={n}", i + 1)]);
    }
    start("locus-switch", cmd, addr, scratch)
}

/// HAProxy with `balance uri`, `hash-type consistent`, `hash-balance-factor 150`.
pub fn haproxy(scratch: &Path, nodes: &[SocketAddr], threads: u32) -> anyhow::Result<Server> {
    let bin = find_program("haproxy").context("haproxy not found (apt-get install haproxy)")?;
    let addr = loopback(free_port()?);
    let servers: String =
        nodes.iter().enumerate().map(|(i, n)| format!("  server node{} {n}\n", i + 1)).collect();
    // maxconn is bounded by the 20,000-descriptor limit of this machine (two per connection).
    let config = format!(
        "global\n  nbthread {threads}\n  maxconn 9000\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  option http-keep-alive\n\
         frontend bench\n  bind {addr}\n  default_backend nodes\n\
         backend nodes\n  balance uri\n  hash-type consistent\n  hash-balance-factor 150\n{servers}"
    );
    let path = scratch.join("haproxy.cfg");
    std::fs::write(&path, config)?;
    let mut cmd = Command::new(bin);
    cmd.arg("-db").arg("-f").arg(&path);
    start("haproxy", cmd, addr, scratch)
}

/// NGINX with one worker process, sendfile and an open-file cache, serving `root`.
pub fn nginx(scratch: &Path, root: &Path) -> anyhow::Result<Server> {
    let bin = find_program("nginx").context("nginx not found (apt-get install nginx)")?;
    let addr = loopback(free_port()?);
    let dir: PathBuf = scratch.join("nginx");
    std::fs::create_dir_all(&dir)?;
    let d = dir.display();
    let config = format!(
        "master_process off;\ndaemon off;\nworker_processes 1;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 16384; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  tcp_nodelay on;\n  keepalive_requests 1000000;\n  keepalive_timeout 60s;\n\
         \x20 open_file_cache max=10000 inactive=60s;\n  default_type application/octet-stream;\n\
         \x20 client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         \x20 server {{\n    listen {addr};\n    root {};\n  }}\n}}\n",
        root.display()
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, config)?;
    let mut cmd = Command::new(bin);
    cmd.arg("-c").arg(&path).arg("-p").arg(&dir);
    start("nginx", cmd, addr, scratch)
}
