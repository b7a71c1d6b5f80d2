//! The demo report's paragraph on its `hotspot`, `dynamic` and `coop` workloads: why their
//! nodes have a CPU limit each (a cgroup, or a model), what the hot set and the dynamic classes
//! are, what load they run at, and what cooperative caching is compared with, written from the
//! experiment's values.

use std::fmt::Write as _;

use crate::report::LabReport;

/// What a node's CPU is in a workload, for the note.
fn node_cpu_text(node: &crate::experiment::NodeSettings) -> String {
    match (node.cpu_limit, node.cpu.as_deref()) {
        (Some(l), _) => format!(
            "a real CPU limit of its own ({l} of a CPU: a cgroup per node, so an overloaded node cannot \
             borrow the others' CPU; at about 40 µs of CPU per request, what `locus bench node-cost` measures on this \
             machine, the nodes together saturate below what the switch and the load generator carry on the 2 shared \
             CPUs — their limits add up to at most one CPU)"
        ),
        (None, Some(c)) => format!(
            "a modelled CPU of its own (`{c}`: each request's CPU cost, roughly 10–30× a real node's on this machine, \
             served as a processor-sharing queue that lets time pass without burning the machine's CPUs)"
        ),
        (None, None) => "the machine's CPUs, shared".to_string(),
    }
}

/// Why the hotspot, dynamic and coop workloads are set as they are.
pub fn hotspot_and_dynamic_note(report: &LabReport) -> String {
    let e = &report.experiment;
    let mut out = String::new();
    for (i, w) in e.workloads.iter().enumerate() {
        let cpu = node_cpu_text(e.node_of(i));
        if let Some(h) = &w.hot_spot {
            let _ = write!(
                out,
                "The `{}` workload gives every node {cpu}. {} hot document{} \
                 draw{} {:.0}% of the document requests{}; a URI hash pins each to one node, HAProxy's bounded load \
                 spills whatever hashes to the busiest node (cold documents too, which then miss) to the next, LARD/R \
                 gives a hot target more nodes and leaves the rest where they are cached. ",
                w.name,
                h.documents,
                if h.documents == 1 { "" } else { "s" },
                if h.documents == 1 { "s" } else { "" },
                h.share * 100.0,
                h.shift_s.map_or(String::new(), |t| format!(
                    " and the hot set moves every {t} s, so each move is a flash crowd on cold documents"
                )),
            );
        }
        if !w.dynamic.is_empty() {
            let share: f64 = w.dynamic.iter().map(|d| d.share).sum();
            let _ = write!(
                out,
                "The `{}` workload mixes {:.0}% dynamic requests (classes {}) into static documents, on nodes with {cpu}; \
                 a dynamic request burns its class's CPU time on the node. The site fits in every node's cache, so CPU is \
                 what the policies share out. \
                 The load is open loop{}, heavy enough that queues form: round robin ignores what a request costs, least \
                 connections counts requests in service, CSLD estimates each node's load from the classes of the requests it \
                 forwarded and the nodes' reports. ",
                w.name,
                share * 100.0,
                w.dynamic.iter().map(|d| format!("`{}`", d.class.name)).collect::<Vec<_>>().join(", "),
                w.rate.map_or(String::new(), |r| format!(" at {r} requests/s")),
            );
        }
        if e.switches.iter().any(|r| r.coop.is_some() && r.runs_on(&w.name)) {
            let node = e.node_of(i);
            let _ = write!(
                out,
                "The `{}` workload is the zipf kind of site on disk-bound nodes (`{}` cache, `{}` replacement, storage `{}`) \
                 behind round robin, once with plain nodes and once with nodes that cache cooperatively: a node that misses \
                 asks the document's home node (a hash of its name) who holds it, fetches it from that peer's memory over \
                 a kept-alive connection, checks its length and version, and keeps a copy under LRU or LFU (`rr+cf-lru`, \
                 `rr+cf-lfu`); only a document no peer holds is read from the disk. Beside them, WRR, LARD/R and socket \
                 cloning (`hash` in `l4` mode: connections spread round robin at the SYN, each request handed on to the \
                 node its URI hashes to): these send each document where it is cached, so the cluster holds one copy of \
                 each instead of one per node, and no document crosses the network twice. The report's simulator twin runs \
                 the same site and nodes through `locus sim`. ",
                w.name,
                node.cache,
                node.cache_policy,
                node.storage.as_deref().unwrap_or("off"),
            );
        }
    }
    out
}
