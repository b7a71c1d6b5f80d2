//! Node discovery: `[[discovery]]` sources — a DNS name's A/AAAA or SRV records, or a watched
//! node file — whose nodes join the configuration's own `[[node]]`s, re-resolved at the
//! records' TTL (clamped) or when the file changes, and put in force by the in-place reload.
//!
//! How it fits with reloads. `Shared` keeps, in `Registry`, the configuration's own nodes and
//! each source's latest good list. Every reload — SIGHUP, `locus ctl reload`, or discovery's
//! own — goes through `Shared::reload_locked` under the reload lock, which builds the node list
//! anew: the given configuration's own nodes, then each of its sources' lists. So a SIGHUP
//! (which reads only the file) keeps the discovered nodes, and discovery (which reloads the
//! configuration in force with its own nodes and the changed list) keeps the file's latest
//! settings; the two are serialized by the lock and cannot undo each other. A list the switch
//! refuses (the merged configuration does not check) is taken back, so it never blocks a
//! SIGHUP. A discovery reload re-reads nothing else (no class file rescan, no certificates).
//!
//! Failures. A source that fails — NXDOMAIN, a timeout, a server failure, an answer without
//! usable records, more than `max_nodes`, a file missing or that does not parse — keeps its
//! last good list (warned about at most once a minute per error, counted, shown in status).
//! Only a valid answer changes the list: a NOERROR answer without records (or an SRV "."), or
//! a file without `[[node]]`, is a real "no nodes from this source". The switch never runs
//! without a node: a change that would leave none is refused and the last nodes stay.
//!
//! At start every source is resolved once before the switch serves (bounded by the resolver's
//! timeout), so it starts with their nodes; a task per source on the control runtime
//! (`spawn`) then keeps each list fresh.

mod apply;
mod dns;
mod error;
mod file;
mod registry;
mod settings;
mod source;
mod status;
mod task;
mod warn_gate;

pub use apply::{check_has_nodes, first_lists};
pub use error::DiscoveryError;
pub use registry::Registry;
pub use settings::{DiscoveryEntry, SourceKind};
pub use status::{register_metrics, status_json};
pub use task::spawn;
