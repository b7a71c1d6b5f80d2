//! For the DC-mode tests: clusters of in-process nodes on known loopback ports whose
//! membership names them by their real `127.0.0.1:PORT` authorities, documents written with
//! fixed versions, status figures, the links of a page, and a fake home that answers fetches
//! in a chosen, broken way.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use locus_node::{DcConfig, NodeConfig, NodeServer};

/// The version (mtime, s) documents are written with.
pub const VERSION: u64 = 1_700_000_000;

pub use locus_test_support::free_port;

/// `s0=127.0.0.1:P0,…` for `ports` (extra entries appended).
pub fn servers(ports: &[u16]) -> Vec<String> {
    ports.iter().enumerate().map(|(i, p)| format!("s{i}=127.0.0.1:{p}")).collect()
}

/// Start member `me` of `members` on `port` over `root`; `configure` edits the DC table last.
pub fn start_dc(
    me: &str,
    port: u16,
    root: &Path,
    members: Vec<String>,
    configure: impl FnOnce(&mut DcConfig),
) -> NodeServer {
    start_dc_node(me, port, root, members, configure, |_| {})
}

/// `start_dc` with `edit` applied to the node's configuration after the DC table (e.g. TLS).
pub fn start_dc_node(
    me: &str,
    port: u16,
    root: &Path,
    members: Vec<String>,
    configure: impl FnOnce(&mut DcConfig),
    edit: impl FnOnce(&mut NodeConfig),
) -> NodeServer {
    let mut dc = DcConfig {
        servers: members,
        self_name: me.into(),
        balance_ms: 200,
        ping_ms: 100,
        ..DcConfig::default()
    };
    configure(&mut dc);
    let mut config = NodeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        admin: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        root: root.to_path_buf(),
        workers: 2,
        cpu_threads: 1,
        name: me.into(),
        dc: Some(dc),
        ..NodeConfig::default()
    };
    edit(&mut config);
    NodeServer::start(config).unwrap_or_else(|e| panic!("starting {me}: {e}"))
}

/// Nodes s0..sN on their own roots; `configure(i, dc)` edits node i's table.
pub struct Cluster {
    pub nodes: Vec<NodeServer>,
    pub roots: Vec<tempfile::TempDir>,
    pub ports: Vec<u16>,
}

/// Write the documents (`rel`, bytes) into root 0 first, then start `n` nodes.
pub fn cluster(n: usize, docs: &[(&str, Vec<u8>)], configure: impl Fn(usize, &mut DcConfig)) -> Cluster {
    cluster_of_nodes(n, docs, configure, |_, _| {})
}

/// `cluster` with `edit(i, node)` applied to node i's configuration after its DC table.
pub fn cluster_of_nodes(
    n: usize,
    docs: &[(&str, Vec<u8>)],
    configure: impl Fn(usize, &mut DcConfig),
    edit: impl Fn(usize, &mut NodeConfig),
) -> Cluster {
    let roots: Vec<_> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
    for (rel, data) in docs {
        write_doc(roots[0].path(), rel, data, VERSION);
    }
    let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
    let nodes = (0..n)
        .map(|i| {
            let (name, members) = (format!("s{i}"), servers(&ports));
            start_dc_node(&name, ports[i], roots[i].path(), members, |c| configure(i, c), |c| edit(i, c))
        })
        .collect();
    Cluster { nodes, roots, ports }
}

impl Cluster {
    pub fn addr(&self, i: usize) -> SocketAddr {
        self.nodes[i].addr()
    }
}

/// Write `data` at `rel` under `root` with modification time `version` (s).
pub fn write_doc(root: &Path, rel: &str, data: &[u8], version: u64) {
    let path = root.join(rel.trim_start_matches('/'));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(&path, data).unwrap();
    let mtime = std::time::UNIX_EPOCH + Duration::from_secs(version);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
}

pub fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i % 251) as u8).wrapping_add(salt)).collect()
}

/// A number of a node's `dc` status object (`fetch_failures.x` for a failure count).
pub fn dc_figure(node: &NodeServer, name: &str) -> f64 {
    let status = node.status();
    let dc = &status["dc"];
    let v = match name.split_once('.') {
        Some((a, b)) => &dc[a][b],
        None => &dc[name],
    };
    v.as_f64().unwrap_or_else(|| panic!("dc.{name} in {dc}"))
}

pub use locus_test_support::wait_until;

/// Every `src="…"` and `href="…"` value of a page, in order.
pub fn links(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in ["src=\"", "href=\""] {
        let mut rest = html;
        while let Some(i) = rest.find(attr) {
            rest = &rest[i + attr.len()..];
            let end = rest.find('"').unwrap_or(rest.len());
            out.push(rest[..end].to_string());
        }
    }
    out
}

/// An absolute `http://host:port/target` split into its address and target.
pub fn split_url(url: &str) -> (SocketAddr, String) {
    let rest = url.strip_prefix("http://").unwrap_or_else(|| panic!("not absolute: {url}"));
    let slash = rest.find('/').unwrap_or(rest.len());
    (rest[..slash].parse().unwrap(), rest[slash..].to_string())
}

/// A fake home: answers `GET /~dc/fetch<path>` with `answers(path)` (raw bytes, then closes),
/// anything else with an empty 200. Runs until the process ends.
pub fn fake_home(answers: fn(&str) -> Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let target = head.split(' ').nth(1).unwrap_or("/").to_string();
                let answer = match target.strip_prefix("/~dc/fetch") {
                    Some(path) => answers(path),
                    None => b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                };
                let _ = stream.write_all(&answer);
            });
        }
    });
    port
}
