//! `PeerLink`: how a node makes its requests to the other members — from its own listen
//! address when that is a specific one (so peers that tell members by address see the one
//! they know, not the host's default source address), and, with the peer key, signed (the key
//! and this node's identity can change while it runs: a reload, `set_signer`).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;

use parking_lot::RwLock;
use tokio::net::{TcpSocket, TcpStream};

use super::gate::unix_ms;
use super::key::PeerKey;
use super::mac::{AUTH_HEADER, SignedRequest, sign};

/// This node's side of its requests to peers; see the module documentation.
#[derive(Debug)]
pub struct PeerLink {
    /// The source address of every connection to a peer (`None`: the kernel's choice).
    source: Option<IpAddr>,
    /// The key requests are signed with, and this node's identity among the members.
    signer: RwLock<Option<(PeerKey, String)>>,
}

impl PeerLink {
    /// The link of a node listening on `listen`, known to the members as `identity`; it
    /// signs with `key` if there is one.
    pub fn new(listen: SocketAddr, key: Option<PeerKey>, identity: String) -> PeerLink {
        let source = Some(listen.ip()).filter(|ip| !ip.is_unspecified());
        PeerLink { source, signer: RwLock::new(key.map(|k| (k, identity))) }
    }

    /// Sign from now on with `key` (none: unsigned) as `identity` (a reloaded configuration).
    pub fn set_signer(&self, key: Option<PeerKey>, identity: String) {
        *self.signer.write() = key.map(|k| (k, identity));
    }

    /// The source address connections to peers are bound to, if any.
    pub fn source(&self) -> Option<IpAddr> {
        self.source
    }

    /// The `X-Locus-Peer-Auth` line (with its CRLF) for a `method` request of `target` to
    /// the member reached at `to`, made now with a fresh nonce; empty without a key.
    pub fn auth_line(&self, method: &str, target: &str, to: &str) -> String {
        let signer = self.signer.read();
        let Some((key, from)) = &*signer else { return String::new() };
        let request = SignedRequest { method, target, to };
        format!("{AUTH_HEADER}: {}\r\n", sign(key, request, from, unix_ms(), rand::random()))
    }

    /// Connect to `host:port` from the source address. Only addresses of the source's
    /// family are tried bound; a host with none of them is connected to unbound.
    pub async fn connect(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        let Some(source) = self.source else { return TcpStream::connect((host, port)).await };
        let mut last_error = None;
        for addr in tokio::net::lookup_host((host, port)).await? {
            if addr.is_ipv4() != source.is_ipv4() {
                continue;
            }
            match connect_from(source, addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last_error = Some(e),
            }
        }
        match last_error {
            Some(e) => Err(e),
            None => TcpStream::connect((host, port)).await,
        }
    }
}

/// A connection to `addr` from `source` (any port: the port is chosen at connect, so bound
/// connections share the ephemeral ports as unbound ones do: IP_BIND_ADDRESS_NO_PORT).
async fn connect_from(source: IpAddr, addr: SocketAddr) -> io::Result<TcpStream> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads one int that lives across the call; the descriptor is open.
    // Failing (an old kernel) only means the port is chosen at bind, which still works.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&raw const on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    socket.bind(SocketAddr::new(source, 0))?;
    socket.connect(addr).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_listen_address_leaves_the_source_to_the_kernel() {
        let any = PeerLink::new("0.0.0.0:80".parse().unwrap(), None, "a".into());
        assert_eq!(any.source(), None);
        let v6 = PeerLink::new("[::]:80".parse().unwrap(), None, "a".into());
        assert_eq!(v6.source(), None);
        let one = PeerLink::new("127.0.0.2:80".parse().unwrap(), None, "a".into());
        assert_eq!(one.source(), Some("127.0.0.2".parse().unwrap()));
        assert_eq!(one.auth_line("GET", "/", "b:80"), "", "no key, no signature");
        one.set_signer(Some(PeerKey::new(&[7; 32]).unwrap()), "a:80".into());
        assert!(one.auth_line("GET", "/", "b:80").starts_with("X-Locus-Peer-Auth: "), "signed once keyed");
    }

    #[test]
    fn connections_leave_from_the_listen_address() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.3:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let link = PeerLink::new("127.0.0.2:8080".parse().unwrap(), None, "a".into());
            let (client, accepted) = tokio::join!(link.connect("127.0.0.3", port), listener.accept());
            let (_server, from) = accepted.unwrap();
            assert_eq!(from.ip(), "127.0.0.2".parse::<IpAddr>().unwrap());
            assert_eq!(client.unwrap().local_addr().unwrap().ip(), from.ip());
        });
    }
}
