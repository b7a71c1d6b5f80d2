//! The report's set-up section: the network, the nodes (storage and CPU models, per workload
//! where a workload sets its own), the switch rows, each workload (site, popularity, hot set,
//! dynamic classes, closed or open loop) and the timing of its points.

use std::fmt::Write as _;

use crate::experiment::{NodeSettings, SwitchKind, WorkloadSpec};
use crate::report::LabReport;
use locus_rig::VIRTUAL_IP;

fn describe_nodes(n: &NodeSettings) -> String {
    format!(
        "`locus node`, {} worker thread{} each, cache {} ({}), objects up to {}, storage model {}, CPU {}",
        n.workers,
        if n.workers == 1 { "" } else { "s" },
        n.cache,
        n.cache_policy,
        n.max_object,
        n.storage
            .as_deref()
            .map_or("off (misses cost only the page cache)".to_string(), |s| format!("`{s}`")),
        match (n.cpu_limit, n.cpu.as_deref()) {
            (Some(l), _) => format!(
                "limited to {l} of a CPU per node (a cgroup each: real CPU time, the mechanism is under the machine)"
            ),
            (None, Some(c)) => format!("model `{c}` (one modelled CPU per node)"),
            (None, None) => "unlimited (the nodes share the machine's CPUs)".to_string(),
        },
    )
}

fn describe_mix(w: &WorkloadSpec) -> String {
    let mut out = String::new();
    if let Some(h) = &w.hot_spot {
        let _ = write!(
            out,
            "; a hot set of {} document{} takes {:.0}% of the document requests{}",
            h.documents,
            if h.documents == 1 { "" } else { "s" },
            h.share * 100.0,
            h.shift_s.map_or(String::new(), |t| format!(
                " and moves to other documents every {t} s (a flash crowd)"
            ))
        );
    }
    for d in &w.dynamic {
        let c = &d.class;
        let _ = write!(
            out,
            "; {:.1}% of requests go to dynamic class `{}` (`{}?id=0..{}`, CPU {}, {} bytes)",
            d.share * 100.0,
            c.name,
            c.prefix,
            d.variants,
            describe_cost(&c.cost),
            c.size.0
        );
    }
    out
}

fn describe_cost(c: &locus_classify::CostDistribution) -> String {
    use locus_classify::CostDistribution::*;
    match *c {
        Const { ms } => format!("{ms} ms"),
        Normal { mean_ms, stddev_ms } => format!("normal {mean_ms} ± {stddev_ms} ms"),
        Exponential { mean_ms } => format!("exponential, mean {mean_ms} ms"),
        Uniform { min_ms, max_ms } => format!("uniform {min_ms}–{max_ms} ms"),
    }
}

impl LabReport {
    pub(crate) fn render_setup(&self) -> String {
        let e = &self.experiment;
        let mut out = String::from("## Set-up\n\n");
        let _ = writeln!(
            out,
            "- **Network**: a namespace per host — `client`, `switch`, `node1..N` — each with a veth port on one bridge \
             in a namespace of its own, where the host's firewall does not see its frames (10.253.0.0/24, MTU 1500). The switch owns the virtual IP {VIRTUAL_IP} and answers ARP for it; the nodes carry \
             it on `lo` with `arp_ignore=1`, `arp_announce=2` (LVS direct-routing style, ready for the one-way modes). \
             Clients connect to the virtual IP."
        );
        let cc: std::collections::BTreeSet<&str> =
            self.points.iter().map(|p| p.congestion_control.as_str()).filter(|c| !c.is_empty()).collect();
        if !cc.is_empty() {
            let cc: Vec<&str> = cc.into_iter().collect();
            let _ = writeln!(
                out,
                "- **TCP congestion control**: {} on every lab connection, set per route in each host's namespace \
                 (the machine's own settings are left as they are).",
                cc.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "- **Nodes**: {}. Every point starts fresh nodes, so caches start cold.",
            describe_nodes(&e.node)
        );
        for row in &e.switches {
            let _ = writeln!(out, "- **Switch**: {}.", describe_row(row));
        }
        for (i, w) in e.workloads.iter().enumerate() {
            self.render_workload_setup(&mut out, i, w);
        }
        let _ = writeln!(
            out,
            "- **Per point**: {} run{} per point. Hit ratio, per-node requests and the \
             switch's CPU time are differences of snapshots taken at the end of the warm-up and of the measured interval \
             (node `/locus/status`, the Locus switch's `/locus/status`, `/proc/<pid>/stat` utime + stime of the switch \
             process and its children). Imbalance is max/mean of requests per node — the Locus switch's counters for \
             Locus rows, the nodes' own counters for HAProxy and NGINX (the nodes' counters, shown per point, also hold \
             the Locus switch's health checks, five a second per node). Switch CPU per request divides its CPU time by \
             the requests forwarded in the same interval.\n",
            e.repeat,
            if e.repeat == 1 { "" } else { "s, averaged in the tables" }
        );
        out
    }

    fn render_workload_setup(&self, out: &mut String, i: usize, w: &WorkloadSpec) {
        let e = &self.experiment;
        let site = self.sites.iter().find(|s| s.workload == w.name);
        let cache = e.node_of(i).cache_bytes().unwrap_or(0);
        let size = site.map_or(String::new(), |s| {
            let times = if cache > 0 {
                format!(", {:.1}× one node's cache", s.total_bytes as f64 / cache as f64)
            } else {
                String::new()
            };
            format!(
                " — {} files, {:.1} MiB{times}, median {:.1} KiB, largest {:.0} KiB",
                s.files,
                s.total_bytes as f64 / (1 << 20) as f64,
                s.median_bytes as f64 / 1024.0,
                s.largest_bytes as f64 / 1024.0
            )
        });
        let load = match (w.rate, &w.surf) {
            (_, Some(surf)) => format!(
                "{} surfing clients ({}), sessions of {} requests that start at the entry page, fetch each page's \
                 embedded objects and follow one of its links as the server wrote it (back to the last page after an \
                 image or download)",
                w.clients,
                if surf.keepalive { "keep-alive" } else { "a connection per request" },
                surf.session_requests
            ),
            (Some(r), None) => format!(
                "open loop, Poisson arrivals at {r} requests/s over at most {} keep-alive connections",
                w.clients
            ),
            (None, None) => format!("closed loop with {} keep-alive clients", w.clients),
        };
        let site_kind = match &w.preset {
            Some(p) => {
                format!("a generated {p}-like site (scale {}, seed {})", w.scale.unwrap_or(1.0), w.seed)
            }
            None => format!("a generated site (seed {})", w.seed),
        };
        let popularity = match w.surf {
            Some(_) => String::new(),
            None => format!("; Zipf α = {} over its files{}", w.alpha, describe_mix(w)),
        };
        let nodes: Vec<String> = e.nodes_of(i).iter().map(|n| n.to_string()).collect();
        let _ = writeln!(
            out,
            "- **Workload `{}`**: {site_kind}{size}{popularity}; `locus load` in-process in the client namespace, {load}, \
             every response checked byte for byte (documents against the site manifest, size and XXH3; pages a DC node \
             rewrote against their originals, link by link; dynamic answers against the body their target implies). \
             Node counts {}; {} s warm-up, then {} s measured{}.",
            w.name,
            nodes.join(", "),
            e.warmup_of(i),
            e.measure_of(i),
            e.measure_requests.map_or(String::new(), |r| format!(" (or {r} responses)")),
        );
        if let Some(n) = &w.node {
            let _ = writeln!(out, "  Its nodes: {}.", describe_nodes(n));
        }
    }
}

fn describe_row(row: &crate::experiment::SwitchRow) -> String {
    let on = if row.workloads.is_empty() {
        String::new()
    } else {
        format!(" (workloads {})", row.workloads.join(", "))
    };
    let what = match row.kind {
        SwitchKind::Locus => format!(
            "`locus switch`, {} worker threads, policies {}, modes {}{}",
            row.workers,
            row.policies.join(", "),
            row.modes.join(", "),
            match row.splice_min_bytes {
                Some(0) => ", body relaying through user space (`splice_min_bytes = 0`)".to_string(),
                Some(b) => format!(", `splice_min_bytes = {b}`"),
                None => String::new(),
            }
        ),
        SwitchKind::Haproxy => format!(
            "HAProxy (Debian package), {} threads, keep-alive both sides; `uri-chash-bounded` = `balance uri` + \
             `hash-type consistent` + `hash-balance-factor 150`, `leastconn` = `balance leastconn`; policies {}",
            row.workers,
            row.policies.join(", ")
        ),
        SwitchKind::Nginx => format!(
            "NGINX (Debian package) as a reverse proxy, {} worker processes, keep-alive upstream connections; \
             `uri-chash` = `hash $request_uri consistent`, `least-conn` = `least_conn`; policies {}",
            row.workers,
            row.policies.join(", ")
        ),
        SwitchKind::Dc => format!(
            "no switch: `locus node --dc` on every node, the site's home on node1 and the others co-ops \
             (clients start at node1 and follow the links the nodes rewrite); replica quota {}; methods {}",
            row.dc_quota.as_deref().unwrap_or("the node's default"),
            row.policies.join(", ")
        ),
    };
    let params = row.policy_params.as_ref().map_or(String::new(), |t| {
        let items: Vec<String> = t.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        format!(", policy parameters `{}`", items.join(", "))
    });
    format!("{what}{params}{on}")
}
