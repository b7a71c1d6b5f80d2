//! The Locus front-end switch: accept client connections, parse each request strictly, pick a
//! node by policy (shared with the simulator), and relay over pooled keep-alive node
//! connections; with health checks, an admission queue, an access log, an admin listener and
//! graceful shutdown. `SwitchServer` runs it; `cli` is the `locus switch` subcommand.

mod access_log;
mod admin;
pub mod cli;
mod client;
mod client_stream;
mod config;
mod control;
pub mod ctl;
mod discovery;
mod dispatch;
mod forward;
mod h2;
mod handoff;
mod health;
mod listeners;
mod metrics_poll;
mod mode;
mod node_addr;
mod node_connection;
mod node_get;
mod node_table;
mod open_files;
mod pool;
mod proxy;
mod reload;
mod server;
mod session;
mod site;
mod sniff;
mod splice_mode;
mod state;
mod target_check;
mod upgrade;
mod worker;

pub use config::{ConfigError, HandoffSettings, HealthConfig, NodeEntry, SwitchConfig, SwitchLimits};
pub use discovery::{DiscoveryEntry, DiscoveryError};
pub use dispatch::{DispatchError, DispatchSnapshot};
pub use h2::Http2Settings;
pub use handoff::HandoffSetupError;
pub use mode::{L4Selection, Mode};
pub use reload::{ReloadError, ReloadReport};
pub use server::{SwitchError, SwitchServer};
pub use state::ConfigSource;
