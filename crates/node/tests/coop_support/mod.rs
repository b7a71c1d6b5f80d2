//! For the cooperative-caching tests: nodes on known loopback ports that name each other as
//! peers, the home of a key as the nodes compute it, polling for a status figure, and fake
//! peers (a thread answering coop requests in a chosen, possibly broken, way).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use locus_node::{CoopConfig, NodeConfig, NodeServer, Replacement};

pub use locus_test_support::free_port;

pub fn url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// Start a coop node on `port` over `root` with `peers` (ports); `configure` edits the
/// configuration last.
pub fn start_node(
    name: &str,
    port: u16,
    root: &Path,
    peers: &[u16],
    configure: impl FnOnce(&mut NodeConfig),
) -> NodeServer {
    let mut config = NodeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        root: root.to_path_buf(),
        workers: 2,
        cpu_threads: 1,
        name: name.into(),
        coop: Some(CoopConfig { peers: peers.iter().map(|&p| url(p)).collect(), ..CoopConfig::default() }),
        ..NodeConfig::default()
    };
    config.cache.replacement = Replacement::Lru;
    config.cache.revalidate_ms = 3_600_000;
    configure(&mut config);
    NodeServer::start(config).unwrap_or_else(|e| panic!("starting {name}: {e}"))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The port of the member that is home for `key` among nodes on `ports` (as they compute it:
/// members sorted by `host:port`, FNV-1a of the key mod n).
pub fn home_port(key: &str, ports: &[u16]) -> u16 {
    let mut members: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    members.sort();
    let home = &members[(fnv1a(key.as_bytes()) % members.len() as u64) as usize];
    home.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// A key `/{prefix}{i}.bin` whose home is `home` among `ports`.
pub fn key_homed_at(prefix: &str, home: u16, ports: &[u16]) -> String {
    (0..10_000)
        .map(|i| format!("/{prefix}{i}.bin"))
        .find(|k| home_port(k, ports) == home)
        .expect("some key hashes to every member")
}

/// A figure of a node's `coop` status object (`peer_failures.x` for a failure count).
pub fn coop_figure(node: &NodeServer, name: &str) -> u64 {
    let status = node.status();
    let coop = &status["coop"];
    let v = match name.split_once('.') {
        Some((a, b)) => &coop[a][b],
        None => &coop[name],
    };
    v.as_u64().unwrap_or_else(|| panic!("coop.{name} in {coop}"))
}

pub use locus_test_support::wait_until;

/// Write `data` at `rel` under `root` with a fixed mtime, so copies in several roots are the
/// same version.
pub fn write_doc(root: &Path, rel: &str, data: &[u8]) {
    let path = root.join(rel.trim_start_matches('/'));
    std::fs::write(&path, data).unwrap();
    let mtime = std::time::UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
}

/// How a fake peer answers a lookup or fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FakeMode {
    /// Not HTTP at all.
    Garbage,
    /// The right head, half the body, then close.
    Truncated,
    /// A Content-Length and body one byte short (with the right validator).
    ShortLength,
    /// 500.
    ServerError,
    /// 200 with another validator (and a body of the right length, other bytes).
    ChangedValidator,
    /// Accept and never answer.
    Silent,
    /// The right answer (`body`), after `delay`.
    Correct { delay_ms: u64 },
}

/// A fake peer on a free port; counts the lookups and fetches it read (notices are answered
/// 200 and not counted).
pub struct FakePeer {
    pub port: u16,
    pub requests: Arc<AtomicUsize>,
}

impl FakePeer {
    pub fn start(mode: FakeMode, body: Vec<u8>) -> FakePeer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        let body = Arc::new(body);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (counted, body) = (counted.clone(), body.clone());
                std::thread::spawn(move || fake_connection(stream, mode, &body, &counted));
            }
        });
        FakePeer { port, requests }
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn fake_connection(mut s: TcpStream, mode: FakeMode, body: &[u8], counted: &AtomicUsize) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        if head.contains("/locus/coop/notice") {
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").is_err() {
                return;
            }
            continue;
        }
        counted.fetch_add(1, Ordering::SeqCst);
        let v = head.split(['?', '&', ' ']).find_map(|p| p.strip_prefix("v=")).unwrap_or("0-0").to_string();
        let ok_head = |len: usize, v: &str| {
            format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nX-Locus-Coop-Validator: {v}\r\n\r\n")
        };
        let reply: Vec<u8> = match mode {
            FakeMode::Garbage => b"HELLO THERE\r\n\r\n".to_vec(),
            FakeMode::Truncated => [ok_head(body.len(), &v).as_bytes(), &body[..body.len() / 2]].concat(),
            FakeMode::ShortLength => {
                [ok_head(body.len() - 1, &v).as_bytes(), &body[..body.len() - 1]].concat()
            }
            FakeMode::ServerError => {
                b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".to_vec()
            }
            FakeMode::ChangedValidator => {
                let other = format!("{}-1", body.len());
                [ok_head(body.len(), &other).as_bytes(), &vec![b'x'; body.len()][..]].concat()
            }
            FakeMode::Silent => {
                std::thread::sleep(Duration::from_secs(30));
                return;
            }
            FakeMode::Correct { delay_ms } => {
                std::thread::sleep(Duration::from_millis(delay_ms));
                [ok_head(body.len(), &v).as_bytes(), body].concat()
            }
        };
        if s.write_all(&reply).is_err() {
            return;
        }
        if matches!(mode, FakeMode::Truncated | FakeMode::Garbage) {
            return;
        }
    }
}
