//! Shared by the integration tests: a node on 127.0.0.1:0 over a temporary document root,
//! and a raw HTTP/1.1 client over `TcpStream` with a timeout on every read.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use locus_http::{BodyKind, ResponseHead, parse_response};
use locus_node::{NodeConfig, NodeServer};

pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A running node over a temporary root that is removed with it.
pub struct TestNode {
    pub server: Option<NodeServer>,
    pub root: tempfile::TempDir,
}

impl TestNode {
    /// Start a node; `configure` edits the default test configuration (root set, two
    /// workers) before start.
    pub fn start(configure: impl FnOnce(&mut NodeConfig, &Path)) -> TestNode {
        let root = tempfile::tempdir().unwrap();
        let mut config = NodeConfig {
            root: root.path().to_path_buf(),
            workers: 2,
            cpu_threads: 2,
            name: "t1".into(),
            ..NodeConfig::default()
        };
        configure(&mut config, root.path());
        let server = NodeServer::start(config).unwrap();
        TestNode { server: Some(server), root }
    }

    pub fn server(&self) -> &NodeServer {
        self.server.as_ref().unwrap()
    }

    pub fn addr(&self) -> SocketAddr {
        self.server().addr()
    }

    pub fn write(&self, rel: &str, data: &[u8]) {
        let path = self.root.path().join(rel.trim_start_matches('/'));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, data).unwrap();
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr())
    }

    /// One GET on a fresh connection.
    pub fn get(&self, target: &str) -> Response {
        let mut c = self.client();
        c.send(&format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
        c.response(false)
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

/// A body of `len` bytes that differs at every offset modulo 251.
pub fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i % 251) as u8).wrapping_add(salt)).collect()
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A raw HTTP/1.1 client.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::from_stream(TcpStream::connect(addr).unwrap())
    }

    /// A client on an already connected stream.
    pub fn from_stream(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        Client { stream, buf: Vec::new() }
    }

    pub fn send(&mut self, raw: &str) {
        self.send_bytes(raw.as_bytes());
    }

    pub fn send_bytes(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).unwrap();
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 65536];
        let n = self.stream.read(&mut chunk).expect("read timed out or failed");
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    /// Read one response (`head_request`: the request was HEAD, so no body follows).
    pub fn response(&mut self, head_request: bool) -> Response {
        let mut head = ResponseHead::default();
        loop {
            if parse_response(&self.buf, 64 * 1024, head_request, &mut head).unwrap() {
                break;
            }
            assert!(
                self.fill() > 0,
                "connection closed before a response head: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        }
        let headers = head
            .headers
            .iter()
            .map(|h| {
                (
                    String::from_utf8_lossy(h.name.get(&self.buf)).into_owned(),
                    String::from_utf8_lossy(h.value.get(&self.buf)).into_owned(),
                )
            })
            .collect();
        self.buf.drain(..head.head_len);
        let len = match head.body {
            BodyKind::Empty => 0,
            BodyKind::Length(n) => n as usize,
            other => panic!("unexpected body framing {other:?}"),
        };
        while self.buf.len() < len {
            assert!(self.fill() > 0, "connection closed inside a body");
        }
        let body = self.buf.drain(..len).collect();
        Response { status: head.status, headers, body }
    }

    /// Whether the server closed the connection (after whatever was already read).
    pub fn closed(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Ok(_) => {
                self.buf.push(b[0]);
                false
            }
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}
