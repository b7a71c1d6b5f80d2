//! Nodes on different loopback addresses of one host (127.0.0.2 and 127.0.0.3, as on a host
//! with a public and a cluster address): cooperative caching and DC replicas work with the
//! peer key, requests without a signature, under another key or replayed are refused (403
//! with the reason) and counted, requests leave from the node's own address, and a home's
//! 404 reaches the co-op's client as a 404.

mod coop_support;

use std::net::{IpAddr, SocketAddr};

use coop_support::{coop_figure, free_port, wait_until, write_doc};
use locus_node::{CoopConfig, DcConfig, NodeConfig, NodeServer, PeerKey, Replacement, peer_auth_value};
use locus_test_support::{Client, Response, get};

const KEY: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
const OTHER_KEY: &str = "aaaabbbbccccddddeeeeffff00001111aaaabbbbccccddddeeeeffff00001111";
/// The version (mtime, s) DC documents are written with.
const VERSION: u64 = 1_700_000_000;

fn addr(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}

/// A key file in `dir` holding `hex`.
fn key_file(dir: &tempfile::TempDir, name: &str, hex: &str) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, format!("{hex}\n")).unwrap();
    path
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i % 251) as u8).wrapping_add(salt)).collect()
}

/// FNV-1a, as the coop nodes hash keys to their homes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A key `/{prefix}{i}.bin` whose home among `members` (`host:port`) is `home`.
fn key_homed_at(prefix: &str, home: &str, members: &[String]) -> String {
    let mut sorted = members.to_vec();
    sorted.sort();
    (0..10_000)
        .map(|i| format!("/{prefix}{i}.bin"))
        .find(|k| sorted[(fnv1a(k.as_bytes()) % sorted.len() as u64) as usize] == home)
        .expect("some key hashes to every member")
}

/// A coop node `name` listening at `listen` with `peers`, over `root`, keyed by `key_file`.
fn coop_node(
    name: &str,
    listen: SocketAddr,
    peers: &[SocketAddr],
    root: &std::path::Path,
    key_file: Option<std::path::PathBuf>,
) -> NodeServer {
    let mut config = NodeConfig {
        listen,
        root: root.to_path_buf(),
        workers: 2,
        cpu_threads: 1,
        name: name.into(),
        coop: Some(CoopConfig {
            peers: peers.iter().map(|p| format!("http://{p}")).collect(),
            ..CoopConfig::default()
        }),
        peer_key_file: key_file,
        ..NodeConfig::default()
    };
    config.cache.replacement = Replacement::Lru;
    config.cache.revalidate_ms = 3_600_000;
    NodeServer::start(config).unwrap_or_else(|e| panic!("starting {name}: {e}"))
}

/// Two coop nodes, A on 127.0.0.2 and B on 127.0.0.3, with the keys given (file names in
/// `dir`), each over its own root.
struct CoopPair {
    a: NodeServer,
    b: NodeServer,
    roots: [tempfile::TempDir; 2],
    members: Vec<String>,
}

fn coop_pair(keys: [Option<&str>; 2]) -> CoopPair {
    let dir = tempfile::tempdir().unwrap();
    let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let (a_addr, b_addr) = (addr([127, 0, 0, 2], free_port()), addr([127, 0, 0, 3], free_port()));
    let file = |i: usize| keys[i].map(|hex| key_file(&dir, &format!("peer{i}.key"), hex));
    let a = coop_node("a", a_addr, &[b_addr], roots[0].path(), file(0));
    let b = coop_node("b", b_addr, &[a_addr], roots[1].path(), file(1));
    CoopPair { a, b, roots, members: vec![a_addr.to_string(), b_addr.to_string()] }
}

impl CoopPair {
    fn write(&self, key: &str, data: &[u8]) {
        for r in &self.roots {
            write_doc(r.path(), key, data);
        }
    }

    fn directory_entries(&self) -> u64 {
        coop_figure(&self.a, "directory_entries") + coop_figure(&self.b, "directory_entries")
    }

    /// Load a document into B's memory, wait until its home knows, and take it off B's
    /// storage: what B sends from then on comes from its memory.
    fn held_by_b_only(&self, key: &str, data: &[u8]) {
        self.write(key, data);
        let r = get(self.b.addr(), key);
        assert_eq!((r.status, r.header("x-locus-cache")), (200, Some("miss")));
        wait_until("the home knows B holds the document", || self.directory_entries() == 1);
        std::fs::remove_file(self.roots[1].path().join(key.trim_start_matches('/'))).unwrap();
    }
}

fn peer_auth(node: &NodeServer, mode: &str) -> serde_json::Value {
    node.status()[mode]["peer_auth"].clone()
}

fn refused(node: &NodeServer, mode: &str, reason: &str) -> u64 {
    peer_auth(node, mode)["refused"][reason].as_u64().unwrap_or_else(|| panic!("{reason}"))
}

#[test]
fn coop_nodes_on_two_addresses_share_their_memory_with_a_key() {
    let p = coop_pair([Some(KEY), Some(KEY)]);
    let body = pattern(2048, 3);
    p.held_by_b_only("/doc.bin", &body);
    let r = get(p.a.addr(), "/doc.bin");
    assert_eq!((r.status, r.header("x-locus-cache"), r.body == body), (200, Some("remote"), true));
    assert_eq!(coop_figure(&p.a, "remote_hits"), 1);
    assert_eq!(coop_figure(&p.a, "storage_reads"), 0);
    for reason in ["bad_reply", "unauthorized", "refused"] {
        assert_eq!(coop_figure(&p.a, &format!("peer_failures.{reason}")), 0, "{reason}");
    }
    let b_auth = peer_auth(&p.b, "coop");
    assert_eq!(b_auth["by"], "key");
    assert!(b_auth["accepted"].as_u64().unwrap() >= 1, "{b_auth}");
    assert!(b_auth["refused"].as_object().unwrap().values().all(|n| n == 0), "{b_auth}");
    assert_eq!(p.a.status()["coop"]["source_address"], "127.0.0.2");
}

#[test]
fn without_a_key_requests_leave_from_the_nodes_own_address_and_are_told_by_it() {
    let p = coop_pair([None, None]);
    let body = pattern(1500, 4);
    p.held_by_b_only("/doc.bin", &body);
    let r = get(p.a.addr(), "/doc.bin");
    assert_eq!((r.status, r.header("x-locus-cache"), r.body == body), (200, Some("remote"), true));
    let b_auth = peer_auth(&p.b, "coop");
    assert_eq!(b_auth["by"], "address");
    assert_eq!(b_auth["refused"]["stranger"], 0, "{b_auth}");
}

/// A raw coop fetch of `key` (version `v`) to `to`, connecting from `from_ip`, with `auth`.
fn raw_fetch(to: SocketAddr, from_ip: [u8; 4], target: &str, auth: Option<&str>) -> Response {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&addr(from_ip, 0).into()).unwrap();
    socket.connect(&to.into()).unwrap();
    let mut client = Client::from_stream(socket.into());
    let auth = auth.map(|v| format!("X-Locus-Peer-Auth: {v}\r\n")).unwrap_or_default();
    client.send(format!("GET {target} HTTP/1.1\r\nHost: {to}\r\n{auth}\r\n"));
    client.response(false)
}

#[test]
fn coop_requests_unsigned_under_another_key_or_replayed_are_refused_and_counted() {
    let p = coop_pair([Some(KEY), Some(KEY)]);
    let (b, a_identity) = (p.b.addr(), p.members[0].clone());
    let target = "/locus/coop/fetch?k=/none.bin&v=1-2";
    let sign = |hex: &str| {
        let key = PeerKey::from_hex(hex).unwrap();
        peer_auth_value(&key, "GET", target, &b.to_string(), &a_identity)
    };
    // From A's own address, but unsigned: an address proves nothing once there is a key.
    let r = raw_fetch(b, [127, 0, 0, 2], target, None);
    assert_eq!((r.status, r.header("x-locus-peer-refused")), (403, Some("unsigned")));
    let r = raw_fetch(b, [127, 0, 0, 2], target, Some(&sign(OTHER_KEY)));
    assert_eq!((r.status, r.header("x-locus-peer-refused")), (403, Some("bad_mac")));
    // Signed with the key, from an address no member has: admitted (B does not hold it: 404).
    let good = sign(KEY);
    let r = raw_fetch(b, [127, 0, 0, 1], target, Some(&good));
    assert_eq!((r.status, r.header("x-locus-peer-refused")), (404, None));
    let r = raw_fetch(b, [127, 0, 0, 1], target, Some(&good));
    assert_eq!((r.status, r.header("x-locus-peer-refused")), (403, Some("replayed")));
    for reason in ["unsigned", "bad_mac", "replayed"] {
        assert_eq!(refused(&p.b, "coop", reason), 1, "{reason}");
    }
    assert_eq!(coop_figure(&p.b, "refused"), 3);
    assert_eq!(p.b.stats().requests, 0, "peer requests are not client requests");
}

#[test]
fn a_member_with_another_key_is_refused_and_its_client_served_from_storage() {
    let p = coop_pair([Some(OTHER_KEY), Some(KEY)]);
    let key = key_homed_at("doc", &p.members[1], &p.members);
    let body = pattern(1000, 5);
    p.write(&key, &body);
    // A asks B, the home, which refuses it; A reads its storage instead.
    let r = get(p.a.addr(), &key);
    assert_eq!((r.status, r.header("x-locus-cache"), r.body == body), (200, Some("miss"), true));
    assert!(coop_figure(&p.a, "peer_failures.unauthorized") >= 1);
    assert_eq!(coop_figure(&p.a, "peer_failures.bad_reply"), 0);
    assert_eq!(coop_figure(&p.a, "storage_reads"), 1);
    assert!(refused(&p.b, "coop", "bad_mac") >= 1);
}

/// Two DC members, s0 (the home, with `docs`) on 127.0.0.2 and s1 (a co-op) on 127.0.0.3,
/// keyed as given.
fn dc_pair(
    keys: [Option<&str>; 2],
    docs: &[(&str, Vec<u8>)],
) -> (NodeServer, NodeServer, Vec<tempfile::TempDir>) {
    let dir = tempfile::tempdir().unwrap();
    let roots = vec![tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), dir];
    for (rel, data) in docs {
        let path = roots[0].path().join(rel.trim_start_matches('/'));
        std::fs::write(&path, data).unwrap();
        let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(VERSION);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(mtime).unwrap();
    }
    let addrs = [addr([127, 0, 0, 2], free_port()), addr([127, 0, 0, 3], free_port())];
    let servers: Vec<String> = addrs.iter().enumerate().map(|(i, a)| format!("s{i}={a}")).collect();
    let start = |i: usize| {
        let dc = DcConfig { servers: servers.clone(), self_name: format!("s{i}"), ..DcConfig::default() };
        let config = NodeConfig {
            listen: addrs[i],
            root: roots[i].path().to_path_buf(),
            workers: 2,
            cpu_threads: 1,
            name: format!("s{i}"),
            dc: Some(dc),
            peer_key_file: keys[i].map(|hex| key_file(&roots[2], &format!("peer{i}.key"), hex)),
            ..NodeConfig::default()
        };
        NodeServer::start(config).unwrap_or_else(|e| panic!("starting s{i}: {e}"))
    };
    (start(0), start(1), roots)
}

fn replica(path: &str) -> String {
    format!("/~migrate/{VERSION}/s0{path}")
}

fn dc_failures(node: &NodeServer) -> serde_json::Value {
    node.status()["dc"]["fetch_failures"].clone()
}

#[test]
fn dc_replicas_are_fetched_between_members_on_two_addresses_with_a_key() {
    let gif = pattern(3000, 1);
    let (home, coop, _roots) = dc_pair([Some(KEY), Some(KEY)], &[("/a.gif", gif.clone())]);
    let r = get(coop.addr(), &replica("/a.gif"));
    assert_eq!((r.status, r.header("x-locus-dc"), r.body == gif), (200, Some("fetched"), true));
    let r = get(coop.addr(), &replica("/a.gif"));
    assert_eq!((r.status, r.header("x-locus-dc"), r.body == gif), (200, Some("replica"), true));
    assert!(dc_failures(&coop).as_object().unwrap().values().all(|n| n == 0), "{}", dc_failures(&coop));
    assert!(peer_auth(&home, "dc")["accepted"].as_u64().unwrap() >= 1);
    assert_eq!(coop.status()["dc"]["source_address"], "127.0.0.3");
}

#[test]
fn a_document_missing_at_its_home_comes_back_from_a_coop_as_404() {
    let (_home, coop, _roots) = dc_pair([Some(KEY), Some(KEY)], &[("/a.gif", pattern(100, 1))]);
    let r = get(coop.addr(), &replica("/missing.gif"));
    assert_eq!((r.status, r.header("x-locus-dc")), (404, Some("fetched")));
    assert!(dc_failures(&coop).as_object().unwrap().values().all(|n| n == 0), "{}", dc_failures(&coop));
}

#[test]
fn a_dc_member_with_another_key_gets_502_for_a_replica_and_counts_why() {
    let (home, coop, _roots) = dc_pair([Some(KEY), Some(OTHER_KEY)], &[("/a.gif", pattern(100, 1))]);
    let r = get(coop.addr(), &replica("/a.gif"));
    assert_eq!((r.status, r.header("x-locus-dc")), (502, Some("fetched")));
    assert!(dc_failures(&coop)["unauthorized"].as_u64().unwrap() >= 1, "{}", dc_failures(&coop));
    assert!(refused(&home, "dc", "bad_mac") >= 1);
    assert_eq!(home.stats().requests, 0);
}

#[test]
fn a_node_without_a_key_says_by_address_and_its_source_is_its_listen_address() {
    let (home, coop, _roots) = dc_pair([None, None], &[("/a.gif", pattern(10, 1))]);
    assert_eq!(get(coop.addr(), &replica("/a.gif")).status, 200);
    assert_eq!(peer_auth(&home, "dc")["by"], "address");
    let source: IpAddr = coop.status()["dc"]["source_address"].as_str().unwrap().parse().unwrap();
    assert_eq!(source, IpAddr::from([127, 0, 0, 3]));
}
