//! Discovery in `/locus/status` (a `discovery` object with one object per source: its nodes,
//! last success, last error, counts) and in `/metrics` (`locus_switch_discovery_*` by source).

use super::registry::Registry;
use super::settings::DiscoveryEntry;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry as Metrics;
use serde_json::{Value, json};
use std::sync::atomic::AtomicU64;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

type Labels = Vec<(String, String)>;

/// The `discovery` object: by source key, each configured source's state.
pub fn status_json(registry: &Registry, sources: &[DiscoveryEntry]) -> Value {
    let records = registry.records();
    let now = Instant::now();
    let unix = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut out = serde_json::Map::new();
    for entry in sources {
        let key = entry.key();
        let record = records.get(&key).cloned().unwrap_or_default();
        let nodes: Option<Vec<String>> =
            record.nodes.as_ref().map(|list| list.iter().filter_map(|n| n.name.clone()).collect());
        out.insert(
            key,
            json!({
                "kind": entry.kind().as_str(),
                "target": entry.target(),
                "nodes": nodes,
                "last_success_unix": record.last_success.map(unix),
                "last_error": record.last_error.as_ref().map(|(_, why)| why),
                "last_error_unix": record.last_error.as_ref().map(|(t, _)| unix(*t)),
                "resolutions": record.resolutions,
                "failures": record.failures,
                "refused": record.refused,
                "next_refresh_in_ms": record.next_due.map(|t| t.saturating_duration_since(now).as_millis() as u64),
            }),
        );
    }
    Value::Object(out)
}

/// The per-source metrics: resolutions, failures and refused lists (counters), nodes (gauge).
pub fn register_metrics(metrics: &mut Metrics, registry: &Registry, sources: &[DiscoveryEntry]) {
    if sources.is_empty() {
        return;
    }
    let records = registry.records();
    let resolutions = Family::<Labels, Counter<u64, AtomicU64>>::default();
    let failures = Family::<Labels, Counter<u64, AtomicU64>>::default();
    let refused = Family::<Labels, Counter<u64, AtomicU64>>::default();
    let nodes = Family::<Labels, Gauge>::default();
    for entry in sources {
        let key = entry.key();
        let record = records.get(&key).cloned().unwrap_or_default();
        let labels = vec![("source".to_string(), key)];
        resolutions.get_or_create(&labels).inc_by(record.resolutions);
        failures.get_or_create(&labels).inc_by(record.failures);
        refused.get_or_create(&labels).inc_by(record.refused);
        nodes.get_or_create(&labels).set(record.nodes.map_or(0, |n| n.len() as i64));
    }
    metrics.register(
        "discovery_resolutions",
        "Discovery lookups or file reads that gave a list",
        resolutions,
    );
    metrics.register(
        "discovery_failures",
        "Discovery lookups or file reads that failed (the last list stayed)",
        failures,
    );
    metrics.register(
        "discovery_refused",
        "Discovered lists the switch refused (the last list stayed)",
        refused,
    );
    metrics.register("discovery_nodes", "Nodes the source's list in force holds", nodes);
}
