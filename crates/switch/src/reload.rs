//! Applying a new configuration to the running switch in place (SIGHUP, `locus ctl reload`):
//! check it whole first (it validates, its class and site files load, its policy builds for
//! the node slots it will have, its TLS files load), then swap it in. Nodes are added (new
//! slots, in slow start), removed (retired: out of the view for good, their requests finish,
//! their LARD targets move) or re-weighted; the policy keeps its state where it can take the
//! change; limits, health, HTTP and TLS settings take effect. What needs new sockets or threads
//! keeps its running value and is named in the report. A refused reload changes nothing.
//! Every reload's nodes are the given configuration's own plus the discovered ones (see
//! `discovery`).

use crate::config::{ConfigError, SwitchConfig};
use crate::node_table::NodeInfo;
use crate::site::SiteInputs;
use crate::state::Shared;
use locus_core::NodeId;
use locus_io::keep_running;
use locus_policy::{Policy, Reconfigured};
use std::sync::atomic::Ordering::Relaxed;

/// Why a reload was refused (the running configuration stays).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("[tls]: {0}")]
    Tls(#[from] locus_tls::TlsError),
    #[error("the switch is shutting down")]
    ShuttingDown,
}

/// What a reload changed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadReport {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub reweighted: Vec<String>,
    /// The policy in force, and whether it kept its state (`kept`) or was built anew.
    pub policy: &'static str,
    pub policy_state: &'static str,
    pub tls_reloaded: bool,
    /// Settings that changed in the file but need a restart (or an upgrade) to take effect.
    pub needs_restart: Vec<&'static str>,
}

/// A surviving node slot, a retired one back in service, or a new one, with its weight.
enum Slot {
    Keep(NodeId, u32),
    Revive(NodeId, u32),
    Add(Box<NodeInfo>, u32),
}

/// What a reload reads again.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Everything: the class file, the site's file table, the TLS files (SIGHUP, `locus ctl`).
    Whole,
    /// The nodes only (discovery): the running classes, file table and certificates stay.
    NodesOnly,
}

/// A checked configuration, ready to swap in.
struct Plan {
    config: SwitchConfig,
    /// The class and file tables read again (none when the running ones stay).
    site: Option<SiteInputs>,
    slots: Vec<Slot>,
    retire: Vec<NodeId>,
    weights: Vec<u32>,
    policy: Box<dyn Policy>,
    tls: Option<locus_tls::PreparedTls>,
    needs_restart: Vec<&'static str>,
}

impl Shared {
    /// Check `new` and put it in force; on any error nothing changes.
    pub fn reload(&self, new: SwitchConfig) -> Result<ReloadReport, ReloadError> {
        let _one_at_a_time = self.reload_lock.lock();
        self.reload_locked(new, Scope::Whole)
    }

    /// `reload`, the reload lock held: `given`'s own nodes followed by the discovered ones.
    pub(crate) fn reload_locked(
        &self,
        given: SwitchConfig,
        scope: Scope,
    ) -> Result<ReloadReport, ReloadError> {
        if self.is_shutting_down() {
            return Err(ReloadError::ShuttingDown);
        }
        let running = self.config();
        let configured = given.nodes.clone();
        let plan = match self.plan_reload(&running, self.discovery.merge(given), scope) {
            Ok(plan) => plan,
            Err(e) => {
                self.counters.reloads_refused.fetch_add(1, Relaxed);
                return Err(e);
            }
        };
        let sources = plan.config.discovery.clone();
        let report = self.apply(&running, plan);
        self.discovery.in_force(configured, &sources);
        self.counters.reloads.fetch_add(1, Relaxed);
        Ok(report)
    }

    fn plan_reload(
        &self,
        running: &SwitchConfig,
        mut new: SwitchConfig,
        scope: Scope,
    ) -> Result<Plan, ReloadError> {
        let needs_restart = match scope {
            Scope::Whole => keep_fixed_settings(running, &mut new),
            Scope::NodesOnly => Vec::new(),
        };
        crate::discovery::check_has_nodes(&new)?;
        new.validate()?;
        let site = match scope {
            Scope::Whole => Some(SiteInputs::load(&new)?),
            Scope::NodesOnly => None,
        };
        let inputs = site.as_ref().map_or_else(|| self.policy_inputs.read().clone(), |s| s.inputs.clone());
        let (slots, retire) = self.match_nodes(&new);
        let mut weights = self.dispatcher.weights();
        for slot in &slots {
            match slot {
                Slot::Keep(id, w) | Slot::Revive(id, w) => weights[id.index()] = *w,
                Slot::Add(_, w) => weights.push(*w),
            }
        }
        let policy = locus_policy::build_with(&new.policy, &weights, &inputs)
            .map_err(|e| ConfigError::Invalid(format!("policy: {e}")))?;
        let tls = match (&self.tls, &new.tls) {
            (Some(service), Some(settings)) if scope == Scope::Whole => {
                Some(service.prepare(settings.clone(), std::time::SystemTime::now())?)
            }
            _ => None,
        };
        Ok(Plan { config: new, site, slots, retire, weights, policy, tls, needs_restart })
    }

    /// Each node of `new` against the table: the same node (name and addresses) keeps its
    /// slot, or takes back its retired one; a new name, or a name at new addresses, gets a
    /// new slot; the rest retire.
    fn match_nodes(&self, new: &SwitchConfig) -> (Vec<Slot>, Vec<NodeId>) {
        let table = self.nodes.all();
        let mut kept = Vec::new();
        let slots = new
            .node_names()
            .into_iter()
            .zip(&new.nodes)
            .map(|(name, entry)| {
                let same = |n: &NodeInfo| n.name == name && n.is_same_node(entry);
                match table.iter().position(|n| same(n) && !n.is_retired()) {
                    Some(i) => {
                        kept.push(NodeId(i as u32));
                        Slot::Keep(NodeId(i as u32), entry.weight)
                    }
                    None => match table.iter().rposition(|n| same(n)) {
                        Some(i) => Slot::Revive(NodeId(i as u32), entry.weight),
                        None => Slot::Add(Box::new(NodeInfo::new(name, entry)), entry.weight),
                    },
                }
            })
            .collect();
        let retire = (0..table.len() as u32)
            .map(NodeId)
            .filter(|id| !table[id.index()].is_retired() && !kept.contains(id))
            .collect();
        (slots, retire)
    }

    fn apply(&self, running: &SwitchConfig, plan: Plan) -> ReloadReport {
        let Plan { config, site, slots, retire, weights, policy, tls, needs_restart } = plan;
        let table = self.nodes.all();
        let (mut added, mut reweighted) = (Vec::new(), Vec::new());
        let old_weights = self.dispatcher.weights();
        let mut revived = Vec::new();
        for slot in slots {
            match slot {
                Slot::Keep(id, w) if old_weights[id.index()] != w => {
                    reweighted.push(table[id.index()].name.clone())
                }
                Slot::Keep(..) => {}
                Slot::Revive(id, _) => {
                    added.push(table[id.index()].name.clone());
                    revived.push(id);
                }
                Slot::Add(info, _) => {
                    added.push(info.name.clone());
                    if let Some(plane) = &self.handoff {
                        plane.add_nodes(&[info.addr]);
                    }
                    self.nodes.push(*info);
                }
            }
        }
        let params_changed = running.policy != config.policy;
        let how = self.dispatcher.reconfigure(&config.policy, params_changed, &weights, policy);
        // Nodes come back before others leave: a reload that swaps every node never leaves
        // the view empty.
        for id in revived {
            // Back in the view in slow start; its health checks start again.
            let info = self.nodes.get(id);
            info.set_retired(false);
            info.set_admin_state(crate::node_table::AdminState::Enabled);
            self.set_node_up(id, true);
        }
        let mut removed = Vec::new();
        for id in retire {
            let info = self.nodes.get(id);
            info.set_retired(true);
            self.set_node_up(id, false);
            removed.push(info.name.clone());
        }
        let tls_reloaded = tls.is_some();
        if let (Some(service), Some(prepared)) = (&self.tls, tls) {
            service.install(prepared);
        }
        if let Some(site) = site {
            *self.classifier.write() = std::sync::Arc::new(site.classifier);
            *self.policy_inputs.write() = site.inputs;
        }
        let policy_name = config.policy.name();
        *self.config.write() = std::sync::Arc::new(config);
        self.nodes_changed.send_modify(|reloads| *reloads += 1);
        let policy_state = if how == Reconfigured::Kept { "kept" } else { "new" };
        let report = ReloadReport {
            added,
            removed,
            reweighted,
            policy: policy_name,
            policy_state,
            tls_reloaded,
            needs_restart,
        };
        tracing::info!(
            added = ?report.added, removed = ?report.removed, reweighted = ?report.reweighted,
            policy = policy_name, policy_state, tls = tls_reloaded, "configuration reloaded"
        );
        for setting in &report.needs_restart {
            tracing::warn!(
                setting,
                "reload: this setting changed but keeps its running value until a restart or upgrade"
            );
        }
        report
    }
}

/// Copy into `new` the settings that need new sockets or threads, from `running`; the names
/// of those that differed.
fn keep_fixed_settings(running: &SwitchConfig, new: &mut SwitchConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    keep_running(&mut changed, "listen", &mut new.listen, &running.listen);
    keep_running(&mut changed, "listen_tls", &mut new.listen_tls, &running.listen_tls);
    keep_running(&mut changed, "admin", &mut new.admin, &running.admin);
    keep_running(&mut changed, "control_socket", &mut new.control_socket, &running.control_socket);
    keep_running(&mut changed, "mode", &mut new.mode, &running.mode);
    keep_running(&mut changed, "workers", &mut new.workers, &running.workers);
    keep_running(&mut changed, "access_log", &mut new.access_log, &running.access_log);
    keep_running(&mut changed, "handoff", &mut new.handoff, &running.handoff);
    keep_running(&mut changed, "http2.enabled", &mut new.http2.enabled, &running.http2.enabled);
    // l4 mode's forwarder holds a table of the nodes it steers to, set at start.
    let members = |c: &SwitchConfig| {
        let addrs = c.nodes.iter().map(|n| (n.addr, n.handoff, n.admin));
        c.node_names().into_iter().zip(addrs).collect::<Vec<_>>()
    };
    if running.mode == crate::Mode::L4 && members(running) != members(new) {
        changed.push("nodes (l4 mode)");
        new.nodes = running.nodes.clone();
    }
    if running.tls.is_none() != new.tls.is_none() {
        changed.push("tls");
        new.tls = running.tls.clone();
    }
    if let (Some(r), Some(n)) = (&running.tls, &mut new.tls)
        && n.max_handshakes != r.max_handshakes
    {
        changed.push("tls.max_handshakes");
        n.max_handshakes = r.max_handshakes;
    }
    // The connection bound was fitted to the open-file limit at start-up.
    let fitted = crate::open_files::plan(new).map(|p| p.max_connections as usize);
    if fitted.is_ok_and(|m| m != running.limits.max_connections) {
        changed.push("limits.max_connections");
    }
    new.limits.max_connections = running.limits.max_connections;
    changed
}
