//! End to end: a live `locus_switch::SwitchServer` in front of three in-process
//! `locus_node::NodeServer`s serves a sequence of requests one at a time — with some POSTs
//! held open (their bodies withheld) so that loads are not all zero — and the node that
//! served each (`X-Locus-Node`) is what the simulator's front-end picks when fed the same
//! sequence of requests and completions, for lard, lard-r, chash, hash and rr.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use locus_core::{Method, NodeId, RequestInfo};
use locus_node::{NodeConfig, NodeServer};
use locus_policy::PolicyConfig;
use locus_sim::{FrontEnd, FrontEndLimit, SimPolicy};
use locus_switch::{HealthConfig, NodeEntry, SwitchConfig, SwitchServer};
use locus_test_support::Client;

const NODES: usize = 3;

/// One step of the script.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// GET a file on the keep-alive connection and wait for the whole response.
    Get(&'static str),
    /// Open a connection and send a POST head whose 4-byte body is withheld: the switch
    /// dispatches it and it stays in flight (load + 1 on its node) until released.
    Hold(usize, &'static str),
    /// Send the withheld body and read the response: the request completes.
    Release(usize),
}

fn script() -> Vec<Step> {
    use Step::*;
    let mut s = vec![Get("/f0"), Get("/f1"), Get("/f2"), Get("/f0"), Get("/f3")];
    s.extend([Hold(0, "/held/a"), Get("/f4"), Get("/f5"), Get("/f6"), Get("/f1")]);
    s.extend([Hold(1, "/held/b"), Hold(2, "/held/c"), Get("/f7"), Get("/f8"), Get("/f9"), Get("/f2")]);
    s.extend([Get("/f10"), Release(0), Get("/f11"), Get("/f12"), Hold(3, "/held/d"), Get("/f13")]);
    s.extend([Get("/f14"), Release(2), Get("/f15"), Release(1), Get("/f16"), Release(3)]);
    s.extend(["/f0", "/f5", "/f9", "/f12", "/f17", "/f18", "/f19", "/f3", "/f16"].map(Get));
    s
}

/// A keep-alive connection to the switch, with 20 s for each read.
fn connect(addr: SocketAddr) -> Client {
    let client = Client::connect(addr);
    client.stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    client
}

/// Read one response with a Content-Length body; returns (status, X-Locus-Node).
fn read(client: &mut Client) -> (u16, String) {
    let r = client.response(false);
    assert!(r.header("transfer-encoding").is_none(), "unexpected chunked response");
    (r.status, r.served_by().unwrap_or_default().to_string())
}

fn wait_in_flight(switch: &SwitchServer, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = switch.status()["in_flight"].as_u64().expect("in_flight");
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "in_flight stayed {got}, expected {want}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Run the script through a live switch: the node index that served each step's request
/// (for a hold, the node that answered on release).
fn live_choices(policy: PolicyConfig, nodes: &[NodeServer]) -> Vec<usize> {
    let config = SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        policy,
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeEntry {
                name: Some(format!("n{i}")),
                addr: n.addr(),
                weight: 1,
                handoff: None,
                admin: None,
            })
            .collect(),
        // Health checks must not take a node out during the test.
        health: HealthConfig { interval_ms: 600_000, ..HealthConfig::default() },
        ..SwitchConfig::default()
    };
    let switch = SwitchServer::start(config).expect("switch starts");
    let mut client = connect(switch.addr());
    let mut held: Vec<Option<Client>> = (0..8).map(|_| None).collect();
    let mut held_step = [0usize; 8];
    let steps = script();
    let mut choice = vec![usize::MAX; steps.len()];
    let mut in_flight = 0;
    let index_of =
        |name: &str| name.strip_prefix('n').and_then(|i| i.parse::<usize>().ok()).expect("node name");
    for (i, step) in steps.iter().enumerate() {
        match *step {
            Step::Get(t) => {
                client.send(format!("GET {t} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
                let (status, node) = read(&mut client);
                assert_eq!(status, 200, "{t}");
                choice[i] = index_of(&node);
                // The switch completes the request just after the response leaves it: wait
                // for that, so the next decision sees the loads the simulator sees.
                wait_in_flight(&switch, in_flight);
            }
            Step::Hold(k, t) => {
                let mut c = connect(switch.addr());
                c.send(format!("POST {t} HTTP/1.1\r\nHost: test\r\nContent-Length: 4\r\n\r\n").as_bytes());
                in_flight += 1;
                wait_in_flight(&switch, in_flight);
                held[k] = Some(c);
                held_step[k] = i;
            }
            Step::Release(k) => {
                let mut c = held[k].take().expect("held");
                c.send(b"done");
                let (status, node) = read(&mut c);
                assert_eq!(status, 405, "a node answers POST to a file with 405");
                choice[held_step[k]] = index_of(&node);
                in_flight -= 1;
                wait_in_flight(&switch, in_flight);
                choice[i] = choice[held_step[k]];
            }
        }
    }
    drop(client);
    switch.shutdown();
    choice
}

/// Feed the same script to the simulator's front-end: requests in order, each GET
/// completing before the next step, holds completing at their release.
fn simulated_choices(policy: &SimPolicy) -> Vec<usize> {
    let mut fe =
        FrontEnd::new(policy, NODES, 25, 65, FrontEndLimit::Policy, Duration::from_millis(5000), None)
            .expect("front-end");
    let steps = script();
    let mut choice = vec![usize::MAX; steps.len()];
    let mut held: Vec<Option<(NodeId, u64)>> = vec![None; 8];
    for (i, step) in steps.iter().enumerate() {
        let now = i as u64 * 1_000_000;
        match *step {
            Step::Get(t) => {
                let req = RequestInfo::new(Method::Get, t);
                assert!(fe.has_room());
                let node = fe.assign(&req, now).expect("a node is up");
                fe.complete(node, req.target_hash, now);
                choice[i] = node.index();
            }
            Step::Hold(k, t) => {
                let req = RequestInfo::new(Method::Post, t);
                let node = fe.assign(&req, now).expect("a node is up");
                held[k] = Some((node, req.target_hash));
                choice[i] = node.index();
            }
            Step::Release(k) => {
                let (node, hash) = held[k].take().expect("held");
                fe.complete(node, hash, now);
                choice[i] = node.index();
            }
        }
    }
    choice
}

#[test]
fn live_switch_and_simulator_pick_the_same_nodes() {
    let root = tempfile::tempdir().unwrap();
    for i in 0..20 {
        std::fs::write(root.path().join(format!("f{i}")), format!("file {i}\n").repeat(i + 1)).unwrap();
    }
    let nodes: Vec<NodeServer> = (0..NODES)
        .map(|i| {
            NodeServer::start(NodeConfig {
                name: format!("n{i}"),
                root: root.path().to_path_buf(),
                workers: 1,
                cpu_threads: 1,
                ..NodeConfig::default()
            })
            .expect("node starts")
        })
        .collect();
    for name in ["lard", "lard-r", "chash", "hash", "rr"] {
        let policy = SimPolicy::from_name(name).unwrap();
        let live = live_choices(policy.front_end_config(25, 65).unwrap(), &nodes);
        let simulated = simulated_choices(&policy);
        assert_eq!(live, simulated, "{name}: live switch (left) vs simulator (right)");
        // The script does exercise the choices: more than one node is used.
        let used: std::collections::HashSet<usize> = live.iter().copied().collect();
        assert!(used.len() > 1, "{name} used only {used:?}");
    }
    for n in nodes {
        n.shutdown();
    }
}
