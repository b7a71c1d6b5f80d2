//! The files and nodes of a throughput bench: its scratch folder (removed afterwards, or kept
//! where `--keep` says), a document root with one file of patterned bytes per size, named
//! `<size>.bin`, that every path serves, and the two Locus nodes serving it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use locus_rig::{Net, NodeSpec, ScratchFolder, Server, servers};

/// The two nodes' names and addresses, in order.
pub type NodeAddrs = [(String, SocketAddr); 2];

/// A bench's scratch folder and document root; the folder goes when this is dropped unless
/// it was kept.
pub struct BenchFiles {
    pub scratch: PathBuf,
    pub root: PathBuf,
    _folder: ScratchFolder,
}

impl BenchFiles {
    /// A scratch folder named for `bench` (or `keep`), and `<scratch>/www/<size>.bin` for each
    /// of `sizes`: `a`..`z` repeated.
    pub fn create(
        bench: &str,
        keep: Option<&PathBuf>,
        sizes: impl IntoIterator<Item = u64>,
    ) -> anyhow::Result<BenchFiles> {
        let folder = ScratchFolder::new(bench)?;
        let scratch = match keep {
            Some(p) => {
                std::fs::create_dir_all(p)?;
                p.clone()
            }
            None => folder.path().to_path_buf(),
        };
        let root = scratch.join("www");
        std::fs::create_dir_all(&root)?;
        for size in sizes {
            std::fs::write(root.join(format!("{size}.bin")), body(size))?;
        }
        Ok(BenchFiles { scratch, root, _folder: folder })
    }

    /// Start the two cleartext nodes (`node1`, `node2`, `workers` each) serving the root:
    /// the servers (stopped when dropped) and their names and addresses.
    pub fn start_nodes(
        &self,
        net: &Net,
        locus: &Path,
        workers: u32,
    ) -> anyhow::Result<(Vec<Server>, NodeAddrs)> {
        let start = |role: &str| {
            let spec = NodeSpec { workers, ..NodeSpec::new(role, &self.root) };
            servers::locus_node(net, locus, &self.scratch, &spec)
        };
        let (node1, node2) = (start("node1")?, start("node2")?);
        let addrs = [("node1".to_string(), node1.addr), ("node2".to_string(), node2.addr)];
        Ok((vec![node1, node2], addrs))
    }
}

/// The bytes of `<size>.bin`: `a`..`z` repeated.
pub fn body(size: u64) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}
