//! The table of `locus bench reload`: per server and mode, the median over the seeds of
//! requests, failed requests (by kind of client), resets and keep-alive connections closed
//! while idle, each with its range; runs that stopped on an error are named.

use std::fmt::Write as _;

use super::ReloadRow;

/// A count's median over the seeds and its range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spread {
    pub median: u64,
    pub min: u64,
    pub max: u64,
}

impl Spread {
    fn of(values: &[u64]) -> Spread {
        let mut v = values.to_vec();
        v.sort_unstable();
        let median = if v.is_empty() {
            0
        } else if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]).div_ceil(2)
        };
        Spread { median, min: v.first().copied().unwrap_or(0), max: v.last().copied().unwrap_or(0) }
    }

    fn show(self) -> String {
        if self.min == self.max {
            self.median.to_string()
        } else {
            format!("{} ({}–{})", self.median, self.min, self.max)
        }
    }
}

/// One server and mode over its seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub server: String,
    pub mode: String,
    pub seeds: usize,
    pub reloads: Spread,
    pub upgrades: Spread,
    pub requests: Spread,
    pub failed: Spread,
    pub resets: Spread,
    pub new_conn_failed: Spread,
    pub keepalive_failed: Spread,
    pub keepalive_closed_idle: Spread,
    /// The longest drain of each seed's run (`None` where not followed).
    pub longest_drain_ms: Option<Spread>,
    /// `seed: error` for every run that stopped early.
    pub errors: Vec<String>,
}

/// The rows grouped by server and mode: Locus first, then HAProxy, then NGINX.
pub fn summarize(rows: &[ReloadRow]) -> Vec<Summary> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in rows {
        let key = (r.server.clone(), r.mode.clone());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.sort_by_key(|(s, m)| (order(s), m.clone()));
    keys.into_iter()
        .map(|(server, mode)| {
            let of: Vec<&ReloadRow> = rows.iter().filter(|r| r.server == server && r.mode == mode).collect();
            let spread = |f: fn(&ReloadRow) -> u64| Spread::of(&of.iter().map(|r| f(r)).collect::<Vec<_>>());
            Summary {
                seeds: of.len(),
                reloads: spread(|r| u64::from(r.reloads)),
                upgrades: spread(|r| u64::from(r.upgrades)),
                requests: spread(|r| r.requests),
                failed: spread(|r| r.failed),
                resets: spread(|r| r.resets),
                new_conn_failed: spread(|r| r.new_conn_failed),
                keepalive_failed: spread(|r| r.keepalive_failed),
                keepalive_closed_idle: spread(|r| r.keepalive_closed_idle),
                longest_drain_ms: of
                    .iter()
                    .map(|r| r.longest_drain_ms)
                    .collect::<Option<Vec<u64>>>()
                    .map(|v| Spread::of(&v)),
                errors: of
                    .iter()
                    .filter_map(|r| r.error.as_ref().map(|e| format!("seed {}: {e}", r.seed)))
                    .collect(),
                server,
                mode,
            }
        })
        .collect()
}

/// Locus first, then HAProxy, then NGINX.
fn order(server: &str) -> usize {
    ["locus", "haproxy", "nginx"].iter().position(|s| *s == server).unwrap_or(3)
}

/// The Markdown table, then the errors of runs that stopped early.
pub fn markdown_table(summaries: &[Summary]) -> String {
    let mut out = String::from(
        "| server | mode | seeds | reloads | upgrades | requests | failed | resets | failed: new conn | failed: keep-alive | keep-alive closed while idle | longest drain (ms) |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for s in summaries {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            s.server,
            s.mode,
            s.seeds,
            s.reloads.show(),
            s.upgrades.show(),
            s.requests.show(),
            s.failed.show(),
            s.resets.show(),
            s.new_conn_failed.show(),
            s.keepalive_failed.show(),
            s.keepalive_closed_idle.show(),
            s.longest_drain_ms.map_or("—".to_string(), Spread::show)
        );
    }
    for s in summaries {
        for e in &s.errors {
            let _ = writeln!(out, "\n{} {}: stopped early, {e}", s.server, s.mode);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, seed: u64, failed: u64) -> ReloadRow {
        ReloadRow {
            server: server.into(),
            mode: "m".into(),
            seed,
            reloads: 20,
            upgrades: 3,
            requests: 1000 + seed,
            failed,
            longest_drain_ms: (server == "locus").then_some(10 * seed),
            ..ReloadRow::default()
        }
    }

    #[test]
    fn medians_and_ranges_per_server_with_locus_first() {
        let rows = [
            row("nginx", 1, 9),
            row("locus", 1, 0),
            row("nginx", 2, 1),
            row("locus", 2, 0),
            row("nginx", 3, 4),
        ];
        let s = summarize(&rows);
        assert_eq!((s[0].server.as_str(), s[0].seeds, s[0].failed.show()), ("locus", 2, "0".to_string()));
        assert_eq!(s[1].failed, Spread { median: 4, min: 1, max: 9 });
        let table = markdown_table(&s);
        assert!(table.contains("| nginx | m | 3 | 20 | 3 | 1002 (1001–1003) | 4 (1–9) |"), "{table}");
        assert!(table.contains("| 15 (10–20) |\n") && table.contains("| — |\n"), "{table}");
    }
}
