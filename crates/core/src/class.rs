//! What one request class costs a node, as a class table states it a priori: CPU time, disk
//! time, response size and the coarse resource it stresses (CAP's classes). Shared by the
//! node (which charges it), the switch and the simulator (whose policies estimate with it).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The resource a request class mostly uses (CAP's classification).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ResourceKind {
    /// Static or light work: network-bound.
    #[default]
    #[serde(rename = "none")]
    None,
    /// CPU-bound (computing CGI, ciphering).
    #[serde(rename = "cpu")]
    Cpu,
    /// Disk-bound (database search over uncached data).
    #[serde(rename = "disk")]
    Disk,
    /// Both CPU- and disk-bound.
    #[serde(rename = "cpu+disk")]
    CpuDisk,
}

impl ResourceKind {
    /// Every kind, in index order.
    pub const ALL: [ResourceKind; 4] =
        [ResourceKind::None, ResourceKind::Cpu, ResourceKind::Disk, ResourceKind::CpuDisk];

    /// The kind's name in configuration (`"none"`, `"cpu"`, `"disk"`, `"cpu+disk"`).
    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::None => "none",
            ResourceKind::Cpu => "cpu",
            ResourceKind::Disk => "disk",
            ResourceKind::CpuDisk => "cpu+disk",
        }
    }

    /// The kind named `name`, if any.
    pub fn from_name(name: &str) -> Option<ResourceKind> {
        ResourceKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind a class's costs imply: CPU if it costs CPU, disk if it costs disk time, both,
    /// or none.
    pub fn of_costs(costs_cpu: bool, costs_disk: bool) -> ResourceKind {
        match (costs_cpu, costs_disk) {
            (true, true) => ResourceKind::CpuDisk,
            (true, false) => ResourceKind::Cpu,
            (false, true) => ResourceKind::Disk,
            (false, false) => ResourceKind::None,
        }
    }

    /// Position in `ALL` (for per-kind tables).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The mean cost of one request of a class, as the class table states it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassCost {
    /// Mean CPU time, ns.
    pub cpu_ns: u64,
    /// Mean disk time, ns (0 for a class that reads nothing uncached).
    pub disk_ns: u64,
    /// Response body size, bytes.
    pub size: u64,
    /// The resource the class mostly uses.
    pub resource: ResourceKind,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_kind_names_round_trip_and_unknown_names_are_none() {
        for k in ResourceKind::ALL {
            assert_eq!(ResourceKind::from_name(k.name()), Some(k));
            assert_eq!(ResourceKind::ALL[k.index()], k);
        }
        assert_eq!(ResourceKind::from_name("gpu"), None);
    }
}
