//! The network and storage model of the cooperative-caching and Socket Cloning study: a
//! full-duplex link per node (`LinkModel`: TX and RX `LinkQueue`s), a shared NFS-like file
//! server behind all nodes (`Storage::FileServer`, run by `FileServer`) as the alternative to
//! each node's local disk, and the CPU costs of socket cloning (`CloneCost`). All off by
//! default: the LARD model's network is infinitely fast and every node reads its own disk.

use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::queues::{CpuQueue, LinkQueue};

/// Every node's network interface: one full-duplex link, TX and RX each a FIFO byte server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinkModel {
    /// Raw rate of each direction, bits per second (Fast Ethernet: 100 000 000).
    pub bits_per_s: u64,
    /// Share of the raw rate left for payload (protocol overhead; 0.95).
    pub efficiency: f64,
}

impl Default for LinkModel {
    fn default() -> LinkModel {
        LinkModel { bits_per_s: 100_000_000, efficiency: 0.95 }
    }
}

/// The shared file server: one FIFO service queue (per-read time, files served from its
/// memory) and one TX link towards the nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileServerModel {
    /// Raw rate of the server's TX link, bits per second.
    pub link_bits_per_s: u64,
    /// Share of the raw rate left for payload.
    pub efficiency: f64,
    /// Service time of one read, ns.
    pub service_ns: u64,
}

impl Default for FileServerModel {
    fn default() -> FileServerModel {
        FileServerModel { link_bits_per_s: 100_000_000, efficiency: 0.95, service_ns: 500_000 }
    }
}

/// Where a node reads a file it does not hold in memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Storage {
    /// Its own disks (the LARD model).
    #[default]
    LocalDisk,
    /// One file server shared by all nodes (NFS mounts): the server's TX link and the node's
    /// RX link carry the file.
    FileServer(FileServerModel),
}

impl Storage {
    /// Whether this is the LARD model's local disk (the default, left out of TOML).
    pub fn is_local_disk(&self) -> bool {
        matches!(self, Storage::LocalDisk)
    }
}

/// CPU costs of Socket Cloning, ns on the modelled CPU (not divided by `cpu_speed`: they
/// are measured on the paper's PIII-733 nodes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CloneCost {
    /// One clone: SC message and clone setup (46 µs on a PIII-733).
    pub clone_ns: u64,
    /// Share of `clone_ns` the entry node pays; the owner pays the rest.
    pub entry_share: f64,
    /// The entry node's packet router forwarding one client ACK to the owner.
    pub ack_ns: u64,
    /// Response bytes per client ACK (delayed ACKs: one per two 1460-byte segments).
    pub ack_every_bytes: u64,
}

impl Default for CloneCost {
    fn default() -> CloneCost {
        CloneCost { clone_ns: 46_000, entry_share: 0.5, ack_ns: 5_000, ack_every_bytes: 2 * 1460 }
    }
}

impl CloneCost {
    /// Whether these are the defaults (left out of TOML).
    pub fn is_default(&self) -> bool {
        *self == CloneCost::default()
    }

    /// The entry node's share of a clone.
    pub fn entry_ns(&self) -> u64 {
        (self.clone_ns as f64 * self.entry_share.clamp(0.0, 1.0)).round() as u64
    }

    /// The owner's share of a clone.
    pub fn owner_ns(&self) -> u64 {
        self.clone_ns - self.entry_ns()
    }

    /// CPU the entry node spends forwarding the client's ACKs of a `size`-byte response.
    #[inline]
    pub fn acks_ns(&self, size: u64) -> u64 {
        self.ack_ns * size.div_ceil(self.ack_every_bytes.max(1))
    }

    /// Check the values serde cannot.
    pub fn validate(&self) -> Result<(), SimError> {
        if !(0.0..=1.0).contains(&self.entry_share) {
            return Err(SimError::Config(format!(
                "cloning.entry_share must be within 0..=1, not {}",
                self.entry_share
            )));
        }
        Ok(())
    }
}

/// Check a link's rate and efficiency; `what` names it in the error.
pub(crate) fn validate_link(what: &str, bits_per_s: u64, efficiency: f64) -> Result<(), SimError> {
    if bits_per_s == 0 {
        return Err(SimError::Config(format!("{what}: the link rate must be > 0 bits/s")));
    }
    if !(efficiency.is_finite() && efficiency > 0.0 && efficiency <= 1.0) {
        return Err(SimError::Config(format!("{what}: efficiency must be within (0, 1], not {efficiency}")));
    }
    Ok(())
}

/// A node's full-duplex link.
#[derive(Clone, Debug)]
pub struct NodeLink {
    pub tx: LinkQueue,
    pub rx: LinkQueue,
}

impl NodeLink {
    pub fn new(model: &LinkModel) -> NodeLink {
        NodeLink {
            tx: LinkQueue::new(model.bits_per_s, model.efficiency),
            rx: LinkQueue::new(model.bits_per_s, model.efficiency),
        }
    }
}

/// The shared file server at run time.
#[derive(Clone, Debug)]
pub struct FileServer {
    service: CpuQueue,
    service_ns: u64,
    tx: LinkQueue,
}

impl FileServer {
    pub fn new(model: &FileServerModel) -> FileServer {
        FileServer {
            service: CpuQueue::default(),
            service_ns: model.service_ns,
            tx: LinkQueue::new(model.link_bits_per_s, model.efficiency),
        }
    }

    /// Read a `size`-byte file for a node at `now`, the data crossing the server's TX link
    /// and, if given, the node's RX link; returns when the file is in the node's memory. The
    /// stages of one read overlap (the server streams while it reads, the switch cuts
    /// through), so the read is done when the slowest of the three queues is.
    #[inline]
    pub fn read(&mut self, now: u64, size: u64, node_rx: Option<&mut LinkQueue>) -> u64 {
        let served = self.service.submit(now, self.service_ns);
        let sent = self.tx.submit(now, size);
        let received = node_rx.map_or(0, |rx| rx.submit(now, size));
        served.max(sent).max(received)
    }

    /// Reads so far.
    pub fn reads(&self) -> u64 {
        self.service.jobs()
    }

    /// (service busy ns, TX busy ns, TX bytes) so far.
    pub fn busy(&self) -> (u64, u64, u64) {
        (self.service.busy_ns(), self.tx.busy_ns(), self.tx.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_server_read_ends_when_its_slowest_stage_ends_and_reads_share_the_tx_link() {
        let model = FileServerModel::default();
        let mut fs = FileServer::new(&model);
        let mut rx_a = LinkQueue::new(100_000_000, 0.95);
        let mut rx_b = LinkQueue::new(100_000_000, 0.95);
        let xfer = rx_a.transfer_ns(1_000_000);
        // One 1 MB read: the link (84 ms) dominates the 0.5 ms service.
        assert_eq!(fs.read(0, 1_000_000, Some(&mut rx_a)), xfer);
        // A second read for another node at the same time waits for the server's TX link,
        // though that node's RX link is idle.
        assert_eq!(fs.read(0, 1_000_000, Some(&mut rx_b)), 2 * xfer);
        // A tiny read is bound by the service time.
        let t = 10 * xfer;
        assert_eq!(fs.read(t, 10, None), t + model.service_ns);
        assert_eq!(fs.reads(), 3);
        let (service, tx, bytes) = fs.busy();
        assert_eq!((service, tx, bytes), (3 * model.service_ns, 2 * xfer + rx_a.transfer_ns(10), 2_000_010));
    }

    #[test]
    fn clone_cost_splits_the_clone_and_counts_one_ack_per_two_segments() {
        let c = CloneCost::default();
        assert_eq!(c.entry_ns() + c.owner_ns(), 46_000);
        assert_eq!(c.entry_ns(), 23_000);
        assert_eq!(c.acks_ns(0), 0);
        assert_eq!(c.acks_ns(1), 5_000);
        assert_eq!(c.acks_ns(2920), 5_000);
        assert_eq!(c.acks_ns(2921), 10_000);
        assert!(CloneCost { entry_share: 1.5, ..c }.validate().is_err());
        assert!(validate_link("links", 0, 0.9).is_err());
        assert!(validate_link("links", 1, 0.0).is_err());
        assert!(validate_link("links", 1, 1.0).is_ok());
    }
}
