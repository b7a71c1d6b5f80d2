//! `NodeError`: why a node could not start.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::ConfigError;

/// Why `NodeServer::start` failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("document root {}: {error}", path.display())]
    Root { path: PathBuf, error: std::io::Error },
    #[error("binding {addr}: {error}")]
    Bind { addr: SocketAddr, error: std::io::Error },
    #[error("starting the node's threads: {0}")]
    Start(std::io::Error),
    #[error(transparent)]
    OpenFiles(#[from] locus_io::TooFewDescriptors),
    #[error("TLS: {0}")]
    Tls(#[from] locus_tls::TlsError),
}
