//! Why a discovery source gave no list this time: the resolver failed or answered what cannot
//! be used, the node file is missing or does not parse. Each keeps the source's last good list.

/// A failed resolution or read of one source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// The name does not exist (NXDOMAIN): a typo or a DNS outage looks the same, so it removes
    /// no node.
    #[error("{name}: no such name (NXDOMAIN)")]
    NoSuchName { name: String },
    /// The resolver failed: a timeout, a server failure or refusal, a malformed answer.
    #[error("{name}: {why}")]
    Resolver { name: String, why: String },
    /// The answer had records, none of them usable (SRV port 0, unspecified addresses).
    #[error("{name}: {why}")]
    Unusable { name: String, why: String },
    /// More nodes than the source's `max_nodes`.
    #[error("{found} nodes, more than max_nodes = {max}")]
    TooMany { found: usize, max: usize },
    /// The node file is gone.
    #[error("{path}: the file is missing")]
    FileMissing { path: String },
    /// The node file could not be read or does not parse.
    #[error("{path}: {why}")]
    File { path: String, why: String },
}
