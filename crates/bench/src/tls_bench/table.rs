//! The TLS benchmark's report in Markdown: per certificate, a table of every path's
//! throughput (median req/s with the rounds' range) and CPU per request at each measure, the
//! Locus switch against HAProxy and NGINX and one-way HTTPS (`handoff`) against HAProxy and
//! the node serving TLS itself as ratios of medians, the handoff switch's CPU per request
//! against HAProxy's, and the idle-connection memory.

use std::fmt::Write;

use super::{MEASURES, Measure, TLS_PATHS, TlsRow};

/// The throughput ratios the table gives (path ÷ rival, medians).
const RATIOS: [(&str, &str); 4] =
    [("locus", "haproxy"), ("locus", "nginx"), ("handoff", "haproxy"), ("handoff", "direct")];
/// The CPU-per-request ratio it gives: the one-way switch's against HAProxy's.
const CPU_RATIO: (&str, &str) = ("handoff", "haproxy");

fn measure_name(m: &Measure) -> String {
    match (m.keepalive, m.resumed) {
        (false, false) => "full handshakes (conn/request, 1 KiB)".into(),
        (false, true) => "resumed handshakes (conn/request, 1 KiB)".into(),
        _ => format!("keep-alive {} KiB", m.size / 1024),
    }
}

/// The median rps, its rounds' range and CPU of `path` at `measure` for `cert`.
fn cell(rows: &[TlsRow], cert: &str, path: &str, m: &Measure) -> Option<(f64, f64, f64, Option<f64>)> {
    rows.iter().find_map(|r| match r {
        TlsRow::Throughput {
            path: p,
            cert: c,
            size,
            keepalive,
            resumed,
            rps,
            rps_rounds,
            proxy_us_per_req,
            ..
        } if p == path
            && c == cert
            && *size == m.size
            && *keepalive == m.keepalive
            && *resumed == m.resumed =>
        {
            let lo = rps_rounds.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = rps_rounds.iter().copied().fold(0.0, f64::max);
            Some((*rps, lo, hi, *proxy_us_per_req))
        }
        _ => None,
    })
}

/// The report of `rows`.
pub fn tls_markdown(rows: &[TlsRow]) -> String {
    let mut out = String::new();
    let mut certs: Vec<&str> = rows
        .iter()
        .map(|r| match r {
            TlsRow::Throughput { cert, .. } | TlsRow::Idle { cert, .. } => cert.as_str(),
        })
        .collect();
    certs.dedup();
    for cert in certs {
        let paths: Vec<&str> = TLS_PATHS
            .iter()
            .map(|p| p.name)
            .filter(|p| MEASURES.iter().any(|m| cell(rows, cert, p, m).is_some()))
            .collect();
        let ratio_heads: Vec<String> = RATIOS.iter().map(|(a, b)| format!("{a} ÷ {b}")).collect();
        let _ = writeln!(
            out,
            "\n### {cert}\n\n| measure | {} | {} | {} CPU/req ÷ {} |",
            paths.join(" | "),
            ratio_heads.join(" | "),
            CPU_RATIO.0,
            CPU_RATIO.1
        );
        let _ = writeln!(out, "|---|{}{}---|", "---|".repeat(paths.len()), "---|".repeat(RATIOS.len()));
        for m in &MEASURES {
            let mut line = format!("| {} |", measure_name(m));
            for p in &paths {
                match cell(rows, cert, p, m) {
                    Some((rps, lo, hi, us)) => {
                        let cpu = us.map_or(String::new(), |u| format!(", {u:.0} µs/req"));
                        let _ = write!(line, " {rps:.0} ({lo:.0}–{hi:.0}){cpu} |");
                    }
                    None => line.push_str(" – |"),
                }
            }
            for (path, rival) in RATIOS {
                match (cell(rows, cert, path, m), cell(rows, cert, rival, m)) {
                    (Some((a, ..)), Some((b, ..))) if b > 0.0 => {
                        let _ = write!(line, " {:.2}× |", a / b);
                    }
                    _ => line.push_str(" – |"),
                }
            }
            let cpu = (cell(rows, cert, CPU_RATIO.0, m), cell(rows, cert, CPU_RATIO.1, m));
            match cpu {
                (Some((.., Some(a))), Some((.., Some(b)))) if b > 0.0 => {
                    let _ = write!(line, " {:.2}× |", a / b);
                }
                _ => line.push_str(" – |"),
            }
            let _ = writeln!(out, "{line}");
        }
        for r in rows {
            if let TlsRow::Idle { path, cert: c, held, rss_mb, rss_before_mb, stopped, .. } = r
                && c == cert
            {
                let why = stopped.as_ref().map_or(String::new(), |s| format!(" (stopped: {s})"));
                let _ = writeln!(
                    out,
                    "\n{path}: {held} idle TLS keep-alive connections, {rss_mb:.1} MB resident (before: {rss_before_mb:.1} MB){why}"
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, m: &Measure, rps: f64) -> TlsRow {
        TlsRow::Throughput {
            path: path.into(),
            cert: "ecdsa-p256".into(),
            size: m.size,
            keepalive: m.keepalive,
            resumed: m.resumed,
            rps,
            rps_rounds: vec![rps - 10.0, rps, rps + 5.0],
            proxy_us_per_req: Some(42.0),
            handshake_p50_ms: None,
            errors: 0,
        }
    }

    #[test]
    fn the_table_gives_medians_ranges_and_locus_over_each_rival() {
        let m = &MEASURES[0];
        let rows = vec![row("locus", m, 1200.0), row("haproxy", m, 1000.0), row("nginx", m, 800.0)];
        let t = tls_markdown(&rows);
        assert!(t.contains("### ecdsa-p256"), "{t}");
        assert!(t.contains("| full handshakes (conn/request, 1 KiB) | 1200 (1190–1205), 42 µs/req |"), "{t}");
        assert!(t.contains("| 1.20× | 1.50× | – | – | – |"), "{t}");
        let rows = vec![row("handoff", m, 3000.0), row("haproxy", m, 1000.0), row("direct", m, 2000.0)];
        let t = tls_markdown(&rows);
        assert!(t.contains("| – | – | 3.00× | 1.50× | 1.00× |"), "{t}");
    }
}
