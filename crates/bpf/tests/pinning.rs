//! Pinning and attachment lifecycle, on a dummy interface in a private namespace and a private
//! bpffs mount: entries survive a switch restart (drop, attach again with the same pins) and keep
//! forwarding; `keep_running` leaves the filter in place for the next process to replace; drop
//! removes the filter and the qdisc; unusable pins and a connection map of another shape are refused;
//! a refilled map of an older layout is replaced, keeping the connections.

mod common;

use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use common::*;
use locus_bpf::{Action, ConnKey, Forwarder, ForwarderError, ForwarderOptions, NodeSlot, Verdict};

const NODE1: NodeSlot = NodeSlot { mac: NODE1_MAC, ifindex: 7 };

fn client(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(ip("10.9.1.2"), port)
}

fn vip() -> SocketAddrV4 {
    addr("10.9.1.100:80")
}

/// A namespace with a veth pair (this kernel has no dummy links), named after the namespace; the
/// interface to attach to is returned.
fn namespace_with_veth() -> (NetnsGuard, String) {
    let ns = NetnsGuard::new("p");
    let dev = format!("{}d", ns.name);
    let peer = format!("{}e", ns.name);
    run(&["ip", "-n", &ns.name, "link", "add", &dev, "type", "veth", "peer", "name", &peer]);
    run(&["ip", "-n", &ns.name, "link", "set", &dev, "up"]);
    (ns, dev)
}

fn filters(ns: &str, dev: &str) -> usize {
    output(&["tc", "-n", ns, "filter", "show", "dev", dev, "ingress"])
        .lines()
        .filter(|l| l.contains("locus_forward"))
        .count()
}

fn has_clsact(ns: &str, dev: &str) -> bool {
    output(&["tc", "-n", ns, "qdisc", "show", "dev", dev]).contains("clsact")
}

fn options(pins: &BpffsGuard) -> ForwarderOptions {
    ForwarderOptions {
        pin_dir: Some(pins.path().join("locus")),
        max_entries: 4096,
        switch_mac: Some(SWITCH_MAC),
        // The node slots' ifindex is made up.
        peer_redirect: false,
    }
}

#[test]
#[ignore = "needs root: BPF, bpffs and network namespaces (./quickstart test runs it as root)"]
fn entries_survive_a_switch_restart_through_pins_and_still_forward() {
    require_root();
    let pins = BpffsGuard::new();
    let (ns, dev) = namespace_with_veth();
    let held = ConnKey::new(client(50000), vip());
    let forwarded = ConnKey::new(client(50001), vip());
    ns.on(|| {
        let first = Forwarder::attach(&dev, options(&pins)).unwrap();
        assert!(!first.adopted());
        assert_eq!(first.interface(), Some(dev.as_str()));
        first.hold(held, NODE1).unwrap();
        first.hold(forwarded, NODE1).unwrap();
        first.forward(forwarded).unwrap();
        first.set_services(&[(*vip().ip(), 8080)]).unwrap();
        assert_eq!(filters(&ns.name, &dev), 1);
        assert!(has_clsact(&ns.name, &dev));
    });
    // The switch process "exits": the forwarder is gone, the filter and qdisc too, pins stay.
    assert_eq!(filters(&ns.name, &dev), 0, "drop detaches the program");
    assert!(!has_clsact(&ns.name, &dev), "drop removes the clsact qdisc it left empty");
    for map in ["conns", "nodes", "services", "selection", "config", "rr_cursor", "stats"] {
        assert!(pins.path().join("locus").join(map).exists(), "pin of {map} kept");
    }
    ns.on(|| {
        let second = Forwarder::attach(&dev, options(&pins)).unwrap();
        assert!(second.adopted());
        assert_eq!(second.capacity(), 4096);
        assert_eq!(second.get(held).unwrap().unwrap().action(), Some(Action::Hold));
        assert_eq!(second.get(forwarded).unwrap().unwrap().action(), Some(Action::Forward));
        let frame = Frame::tcp(client(50001), vip()).payload(b"after restart").build();
        let run = second.run_frame(&frame).unwrap();
        assert_eq!(run.verdict, Verdict::Redirect, "the adopted entry forwards with the new program");
        assert_eq!(&run.frame[0..6], &NODE1_MAC.0);
        let syn = Frame::tcp(client(50002), addr("10.9.1.100:8080")).flags(TCP_SYN).build();
        // The adopted service set is live: no table yet, so the SYN is dropped as unplaceable.
        assert_eq!(second.run_frame(&syn).unwrap().verdict, Verdict::Drop);
        assert_eq!(filters(&ns.name, &dev), 1);
        second.unpin().unwrap();
    });
    assert!(!pins.path().join("locus").exists(), "unpin removes the pins and their directory");
}

#[test]
#[ignore = "needs root: BPF, bpffs and network namespaces (./quickstart test runs it as root)"]
fn keep_running_leaves_the_filter_forwarding_and_the_next_attach_replaces_it_in_place() {
    require_root();
    let pins = BpffsGuard::new();
    let (ns, dev) = namespace_with_veth();
    let key = ConnKey::new(client(51000), vip());
    ns.on(|| {
        let f = Forwarder::attach(&dev, options(&pins)).unwrap();
        f.hold(key, NODE1).unwrap();
        f.keep_running().unwrap();
    });
    assert_eq!(filters(&ns.name, &dev), 1, "the filter outlives the process's forwarder");
    ns.on(|| {
        let f = Forwarder::attach(&dev, options(&pins)).unwrap();
        assert!(f.adopted());
        assert!(f.get(key).unwrap().is_some());
        assert_eq!(filters(&ns.name, &dev), 1, "replaced in place, not added beside");
        f.unpin().unwrap();
    });
    assert_eq!(filters(&ns.name, &dev), 0);
    assert!(!has_clsact(&ns.name, &dev));
}

#[test]
#[ignore = "needs root: BPF, bpffs and network namespaces (./quickstart test runs it as root)"]
fn an_existing_clsact_with_other_filters_is_kept_on_drop() {
    require_root();
    let (ns, dev) = namespace_with_veth();
    run(&["tc", "-n", &ns.name, "qdisc", "add", "dev", &dev, "clsact"]);
    // A classic-BPF filter that returns 0 (no verdict): matchall and the tc actions are not
    // built into this kernel.
    run(&["tc", "-n", &ns.name, "filter", "add", "dev", &dev, "egress", "bpf", "bytecode", "1,6 0 0 0,"]);
    ns.on(|| {
        let f = Forwarder::attach(&dev, ForwarderOptions::default()).unwrap();
        assert_eq!(filters(&ns.name, &dev), 1);
        drop(f);
    });
    assert_eq!(filters(&ns.name, &dev), 0);
    assert!(has_clsact(&ns.name, &dev), "another filter still uses the qdisc");
}

#[test]
#[ignore = "needs root: BPF, bpffs and network namespaces (./quickstart test runs it as root)"]
fn a_forwarder_dropped_on_another_thread_detaches_in_its_own_namespace() {
    require_root();
    let (ns, dev) = namespace_with_veth();
    let f = ns.on(|| Forwarder::attach(&dev, ForwarderOptions::default()).unwrap());
    assert_eq!(filters(&ns.name, &dev), 1);
    drop(f); // on the test thread, in the root namespace
    assert_eq!(filters(&ns.name, &dev), 0);
    assert!(!has_clsact(&ns.name, &dev));
}

#[test]
#[ignore = "needs root: BPF, bpffs and network namespaces (./quickstart test runs it as root)"]
fn attach_names_a_missing_interface() {
    require_root();
    let (ns, _dev) = namespace_with_veth();
    let err = ns.on(|| Forwarder::attach("lbfnope0", ForwarderOptions::default()).err().unwrap());
    assert!(err.to_string().contains("lbfnope0"), "{err}");
}

#[test]
#[ignore = "needs root: BPF, bpffs and network namespaces (./quickstart test runs it as root)"]
fn a_pin_dir_off_bpffs_is_refused() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let err =
        Forwarder::load(ForwarderOptions { pin_dir: Some(dir.path().to_path_buf()), ..Default::default() })
            .err()
            .unwrap();
    assert!(matches!(err, ForwarderError::PinDir { .. }), "{err}");
    assert!(err.to_string().contains("bpf filesystem"), "{err}");
}

/// Create a map of `bpf_map_type` `map_type` with the given sizes and pin it at `path` (raw
/// `bpf(2)`, to fake a foreign or older pin).
fn pin_foreign_map(path: &std::path::Path, map_type: u32, key_size: u32, value_size: u32) {
    #[repr(C)]
    struct CreateAttr {
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        rest: [u8; 112],
    }
    #[repr(C)]
    struct PinAttr {
        pathname: u64,
        bpf_fd: u32,
        file_flags: u32,
        rest: [u8; 112],
    }
    let create = CreateAttr { map_type, key_size, value_size, max_entries: 16, rest: [0; 112] };
    // SAFETY: BPF_MAP_CREATE (0) with a zero-padded bpf_attr.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, 0, &create, size_of::<CreateAttr>()) };
    assert!(fd >= 0, "map create: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let pin =
        PinAttr { pathname: c.as_ptr() as u64, bpf_fd: fd.as_raw_fd() as u32, file_flags: 0, rest: [0; 112] };
    // SAFETY: BPF_OBJ_PIN (6) with a NUL-terminated path that outlives the call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, 6, &pin, size_of::<PinAttr>()) };
    assert_eq!(r, 0, "pin: {}", std::io::Error::last_os_error());
}

#[test]
#[ignore = "needs root: BPF, bpffs and network namespaces (./quickstart test runs it as root)"]
fn a_pinned_map_of_another_shape_is_refused_not_adopted() {
    require_root();
    let pins = BpffsGuard::new();
    let dir = pins.path().join("locus");
    std::fs::create_dir(&dir).unwrap();
    pin_foreign_map(&dir.join("conns"), 1, 12, 40); // a hash, 40-byte values
    let err = Forwarder::load(options(&pins)).err().unwrap();
    assert!(matches!(err, ForwarderError::PinnedMismatch { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("conns") && text.contains("40") && text.contains("48"), "{text}");
}

#[test]
#[ignore = "needs root: BPF, bpffs and network namespaces (./quickstart test runs it as root)"]
fn an_older_layout_of_a_refilled_map_is_replaced_and_the_connections_are_kept() {
    require_root();
    let pins = BpffsGuard::new();
    let dir = pins.path().join("locus");
    let key = ConnKey::new(client(52000), vip());
    {
        let first = Forwarder::load(options(&pins)).unwrap();
        first.hold(key, NODE1).unwrap();
        first.forward(key).unwrap();
    }
    // What a switch built before node slots had flags leaves: a 16-byte `nodes` array.
    std::fs::remove_file(dir.join("nodes")).unwrap();
    pin_foreign_map(&dir.join("nodes"), 2, 4, 16);
    let second = Forwarder::load(options(&pins)).unwrap();
    assert!(second.adopted());
    assert_eq!(second.replaced_pins(), ["nodes"]);
    assert_eq!(second.get(key).unwrap().unwrap().action(), Some(Action::Forward), "connection kept");
    second.set_nodes(&[NODE1]).unwrap();
    let frame = Frame::tcp(client(52000), vip()).payload(b"after upgrade").build();
    assert_eq!(second.run_frame(&frame).unwrap().verdict, Verdict::Redirect);
    drop(second);
    // The fresh map was pinned in its place: the next load adopts everything and replaces nothing.
    let third = Forwarder::load(options(&pins)).unwrap();
    assert!(third.replaced_pins().is_empty());
    third.unpin().unwrap();
}
