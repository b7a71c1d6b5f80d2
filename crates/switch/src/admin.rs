//! The admin listener: `/locus/status` (JSON) and `/metrics` (Prometheus text format, built
//! with prometheus-client from the switch's counters at scrape time).

use crate::state::Shared;
use locus_http::{Limits, RequestHead, parse_request};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Serve the admin listener until the task is aborted.
pub async fn serve(shared: Arc<Shared>, listener: std::net::TcpListener) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("admin listener unusable: {e}");
            return;
        }
    };
    let mut backoff = locus_io::AcceptBackoff::new();
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                tokio::spawn(answer(shared.clone(), stream, peer));
            }
            Err(e) => {
                backoff.after("admin listener", &e).await;
            }
        }
    }
}

async fn answer(shared: Arc<Shared>, mut stream: TcpStream, peer: std::net::SocketAddr) {
    let mut buf = Vec::with_capacity(2048);
    let mut head = RequestHead::default();
    let limits = Limits { max_head_bytes: 8192, max_headers: 64 };
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if stream.read_buf(&mut buf).await? == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            match parse_request(&buf, &limits, &mut head) {
                Ok(true) => return Ok(true),
                Ok(false) => continue,
                Err(_) => return Ok(false),
            }
        }
    })
    .await;
    let (status, ctype, body) = if !matches!(read, Ok(Ok(true))) {
        (400, "text/plain", "bad request\n".to_string())
    } else {
        match head.path_str(&buf).split('?').next().unwrap_or("") {
            "/locus/ctl" => control_command(&shared, &head, &mut buf, &mut stream, peer).await,
            "/locus/status" => (200, "application/json", status_json(&shared).to_string() + "\n"),
            "/metrics" => {
                (200, "application/openmetrics-text; version=1.0.0; charset=utf-8", metrics_text(&shared))
            }
            "/locus/health" => (200, "text/plain", "ok\n".to_string()),
            _ => (404, "text/plain", "not found\n".to_string()),
        }
    };
    let reply = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        locus_http::reason_phrase(status),
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// `POST /locus/ctl` with a command line as its body (at most `MAX_LINE` bytes): the
/// runtime API for clients on this host only (the peer's address must be a loopback one).
async fn control_command(
    shared: &Shared,
    head: &RequestHead,
    buf: &mut Vec<u8>,
    stream: &mut TcpStream,
    peer: std::net::SocketAddr,
) -> (u16, &'static str, String) {
    use crate::control::command::MAX_LINE;
    if !peer.ip().is_loopback() {
        shared.counters.ctl_refused.fetch_add(1, Relaxed);
        tracing::warn!(%peer, "control command over HTTP refused: not from this host");
        return (403, "text/plain", "the runtime API answers clients on this host only\n".into());
    }
    let len = match (head.method, head.body) {
        (locus_core::Method::Post, locus_http::BodyKind::Length(n)) if n as usize <= MAX_LINE => n as usize,
        (locus_core::Method::Post, _) => {
            return (
                400,
                "text/plain",
                format!("a command of at most {MAX_LINE} bytes, with Content-Length\n"),
            );
        }
        _ => return (405, "text/plain", "POST a command line\n".into()),
    };
    let want = head.head_len + len;
    let filled = tokio::time::timeout(Duration::from_secs(5), async {
        while buf.len() < want {
            if stream.read_buf(buf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok::<(), std::io::Error>(())
    })
    .await;
    if !matches!(filled, Ok(Ok(()))) {
        return (400, "text/plain", "the command's body did not arrive\n".into());
    }
    let answer = crate::control::socket::answer_line(shared, &buf[head.head_len..want], &peer.to_string());
    let status = if answer["ok"] == true { 200 } else { 400 };
    (status, "application/json", answer.to_string() + "\n")
}

/// The status document: nodes with their state and counters, dispatcher figures, totals.
pub fn status_json(shared: &Shared) -> serde_json::Value {
    let snap = shared.dispatcher.snapshot();
    let c = &shared.counters;
    let estimates = shared.dispatcher.load_estimates();
    let estimate = |i: usize, pick: fn(&locus_policy::LoadEstimates) -> &Vec<f64>| {
        estimates.as_ref().and_then(|e| pick(e).get(i).copied())
    };
    let nodes: Vec<_> = shared
        .nodes
        .all()
        .iter()
        .zip(&snap.nodes)
        .enumerate()
        .map(|(i, (n, &(up, load, weight, ramp)))| {
            json!({
                "name": n.name,
                "addr": n.addr.to_string(),
                "up": up,
                "retired": n.is_retired(),
                "load": load,
                "weight": weight,
                "ramp": ramp,
                "requests": n.requests.load(Relaxed),
                "failures": n.failures.load(Relaxed),
                "bytes_from_node": n.bytes_from.load(Relaxed),
                "last_check": n.last_check.lock().as_ref().map(|c| c.to_json()),
                "last_report": *n.last_report.lock(),
                "policy_weight": estimate(i, |e| &e.weights),
                "policy_load": estimate(i, |e| &e.loads),
            })
        })
        .collect();
    let handoff = shared.handoff.as_ref().map(|p| {
        let h = &p.counters;
        json!({
            "handoffs": h.handoffs.load(Relaxed),
            "rehandoffs": h.rehandoffs.load(Relaxed),
            "refused": h.refused.load(Relaxed),
            "failed": h.failed.load(Relaxed),
            "served_here": h.served_here.load(Relaxed),
            "routes": h.routes.load(Relaxed),
            "closed": h.closed.load(Relaxed),
            "channels_up": h.channels_up.load(Relaxed),
            "channel_failures": h.channel_failures.load(Relaxed),
            "on_nodes_now": p.handed_off_now(),
            "forwarding_entries": p.forwarding_entries(),
            "forwarder": p.has_forwarder(),
            "tls": {
                "handoffs": h.tls_handoffs.load(Relaxed),
                "two_way": h.tls_two_way.lock().clone(),
            },
        })
    });
    json!({
        "pid": std::process::id(),
        "mode": shared.config().mode.as_str(),
        "handoff": handoff,
        "policy": snap.policy,
        "mapping_entries": snap.mapping_len,
        "in_flight": snap.in_flight,
        "queued": snap.queued,
        "admission_limit": snap.admission_limit,
        "policy_assignments": snap.assignments,
        "connections": shared.connections.open(),
        "max_connections": shared.config().limits.max_connections,
        "accepted": c.accepted.load(Relaxed),
        "rejected_over_limit": c.rejected_over_limit.load(Relaxed),
        "shed_no_descriptors": c.shed_no_descriptors.load(Relaxed),
        "requests": c.requests.load(Relaxed),
        "responses": {
            "1xx": c.responses[0].load(Relaxed),
            "2xx": c.responses[1].load(Relaxed),
            "3xx": c.responses[2].load(Relaxed),
            "4xx": c.responses[3].load(Relaxed),
            "5xx": c.responses[4].load(Relaxed),
        },
        "client_errors": c.client_errors.load(Relaxed),
        "retries": c.retries.load(Relaxed),
        "queue_timeouts": c.queue_timeouts.load(Relaxed),
        "no_node_up": c.no_node.load(Relaxed),
        "node_timeouts": c.node_timeouts.load(Relaxed),
        "bad_responses": c.bad_responses.load(Relaxed),
        "bytes_to_clients": c.bytes_to_clients.load(Relaxed),
        "bytes_to_nodes": c.bytes_to_nodes.load(Relaxed),
        "shutting_down": shared.is_shutting_down(),
        "reloads": c.reloads.load(Relaxed),
        "reloads_refused": c.reloads_refused.load(Relaxed),
        "ctl": { "commands": c.ctl_commands.load(Relaxed), "refused": c.ctl_refused.load(Relaxed) },
        "tls": tls_json(shared),
        "http2": http2_json(shared),
        "discovery": crate::discovery::status_json(&shared.discovery, &shared.config().discovery),
        "nodes": nodes,
    })
}

/// The `tls` object: the listener, how its requests are served and its handshake figures.
fn tls_json(shared: &Shared) -> serde_json::Value {
    let Some(tls) = &shared.tls else { return serde_json::Value::Null };
    // Splice mode tunnels cleartext bytes: TLS clients are proxied.
    let mode = match shared.config().mode {
        crate::Mode::Splice => "proxy (splice relays cleartext only)",
        m => m.as_str(),
    };
    let mut v = serde_json::to_value(tls.status(std::time::SystemTime::now())).unwrap_or_default();
    v["listen"] = json!(shared.config().listen_tls);
    v["https_port"] = json!(shared.https_port.get());
    v["served_by"] = json!(mode);
    v["redirect_to_https"] = json!(shared.config().redirect_to_https);
    v
}

/// The `http2` object: whether it is spoken, and its counters.
fn http2_json(shared: &Shared) -> serde_json::Value {
    let mut v = shared.h2.to_json();
    v["enabled"] = json!(shared.config().http2.enabled_in(shared.config().mode));
    v
}

type Labels = Vec<(String, String)>;

/// Prometheus text exposition of the switch's counters and gauges.
pub fn metrics_text(shared: &Shared) -> String {
    let snap = shared.dispatcher.snapshot();
    let c = &shared.counters;
    let mut reg = Registry::with_prefix("locus_switch");
    reg.register("connections_accepted", "Client connections accepted", counter(c.accepted.load(Relaxed)));
    reg.register(
        "connections_rejected",
        "Client connections refused over the connection limit",
        counter(c.rejected_over_limit.load(Relaxed)),
    );
    reg.register("connections", "Client connections open", gauge(shared.connections.open() as i64));
    reg.register("requests", "Requests parsed", counter(c.requests.load(Relaxed)));
    for (name, help, v) in [
        ("reloads", "Configuration reloads put in force", &c.reloads),
        (
            "reloads_refused",
            "Configuration reloads refused (the running configuration stayed)",
            &c.reloads_refused,
        ),
        ("ctl_commands", "Runtime-API commands received", &c.ctl_commands),
        (
            "ctl_refused",
            "Runtime-API commands refused (malformed, unknown node, not allowed)",
            &c.ctl_refused,
        ),
    ] {
        reg.register(name, help, counter(v.load(Relaxed)));
    }
    let responses = Family::<Labels, Counter<u64, AtomicU64>>::default();
    for (i, class) in ["1xx", "2xx", "3xx", "4xx", "5xx"].iter().enumerate() {
        responses
            .get_or_create(&vec![("class".into(), class.to_string())])
            .inc_by(c.responses[i].load(Relaxed));
    }
    reg.register("responses", "Responses sent to clients by status class", responses);
    reg.register(
        "client_errors",
        "Requests refused as malformed or too large",
        counter(c.client_errors.load(Relaxed)),
    );
    reg.register("retries", "Requests retried on another node", counter(c.retries.load(Relaxed)));
    reg.register(
        "queue_timeouts",
        "Requests that waited too long for admission",
        counter(c.queue_timeouts.load(Relaxed)),
    );
    reg.register("no_node_up", "Requests refused because no node was up", counter(c.no_node.load(Relaxed)));
    reg.register("node_timeouts", "Node responses that timed out", counter(c.node_timeouts.load(Relaxed)));
    reg.register("bad_responses", "Malformed node responses", counter(c.bad_responses.load(Relaxed)));
    reg.register(
        "bytes_to_clients",
        "Response body bytes sent to clients",
        counter(c.bytes_to_clients.load(Relaxed)),
    );
    reg.register("bytes_to_nodes", "Request bytes sent to nodes", counter(c.bytes_to_nodes.load(Relaxed)));
    reg.register("in_flight", "Requests dispatched and not completed", gauge(snap.in_flight as i64));
    reg.register("queued", "Requests waiting in the admission queue", gauge(snap.queued as i64));
    reg.register("mapping_entries", "Entries in the policy's target mapping", gauge(snap.mapping_len as i64));
    register_node_metrics(&mut reg, shared, &snap);
    crate::discovery::register_metrics(&mut reg, &shared.discovery, &shared.config().discovery);
    if let Some(tls) = &shared.tls {
        tls.status(std::time::SystemTime::now()).register_metrics(&mut reg);
    }
    if let Some(p) = shared.handoff.as_ref() {
        register_handoff_metrics(&mut reg, p);
    }
    shared.h2.register_metrics(&mut reg);
    let mut text = String::new();
    if let Err(e) = encode(&mut text, &reg) {
        tracing::warn!("metrics encoding failed: {e}");
    }
    text
}

/// A counter holding `v`.
fn counter(v: u64) -> Counter<u64> {
    let m = Counter::<u64>::default();
    m.inc_by(v);
    m
}

/// A gauge holding `v`.
fn gauge(v: i64) -> Gauge<i64> {
    let g = Gauge::<i64>::default();
    g.set(v);
    g
}

/// The per-node metrics (labelled by node name).
fn register_node_metrics(reg: &mut Registry, shared: &Shared, snap: &crate::dispatch::DispatchSnapshot) {
    let up = Family::<Labels, Gauge>::default();
    let load = Family::<Labels, Gauge>::default();
    let requests = Family::<Labels, Counter<u64, AtomicU64>>::default();
    let failures = Family::<Labels, Counter<u64, AtomicU64>>::default();
    // A retired node's name may belong to its successor now: only the nodes in service.
    let nodes = shared.nodes.all();
    for (n, &(is_up, l, _, _)) in nodes.iter().zip(&snap.nodes).filter(|(n, _)| !n.is_retired()) {
        let labels = vec![("node".to_string(), n.name.clone())];
        up.get_or_create(&labels).set(is_up as i64);
        load.get_or_create(&labels).set(l as i64);
        requests.get_or_create(&labels).inc_by(n.requests.load(Relaxed));
        failures.get_or_create(&labels).inc_by(n.failures.load(Relaxed));
    }
    reg.register("node_up", "Whether the node is in the view", up);
    reg.register("node_load", "Requests in flight on the node", load);
    reg.register("node_requests", "Requests sent to the node", requests);
    reg.register("node_failures", "Connection failures to the node", failures);
}

/// Handoff mode's metrics.
fn register_handoff_metrics(reg: &mut Registry, p: &crate::handoff::HandoffPlane) {
    let h = &p.counters;
    for (name, help, v) in [
        ("handoffs", "Connections handed off to nodes", &h.handoffs),
        ("rehandoffs", "Connections moved from node to node", &h.rehandoffs),
        ("handoffs_refused", "Handoffs refused by nodes", &h.refused),
        ("handoffs_failed", "Handoffs failed (no answer, channel lost, dump failed)", &h.failed),
        ("handoffs_served_here", "Connections restored and served by the switch itself", &h.served_here),
        ("handoff_routes", "Route questions answered", &h.routes),
        ("handoff_closed", "Handed-off connections reported closed", &h.closed),
        ("handoff_channel_failures", "Control channels that could not be opened", &h.channel_failures),
        ("handoffs_tls", "Handoffs that moved a TLS session with the connection", &h.tls_handoffs),
    ] {
        reg.register(name, help, counter(v.load(Relaxed)));
    }
    let two_way = h.tls_two_way.lock().iter().map(|(k, v)| (k.to_string(), *v)).collect();
    reg.register(
        "handoff_tls_two_way",
        "TLS connections served two-way by the switch instead of handed off, by reason",
        locus_tls::counter_family("reason", &two_way),
    );
    reg.register(
        "handoff_on_nodes",
        "Handed-off connections living on nodes",
        gauge(p.handed_off_now() as i64),
    );
}
