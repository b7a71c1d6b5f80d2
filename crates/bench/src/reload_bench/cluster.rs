//! One run's cluster for `locus bench reload`: a fresh lab network (client, switch, two
//! nodes), two Locus nodes running the handoff agent (one key for them and the switch), and
//! the TLS files the HTTPS switch serves; everything goes on drop, nodes before namespaces.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use locus_rig::servers::{NodeSpec, TlsFiles, locus_node, write_handoff_key};
use locus_rig::{LabNetwork, Net, Server};

/// The lab and its nodes.
pub struct Cluster {
    /// Dropped before `net`: the nodes, then the namespaces.
    pub nodes: Vec<Server>,
    pub net: Net,
    /// The control-channel key of the nodes' agents.
    pub key: PathBuf,
    pub tls: Option<TlsFiles>,
    /// The `locus` executable.
    pub locus: PathBuf,
    /// A private bpffs mount for the handoff switch's pinned maps, which a binary upgrade's
    /// new switch adopts (without them connections handed off before it lose their entries).
    pub pins: BpfPins,
}

/// A bpf filesystem mounted in the scratch folder, unmounted on drop.
pub struct BpfPins(PathBuf);

impl BpfPins {
    fn mount(dir: PathBuf) -> anyhow::Result<BpfPins> {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let status = std::process::Command::new("mount").args(["-t", "bpf", "bpf"]).arg(&dir).status()?;
        if !status.success() {
            bail!("mount -t bpf on {} failed", dir.display());
        }
        Ok(BpfPins(dir))
    }

    /// The forwarder's pin directory (inside the mount).
    pub fn pin_dir(&self) -> PathBuf {
        self.0.join("locus")
    }
}

impl Drop for BpfPins {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Cluster {
    /// A new lab with two nodes serving `root`; files and logs in `scratch`.
    pub fn start(
        locus: &Path,
        root: &Path,
        scratch: &Path,
        tls: Option<TlsFiles>,
    ) -> anyhow::Result<Cluster> {
        let net = Net::Namespaces(LabNetwork::create(2).context("creating the lab network")?);
        let key = scratch.join("handoff.key");
        write_handoff_key(&key)?;
        let mut nodes = Vec::new();
        for i in 1..=2 {
            let spec =
                NodeSpec { handoff_key_file: Some(key.clone()), ..NodeSpec::new(&format!("node{i}"), root) };
            nodes.push(locus_node(&net, locus, scratch, &spec)?);
        }
        let pins = BpfPins::mount(scratch.join("bpffs"))?;
        Ok(Cluster { nodes, net, key, tls, locus: locus.to_path_buf(), pins })
    }

    /// Wait (at most 10 s) until `addr` accepts connections from the client host.
    pub fn wait_listening(&self, addr: SocketAddr) -> anyhow::Result<()> {
        let up = self.net.on_host("client", || {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(10) {
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    return Ok::<bool, locus_rig::RigError>(true);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(false)
        })?;
        if !up {
            bail!("nothing listens on {addr} within 10 s");
        }
        Ok(())
    }

    /// Fail if a node has exited.
    pub fn check_nodes(&mut self) -> anyhow::Result<()> {
        for n in &mut self.nodes {
            n.check_running()?;
        }
        Ok(())
    }
}
