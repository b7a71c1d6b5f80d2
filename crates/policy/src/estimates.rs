//! `LoadEstimates`: what a load-estimating policy (CSLD, the metric-fed WRR) can tell a
//! caller about its current view — per-node load indices and weights, and CSLD's
//! cache-miss predictions (for the simulator's miss-prediction accuracy).

/// A load-estimating policy's view after its latest period.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadEstimates {
    /// Dispatch weight of each node (0 for a node that is down).
    pub weights: Vec<f64>,
    /// Load index L_k of each node.
    pub loads: Vec<f64>,
    /// Static requests whose hit or miss the policy predicted, so far.
    pub static_requests: u64,
    /// Of those, the ones predicted to miss the node's cache.
    pub predicted_misses: u64,
}
