//! The node's side of one-way TCP handoff (`[handoff]`): the agent that restores handed-over
//! connections and carries the switch's routing answers, its configuration, the per-request
//! routing hook of a handed-off connection (`request_router`), and back-end forwarding of a
//! request the switch routes to another node (`backend_forward`).

pub mod agent;
pub mod backend_forward;
pub mod config;
pub mod request_router;
