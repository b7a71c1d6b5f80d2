//! Putting discovered nodes in force: at start, every source resolved or read once so the
//! switch starts with their nodes; later, a source's new list put in force by a reload of the
//! configuration in force (under the reload lock, so it is serialized with SIGHUP and
//! `locus ctl reload`), and taken back when the switch refuses it.

use super::registry::Registry;
use super::settings::DiscoveryEntry;
use super::source::{Outcome, Source};
use crate::config::{ConfigError, SwitchConfig};
use crate::reload::{ReloadError, ReloadReport, Scope};
use crate::state::Shared;
use std::time::Instant;

/// The registry of `config`'s sources after one refresh of each (together, on a thread and
/// runtime of their own, bounded by each resolver's timeout), and `config` with their nodes.
/// A source that fails is warned about and retried by its task; the switch cannot start with
/// no node at all.
pub fn first_lists(config: SwitchConfig) -> Result<(SwitchConfig, Registry), ConfigError> {
    let registry = Registry::new(config.nodes.clone());
    if config.discovery.is_empty() {
        return Ok((config, registry));
    }
    let entries = config.discovery.clone();
    let refreshed = std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            Ok::<_, std::io::Error>(rt.block_on(futures::future::join_all(entries.iter().map(refresh_once))))
        })
        .join()
    });
    let refreshed = match refreshed {
        Ok(Ok(outcomes)) => outcomes,
        Ok(Err(e)) => return Err(ConfigError::Invalid(format!("discovery: cannot start a runtime: {e}"))),
        Err(_) => return Err(ConfigError::Invalid("discovery: the first resolution panicked".into())),
    };
    for (entry, (outcome, next)) in entries.iter().zip(refreshed) {
        let next_due = Instant::now() + next;
        match outcome {
            Outcome::Nodes(nodes) => {
                tracing::info!(source = %entry.key(), nodes = nodes.len(), "discovery: first list");
                registry.refreshed(entry, Ok(()), next_due);
                registry.swap_list(&entry.key(), Some(nodes));
            }
            Outcome::Failed(e) => {
                tracing::warn!(source = %entry.key(), "discovery: no first list, starting without its nodes: {e}");
                registry.refreshed(entry, Err(e.to_string()), next_due);
            }
            Outcome::Unchanged => {}
        }
    }
    let merged = registry.merge(config);
    check_has_nodes(&merged)?;
    Ok((merged, registry))
}

/// One source's first refresh: what it found and the time until the next.
async fn refresh_once(entry: &DiscoveryEntry) -> (Outcome, std::time::Duration) {
    match Source::new(entry) {
        Ok(mut source) => {
            let r = source.refresh().await;
            (r.outcome, r.next)
        }
        Err(e) => (Outcome::Failed(e), entry.min_ttl()),
    }
}

/// The switch needs a node: a configuration with sources but none of its own is refused while
/// they list none (at start, or a change that would leave no node; the running nodes stay).
pub fn check_has_nodes(config: &SwitchConfig) -> Result<(), ConfigError> {
    if config.nodes.is_empty() && !config.discovery.is_empty() {
        return Err(ConfigError::Invalid(
            "no nodes: no [[node]] is configured and the [[discovery]] sources list none (they \
             answered empty, or have not answered yet)"
                .into(),
        ));
    }
    Ok(())
}

impl Shared {
    /// Put `nodes` in force as the list of `entry`'s source: reload the configuration in force
    /// with its own nodes and every source's list. `None` when `entry` is no longer configured
    /// as it is (a reload changed or removed it meanwhile); a refused list is taken back.
    pub(crate) fn put_discovered(
        &self,
        entry: &DiscoveryEntry,
        nodes: Vec<crate::config::NodeEntry>,
    ) -> Result<Option<ReloadReport>, ReloadError> {
        let _one_at_a_time = self.reload_lock.lock();
        let mut given = (*self.config()).clone();
        if !given.discovery.contains(entry) {
            return Ok(None);
        }
        let key = entry.key();
        let before = self.discovery.swap_list(&key, Some(nodes));
        given.nodes = self.discovery.configured();
        match self.reload_locked(given, Scope::NodesOnly) {
            Ok(report) => Ok(Some(report)),
            Err(e) => {
                self.discovery.swap_list(&key, before);
                Err(e)
            }
        }
    }
}
