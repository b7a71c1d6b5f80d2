//! A throw-away network of namespaces for benchmarks: a client, a switch and node hosts, each
//! with one veth port on a private bridge and an address on a private /24, like separate
//! machines on one LAN (MTU 1500, real TCP segmentation, unlike loopback). Made with `ip`
//! from iproute2; removed on drop, also when the benchmark fails.

use anyhow::{Context, bail};
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The namespaces and bridge of one benchmark run.
pub struct NetnsLab {
    prefix: String,
    bridge: String,
    hosts: Vec<(String, Ipv4Addr)>,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output().context("running ip (apt-get install iproute2)")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

impl NetnsLab {
    /// Whether this process may make namespaces (root with `ip` available).
    pub fn available() -> bool {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        root && Command::new("ip").arg("-V").output().is_ok_and(|o| o.status.success())
    }

    /// Make one namespace per name in `roles`, all on one bridge.
    pub fn create(roles: &[&str]) -> anyhow::Result<NetnsLab> {
        let id = std::process::id();
        let prefix = format!("locusb{id}");
        let subnet = (id % 200) as u8 + 20;
        let mut lab = NetnsLab { prefix: prefix.clone(), bridge: format!("lb{id}"), hosts: Vec::new() };
        ip(&["link", "add", &lab.bridge, "type", "bridge"])?;
        ip(&["link", "set", &lab.bridge, "up"])?;
        for (k, role) in roles.iter().enumerate() {
            let ns = format!("{prefix}-{role}");
            let addr = Ipv4Addr::new(10, 253, subnet, k as u8 + 1);
            ip(&["netns", "add", &ns])?;
            lab.hosts.push((ns.clone(), addr));
            let port = format!("lb{id}p{k}");
            ip(&["link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
            ip(&["link", "set", &port, "master", &lab.bridge, "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(lab)
    }

    fn host(&self, role: &str) -> anyhow::Result<&(String, Ipv4Addr)> {
        let ns = format!("{}-{role}", self.prefix);
        self.hosts.iter().find(|(n, _)| *n == ns).with_context(|| format!("no host `{role}` in the lab"))
    }

    /// The address of a host.
    pub fn addr(&self, role: &str) -> anyhow::Result<IpAddr> {
        Ok(IpAddr::V4(self.host(role)?.1))
    }

    /// Open the namespace of a host (for `setns`).
    pub fn open(&self, role: &str) -> anyhow::Result<OwnedFd> {
        let (ns, _) = self.host(role)?;
        let f = std::fs::File::open(format!("/run/netns/{ns}"))
            .with_context(|| format!("open namespace {ns}"))?;
        Ok(f.into())
    }

    /// Make `cmd` run inside a host's namespace.
    pub fn enter(&self, role: &str, cmd: &mut Command) -> anyhow::Result<()> {
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

    /// Move the calling thread into a host's namespace (sockets it opens then live there).
    pub fn enter_thread(&self, role: &str) -> anyhow::Result<()> {
        let fd = self.open(role)?;
        // SAFETY: setns on a namespace descriptor we own; it affects only this thread.
        if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error()).context("setns");
        }
        Ok(())
    }
}

impl Drop for NetnsLab {
    fn drop(&mut self) {
        for (ns, _) in &self.hosts {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_hosts_reach_each_other_and_everything_is_removed_after() {
        if !NetnsLab::available() {
            eprintln!("skipped: needs root and iproute2");
            return;
        }
        let names: Vec<String>;
        {
            let lab = NetnsLab::create(&["a", "b"]).unwrap();
            names = lab.hosts.iter().map(|(n, _)| n.clone()).collect();
            let b = lab.addr("b").unwrap();
            let listener = {
                let lab = &lab;
                std::thread::scope(|s| {
                    s.spawn(|| {
                        lab.enter_thread("b").unwrap();
                        std::net::TcpListener::bind((b, 0)).unwrap()
                    })
                    .join()
                    .unwrap()
                })
            };
            let port = listener.local_addr().unwrap().port();
            std::thread::scope(|s| {
                s.spawn(|| {
                    lab.enter_thread("a").unwrap();
                    std::net::TcpStream::connect((b, port)).expect("a reaches b over the bridge");
                });
            });
        }
        let list =
            String::from_utf8(Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).unwrap();
        for n in names {
            assert!(!list.contains(&n), "namespace {n} left behind");
        }
    }
}
