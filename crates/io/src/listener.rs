//! Binding a server's listeners: `bind_listener` (one non-blocking TCP listener, SO_REUSEADDR,
//! SO_REUSEPORT if asked), `bind_listeners` (one per worker on one address, joined with
//! SO_REUSEPORT so the kernel spreads connections over them), and `BindRetry`, how patiently a
//! listen address still in use is tried again.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

/// Connections the kernel queues on a listener before the server takes them.
pub const LISTEN_BACKLOG: i32 = 4096;

/// How often, and how far apart, a bind is tried again while its address is in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindRetry {
    pub retries: u32,
    pub pause: Duration,
}

impl BindRetry {
    /// NGINX's rule (5 × 500 ms): a server restarted right after its predecessor exited can
    /// find the address held for a moment by sockets still being torn down.
    pub const PATIENT: BindRetry = BindRetry { retries: 5, pause: Duration::from_millis(500) };
    /// Fail at once.
    pub const NONE: BindRetry = BindRetry { retries: 0, pause: Duration::ZERO };
}

/// A non-blocking listener on `addr` with SO_REUSEADDR, and SO_REUSEPORT when `reuse_port`.
pub fn bind_listener(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// [`bind_listener`], tried again as `retry` says while the address is in use.
pub fn bind_listener_patiently(
    addr: SocketAddr,
    reuse_port: bool,
    retry: BindRetry,
) -> io::Result<TcpListener> {
    let mut tries = 0;
    loop {
        match bind_listener(addr, reuse_port) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && tries < retry.retries => {
                tries += 1;
                tracing::warn!(%addr, error = %e, "listen address in use; trying again ({tries}/{})", retry.retries);
                std::thread::sleep(retry.pause);
            }
            other => return other,
        }
    }
}

/// `n` listeners on `addr`, one per worker: the first binds (picking the port if it is 0,
/// tried again as `retry` says while the address is in use), the others join it with
/// SO_REUSEPORT. A single listener does not set SO_REUSEPORT, so a second server started on
/// the same address by mistake fails to bind instead of silently taking half the connections.
pub fn bind_listeners(addr: SocketAddr, n: usize, retry: BindRetry) -> io::Result<Vec<TcpListener>> {
    let first = bind_listener_patiently(addr, n > 1, retry)?;
    let bound = first.local_addr()?;
    let mut listeners = Vec::with_capacity(n.max(1));
    listeners.push(first);
    for _ in 1..n {
        listeners.push(bind_listener(bound, true)?);
    }
    Ok(listeners)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_port() -> TcpListener {
        TcpListener::bind("127.0.0.1:0").unwrap()
    }

    #[test]
    fn a_listen_address_freed_while_retrying_is_bound() {
        let holder = held_port();
        let addr = holder.local_addr().unwrap();
        let freer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(holder);
        });
        let retry = BindRetry { retries: 50, pause: Duration::from_millis(20) };
        let bound = bind_listener_patiently(addr, true, retry).unwrap();
        assert_eq!(bound.local_addr().unwrap(), addr);
        freer.join().unwrap();
    }

    #[test]
    fn a_listen_address_held_past_the_retries_is_an_address_in_use_error() {
        let holder = held_port();
        let addr = holder.local_addr().unwrap();
        let retry = BindRetry { retries: 2, pause: Duration::from_millis(5) };
        let err = bind_listener_patiently(addr, true, retry).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        drop(holder);
    }

    #[test]
    fn n_listeners_share_the_port_the_first_one_picked() {
        let listeners = bind_listeners("127.0.0.1:0".parse().unwrap(), 3, BindRetry::NONE).unwrap();
        let port = listeners[0].local_addr().unwrap().port();
        assert_ne!(port, 0);
        assert_eq!(listeners.len(), 3);
        assert!(listeners.iter().all(|l| l.local_addr().unwrap().port() == port));
    }

    #[test]
    fn a_single_listener_leaves_its_port_to_no_one_else() {
        let one = bind_listeners("127.0.0.1:0".parse().unwrap(), 1, BindRetry::NONE).unwrap();
        let addr = one[0].local_addr().unwrap();
        let err = bind_listener(addr, true).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    }
}
