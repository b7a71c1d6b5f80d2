//! DC control requests between the servers of a cluster, under `/~dc/` on the main listener,
//! accepted only from members — signed with the peer key, or without a key from the members'
//! IP addresses (403 with the reason otherwise, see `peer_link::gate`) — and never counted as
//! client requests. Every answer carries the answering node's `X-DC-Load` and `X-DC-Map-Seq`
//! (`<epoch>.<map seq>.<version generation>`; a change tells the peer to pull the map); an
//! `X-DC-Load` on the request is recorded in the load table.
//!
//! - `GET|HEAD /~dc/ping`: nothing but the two headers (the pinger's question).
//! - `GET /~dc/fetch/<path>`: this home's document at canonical `<path>`, with
//!   `X-DC-Version: <mtime s>`; 304 when `If-Modified-Since` is not older than the version;
//!   404 for a path that is not a document of this home.
//! - `GET /~dc/map?since=N`: JSON `{"changes": <this home's map changes after N>,
//!   "versions": [[path, version], …]}` (versions of every replicated document).
//! - `GET /~dc/notice/<path>?from=NAME`: co-op NAME evicted its copy of `<path>`
//!   (Deletion-Aware: the home drops NAME from the document's set).
//! - `GET /~dc/invalidate/<path>?from=NAME`: home NAME's `<path>` changed: drop the copy
//!   (explicit notification).
//! - `GET /~dc/update/<path>?from=NAME`: home NAME's `<path>` changed: drop the copy and fetch
//!   the new one now (active update).

use std::net::IpAddr;
use std::time::UNIX_EPOCH;

use bytes::Bytes;
use locus_core::Method;
use locus_dc::replica_map::{DocKey, MapChanges};
use locus_dc::site_names::canonical_request_path;
use locus_http::RequestHead;
use serde::{Deserialize, Serialize};

use crate::context::WorkerContext;
use crate::dc::node::{DcNode, Outgoing};
use crate::dc::stats::add;
use crate::out_queue::OutQueue;
use crate::response::{Persistence, content_length, end_head, simple, start_head};

/// The prefix of every control request.
pub const CONTROL_PREFIX: &str = "/~dc/";

/// The answer to `/~dc/map`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MapReply {
    pub changes: MapChanges,
    pub versions: Vec<(String, u64)>,
}

/// Queue the answer to a control request from `ip`; false if the connection closes after it.
pub async fn answer(
    w: &WorkerContext,
    ip: IpAddr,
    head: &RequestHead,
    buf: &[u8],
    out: &mut OutQueue,
) -> bool {
    let persistence = Persistence::of(head, w.node.is_shutting_down());
    let Some(dcw) = &w.dc else { return false };
    let dc = &*dcw.dc;
    let refuse_with = |out: &mut OutQueue, status: u16, extra: &[u8]| {
        add(&dc.stats.control_refused, 1);
        simple(out, &dc.plain_headers, status, persistence, false, extra);
        persistence.keeps_open()
    };
    let refuse = |out: &mut OutQueue, status: u16| refuse_with(out, status, b"");
    if let Err(why) = dc.gate.admit(ip, head, buf) {
        tracing::debug!(%ip, reason = why.label(), "DC control request not a member's; 403");
        return refuse_with(out, 403, why.header_line().as_bytes());
    }
    if !matches!(head.method, Method::Get | Method::Head) {
        return refuse(out, 405);
    }
    if let Some(load) = head.header(buf, "x-dc-load").and_then(|v| std::str::from_utf8(v).ok()) {
        dc.note_load(load);
    }
    let target = head.path_str(buf);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let rest = &path[CONTROL_PREFIX.len()..];
    let (verb, doc_path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let param = |name: &str| {
        query.split('&').find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == name).map(|(_, v)| v))
    };
    let from = param("from").and_then(|n| dc.membership.by_name(n)).filter(|&id| id != dc.me);
    let canonical = !doc_path.is_empty() && canonical_request_path(doc_path).is_ok_and(|c| c == doc_path);
    let head_only = head.method == Method::Head;
    match (verb, canonical, from) {
        ("ping", _, _) if doc_path.is_empty() => reply(dc, out, 200, persistence, &[], None, head_only),
        ("map", _, _) if doc_path.is_empty() => {
            let Some(since) = param("since").map_or(Some(0), |s| s.parse().ok()) else {
                return refuse(out, 400);
            };
            let body = map_reply(dc, since);
            let extra = [("Content-Type", "application/json".to_string())];
            reply(dc, out, 200, persistence, &extra, Some(Bytes::from(body)), head_only);
        }
        ("fetch", true, _) => {
            let ims = head.header(buf, "if-modified-since");
            answer_fetch(dc, doc_path, ims, persistence, head_only, out).await;
        }
        ("notice", true, Some(coop)) => {
            add(&dc.stats.notices_received, 1);
            let mut maps = dc.maps.write();
            dc.balancer.lock().on_deletion_notice(doc_path, coop, maps.own_mut());
            drop(maps);
            reply(dc, out, 200, persistence, &[], None, head_only);
        }
        (which @ ("invalidate" | "update"), true, Some(home)) => {
            add(&dc.stats.invalidations_received, 1);
            dc.store.lock().remove(&DocKey::new(home, doc_path));
            if which == "update" {
                dc.queue(Outgoing::Refetch { home, path: doc_path.to_string() });
            }
            reply(dc, out, 200, persistence, &[], None, head_only);
        }
        ("fetch" | "notice" | "invalidate" | "update", _, _) => return refuse(out, 400),
        _ => return refuse(out, 404),
    }
    persistence.keeps_open()
}

/// This home's map changes after `since` with the versions of its replicated documents.
fn map_reply(dc: &DcNode, since: u64) -> Vec<u8> {
    let maps = dc.maps.read();
    let own = maps.own();
    let versions = (own.replicated())
        .filter_map(|(p, _)| dc.site.by_path(p).map(|(_, d)| (p.to_string(), d.state().version)))
        .collect();
    let body = MapReply { changes: own.changes_since(since), versions };
    serde_json::to_vec(&body).unwrap_or_default()
}

/// A control answer with this node's load and map sequence.
fn reply(
    dc: &DcNode,
    out: &mut OutQueue,
    status: u16,
    persistence: Persistence,
    extra: &[(&str, String)],
    body: Option<Bytes>,
    head_only: bool,
) {
    start_head(out, status, &dc.plain_headers);
    let mut lines = format!("X-DC-Load: {}\r\nX-DC-Map-Seq: {}\r\n", dc.load_header(), dc.map_seq());
    for (name, value) in extra {
        lines.push_str(&format!("{name}: {value}\r\n"));
    }
    out.extend(lines.as_bytes());
    content_length(out, body.as_ref().map_or(0, |b| b.len() as u64));
    end_head(out, persistence);
    if let Some(body) = body.filter(|_| !head_only) {
        out.push_body(body);
    }
}

/// Answer `/~dc/fetch/<path>` as the home.
async fn answer_fetch(
    dc: &DcNode,
    path: &str,
    ims: Option<&[u8]>,
    persistence: Persistence,
    head_only: bool,
    out: &mut OutQueue,
) {
    let Some((_, doc)) = dc.site.by_path(path) else {
        return reply(dc, out, 404, persistence, &[], None, head_only);
    };
    let state = doc.state();
    let version = [("X-DC-Version", state.version.to_string())];
    let since = ims
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| httpdate::parse_http_date(v.trim()).ok())
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs());
    if since.is_some_and(|s| s >= state.version) {
        return reply(dc, out, 304, persistence, &version, None, head_only);
    }
    let body = match state.page {
        Some(page) => Ok(page),
        None => {
            let fs_path = doc.fs_path.clone();
            match tokio::task::spawn_blocking(move || std::fs::read(fs_path)).await {
                Ok(Ok(bytes)) => Ok(Bytes::from(bytes)),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        }
    };
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(path, error = %e, "DC: reading a document for a co-op failed");
            return reply(dc, out, 404, persistence, &version, None, head_only);
        }
    };
    add(&dc.stats.fetches_served, 1);
    let content_type = mime_guess::from_path(path).first_raw().unwrap_or("application/octet-stream");
    let extra = [version[0].clone(), ("Content-Type", content_type.to_string())];
    reply(dc, out, 200, persistence, &extra, Some(body), head_only);
}
