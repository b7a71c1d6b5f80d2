//! `DcNodeSpec`: how the lab starts a node in DC mode — the cluster's servers by name, the
//! node's own name among them, its replica quota, quota method and balancing period — and the
//! `--dc-…` arguments that say so.

use std::net::SocketAddr;

/// A node's DC mode (`--dc-servers`, `--dc-self`, `--dc-quota`, `--dc-method`).
#[derive(Clone, Debug)]
pub struct DcNodeSpec {
    /// Every server of the cluster, by name, as clients reach it.
    pub servers: Vec<(String, SocketAddr)>,
    /// This node's name among them.
    pub self_name: String,
    /// Replica quota (`64MiB`); `None`: the node's default.
    pub quota: Option<String>,
    /// `naive`, `deletion-aware`, `resource-aware`, `migration`, or `no-replication` (DC
    /// serving with replication off).
    pub method: String,
    /// Balancing period in ms (`--dc-balance-ms`); `None`: the node's default.
    pub balance_ms: Option<u64>,
}

impl DcNodeSpec {
    /// The node's `--dc-…` arguments.
    pub fn args(&self) -> Vec<String> {
        let servers: Vec<String> = self.servers.iter().map(|(n, a)| format!("{n}={a}")).collect();
        let mut args =
            vec!["--dc-servers".into(), servers.join(","), "--dc-self".into(), self.self_name.clone()];
        if self.method == "no-replication" {
            args.extend(["--dc-replicate".into(), "false".into()]);
        } else {
            args.extend(["--dc-method".into(), self.method.clone()]);
        }
        if let Some(q) = &self.quota {
            args.extend(["--dc-quota".into(), q.clone()]);
        }
        if let Some(b) = self.balance_ms {
            args.extend(["--dc-balance-ms".into(), b.to_string()]);
        }
        args
    }
}
