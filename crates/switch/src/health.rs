//! Active health checks: every interval each node gets `GET <path>` on a fresh connection;
//! `fall` failures in a row take it out of the view, `rise` passes bring it back (with slow
//! start in the policy `Cluster`). Passive failures from live traffic reset the pass streak.
//! Each node's newest check (a `state::CheckRecord`: passed or why not, and how long it took)
//! is kept for `/locus/status`, so a node out of the view says whether its check timed out.

use crate::config::HealthConfig;
use crate::node_get::{get, get_request};
use crate::node_table::{AdminState, CheckRecord, NodeInfo};
use crate::state::Shared;
use locus_core::NodeId;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Start the check loop of `node` on the current runtime; it ends when a reload retires
/// the node, and reads the health settings in force at each check.
pub fn spawn_check(shared: &Arc<Shared>, node: NodeId) -> JoinHandle<()> {
    tokio::spawn(check_loop(shared.clone(), node))
}

async fn check_loop(shared: Arc<Shared>, node: NodeId) {
    let info = shared.nodes.get(node);
    while !info.is_retired() {
        let config = shared.config();
        if info.admin_state() != AdminState::Disabled {
            check_once(&shared, node, &info, &config.health).await;
        }
        tokio::time::sleep(Duration::from_millis(config.health.interval_ms)).await;
    }
}

/// One check of `node`, and what its outcome does to the node's place in the view.
async fn check_once(shared: &Shared, node: NodeId, info: &NodeInfo, h: &HealthConfig) {
    let request = get_request(&h.path, &info.host_header, "locus-switch-health");
    let limit = Duration::from_millis(h.timeout_ms);
    let started = Instant::now();
    let check = async { get(info.addr, request.as_bytes(), 0).await.map(|a| a.status) };
    let result = tokio::time::timeout(limit, check).await;
    let took = started.elapsed();
    if let Ok(Err(e)) = &result
        && locus_io::is_out_of_descriptors(e)
    {
        // The switch's own shortage says nothing of the node: neither a pass nor a fail.
        tracing::debug!(node = %info.name, "health check skipped: {e}");
        return;
    }
    let outcome = match result {
        Ok(Ok(status)) if status < 500 => Ok(status),
        Ok(Ok(status)) => Err(format!("health check GET {} answered {status}", h.path)),
        Ok(Err(e)) => Err(format!("health check GET {} failed: {e}", h.path)),
        Err(_) => Err(format!(
            "health check GET {} timed out: no response within {} ms (health.timeout_ms; a slow \
             document needs a larger limit or a cheaper health.path)",
            h.path, h.timeout_ms
        )),
    };
    *info.last_check.lock() = Some(CheckRecord::new(&outcome, took));
    let up = shared.dispatcher.is_up(node);
    match outcome {
        Ok(_) => {
            info.check_fails.store(0, Relaxed);
            let passes = info.check_passes.fetch_add(1, Relaxed) + 1;
            if !up && passes >= h.rise as u64 && shared.set_node_up(node, true) {
                tracing::info!(node = %info.name, addr = %info.addr, "node back in the view");
            }
        }
        Err(why) => {
            info.check_passes.store(0, Relaxed);
            let fails = info.check_fails.fetch_add(1, Relaxed) + 1;
            let took_ms = took.as_millis() as u64;
            if up && fails >= h.fall as u64 && shared.set_node_up(node, false) {
                tracing::warn!(node = %info.name, addr = %info.addr, took_ms, "node out of the view: {why}");
            } else {
                tracing::debug!(node = %info.name, addr = %info.addr, took_ms, fails, "{why}");
            }
        }
    }
}
