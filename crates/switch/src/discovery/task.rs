//! The discovery tasks on the switch's control runtime: a supervisor that keeps one task per
//! configured source (started, restarted and stopped as reloads change the sources, all stopped
//! at shutdown), and each source's loop — refresh when due, record the outcome, put a changed
//! list in force, warn about failures at a bounded rate.

use super::settings::DiscoveryEntry;
use super::source::{Outcome, Source};
use super::warn_gate::WarnGate;
use crate::config::NodeEntry;
use crate::state::Shared;
use std::sync::Arc;
use std::time::Instant;
use tokio::task::JoinHandle;

/// Start the supervisor; it ends at shutdown.
pub fn spawn(shared: Arc<Shared>) -> JoinHandle<()> {
    tokio::spawn(supervise(shared))
}

/// Keep one task per source of the configuration in force, until shutdown.
async fn supervise(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown_tx.subscribe();
    let mut reloads = shared.nodes_changed.subscribe();
    let mut running: Vec<(DiscoveryEntry, JoinHandle<()>)> = Vec::new();
    loop {
        let wanted = shared.config().discovery.clone();
        running.retain(|(entry, task)| {
            let keep = wanted.contains(entry);
            if !keep {
                task.abort();
            }
            keep
        });
        for entry in wanted {
            if !running.iter().any(|(e, _)| *e == entry) {
                let task = tokio::spawn(run_source(shared.clone(), entry.clone()));
                running.push((entry, task));
            }
        }
        tokio::select! {
            _ = shutdown.wait_for(|&stop| stop) => break,
            changed = reloads.changed() => if changed.is_err() { break },
        }
    }
    for (_, task) in running {
        task.abort();
    }
}

/// One source's loop: what it keeps from one refresh to the next.
struct SourceLoop {
    shared: Arc<Shared>,
    entry: DiscoveryEntry,
    key: String,
    warnings: WarnGate,
    /// The last list the switch refused, and the reload count then: not offered again until
    /// the list or the configuration changes.
    refused: Option<(Vec<NodeEntry>, u64)>,
}

async fn run_source(shared: Arc<Shared>, entry: DiscoveryEntry) {
    let key = entry.key();
    // Refreshed with these very settings already (at start): the next refresh is due when it
    // said; otherwise (a new or changed source) now.
    let mut due = match shared.discovery.record(&key) {
        Some(r) if r.refreshed_with.as_ref() == Some(&entry) => r.next_due.unwrap_or_else(Instant::now),
        _ => Instant::now(),
    };
    let mut this = SourceLoop { shared, entry, key, warnings: WarnGate::default(), refused: None };
    let mut source = None;
    loop {
        tokio::time::sleep_until(due.into()).await;
        let source = match &mut source {
            Some(s) => s,
            None => match Source::new(&this.entry) {
                Ok(s) => source.insert(s),
                Err(e) => {
                    due = Instant::now() + this.entry.min_ttl();
                    this.shared.discovery.refreshed(&this.entry, Err(e.to_string()), due);
                    this.warnings.warn(&this.key, &e.to_string());
                    continue;
                }
            },
        };
        let refresh = source.refresh().await;
        due = Instant::now() + refresh.next;
        match refresh.outcome {
            Outcome::Unchanged => this.shared.discovery.scheduled(&this.key, due),
            Outcome::Failed(e) => {
                this.shared.discovery.refreshed(&this.entry, Err(e.to_string()), due);
                this.warnings.warn(&this.key, &e.to_string());
            }
            Outcome::Nodes(nodes) => {
                this.shared.discovery.refreshed(&this.entry, Ok(()), due);
                if this.warnings.recovered() {
                    tracing::info!(source = %this.key, "discovery: the source answers again");
                }
                this.put_in_force(nodes).await;
            }
        }
    }
}

impl SourceLoop {
    /// Put `nodes` in force if they differ from the list in force (a reload, off the runtime:
    /// it may take the reload lock behind a SIGHUP's).
    async fn put_in_force(&mut self, nodes: Vec<NodeEntry>) {
        let in_force = self.shared.discovery.record(&self.key).and_then(|r| r.nodes);
        let reloads = *self.shared.nodes_changed.borrow();
        if in_force.as_ref() == Some(&nodes) || self.refused.as_ref() == Some(&(nodes.clone(), reloads)) {
            return;
        }
        let (shared, entry, offered) = (self.shared.clone(), self.entry.clone(), nodes.clone());
        let applied = tokio::task::spawn_blocking(move || shared.put_discovered(&entry, offered)).await;
        match applied {
            Ok(Ok(Some(report))) => {
                self.refused = None;
                tracing::info!(
                    source = %self.key, added = ?report.added, removed = ?report.removed,
                    reweighted = ?report.reweighted, "discovery: nodes changed"
                );
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                let why = format!("the switch refused the new list: {e}");
                self.shared.discovery.refused(&self.key, why.clone());
                self.refused = Some((nodes, *self.shared.nodes_changed.borrow()));
                self.warnings.warn(&self.key, &why);
            }
            Err(e) => self.warnings.warn(&self.key, &format!("putting the list in force failed: {e}")),
        }
    }
}
