//! The node's side of one-way TCP handoff (`[handoff]`): the agent that restores handed-over
//! connections and answers the switch's routing questions, and its configuration.

pub mod agent;
pub mod config;
