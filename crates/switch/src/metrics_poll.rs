//! The metrics poller: when the policy reads node reports (`report_period()` is Some), one
//! task per node (started as reloads add nodes, ended as they retire them) GETs the node's `/locus/status` on its admin listener every period, times
//! the exchange (the report's `probe`), reads its `load_report` and hands it to the policy.
//! A poll that fails or outlasts the period gives no report for that period; the failure is
//! logged when the node's polls start failing and again when they recover, not every time.

use crate::node_get::{get, get_request};
use crate::state::Shared;
use locus_core::{NodeId, NodeReport};
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Largest `/locus/status` document read.
const MAX_STATUS_BYTES: usize = 256 * 1024;

/// The path polled on each node's admin listener.
pub const STATUS_PATH: &str = "/locus/status";

/// Start the poll loop of `node` if it has an admin address and the policy reads reports
/// (the period is the policy's when the loop starts; a reload's new policy keeps it). The
/// loop ends when a reload retires the node.
pub fn spawn_poll(shared: &Arc<Shared>, node: NodeId) -> Option<JoinHandle<()>> {
    let period = shared.dispatcher.report_period()?.max(Duration::from_millis(1));
    let admin = shared.nodes.get(node).admin?;
    Some(tokio::spawn(poll_loop(shared.clone(), node, admin, period)))
}

async fn poll_loop(shared: Arc<Shared>, node: NodeId, admin: SocketAddr, period: Duration) {
    let info = shared.nodes.get(node);
    let request = get_request(STATUS_PATH, &admin.to_string(), "locus-switch-metrics");
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Whether the latest poll failed (None before the first): logs go out on changes only.
    let mut failing: Option<bool> = None;
    while !info.is_retired() {
        tick.tick().await;
        let started = Instant::now();
        let answer = tokio::time::timeout(period, get(admin, request.as_bytes(), MAX_STATUS_BYTES)).await;
        let took = started.elapsed();
        let outcome = match answer {
            Ok(Ok(a)) if a.status == 200 => parse_load_report(&a.body),
            Ok(Ok(a)) => Err(format!("GET {STATUS_PATH} answered {}", a.status)),
            Ok(Err(e)) => Err(format!("GET {STATUS_PATH} failed: {e}")),
            Err(_) => Err(format!("GET {STATUS_PATH} took longer than the report period ({period:?})")),
        };
        match outcome {
            Ok(mut report) => {
                report.probe = Some(took);
                *info.last_report.lock() = Some(report);
                shared.dispatcher.report(node, &report);
                if failing == Some(true) {
                    tracing::info!(node = %info.name, %admin, "metrics polls answered again");
                }
                failing = Some(false);
            }
            Err(why) => {
                if failing != Some(true) {
                    tracing::warn!(node = %info.name, %admin, "metrics poll: {why}; no report until it answers");
                }
                failing = Some(true);
            }
        }
    }
}

/// The `load_report` object of a node's status document.
pub fn parse_load_report(body: &[u8]) -> Result<NodeReport, String> {
    #[derive(Deserialize)]
    struct Status {
        load_report: NodeReport,
    }
    serde_json::from_slice::<Status>(body)
        .map(|s| s.load_report)
        .map_err(|e| format!("{STATUS_PATH} has no usable load_report: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_report_is_read_from_the_status_document_and_its_absence_refused() {
        let body = br#"{"name":"n1","requests_total":5,"load_report":
            {"listen_queue":7,"disk_wait":1,"static_active":2,"dynamic_active":3}}"#;
        let r = parse_load_report(body).unwrap();
        assert_eq!((r.listen_queue, r.disk_wait, r.static_active, r.dynamic_active), (7, 1, 2, 3));
        assert_eq!(r.probe, None);
        let e = parse_load_report(br#"{"name":"n1"}"#).unwrap_err();
        assert!(e.contains("load_report"), "{e}");
    }
}
