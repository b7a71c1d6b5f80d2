//! `report.md` of `reproduce sc`: the claims table, our 12-node ratios beside the paper's,
//! the model and the choices the paper leaves open, the synthetic stand-in trace, and tables
//! of throughput, hit ratios and link utilisation by strategy and node count.

use std::fmt::Write as _;

use crate::berkeley_like::{BerkeleyLikeSpec, BerkeleyLikeStats};
use crate::config::SimConfig;
use crate::network::Storage;
use crate::reproduce::sc::sensitivity::SensitivityRow;
use crate::reproduce::sc::{PAPER_RATIOS_AT_12, SC_POLICIES, SENSITIVITY_SHARE, ScOptions, ScRow};
use crate::reproduce::{Claim, write_claims_table};

/// What the report is written from.
pub struct ScReportInputs<'a> {
    pub opts: &'a ScOptions,
    pub spec: &'a BerkeleyLikeSpec,
    pub stats: &'a BerkeleyLikeStats,
    pub base: &'a SimConfig,
    pub rows: &'a [ScRow],
    pub claims: &'a [Claim],
    pub sensitivity: &'a [SensitivityRow],
    pub keep_copy: &'a [ScRow],
    pub wall_s: f64,
}

fn table(o: &mut String, rows: &[ScRow], title: &str, value: impl Fn(&ScRow) -> String) {
    let mut counts: Vec<u32> = rows.iter().map(|r| r.nodes).collect();
    counts.sort_unstable();
    counts.dedup();
    let _ = write!(o, "\n**{title}**\n\n| strategy |");
    for n in &counts {
        let _ = write!(o, " {n} |");
    }
    let _ = write!(o, "\n|---|{}\n", "---:|".repeat(counts.len()));
    for p in SC_POLICIES {
        let Some(label) = rows.iter().find(|r| r.policy == p).map(|r| r.label.clone()) else { continue };
        let _ = write!(o, "| {label} |");
        for &n in &counts {
            let cell = rows.iter().find(|r| r.policy == p && r.nodes == n).map(&value);
            let _ = write!(o, " {} |", cell.unwrap_or_else(|| "–".into()));
        }
        o.push('\n');
    }
}

/// The report's text.
pub fn sc_markdown(r: &ScReportInputs<'_>) -> String {
    let (opts, spec, stats, base, rows, claims, wall_s) =
        (r.opts, r.spec, r.stats, r.base, r.rows, r.claims, r.wall_s);
    let mut o = String::new();
    let met = claims.iter().filter(|c| c.met).count();
    let _ = writeln!(o, "# Socket Cloning — trace-driven comparison (Fig. 9) reproduced with `locus sim`\n");
    let _ = writeln!(
        o,
        "**Synthetic stand-in trace**: the Berkeley log is not available; every number below comes from a \
         synthetic trace with its published totals (see Trace). {met} of {} claims met. Command: `locus sim \
         reproduce sc --out {}` ({} requests, seed {}, node counts {:?}, {} threads); wall time {:.0} s. The \
         same command and seed give the same results.\n",
        claims.len(),
        opts.out.display(),
        opts.requests,
        opts.seed,
        opts.node_counts,
        opts.threads,
        wall_s
    );
    write_claims_table(&mut o, claims);
    let _ = writeln!(
        o,
        "\n## 12-node ratios, here and in the paper\n\n| ratio | paper | here |\n|---|---:|---:|"
    );
    let at12 = |p: &str| rows.iter().find(|r| r.policy == p && r.nodes == 12).map(|r| r.rps);
    for (other, paper) in PAPER_RATIOS_AT_12 {
        let here = match (at12("sc"), at12(other)) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "–".into(),
        };
        let _ = writeln!(o, "| SC / {} | {paper:.2} | {here} |", other.to_uppercase());
    }
    model(&mut o, base);
    sensitivity(&mut o, r.sensitivity, base);
    keep_copy(&mut o, r.keep_copy);
    trace(&mut o, spec, stats);
    let _ = writeln!(
        o,
        "\n## Results\n\n![throughput](throughput.svg)\n![server reads](miss_ratio.svg)\n\
         ![links](link_utilization.svg)\n![delay](delay.svg)"
    );
    table(&mut o, rows, "Throughput (requests/s)", |r| format!("{:.0}", r.rps));
    table(&mut o, rows, "Served from local memory (%)", |r| format!("{:.1}", r.local_hit * 100.0));
    table(&mut o, rows, "Served from another node's memory (%)", |r| format!("{:.1}", r.remote_hit * 100.0));
    table(&mut o, rows, "Read from the file server (%)", |r| format!("{:.1}", r.server_read * 100.0));
    table(&mut o, rows, "Node TX utilisation, mean / busiest (%)", |r| {
        format!("{:.0} / {:.0}", r.tx_utilization * 100.0, r.tx_utilization_max * 100.0)
    });
    table(&mut o, rows, "Node RX utilisation, mean (%)", |r| format!("{:.0}", r.rx_utilization * 100.0));
    table(&mut o, rows, "File-server TX utilisation (%)", |r| {
        format!("{:.0}", r.file_server_tx_utilization * 100.0)
    });
    table(&mut o, rows, "Node CPU utilisation, mean (%)", |r| format!("{:.0}", r.cpu_utilization * 100.0));
    let _ = writeln!(
        o,
        "\n## Known gaps\n\n\
         - The trace is synthetic (independent Zipf draws; sizes assigned to popularity with noise); only the \
         shapes and ratios can be compared with the paper, not the absolute requests/s.\n\
         - The stages of one transfer overlap (cut-through): a file-server read ends when the slowest of the \
         server's service queue, its TX link and the node's RX link is done; a response crosses the node's TX \
         link after the node's CPU is done with it.\n\
         - A request that joins a fetch already in progress for its file counts as that fetch's kind (remote \
         hit or server read).\n\
         - The paper's ratios imply CF-LFU ≈ 1.51× and CF-LRU ≈ 1.20× RR at 12 nodes; no file-server rate \
         gives both that lead and CF at or below RR up to 8 nodes (see the sensitivity sweep).\n\
         - CF's LFU is the node cache's in-cache LFU (counts restart after an eviction); no \"perfect LFU\" \
         variant was run.\n"
    );
    o
}

/// The file-server rate sweep: what each rate gives, and why the default is what it is.
fn sensitivity(o: &mut String, rows: &[SensitivityRow], base: &SimConfig) {
    if rows.is_empty() {
        return;
    }
    let chosen = match &base.storage {
        Storage::FileServer(f) => f.link_bits_per_s / 1_000_000,
        Storage::LocalDisk => 0,
    };
    let _ = writeln!(
        o,
        "\n## The file server's link rate\n\n\
         The paper gives no rate for the file server's network link, and it decides the shape: every strategy's \
         misses cross it. Each rate below ran the same sweep on {:.0}% of the trace. At 100 Mbps the link is \
         saturated from 2 nodes on, so RR is flat from 2 nodes and CF's remote hits, which relieve it, put CF \
         above RR early; at 1000 Mbps the nodes' own links bind and RR keeps rising past 8 nodes. The paper \
         says RR \"stops to increase when more than eight server nodes are used\". The headline uses {chosen} Mbps; \
         the design fixed 100 Mbps (the testbed's Ethernet) before the study was first run. On 2026-11-24, after \
         the first results, the default was moved to 300 Mbps, the fastest rate of this sweep at which RR still \
         stops rising by 8 nodes (all claims met there, RR's plateau by construction); that choice was made on \
         the results, so it is only a row of this table now.\n\n\
         | file server | RR 8→12 | CF ÷ RR, highest up to 8 | CF-LFU ÷ RR at 12 | CF-LRU ÷ RR at 12 | SC ÷ RR at 12 | claims met | not met |\n\
         |---:|---:|---:|---:|---:|---:|---:|---|",
        SENSITIVITY_SHARE * 100.0
    );
    for r in rows {
        let _ = writeln!(
            o,
            "| {} Mbps | {:+.1}% | {:.2} | {:.2} | {:.2} | {:.2} | {} of {} | {} |",
            r.file_server_mbps,
            r.rr_rise_8_to_12 * 100.0,
            r.max_cf_over_rr_up_to_8,
            r.cf_lfu_over_rr_12,
            r.cf_lru_over_rr_12,
            r.sc_over_rr_12,
            r.claims_met,
            r.claims,
            if r.not_met.is_empty() { "–".to_string() } else { r.not_met.join("; ") }
        );
    }
    let _ = writeln!(o, "\nThe paper's own 12-node ratios imply CF-LFU ÷ RR ≈ 1.51 and CF-LRU ÷ RR ≈ 1.20.");
}

/// Cooperative caching with and without the requester keeping the copy it fetched.
fn keep_copy(o: &mut String, rows: &[ScRow]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\n## Keeping the fetched copy\n\n\
         CF as run above keeps the copy a node fetches from a peer under its own replacement; `-single` keeps \
         none (one copy in the cluster, a global object space). Same sweep, {:.0}% of the trace; requests/s and \
         where requests were served (local / another node / file server, %):\n\n\
         | strategy | nodes | req/s | served from |\n|---|---:|---:|---|",
        SENSITIVITY_SHARE * 100.0
    );
    for r in rows.iter().filter(|r| r.nodes > 1) {
        let _ = writeln!(
            o,
            "| {} | {} | {:.0} | {:.0} / {:.0} / {:.0} |",
            r.policy,
            r.nodes,
            r.rps,
            r.local_hit * 100.0,
            r.remote_hit * 100.0,
            r.server_read * 100.0
        );
    }
}

fn model(o: &mut String, base: &SimConfig) {
    let c = base.effective_costs();
    let us = |ns: u64| ns as f64 / 1000.0;
    let link = base.links.clone().unwrap_or_default();
    let fs = match &base.storage {
        Storage::FileServer(f) => f.clone(),
        Storage::LocalDisk => Default::default(),
    };
    let _ = writeln!(
        o,
        "\n## Model\n\n\
         Nodes: the LARD model's FIFO CPU with its costs ÷ {:.2} (PII-300 → PIII-733 clock ratio): setup {:.0} µs, \
         teardown {:.0} µs, transmit {:.1} µs per 512 B. Page cache {} MiB per node, LRU for RR and SC (kHTTPd \
         uses the file-system cache), LRU or LFU for CF, any file size cached. Network: every node has a \
         full-duplex {} Mbps link, TX and RX each a FIFO byte server at {:.0}% efficiency; every response leaves \
         through the serving node's TX. Storage: all files on one file server (NFS) — {:.1} ms service per read \
         (a FIFO queue, files in its memory) and one {} Mbps TX link; a read also crosses the node's RX. \
         Clients: {} closed-loop connections (19 machines × 2), no think time, one shared in-order stream, one \
         request per connection; the front-end admits all (LVS).\n",
        base.cpu_speed,
        us(c.conn_setup_ns),
        us(c.conn_teardown_ns),
        us(c.transmit_per_512_ns),
        base.cache_capacity() >> 20,
        link.bits_per_s / 1_000_000,
        link.efficiency * 100.0,
        fs.service_ns as f64 / 1e6,
        fs.link_bits_per_s / 1_000_000,
        base.clients(None)
    );
    let _ = writeln!(
        o,
        "Strategies: **RR** = the switch's `rr`, miss → file server. **CF-LRU / CF-LFU** = `rr` in front; a \
         local miss is fetched from another node's memory when the exact directory shows a holder (the first \
         up holder after the requester), else from the file server; the requester sends a request message \
         (CPU = setup cost) and later receives the file (CPU = its transmit cost), the holder receives the \
         message and sends the file (setup + transmit cost), the file crosses the holder's TX and the \
         requester's RX, the requester keeps a copy and the holder's copy is touched. **SC** = `rr` picks the \
         entry node, which accepts and parses (setup) and, if the owner (target hash mod n) is another node, \
         pays half of a {:.0} µs clone; the owner pays the other half, serves from its LRU cache or the file \
         server and answers through its own TX; the entry's packet router spends {:.0} µs per client ACK (one \
         per {} response bytes).\n",
        us(base.cloning.clone_ns),
        us(base.cloning.ack_ns),
        base.cloning.ack_every_bytes
    );
    let _ = writeln!(
        o,
        "Parameters the paper leaves open, chosen (not tuned to the claims): link efficiency 0.95; file-server \
         service 0.5 ms per read, its TX link rate (`--file-server-mbps`, 100 by default), files in its memory; cache 256 MiB of the 384 MB nodes; \
         CPU = LARD costs ÷ 2.44; clone cost split 50/50; ACK forwarding 5 µs per 2 segments; CF message costs \
         as above; the CF directory exact and free; the trace's Zipf α, size law and size–popularity noise \
         (next section).\n"
    );
}

fn trace(o: &mut String, spec: &BerkeleyLikeSpec, s: &BerkeleyLikeStats) {
    let _ = writeln!(
        o,
        "## Trace (synthetic stand-in)\n\n\
         The paper's log (UC Berkeley EECS CS Division, January 2001: 3 940 707 requests, 87 425 files, ≈6.6 GB, \
         40 KB mean request size) is not on disk. Stand-in: {} requests drawn independently (no sessions or \
         bursts: low temporal locality) from Zipf α = {} over {} files; file sizes lognormal (σ = {}) scaled to \
         {:.2} GB in all, capped at {} MiB, then assigned to popularity ranks sorted by size plus Gaussian noise \
         (σ = {:.2} in ln-size), the noise bisected so that the expected request size is {} KB: popular files \
         are smaller. Seed {}. α was chosen as a value typical of web server logs (0.75) and checked against \
         the two conditions the paper implies: an LFU cache of 256 MB beats LRU (see CF-LFU vs CF-LRU at one \
         node), and 12 × 256 MB holds well under all requested bytes.\n",
        spec.requests,
        spec.alpha,
        spec.files,
        spec.size_sigma,
        s.unique_bytes as f64 / 1e9,
        spec.max_size >> 20,
        s.size_rank_noise,
        spec.mean_request_bytes / 1000,
        spec.seed
    );
    let _ = writeln!(
        o,
        "| | value |\n|---|---:|\n| files requested | {} |\n| bytes of those files | {:.2} GB |\n\
         | mean request size (realised) | {:.1} KB |\n\
         | requests / requested bytes an ideal 256 MB cache holds | {:.1}% / {:.1}% |\n\
         | requests / requested bytes an ideal 12 × 256 MB cache holds | {:.1}% / {:.1}% |",
        s.files,
        s.unique_bytes as f64 / 1e9,
        s.mean_request_bytes / 1000.0,
        s.request_coverage_256mb * 100.0,
        s.byte_coverage_256mb * 100.0,
        s.request_coverage_12x256mb * 100.0,
        s.byte_coverage_12x256mb * 100.0
    );
}
