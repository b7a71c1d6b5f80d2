//! Handoff mode end to end, as root in the lab's network namespaces (`#[ignore]`d, run by
//! `./quickstart test`): `locus switch --mode handoff` with its tc forwarder on the switch's
//! interface, `locus node` with the handoff agent. Byte-exact 1 KB and 1 MB responses that do
//! not pass the switch; keep-alive with a re-handoff between requests; a pipelined pair that
//! crosses nodes; a switch restart with live handed-off connections, cleartext and HTTPS (the
//! TLS session lives on the node and moves on through the new switch); a node that never
//! answers a HandOver (its HTTPS session then served by the switch); a wrong key refused; a
//! node refusal (it lacks the virtual IP) served by the switch's proxy path.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use locus_rig::servers::{
    CertKind, HTTP_PORT, NodeSpec, Server, SwitchSpec, TlsFiles, locus_node, locus_switch, write_handoff_key,
    write_tls_files,
};
use locus_rig::{LabNetwork, Net, tear_down_everything};
use locus_test_support::{Client, Response, locus_binary, require_namespaces, watchdog};

/// Port of the switch's TLS listener on the virtual IP.
const HTTPS_PORT: u16 = 443;
/// The name on its certificate.
const TLS_NAME: &str = "locus.test";

/// Deterministic content of a site file.
fn content(name: &str, len: usize) -> Vec<u8> {
    let seed = name.bytes().fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (0..len).map(|i| b'a' + ((i as u32).wrapping_mul(7).wrapping_add(seed) % 26) as u8).collect()
}

/// A private bpffs mount for the forwarder's pins, unmounted on drop.
struct Bpffs(PathBuf);

impl Bpffs {
    fn new(dir: PathBuf) -> Bpffs {
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount").args(["-t", "bpf", "bpf"]).arg(&dir).status().unwrap().success();
        assert!(ok, "mount -t bpf on {}", dir.display());
        Bpffs(dir)
    }
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A lab with nodes running the agent and a handoff switch.
struct HandoffLab {
    net: Net,
    scratch: tempfile::TempDir,
    nodes: Vec<Server>,
    switch: Option<Server>,
    key: PathBuf,
    pins: Option<Bpffs>,
    policy: String,
    mode: String,
    /// Nodes run the agent (always in handoff mode; in l4 mode, for cloning).
    agents: bool,
    /// Servers behind the agents (NGINX), kept running.
    _upstreams: Vec<Server>,
    /// The switch's certificate, when it also terminates TLS (on the virtual IP, port 443).
    tls: Option<TlsFiles>,
    /// Agents the switch is given instead of the nodes' own, by node index.
    agent_instead: Vec<(usize, SocketAddr)>,
}

impl HandoffLab {
    fn start(nodes: usize, policy: &str, pinned: bool) -> HandoffLab {
        HandoffLab::start_mode(nodes, policy, pinned, "handoff", true)
    }

    /// `mode` "handoff" or "l4"; `agents`: nodes run the agent (in l4 mode: with cloning).
    fn start_mode(nodes: usize, policy: &str, pinned: bool, mode: &str, agents: bool) -> HandoffLab {
        HandoffLab::start_full(nodes, policy, pinned, mode, agents, false, false)
    }

    /// As `start_mode`; with `nginx`, each node runs NGINX on port 8080 and its agent relays
    /// handed-off connections to it (an unmodified server behind the agent); with `tls`, the
    /// switch also terminates TLS on port 443 of the virtual IP.
    fn start_full(
        nodes: usize,
        policy: &str,
        pinned: bool,
        mode: &str,
        agents: bool,
        nginx: bool,
        tls: bool,
    ) -> HandoffLab {
        let l4 = mode == "l4";
        let net = Net::Namespaces(LabNetwork::create(nodes).expect("lab network"));
        let scratch = tempfile::tempdir().unwrap();
        let site = scratch.path().join("site");
        std::fs::create_dir_all(&site).unwrap();
        for (name, len) in [("f1k", 1024), ("f1m", 1 << 20)] {
            std::fs::write(site.join(name), content(name, len)).unwrap();
        }
        for i in 0..32 {
            let name = format!("t{i}");
            std::fs::write(site.join(&name), content(&name, 2000 + i * 10)).unwrap();
        }
        let key = scratch.path().join("handoff.key");
        write_handoff_key(&key).unwrap();
        let locus = locus_binary();
        let mut servers = Vec::new();
        for i in 1..=nodes {
            let role = format!("node{i}");
            let upstream = if nginx {
                let s = locus_rig::servers::nginx_static(&net, scratch.path(), &role, &site, None)
                    .expect("nginx");
                let addr = s.addr;
                servers.push(s);
                Some(addr)
            } else {
                None
            };
            let spec = NodeSpec {
                handoff_upstream: upstream,
                admin: true,
                handoff_key_file: agents.then(|| key.clone()),
                handoff_clone: l4 && agents,
                listen_any: l4,
                ..NodeSpec::new(&role, &site)
            };
            servers.push(locus_node(&net, &locus, scratch.path(), &spec).expect("node starts"));
        }
        // NGINX instances stay running in `extra`; `nodes` lists the Locus nodes only.
        let (servers, extra): (Vec<Server>, Vec<Server>) =
            servers.into_iter().partition(|s| s.name != "nginx");
        let pins = pinned.then(|| Bpffs::new(scratch.path().join("bpffs")));
        let tls =
            tls.then(|| write_tls_files(&scratch.path().join("tls"), CertKind::EcdsaP256, TLS_NAME).unwrap());
        let mut lab = HandoffLab {
            net,
            scratch,
            nodes: servers,
            switch: None,
            key,
            pins,
            policy: policy.to_string(),
            mode: mode.to_string(),
            agents,
            _upstreams: extra,
            tls,
            agent_instead: Vec::new(),
        };
        lab.start_switch(None);
        lab
    }

    fn start_switch(&mut self, key: Option<&Path>) {
        let spec = SwitchSpec {
            admin: true,
            handoff_key_file: self.agents.then(|| key.unwrap_or(&self.key).to_path_buf()),
            handoff_agents: self
                .nodes
                .iter()
                .enumerate()
                .filter_map(|(i, n)| {
                    self.agent_instead.iter().find(|(j, _)| *j == i).map(|(_, a)| *a).or(n.agent)
                })
                .collect(),
            handoff_pin_dir: self.pins.as_ref().map(|p| p.0.join("locus")),
            tls: self.tls.clone().map(|t| (t, self.net.switch_addr(HTTPS_PORT).unwrap())),
            ..SwitchSpec::new(&self.policy, &self.mode, 1, 1000)
        };
        let named: Vec<(String, SocketAddr)> = self.nodes.iter().map(|n| (n.name.clone(), n.addr)).collect();
        let listen = self.net.switch_addr(HTTP_PORT).unwrap();
        let switch = locus_switch(&self.net, &locus_binary(), self.scratch.path(), listen, &named, &spec)
            .expect("switch");
        self.switch = Some(switch);
        // The switch connects its control channels to the agents right after it starts.
        if key.is_none() && self.agents {
            let n = self.nodes.len() as u64;
            self.wait_for(|lab| lab.switch_status()["handoff"]["channels_up"] == n, "control channels");
            if !self.agent_instead.is_empty() {
                return;
            }
            // And every agent has the switch's Hello: before it, a node serves what it is asked
            // itself rather than asking the switch.
            self.wait_for(
                |lab| lab.nodes.iter().all(|n| lab.admin_get(n.admin.unwrap())["handoff_node_id"].is_u64()),
                "the switch's Hello on every node",
            );
        } else {
            self.wait_for(|lab| lab.switch_status()["handoff"].is_object(), "switch status");
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// SIGTERM the switch and wait for it to exit.
    fn stop_switch(&mut self) {
        let mut switch = self.switch.take().expect("a switch");
        let pid = switch.process.pid();
        Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
        for _ in 0..200 {
            if switch.process.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("switch did not exit on SIGTERM");
    }

    fn vip(&self) -> SocketAddr {
        self.net.switch_addr(HTTP_PORT).unwrap()
    }

    /// A TLS client of the switch's HTTPS listener (from the client host).
    fn tls_client(&self) -> Client<locus_test_support::TlsClientStream> {
        let tls = self.tls.as_ref().expect("a lab started with tls");
        let pem = std::fs::read_to_string(&tls.cert).unwrap();
        let addr = self.net.switch_addr(HTTPS_PORT).unwrap();
        self.client(|| Client::connect_tls(addr, locus_test_support::client_config(&pem), TLS_NAME))
    }

    /// Run `f` on the client host.
    fn client<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        self.net.on_host("client", || Ok::<T, locus_rig::RigError>(f())).unwrap()
    }

    fn admin_get(&self, addr: SocketAddr) -> serde_json::Value {
        self.client(|| {
            let mut c = Client::connect(addr);
            c.send("GET /locus/status HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
            let reply = c.read_response(false);
            reply.and_then(|r| serde_json::from_slice(&r.body).ok()).unwrap_or(serde_json::Value::Null)
        })
    }

    fn switch_status(&self) -> serde_json::Value {
        self.admin_get(self.switch.as_ref().unwrap().admin.unwrap())
    }

    fn wait_for(&self, mut ok: impl FnMut(&HandoffLab) -> bool, what: &str) {
        for _ in 0..100 {
            if ok(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("waited in vain for {what}");
    }

    /// Bytes sent out of the switch's interface so far.
    fn switch_tx_bytes(&self) -> u64 {
        let ns = &self.net.lab().unwrap().host("switch").unwrap().namespace;
        let out = Command::new("ip").args(["-n", ns, "-s", "-j", "link", "show", "eth0"]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0]["stats64"]["tx"]["bytes"].as_u64().expect("tx bytes")
    }

    /// Which node serves `path` on a fresh connection.
    fn node_of(&self, path: &str) -> String {
        self.client(|| {
            let mut c = Client::connect(self.vip());
            node(&c.get(path))
        })
    }

    /// Two targets the policy puts on different nodes.
    fn targets_on_two_nodes(&self) -> (String, String) {
        let first = "/t0".to_string();
        let home = self.node_of(&first);
        for i in 1..32 {
            let other = format!("/t{i}");
            if self.node_of(&other) != home {
                return (first, other);
            }
        }
        panic!("every target on {home}");
    }
}

/// The node that served `r` (its `X-Locus-Node`; empty when none says).
fn node(r: &Response) -> String {
    r.served_by().unwrap_or_default().to_string()
}

fn handoff_counter(status: &serde_json::Value, name: &str) -> u64 {
    status["handoff"][name].as_u64().unwrap_or_else(|| panic!("handoff.{name} in {status}"))
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn handoff_serves_1kb_and_1mb_byte_exact_and_the_responses_bypass_the_switch() {
    require_namespaces("the lab's network namespaces");
    watchdog("handoff byte-exact", Duration::from_secs(180), tear_down_everything);
    let lab = HandoffLab::start(2, "lard", false);
    let vip = lab.vip();
    let tx_before = lab.switch_tx_bytes();
    let served = lab.client(|| {
        let mut nodes = Vec::new();
        for (path, name, len) in [("/f1k", "f1k", 1024), ("/f1m", "f1m", 1 << 20)] {
            for _ in 0..3 {
                let mut c = Client::connect(vip);
                let r = c.get(path);
                assert_eq!(r.status, 200);
                assert!(r.body == content(name, len), "{path}: body differs");
                nodes.push(node(&r));
            }
        }
        nodes
    });
    assert!(served.iter().all(|n| n.starts_with("node")), "{served:?}");
    let tx = lab.switch_tx_bytes() - tx_before;
    // Three 1 MB responses went to the client; through the switch they would be > 3 MB.
    assert!(tx < 256 * 1024, "the switch sent {tx} bytes: responses passed through it");
    let status = lab.switch_status();
    assert_eq!(handoff_counter(&status, "handoffs"), 6, "{status}");
    assert_eq!(handoff_counter(&status, "served_here"), 0, "{status}");
    // The nodes report the closes; the switch forgets the connections.
    lab.wait_for(|l| handoff_counter(&l.switch_status(), "on_nodes_now") == 0, "Closed from the nodes");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn keep_alive_requests_move_between_nodes_and_a_pipelined_pair_crosses_nodes() {
    require_namespaces("the lab's network namespaces");
    watchdog("handoff re-handoff", Duration::from_secs(180), tear_down_everything);
    let lab = HandoffLab::start(2, "hash", false);
    let (a, b) = lab.targets_on_two_nodes();
    let (node_a, node_b) = (lab.node_of(&a), lab.node_of(&b));
    let vip = lab.vip();
    lab.client(|| {
        let mut c = Client::connect(vip);
        for path in [&a, &b, &a, &b] {
            let r = c.get(path);
            assert_eq!(r.status, 200);
            assert_eq!(r.body, content(&path[1..], r.body.len()), "{path}");
            let want = if path == &a { &node_a } else { &node_b };
            assert_eq!(&node(&r), want, "{path} on the node the policy chose");
        }
        // Pipelined: both requests in one segment; the second one moves the connection.
        let mut c = Client::connect(vip);
        c.send(format!("GET {a} HTTP/1.1\r\nHost: lab\r\n\r\nGET {b} HTTP/1.1\r\nHost: lab\r\n\r\n"));
        let (ra, rb) = (c.response(false), c.response(false));
        assert_eq!((node(&ra).as_str(), node(&rb).as_str()), (node_a.as_str(), node_b.as_str()));
        assert_eq!(ra.body, content(&a[1..], ra.body.len()));
        assert_eq!(rb.body, content(&b[1..], rb.body.len()));
    });
    let status = lab.switch_status();
    assert!(handoff_counter(&status, "rehandoffs") >= 4, "{status}");
    assert_eq!(handoff_counter(&status, "served_here"), 0, "{status}");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn handed_off_connections_survive_a_switch_restart() {
    require_namespaces("the lab's network namespaces");
    watchdog("handoff restart", Duration::from_secs(180), tear_down_everything);
    let mut lab = HandoffLab::start(2, "hash", true);
    let (a, b) = lab.targets_on_two_nodes();
    let node_b = lab.node_of(&b);
    let vip = lab.vip();
    let mut client = lab.client(|| {
        let mut c = Client::connect(vip);
        assert_eq!(c.get(&a).status, 200);
        c
    });
    lab.stop_switch();
    // The forwarder keeps steering the connection while no switch runs.
    lab.client(|| {
        let r = client.get(&a);
        assert_eq!((r.status, r.body.len()), (200, content(&a[1..], r.body.len()).len()));
    });
    lab.start_switch(None);
    // The new switch adopts the pinned entries and moves the connection on.
    lab.client(|| {
        let r = client.get(&b);
        assert_eq!(r.status, 200);
        assert_eq!(node(&r), node_b);
        assert_eq!(r.body, content(&b[1..], r.body.len()));
    });
    lab.wait_for(|l| handoff_counter(&l.switch_status(), "rehandoffs") == 1, "the re-handoff counted");
    drop(client);
    // The close reaches the new switch, which never saw the connection's first handoff.
    lab.wait_for(|l| handoff_counter(&l.switch_status(), "on_nodes_now") == 0, "Closed");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_handed_off_https_session_survives_a_switch_restart_and_moves_on_through_the_new_one() {
    require_namespaces("the lab's network namespaces");
    watchdog("https handoff restart", Duration::from_secs(180), tear_down_everything);
    let mut lab = HandoffLab::start_full(2, "hash", true, "handoff", true, false, true);
    let (a, b) = lab.targets_on_two_nodes();
    let node_b = lab.node_of(&b);
    let mut client = lab.tls_client();
    lab.client(|| assert_eq!(client.get(&a).status, 200));
    assert_eq!(lab.switch_status()["handoff"]["tls"]["handoffs"], 1);
    lab.stop_switch();
    // The session lives on the node; the forwarder keeps steering its packets.
    lab.client(|| {
        let r = client.get(&a);
        assert_eq!((r.status, r.body.clone()), (200, content(&a[1..], r.body.len())));
    });
    lab.start_switch(None);
    // The new switch never saw the session: it hands it on with the state the node gives.
    lab.client(|| {
        let r = client.get(&b);
        assert_eq!((r.status, node(&r)), (200, node_b.clone()));
        assert_eq!(r.body, content(&b[1..], r.body.len()));
    });
    lab.wait_for(|l| handoff_counter(&l.switch_status(), "rehandoffs") == 1, "the re-handoff counted");
    drop(client);
    lab.wait_for(|l| handoff_counter(&l.switch_status(), "on_nodes_now") == 0, "Closed");
}

/// An agent on `role`'s host that takes the switch's control channels (right key, `key_file`)
/// and never answers: a node that died in the middle of a handoff. Its address.
fn mute_agent(net: &Net, role: &str, key_file: &Path) -> SocketAddr {
    let addr = net.listen_addr(role, 7999).unwrap();
    let key = locus_handoff::ControlKey::from_hex(&std::fs::read_to_string(key_file).unwrap()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // A thread started on the host's thread lives in its namespace.
    net.on_host(role, move || {
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = locus_handoff::ControlListener::bind(addr, &key).await.unwrap();
                tx.send(()).unwrap();
                loop {
                    let Ok(mut channel) = listener.accept().await else { continue };
                    tokio::spawn(async move { while channel.recv().await.is_ok() {} });
                }
            });
        });
        Ok::<(), locus_rig::RigError>(())
    })
    .unwrap();
    rx.recv_timeout(Duration::from_secs(5)).unwrap();
    addr
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_node_that_dies_mid_handoff_leaves_the_https_session_to_the_switch_and_nothing_is_lost() {
    require_namespaces("the lab's network namespaces");
    watchdog("https handoff to a mute node", Duration::from_secs(180), tear_down_everything);
    let mut lab = HandoffLab::start_full(2, "hash", false, "handoff", true, false, true);
    let (a, _) = lab.targets_on_two_nodes();
    let home = lab.node_of(&a);
    let index = lab.nodes.iter().position(|n| n.name == home).unwrap();
    let mute = mute_agent(&lab.net, &home, &lab.key);
    lab.stop_switch();
    lab.agent_instead = vec![(index, mute)];
    lab.start_switch(None);
    // HandOver goes out, no Ready comes: the switch takes the connection back (its packets
    // held meanwhile) and serves the session it took over from rustls.
    let mut client = lab.tls_client();
    lab.client(|| {
        for _ in 0..2 {
            let r = client.get(&a);
            assert_eq!((r.status, r.body.clone()), (200, content(&a[1..], r.body.len())));
        }
    });
    let s = lab.switch_status();
    assert_eq!((handoff_counter(&s, "failed"), handoff_counter(&s, "served_here")), (1, 1), "{s}");
    assert_eq!(s["handoff"]["tls"]["handoffs"], 0, "{s}");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_switch_with_the_wrong_key_hands_nothing_off_and_still_serves() {
    require_namespaces("the lab's network namespaces");
    watchdog("handoff wrong key", Duration::from_secs(120), tear_down_everything);
    let mut lab = HandoffLab::start(2, "lard", false);
    lab.stop_switch();
    let wrong = lab.scratch.path().join("wrong.key");
    write_handoff_key(&wrong).unwrap();
    lab.start_switch(Some(&wrong));
    let vip = lab.vip();
    lab.client(|| {
        let mut c = Client::connect(vip);
        let r = c.get("/f1k");
        assert_eq!((r.status, r.body == content("f1k", 1024)), (200, true));
    });
    let status = lab.switch_status();
    assert_eq!(handoff_counter(&status, "handoffs"), 0, "{status}");
    for node in &lab.nodes {
        let s = lab.admin_get(node.admin.unwrap());
        assert_eq!(s["handoffs_accepted"].as_u64(), Some(0), "{s}");
    }
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn a_node_that_refuses_a_connection_leaves_it_to_the_switch_and_the_client_sees_no_error() {
    require_namespaces("the lab's network namespaces");
    watchdog("handoff refusal", Duration::from_secs(120), tear_down_everything);
    let lab = HandoffLab::start(1, "lard", false);
    // Without the virtual IP the node cannot restore the client's connection.
    let ns = lab.net.lab().unwrap().host("node1").unwrap().namespace.clone();
    let vip = lab.vip();
    let ok = Command::new("ip")
        .args(["-n", &ns, "addr", "del", &format!("{}/32", vip.ip()), "dev", "lo"])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    lab.client(|| {
        let mut c = Client::connect(vip);
        for _ in 0..2 {
            let r = c.get("/f1m");
            assert_eq!((r.status, r.body == content("f1m", 1 << 20)), (200, true));
        }
    });
    let status = lab.switch_status();
    assert_eq!(handoff_counter(&status, "refused"), 1, "{status}");
    assert_eq!(handoff_counter(&status, "served_here"), 1, "{status}");
    assert_eq!(handoff_counter(&status, "handoffs"), 0, "{status}");
    // The refused request, read again from the restored connection, keeps its dispatch: two
    // requests, two policy calls.
    let counts = (status["requests"].as_u64(), status["policy_assignments"].as_u64());
    assert_eq!(counts, (Some(2), Some(2)), "{status}");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn l4_directs_each_connection_at_its_syn_without_terminating_it() {
    require_namespaces("the lab's network namespaces");
    watchdog("l4 round robin", Duration::from_secs(120), tear_down_everything);
    let lab = HandoffLab::start_mode(2, "lard", false, "l4", false);
    let vip = lab.vip();
    let tx_before = lab.switch_tx_bytes();
    let nodes: Vec<String> = lab.client(|| {
        (0..6)
            .map(|_| {
                let mut c = Client::connect(vip);
                let r = c.get("/f1m");
                assert!(r.status == 200 && r.body == content("f1m", 1 << 20));
                // Keep-alive: the connection stays on the node picked at its SYN.
                let again = c.get("/f1k");
                assert_eq!(node(&again), node(&r));
                node(&r)
            })
            .collect()
    });
    let used: HashSet<&String> = nodes.iter().collect();
    assert_eq!(used.len(), 2, "round robin at the SYN uses both nodes: {nodes:?}");
    let tx = lab.switch_tx_bytes() - tx_before;
    assert!(tx < 512 * 1024, "the switch sent {tx} bytes for 6 MB of responses");
    let status = lab.switch_status();
    assert_eq!(status["mode"], "l4", "{status}");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn l4_with_csld_the_policy_counts_the_forwarders_connections_and_weights_its_table() {
    require_namespaces("the lab's network namespaces");
    watchdog("l4 csld", Duration::from_secs(120), tear_down_everything);
    let lab = HandoffLab::start_mode(2, "csld", false, "l4", false);
    let vip = lab.vip();
    // Eight keep-alive connections stay open across several CSLD periods (200 ms).
    let (open, nodes): (Vec<Client>, Vec<String>) = lab.client(|| {
        (0..8)
            .map(|_| {
                let mut c = Client::connect(vip);
                let r = c.get("/f1k");
                assert!(r.status == 200 && r.body == content("f1k", 1024));
                let n = node(&r);
                (c, n)
            })
            .unzip()
    });
    let used: HashSet<&String> = nodes.iter().collect();
    assert_eq!(used.len(), 2, "the weighted table uses both nodes: {nodes:?}");
    // Without cloning agents the policy learns of connections from the forwarder's entries:
    // its load counts them (at least these 8), and after a period with connections it has
    // weights for both nodes.
    lab.wait_for(
        |lab| {
            let s = lab.switch_status();
            let nodes = s["nodes"].as_array().cloned().unwrap_or_default();
            nodes.iter().map(|n| n["load"].as_u64().unwrap_or(0)).sum::<u64>() >= 8
                && nodes.iter().all(|n| n["policy_weight"].as_f64().is_some_and(|w| w > 0.0))
        },
        "the policy counting 8 connections and weighting both nodes",
    );
    // (The forwarder sees no close in l4 without agents: a closed connection stays counted
    // until its entry idles out, `expire_idle_s`; the readiness probe's entry is one of them.)
    drop(open);
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn l4_nodes_clone_connections_to_the_node_the_switch_policy_picks() {
    require_namespaces("the lab's network namespaces");
    watchdog("l4 cloning", Duration::from_secs(180), tear_down_everything);
    let lab = HandoffLab::start_mode(2, "hash", false, "l4", true);
    let vip = lab.vip();
    let served: HashMap<String, HashSet<String>> = lab.client(|| {
        let mut served: HashMap<String, HashSet<String>> = HashMap::new();
        for _round in 0..4 {
            for i in 0..8 {
                let path = format!("/t{i}");
                let mut c = Client::connect(vip);
                let r = c.get(&path);
                assert_eq!(r.status, 200);
                assert_eq!(r.body, content(&path[1..], 2000 + i * 10), "{path}");
                served.entry(path).or_default().insert(node(&r));
            }
        }
        served
    });
    let status = lab.switch_status();
    // On failure, what the nodes saw too: a node serves a request itself when it has no answer
    // to its Route (no channel or Hello yet, no RouteTo within its timeout).
    let nodes: Vec<serde_json::Value> = lab.nodes.iter().map(|n| lab.admin_get(n.admin.unwrap())).collect();
    for (path, served_by) in &served {
        assert_eq!(
            served_by.len(),
            1,
            "{path} served by {served_by:?}: the policy keeps a target on one node\nswitch: {status}\nnodes: {nodes:?}"
        );
    }
    let used: HashSet<&String> = served.values().flatten().collect();
    assert_eq!(used.len(), 2, "targets on both nodes: {served:?}");
    assert!(handoff_counter(&status, "routes") >= 32, "{status}");
    // One dispatch per request in l4 too: the policy is asked once per Route, and a
    // connection cloned on to the node the policy picked is not asked about again.
    assert_eq!(status["policy_assignments"].as_u64(), Some(handoff_counter(&status, "routes")), "{status}");
    // Round robin at the SYN sends about half the connections to the other node first.
    assert!(handoff_counter(&status, "rehandoffs") >= 4, "{status}");
    assert_eq!(handoff_counter(&status, "served_here"), 0, "{status}");
}

#[test]
#[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
fn an_unmodified_nginx_behind_the_agent_answers_handed_off_connections_directly() {
    require_namespaces("the lab's network namespaces");
    if locus_rig::find_program("nginx").is_none() {
        eprintln!("skipped: nginx is not installed");
        return;
    }
    watchdog("handoff to nginx", Duration::from_secs(120), tear_down_everything);
    let lab = HandoffLab::start_full(1, "lard", false, "handoff", true, true, false);
    let vip = lab.vip();
    let tx_before = lab.switch_tx_bytes();
    let servers: Vec<String> = lab.client(|| {
        let mut c = Client::connect(vip);
        (0..3)
            .map(|_| {
                let r = c.get("/f1m");
                assert!(r.status == 200 && r.body == content("f1m", 1 << 20));
                r.header("server").unwrap_or_default().to_string()
            })
            .collect()
    });
    assert!(servers.iter().all(|s| s.starts_with("nginx")), "answered by {servers:?}");
    let tx = lab.switch_tx_bytes() - tx_before;
    assert!(tx < 256 * 1024, "the switch sent {tx} bytes: responses passed through it");
    let status = lab.switch_status();
    assert_eq!(handoff_counter(&status, "handoffs"), 1, "{status}");
}
