//! `WrrVariant`: the six metric-fed WRR baselines of the CSLD paper's Table 2 — which node
//! metrics each reads, how often it polls them and what a poll costs each node.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// One row of the CSLD paper's Table 2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WrrVariant {
    /// Input, probe and host metrics every 200 ms, at no cost (the ideal).
    #[serde(rename = "i")]
    I,
    /// Every 500 ms, 5 ms of CPU per node per poll.
    #[default]
    #[serde(rename = "a")]
    A,
    /// Every 1000 ms, 5 ms per poll.
    #[serde(rename = "b")]
    B,
    /// Every 500 ms, 10 ms per poll.
    #[serde(rename = "a-prime")]
    APrime,
    /// Every 1000 ms, 10 ms per poll.
    #[serde(rename = "b-prime")]
    BPrime,
    /// The probe's response time only, every 500 ms, at no host cost.
    #[serde(rename = "p")]
    P,
}

impl WrrVariant {
    /// Every variant, in the paper's column order.
    pub const ALL: [WrrVariant; 6] =
        [WrrVariant::I, WrrVariant::A, WrrVariant::B, WrrVariant::APrime, WrrVariant::BPrime, WrrVariant::P];

    /// How often the front-end polls the nodes.
    pub fn period(self) -> Duration {
        Duration::from_millis(match self {
            WrrVariant::I => 200,
            WrrVariant::A | WrrVariant::APrime | WrrVariant::P => 500,
            WrrVariant::B | WrrVariant::BPrime => 1000,
        })
    }

    /// CPU a poll of the host metrics costs each node.
    pub fn overhead(self) -> Duration {
        Duration::from_millis(match self {
            WrrVariant::I | WrrVariant::P => 0,
            WrrVariant::A | WrrVariant::B => 5,
            WrrVariant::APrime | WrrVariant::BPrime => 10,
        })
    }

    /// Whether the variant reads the input and host metrics (all but WRR_p).
    pub fn uses_host_metrics(self) -> bool {
        self != WrrVariant::P
    }

    /// The name in configuration (`"a-prime"`).
    pub fn name(self) -> &'static str {
        match self {
            WrrVariant::I => "i",
            WrrVariant::A => "a",
            WrrVariant::B => "b",
            WrrVariant::APrime => "a-prime",
            WrrVariant::BPrime => "b-prime",
            WrrVariant::P => "p",
        }
    }

    /// The paper's label (`"WRR_a'"`).
    pub fn label(self) -> &'static str {
        match self {
            WrrVariant::I => "WRR_i",
            WrrVariant::A => "WRR_a",
            WrrVariant::B => "WRR_b",
            WrrVariant::APrime => "WRR_a'",
            WrrVariant::BPrime => "WRR_b'",
            WrrVariant::P => "WRR_p",
        }
    }
}

impl fmt::Display for WrrVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}
