//! Idle keep-alive connections: open many client connections to a server, make one request
//! on each so it is a real keep-alive connection, hold them all, and read the server's
//! resident memory.

use anyhow::{Context, bail};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Open `n` connections to `addr`, each completing one `GET path`, and return them open.
pub fn hold_idle_connections(addr: SocketAddr, path: &str, n: usize) -> anyhow::Result<Vec<TcpStream>> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n");
    let mut held = Vec::with_capacity(n);
    let mut buf = vec![0u8; 64 * 1024];
    for i in 0..n {
        let mut s = TcpStream::connect(addr).with_context(|| format!("connection {i} of {n}"))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(request.as_bytes())?;
        read_one_response(&mut s, &mut buf).with_context(|| format!("response on connection {i}"))?;
        held.push(s);
    }
    Ok(held)
}

/// Read one Content-Length-delimited response of any length (the body is read and dropped).
fn read_one_response(s: &mut TcpStream, buf: &mut [u8]) -> anyhow::Result<()> {
    let mut have = 0;
    let (end, len) = loop {
        if have == buf.len() {
            bail!("response head larger than the read buffer");
        }
        let n = s.read(&mut buf[have..])?;
        if n == 0 {
            bail!("connection closed before the response head ended");
        }
        have += n;
        if let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200") {
                bail!("unexpected response: {}", head.lines().next().unwrap_or(""));
            }
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .context("no Content-Length")?;
            break (end + 4, len);
        }
    };
    let mut left = len.saturating_sub(have - end);
    while left > 0 {
        let n = s.read(buf)?;
        if n == 0 {
            bail!("connection closed with {left} body bytes missing");
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
        assert_eq!(held.len(), 1);
        drop(held);
        server.join().unwrap();
    }
}
