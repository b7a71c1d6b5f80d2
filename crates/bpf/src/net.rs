//! What the switch must know about its LAN to fill the forwarder: MAC addresses (`MacAddr`), an
//! interface's index and MAC (`interface`, by `SIOCGIFHWADDR` in the calling thread's network
//! namespace), and a neighbour's MAC from the ARP table (`neighbour`, `resolve_neighbour`).

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::error::ForwarderError;

/// An Ethernet address.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for MacAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<MacAddr, String> {
        let mut mac = [0u8; 6];
        let mut parts = s.trim().split(':');
        for byte in &mut mac {
            let part = parts.next().ok_or_else(|| format!("`{s}` is not a MAC address (too short)"))?;
            *byte = u8::from_str_radix(part, 16).map_err(|_| format!("`{s}` is not a MAC address"))?;
        }
        if parts.next().is_some() {
            return Err(format!("`{s}` is not a MAC address (too long)"));
        }
        Ok(MacAddr(mac))
    }
}

/// A network interface of the calling thread's network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Its name (`eth0`).
    pub name: String,
    /// Its index.
    pub index: u32,
    /// Its MAC address (all zero for `lo`).
    pub mac: MacAddr,
}

fn interface_error(name: impl Into<String>, source: io::Error) -> ForwarderError {
    ForwarderError::Interface { name: name.into(), error: source }
}

/// An `AF_INET` datagram socket for interface ioctls (in the calling thread's namespace).
fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned right away.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The index and MAC of interface `name` in the calling thread's network namespace.
pub fn interface(name: &str) -> Result<Interface, ForwarderError> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(interface_error(name, io::Error::new(io::ErrorKind::InvalidInput, "bad interface name")));
    }
    // SAFETY: an all-zero ifreq is valid; the name is copied in with room for the NUL.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    let sock = ioctl_socket().map_err(|e| interface_error(name, e))?;
    // SAFETY: SIOCGIFINDEX reads ifr_name and writes ifr_ifindex of our ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFINDEX as _, &mut req) } != 0 {
        let e = io::Error::last_os_error();
        let e = if e.raw_os_error() == Some(libc::ENODEV) {
            io::Error::new(io::ErrorKind::NotFound, "no such interface in this network namespace")
        } else {
            e
        };
        return Err(interface_error(name, e));
    }
    // SAFETY: the kernel filled the ifindex member of the union.
    let index = unsafe { req.ifr_ifru.ifru_ifindex } as u32;
    // SAFETY: SIOCGIFHWADDR reads ifr_name and writes ifr_hwaddr.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut req) } != 0 {
        return Err(interface_error(name, io::Error::last_os_error()));
    }
    // SAFETY: the kernel filled the hwaddr member of the union.
    let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
    let mut mac = [0u8; 6];
    for (dst, src) in mac.iter_mut().zip(data.iter()) {
        *dst = *src as u8;
    }
    Ok(Interface { name: name.to_string(), index, mac: MacAddr(mac) })
}

/// The interface with index `index` in the calling thread's network namespace.
pub fn interface_by_index(index: u32) -> Result<Interface, ForwarderError> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has the IF_NAMESIZE bytes if_indextoname writes at most.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return Err(interface_error(format!("#{index}"), io::Error::last_os_error()));
    }
    // SAFETY: on success buf holds a NUL-terminated name.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
    interface(&name)
}

/// Whether a frame sent out of interface `index` may instead be handed straight to the ingress
/// of the interface's peer (`bpf_redirect_peer`, which skips the interface's transmit path): the
/// interface is one end of a veth or netkit pair whose other end lives in another network
/// namespace, as a container's or a lab host's uplink is. The kernel drops a peer redirect
/// within one namespace, so a pair inside one namespace, and every other kind of interface,
/// answers `false`. Asked of the kernel with `RTM_GETLINK` in the calling thread's network
/// namespace: the link kind, and `IFLA_LINK_NETNSID`, which the kernel reports only for a peer
/// in another namespace.
pub fn peer_in_other_namespace(index: u32) -> Result<bool, ForwarderError> {
    use netlink_packet_core::{NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload};
    use netlink_packet_route::RouteNetlinkMessage;
    use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkInfo, LinkMessage};
    use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

    let error = |what: &str, e: io::Error| {
        interface_error(format!("#{index}"), io::Error::new(e.kind(), format!("{what}: {e}")))
    };
    let mut link = LinkMessage::default();
    link.header.index = index;
    let mut request = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::from(RouteNetlinkMessage::GetLink(link)),
    );
    request.header.flags = NLM_F_REQUEST;
    request.finalize();
    let mut bytes = vec![0u8; request.buffer_len()];
    request.serialize(&mut bytes);

    let mut socket = Socket::new(NETLINK_ROUTE).map_err(|e| error("open a route netlink socket", e))?;
    socket.bind_auto().map_err(|e| error("bind the route netlink socket", e))?;
    socket.connect(&SocketAddr::new(0, 0)).map_err(|e| error("connect the route netlink socket", e))?;
    socket.send(&bytes, 0).map_err(|e| error("send RTM_GETLINK", e))?;
    // One RTM_NEWLINK answers a request for one link; 64 KiB holds any link's attributes.
    let mut reply = vec![0u8; 64 * 1024];
    let len = socket.recv(&mut &mut reply[..], 0).map_err(|e| error("receive the RTM_GETLINK reply", e))?;
    let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&reply[..len]).map_err(|e| {
        error("decode the RTM_GETLINK reply", io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    })?;
    let link = match message.payload {
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link)) => link,
        NetlinkPayload::Error(e) => {
            let code = e.code.map_or(0, |c| -c.get());
            let e = if code == libc::ENODEV {
                io::Error::new(io::ErrorKind::NotFound, "no such interface in this network namespace")
            } else {
                io::Error::from_raw_os_error(code)
            };
            return Err(error("RTM_GETLINK", e));
        }
        other => {
            let e = io::Error::new(io::ErrorKind::InvalidData, format!("unexpected reply {other:?}"));
            return Err(error("RTM_GETLINK", e));
        }
    };
    let mut pair = false;
    let mut peer_elsewhere = false;
    for attribute in &link.attributes {
        match attribute {
            LinkAttribute::LinkInfo(infos) => {
                pair |= infos.iter().any(|i| matches!(i, LinkInfo::Kind(InfoKind::Veth | InfoKind::Netkit)));
            }
            LinkAttribute::LinkNetNsId(_) => peer_elsewhere = true,
            _ => {}
        }
    }
    Ok(pair && peer_elsewhere)
}

/// An entry of the ARP table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    /// Its address.
    pub ip: Ipv4Addr,
    /// Its MAC.
    pub mac: MacAddr,
    /// The interface it was learnt on.
    pub device: String,
}

/// Complete ARP entries of `table` (the text of `/proc/net/arp`).
pub(crate) fn parse_arp_table(table: &str) -> Vec<Neighbour> {
    const ATF_COM: u32 = 0x2;
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [ip, _hw_type, flags, mac, _mask, device] = f.as_slice() else { return None };
            let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok()?;
            let mac: MacAddr = mac.parse().ok()?;
            (flags & ATF_COM != 0 && mac != MacAddr::default()).then_some(Neighbour {
                ip: ip.parse().ok()?,
                mac,
                device: device.to_string(),
            })
        })
        .collect()
}

/// The complete ARP entry of `ip` in the calling thread's network namespace, if there is one.
/// Reads `/proc/thread-self/net/arp` (not `/proc/net/arp`, which shows the namespace of the
/// process's main thread).
pub fn neighbour(ip: Ipv4Addr) -> Result<Option<Neighbour>, ForwarderError> {
    let path = "/proc/thread-self/net/arp";
    let table = std::fs::read_to_string(path)
        .map_err(|source| ForwarderError::Neighbour { ip, message: format!("read {path}: {source}") })?;
    Ok(parse_arp_table(&table).into_iter().find(|n| n.ip == ip))
}

/// The MAC of `ip`, a host on a directly connected network: from the ARP table, or, when it is not
/// there yet, after making the kernel resolve it by sending one empty UDP datagram to its discard
/// port (9); waits up to `timeout`.
pub fn resolve_neighbour(ip: Ipv4Addr, timeout: Duration) -> Result<Neighbour, ForwarderError> {
    if let Some(n) = neighbour(ip)? {
        return Ok(n);
    }
    let error = |message: String| ForwarderError::Neighbour { ip, message };
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| error(format!("bind: {e}")))?;
    socket.send_to(&[], (ip, 9)).map_err(|e| error(format!("send a datagram to resolve it: {e}")))?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(n) = neighbour(ip)? {
            return Ok(n);
        }
        if Instant::now() >= deadline {
            return Err(error(format!("no ARP reply within {timeout:?}")));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_addresses_parse_and_print() {
        let mac: MacAddr = "02:00:0a:FD:00:0b".parse().unwrap();
        assert_eq!(mac, MacAddr([2, 0, 0x0a, 0xfd, 0, 0x0b]));
        assert_eq!(mac.to_string(), "02:00:0a:fd:00:0b");
        assert!("02:00:0a:fd:00".parse::<MacAddr>().is_err());
        assert!("02:00:0a:fd:00:0b:01".parse::<MacAddr>().is_err());
        assert!("zz:00:0a:fd:00:0b".parse::<MacAddr>().is_err());
    }

    #[test]
    fn arp_table_keeps_only_complete_entries() {
        let table = "IP address       HW type     Flags       HW address            Mask     Device\n\
                     10.253.0.11      0x1         0x2         02:00:00:00:00:0b     *        eth0\n\
                     10.253.0.12      0x1         0x0         00:00:00:00:00:00     *        eth0\n\
                     10.253.0.13      0x1         0x6         02:00:00:00:00:0d     *        eth1\n";
        let n = parse_arp_table(table);
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].ip, Ipv4Addr::new(10, 253, 0, 11));
        assert_eq!(n[0].mac, MacAddr([2, 0, 0, 0, 0, 0x0b]));
        assert_eq!(n[1].device, "eth1");
    }

    #[test]
    fn loopback_is_found_and_unknown_interfaces_are_named_in_the_error() {
        let lo = interface("lo").unwrap();
        assert_eq!(lo.mac, MacAddr::default());
        assert_eq!(interface_by_index(lo.index).unwrap(), lo);
        let err = interface("lbf-no-such").unwrap_err().to_string();
        assert!(err.contains("lbf-no-such"), "{err}");
    }
}
