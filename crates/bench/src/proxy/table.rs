//! The Markdown report of `locus bench proxy`: one line per file size and keep-alive setting,
//! a column per path with its requests/s and efficiency (÷ one node directly), a legend, the
//! ratios Locus is judged by (Locus ÷ HAProxy, handoff ÷ HAProxy, node ÷ NGINX: medians of
//! per-round ratios, with their range), the errors if any, and the idle-connection memory.

use super::paths::PATHS;
use super::{ProxyRow, median};

/// Pairs of paths compared in the report: Locus and its one-way mode against HAProxy, one Locus
/// node against NGINX serving the same files.
const RATIOS: [(&str, &str); 3] = [("locus", "haproxy"), ("handoff", "haproxy"), ("direct", "direct-nginx")];

/// `a ÷ b` at one point: the median and range of the per-round ratios of their efficiencies
/// (both were measured between the same direct runs of each round), or the ratio of the medians
/// when a round is missing on one side.
fn ratio(a: &[f64], b: &[f64]) -> Option<(f64, f64, f64)> {
    if a.len() == b.len() && !a.is_empty() {
        let r: Vec<f64> = a.iter().zip(b).filter(|(_, b)| **b > 0.0).map(|(a, b)| a / b).collect();
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        return median(&r).map(|m| (m, lo, hi));
    }
    let (a, b) = (median(a)?, median(b)?);
    (b > 0.0).then(|| (a / b, a / b, a / b))
}

/// Render throughput rows (in any order; lines follow first appearance) as a Markdown table.
pub fn markdown_table(rows: &[ProxyRow]) -> String {
    let mut points: Vec<(u64, bool)> = Vec::new();
    let mut paths: Vec<&str> = Vec::new();
    for r in rows {
        if let ProxyRow::Throughput { path, size, keepalive, .. } = r {
            if !points.contains(&(*size, *keepalive)) {
                points.push((*size, *keepalive));
            }
            if !paths.contains(&path.as_str()) {
                paths.push(path);
            }
        }
    }
    // A path's row at one point: its requests/s, efficiency and per-round efficiencies.
    let find = |path: &str, size: u64, ka: bool| {
        rows.iter().find_map(|r| match r {
            ProxyRow::Throughput {
                path: p,
                size: s,
                keepalive: k,
                rps,
                efficiency,
                efficiency_rounds,
                ..
            } if p == path && *s == size && *k == ka => {
                Some((*rps, *efficiency, efficiency_rounds.as_slice()))
            }
            _ => None,
        })
    };
    let mut out = String::new();
    if !points.is_empty() {
        out.push_str(
            "Requests/s per path; in parentheses its efficiency, requests/s ÷ those of one Locus node \
             directly (`direct`) at the same size and keep-alive setting.\n\n",
        );
        out.push_str("| size | keep-alive |");
        for p in &paths {
            out.push_str(&format!(" {p} |"));
        }
        out.push_str("\n|---|---|");
        out.push_str(&"---:|".repeat(paths.len()));
        out.push('\n');
        for &(size, ka) in &points {
            out.push_str(&format!("| {} | {} |", human_size(size), if ka { "on" } else { "off" }));
            for p in &paths {
                let cell = match find(p, size, ka) {
                    Some((rps, Some(e), _)) => format!("{} ({e:.2})", thousands(rps)),
                    Some((rps, None, _)) => thousands(rps),
                    None => "—".into(),
                };
                out.push_str(&format!(" {cell} |"));
            }
            out.push('\n');
        }
        out.push('\n');
        for p in &paths {
            let about = PATHS.iter().find(|k| k.name == *p).map_or("", |k| k.about);
            out.push_str(&format!("- `{p}`: {about}\n"));
        }
        out.push_str("- keep-alive off: every request on a new connection (`Connection: close`)\n");
    }
    let mut ratio_lines = Vec::new();
    for &(size, ka) in &points {
        let cells: Vec<String> = RATIOS
            .iter()
            .filter_map(|&(a, b)| {
                let (m, lo, hi) = ratio(find(a, size, ka)?.2, find(b, size, ka)?.2)?;
                Some(format!("{a} ÷ {b} {m:.2}× ({lo:.2}–{hi:.2})"))
            })
            .collect();
        if !cells.is_empty() {
            ratio_lines.push(format!(
                "- {} keep-alive {}: {}\n",
                human_size(size),
                if ka { "on" } else { "off" },
                cells.join("; ")
            ));
        }
    }
    if !ratio_lines.is_empty() {
        out.push_str("\nRatios (median of the per-round ratios, range in parentheses):\n\n");
        out.extend(ratio_lines);
    }
    let errors: Vec<String> = rows
        .iter()
        .filter_map(|r| match r {
            ProxyRow::Throughput { path, size, keepalive, errors, .. } if *errors > 0 => Some(format!(
                "{path} at {} keep-alive {}: {errors}",
                human_size(*size),
                if *keepalive { "on" } else { "off" }
            )),
            _ => None,
        })
        .collect();
    if !errors.is_empty() {
        out.push_str(&format!(
            "\nErrors (wrk's socket errors plus non-2xx/3xx responses, all rounds): {}\n",
            errors.join("; ")
        ));
    }
    for r in rows {
        if let ProxyRow::Network { net, congestion_control, .. } = r {
            out.push_str(&format!("\nNetwork: {net}; TCP congestion control {congestion_control}.\n"));
        }
    }
    for r in rows {
        if let ProxyRow::Idle { connections, rss_mb, .. } = r {
            out.push_str(&format!(
                "\nSwitch resident memory with {connections} idle keep-alive connections: {rss_mb:.1} MiB\n"
            ));
        }
    }
    out
}

/// `1234567.8` → `1,234,568`.
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(super) fn human_size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        path: &str,
        size: u64,
        keepalive: bool,
        rps: f64,
        efficiency: Option<f64>,
        errors: u64,
    ) -> ProxyRow {
        ProxyRow::Throughput {
            path: path.into(),
            size,
            keepalive,
            rps,
            efficiency,
            efficiency_rounds: efficiency.into_iter().collect(),
            p50_ms: 0.0,
            p99_ms: 0.0,
            errors,
        }
    }

    #[test]
    fn one_line_per_size_and_keepalive_with_rps_and_efficiency_per_path_and_the_network_named() {
        let rows = [
            ProxyRow::Network {
                path: "network".into(),
                net: "namespaces".into(),
                congestion_control: "cubic".into(),
            },
            row("direct", 1024, true, 81251.4, Some(1.0), 0),
            row("locus", 1024, true, 39461.0, Some(0.4857), 0),
            row("nginx", 1024, true, 40000.0, Some(0.4923), 0),
            row("direct", 1024, false, 20000.0, Some(1.0), 0),
            row("locus", 1024, false, 10000.0, Some(0.5), 7),
            row("direct", 1 << 20, true, 1200.0, Some(1.0), 0),
            ProxyRow::Idle { path: "idle-connections".into(), connections: 10_000, rss_mb: 32.14 },
        ];
        let md = markdown_table(&rows);
        assert!(
            md.contains("| size | keep-alive | direct | locus | nginx |\n|---|---|---:|---:|---:|\n"),
            "{md}"
        );
        assert!(md.contains("| 1 KiB | on | 81,251 (1.00) | 39,461 (0.49) | 40,000 (0.49) |"), "{md}");
        assert!(md.contains("| 1 KiB | off | 20,000 (1.00) | 10,000 (0.50) | — |"), "{md}");
        assert!(md.contains("| 1 MiB | on | 1,200 (1.00) | — | — |"), "{md}");
        assert!(md.contains("- `nginx`: NGINX as the load balancer"), "{md}");
        assert!(md.contains("locus at 1 KiB keep-alive off: 7"), "{md}");
        assert!(md.contains("10000 idle keep-alive connections: 32.1 MiB"), "{md}");
        assert!(md.contains("Network: namespaces; TCP congestion control cubic."), "{md}");
    }

    #[test]
    fn ratios_are_medians_of_per_round_ratios_with_their_range() {
        let with_rounds = |path: &str, eff: &[f64]| ProxyRow::Throughput {
            path: path.into(),
            size: 65536,
            keepalive: true,
            rps: 1.0,
            efficiency: median(eff),
            efficiency_rounds: eff.to_vec(),
            p50_ms: 0.0,
            p99_ms: 0.0,
            errors: 0,
        };
        let rows = [
            with_rounds("direct", &[1.0, 1.0, 1.0]),
            with_rounds("direct-nginx", &[0.8, 1.25, 1.0]),
            with_rounds("locus", &[0.6, 0.4, 0.5]),
            with_rounds("haproxy", &[0.2, 0.25, 0.3]),
        ];
        let md = markdown_table(&rows);
        assert!(
            md.contains(
                "- 64 KiB keep-alive on: locus ÷ haproxy 1.67× (1.60–3.00); direct ÷ direct-nginx 1.00× (0.80–1.25)\n"
            ),
            "{md}"
        );
        assert_eq!(ratio(&[0.5, 0.6], &[0.25]), Some((2.2, 2.2, 2.2)));
        assert_eq!(ratio(&[0.5], &[]), None);
    }

    #[test]
    fn numbers_get_thousands_separators_and_sizes_units() {
        assert_eq!(thousands(999.6), "1,000");
        assert_eq!(thousands(1234567.0), "1,234,567");
        assert_eq!(thousands(12.0), "12");
        assert_eq!(human_size(100), "100 B");
        assert_eq!(human_size(262144), "256 KiB");
        assert_eq!(human_size(1 << 20), "1 MiB");
    }
}
