//! Carrying out a runtime-API command on the running switch: its answer as JSON, or why it
//! was refused. Every change is logged with who asked and counted; a change made here lasts
//! until the next reload, which puts the file's values back (as HAProxy's runtime API does).

use super::command::Command;
use crate::node_table::AdminState;
use crate::state::Shared;
use locus_core::NodeId;
use locus_policy::PolicyConfig;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

/// Most handed-off connections `sessions` lists.
const MAX_SESSIONS_LISTED: usize = 1000;

impl Shared {
    /// Carry out `command` for `who` (a user id or an address, for the log).
    pub fn execute(&self, command: &Command, who: &str) -> Result<Value, String> {
        let result = match command {
            Command::Status => Ok(crate::admin::status_json(self)),
            Command::Nodes => Ok(self.nodes_json()),
            Command::Drain(name) => self.set_admin_state(name, AdminState::Draining),
            Command::Disable(name) => self.set_admin_state(name, AdminState::Disabled),
            Command::Enable(name) => self.set_admin_state(name, AdminState::Enabled),
            Command::Weight(name, weight) => self.set_weight(name, *weight),
            Command::Policy => Ok(self.policy_json()),
            Command::PolicySet(param, value) => self.set_policy_param(param, value),
            Command::Sessions => Ok(self.sessions_json()),
            Command::Reload => self.reload_from_source(),
        };
        self.counters.ctl_commands.fetch_add(1, Relaxed);
        match &result {
            Err(e) => {
                self.counters.ctl_refused.fetch_add(1, Relaxed);
                tracing::warn!(who, ?command, "control command refused: {e}");
            }
            Ok(_) if command.changes_state() => tracing::info!(who, ?command, "control command done"),
            Ok(_) => tracing::debug!(who, ?command, "control command done"),
        }
        result
    }

    /// The live (not retired) slot named `name`.
    fn live_node(&self, name: &str) -> Result<NodeId, String> {
        self.nodes.find(name).ok_or_else(|| {
            let names: Vec<String> =
                self.nodes.all().iter().filter(|n| !n.is_retired()).map(|n| n.name.clone()).collect();
            format!("no node named `{name}` (nodes: {})", names.join(", "))
        })
    }

    fn nodes_json(&self) -> Value {
        let snap = self.dispatcher.snapshot();
        let nodes: Vec<Value> = self
            .nodes
            .all()
            .iter()
            .zip(&snap.nodes)
            .filter(|(n, _)| !n.is_retired() || n.requests.load(Relaxed) > 0)
            .map(|(n, &(up, load, weight, ramp))| {
                json!({
                    "name": n.name, "addr": n.addr.to_string(), "up": up, "retired": n.is_retired(),
                    "admin": n.admin_state().as_str(), "weight": weight, "load": load, "ramp": ramp,
                    "requests": n.requests.load(Relaxed), "failures": n.failures.load(Relaxed),
                })
            })
            .collect();
        json!({ "nodes": nodes })
    }

    fn set_admin_state(&self, name: &str, state: AdminState) -> Result<Value, String> {
        let id = self.live_node(name)?;
        let info = self.nodes.get(id);
        info.set_admin_state(state);
        self.set_node_up(id, state == AdminState::Enabled);
        let snap = self.dispatcher.snapshot();
        let (up, load, ..) = snap.nodes[id.index()];
        Ok(json!({ "node": name, "admin": state.as_str(), "up": up, "in_flight": load }))
    }

    fn set_weight(&self, name: &str, weight: u32) -> Result<Value, String> {
        let _one_at_a_time = self.reload_lock.lock();
        let id = self.live_node(name)?;
        let mut weights = self.dispatcher.weights();
        weights[id.index()] = weight;
        let config = self.config();
        let how = self.put_policy_in_force(&config.policy, false, &weights)?;
        Ok(json!({ "node": name, "weight": weight, "policy_state": how }))
    }

    fn policy_json(&self) -> Value {
        let snap = self.dispatcher.snapshot();
        json!({
            "policy": self.config().policy,
            "mapping_entries": snap.mapping_len,
            "admission_limit": snap.admission_limit,
            "in_flight": snap.in_flight,
        })
    }

    /// `policy set <param> <value>`: the policy's parameters with one changed, checked as a
    /// configuration's `[policy]` table is.
    fn set_policy_param(&self, param: &str, value: &str) -> Result<Value, String> {
        let _one_at_a_time = self.reload_lock.lock();
        let config = self.config();
        let mut table = serde_json::to_value(&config.policy).map_err(|e| e.to_string())?;
        if param == "name" {
            return Err("`policy set` changes parameters; a different policy comes with a reload".into());
        }
        let parsed = serde_json::from_str::<Value>(value).unwrap_or_else(|_| Value::String(value.into()));
        table[param] = parsed;
        let policy: PolicyConfig =
            serde_json::from_value(table).map_err(|e| format!("policy parameter {param} = {value}: {e}"))?;
        let how = self.put_policy_in_force(&policy, true, &self.dispatcher.weights())?;
        let mut next = (*config).clone();
        next.policy = policy.clone();
        *self.config.write() = Arc::new(next);
        Ok(json!({ "policy": policy, "policy_state": how }))
    }

    /// Build `policy` for `weights` (the check a configuration gets) and put it in force;
    /// "kept" when the running policy took the change with its state.
    fn put_policy_in_force(
        &self,
        policy: &PolicyConfig,
        params_changed: bool,
        weights: &[u32],
    ) -> Result<&'static str, String> {
        let inputs = self.policy_inputs.read().clone();
        let built = locus_policy::build_with(policy, weights, &inputs).map_err(|e| format!("policy: {e}"))?;
        let how = self.dispatcher.reconfigure(policy, params_changed, weights, built);
        Ok(if how == locus_policy::Reconfigured::Kept { "kept" } else { "new" })
    }

    fn sessions_json(&self) -> Value {
        let handed_off = self.handoff.as_ref().map(|plane| {
            let sessions: Vec<Value> = plane
                .sessions(MAX_SESSIONS_LISTED)
                .into_iter()
                .map(|(id, node, target)| {
                    json!({ "id": id.to_string(), "node": self.nodes.get(node).name, "target": target })
                })
                .collect();
            json!({ "count": plane.handed_off_now(), "listed": sessions })
        });
        json!({
            "client_connections": self.connections.open(),
            "max_connections": self.connections.max(),
            "http2_connections": self.h2.connections.load(Relaxed),
            "handed_off": handed_off,
        })
    }

    fn reload_from_source(&self) -> Result<Value, String> {
        let source = self
            .config_source
            .get()
            .ok_or("this switch was started without a configuration file to read again")?;
        let config = source()?;
        let report = self
            .reload(config)
            .map_err(|e| format!("reload refused, the running configuration stays: {e}"))?;
        serde_json::to_value(report).map_err(|e| e.to_string())
    }
}
