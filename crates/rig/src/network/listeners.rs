//! Who holds a TCP port in a lab host, as its kernel sees it: the listening sockets of the
//! calling thread's network namespace (`/proc/thread-self/net/tcp` and `tcp6`), and the
//! process that holds one (by socket inode). Before a server starts on a port, the lab waits
//! until the previous point's server has let go of it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::error::RigError;

/// `st` of a listening socket in /proc/net/tcp.
const TCP_LISTEN: &str = "0A";

/// A socket listening on a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub addr: SocketAddr,
    pub inode: u64,
}

/// The address of a /proc/net/tcp `local_address` field (`0100007F:0050` on x86, or 32 hex
/// digits for IPv6).
fn parse_proc_addr(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    // The kernel prints each 32-bit word of the address as a native-endian number.
    let bytes: Vec<u8> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok().map(u32::to_ne_bytes))
        .collect::<Option<Vec<_>>>()?
        .concat();
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?)),
        16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(bytes).ok()?)),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The listening sockets in a /proc/net/tcp table.
fn parse_listeners(table: &str) -> Vec<Listener> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.get(3) == Some(&TCP_LISTEN)).then_some(())?;
            Some(Listener { addr: parse_proc_addr(f.get(1)?)?, inode: f.get(9)?.parse().ok()? })
        })
        .collect()
}

/// Whether a socket listening on `held` keeps a server from binding `wanted`: same port, and
/// the same address or a wildcard on either side.
fn blocks(held: SocketAddr, wanted: SocketAddr) -> bool {
    held.port() == wanted.port()
        && (held.ip() == wanted.ip() || held.ip().is_unspecified() || wanted.ip().is_unspecified())
}

/// The sockets of the calling thread's namespace that listen where `wanted` would.
pub fn listeners_blocking(wanted: SocketAddr) -> Vec<Listener> {
    ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|table| parse_listeners(&table))
        .filter(|l| blocks(l.addr, wanted))
        .collect()
}

/// The process holding socket `inode` (by its `/proc/<pid>/fd` links), as `pid N (comm)`.
fn holder_of(inode: u64) -> Option<String> {
    let target = format!("socket:[{inode}]");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else { continue };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else { continue };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == target.as_str()))
        {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            return Some(format!("pid {pid} ({})", comm.trim()));
        }
    }
    None
}

/// Wait, at most `limit`, until nothing in the calling thread's namespace listens where
/// `wanted` would; the error names each socket still there and its holder.
pub fn wait_until_free(wanted: SocketAddr, limit: Duration) -> Result<(), RigError> {
    let start = Instant::now();
    loop {
        let held = listeners_blocking(wanted);
        if held.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= limit {
            let who: Vec<String> = held
                .iter()
                .map(|l| {
                    let holder = holder_of(l.inode).unwrap_or_else(|| "no process holds it any more".into());
                    format!("{} (socket inode {}, {holder})", l.addr, l.inode)
                })
                .collect();
            return Err(RigError::PortHeld { addr: wanted, waited: limit, holders: who.join("; ") });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_addresses_are_read_in_host_byte_order_for_v4_and_v6() {
        // 10.253.0.100:80 as little-endian x86 writes it, and [::1]:8080.
        assert_eq!(parse_proc_addr("6400FD0A:0050"), Some("10.253.0.100:80".parse().unwrap()));
        assert_eq!(parse_proc_addr("00000000:1F90"), Some("0.0.0.0:8080".parse().unwrap()));
        assert_eq!(
            parse_proc_addr("00000000000000000000000001000000:1F90"),
            Some("[::1]:8080".parse().unwrap())
        );
        assert_eq!(parse_proc_addr("zz:1"), None);
    }

    #[test]
    fn only_listening_sockets_on_the_same_port_and_address_or_a_wildcard_block() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 6400FD0A:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0\n\
           1: 6400FD0A:0050 0200FD0A:C350 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0\n\
           2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0\n";
        let l = parse_listeners(table);
        assert_eq!(l.len(), 2, "the established socket is not a listener: {l:?}");
        let vip: SocketAddr = "10.253.0.100:80".parse().unwrap();
        assert!(blocks(l[0].addr, vip));
        assert!(!blocks(l[1].addr, vip), "another port");
        assert!(
            blocks(l[1].addr, "10.253.0.11:8080".parse().unwrap()),
            "a wildcard listener holds every address"
        );
        assert!(blocks(l[0].addr, "0.0.0.0:80".parse().unwrap()), "a wildcard bind needs every address free");
        assert!(!blocks(l[0].addr, "10.253.0.11:80".parse().unwrap()));
    }

    #[test]
    fn a_held_port_is_reported_with_its_holder_and_a_released_one_is_free() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let err = wait_until_free(addr, Duration::from_millis(50)).unwrap_err().to_string();
        let me = format!("pid {}", std::process::id());
        assert!(err.contains(&addr.to_string()) && err.contains(&me), "{err}");
        drop(listener);
        wait_until_free(addr, Duration::from_secs(5)).unwrap();
    }
}
