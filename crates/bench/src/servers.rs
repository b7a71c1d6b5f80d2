//! Where a benchmark's programs run and the servers it starts. `Net` is either loopback (every
//! role on 127.0.0.1, a fresh port each) or a namespace lab (each role its own host on a
//! bridge). Servers are child processes with their configuration in the scratch folder:
//! Locus nodes and switch (this very executable), HAProxy configured like the papers'
//! content-aware baseline, and NGINX as a tuned single-worker static server.

use crate::netns::NetnsLab;
use crate::procs::{ChildGuard, find_program, free_port};
use anyhow::{Context, bail};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The network the benchmark runs on.
pub enum Net {
    Loopback,
    Lab(NetnsLab),
}

impl Net {
    /// The address of a role's host.
    pub fn ip(&self, role: &str) -> anyhow::Result<IpAddr> {
        match self {
            Net::Loopback => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            Net::Lab(lab) => lab.addr(role),
        }
    }

    /// An address for a new server of `role`: a free port on loopback, `port` in the lab.
    pub fn listen_addr(&self, role: &str, port: u16) -> anyhow::Result<SocketAddr> {
        Ok(match self {
            Net::Loopback => SocketAddr::new(self.ip(role)?, free_port()?),
            Net::Lab(_) => SocketAddr::new(self.ip(role)?, port),
        })
    }

    /// A command that will run on `role`'s host.
    pub fn command(&self, role: &str, program: &Path) -> anyhow::Result<Command> {
        let mut cmd = Command::new(program);
        if let Net::Lab(lab) = self {
            lab.enter(role, &mut cmd)?;
        }
        Ok(cmd)
    }

    /// Run `f` on a thread placed on `role`'s host.
    pub fn on_host<T: Send>(
        &self,
        role: &str,
        f: impl FnOnce() -> anyhow::Result<T> + Send,
    ) -> anyhow::Result<T> {
        std::thread::scope(|s| {
            s.spawn(|| {
                if let Net::Lab(lab) = self {
                    lab.enter_thread(role)?;
                }
                f()
            })
            .join()
            .map_err(|_| anyhow::anyhow!("thread on {role} panicked"))?
        })
    }

    /// A short description for reports.
    pub fn describe(&self) -> &'static str {
        match self {
            Net::Loopback => "loopback",
            Net::Lab(_) => "namespaces",
        }
    }
}

/// A started server: its process and address.
pub struct Server {
    pub addr: SocketAddr,
    pub process: ChildGuard,
}

fn start(net: &Net, name: &str, cmd: Command, addr: SocketAddr, scratch: &Path) -> anyhow::Result<Server> {
    let log = scratch.join(format!("{name}.log"));
    let mut process = ChildGuard::spawn(name, cmd, &log)?;
    let limit = Duration::from_secs(10);
    let started = Instant::now();
    loop {
        process.check_running().with_context(|| format!("see {}", log.display()))?;
        let up = net.on_host("client", || {
            Ok(TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok())
        })?;
        if up {
            return Ok(Server { addr, process });
        }
        if started.elapsed() > limit {
            bail!("{name} did not start listening on {addr} within {limit:?}; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `locus node` serving `root` on `role`'s host.
pub fn locus_node(
    net: &Net,
    locus: &Path,
    scratch: &Path,
    role: &str,
    root: &Path,
    workers: u32,
) -> anyhow::Result<Server> {
    let addr = net.listen_addr(role, 80)?;
    let mut cmd = net.command(role, locus)?;
    cmd.arg("node").args(["--listen", &addr.to_string(), "--root"]).arg(root).args([
        "--name",
        role,
        "--workers",
        &workers.to_string(),
    ]);
    start(net, role, cmd, addr, scratch)
}

/// `locus switch` in proxy mode in front of `nodes`, on the switch host.
pub fn locus_switch(
    net: &Net,
    locus: &Path,
    scratch: &Path,
    nodes: &[SocketAddr],
    policy: &str,
    workers: u32,
    max_connections: usize,
) -> anyhow::Result<Server> {
    let addr = net.listen_addr("switch", 80)?;
    let mut cmd = net.command("switch", locus)?;
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
    start(net, "locus-switch", cmd, addr, scratch)
}

/// HAProxy with `balance uri`, `hash-type consistent`, `hash-balance-factor 150`, on the
/// switch host.
pub fn haproxy(net: &Net, scratch: &Path, nodes: &[SocketAddr], threads: u32) -> anyhow::Result<Server> {
    let bin = find_program("haproxy").context("haproxy not found (apt-get install haproxy)")?;
    let addr = net.listen_addr("switch", 81)?;
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
    let mut cmd = net.command("switch", &bin)?;
    cmd.arg("-db").arg("-f").arg(&path);
    start(net, "haproxy", cmd, addr, scratch)
}

/// NGINX with one worker process, sendfile and an open-file cache, serving `root` on `role`'s
/// host.
pub fn nginx(net: &Net, scratch: &Path, role: &str, root: &Path) -> anyhow::Result<Server> {
    let bin = find_program("nginx").context("nginx not found (apt-get install nginx)")?;
    let addr = net.listen_addr(role, 8080)?;
    let dir = scratch.join("nginx");
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
    let mut cmd = net.command(role, &bin)?;
    cmd.arg("-c").arg(&path).arg("-p").arg(&dir);
    start(net, "nginx", cmd, addr, scratch)
}
