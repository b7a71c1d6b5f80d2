//! `locus bench handoff`: the latency of one TCP handoff (dump on the switch → encrypted
//! `HandOver` → restore on the node → `Ready` back; with `--tls`, the TLS session's export and
//! its continuation on the node included) over many loopback connections, with
//! `crate::handoff_latency::measure_handoff_latency_with`; one JSON line (`--json`) or a short table.
//! Needs CAP_NET_ADMIN (TCP_REPAIR).

use std::fmt::Write as _;

use crate::handoff_latency::{HandoffLatency, ThreadPlacement, measure_handoff_latency_with};
use anyhow::{Context, bail};

/// Flags of `locus bench handoff`.
#[derive(clap::Args, Debug)]
pub struct HandoffArgs {
    /// Connections handed off (and timed).
    #[arg(long, default_value_t = 10_000)]
    pub count: usize,
    /// Print one JSON line: `{"handoffs", "median_us", "p99_us", ...}`.
    #[arg(long)]
    pub json: bool,
    /// Where the switch and node threads run: both on one CPU, wherever the scheduler puts
    /// them, or each on a CPU of its own, busy-polling.
    #[arg(long, value_enum, default_value_t = Placement::OneCpu)]
    pub placement: Placement,
    /// Each connection a TLS 1.3 session that moves with it (one-way HTTPS): the switch's
    /// export and the node's set-up of the session are inside the timing.
    #[arg(long)]
    pub tls: bool,
}

/// `--placement`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Placement {
    /// Both threads on the caller's CPU.
    OneCpu,
    /// Wherever the scheduler puts them.
    Free,
    /// Each on a CPU of its own, both busy-polling the control socket.
    TwoCpus,
}

impl From<Placement> for ThreadPlacement {
    fn from(p: Placement) -> ThreadPlacement {
        match p {
            Placement::OneCpu => ThreadPlacement::OneCpu,
            Placement::Free => ThreadPlacement::Free,
            Placement::TwoCpus => ThreadPlacement::TwoCpus,
        }
    }
}

/// CAP_NET_ADMIN's bit in the capability sets.
const CAP_NET_ADMIN: u32 = 12;

/// Whether the `CapEff:` line of a `/proc/<pid>/status` text grants CAP_NET_ADMIN.
pub fn status_grants_net_admin(status: &str) -> bool {
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_NET_ADMIN) != 0)
}

/// Fail with a clear message unless this process may use TCP_REPAIR.
pub fn require_net_admin(status: &str) -> anyhow::Result<()> {
    if !status_grants_net_admin(status) {
        bail!(
            "locus bench handoff moves connections with TCP_REPAIR, which needs CAP_NET_ADMIN: \
             run it as root (or grant the capability)"
        );
    }
    Ok(())
}

/// Run the measurement and render its output (without the final newline).
pub fn output(args: &HandoffArgs) -> anyhow::Result<String> {
    let status = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    require_net_admin(&status)?;
    if args.count == 0 {
        bail!("--count must be at least 1");
    }
    let latency = measure_handoff_latency_with(args.count, args.placement.into(), args.tls)
        .context("measuring the handoff latency")?;
    if args.json { Ok(serde_json::to_string(&latency)?) } else { Ok(render_text(&latency)) }
}

/// `locus bench handoff`.
pub fn run(args: HandoffArgs) -> anyhow::Result<()> {
    println!("{}", output(&args)?);
    Ok(())
}

/// The short table: the whole handoff's median, p99, mean and max, then the dump's and the
/// restore's medians, and the one-hop median (dump start until the node has restored the
/// socket, without the `Ready` back: what the Socket Cloning paper timed).
pub fn render_text(l: &HandoffLatency) -> String {
    let placement = match l.placement {
        ThreadPlacement::OneCpu => "both threads on one CPU",
        ThreadPlacement::Free => "threads placed by the scheduler",
        ThreadPlacement::TwoCpus => "a CPU per thread, busy-polling",
    };
    let what =
        if l.tls { "TLS handoff latency (export and continuation included)" } else { "handoff latency" };
    let mut out = format!("{what}, {} handoffs ({placement}), dump start → Ready received\n", l.handoffs);
    for (name, us) in [
        ("median", l.median_us),
        ("p99", l.p99_us),
        ("mean", l.mean_us),
        ("max", l.max_us),
        ("dump median", l.dump_median_us),
        ("restore median", l.restore_median_us),
        ("one-hop median", l.restored_median_us),
    ] {
        let _ = writeln!(out, "  {name:<15} {us:>9.1} µs");
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_admin_is_read_from_the_effective_set_only() {
        let root = "Name:\tlocus\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert!(status_grants_net_admin(root));
        let only_net_admin = "CapPrm:\t0000000000000000\nCapEff:\t0000000000001000\n";
        assert!(status_grants_net_admin(only_net_admin));
        let user = "CapPrm:\t0000000000001000\nCapEff:\t0000000000000000\n";
        assert!(!status_grants_net_admin(user));
        assert!(!status_grants_net_admin("Name:\tlocus\n"));
    }

    #[test]
    fn refusal_names_the_capability_and_root() {
        let message = require_net_admin("CapEff:\t0000000000000000\n").unwrap_err().to_string();
        assert!(message.contains("CAP_NET_ADMIN") && message.contains("root"), "{message}");
    }

    #[test]
    fn table_shows_every_figure_in_its_row() {
        let l = HandoffLatency {
            handoffs: 300,
            median_us: 30.04,
            p99_us: 81.44,
            mean_us: 34.5,
            max_us: 3741.8,
            dump_median_us: 7.04,
            restore_median_us: 7.34,
            restored_median_us: 22.0,
            placement: ThreadPlacement::OneCpu,
            tls: false,
        };
        let text = render_text(&l);
        assert!(text.starts_with("handoff latency, 300 handoffs (both threads on one CPU)"), "{text}");
        for (row, figure) in [
            ("median", "30.0"),
            ("p99", "81.4"),
            ("mean", "34.5"),
            ("max", "3741.8"),
            ("dump median", "7.0"),
            ("restore median", "7.3"),
            ("one-hop median", "22.0"),
        ] {
            let line = text.lines().find(|l| l.trim_start().starts_with(&format!("{row} "))).unwrap();
            assert!(line.trim_end().ends_with(&format!("{figure} µs")), "{row}: {line}");
        }
        assert_eq!(text.lines().count(), 8);
    }
}
