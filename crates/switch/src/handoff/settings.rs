//! Handoff and l4 modes' settings (`[handoff]`): the control channel's key, the tc
//! forwarder's interface and pinning, the timings, and l4's selection at a SYN.

use crate::config::ConfigError;
use crate::mode::L4Selection;
use serde::Deserialize;
use std::path::PathBuf;

/// Handoff mode: the control channel's key, the packet forwarder, and the timings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HandoffSettings {
    /// File holding the key shared with the node agents, in hex (at least 16 bytes).
    pub key_file: Option<PathBuf>,
    /// The key in hex, inline (prefer `key_file`: the configuration may be world-readable).
    pub key: Option<String>,
    /// Interface to attach the tc forwarder to (the one clients and nodes are reached on).
    /// Absent: no forwarder, for a switch whose nodes run on the same host (tests, a
    /// single-machine deployment): the kernel delivers the client's packets to whichever
    /// socket holds the connection.
    pub interface: Option<String>,
    /// bpffs directory to pin the forwarder's maps in, so handed-off connections survive a
    /// restart of the switch (the next switch adopts them). Absent: not pinned.
    pub pin_dir: Option<PathBuf>,
    /// Longest wait for a node's Ready before the switch serves the request itself.
    pub ready_timeout_ms: u64,
    /// After a node reports a connection closed, keep its forwarding entry this long (the
    /// close's last ACK must still reach the node).
    pub close_linger_ms: u64,
    /// Forwarding entries no packet matched for this long are deleted (closes never reported).
    pub expire_idle_s: u64,
    /// Time between reconnection attempts to an agent whose control channel is down.
    pub reconnect_ms: u64,
    /// l4 mode: how the forwarder picks a node at a SYN.
    pub l4_selection: L4Selection,
}

impl Default for HandoffSettings {
    fn default() -> HandoffSettings {
        HandoffSettings {
            key_file: None,
            key: None,
            interface: None,
            pin_dir: None,
            ready_timeout_ms: 2_000,
            close_linger_ms: 1_000,
            expire_idle_s: 900,
            reconnect_ms: 500,
            l4_selection: L4Selection::Rr,
        }
    }
}

impl HandoffSettings {
    /// The control-channel key, from `key_file` or `key`.
    pub fn load_key(&self) -> Result<locus_handoff::ControlKey, ConfigError> {
        let text = match (&self.key_file, &self.key) {
            (Some(path), _) => std::fs::read_to_string(path)
                .map_err(|source| ConfigError::Io { path: path.clone(), error: source })?,
            (None, Some(key)) => key.clone(),
            (None, None) => {
                return Err(ConfigError::Invalid(
                    "handoff mode needs a key: set handoff.key_file (a file with the key in hex)".into(),
                ));
            }
        };
        locus_handoff::ControlKey::from_hex(text.trim())
            .map_err(|e| ConfigError::Invalid(format!("handoff key: {e}")))
    }
}
