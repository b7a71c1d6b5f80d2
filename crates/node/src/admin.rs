//! The admin listener: `GET /locus/health` (200), `GET /locus/status` (JSON counters, queue
//! lengths, cache usage, the CPU model's queue, cooperative caching's `coop` object, the
//! reloads applied and refused, and the `load_report` the switch polls) and
//! `GET /metrics` (Prometheus/OpenMetrics text, names prefixed `locus_node_`), served on its
//! own thread so it answers even when the workers are busy.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use locus_core::Method;
use locus_http::{BodyKind, RequestHead, http_date_now, parse_request, reason_phrase};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::context::NodeContext;
use crate::cpu::model::CpuModel;

const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The `/locus/status` document; its `load_report` object is a `locus_core::NodeReport`
/// (without `probe`, which the polling switch measures itself).
pub fn status_json(node: &NodeContext) -> serde_json::Value {
    let s = node.metrics.snapshot();
    let load = node.load_report();
    let (objects, used) = node.store.usage();
    let cache = node.store.stats();
    let statuses: serde_json::Map<String, serde_json::Value> =
        s.statuses.iter().map(|(k, v)| (k.clone(), (*v).into())).collect();
    serde_json::json!({
        "name": node.name,
        "active_connections": s.active_connections,
        "connections_total": s.connections_total,
        "connections_refused": s.connections_refused,
        "accept_errors": s.accept_errors,
        "handoffs_accepted": s.handoffs_accepted,
        "handoffs_refused": s.handoffs_refused,
        "rehandoffs": s.rehandoffs,
        "backend_forwards": s.backend_forwards,
        "routes_asked": s.routes_asked,
        "routes_unanswered": s.routes_unanswered,
        "handoff_channels": s.handoff_channels,
        "handoff_node_id": s.handoff_node_id,
        "reloads": s.reloads,
        "reloads_refused": s.reloads_refused,
        "requests_total": s.requests,
        "in_flight": s.in_flight,
        "requests_unanswered": s.unanswered,
        "bytes_sent": s.bytes_sent,
        "cache_hits": s.hits,
        "cache_misses": s.misses,
        "cache_bypass": s.bypass,
        "cache_used_bytes": used,
        "cache_objects": objects,
        "cache_capacity_bytes": node.store.capacity(),
        "cache_evictions": cache.evictions,
        "loads_in_progress": node.store.flights_in_progress(),
        "dynamic_requests": s.dynamic,
        "disk_queue_lengths": node.storage.as_ref().map(|m| m.queue_lengths()).unwrap_or_default(),
        "cpu_queue_length": node.cpu.queue_length(),
        "cpu_running": node.cpu.running(),
        "statuses": statuses,
        "load_report": load,
        "cpu_model": node.cpu_model.as_ref().map(cpu_model_json),
        "coop": node.coop.as_ref().map(|c| c.status_json(s.hits)),
        "dc": node.dc.as_ref().map(|d| d.status_json()),
        "tls": node.tls.as_ref().map(|t| t.status(std::time::SystemTime::now())),
    })
}

/// The `cpu_model` object of `/locus/status`: the configuration and the queue now.
fn cpu_model_json(model: &CpuModel) -> serde_json::Value {
    let s = model.stats();
    serde_json::json!({
        "config": model.config(),
        "active": s.active,
        "busy_s": s.busy_s,
        "served_s": s.served_s,
        "charged": s.charged,
        "cancelled": s.cancelled,
    })
}

/// The CPU model's gauges and counters.
fn register_cpu_model(registry: &mut Registry, model: &CpuModel) {
    let s = model.stats();
    let active: Gauge = Gauge::default();
    active.set(s.active as i64);
    registry.register("cpu_model_active", "Jobs in the modelled CPUs' processor-sharing queue", active);
    let seconds = |registry: &mut Registry, name: &str, help: &str, v: f64| {
        let c: Counter<f64, AtomicU64> = Counter::default();
        c.inc_by(v);
        registry.register(name, help, c);
    };
    seconds(registry, "cpu_model_busy_seconds", "Time the modelled CPUs had work", s.busy_s);
    seconds(registry, "cpu_model_served_seconds", "Modelled CPU time served, summed over CPUs", s.served_s);
    for (name, help, v) in [
        ("cpu_model_charged", "Jobs served by the modelled CPUs", s.charged),
        ("cpu_model_cancelled", "Jobs removed before completing (request gone)", s.cancelled),
    ] {
        let c: Counter = Counter::default();
        c.inc_by(v);
        registry.register(name, help, c);
    }
}

/// The `/metrics` text.
pub fn metrics_text(node: &NodeContext) -> String {
    let s = node.metrics.snapshot();
    let load = node.load_report();
    let (objects, used) = node.store.usage();
    let mut registry = Registry::with_prefix("locus_node");
    let counter = register_counter;
    let gauge = register_gauge;
    counter(&mut registry, "requests", "Requests whose head was parsed", s.requests);
    counter(
        &mut registry,
        "requests_unanswered",
        "Requests whose connection closed before their response was sent",
        s.unanswered,
    );
    counter(&mut registry, "bytes_sent", "Bytes written to clients", s.bytes_sent);
    counter(&mut registry, "cache_hits", "Static responses served from the cache", s.hits);
    counter(&mut registry, "cache_misses", "Static responses loaded and cached", s.misses);
    counter(&mut registry, "cache_bypass", "Static responses not cacheable", s.bypass);
    counter(&mut registry, "dynamic_requests", "Dynamic class requests", s.dynamic);
    counter(&mut registry, "connections", "Connections accepted", s.connections_total);
    counter(&mut registry, "connections_refused", "Connections closed at the limit", s.connections_refused);
    counter(&mut registry, "accept_errors", "Failed accepts on the client listener", s.accept_errors);
    counter(&mut registry, "handoffs_accepted", "Handed-off connections taken over", s.handoffs_accepted);
    counter(&mut registry, "handoffs_refused", "Handed-off connections refused", s.handoffs_refused);
    counter(
        &mut registry,
        "rehandoffs",
        "Connections given back to the switch for another node",
        s.rehandoffs,
    );
    counter(&mut registry, "backend_forwards", "Requests fetched from another node", s.backend_forwards);
    counter(&mut registry, "routes_asked", "Route questions sent to the switch", s.routes_asked);
    counter(
        &mut registry,
        "routes_unanswered",
        "Requests served here for want of a usable answer from the switch",
        s.routes_unanswered,
    );
    counter(&mut registry, "reloads", "Configuration reloads put in force", s.reloads);
    counter(&mut registry, "reloads_refused", "Configuration reloads refused", s.reloads_refused);
    gauge(&mut registry, "handoff_channels", "Live control channels from switches", s.handoff_channels);
    gauge(&mut registry, "active_connections", "Open client connections", s.active_connections);
    gauge(&mut registry, "in_flight", "Requests being handled", s.in_flight);
    gauge(&mut registry, "cache_used_bytes", "Bytes of cached documents", used);
    gauge(&mut registry, "cache_objects", "Cached documents", objects as u64);
    gauge(&mut registry, "cache_capacity_bytes", "Cache capacity", node.store.capacity());
    gauge(
        &mut registry,
        "cpu_queue_length",
        "Dynamic jobs waiting for a CPU thread",
        node.cpu.queue_length() as u64,
    );
    register_load_report(&mut registry, &load);
    if let Some(model) = &node.cpu_model {
        register_cpu_model(&mut registry, model);
    }
    if let Some(coop) = &node.coop {
        coop.stats.snapshot(coop.view().directory.size()).register(&mut registry, s.hits);
        coop.gate.register(&mut registry);
    }
    if let Some(dc) = &node.dc {
        dc.stats.snapshot().register(&mut registry, &dc.gauges());
        dc.gate.register(&mut registry);
    }
    let responses = Family::<Vec<(String, String)>, Counter>::default();
    for (status, n) in &s.statuses {
        responses.get_or_create(&vec![("status".to_string(), status.clone())]).inc_by(*n);
    }
    registry.register("responses", "Responses by status code", responses);
    if let Some(model) = &node.storage {
        let disks = Family::<Vec<(String, String)>, Gauge>::default();
        for (i, n) in model.queue_lengths().into_iter().enumerate() {
            disks.get_or_create(&vec![("disk".to_string(), i.to_string())]).set(n as i64);
        }
        registry.register("disk_queue_length", "Modelled disk reads queued or in service", disks);
    }
    if let Some(tls) = &node.tls {
        tls.status(std::time::SystemTime::now()).register_metrics(&mut registry);
    }
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
        text.clear();
    }
    text
}

/// The four load figures a metric-fed balancer reads, as gauges.
fn register_load_report(registry: &mut Registry, load: &locus_core::NodeReport) {
    let gauge = |registry: &mut Registry, name: &str, help: &str, v: u32| {
        let g: Gauge = Gauge::default();
        g.set(i64::from(v));
        registry.register(name, help, g);
    };
    gauge(
        registry,
        "listen_queue",
        "Connections in the HTTP listeners' accept queues, not yet accepted",
        load.listen_queue,
    );
    gauge(
        registry,
        "disk_waiting",
        "Requests waiting for a modelled disk or reading from it (misses and dynamic disk reads)",
        load.disk_wait,
    );
    gauge(registry, "static_active", "Static requests being served", load.static_active);
    gauge(registry, "dynamic_active", "Dynamic requests being served", load.dynamic_active);
}

fn respond(
    out: &mut Vec<u8>,
    node: &NodeContext,
    status: u16,
    content_type: &str,
    body: &[u8],
    head_only: bool,
    close: bool,
) {
    let mut head = String::with_capacity(256);
    let _ = write!(head, "HTTP/1.1 {status} {}\r\nDate: ", reason_phrase(status));
    out.extend_from_slice(head.as_bytes());
    http_date_now(out);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&node.node_headers);
    head.clear();
    let _ = write!(head, "Content-Type: {content_type}\r\nContent-Length: {}\r\n", body.len());
    if status == 405 {
        head.push_str("Allow: GET, HEAD\r\n");
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    out.extend_from_slice(head.as_bytes());
    if !head_only {
        out.extend_from_slice(body);
    }
}

fn route(node: &NodeContext, head: &RequestHead, buf: &[u8], close: bool, out: &mut Vec<u8>) {
    let head_only = head.method == Method::Head;
    if !matches!(head.method, Method::Get | Method::Head) {
        return respond(out, node, 405, "text/plain", b"405 Method Not Allowed\n", false, close);
    }
    let path = head.path_str(buf);
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    match path {
        "/locus/health" => respond(out, node, 200, "text/plain", b"ok\n", head_only, close),
        "/locus/status" => {
            let mut body = serde_json::to_vec_pretty(&status_json(node)).unwrap_or_default();
            body.push(b'\n');
            respond(out, node, 200, "application/json", &body, head_only, close)
        }
        "/metrics" => {
            let body = metrics_text(node);
            let t = "application/openmetrics-text; version=1.0.0; charset=utf-8";
            respond(out, node, 200, t, body.as_bytes(), head_only, close)
        }
        _ => respond(out, node, 404, "text/plain", b"404 Not Found\n", head_only, close),
    }
}

async fn serve_admin_connection(mut stream: TcpStream, node: Arc<NodeContext>) {
    let limits = node.settings().parse_limits;
    let mut buf = vec![0u8; limits.max_head_bytes + 1024];
    let mut filled = 0;
    let mut head = RequestHead::default();
    let mut out = Vec::new();
    loop {
        match parse_request(&buf[..filled], &limits, &mut head) {
            Ok(true) => {
                let close = !head.keep_alive || head.body != BodyKind::Empty;
                out.clear();
                route(&node, &head, &buf[..filled], close, &mut out);
                if stream.write_all(&out).await.is_err() || close {
                    return;
                }
                buf.copy_within(head.head_len..filled, 0);
                filled -= head.head_len;
                continue;
            }
            Ok(false) => {}
            Err(e) => {
                out.clear();
                respond(&mut out, &node, e.status(), "text/plain", b"", false, true);
                let _ = stream.write_all(&out).await;
                return;
            }
        }
        match tokio::time::timeout(ADMIN_TIMEOUT, stream.read(&mut buf[filled..])).await {
            Ok(Ok(n)) if n > 0 => filled += n,
            _ => return,
        }
    }
}

/// Accept admin connections until shutdown.
pub async fn serve_admin(listener: TcpListener, node: Arc<NodeContext>, mut shutdown: watch::Receiver<bool>) {
    let mut connections = tokio::task::JoinSet::new();
    let mut backoff = locus_io::AcceptBackoff::new();
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    while connections.try_join_next().is_some() {}
                    connections.spawn(serve_admin_connection(stream, node.clone()));
                }
                Err(e) => {
                    backoff.after("admin listener", &e).await;
                }
            },
        }
    }
    connections.shutdown().await;
}

/// Register a counter standing at `v`.
pub(crate) fn register_counter(registry: &mut Registry, name: &str, help: &str, v: u64) {
    let c: Counter = Counter::default();
    c.inc_by(v);
    registry.register(name, help, c);
}

/// Register a gauge at `v` (saturated to i64).
pub(crate) fn register_gauge(registry: &mut Registry, name: &str, help: &str, v: u64) {
    let g: Gauge = Gauge::default();
    g.set(v.min(i64::MAX as u64) as i64);
    registry.register(name, help, g);
}
