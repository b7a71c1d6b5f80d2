//! `NodeReport`: what a node says about its own load when polled (the metrics a metric-fed
//! WRR reads): listen-queue length, requests waiting for the disk, static and dynamic
//! requests in service, and how long the poll's probe took.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One node's self-reported load at the moment it was polled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReport {
    /// Connections accepted by the kernel and not yet by the server (listen queue).
    pub listen_queue: u32,
    /// Requests waiting for the disk (queued or reading).
    pub disk_wait: u32,
    /// Static requests in service.
    pub static_active: u32,
    /// Dynamic requests in service.
    pub dynamic_active: u32,
    /// Response time of the poll's probe request, if one completed.
    #[serde(default, with = "probe_ns", skip_serializing_if = "Option::is_none")]
    pub probe: Option<Duration>,
}

mod probe_ns {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(v: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        v.map(|d| d.as_nanos() as u64).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_nanos))
    }
}
