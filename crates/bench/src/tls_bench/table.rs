//! The TLS benchmark's report in Markdown: per certificate, a table of every path's
//! throughput (median req/s with the rounds' range) and CPU per request at each measure, the
//! Locus switch against HAProxy and NGINX as ratios of medians, and the idle-connection
//! memory.

use std::fmt::Write;

use super::{MEASURES, Measure, TLS_PATHS, TlsRow};

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
        let _ = writeln!(
            out,
            "\n### {cert}\n\n| measure | {} | locus ÷ haproxy | locus ÷ nginx |",
            paths.join(" | ")
        );
        let _ = writeln!(out, "|---|{}---|---|", "---|".repeat(paths.len()));
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
            let ratio = |rival: &str| match (cell(rows, cert, "locus", m), cell(rows, cert, rival, m)) {
                (Some((a, ..)), Some((b, ..))) if b > 0.0 => format!("{:.2}×", a / b),
                _ => "–".into(),
            };
            let _ = writeln!(out, "{line} {} | {} |", ratio("haproxy"), ratio("nginx"));
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
        assert!(t.contains("| 1.20× | 1.50× |"), "{t}");
    }
}
