//! What `Shared` keeps of discovery: the nodes the configuration names itself, each source's
//! list in force, and each source's record (last success, last error, counts) for status and
//! metrics. Every reload builds its node list here: the configuration's own nodes, then each
//! configured source's list.

use super::settings::DiscoveryEntry;
use crate::config::{NodeEntry, SwitchConfig};
use std::collections::HashMap;
use std::time::{Instant, SystemTime};

/// Discovery's part of the switch's shared state.
pub struct Registry {
    inner: parking_lot::Mutex<Inner>,
}

struct Inner {
    /// The `[[node]]` entries (or `--node` flags) of the configuration in force.
    configured: Vec<NodeEntry>,
    /// By source key.
    sources: HashMap<String, SourceRecord>,
}

/// One source's list and history.
#[derive(Clone, Debug, Default)]
pub struct SourceRecord {
    /// The list in force (none before the first good one).
    pub nodes: Option<Vec<NodeEntry>>,
    /// The settings of the last refresh, and when the next is due after it.
    pub refreshed_with: Option<DiscoveryEntry>,
    pub next_due: Option<Instant>,
    pub last_success: Option<SystemTime>,
    /// The newest error (resolution, file, or the switch refusing the list), and when.
    pub last_error: Option<(SystemTime, String)>,
    /// Lookups or reads that gave a list, and that failed.
    pub resolutions: u64,
    pub failures: u64,
    /// Lists the switch refused (the merged configuration did not check).
    pub refused: u64,
}

impl Registry {
    /// No source heard from yet; `configured` are the configuration's own nodes.
    pub fn new(configured: Vec<NodeEntry>) -> Registry {
        Registry { inner: parking_lot::Mutex::new(Inner { configured, sources: HashMap::new() }) }
    }

    /// `given` with its nodes followed by each of its sources' lists in force, in the order
    /// the sources are configured.
    pub fn merge(&self, mut given: SwitchConfig) -> SwitchConfig {
        let inner = self.inner.lock();
        for entry in &given.discovery {
            if let Some(nodes) = inner.sources.get(&entry.key()).and_then(|s| s.nodes.as_ref()) {
                given.nodes.extend(nodes.iter().cloned());
            }
        }
        given
    }

    /// A reload put a configuration with these own nodes and sources in force: keep them, and
    /// forget the sources it no longer lists.
    pub fn in_force(&self, configured: Vec<NodeEntry>, discovery: &[DiscoveryEntry]) {
        let mut inner = self.inner.lock();
        inner.configured = configured;
        inner.sources.retain(|key, _| discovery.iter().any(|d| &d.key() == key));
    }

    /// The configuration's own nodes, in force.
    pub fn configured(&self) -> Vec<NodeEntry> {
        self.inner.lock().configured.clone()
    }

    /// Put `nodes` in force for `key`; the list it replaces.
    pub fn swap_list(&self, key: &str, nodes: Option<Vec<NodeEntry>>) -> Option<Vec<NodeEntry>> {
        let mut inner = self.inner.lock();
        std::mem::replace(&mut inner.sources.entry(key.to_string()).or_default().nodes, nodes)
    }

    /// The record of `key`, if it has one.
    pub fn record(&self, key: &str) -> Option<SourceRecord> {
        self.inner.lock().sources.get(key).cloned()
    }

    /// Every record, by key.
    pub fn records(&self) -> HashMap<String, SourceRecord> {
        self.inner.lock().sources.clone()
    }

    /// `entry` was refreshed: with a list (`Ok`) or an error; the next refresh is due at `next_due`.
    pub fn refreshed(&self, entry: &DiscoveryEntry, result: Result<(), String>, next_due: Instant) {
        let mut inner = self.inner.lock();
        let record = inner.sources.entry(entry.key()).or_default();
        record.refreshed_with = Some(entry.clone());
        record.next_due = Some(next_due);
        match result {
            Ok(()) => {
                record.resolutions += 1;
                record.last_success = Some(SystemTime::now());
            }
            Err(why) => {
                record.failures += 1;
                record.last_error = Some((SystemTime::now(), why));
            }
        }
    }

    /// `key`'s next refresh is due at `next_due` (a file looked at and unchanged).
    pub fn scheduled(&self, key: &str, next_due: Instant) {
        if let Some(record) = self.inner.lock().sources.get_mut(key) {
            record.next_due = Some(next_due);
        }
    }

    /// The switch refused `key`'s new list: why.
    pub fn refused(&self, key: &str, why: String) {
        let mut inner = self.inner.lock();
        let record = inner.sources.entry(key.to_string()).or_default();
        record.refused += 1;
        record.last_error = Some((SystemTime::now(), why));
    }
}
