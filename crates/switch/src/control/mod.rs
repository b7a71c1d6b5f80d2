//! The runtime API: commands (`command`), what they do to the running switch (`execute`),
//! and where they come in — the Unix control socket (`socket`) and the admin listener's
//! `POST /locus/ctl` from this host. `locus ctl` is the client (`crate::ctl`).

pub mod command;
mod execute;
pub mod socket;

pub use command::{Command, USAGE};
