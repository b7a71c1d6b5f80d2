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

/// Read one Content-Length-delimited response.
fn read_one_response(s: &mut TcpStream, buf: &mut [u8]) -> anyhow::Result<()> {
    let mut have = 0;
    loop {
        let n = s.read(&mut buf[have..])?;
        if n == 0 {
            bail!("connection closed before the response ended");
        }
        have += n;
        let text = &buf[..have];
        if let Some(end) = text.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&text[..end]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200") {
                bail!("unexpected response: {}", head.lines().next().unwrap_or(""));
            }
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .context("no Content-Length")?;
            if have >= end + 4 + len {
                return Ok(());
            }
        }
        if have == buf.len() {
            bail!("response larger than the read buffer");
        }
    }
}
