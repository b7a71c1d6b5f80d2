//! The servers `locus bench reload` reloads and upgrades under load, started on a fresh lab
//! cluster: the Locus switch (proxy, splice, handoff, or HTTPS in proxy mode) from a file it
//! re-reads on SIGHUP and hands its sockets on from (`--upgrade-from`); HAProxy in
//! master-worker mode, its sockets passed on (USR2), and as processes that each bind anew
//! and replace the last (`-sf`); NGINX with a master process,
//! daemonized as in production (`-s reload`, and USR2, WINCH, QUIT for a binary upgrade).
//! Every reload rewrites the configuration with the two nodes' weights swapped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use locus_rig::servers::{self, NginxFiles, WeightedNode, start_server};
use locus_rig::{ChildGuard, Net, give_open_files};

use super::cluster::Cluster;
use super::draining::{DrainReport, Draining};
use super::pid_guard::PidGuard;

/// What is reloaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The Locus switch in a mode: proxy, splice, handoff, or `tls` (HTTPS, proxy mode).
    Locus(&'static str),
    /// HAProxy, master-worker, the listening sockets passed to the new worker.
    HaproxyTransfer,
    /// HAProxy without a master: every reload a new process that binds its own listeners
    /// and has the old one finish (`-sf`); HAProxy 2.6 in master-worker mode always passes the
    /// sockets on.
    HaproxyNoTransfer,
    Nginx,
}

/// Every subject, in the default order.
pub const SUBJECTS: [&str; 7] =
    ["locus-proxy", "locus-splice", "locus-handoff", "locus-tls", "haproxy-transfer", "haproxy-sf", "nginx"];

impl Subject {
    /// The subject a name of [`SUBJECTS`] names.
    pub fn from_name(name: &str) -> anyhow::Result<Subject> {
        Ok(match name {
            "locus-proxy" => Subject::Locus("proxy"),
            "locus-splice" => Subject::Locus("splice"),
            "locus-handoff" => Subject::Locus("handoff"),
            "locus-tls" => Subject::Locus("tls"),
            "haproxy-transfer" => Subject::HaproxyTransfer,
            "haproxy-sf" => Subject::HaproxyNoTransfer,
            "nginx" => Subject::Nginx,
            _ => bail!("unknown server {name:?} (one of {})", SUBJECTS.join(", ")),
        })
    }

    /// The row's `server` and `mode`.
    pub fn labels(self) -> (&'static str, &'static str) {
        match self {
            Subject::Locus(mode) => ("locus", mode),
            Subject::HaproxyTransfer => ("haproxy", "master-worker (socket transfer)"),
            Subject::HaproxyNoTransfer => ("haproxy", "-sf (new listeners)"),
            Subject::Nginx => ("nginx", "master"),
        }
    }

    /// Whether clients speak HTTPS to it.
    pub fn tls(self) -> bool {
        self == Subject::Locus("tls")
    }
}

/// The two configurations reloads alternate between: the nodes' weights 1 and 2, or 2 and 1.
fn weighted(cluster: &Cluster, flip: bool) -> Vec<WeightedNode> {
    cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| WeightedNode {
            name: n.name.clone(),
            addr: n.addr,
            weight: if (i % 2 == 0) != flip { 1 } else { 2 },
        })
        .collect()
}

/// Write `text` to `path` whole (a new file renamed over the old), as a deployment does.
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let fresh = path.with_extension("new");
    std::fs::write(&fresh, text).with_context(|| format!("writing {}", fresh.display()))?;
    std::fs::rename(&fresh, path).with_context(|| format!("renaming to {}", path.display()))
}

/// Send `signal` to `pid`.
pub(super) fn signal(pid: u32, signal: libc::c_int) -> anyhow::Result<()> {
    // SAFETY: kill with a pid of a process this bench started (or adopted from a pid file).
    if unsafe { libc::kill(pid as i32, signal) } != 0 {
        bail!("kill({pid}, {signal}): {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// What one binary upgrade took.
#[derive(Clone, Copy, Debug, Default)]
pub struct UpgradeReport {
    /// Locus: takeovers the running switch refused (its predecessor still draining).
    pub retries: u32,
}

/// A started subject.
pub enum Running {
    Locus(LocusRun),
    Haproxy(HaproxyRun),
    Nginx(NginxRun),
}

impl Running {
    /// Start `subject` on `cluster`'s switch host; `scratch` holds its files and logs.
    pub fn start(
        subject: Subject,
        cluster: &Cluster,
        scratch: &Path,
        workers: u32,
    ) -> anyhow::Result<Running> {
        Ok(match subject {
            Subject::Locus(mode) => Running::Locus(LocusRun::start(mode, cluster, scratch, workers)?),
            Subject::HaproxyTransfer => Running::Haproxy(HaproxyRun::start(cluster, scratch, workers, true)?),
            Subject::HaproxyNoTransfer => {
                Running::Haproxy(HaproxyRun::start(cluster, scratch, workers, false)?)
            }
            Subject::Nginx => Running::Nginx(NginxRun::start(cluster, scratch, workers)?),
        })
    }

    /// The address clients connect to.
    pub fn client_addr(&self) -> SocketAddr {
        match self {
            Running::Locus(l) => l.client_addr,
            Running::Haproxy(h) => h.listen,
            Running::Nginx(n) => n.listen,
        }
    }

    /// Reload the configuration with the weights swapped.
    pub fn reload(&mut self, cluster: &Cluster) -> anyhow::Result<()> {
        match self {
            Running::Locus(l) => l.reload(cluster),
            Running::Haproxy(h) => h.reload(cluster),
            Running::Nginx(n) => n.reload(cluster),
        }
    }

    /// A binary upgrade (HAProxy: its master reload, which re-executes the binary).
    pub fn upgrade(&mut self, cluster: &Cluster) -> anyhow::Result<UpgradeReport> {
        match self {
            Running::Locus(l) => l.upgrade(cluster),
            Running::Haproxy(h) => h.reload(cluster).map(|()| UpgradeReport::default()),
            Running::Nginx(n) => n.upgrade(cluster),
        }
    }

    /// Note the old generations that have exited since the last look.
    pub fn poll(&mut self) {
        match self {
            Running::Locus(l) => l.draining.poll(),
            Running::Haproxy(h) => h.finishing.poll(),
            Running::Nginx(_) => {}
        }
    }

    /// After the load: wait for the last old generation, and fail if the server is gone.
    pub fn finish(&mut self) -> anyhow::Result<DrainReport> {
        match self {
            Running::Locus(l) => l.finish(),
            Running::Haproxy(h) => h.finish(),
            Running::Nginx(n) => n.finish(),
        }
    }
}

/// The Locus switch and the generations it has been upgraded through.
pub struct LocusRun {
    mode: &'static str,
    file: PathBuf,
    socket: PathBuf,
    scratch: PathBuf,
    current: ChildGuard,
    /// The previous generation, draining since it handed over.
    draining: Draining,
    generation: u32,
    flip: bool,
    client_addr: SocketAddr,
}

/// The line a switch prints once it serves.
const SERVING_LINE: &str = "locus switch listening on";

/// How long a new generation may keep asking for the sockets.
const TAKEOVER_DEADLINE: Duration = Duration::from_secs(20);

impl LocusRun {
    fn start(
        mode: &'static str,
        cluster: &Cluster,
        scratch: &Path,
        workers: u32,
    ) -> anyhow::Result<LocusRun> {
        let net = &cluster.net;
        let listen = net.switch_addr(servers::HTTP_PORT)?;
        let tls_listen = net.switch_addr(443)?;
        let admin = net.listen_addr("switch", servers::ADMIN_PORT)?;
        let (file, socket) = (scratch.join("switch.toml"), scratch.join("switch.sock"));
        let head = locus_head(mode, cluster, listen, tls_listen, admin, &socket, workers);
        std::fs::write(scratch.join("switch-head.toml"), &head)?;
        write_atomically(&file, &locus_config(&head, mode, cluster, false))?;
        let mut cmd = net.command("switch", &cluster.locus)?;
        give_open_files(&mut cmd, 100_000);
        cmd.arg("switch").arg("-c").arg(&file);
        let server = start_server(net, "switch", "locus-switch-1", cmd, listen, Some(admin), scratch)?;
        if mode == "handoff" {
            crate::one_way_rig::await_control_channels(net, &server, 2, mode)?;
        }
        Ok(LocusRun {
            mode,
            file,
            socket,
            scratch: scratch.to_path_buf(),
            current: server.process,
            draining: Draining::default(),
            generation: 1,
            flip: false,
            client_addr: if mode == "tls" { tls_listen } else { listen },
        })
    }

    fn reload(&mut self, cluster: &Cluster) -> anyhow::Result<()> {
        self.flip = !self.flip;
        let head = std::fs::read_to_string(self.scratch.join("switch-head.toml"))?;
        write_atomically(&self.file, &locus_config(&head, self.mode, cluster, self.flip))?;
        signal(self.current.pid(), libc::SIGHUP)
    }

    /// Wait for the previous generation to exit first: the running switch hands over only
    /// then (and refuses until it sees it gone, which is retried below).
    fn upgrade(&mut self, cluster: &Cluster) -> anyhow::Result<UpgradeReport> {
        self.draining.wait_all();
        let deadline = Instant::now() + TAKEOVER_DEADLINE;
        let mut report = UpgradeReport::default();
        loop {
            self.generation += 1;
            let name = format!("locus-switch-{}", self.generation);
            let log = self.scratch.join(format!("{name}.log"));
            let mut cmd = cluster.net.command("switch", &cluster.locus)?;
            give_open_files(&mut cmd, 100_000);
            cmd.arg("switch").arg("-c").arg(&self.file).arg("--upgrade-from").arg(&self.socket);
            let mut child = ChildGuard::spawn(&name, cmd, &log)?;
            match wait_serving(&mut child, &log, deadline) {
                Some(true) => {
                    let old = std::mem::replace(&mut self.current, child);
                    self.draining.push(old);
                    return Ok(report);
                }
                Some(false) if Instant::now() < deadline => {
                    report.retries += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
                _ => bail!(
                    "generation {} did not take over within {TAKEOVER_DEADLINE:?} ({} refusals; log {})",
                    self.generation,
                    report.retries,
                    log.display()
                ),
            }
        }
    }

    fn finish(&mut self) -> anyhow::Result<DrainReport> {
        self.draining.wait_all();
        if let Some(status) = self.current.exited() {
            bail!("the switch (generation {}) exited: {status}", self.generation);
        }
        Ok(self.draining.report.clone())
    }
}

/// `Some(true)` once `child` says it serves, `Some(false)` if it exits first (a refused
/// takeover), `None` at the deadline.
fn wait_serving(child: &mut ChildGuard, log: &Path, deadline: Instant) -> Option<bool> {
    while Instant::now() < deadline {
        if std::fs::read_to_string(log).is_ok_and(|t| t.contains(SERVING_LINE)) {
            return Some(true);
        }
        if child.exited().is_some() {
            return Some(false);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// The part of the switch's file that reloads do not change (top-level keys first).
fn locus_head(
    mode: &str,
    cluster: &Cluster,
    listen: SocketAddr,
    tls_listen: SocketAddr,
    admin: SocketAddr,
    socket: &Path,
    workers: u32,
) -> String {
    let wire_mode = if mode == "tls" { "proxy" } else { mode };
    let mut head = format!(
        "listen = \"{listen}\"\nadmin = \"{admin}\"\ncontrol_socket = {:?}\nmode = \"{wire_mode}\"\nworkers = {workers}\n",
        socket.display().to_string()
    );
    if let Some(tls) = cluster.tls.as_ref().filter(|_| mode == "tls") {
        head.push_str(&format!(
            "listen_tls = \"{tls_listen}\"\n[tls]\nticket_keys = {:?}\n[[tls.certificates]]\ncert = {:?}\nkey = {:?}\n",
            tls.ticket_keys, tls.cert, tls.key
        ));
    }
    if mode == "handoff" {
        head.push_str(&format!(
            "[handoff]\nkey_file = {:?}\ninterface = \"eth0\"\npin_dir = {:?}\n",
            cluster.key,
            cluster.pins.pin_dir()
        ));
    }
    head.push_str("[policy]\nname = \"wrr\"\n");
    head
}

/// The whole switch file: `head`, then the nodes with their weights (and agents).
fn locus_config(head: &str, mode: &str, cluster: &Cluster, flip: bool) -> String {
    let mut text = head.to_string();
    for (node, server) in weighted(cluster, flip).iter().zip(&cluster.nodes) {
        text.push_str(&format!(
            "[[node]]\nname = \"{}\"\naddr = \"{}\"\nweight = {}\n",
            node.name, node.addr, node.weight
        ));
        if let (true, Some(agent)) = (mode == "handoff", server.agent) {
            text.push_str(&format!("handoff = \"{agent}\"\n"));
        }
    }
    text
}

/// HAProxy: its master (master-worker mode) or its newest process and those still
/// finishing (`-sf`), and its configuration.
pub struct HaproxyRun {
    master_worker: bool,
    current: ChildGuard,
    finishing: Draining,
    scratch: PathBuf,
    config: PathBuf,
    stats: Option<PathBuf>,
    workers: u32,
    flip: bool,
    listen: SocketAddr,
    generation: u32,
}

impl HaproxyRun {
    fn start(
        cluster: &Cluster,
        scratch: &Path,
        workers: u32,
        master_worker: bool,
    ) -> anyhow::Result<HaproxyRun> {
        let (net, listen) = (&cluster.net, cluster.net.switch_addr(servers::HTTP_PORT)?);
        let config = scratch.join("haproxy.cfg");
        let stats = master_worker.then(|| scratch.join("haproxy.sock"));
        let nodes = weighted(cluster, false);
        let text =
            servers::haproxy_reloadable_config(listen, &nodes, workers, master_worker, stats.as_deref());
        write_atomically(&config, &text)?;
        let server = match &stats {
            Some(sock) => servers::haproxy_master_worker(net, scratch, &config, listen, sock)?,
            None => {
                let cmd = servers::haproxy_replacing(net, &config, &[])?;
                start_server(net, "switch", "haproxy-1", cmd, listen, None, scratch)?
            }
        };
        Ok(HaproxyRun {
            master_worker,
            current: server.process,
            finishing: Draining::default(),
            scratch: scratch.to_path_buf(),
            config,
            stats,
            workers,
            flip: false,
            listen,
            generation: 1,
        })
    }

    /// Master-worker: USR2 to the master. Otherwise a new process that binds its own
    /// listeners and then sends the running one SIGUSR1 (`-sf`).
    fn reload(&mut self, cluster: &Cluster) -> anyhow::Result<()> {
        self.flip = !self.flip;
        let nodes = weighted(cluster, self.flip);
        let text = servers::haproxy_reloadable_config(
            self.listen,
            &nodes,
            self.workers,
            self.master_worker,
            self.stats.as_deref(),
        );
        write_atomically(&self.config, &text)?;
        if self.master_worker {
            return signal(self.current.pid(), libc::SIGUSR2);
        }
        self.generation += 1;
        let name = format!("haproxy-{}", self.generation);
        let cmd = servers::haproxy_replacing(&cluster.net, &self.config, &[self.current.pid()])?;
        let mut fresh = ChildGuard::spawn(&name, cmd, &self.scratch.join(format!("{name}.log")))?;
        std::thread::sleep(Duration::from_millis(50));
        if let Some(status) = fresh.exited() {
            bail!("{name} exited at start: {status}");
        }
        let old = std::mem::replace(&mut self.current, fresh);
        self.finishing.push(old);
        Ok(())
    }

    /// Wait for the processes still finishing, and fail if HAProxy is gone.
    fn finish(&mut self) -> anyhow::Result<DrainReport> {
        self.finishing.wait_all();
        if let Some(status) = self.current.exited() {
            bail!("HAProxy exited: {status}");
        }
        Ok(self.finishing.report.clone())
    }
}

/// A daemonized NGINX: its files and its master, adopted from the pid file.
pub struct NginxRun {
    files: NginxFiles,
    master: PidGuard,
    workers: u32,
    flip: bool,
    listen: SocketAddr,
    /// Upgrades only: from WINCH until the old workers are gone.
    drains: DrainReport,
}

impl NginxRun {
    fn start(cluster: &Cluster, scratch: &Path, workers: u32) -> anyhow::Result<NginxRun> {
        let listen = cluster.net.switch_addr(servers::HTTP_PORT)?;
        let files = NginxFiles::in_scratch(scratch)?;
        let text =
            servers::nginx_reloadable_config(&files.prefix, listen, &weighted(cluster, false), workers);
        write_atomically(&files.config, &text.replace("daemon off;", "daemon on;"))?;
        run_nginx(&cluster.net, &files, &[])?;
        let pid = read_pid(&files.pid_file, None, Duration::from_secs(10))?;
        let master = PidGuard::adopt(pid);
        cluster.wait_listening(listen)?;
        Ok(NginxRun { files, master, workers, flip: false, listen, drains: DrainReport::default() })
    }

    fn reload(&mut self, cluster: &Cluster) -> anyhow::Result<()> {
        self.flip = !self.flip;
        let nodes = weighted(cluster, self.flip);
        let text = servers::nginx_reloadable_config(&self.files.prefix, self.listen, &nodes, self.workers);
        write_atomically(&self.files.config, &text.replace("daemon off;", "daemon on;"))?;
        run_nginx(&cluster.net, &self.files, &["-s", "reload"])
    }

    /// The documented binary upgrade: USR2 (a new master from the binary, beside the old),
    /// WINCH (the old workers stop gracefully), QUIT (the old master leaves).
    fn upgrade(&mut self, _cluster: &Cluster) -> anyhow::Result<UpgradeReport> {
        let old = self.master.pid();
        signal(old, libc::SIGUSR2)?;
        let new = read_pid(&self.files.pid_file, Some(old), Duration::from_secs(10))?;
        let new_master = PidGuard::adopt(new);
        wait_for(Duration::from_secs(10), || !new_master.workers(&[]).is_empty())
            .context("the new NGINX master started no worker")?;
        signal(old, libc::SIGWINCH)?;
        let winch = Instant::now();
        wait_for(Duration::from_secs(15), || self.master.workers(&[new]).is_empty())
            .context("the old NGINX workers did not stop after WINCH")?;
        let ms = winch.elapsed().as_millis() as u64;
        self.drains.longest_ms = Some(self.drains.longest_ms.map_or(ms, |m| m.max(ms)));
        signal(old, libc::SIGQUIT)?;
        wait_for(Duration::from_secs(10), || !self.master.alive())
            .context("the old NGINX master did not quit")?;
        self.master = new_master;
        Ok(UpgradeReport::default())
    }

    fn finish(&mut self) -> anyhow::Result<DrainReport> {
        if !self.master.alive() {
            bail!("the NGINX master {} is gone", self.master.pid());
        }
        Ok(self.drains.clone())
    }
}

/// Run `nginx -c … -p …` with `args` on the switch host and wait for it.
fn run_nginx(net: &Net, files: &NginxFiles, args: &[&str]) -> anyhow::Result<()> {
    let out = files.command(net, args)?.output().context("running nginx")?;
    if !out.status.success() {
        bail!("nginx {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// The pid in `path` once it is there (and not `not`), within `limit`.
fn read_pid(path: &Path, not: Option<u32>, limit: Duration) -> anyhow::Result<u32> {
    let started = Instant::now();
    loop {
        let pid = std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse::<u32>().ok());
        match pid {
            Some(p) if Some(p) != not && locus_rig::process_alive(p) => return Ok(p),
            _ if started.elapsed() > limit => bail!("no new pid in {} within {limit:?}", path.display()),
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Poll `done` every 10 ms until it holds or `limit` passes.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> anyhow::Result<()> {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > limit {
            bail!("not within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}
