//! Reloading a running node's configuration in place (`NodeServer::reload`, what SIGHUP
//! calls), with in-process nodes on 127.0.0.1: a smaller cache evicts down to its new size
//! (counted) and a larger one takes more; a class added by a reload classifies requests; a
//! peer added to `[coop]` is used; a new peer key signs and checks from the reload on; TLS
//! files are read again; DC mode's threshold, replication and consistency change; a
//! configuration that does not check (a file missing, a value out of range, a broken
//! certificate) is refused and the node serves on with the old settings; a restart-only change
//! is named in the report and keeps its running value; requests in flight across reloads all
//! complete, and an open connection's next request sees the new settings.

mod coop_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use coop_support::{coop_figure, free_port, key_homed_at, url, wait_until, write_doc};
use locus_node::{ByteSize, ClassConfig, CoopConfig, NodeConfig, NodeReloadError, NodeServer, Replacement};
use locus_test_support::{Client, get};

/// A body of `len` bytes that differs at every offset modulo 251.
fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i % 251) as u8).wrapping_add(salt)).collect()
}

/// A running node, the configuration it started with and its root (removed with it).
struct Reloadable {
    server: Option<NodeServer>,
    config: NodeConfig,
    root: tempfile::TempDir,
}

impl Reloadable {
    /// A node over a new root, `edit` applied to the test configuration (an LRU cache of
    /// 64 KiB, one worker) before start.
    fn start(edit: impl FnOnce(&mut NodeConfig)) -> Reloadable {
        let root = tempfile::tempdir().unwrap();
        let mut config = NodeConfig {
            root: root.path().to_path_buf(),
            workers: 1,
            cpu_threads: 1,
            name: "r1".into(),
            admin: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            ..NodeConfig::default()
        };
        config.cache.capacity = ByteSize::kib(64);
        config.cache.replacement = Replacement::Lru;
        edit(&mut config);
        let server = NodeServer::start(config.clone()).unwrap();
        Reloadable { server: Some(server), config, root }
    }

    fn server(&self) -> &NodeServer {
        self.server.as_ref().unwrap()
    }

    fn addr(&self) -> SocketAddr {
        self.server().addr()
    }

    /// Reload with the starting configuration, `edit` applied.
    fn reload(
        &self,
        edit: impl FnOnce(&mut NodeConfig),
    ) -> Result<locus_node::NodeReloadReport, NodeReloadError> {
        let mut config = self.config.clone();
        edit(&mut config);
        self.server().reload(config)
    }

    fn write(&self, rel: &str, data: &[u8]) -> PathBuf {
        let path = self.root.path().join(rel.trim_start_matches('/'));
        std::fs::write(&path, data).unwrap();
        path
    }

    fn status(&self, name: &str) -> u64 {
        let status = self.server().status();
        status[name].as_u64().unwrap_or_else(|| panic!("{name} in {status}"))
    }

    fn metrics(&self) -> String {
        get(self.server().admin_addr().unwrap(), "/metrics").text()
    }
}

impl Drop for Reloadable {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

/// A class of `size` bytes under `prefix` costing `cpu_ms` of CPU and `disk_ms` of modelled disk.
fn class(name: &str, prefix: &str, cpu_ms: f64, disk_ms: f64) -> ClassConfig {
    toml::from_str(&format!(
        "name = \"{name}\"\nprefix = \"{prefix}\"\ncost = {{ dist = \"const\", ms = {cpu_ms} }}\n\
         disk_ms = {disk_ms}\nsize = 100\n"
    ))
    .unwrap()
}

#[test]
fn a_smaller_cache_evicts_down_to_its_size_and_counts_it_and_a_larger_one_takes_more() {
    let node = Reloadable::start(|_| {});
    for i in 0..8 {
        node.write(&format!("/d{i}.bin"), &pattern(4096, i));
        assert_eq!(get(node.addr(), &format!("/d{i}.bin")).header("x-locus-cache"), Some("miss"));
    }
    assert_eq!((node.status("cache_objects"), node.status("cache_used_bytes")), (8, 8 * 4096));
    let report = node.reload(|c| c.cache.capacity = ByteSize::kib(8)).unwrap();
    assert_eq!(report.applied, vec!["cache.capacity"]);
    assert!(report.needs_restart.is_empty(), "{:?}", report.needs_restart);
    assert_eq!((report.cache_evicted.documents, report.cache_evicted.bytes), (6, 6 * 4096));
    assert_eq!(node.status("cache_capacity_bytes"), 8192);
    assert_eq!((node.status("cache_objects"), node.status("cache_used_bytes")), (2, 8192));
    assert_eq!(node.status("cache_evictions"), 6);
    // LRU: the two most recently used stay.
    for (i, expected) in [(6, "hit"), (7, "hit"), (0, "miss")] {
        let r = get(node.addr(), &format!("/d{i}.bin"));
        assert_eq!((r.header("x-locus-cache"), r.body == pattern(4096, i)), (Some(expected), true), "d{i}");
    }
    assert!(node.status("cache_used_bytes") <= 8192);
    // Growing evicts nothing and takes every document again.
    let report = node.reload(|c| c.cache.capacity = ByteSize::kib(64)).unwrap();
    assert_eq!((report.applied, report.cache_evicted.documents), (vec!["cache.capacity"], 0));
    for i in 0..8 {
        get(node.addr(), &format!("/d{i}.bin"));
    }
    assert_eq!((node.status("cache_objects"), node.status("reloads")), (8, 2));
    let metrics = node.metrics();
    assert!(metrics.contains("locus_node_reloads_total 2\n"), "{metrics}");
    assert!(metrics.contains("locus_node_reloads_refused_total 0\n"), "{metrics}");
}

#[test]
fn a_lower_object_limit_evicts_the_documents_over_it() {
    let node = Reloadable::start(|_| {});
    node.write("/small.bin", &pattern(1000, 1));
    node.write("/large.bin", &pattern(20_000, 2));
    get(node.addr(), "/small.bin");
    get(node.addr(), "/large.bin");
    let report = node.reload(|c| c.cache.max_object = ByteSize(10_000)).unwrap();
    assert_eq!((report.applied, report.cache_evicted.documents), (vec!["cache.max_object"], 1));
    let r = get(node.addr(), "/large.bin");
    assert_eq!((r.header("x-locus-cache"), r.body == pattern(20_000, 2)), (Some("bypass"), true));
    assert_eq!(get(node.addr(), "/small.bin").header("x-locus-cache"), Some("hit"));
}

#[test]
fn a_class_added_by_a_reload_classifies_requests() {
    let node = Reloadable::start(|c| c.classes = vec![class("a", "/cgi/a", 0.0, 0.0)]);
    assert_eq!(get(node.addr(), "/cgi/b").status, 404);
    let classes = node.root.path().join("classes.toml");
    std::fs::write(
        &classes,
        "[[classes]]\nname = \"b\"\nprefix = \"/cgi/b\"\ncost = { dist = \"const\", ms = 0 }\nsize = 64\n",
    )
    .unwrap();
    let report = node.reload(|c| c.class_file = Some(classes.clone())).unwrap();
    assert_eq!(report.applied, vec!["classes"]);
    for (target, name) in [("/cgi/a", "a"), ("/cgi/b?x=1", "b")] {
        let r = get(node.addr(), target);
        assert_eq!((r.status, r.header("x-locus-class")), (200, Some(name)), "{target}");
    }
    assert_eq!(get(node.addr(), "/cgi/b").body.len(), 64);
    assert_eq!(node.server().stats().dynamic, 3);
}

/// A coop node on `port` over `root` naming `peers` (ports), as `coop_support::start_node` makes it.
fn coop_config(name: &str, port: u16, root: &Path, peers: &[u16]) -> NodeConfig {
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
    config
}

#[test]
fn a_peer_added_to_coop_by_a_reload_is_used() {
    let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let ports = [free_port(), free_port()];
    // A starts alone; B already names A.
    let a_config = coop_config("a", ports[0], roots[0].path(), &[]);
    let a = NodeServer::start(a_config.clone()).unwrap();
    let b = NodeServer::start(coop_config("b", ports[1], roots[1].path(), &[ports[0]])).unwrap();
    // A document whose home is A once A knows B, the same version in both roots.
    let key = key_homed_at("doc", ports[0], &ports);
    let body = pattern(2048, 7);
    for r in &roots {
        write_doc(r.path(), &key, &body);
    }
    let mut config = a_config.clone();
    config.coop.as_mut().unwrap().peers = vec![url(ports[1])];
    let report = a.reload(config).unwrap();
    assert_eq!(report.applied, vec!["coop.peers"]);
    assert_eq!(coop_figure(&a, "members"), 2);
    wait_until("A checked its new peer", || a.status()["coop"]["peers"][0]["start_check"] == "reachable");
    // B reads it and tells the home, A, which now takes B's notices.
    assert_eq!(get(b.addr(), &key).header("x-locus-cache"), Some("miss"));
    wait_until("A's directory knows B holds it", || coop_figure(&a, "directory_entries") == 1);
    let r = get(a.addr(), &key);
    assert_eq!((r.status, r.header("x-locus-cache"), r.body == body), (200, Some("remote"), true));
    assert_eq!((coop_figure(&a, "remote_hits"), coop_figure(&a, "storage_reads")), (1, 0));
    assert_eq!(coop_figure(&b, "fetches_served"), 1);
    a.shutdown();
    b.shutdown();
}

#[test]
fn a_configuration_that_does_not_check_is_refused_and_the_old_settings_stay() {
    let node = Reloadable::start(|c| c.classes = vec![class("a", "/cgi/a", 0.0, 0.0)]);
    for i in 0..4 {
        node.write(&format!("/d{i}.bin"), &pattern(4096, i));
        get(node.addr(), &format!("/d{i}.bin"));
    }
    let missing = node.root.path().join("missing.toml");
    // A smaller cache and no class in a configuration whose class file is missing: nothing of
    // it is applied.
    let e = node
        .reload(|c| {
            c.cache.capacity = ByteSize::kib(4);
            c.classes.clear();
            c.class_file = Some(missing.clone());
        })
        .unwrap_err();
    assert!(matches!(e, NodeReloadError::Config(_)) && e.to_string().contains("missing.toml"), "{e}");
    let e = node
        .reload(|c| {
            c.cache.capacity = ByteSize::kib(4);
            c.limits.max_headers = 0;
        })
        .unwrap_err();
    assert!(e.to_string().contains("max_headers"), "{e}");
    let e = node.reload(|c| c.classes.push(class("a", "/cgi/a2", 0.0, 0.0))).unwrap_err();
    assert!(e.to_string().contains("\"a\""), "a repeated class is named: {e}");
    assert_eq!((node.status("reloads"), node.status("reloads_refused")), (0, 3));
    assert_eq!((node.status("cache_capacity_bytes"), node.status("cache_objects")), (65536, 4));
    assert_eq!(get(node.addr(), "/cgi/a").header("x-locus-class"), Some("a"));
    assert_eq!(get(node.addr(), "/d0.bin").header("x-locus-cache"), Some("hit"));
    assert!(node.metrics().contains("locus_node_reloads_refused_total 3\n"));
}

#[test]
fn a_restart_only_change_is_named_in_the_report_and_keeps_its_running_value() {
    let node = Reloadable::start(|_| {});
    node.write("/f.txt", b"hello");
    let report = node
        .reload(|c| {
            c.listen = SocketAddr::from(([127, 0, 0, 1], 1));
            c.workers = 3;
            c.name = "renamed".into();
            c.cache.replacement = Replacement::Gdsf;
            c.limits.keepalive_timeout_ms = 1234;
        })
        .unwrap();
    assert_eq!(report.needs_restart, vec!["listen", "workers", "name", "cache.replacement"]);
    assert_eq!(report.applied, vec!["limits.keepalive_timeout_ms"]);
    let r = get(node.addr(), "/f.txt");
    assert_eq!((r.status, r.served_by()), (200, Some("r1")), "the old address and name serve on");
    // The next reload compares with the configuration in force, restart-only values kept.
    let report = node.reload(|c| c.limits.keepalive_timeout_ms = 1234).unwrap();
    assert!(report.applied.is_empty() && report.needs_restart.is_empty(), "{report:?}");
}

#[test]
fn a_request_in_flight_during_a_reload_completes_and_the_connection_then_sees_the_new_settings() {
    // The class waits 400 ms for its modelled disk: long enough to reload under it.
    let node = Reloadable::start(|c| c.classes = vec![class("slow", "/slow", 0.0, 400.0)]);
    let mut client = Client::connect(node.addr());
    client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    wait_until("the request is being served", || node.server().stats().dynamic_active == 1);
    let report = node
        .reload(|c| {
            c.classes.clear();
            c.cache.capacity = ByteSize::kib(4);
        })
        .unwrap();
    assert_eq!(report.applied, vec!["cache.capacity", "classes"]);
    let r = client.response(false);
    assert_eq!((r.status, r.header("x-locus-class"), r.body.len()), (200, Some("slow"), 100));
    // The same connection's next request is served under the new classes.
    assert_eq!(client.get("/slow").status, 404);
}

#[test]
fn requests_across_many_reloads_all_complete_intact() {
    let node = Arc::new(Reloadable::start(|c| c.workers = 2));
    let body = pattern(3000, 9);
    node.write("/f.bin", &body);
    node.write("/g.bin", &pattern(3000, 10));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Barrier::new(3));
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let (node, stop, started, body) = (node.clone(), stop.clone(), started.clone(), body.clone());
            std::thread::spawn(move || {
                let mut client = Client::connect(node.addr());
                started.wait();
                let mut served = 0;
                while !stop.load(Ordering::SeqCst) || served < 20 {
                    let r = client.get("/f.bin");
                    assert_eq!((r.status, r.body == body), (200, true), "request {served}");
                    served += 1;
                }
                served
            })
        })
        .collect();
    started.wait();
    for i in 0..20u64 {
        let report = node
            .reload(|c| {
                c.cache.capacity = ByteSize(if i % 2 == 0 { 3000 } else { 65536 });
                c.limits.keepalive_timeout_ms = 10_000 + i;
            })
            .unwrap();
        assert!(report.needs_restart.is_empty());
        // Another document pushes f out of the small cache now and then.
        assert_eq!(get(node.addr(), "/g.bin").status, 200);
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::SeqCst);
    let served: u32 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert!(served >= 40);
    assert_eq!((node.status("reloads"), node.status("requests_unanswered")), (20, 0));
    let statuses = node.server().status()["statuses"].clone();
    assert_eq!(statuses.as_object().unwrap().keys().collect::<Vec<_>>(), vec!["200"], "{statuses}");
}

/// `hex` written as the key file `path`.
fn write_key(path: &Path, hex: &str) {
    std::fs::write(path, format!("{hex}\n")).unwrap();
}

#[test]
fn a_new_peer_key_is_used_from_the_reload_on() {
    const K1: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
    const K2: &str = "aaaabbbbccccddddeeeeffff00001111aaaabbbbccccddddeeeeffff00001111";
    let keys = tempfile::tempdir().unwrap();
    let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let ports = [free_port(), free_port()];
    let configs: Vec<NodeConfig> = (0..2)
        .map(|i| {
            let key = keys.path().join(format!("n{i}.key"));
            write_key(&key, K1);
            let mut c = coop_config(["a", "b"][i], ports[i], roots[i].path(), &[ports[1 - i]]);
            c.peer_key_file = Some(key);
            c.coop.as_mut().unwrap().backoff_ms = 0;
            c
        })
        .collect();
    let [a, b] = [0, 1].map(|i| NodeServer::start(configs[i].clone()).unwrap());
    // Documents B is home for and holds: A asks B for them.
    let held_by_b = |prefix: &str| {
        let key = key_homed_at(prefix, ports[1], &ports);
        for r in &roots {
            write_doc(r.path(), &key, &pattern(1000, 5));
        }
        assert_eq!(get(b.addr(), &key).header("x-locus-cache"), Some("miss"));
        key
    };
    let first = held_by_b("first");
    assert_eq!(get(a.addr(), &first).header("x-locus-cache"), Some("remote"));
    // A alone takes the new key: B refuses its requests, A reads storage instead.
    write_key(configs[0].peer_key_file.as_ref().unwrap(), K2);
    assert_eq!(a.reload(configs[0].clone()).unwrap().applied, vec!["peer_key"]);
    let second = held_by_b("second");
    assert_eq!(get(a.addr(), &second).header("x-locus-cache"), Some("miss"));
    assert!(coop_figure(&a, "peer_failures.unauthorized") >= 1);
    assert!(b.status()["coop"]["peer_auth"]["refused"]["bad_mac"].as_u64().unwrap() >= 1);
    // Then B: the pair shares its memory again.
    write_key(configs[1].peer_key_file.as_ref().unwrap(), K2);
    assert_eq!(b.reload(configs[1].clone()).unwrap().applied, vec!["peer_key"]);
    let third = held_by_b("third");
    assert_eq!(get(a.addr(), &third).header("x-locus-cache"), Some("remote"));
    assert_eq!(coop_figure(&a, "remote_hits"), 2);
    a.shutdown();
    b.shutdown();
}

#[test]
fn tls_files_are_read_again_and_a_broken_one_is_refused() {
    let keys = tempfile::tempdir().unwrap();
    let (crt, key, pem) = locus_test_support::write_pair(keys.path(), "node", &["localhost"], (2020, 2090));
    let node = Reloadable::start(|c| c.tls = Some(locus_tls::TlsSettings::single(crt.clone(), key.clone())));
    node.write("/f.txt", b"over tls");
    let https_get = || {
        let config = locus_test_support::client_config(&pem);
        Client::connect_tls(node.addr(), config, "localhost").get("/f.txt")
    };
    assert_eq!(https_get().body, b"over tls");
    let report = node.reload(|_| {}).unwrap();
    assert!(report.tls_reloaded, "{report:?}");
    assert_eq!(report.applied, vec!["tls (certificates and ticket keys read again)"]);
    assert_eq!(node.server().status()["tls"]["reloads"], 1);
    std::fs::write(&crt, "not a certificate").unwrap();
    let e = node.reload(|c| c.cache.capacity = ByteSize::kib(4)).unwrap_err();
    assert!(matches!(e, NodeReloadError::Tls(_)), "{e}");
    assert_eq!(https_get().body, b"over tls", "new handshakes use the certificate in force");
    assert_eq!((node.status("reloads"), node.status("reloads_refused")), (1, 1));
    assert_eq!(node.status("cache_capacity_bytes"), 65536, "nothing of the refused reload applied");
}

#[test]
fn dc_threshold_replication_and_consistency_change_live_its_membership_does_not() {
    use locus_dc::consistency::ConsistencyMethod;
    let root = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut config = NodeConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], port)),
        root: root.path().to_path_buf(),
        workers: 1,
        cpu_threads: 1,
        name: "s0".into(),
        dc: Some(locus_node::DcConfig {
            servers: vec![format!("s0=127.0.0.1:{port}")],
            self_name: "s0".into(),
            ..locus_node::DcConfig::default()
        }),
        ..NodeConfig::default()
    };
    let node = NodeServer::start(config.clone()).unwrap();
    let dc = config.dc.as_mut().unwrap();
    dc.theta = 0.5;
    dc.replicate = false;
    dc.consistency = ConsistencyMethod::ActiveUpdate;
    dc.servers.push(format!("s1=127.0.0.1:{}", free_port()));
    let report = node.reload(config).unwrap();
    assert_eq!(report.applied, vec!["dc.theta", "dc.replicate", "dc.consistency"]);
    assert_eq!(report.needs_restart, vec!["dc.servers"]);
    let status = node.status()["dc"].clone();
    assert_eq!(
        (status["theta"].as_f64(), status["replicate"].as_bool()),
        (Some(0.5), Some(false)),
        "{status}"
    );
    assert_eq!(
        (status["consistency"].as_str(), status["members"].as_u64()),
        (Some("active-update"), Some(1))
    );
    node.shutdown();
}
