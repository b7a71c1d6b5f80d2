//! Integration tests of the runtime API (proxy mode, scripted back-ends that say who served):
//! over the control socket a node is drained (its request in flight finishes, no new one
//! comes) and enabled again, re-weighted, the policy's parameters shown and changed with its
//! state kept, the configuration file read again; malformed commands are refused with the
//! forms expected; the admin listener's `POST /locus/ctl` answers the same; `locus ctl` fails
//! on a refusal; and (root only) a user who is neither root nor the switch's is refused.

mod common;

use common::*;
use locus_policy::PolicyConfig;
use locus_switch::{NodeEntry, SwitchConfig, SwitchServer};
use locus_test_support::Client;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

fn backend(name: &str) -> ScriptedBackend {
    let name = name.to_string();
    ScriptedBackend::start(move |r| {
        let reply = ok_response(name.as_bytes(), &format!("X-Locus-Node: {name}\r\n"));
        if r.target == "/slow" {
            Action::Delay(Duration::from_millis(500), reply)
        } else {
            Action::Reply(reply)
        }
    })
}

fn config(policy: &str, backends: &[&ScriptedBackend], socket: &Path) -> SwitchConfig {
    SwitchConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin: Some("127.0.0.1:0".parse().unwrap()),
        control_socket: Some(socket.to_path_buf()),
        workers: 1,
        policy: PolicyConfig::from_name(policy).unwrap(),
        nodes: backends
            .iter()
            .enumerate()
            .map(|(i, b)| NodeEntry {
                name: Some(format!("n{i}")),
                addr: b.addr,
                weight: 1,
                handoff: None,
                admin: None,
            })
            .collect(),
        ..SwitchConfig::default()
    }
}

/// One command over a fresh connection to the control socket; the parsed answer.
fn ctl(socket: &Path, line: &str) -> Value {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer:?}"))
}

/// Who served `n` requests for distinct targets, over one keep-alive connection.
fn who_served(addr: SocketAddr, n: usize) -> Vec<String> {
    let mut client = Client::connect(addr);
    (0..n).map(|i| client.get(&format!("/p{i}")).header("x-locus-node").unwrap().to_string()).collect()
}

#[test]
fn a_drained_node_finishes_its_request_and_takes_no_new_one_until_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("switch.sock");
    let (a, b) = (backend("a"), backend("b"));
    let server = SwitchServer::start(config("rr", &[&a, &b], &socket)).unwrap();
    let addr = server.addr();
    let slow = std::thread::spawn(move || {
        let mut client = Client::connect(addr);
        (0..2).map(|_| client.get("/slow").header("x-locus-node").unwrap().to_string()).collect::<Vec<_>>()
    });
    assert!(wait_until(Duration::from_secs(5), || b.requests() >= 1), "a slow request on b");
    let drained = ctl(&socket, "drain n1");
    assert_eq!(
        (drained["ok"].as_bool(), drained["admin"].as_str()),
        (Some(true), Some("draining")),
        "{drained}"
    );
    assert!(who_served(addr, 10).iter().all(|n| n == "a"), "no new request for the drained node");
    assert!(slow.join().unwrap().contains(&"b".to_string()), "b's request in flight finished");
    let nodes = ctl(&socket, "nodes");
    assert_eq!(nodes["nodes"][1]["admin"], "draining", "{nodes}");
    // The request completes on the switch just after its last byte went to the client.
    assert!(wait_until(Duration::from_secs(5), || ctl(&socket, "nodes")["nodes"][1]["load"] == 0), "drained");
    assert_eq!(ctl(&socket, "enable n1")["up"], true);
    assert!(who_served(addr, 10).contains(&"b".to_string()), "enabled again");
    assert_eq!(ctl(&socket, "disable n1")["admin"], "disabled");
    assert!(who_served(addr, 6).iter().all(|n| n == "a"));
    server.shutdown();
    assert!(!socket.exists(), "the socket file goes with the switch");
}

#[test]
fn weights_and_policy_parameters_change_live_and_lard_keeps_its_targets() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("switch.sock");
    let (a, b) = (backend("a"), backend("b"));
    let server = SwitchServer::start(config("wrr", &[&a, &b], &socket)).unwrap();
    assert_eq!(ctl(&socket, "weight n0 3")["ok"], true);
    let served = who_served(server.addr(), 40);
    assert_eq!(served.iter().filter(|n| *n == "a").count(), 30, "3:1 after `weight n0 3`");
    server.shutdown();

    let (a, b) = (backend("a"), backend("b"));
    let server = SwitchServer::start(config("lard", &[&a, &b], &socket)).unwrap();
    let before = who_served(server.addr(), 20);
    let shown = ctl(&socket, "policy");
    assert_eq!(
        (shown["policy"]["name"].as_str(), shown["mapping_entries"].as_u64()),
        (Some("lard"), Some(20))
    );
    let set = ctl(&socket, "policy set t_high 80");
    assert_eq!(
        (set["policy"]["t_high"].as_u64(), set["policy_state"].as_str()),
        (Some(80), Some("kept")),
        "{set}"
    );
    assert_eq!(who_served(server.addr(), 20), before, "the targets stayed where they were");
    let refused = ctl(&socket, "policy set t_high 1");
    assert_eq!(refused["ok"], false, "t_high below t_low is refused: {refused}");
    let unknown = ctl(&socket, "policy set colour blue");
    assert_eq!(unknown["ok"], false, "{unknown}");
    assert_eq!(
        ctl(&socket, "policy")["policy"]["t_high"],
        80,
        "a refused change leaves the policy as it was"
    );
    server.shutdown();
}

#[test]
fn malformed_commands_are_refused_with_the_forms_expected_and_the_switch_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("switch.sock");
    let a = backend("a");
    let server = SwitchServer::start(config("rr", &[&a], &socket)).unwrap();
    for (line, needle) in [
        ("frobnicate", "unknown command"),
        ("drain", "one node name"),
        ("drain nobody", "no node named `nobody` (nodes: n0)"),
        ("weight n0 0", "weight"),
        ("reload", "without a configuration file"),
    ] {
        let answer = ctl(&socket, line);
        assert_eq!(answer["ok"], false, "{line}");
        assert!(answer["error"].as_str().unwrap().contains(needle), "{line}: {answer}");
    }
    // A line over the limit, and bytes that are not UTF-8, on one connection.
    let mut s = UnixStream::connect(&socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[0xff, 0xfe, b'\n']).unwrap();
    s.write_all(&vec![b'x'; 10_000]).unwrap();
    let mut reader = BufReader::new(s);
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    assert!(first.contains("not UTF-8"), "{first}");
    let mut second = String::new();
    reader.read_line(&mut second).unwrap();
    assert!(second.contains("longer than"), "{second}");
    assert_eq!(who_served(server.addr(), 2), ["a", "a"]);
    let status = server.status();
    assert_eq!(status["nodes"][0]["up"], true);
    server.shutdown();
}

#[test]
fn the_admin_listener_and_locus_ctl_carry_commands_and_reload_reads_the_file_again() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("switch.sock");
    let (a, b) = (backend("a"), backend("b"));
    let file = dir.path().join("switch.toml");
    let write = |nodes: &[&ScriptedBackend]| {
        let mut text = "listen = \"127.0.0.1:0\"\nworkers = 1\npolicy = { name = \"rr\" }\n".to_string();
        for (i, n) in nodes.iter().enumerate() {
            text += &format!("[[node]]\nname = \"n{i}\"\naddr = \"{}\"\n", n.addr);
        }
        std::fs::write(&file, text).unwrap();
    };
    write(&[&a]);
    let server = SwitchServer::start(config("rr", &[&a], &socket)).unwrap();
    let source = file.clone();
    server.set_config_source(Box::new(move || SwitchConfig::from_file(&source).map_err(|e| e.to_string())));
    write(&[&a, &b]);
    let admin = server.admin_addr().unwrap();
    let reload =
        locus_switch::ctl::CtlArgs { socket: socket.clone(), admin: None, command: vec!["reload".into()] };
    locus_switch::ctl::run(reload).expect("reload through locus ctl");
    assert!(who_served(server.addr(), 4).contains(&"b".to_string()), "the node the file added serves");
    let mut s = std::net::TcpStream::connect(admin).unwrap();
    s.write_all(b"POST /locus/ctl HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\ndrain n1").unwrap();
    let mut response = String::new();
    std::io::Read::read_to_string(&mut s, &mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200") && response.contains("\"draining\""), "{response}");
    let refused = locus_switch::ctl::CtlArgs {
        socket: socket.clone(),
        admin: Some(admin),
        command: vec!["drain".into(), "nobody".into()],
    };
    let e = locus_switch::ctl::run(refused).unwrap_err().to_string();
    assert!(e.contains("no node named"), "{e}");
    let typo = locus_switch::ctl::CtlArgs { socket, admin: None, command: vec!["drian".into(), "n1".into()] };
    assert!(locus_switch::ctl::run(typo).unwrap_err().to_string().contains("unknown command"));
    let status = server.status();
    assert_eq!(status["reloads"], 1, "{status}");
    server.shutdown();
}

#[test]
#[ignore = "needs root: runs a client as another user"]
fn a_user_neither_root_nor_the_switchs_is_refused() {
    if let Ok(path) = std::env::var("LOCUS_TEST_CTL_AS_NOBODY") {
        // The child: as user nobody, one command.
        let mut s = UnixStream::connect(&path).expect("the socket is reachable");
        s.write_all(b"drain n0\n").unwrap();
        let mut answer = String::new();
        BufReader::new(s).read_line(&mut answer).unwrap();
        print!("{answer}");
        return;
    }
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("switch.sock");
    let a = backend("a");
    let server = SwitchServer::start(config("rr", &[&a], &socket)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_user_neither_root_nor_the_switchs_is_refused",
            "--include-ignored",
            "--nocapture",
        ])
        .env("LOCUS_TEST_CTL_AS_NOBODY", &socket)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("permission denied: uid 65534"), "{text}");
    let status = server.status();
    assert_eq!(
        (status["nodes"][0]["up"].as_bool(), status["ctl"]["refused"].as_u64()),
        (Some(true), Some(1)),
        "{status}"
    );
    server.shutdown();
}

/// For the root-only tests (`#[ignore]`d; `./quickstart test` runs them as root).
fn require_root() {
    locus_test_support::require_root("a client runs as user nobody");
}
