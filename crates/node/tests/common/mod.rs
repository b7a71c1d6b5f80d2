//! Shared by the integration tests: a node on 127.0.0.1:0 over a temporary document root;
//! the client is `locus_test_support::Client`.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use locus_node::{NodeConfig, NodeServer};
pub use locus_test_support::{Client, Response};

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
        self.client().get(target)
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
