//! `locus bench load`: shows that the load generator is not the bottleneck of a measurement —
//! a Locus node on loopback serves one cached file, and wrk and `locus load` (verifying every
//! response against the document root) take turns against it.

use anyhow::Context;
use locus_lab::{Net, NodeSpec, ScratchFolder, find_program, servers};
use locus_load::WrkComparison;

/// Run the comparison on a `size`-byte file.
pub fn run_load_bench(
    size: u64,
    connections: u32,
    seconds: u32,
    threads: u32,
) -> anyhow::Result<WrkComparison> {
    let wrk = find_program("wrk").context("wrk not found (apt-get install wrk)")?;
    let locus = std::env::current_exe().context("locating the locus executable")?;
    let scratch = ScratchFolder::new("bench-load")?;
    let root = scratch.path().join("www");
    std::fs::create_dir_all(&root)?;
    let body: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(root.join("file.bin"), body)?;
    let net = Net::Loopback;
    let node = servers::locus_node(&net, &locus, scratch.path(), &NodeSpec::new("node1", &root))?;
    let url = format!("http://{}/file.bin", node.addr);
    locus_load::compare_with_wrk_using(&wrk, &url, connections, seconds, threads, Some(&root))
}
