//! The lab's network: one namespace per host (`client`, `switch`, `node1..N`), each with a
//! veth port on a bridge in a `lan` namespace of its own and an address on 10.253.0.0/24, like
//! machines on one LAN (MTU 1500, real TCP segmentation). The switch owns the virtual IP and
//! answers ARP for it; the nodes carry it on `lo` with arp_ignore=1 / arp_announce=2 (LVS direct
//! routing). Made with `ip`, registered for teardown, removed on drop; `clean_stale_labs`
//! removes leftovers.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::RigError;
use crate::network::CongestionControl;
use crate::process::kill_processes_in_namespace;
use crate::teardown::registry;

/// Namespace names start with this, then the owner's pid: `locus-<pid>-<n>-<role>` (the bridge's
/// namespace has the role `lan`).
pub const NAMESPACE_PREFIX: &str = "locus-";
/// Bridge names start with this, then the owner's pid in hex: `lcs<pid>x<n>` (in the lab's `lan`
/// namespace; labs of earlier versions made them in the root namespace, which
/// `clean_stale_labs` still clears).
pub const BRIDGE_PREFIX: &str = "lcs";
/// Scratch folders (`ScratchFolder`: a lab's sites, a benchmark's configurations and logs)
/// start with this, then the owner's pid and `-`.
pub const SCRATCH_FOLDER_PREFIX: &str = "locus-scratch-";
/// The bridge's alias, followed by the owner's pid.
pub(crate) const BRIDGE_ALIAS: &str = "locus-lab:owner=";
/// Most nodes in one lab (interface names must fit in 15 bytes).
pub const MAX_NODES: usize = 32;

/// The TCP congestion control every lab connection starts with: Linux's own default. A new
/// namespace would otherwise inherit the machine's (often BBR, whose pacing changes how
/// proxies that send in small pieces compare), and results would depend on how the host was
/// tuned.
pub const DEFAULT_CONGESTION_CONTROL: &str = "cubic";

/// The lab's LAN, 10.253.0.0/24.
const LAN_SUBNET: Ipv4Addr = Ipv4Addr::new(10, 253, 0, 0);
/// The LAN's prefix length.
pub const LAN_PREFIX_LEN: u8 = 24;

/// The virtual IP the switch owns and the nodes carry on `lo`.
pub const VIRTUAL_IP: Ipv4Addr = Ipv4Addr::new(10, 253, 0, 100);

/// Labs made by this process so far (several can exist at once, e.g. in parallel tests).
static LABS_MADE: AtomicU32 = AtomicU32::new(0);

/// One host of the lab.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabHost {
    /// `client`, `switch` or `node<k>`.
    pub role: String,
    /// Its namespace (`/run/netns/<namespace>`).
    pub namespace: String,
    /// Its address on the bridge.
    pub addr: Ipv4Addr,
    /// Name of its bridge port in the `lan` namespace.
    port: String,
}

/// The namespaces and bridge of one lab.
pub struct LabNetwork {
    /// The namespace holding the bridge and the hosts' ports (the LAN itself).
    lan: String,
    bridge: String,
    hosts: Vec<LabHost>,
    nodes: usize,
    /// What the lab's connections use, once set.
    congestion: Mutex<CongestionControl>,
}

/// Run `ip args…`; its error output becomes the error.
pub(crate) fn ip(args: &[&str]) -> Result<(), RigError> {
    let command = format!("ip {}", args.join(" "));
    let out = Command::new("ip").args(args).output().map_err(|e| RigError::Command {
        command: command.clone(),
        message: format!("{e} (install iproute2)"),
    })?;
    if !out.status.success() {
        return Err(RigError::Command {
            command,
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Delete a namespace (ignoring one that is already gone).
pub(crate) fn delete_namespace(name: &str) -> Result<(), RigError> {
    if !std::path::Path::new("/run/netns").join(name).exists() {
        return Ok(());
    }
    ip(&["netns", "del", name])
}

/// Delete a bridge (ignoring one that is already gone).
pub(crate) fn delete_bridge(name: &str) -> Result<(), RigError> {
    if !std::path::Path::new("/sys/class/net").join(name).exists() {
        return Ok(());
    }
    ip(&["link", "del", name])
}

/// Write a sysctl under /proc/sys/net from a thread inside a namespace.
fn write_sysctl(key: &str, value: &str) -> Result<(), RigError> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).map_err(|e| RigError::io(&path, e))
}

/// The address of the k-th host (client 2, switch 3, node<i> 10 + i).
fn host_addr(role: &str) -> Ipv4Addr {
    let last = match role {
        "client" => 2,
        "switch" => 3,
        node => 10 + node.strip_prefix("node").and_then(|i| i.parse::<u8>().ok()).unwrap_or(0),
    };
    Ipv4Addr::new(10, 253, 0, last)
}

impl LabNetwork {
    /// Whether this process may make namespaces: `Err` says why not (not root, no `ip`).
    pub fn available() -> Result<(), String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("needs root".into());
        }
        match Command::new("ip").arg("-V").output() {
            Ok(o) if o.status.success() => Ok(()),
            _ => Err("needs `ip` (apt-get install iproute2)".into()),
        }
    }

    /// Make a lab with a client, a switch and `nodes` nodes on one bridge, with the virtual IP
    /// and the sysctls set. Everything made so far is removed if a step fails.
    pub fn create(nodes: usize) -> Result<LabNetwork, RigError> {
        LabNetwork::available().map_err(RigError::Unavailable)?;
        if nodes == 0 || nodes > MAX_NODES {
            return Err(RigError::Unavailable(format!("a lab has 1 to {MAX_NODES} nodes, not {nodes}")));
        }
        let pid = std::process::id();
        let seq = LABS_MADE.fetch_add(1, Ordering::Relaxed) % 256;
        let bridge = format!("{BRIDGE_PREFIX}{pid:x}x{seq:x}");
        let mut roles = vec!["client".to_string(), "switch".to_string()];
        roles.extend((1..=nodes).map(|i| format!("node{i}")));
        let hosts: Vec<LabHost> = roles
            .iter()
            .enumerate()
            .map(|(k, role)| LabHost {
                role: role.clone(),
                namespace: format!("{NAMESPACE_PREFIX}{pid}-{seq}-{role}"),
                addr: host_addr(role),
                port: format!("{bridge}p{k}"),
            })
            .collect();
        let lan = format!("{NAMESPACE_PREFIX}{pid}-{seq}-lan");
        let congestion = Mutex::new(CongestionControl {
            wanted: DEFAULT_CONGESTION_CONTROL.into(),
            used: String::new(),
            note: Some("not set yet".into()),
        });
        let lab = LabNetwork { lan, bridge, hosts, nodes, congestion };
        {
            // Registered before they exist, under the lock, so a teardown either happens
            // before anything is made or removes whatever was.
            let mut reg = registry();
            reg.ensure_open()?;
            reg.add_namespace(&lab.lan);
            for h in &lab.hosts {
                reg.add_namespace(&h.namespace);
            }
            lab.build()?;
        }
        lab.configure()?;
        Ok(lab)
    }

    /// The bridge lives in a namespace of its own, not in the root one: there the machine's
    /// firewall would see every frame the lab switches whenever `br_netfilter` is loaded
    /// (bridge-nf-call-iptables is per namespace, and a host's FORWARD policy of DROP would cut
    /// the lab off), which no LAN switch does. In the `lan` namespace it is switched off.
    fn build(&self) -> Result<(), RigError> {
        let (lan, br) = (self.lan.as_str(), self.bridge.as_str());
        ip(&["netns", "add", lan])?;
        in_namespace(lan, || -> Result<(), RigError> {
            for table in ["iptables", "ip6tables", "arptables"] {
                let key = format!("net.bridge.bridge-nf-call-{table}");
                // Absent when br_netfilter is not loaded: then bridged frames skip the firewall.
                if std::path::Path::new(&format!("/proc/sys/{}", key.replace('.', "/"))).exists() {
                    write_sysctl(&key, "0")?;
                }
            }
            Ok(())
        })?;
        ip(&["-n", lan, "link", "add", br, "type", "bridge"])?;
        ip(&[
            "-n",
            lan,
            "link",
            "set",
            "dev",
            br,
            "alias",
            &format!("{BRIDGE_ALIAS}{}", std::process::id()),
        ])?;
        ip(&["-n", lan, "link", "set", br, "up"])?;
        for h in &self.hosts {
            let ns = h.namespace.as_str();
            ip(&["netns", "add", ns])?;
            ip(&["-n", lan, "link", "add", &h.port, "type", "veth", "peer", "name", "eth0", "netns", ns])?;
            ip(&["-n", lan, "link", "set", &h.port, "master", br, "up"])?;
            ip(&["-n", ns, "addr", "add", &format!("{}/{LAN_PREFIX_LEN}", h.addr), "dev", "eth0"])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let vip = format!("{VIRTUAL_IP}/32");
        ip(&["-n", &self.host("switch")?.namespace, "addr", "add", &vip, "dev", "eth0"])?;
        for h in self.hosts.iter().filter(|h| h.role.starts_with("node")) {
            ip(&["-n", &h.namespace, "addr", "add", &vip, "dev", "lo"])?;
        }
        Ok(())
    }

    /// Sysctls: nodes ignore ARP for the VIP they carry on `lo` and never announce it; the
    /// client and switch may open many short connections. Every lab connection uses
    /// `DEFAULT_CONGESTION_CONTROL` where the kernel has it (a per-route setting: nothing of the
    /// machine changes).
    fn configure(&self) -> Result<(), RigError> {
        self.prefer_congestion_control(DEFAULT_CONGESTION_CONTROL)?;
        for h in &self.hosts {
            self.on_host(&h.role, || -> Result<(), RigError> {
                if h.role.starts_with("node") {
                    for dev in ["all", "eth0"] {
                        write_sysctl(&format!("net.ipv4.conf.{dev}.arp_ignore"), "1")?;
                        write_sysctl(&format!("net.ipv4.conf.{dev}.arp_announce"), "2")?;
                    }
                } else {
                    write_sysctl("net.ipv4.ip_local_port_range", "1024 65000")?;
                    write_sysctl("net.ipv4.tcp_tw_reuse", "1")?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The congestion control the lab's connections use (see `congestion.rs`).
    pub fn congestion_control(&self) -> CongestionControl {
        self.congestion.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn record_congestion_control(&self, cc: CongestionControl) {
        *self.congestion.lock().unwrap_or_else(|p| p.into_inner()) = cc;
    }

    /// The LAN's network address (its prefix is [`LAN_PREFIX_LEN`] bits).
    pub fn lan_subnet(&self) -> Ipv4Addr {
        LAN_SUBNET
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Every host.
    pub fn hosts(&self) -> &[LabHost] {
        &self.hosts
    }

    /// The bridge's name (in [`LabNetwork::lan_namespace`]).
    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    /// The namespace holding the bridge and the hosts' ports.
    pub fn lan_namespace(&self) -> &str {
        &self.lan
    }

    /// The host of `role`.
    pub fn host(&self, role: &str) -> Result<&LabHost, RigError> {
        self.hosts
            .iter()
            .find(|h| h.role == role)
            .ok_or_else(|| RigError::Unavailable(format!("no host `{role}` in this lab")))
    }

    /// The address of a host.
    pub fn addr(&self, role: &str) -> Result<Ipv4Addr, RigError> {
        Ok(self.host(role)?.addr)
    }

    /// The virtual IP.
    pub fn vip(&self) -> Ipv4Addr {
        VIRTUAL_IP
    }

    /// Open the namespace of a host (for `setns`).
    pub fn open(&self, role: &str) -> Result<OwnedFd, RigError> {
        let path = format!("/run/netns/{}", self.host(role)?.namespace);
        let f = std::fs::File::open(&path).map_err(|e| RigError::io(&path, e))?;
        Ok(f.into())
    }

    /// Make `cmd` run inside a host's namespace.
    pub fn enter(&self, role: &str, cmd: &mut Command) -> Result<(), RigError> {
        let fd = self.open(role)?;
        // SAFETY: setns is async-signal-safe; it runs in the forked child before exec. The
        // descriptor is moved into the closure and stays open until then.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }

    /// Move the calling thread into a host's namespace (sockets it opens then live there, and
    /// threads it starts are there too).
    pub fn enter_thread(&self, role: &str) -> Result<(), RigError> {
        enter_namespace(&self.host(role)?.namespace)
    }

    /// Run `f` on a new thread placed in a host's namespace, and return its result.
    pub fn on_host<T: Send, E: From<RigError> + Send>(
        &self,
        role: &str,
        f: impl FnOnce() -> Result<T, E> + Send,
    ) -> Result<T, E> {
        in_namespace(&self.host(role)?.namespace, f)
    }
}

impl Drop for LabNetwork {
    fn drop(&mut self) {
        let mut reg = registry();
        for h in &self.hosts {
            kill_processes_in_namespace(&h.namespace);
            let _ = delete_namespace(&h.namespace);
            reg.remove_namespace(&h.namespace);
        }
        // The bridge and the ports go with their namespace.
        let _ = delete_namespace(&self.lan);
        reg.remove_namespace(&self.lan);
    }
}

/// Move the calling thread into namespace `ns` (`/run/netns/<ns>`).
fn enter_namespace(ns: &str) -> Result<(), RigError> {
    let path = format!("/run/netns/{ns}");
    let file = std::fs::File::open(&path).map_err(|e| RigError::io(&path, e))?;
    // SAFETY: setns on a namespace descriptor we hold; it affects only this thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(RigError::system("setns", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Run `f` on a new thread placed in namespace `ns`, and return its result.
fn in_namespace<T: Send, E: From<RigError> + Send>(
    ns: &str,
    f: impl FnOnce() -> Result<T, E> + Send,
) -> Result<T, E> {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_namespace(ns)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| {
            Err(RigError::System {
                call: format!("thread in {ns}"),
                error: std::io::Error::other("panicked"),
            }
            .into())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn hosts_get_their_address_and_the_longest_names_fit_an_interface_name() {
        assert_eq!(host_addr("node3"), Ipv4Addr::new(10, 253, 0, 13));
        // The longest names still fit the 15-byte interface limit.
        let longest = format!("{BRIDGE_PREFIX}{:x}x{:x}p{}", 4_194_304u32, 255, MAX_NODES + 1);
        assert!(longest.len() <= 15, "{longest}");
    }

    fn read_sysctl_in(ns: &str, key: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "cat", &format!("/proc/sys/{}", key.replace('.', "/"))])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The congestion control of both ends of a connection from `from` to `to`'s address.
    fn connection_congestion(lab: &LabNetwork, from: &str, to: &str) -> (String, String) {
        let addr = lab.addr(to).unwrap();
        let listener =
            lab.on_host(to, || Ok::<_, RigError>(std::net::TcpListener::bind((addr, 0)).unwrap())).unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = lab
            .on_host(from, || Ok::<_, RigError>(std::net::TcpStream::connect((addr, port)).unwrap()))
            .unwrap();
        let (server, _) = listener.accept().unwrap();
        let name = |s: &std::net::TcpStream| {
            let n = socket2::SockRef::from(s).tcp_congestion().unwrap();
            String::from_utf8_lossy(&n).trim_end_matches('\0').to_string()
        };
        (name(&client), name(&server))
    }

    #[test]
    #[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
    fn lab_connections_use_cubic_on_both_ends_without_changing_the_machine_and_an_unknown_algorithm_is_refused()
     {
        locus_test_support::require_namespaces("the lab's network namespaces");
        let machine = |key: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{key}")).unwrap();
        let (allowed, default) =
            (machine("tcp_allowed_congestion_control"), machine("tcp_congestion_control"));
        let lab = LabNetwork::create(2).unwrap();
        let cc = lab.congestion_control();
        assert_eq!((cc.used.as_str(), cc.note.as_deref()), ("cubic", None), "{cc}");
        for (from, to) in [("client", "switch"), ("switch", "node1"), ("node2", "client")] {
            assert_eq!(
                connection_congestion(&lab, from, to),
                ("cubic".into(), "cubic".into()),
                "{from} -> {to}"
            );
        }
        lab.set_congestion_control("reno").unwrap();
        assert_eq!(connection_congestion(&lab, "client", "node1"), ("reno".into(), "reno".into()));
        assert_eq!(lab.congestion_control().used, "reno");
        let err = lab.set_congestion_control("warp-drive").unwrap_err().to_string();
        assert!(err.contains("`warp-drive`") && err.contains("cubic"), "{err}");
        assert_eq!(lab.congestion_control().used, "reno", "a refused algorithm leaves the lab as it was");
        assert!(lab.set_congestion_control("cubic lock").is_err(), "not a name: never reaches `ip`");
        // Where the algorithm cannot be had, the lab keeps running with what it has and says so.
        lab.prefer_congestion_control("warp-drive").unwrap();
        let cc = lab.congestion_control();
        assert_eq!((cc.wanted.as_str(), cc.used.as_str()), ("warp-drive", "reno"), "{cc}");
        assert!(!cc.as_wanted() && cc.to_string().starts_with("reno (warp-drive could not be set: "), "{cc}");
        assert_eq!(
            machine("tcp_allowed_congestion_control"),
            allowed,
            "the machine's allowed list is untouched"
        );
        assert_eq!(machine("tcp_congestion_control"), default, "the machine's default is untouched");
    }

    #[test]
    #[ignore = "needs root: network namespaces (./quickstart test runs it as root)"]
    fn hosts_reach_each_other_the_switch_answers_for_the_vip_and_everything_is_removed_after() {
        locus_test_support::require_namespaces("the lab's network namespaces");
        let (mut names, bridge);
        {
            let lab = LabNetwork::create(2).unwrap();
            names = lab.hosts().iter().map(|h| h.namespace.clone()).collect::<Vec<_>>();
            names.push(lab.lan_namespace().to_string());
            bridge = lab.bridge().to_string();
            assert_eq!(lab.hosts().len(), 4);
            // The bridge is in the lab's own namespace, with the firewall off for its frames.
            assert!(
                !std::path::Path::new("/sys/class/net").join(&bridge).exists(),
                "bridge in the root namespace"
            );
            let lan = lab.lan_namespace();
            let shown = Command::new("ip").args(["-n", lan, "-o", "link", "show", &bridge]).output().unwrap();
            assert!(shown.status.success(), "no bridge {bridge} in {lan}");
            if std::path::Path::new("/proc/sys/net/bridge").exists() {
                assert_eq!(read_sysctl_in(lan, "net.bridge.bridge-nf-call-iptables"), "0");
            }
            let node1 = lab.host("node1").unwrap().namespace.clone();
            assert_eq!(read_sysctl_in(&node1, "net.ipv4.conf.all.arp_ignore"), "1");
            assert_eq!(read_sysctl_in(&node1, "net.ipv4.conf.eth0.arp_announce"), "2");
            let client = lab.host("client").unwrap().namespace.clone();
            assert_eq!(read_sysctl_in(&client, "net.ipv4.tcp_tw_reuse"), "1");
            // A listener on the VIP in the switch is reached by the client (ARP answered by
            // the switch, not by the nodes that also carry the VIP).
            let b = lab.addr("node2").unwrap();
            let (node_listener, vip_listener) = std::thread::scope(|s| {
                let n = s.spawn(|| {
                    lab.enter_thread("node2").unwrap();
                    std::net::TcpListener::bind((b, 0)).unwrap()
                });
                let v = s.spawn(|| {
                    lab.enter_thread("switch").unwrap();
                    std::net::TcpListener::bind((VIRTUAL_IP, 0)).unwrap()
                });
                (n.join().unwrap(), v.join().unwrap())
            });
            let node_port = node_listener.local_addr().unwrap().port();
            let vip_port = vip_listener.local_addr().unwrap().port();
            lab.on_host("client", || -> Result<(), RigError> {
                std::net::TcpStream::connect((b, node_port)).expect("client reaches node2 over the bridge");
                let mut s =
                    std::net::TcpStream::connect((VIRTUAL_IP, vip_port)).expect("client reaches the VIP");
                drop(vip_listener.accept().unwrap());
                let mut buf = [0u8; 1];
                let _ = s.read(&mut buf);
                Ok(())
            })
            .unwrap();
            let neigh = Command::new("ip")
                .args(["-n", &client, "neigh", "show", &VIRTUAL_IP.to_string()])
                .output()
                .unwrap();
            let link = Command::new("ip")
                .args(["-n", &lab.host("switch").unwrap().namespace, "-o", "link", "show", "eth0"])
                .output()
                .unwrap();
            let link = String::from_utf8_lossy(&link.stdout).to_string();
            let switch_mac =
                link.split_whitespace().skip_while(|w| *w != "link/ether").nth(1).unwrap_or("").to_string();
            let neigh = String::from_utf8_lossy(&neigh.stdout).to_string();
            assert!(
                !switch_mac.is_empty() && neigh.contains(&switch_mac),
                "VIP resolves to the switch: {neigh}"
            );
        }
        let list =
            String::from_utf8(Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).unwrap();
        for n in names {
            assert!(!list.contains(&n), "namespace {n} left behind");
        }
        assert!(!std::path::Path::new("/sys/class/net").join(&bridge).exists(), "bridge left behind");
    }
}
