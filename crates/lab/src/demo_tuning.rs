//! The demo report's paragraph on its `hotspot` and `dynamic` workloads: why their nodes have
//! a modelled CPU each, what the hot set and the dynamic classes are, and what load they run
//! at, written from the experiment's own values.

use std::fmt::Write as _;

use crate::report::LabReport;

/// Why the hotspot and dynamic workloads are set as they are.
pub fn hotspot_and_dynamic_note(report: &LabReport) -> String {
    let e = &report.experiment;
    let mut out = String::new();
    for (i, w) in e.workloads.iter().enumerate() {
        let cpu = e.node_of(i).cpu.as_deref().unwrap_or("off");
        if let Some(h) = &w.hot_spot {
            let _ = write!(
                out,
                "The `{}` workload gives every node a modelled CPU of its own (`{cpu}`): each request's CPU cost — per \
                 connection, per request and per KiB sent, roughly 10–30× what `locus bench node-cost` measures for a real \
                 node on this machine, so that four modelled nodes saturate well below what the 2 real CPUs carry — is \
                 served as a processor-sharing queue that lets time pass without burning the machine's CPUs, so one node \
                 has one CPU's worth and a node that a hot spot overloads cannot borrow the others'. {} hot document{} \
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
                "The `{}` workload mixes {:.0}% dynamic requests (classes {}) into static documents, on nodes with the same \
                 modelled CPU (`{cpu}`), the site fitting in every node's cache so that CPU is what the policies share out. \
                 The load is open loop{}, heavy enough that queues form: round robin ignores what a request costs, least \
                 connections counts requests in service, CSLD estimates each node's load from the classes of the requests it \
                 forwarded and the nodes' reports. ",
                w.name,
                share * 100.0,
                w.dynamic.iter().map(|d| format!("`{}`", d.class.name)).collect::<Vec<_>>().join(", "),
                w.rate.map_or(String::new(), |r| format!(" at {r} requests/s")),
            );
        }
    }
    out
}
