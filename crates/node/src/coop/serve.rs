//! The answering side of cooperative caching: requests under `/locus/coop/` on the main
//! listener (see `coop::wire`), accepted only from peers — signed with the peer key, or
//! without a key from the peers' IP addresses (403 with the reason otherwise, see
//! `peer_link::gate`) — and answered from memory only: never storage, never a further peer.
//! They are counted in the coop counters, never as client requests.

use std::net::IpAddr;

use locus_core::Method;
use locus_http::RequestHead;

use crate::context::WorkerContext;
use crate::coop::node::CoopNode;
use crate::coop::stats::add;
use crate::coop::view::CoopView;
use crate::coop::wire::{CoopAsk, HOLDERS_HEADER, PREFIX, VALIDATOR_HEADER, Validator, query_pairs};
use crate::out_queue::OutQueue;
use crate::response::{Persistence, content_length, end_head, simple, start_head};

/// Queue the answer to a coop request from `ip`; false if the connection closes after it.
pub fn answer(w: &WorkerContext, ip: IpAddr, head: &RequestHead, buf: &[u8], out: &mut OutQueue) -> bool {
    let node = &*w.node;
    let nh = &node.node_headers[..];
    let persistence = Persistence::of(head, node.is_shutting_down());
    let Some(coop) = &node.coop else { return false };
    let refuse_with = |out: &mut OutQueue, status: u16, extra: &[u8]| {
        add(&coop.stats.refused, 1);
        simple(out, nh, status, persistence, false, extra);
        persistence.keeps_open()
    };
    let refuse = |out: &mut OutQueue, status: u16| refuse_with(out, status, b"");
    if let Err(why) = coop.gate.admit(ip, head, buf) {
        tracing::debug!(%ip, reason = why.label(), "coop request not a peer's; 403");
        return refuse_with(out, 403, why.header_line().as_bytes());
    }
    if head.method != Method::Get {
        return refuse(out, 405);
    }
    let view = coop.view();
    let target = head.path_str(buf);
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let Some(pairs) = query_pairs(query) else { return refuse(out, 400) };
    let param = |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_ref());
    match &path[PREFIX.len()..] {
        "notice" => {
            let Some(from) = param("from").and_then(|f| view.membership.index_of(f)) else {
                return refuse(out, 400);
            };
            let mut n = 0;
            for (name, key) in &pairs {
                match *name {
                    "i" | "e" => {
                        CoopNode::apply_notice(&view, from, *name == "i", key);
                        n += 1;
                    }
                    _ => {}
                }
            }
            add(&coop.stats.notices_received, n);
            start_head(out, 200, nh);
            content_length(out, 0);
            end_head(out, persistence);
        }
        which @ ("lookup" | "fetch") => {
            let ask = if which == "lookup" { CoopAsk::Lookup } else { CoopAsk::Fetch };
            let (Some(key), Some(Ok(v))) = (param("k"), param("v").map(str::parse::<Validator>)) else {
                return refuse(out, 400);
            };
            let from = param("from").and_then(|f| view.membership.index_of(f));
            answer_document(w, (coop, &view), ask, key, v, from, persistence, out);
        }
        _ => return refuse(out, 404),
    }
    persistence.keeps_open()
}

/// Answer a lookup or fetch of version `v` of `key`: the document if it is in memory in that
/// version; else 404, with the holders this node knows of for a lookup.
#[allow(clippy::too_many_arguments)]
fn answer_document(
    w: &WorkerContext,
    (coop, view): (&CoopNode, &CoopView),
    ask: CoopAsk,
    key: &str,
    v: Validator,
    from: Option<usize>,
    persistence: Persistence,
    out: &mut OutQueue,
) {
    let node = &*w.node;
    if ask == CoopAsk::Lookup {
        add(&coop.stats.lookups_served, 1);
    }
    // A use for the replacement policy, not a hit or miss of this node's clients.
    let doc = node.store.lookup_for_peer(key).filter(|d| Validator::of_source(&d.source) == Some(v));
    if let Some(doc) = doc {
        add(&coop.stats.fetches_served, 1);
        add(&coop.stats.bytes_served, doc.body.len() as u64);
        start_head(out, 200, &node.node_headers);
        content_length(out, doc.body.len() as u64);
        out.extend(VALIDATOR_HEADER.as_bytes());
        out.extend(b": ");
        out.extend(v.to_string().as_bytes());
        out.extend(b"\r\n");
        end_head(out, persistence);
        out.push_body(doc.body.clone());
        return;
    }
    add(&coop.stats.not_held_answers, 1);
    start_head(out, 404, &node.node_headers);
    content_length(out, 0);
    if ask == CoopAsk::Lookup {
        let me = view.membership.me();
        let holders: Vec<&str> = (view.directory.holders(key).into_iter())
            .filter(|&h| h != me && Some(h) != from)
            .map(|h| view.membership.authority(h))
            .collect();
        out.extend(HOLDERS_HEADER.as_bytes());
        out.extend(b": ");
        out.extend(holders.join(",").as_bytes());
        out.extend(b"\r\n");
    }
    end_head(out, persistence);
}
