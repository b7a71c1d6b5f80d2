//! The network a lab or benchmark runs on: namespaces on a bridge (`topology`), the TCP
//! congestion control they use (`congestion`), who listens on a port in a host (`listeners`),
//! and `Net`, loopback or those namespaces, where servers and clients are placed (`net`).

mod congestion;
mod listeners;
mod net;
mod topology;

pub use congestion::CongestionControl;
pub use net::Net;
pub(crate) use topology::{BRIDGE_ALIAS, delete_bridge, delete_namespace};
pub use topology::{
    BRIDGE_PREFIX, DEFAULT_CONGESTION_CONTROL, LAN_PREFIX_LEN, LabHost, LabNetwork, MAX_NODES,
    NAMESPACE_PREFIX, SCRATCH_FOLDER_PREFIX, VIRTUAL_IP,
};
