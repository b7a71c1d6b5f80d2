//! Handoff mode, the switch side. The protocol: HandOver → Ready|Refused → forward → Go;
//! Route → RouteTo (holding the forwarder first when the connection moves); Rehandoff →
//! HandOver elsewhere; Closed → release the node's load and remove the forwarding entry a
//! little later. `plane` is the state every worker shares, `links` a worker's control
//! channels, `sequence` the moving of one connection, `control` the channels' tasks, `settings` the
//! `[handoff]` configuration.

mod control;
mod links;
mod plane;
mod sequence;
mod settings;

pub use control::{HandoffWorker, spawn_housekeeping, spawn_l4_policy, start_links};
pub use links::WorkerLinks;
pub use plane::{HandoffPlane, HandoffSetupError};
pub use sequence::{ConnectionAddrs, HandoffOutcome, Payload, hand_off};
pub use settings::HandoffSettings;
