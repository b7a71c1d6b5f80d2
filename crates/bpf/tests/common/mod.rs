//! Test support: an Ethernet/IPv4/TCP frame builder for `BPF_PROG_TEST_RUN` fixtures, and RAII
//! guards for what the root-only tests create — network namespaces, links, a bpffs mount — all
//! named `lbf<pid>…` and removed on drop, also when a test fails.

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use locus_bpf::MacAddr;

pub const CLIENT_MAC: MacAddr = MacAddr([0x02, 0xc1, 0, 0, 0, 0x02]);
pub const SWITCH_MAC: MacAddr = MacAddr([0x02, 0x5e, 0, 0, 0, 0x03]);
pub const NODE1_MAC: MacAddr = MacAddr([0x02, 0x0d, 0, 0, 0, 0x11]);
pub const NODE2_MAC: MacAddr = MacAddr([0x02, 0x0d, 0, 0, 0, 0x12]);

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;

/// For the root-only tests (`#[ignore]`d; `./quickstart test` runs them as root): fails unless
/// this process may load BPF programs and make namespaces.
pub fn require_root() {
    locus_test_support::require_root("BPF and network namespaces");
}

/// One frame to build: Ethernet, IPv4 (optionally with options or as a fragment), TCP.
#[derive(Clone, Debug)]
pub struct Frame {
    pub dst_mac: MacAddr,
    pub src_mac: MacAddr,
    pub ethertype: u16,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub protocol: u8,
    pub ip_options: Vec<u8>,
    /// Flags and fragment offset field, host order (0x4000 = DF).
    pub frag: u16,
    pub tcp_flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub payload: Vec<u8>,
}

fn checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    let mut odd: Option<u8> = None;
    for chunk in chunks {
        for &b in *chunk {
            match odd.take() {
                Some(hi) => sum += u32::from(u16::from_be_bytes([hi, b])),
                None => odd = Some(b),
            }
        }
    }
    if let Some(hi) = odd {
        sum += u32::from(u16::from_be_bytes([hi, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Frame {
    /// An ACK segment from the client to the switch's MAC.
    pub fn tcp(src: SocketAddrV4, dst: SocketAddrV4) -> Frame {
        Frame {
            dst_mac: SWITCH_MAC,
            src_mac: CLIENT_MAC,
            ethertype: 0x0800,
            src,
            dst,
            protocol: 6,
            ip_options: Vec::new(),
            frag: 0x4000,
            tcp_flags: TCP_ACK,
            seq: 1000,
            ack: 2000,
            payload: Vec::new(),
        }
    }

    pub fn flags(mut self, flags: u8) -> Frame {
        self.tcp_flags = flags;
        self
    }

    pub fn payload(mut self, payload: &[u8]) -> Frame {
        self.payload = payload.to_vec();
        self
    }

    pub fn build(&self) -> Vec<u8> {
        assert!(self.ip_options.len().is_multiple_of(4) && self.ip_options.len() <= 40);
        let tcp_len = 20 + self.payload.len();
        let ihl = 5 + self.ip_options.len() / 4;
        let total = ihl * 4 + tcp_len;
        let mut ip = vec![(4 << 4) | ihl as u8, 0];
        ip.extend_from_slice(&(total as u16).to_be_bytes());
        ip.extend_from_slice(&0x1234u16.to_be_bytes()); // id
        ip.extend_from_slice(&self.frag.to_be_bytes());
        ip.extend_from_slice(&[64, self.protocol, 0, 0]);
        ip.extend_from_slice(&self.src.ip().octets());
        ip.extend_from_slice(&self.dst.ip().octets());
        ip.extend_from_slice(&self.ip_options);
        let sum = checksum(&[&ip]);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());

        let mut tcp = Vec::with_capacity(tcp_len);
        tcp.extend_from_slice(&self.src.port().to_be_bytes());
        tcp.extend_from_slice(&self.dst.port().to_be_bytes());
        tcp.extend_from_slice(&self.seq.to_be_bytes());
        tcp.extend_from_slice(&self.ack.to_be_bytes());
        tcp.extend_from_slice(&[5 << 4, self.tcp_flags]);
        tcp.extend_from_slice(&64240u16.to_be_bytes()); // window
        tcp.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent
        tcp.extend_from_slice(&self.payload);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&self.src.ip().octets());
        pseudo.extend_from_slice(&self.dst.ip().octets());
        pseudo.extend_from_slice(&[0, self.protocol]);
        pseudo.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        let sum = checksum(&[&pseudo, &tcp]);
        tcp[16..18].copy_from_slice(&sum.to_be_bytes());

        let mut frame = Vec::with_capacity(14 + total);
        frame.extend_from_slice(&self.dst_mac.0);
        frame.extend_from_slice(&self.src_mac.0);
        frame.extend_from_slice(&self.ethertype.to_be_bytes());
        frame.extend_from_slice(&ip);
        frame.extend_from_slice(&tcp);
        frame
    }
}

/// Unique suffixes for the names of one process's test objects.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// A fresh name `lbf<pid><tag><n>` (at most 15 bytes for interface names).
pub fn unique(tag: &str) -> String {
    let name = format!("lbf{}{tag}{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    assert!(name.len() <= 15, "name too long for an interface: {name}");
    name
}

/// Run a command; panic with its error output if it fails.
pub fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A command's standard output.
pub fn output(args: &[&str]) -> String {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace (`ip netns add`), deleted on drop.
pub struct NetnsGuard {
    pub name: String,
}

impl NetnsGuard {
    pub fn new(tag: &str) -> NetnsGuard {
        let name = unique(tag);
        run(&["ip", "netns", "add", &name]);
        let guard = NetnsGuard { name };
        run(&["ip", "-n", &guard.name, "link", "set", "lo", "up"]);
        guard
    }

    /// Run `f` on a new thread inside this namespace.
    pub fn on<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| {
                enter(&self.name);
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// Move the calling thread into namespace `name`.
pub fn enter(name: &str) {
    let f = std::fs::File::open(format!("/run/netns/{name}")).expect("open namespace");
    // SAFETY: setns on a namespace descriptor we hold open; it affects only this thread.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {name}: {}", std::io::Error::last_os_error());
}

/// A link in the root namespace (a bridge), deleted on drop.
pub struct LinkGuard {
    pub name: String,
}

impl Drop for LinkGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.name]).output();
    }
}

/// A bpf filesystem mounted on a fresh directory `/tmp/lbf<pid>…`, unmounted and removed on drop.
pub struct BpffsGuard {
    pub dir: PathBuf,
}

impl BpffsGuard {
    pub fn new() -> BpffsGuard {
        let dir = std::env::temp_dir().join(unique("fs"));
        std::fs::create_dir(&dir).unwrap();
        let guard = BpffsGuard { dir };
        let c = std::ffi::CString::new(guard.dir.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mounting a new bpffs instance on a directory we just created.
        let r = unsafe { libc::mount(c"bpf".as_ptr(), c.as_ptr(), c"bpf".as_ptr(), 0, std::ptr::null()) };
        assert_eq!(r, 0, "mount bpffs: {}", std::io::Error::last_os_error());
        guard
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for BpffsGuard {
    fn drop(&mut self) {
        let c = std::ffi::CString::new(self.dir.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: unmounting the bpffs this guard mounted.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        let _ = std::fs::remove_dir(&self.dir);
    }
}

pub fn addr(s: &str) -> SocketAddrV4 {
    s.parse().unwrap()
}

pub fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}
