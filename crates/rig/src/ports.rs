//! Loopback ports for servers started on known ports (`locus demo`, the tests): each one free
//! when handed out and never handed out twice in a process. A port bound and released can come
//! back from the next bind to port 0, and nodes listen with SO_REUSEPORT, so two servers given
//! one port would silently share it (or a node would find itself among its own peers).

use std::net::TcpListener;
use std::sync::Mutex;

use crate::error::RigError;

/// A loopback port free now and never returned before in this process.
pub fn free_port() -> Result<u16, RigError> {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    loop {
        let listener =
            TcpListener::bind("127.0.0.1:0").map_err(|e| RigError::system("bind 127.0.0.1:0", e))?;
        let port = listener.local_addr().map_err(|e| RigError::system("local_addr", e))?.port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return Ok(port);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_never_handed_out_twice() {
        let ports: Vec<u16> = (0..200).map(|_| free_port().unwrap()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len());
    }
}
