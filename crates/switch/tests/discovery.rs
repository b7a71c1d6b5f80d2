//! Integration tests of node discovery (proxy mode, scripted back-ends that say who served,
//! everything on loopback): nodes from a watched file and from a test DNS server (A and SRV
//! records, answers encoded with hickory-proto) join and take requests, leave and drain, and
//! stay through a garbage file, a missing file, SERVFAIL, NXDOMAIN, timeouts and a valid empty
//! answer that would leave no node; a reload keeps the discovered nodes.

mod common;

use common::*;
use hickory_resolver::proto::op::{Message, OpCode, ResponseCode};
use hickory_resolver::proto::rr::rdata::{A, SRV};
use hickory_resolver::proto::rr::{Name, RData, Record, RecordType};
use locus_policy::PolicyConfig;
use locus_switch::{DiscoveryEntry, NodeEntry, SwitchConfig, SwitchServer};
use locus_test_support::Client;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a test waits for discovery to notice a change.
const NOTICE: Duration = Duration::from_secs(10);

/// What the test DNS server answers for one name.
#[derive(Clone)]
enum Zone {
    /// These records (A and SRV), TTL 1 s; other types get a valid empty answer.
    Records { a: Vec<Ipv4Addr>, srv: Vec<(u16, u16, u16, &'static str)> },
    /// This response code and no records.
    Fail(ResponseCode),
    /// No answer at all (the resolver times out).
    Silent,
}

/// A DNS server on 127.0.0.1 (UDP) answering from a table the test changes; names not in it
/// get NXDOMAIN.
struct TestDns {
    addr: SocketAddr,
    zones: Arc<Mutex<HashMap<String, Zone>>>,
    queries: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl TestDns {
    fn start() -> TestDns {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let dns = TestDns {
            addr: socket.local_addr().unwrap(),
            zones: Arc::default(),
            queries: Arc::default(),
            stop: Arc::default(),
        };
        let (zones, queries, stop) = (dns.zones.clone(), dns.queries.clone(), dns.stop.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !stop.load(Relaxed) {
                let Ok((n, peer)) = socket.recv_from(&mut buf) else { continue };
                let Ok(query) = Message::from_vec(&buf[..n]) else { continue };
                queries.fetch_add(1, Relaxed);
                let zone = query
                    .queries
                    .first()
                    .and_then(|q| zones.lock().unwrap().get(&q.name().to_ascii().to_lowercase()).cloned());
                if let Some(reply) = answer(&query, zone) {
                    let _ = socket.send_to(&reply.to_vec().unwrap(), peer);
                }
            }
        });
        dns
    }

    /// Answer `name` (a fully qualified name, with its final dot) with `zone` from now on.
    fn set(&self, name: &str, zone: Zone) {
        self.zones.lock().unwrap().insert(name.to_string(), zone);
    }
}

impl Drop for TestDns {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

/// The response to `query` under `zone` (none: stay silent).
fn answer(query: &Message, zone: Option<Zone>) -> Option<Message> {
    let q = query.queries.first()?;
    let mut reply = Message::response(query.metadata.id, OpCode::Query);
    reply.metadata.recursion_desired = query.metadata.recursion_desired;
    reply.metadata.recursion_available = true;
    reply.metadata.authoritative = true;
    reply.add_query(q.clone());
    match zone {
        None => reply.metadata.response_code = ResponseCode::NXDomain,
        Some(Zone::Silent) => return None,
        Some(Zone::Fail(code)) => reply.metadata.response_code = code,
        Some(Zone::Records { a, srv }) => {
            let name = q.name().clone();
            let records: Vec<RData> = match q.query_type() {
                RecordType::A => a.iter().map(|ip| RData::A(A(*ip))).collect(),
                RecordType::SRV => srv
                    .iter()
                    .map(|&(priority, weight, port, target)| {
                        RData::SRV(SRV::new(priority, weight, port, Name::from_ascii(target).unwrap()))
                    })
                    .collect(),
                _ => Vec::new(),
            };
            reply.add_answers(records.into_iter().map(|r| Record::from_rdata(name.clone(), 1, r)));
        }
    }
    Some(reply)
}

/// A back-end answering `X-Locus-Node: name`; `/slow` after 800 ms, counted in `slow`.
fn backend_on(addr: SocketAddr, name: &str, slow: Arc<AtomicUsize>) -> ScriptedBackend {
    let name = name.to_string();
    ScriptedBackend::start_on(addr, move |r| {
        let reply = ok_response(name.as_bytes(), &format!("X-Locus-Node: {name}\r\n"));
        if r.target == "/slow" {
            slow.fetch_add(1, Relaxed);
            Action::Delay(Duration::from_millis(800), reply)
        } else {
            Action::Reply(reply)
        }
    })
}

fn backend(name: &str) -> ScriptedBackend {
    backend_on("127.0.0.1:0".parse().unwrap(), name, Arc::default())
}

/// Back-ends on 127.0.0.2, 127.0.0.3, … all on one port (as DNS A records name them).
fn backends_on_one_port(names: &[&str]) -> Vec<ScriptedBackend> {
    loop {
        let first = backend_on("127.0.0.2:0".parse().unwrap(), names[0], Arc::default());
        let port = first.addr.port();
        let free = (1..names.len()).all(|i| std::net::TcpListener::bind((ip(i + 2), port)).is_ok());
        if free {
            let mut all = vec![first];
            for (i, name) in names.iter().enumerate().skip(1) {
                all.push(backend_on(SocketAddr::new(ip(i + 2).into(), port), name, Arc::default()));
            }
            return all;
        }
    }
}

fn ip(last: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, last as u8)
}

fn node(name: &str, addr: SocketAddr) -> NodeEntry {
    NodeEntry { name: Some(name.into()), addr, weight: 1, handoff: None, admin: None }
}

fn config(nodes: Vec<NodeEntry>, discovery: Vec<DiscoveryEntry>) -> SwitchConfig {
    let mut c = SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin: Some("127.0.0.1:0".parse().unwrap()),
        workers: 1,
        policy: PolicyConfig::from_name("rr").unwrap(),
        nodes,
        discovery,
        ..SwitchConfig::default()
    };
    c.health.slow_start_ms = 100;
    c
}

fn entry(text: &str) -> DiscoveryEntry {
    toml::from_str(text).unwrap()
}

/// Write `text` to `path` as an operator should: a new file renamed into place.
fn write_atomically(path: &Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// Who served each of `n` requests, over one keep-alive connection.
fn served(addr: SocketAddr, n: usize) -> Vec<String> {
    let mut client = Client::connect(addr);
    (0..n)
        .map(|i| {
            let r = client.get(&format!("/doc/{i}"));
            assert_eq!(r.status, 200, "request {i}");
            r.header("x-locus-node").unwrap().to_string()
        })
        .collect()
}

/// The names of the nodes in service (not retired) in `status`.
fn in_service(status: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["retired"] == false)
        .map(|n| n["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// Wait until the nodes in service are `want` (in any order).
fn wait_for_nodes(server: &SwitchServer, want: &[&str]) {
    let mut want = want.to_vec();
    want.sort();
    let ok = wait_until(NOTICE, || in_service(&server.status()) == want);
    assert!(ok, "nodes in service should be {want:?}: {}", server.status());
}

/// Send requests until `backend` has served one (a node in slow start takes a small share).
fn reaches(addr: SocketAddr, backend: &ScriptedBackend) -> bool {
    let before = backend.requests();
    wait_until(NOTICE, || {
        served(addr, 4);
        backend.requests() > before
    })
}

/// Wait until `source`'s failures in status grow past `before`; its last error then.
fn wait_for_failure(server: &SwitchServer, source: &str, before: u64) -> String {
    let failures = || server.status()["discovery"][source]["failures"].as_u64().unwrap_or(0);
    assert!(wait_until(NOTICE, || failures() > before), "{source} should fail: {}", server.status());
    server.status()["discovery"][source]["last_error"].as_str().unwrap_or_default().to_string()
}

#[test]
fn file_nodes_join_drain_and_survive_a_garbage_or_missing_file() {
    let a = backend("a");
    let b_slow = Arc::new(AtomicUsize::new(0));
    let b = backend_on("127.0.0.1:0".parse().unwrap(), "b", b_slow.clone());
    let c = backend("c");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nodes.toml");
    let listing = |name: &str, addr: SocketAddr| format!("[[node]]\nname = \"{name}\"\naddr = \"{addr}\"\n");
    write_atomically(&path, &listing("b", b.addr));
    let file = entry(&format!("file = \"{}\"\npoll_ms = 100\n", path.display()));
    let server = SwitchServer::start(config(vec![node("a", a.addr)], vec![file])).unwrap();
    let addr = server.addr();
    let source = format!("file:{}", path.display());
    assert_eq!(in_service(&server.status()), ["a", "b"], "the file's node is there from the start");
    assert!(reaches(addr, &b));

    // A slow request in flight on b while the file replaces b with c.
    let slow = std::thread::spawn(move || {
        let mut client = Client::connect(addr);
        for _ in 0..4 {
            let r = client.get("/slow");
            if r.header("x-locus-node") == Some("b") {
                return (r.status, r.text());
            }
        }
        panic!("rr never sent /slow to b");
    });
    assert!(wait_until(NOTICE, || b_slow.load(Relaxed) >= 1), "the slow request reached b");
    write_atomically(&path, &listing("c", c.addr));
    wait_for_nodes(&server, &["a", "c"]);
    let b_before = b.requests();
    assert!(reaches(addr, &c), "the new node takes requests");
    assert!(served(addr, 20).iter().all(|n| n != "b"));
    assert_eq!(b.requests(), b_before, "the node gone takes no new request");
    assert_eq!(slow.join().unwrap(), (200, "b".to_string()), "its request in flight finished");

    // Garbage, then no file: the last good list stays, the error is in status.
    let failures = server.status()["discovery"][&source]["failures"].as_u64().unwrap();
    write_atomically(&path, "[[node]]\nadr = \"nowhere\"\n");
    let why = wait_for_failure(&server, &source, failures);
    assert!(why.contains("adr"), "the parse error names the key: {why}");
    std::fs::remove_file(&path).unwrap();
    let why = wait_for_failure(&server, &source, failures + 1);
    assert!(why.contains("missing"), "{why}");
    assert_eq!(in_service(&server.status()), ["a", "c"]);
    let seen = served(addr, 10);
    assert!(seen.contains(&"c".to_string()) && seen.contains(&"a".to_string()), "{seen:?}");
    let status = server.status();
    assert_eq!(status["discovery"][&source]["nodes"], serde_json::json!(["c"]), "{status}");
    server.shutdown();
}

#[test]
fn dns_nodes_join_drain_and_survive_resolver_failures() {
    let backends = backends_on_one_port(&["b2", "b3"]);
    let (b2, b3) = (&backends[0], &backends[1]);
    let dns = TestDns::start();
    let name = "web.locus.test.";
    dns.set(name, Zone::Records { a: vec![ip(2)], srv: Vec::new() });
    let text = format!(
        "dns = \"{name}\"\nport = {}\nname = \"web\"\nresolver = \"{}\"\nmin_ttl_s = 1\nmax_ttl_s = 2\ntimeout_ms = 200\n",
        b2.addr.port(),
        dns.addr
    );
    // Discovery's nodes only: no [[node]] at all.
    let server = SwitchServer::start(config(Vec::new(), vec![entry(&text)])).unwrap();
    let addr = server.addr();
    let source = "dns:web.locus.test.";
    assert_eq!(in_service(&server.status()), ["web-127.0.0.2"]);
    assert!(served(addr, 3).iter().all(|n| n == "b2"));

    dns.set(name, Zone::Records { a: vec![ip(2), ip(3)], srv: Vec::new() });
    wait_for_nodes(&server, &["web-127.0.0.2", "web-127.0.0.3"]);
    assert!(reaches(addr, b3), "the node that appeared takes requests");

    // Resolver failures keep both nodes.
    for (zone, needle) in [
        (Zone::Fail(ResponseCode::ServFail), "Server Failure"),
        (Zone::Fail(ResponseCode::NXDomain), "NXDOMAIN"),
        (Zone::Silent, "timed out"),
    ] {
        let failures = server.status()["discovery"][source]["failures"].as_u64().unwrap();
        dns.set(name, zone);
        let why = wait_for_failure(&server, source, failures);
        assert!(why.to_lowercase().contains(&needle.to_lowercase()), "{needle}: {why}");
        assert_eq!(in_service(&server.status()), ["web-127.0.0.2", "web-127.0.0.3"]);
    }
    let seen = served(addr, 10);
    assert!(seen.contains(&"b2".to_string()) && seen.contains(&"b3".to_string()), "{seen:?}");

    // b2 leaves the records: drained, no new request.
    dns.set(name, Zone::Records { a: vec![ip(3)], srv: Vec::new() });
    wait_for_nodes(&server, &["web-127.0.0.3"]);
    let b2_before = b2.requests();
    assert!(served(addr, 10).iter().all(|n| n == "b3"));
    assert_eq!(b2.requests(), b2_before);

    // A valid empty answer would leave no node: refused, the last node stays.
    dns.set(name, Zone::Records { a: Vec::new(), srv: Vec::new() });
    let refused = || server.status()["discovery"][source]["refused"].as_u64().unwrap_or(0);
    assert!(wait_until(NOTICE, || refused() >= 1), "{}", server.status());
    let why = server.status()["discovery"][source]["last_error"].as_str().unwrap().to_string();
    assert!(why.contains("no nodes"), "{why}");
    assert_eq!(in_service(&server.status()), ["web-127.0.0.3"]);
    assert!(served(addr, 3).iter().all(|n| n == "b3"));
    let metrics = locus_test_support::get(server.admin_addr().unwrap(), "/metrics").text();
    let failures = format!("locus_switch_discovery_failures_total{{source=\"{source}\"}} ");
    let counted = metrics.lines().find_map(|l| l.strip_prefix(&failures)?.parse::<u64>().ok());
    assert!(counted.is_some_and(|n| n >= 3), "{failures} in:\n{metrics}");
    server.shutdown();
}

#[test]
fn srv_records_give_the_lowest_priority_targets_with_their_ports_and_weights() {
    let (x, y, z) = (backend("x"), backend("y"), backend("z"));
    let dns = TestDns::start();
    let service = "_http._tcp.web.locus.test.";
    for host in ["x.locus.test.", "y.locus.test.", "z.locus.test."] {
        dns.set(host, Zone::Records { a: vec![ip(1)], srv: Vec::new() });
    }
    let record = |weight, port, target| (0u16, weight, port, target);
    dns.set(
        service,
        Zone::Records {
            a: Vec::new(),
            srv: vec![
                record(3, x.addr.port(), "x.locus.test."),
                record(0, y.addr.port(), "y.locus.test."),
                (10, 1, z.addr.port(), "z.locus.test."),
            ],
        },
    );
    let text = format!("srv = \"{service}\"\nresolver = \"{}\"\nmin_ttl_s = 1\ntimeout_ms = 200\n", dns.addr);
    let server = SwitchServer::start(config(vec![node("static", z.addr)], vec![entry(&text)])).unwrap();
    let (nx, ny) = (format!("x.locus.test-{}", x.addr), format!("y.locus.test-{}", y.addr));
    let mut want = vec![nx.clone(), ny.clone(), "static".to_string()];
    want.sort();
    assert_eq!(in_service(&server.status()), want, "the backup (priority 10) is not used");
    let weight = |name: &str| {
        let status = server.status();
        let nodes = status["nodes"].as_array().unwrap().clone();
        nodes.iter().find(|n| n["name"] == name).map(|n| n["weight"].clone())
    };
    assert_eq!((weight(&nx), weight(&ny)), (Some(3.into()), Some(1.into())), "SRV weights (0 → 1)");
    assert!(reaches(server.addr(), &x) && reaches(server.addr(), &y));

    // y's record goes: its node drains; the static node stays.
    dns.set(service, Zone::Records { a: Vec::new(), srv: vec![record(3, x.addr.port(), "x.locus.test.")] });
    wait_for_nodes(&server, &[nx.as_str(), "static"]);
    server.shutdown();
}

#[test]
fn a_reload_keeps_the_discovered_nodes_and_a_source_removed_takes_its_nodes_away() {
    let (a, b, c, d) = (backend("a"), backend("b"), backend("c"), backend("d"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nodes.toml");
    write_atomically(&path, &format!("[[node]]\nname = \"b\"\naddr = \"{}\"\n", b.addr));
    let file = entry(&format!("file = \"{}\"\npoll_ms = 100\n", path.display()));
    let server = SwitchServer::start(config(vec![node("a", a.addr)], vec![file.clone()])).unwrap();
    assert_eq!(in_service(&server.status()), ["a", "b"]);

    // SIGHUP's reload (the file's own nodes changed): b stays.
    let report = server.reload(config(vec![node("c", c.addr)], vec![file.clone()])).unwrap();
    assert_eq!(
        (report.added.clone(), report.removed.clone()),
        (vec!["c".to_string()], vec!["a".to_string()])
    );
    assert_eq!(in_service(&server.status()), ["b", "c"]);

    // Discovery after it keeps the reloaded configuration's own nodes.
    write_atomically(&path, &format!("[[node]]\nname = \"d\"\naddr = \"{}\"\n", d.addr));
    wait_for_nodes(&server, &["c", "d"]);
    assert!(reaches(server.addr(), &d));

    // A discovered name that clashes with one of the configuration's is refused, and the
    // reload that drops the source takes its nodes away.
    write_atomically(&path, &format!("[[node]]\nname = \"c\"\naddr = \"{}\"\n", d.addr));
    let source = format!("file:{}", path.display());
    let refused = || server.status()["discovery"][&source]["refused"].as_u64().unwrap_or(0);
    assert!(wait_until(NOTICE, || refused() >= 1), "{}", server.status());
    assert_eq!(in_service(&server.status()), ["c", "d"]);
    server.reload(config(vec![node("c", c.addr)], Vec::new())).unwrap();
    assert_eq!(in_service(&server.status()), ["c"]);
    assert!(server.status()["discovery"].as_object().unwrap().is_empty());
    server.shutdown();
}

#[test]
fn a_switch_whose_only_source_lists_no_node_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nodes.toml");
    write_atomically(&path, "# no node yet\n");
    let file = entry(&format!("file = \"{}\"\n", path.display()));
    let e = SwitchServer::start(config(Vec::new(), vec![file])).err().expect("no node at all");
    assert!(e.to_string().contains("no nodes"), "{e}");
}
