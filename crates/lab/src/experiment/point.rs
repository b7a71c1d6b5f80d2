//! `ExperimentPoint`: one point of an experiment's matrix — a workload, a switch row's
//! implementation, policy and mode, a node count and a repetition — and how results name it.

use serde::Serialize;

use crate::experiment::SwitchKind;

/// One point of the matrix: a fresh cluster, a warm-up and a measured interval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExperimentPoint {
    /// Position in the run order (0-based).
    pub index: usize,
    /// Which run of the point (1-based).
    pub repetition: u32,
    /// Index into `Experiment::workloads`.
    pub workload: usize,
    pub switch: SwitchKind,
    pub policy: String,
    pub mode: String,
    pub nodes: usize,
    /// Switch workers.
    pub workers: u32,
    /// Locus switch `splice_min_bytes`, if the row sets it.
    pub splice_min_bytes: Option<u64>,
    /// The Locus switch's `[policy]` table (TOML), if the row sets parameters.
    pub policy_table: Option<String>,
    /// The nodes' cooperative caching replacement (`lru`, `lfu`), if the row sets it.
    pub coop: Option<String>,
    /// DC rows: every co-op's replica quota (`64MiB`), if the row sets it.
    pub dc_quota: Option<String>,
    /// DC rows: the homes' balancing period in ms, if the row sets it.
    pub dc_balance_ms: Option<u64>,
}

impl ExperimentPoint {
    /// The policy as results name it: `rr`, or `rr+cf-lru` when the nodes cache cooperatively.
    pub fn policy_label(&self) -> String {
        match &self.coop {
            Some(c) => format!("{}+cf-{c}", self.policy),
            None => self.policy.clone(),
        }
    }

    /// `locus lard-r proxy, 4 nodes` for messages.
    pub fn label(&self) -> String {
        format!(
            "{} {} {}, {} node{}",
            self.switch.name(),
            self.policy_label(),
            self.mode,
            self.nodes,
            if self.nodes == 1 { "" } else { "s" }
        )
    }
}
