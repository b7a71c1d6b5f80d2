//! Idle keep-alive connections: open many client connections to a server, make one request
//! on each so it is a real keep-alive connection, hold them all, and read the server's
//! resident memory.

use anyhow::{Context, bail};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The idle connections held, and why there are fewer than asked for, if there are.
pub struct IdleConnections {
    pub held: Vec<TcpStream>,
    /// The server turned a connection away (503, or closed it unanswered): it holds no more.
    pub stopped: Option<String>,
}

/// Open up to `n` connections to `addr`, each completing one `GET path`, and return them open.
/// A server that turns one away (a switch at its connection limit, fitted to its open-file
/// limit, answers 503) ends the holding there; any other failure is an error.
pub fn hold_idle_connections(addr: SocketAddr, path: &str, n: usize) -> anyhow::Result<IdleConnections> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n");
    let mut held = Vec::with_capacity(n);
    let mut buf = vec![0u8; 64 * 1024];
    for i in 0..n {
        let mut s = TcpStream::connect(addr).with_context(|| format!("connection {i} of {n}"))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(request.as_bytes())?;
        match read_one_response(&mut s, &mut buf) {
            Ok(()) => held.push(s),
            Err(Refused(why)) if !held.is_empty() => {
                return Ok(IdleConnections { held, stopped: Some(format!("connection {}: {why}", i + 1)) });
            }
            Err(Refused(why)) => bail!("response on connection {i}: {why}"),
        }
    }
    Ok(IdleConnections { held, stopped: None })
}

/// Why a connection got no 200 response.
struct Refused(String);

impl From<std::io::Error> for Refused {
    fn from(e: std::io::Error) -> Refused {
        Refused(e.to_string())
    }
}

/// Read one Content-Length-delimited 200 response of any length (the body is read and dropped).
fn read_one_response(s: &mut TcpStream, buf: &mut [u8]) -> Result<(), Refused> {
    let mut have = 0;
    let (end, len) = loop {
        if have == buf.len() {
            return Err(Refused("response head larger than the read buffer".into()));
        }
        let n = s.read(&mut buf[have..])?;
        if n == 0 {
            return Err(Refused("closed before the response head ended".into()));
        }
        have += n;
        if let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200") {
                return Err(Refused(format!("answered {}", head.lines().next().unwrap_or(""))));
            }
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| Refused("no Content-Length".into()))?;
            break (end + 4, len);
        }
    };
    let mut left = len.saturating_sub(have - end);
    while left > 0 {
        let n = s.read(buf)?;
        if n == 0 {
            return Err(Refused(format!("closed with {left} body bytes missing")));
        }
        left = left.saturating_sub(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn bodies_larger_than_the_buffer_are_read_to_their_end() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let body = vec![b'x'; 300_000];
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut req = [0u8; 1024];
            let _ = c.read(&mut req).unwrap();
            c.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes())
                .unwrap();
            c.write_all(&body).unwrap();
            // Hold the connection open until the client is done with it.
            let _ = c.read(&mut req);
        });
        let held = hold_idle_connections(addr, "/big", 1).unwrap();
        assert_eq!((held.held.len(), held.stopped.as_deref()), (1, None));
        drop(held);
        server.join().unwrap();
    }

    #[test]
    fn a_server_that_turns_a_connection_away_ends_the_holding_there() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // Two connections served and held open, then a 503, as a switch at its limit answers.
        let server = std::thread::spawn(move || {
            let mut open = Vec::new();
            for status in ["200 OK", "200 OK", "503 Service Unavailable"] {
                let (mut c, _) = listener.accept().unwrap();
                let mut req = [0u8; 1024];
                let _ = c.read(&mut req).unwrap();
                c.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\nok").as_bytes()).unwrap();
                open.push(c);
            }
            open
        });
        let held = hold_idle_connections(addr, "/x", 10).unwrap();
        assert_eq!(held.held.len(), 2);
        let why = held.stopped.expect("stopped at the 503");
        assert!(why.contains("connection 3") && why.contains("503"), "{why}");
        drop(server.join().unwrap());
        // Turned away at the first connection: nothing was held, which is an error.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut req = [0u8; 1024];
            let _ = c.read(&mut req).unwrap();
            c.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n").unwrap();
        });
        assert!(hold_idle_connections(addr, "/x", 10).is_err());
        server.join().unwrap();
    }
}
