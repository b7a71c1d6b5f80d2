//! `get_header`: one `GET` on a fresh connection from the calling thread's host, giving the
//! status and one response header (which node served, whether the cache hit), the way the
//! lab and the benchmarks ask a cluster where a request went.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::error::RigError;

/// `GET target` on a fresh connection from the calling thread's host: the status and the value
/// of response header `name` (empty when absent).
pub fn get_header(addr: SocketAddr, target: &str, name: &str) -> Result<(u16, String), RigError> {
    let fail = |e: std::io::Error| RigError::system(format!("GET {target} from {addr}"), e);
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(fail)?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(fail)?;
    write!(s, "GET {target} HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n").map_err(fail)?;
    let mut response = Vec::new();
    s.take(64 << 20).read_to_end(&mut response).map_err(fail)?;
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(response.len());
    let head = String::from_utf8_lossy(&response[..head_end]);
    let mut lines = head.lines();
    let status =
        lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    let value = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    Ok((status, value))
}
