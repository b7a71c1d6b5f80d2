//! `ExperimentPoint`: one point of an experiment's matrix — a workload, a switch row's
//! implementation, policy (with its configuration) and mode, a node count and a repetition
//! with its seed — and how results name it.

use serde::Serialize;

use crate::experiment::SwitchKind;
use locus_rig::HaproxyTuning;

/// One point of the matrix: a fresh cluster, a warm-up and a measured interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExperimentPoint {
    /// Position in the run order (0-based).
    pub index: usize,
    /// Which run of the point (1-based).
    pub repetition: u32,
    /// The request stream's seed: the workload's seed in the first run, `+ 100` per run after
    /// (the hot set and the popularity order differ per seed; the site stays the same).
    pub seed: u64,
    /// The configuration as results name it: the policy and what the row sets beyond the
    /// defaults (`SwitchRow::config`).
    pub config: String,
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
    /// Handoff rows: the nodes' `rehandoff` (`handoff`, `forward`), if the row sets it.
    pub rehandoff: Option<String>,
    /// The Locus switch's `[policy]` table (TOML), if the row sets parameters.
    pub policy_table: Option<String>,
    /// The nodes' cooperative caching replacement (`lru`, `lfu`), if the row sets it.
    pub coop: Option<String>,
    /// DC rows: every co-op's replica quota (`64MiB`), if the row sets it.
    pub dc_quota: Option<String>,
    /// DC rows: the homes' balancing period in ms, if the row sets it.
    pub dc_balance_ms: Option<u64>,
    /// Locus rows: the switch's class costs multiplied by this, if the row sets it.
    pub class_cost_scale: Option<f64>,
    /// HAProxy rows: the backend's knobs.
    #[serde(skip)]
    pub haproxy: HaproxyTuning,
}

/// The seed of a workload's request stream in run `repetition` (1-based).
pub fn seed_of_run(workload_seed: u64, repetition: u32) -> u64 {
    workload_seed + 100 * u64::from(repetition.saturating_sub(1))
}

impl ExperimentPoint {
    /// The policy as results name it: `rr`, or `rr+cf-lru` when the nodes cache cooperatively.
    pub fn policy_label(&self) -> String {
        match &self.coop {
            Some(c) => format!("{}+cf-{c}", self.policy),
            None => self.policy.clone(),
        }
    }

    /// `locus lard-r t_low=4 proxy, 4 nodes` for messages.
    pub fn label(&self) -> String {
        format!(
            "{} {} {}, {} node{}",
            self.switch.name(),
            self.config,
            self.mode,
            self.nodes,
            if self.nodes == 1 { "" } else { "s" }
        )
    }
}
