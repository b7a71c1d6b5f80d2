//! The process's open-file budget: `raise_open_file_limit` lifts the soft RLIMIT_NOFILE to the
//! hard one at start-up; `DescriptorBudget` counts the descriptors a server needs for a number
//! of connections, and `plan_connections` caps `max_connections` to what the limit can hold —
//! the default quietly when the limit holds most of it, otherwise with a warning that says by
//! how much and how to lift it — refusing only when not one connection fits.

use std::fmt::Write as _;
use std::io;

/// RLIMIT_NOFILE of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFileLimit {
    pub soft: u64,
    pub hard: u64,
}

/// The current RLIMIT_NOFILE.
pub fn open_file_limit() -> io::Result<OpenFileLimit> {
    // SAFETY: an all-zero rlimit is valid storage for getrlimit to fill.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to an rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(OpenFileLimit { soft: lim.rlim_cur as u64, hard: lim.rlim_max as u64 })
}

/// The most descriptors a process may have on Linux whatever its hard limit says
/// (`fs.nr_open`); a soft limit above it is refused.
pub fn system_ceiling() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

/// What `raise_open_file_limit` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaisedLimit {
    /// The soft limit found at start.
    pub from: u64,
    /// The limit now.
    pub limit: OpenFileLimit,
}

/// Raise the soft open-file limit to the hard one (or to `fs.nr_open` when the hard limit is
/// unlimited). Servers start with the shell's soft limit, often 1,024, while the hard limit
/// allows far more; raising it needs no privilege.
pub fn raise_open_file_limit() -> io::Result<RaisedLimit> {
    let before = open_file_limit()?;
    let target = before.hard.min(system_ceiling());
    if target <= before.soft {
        return Ok(RaisedLimit { from: before.soft, limit: before });
    }
    let lim = libc::rlimit { rlim_cur: target as libc::rlim_t, rlim_max: before.hard as libc::rlim_t };
    // SAFETY: a valid rlimit with soft ≤ hard, for this process.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(RaisedLimit { from: before.soft, limit: OpenFileLimit { soft: target, hard: before.hard } })
}

/// A server's start: `raise_open_file_limit`, logged, and the limit to plan with (the one in
/// force if it could not be raised, unlimited if even that cannot be read).
pub fn raise_open_file_limit_for_server() -> OpenFileLimit {
    match raise_open_file_limit() {
        Ok(raised) => {
            if raised.limit.soft > raised.from {
                tracing::info!(from = raised.from, to = raised.limit.soft, "raised the open-file limit");
            }
            raised.limit
        }
        Err(e) => {
            tracing::warn!("cannot raise the open-file limit: {e}");
            open_file_limit().unwrap_or(OpenFileLimit { soft: u64::MAX, hard: u64::MAX })
        }
    }
}

/// One line of a budget: `fixed` descriptors, plus `per_connection` for each connection but
/// no more than `at_most` of those in all (a pool of idle descriptors is bounded both by its
/// size and by the connections that filled it).
#[derive(Clone, Debug)]
struct BudgetLine {
    what: String,
    fixed: u64,
    per_connection: u64,
    at_most: u64,
}

impl BudgetLine {
    fn needed(&self, connections: u64) -> u64 {
        self.fixed.saturating_add(self.per_connection.saturating_mul(connections).min(self.at_most))
    }
}

/// The descriptors a server needs: some whatever the load, some for each connection.
#[derive(Clone, Debug, Default)]
pub struct DescriptorBudget {
    lines: Vec<BudgetLine>,
}

impl DescriptorBudget {
    pub fn new() -> DescriptorBudget {
        DescriptorBudget::default()
    }

    /// `n` descriptors held whatever the load (listeners, event loops, log files).
    pub fn fixed(self, what: &str, n: u64) -> DescriptorBudget {
        self.line(what, n, 0, u64::MAX)
    }

    /// `n` descriptors each connection can need at once.
    pub fn per_connection(self, what: &str, n: u64) -> DescriptorBudget {
        self.line(what, 0, n, u64::MAX)
    }

    /// `n` per connection, but never more than `at_most` in all (idle pools).
    pub fn per_connection_up_to(self, what: &str, n: u64, at_most: u64) -> DescriptorBudget {
        self.line(what, 0, n, at_most)
    }

    fn line(mut self, what: &str, fixed: u64, per_connection: u64, at_most: u64) -> DescriptorBudget {
        if fixed > 0 || (per_connection > 0 && at_most > 0) {
            self.lines.push(BudgetLine { what: what.to_string(), fixed, per_connection, at_most });
        }
        self
    }

    /// Descriptors needed with `connections` open.
    pub fn needed(&self, connections: u64) -> u64 {
        self.lines.iter().fold(0u64, |sum, l| sum.saturating_add(l.needed(connections)))
    }

    /// The most connections whose descriptors fit in `limit` (0 when not even one does).
    pub fn connections_within(&self, limit: u64) -> u64 {
        if self.needed(1) > limit {
            return 0;
        }
        // `needed` grows with the connections and each needs at least one descriptor, so
        // the answer lies in 1..=limit.
        let (mut fits, mut too_many) = (1u64, limit.saturating_add(1));
        while too_many - fits > 1 {
            let mid = fits + (too_many - fits) / 2;
            if self.needed(mid) <= limit { fits = mid } else { too_many = mid }
        }
        fits
    }

    /// The lines, as "client socket 1/connection, listeners 3, …".
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for l in &self.lines {
            if !out.is_empty() {
                out.push_str(", ");
            }
            let _ = match (l.fixed, l.per_connection, l.at_most) {
                (f, 0, _) => write!(out, "{} {f}", l.what),
                (0, p, u64::MAX) => write!(out, "{} {p}/connection", l.what),
                (0, p, m) => write!(out, "{} {p}/connection up to {m}", l.what),
                (f, p, _) => write!(out, "{} {f} + {p}/connection", l.what),
            };
        }
        out
    }
}

/// How many connections a server takes, from its configured `max_connections` and the
/// open-file limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionPlan {
    /// The connection limit to enforce.
    pub max_connections: u64,
    /// The configured limit, when it had to be lowered to `max_connections`.
    pub lowered_from: Option<u64>,
    /// The limit lowered was the default, on a host set up for a server (an open-file limit
    /// of at least as many descriptors as the default's connections): said by `notice`, not
    /// `warning`.
    pub default_fitted: bool,
    /// Descriptors the configured limit needs.
    pub needed: u64,
    pub limit: OpenFileLimit,
    /// The budget's lines (`DescriptorBudget::describe`).
    pub budget: String,
}

impl ConnectionPlan {
    /// What to warn the operator of when the limit had to be lowered (not when the default
    /// was fitted: see `notice`).
    pub fn warning(&self) -> Option<String> {
        let configured = self.lowered_from.filter(|_| !self.default_fitted)?;
        Some(format!(
            "limits.max_connections = {configured} needs {} open files ({}) but the open-file limit \
             is {} (hard {}): taking at most {} connections; raise the limit (ulimit -n, systemd \
             LimitNOFILE=) to {} to allow {configured}",
            self.needed, self.budget, self.limit.soft, self.limit.hard, self.max_connections, self.needed
        ))
    }
}

impl ConnectionPlan {
    /// The information line when the default was fitted to the limit (logged, not warned).
    pub fn notice(&self) -> Option<String> {
        let default = self.lowered_from.filter(|_| self.default_fitted)?;
        Some(format!(
            "limits.max_connections: the default {default} needs {} open files but the open-file \
             limit is {} (hard {}): taking at most {} connections (set limits.max_connections, or \
             raise the limit to {}, to choose)",
            self.needed, self.limit.soft, self.limit.hard, self.max_connections, self.needed
        ))
    }
}

/// The open-file limit cannot hold even one connection.
#[derive(Debug, thiserror::Error)]
#[error(
    "the open-file limit ({soft}, hard {hard}) cannot hold one connection: that needs {needed} \
     descriptors ({budget}); raise it (ulimit -n, systemd LimitNOFILE=)"
)]
pub struct TooFewDescriptors {
    pub soft: u64,
    pub hard: u64,
    pub needed: u64,
    pub budget: String,
}

/// Cap `configured` connections to what `limit` holds under `budget`; `default` is the
/// server's default for them.
///
/// Lowering rather than refusing to start, because the defaults do not fit every host's limit
/// (10,000 proxied connections need over 21,000 descriptors at worst, and hard limits of
/// 4,096 or 20,000 are common); the lowered limit is then enforced like any other, so the
/// server answers 503 at it instead of failing its own sockets with EMFILE. The default is
/// lowered quietly (a `notice`, as HAProxy sizes an unset `maxconn` to its limit) on a host
/// set up for a server, whose limit has at least one descriptor for each of the default's
/// connections (a stock 20,000 against the default 10,000, whose 20,030 or more descriptors
/// it just misses): the operator chose no number and the host is fit for serving. A value the
/// operator configured, or the default under a limit below it (1,024: a host not set up for
/// a server), is lowered with a `warning`. (A configured value equal to the default counts as
/// the default: the configuration does not say which it was.) A limit that cannot hold a
/// single connection is an error.
pub fn plan_connections(
    configured: u64,
    default: u64,
    budget: &DescriptorBudget,
    limit: OpenFileLimit,
) -> Result<ConnectionPlan, TooFewDescriptors> {
    let needed = budget.needed(configured);
    let fit = budget.connections_within(limit.soft);
    if fit == 0 {
        return Err(TooFewDescriptors {
            soft: limit.soft,
            hard: limit.hard,
            needed: budget.needed(1),
            budget: budget.describe(),
        });
    }
    let lowered_from = (needed > limit.soft).then_some(configured);
    let max_connections = configured.min(fit);
    let default_fitted = lowered_from.is_some() && configured == default && limit.soft >= default;
    Ok(ConnectionPlan {
        max_connections,
        lowered_from,
        default_fitted,
        needed,
        limit,
        budget: budget.describe(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> DescriptorBudget {
        DescriptorBudget::new()
            .fixed("standard streams", 3)
            .fixed("listeners", 2)
            .per_connection("client socket", 1)
            .per_connection("node connection", 1)
            .per_connection_up_to("idle pool", 1, 100)
    }

    #[test]
    fn needed_counts_fixed_lines_per_connection_lines_and_caps_pools() {
        let b = budget();
        assert_eq!(b.needed(0), 5);
        assert_eq!(b.needed(10), 5 + 30);
        assert_eq!(b.needed(1000), 5 + 2000 + 100, "the pool line stops at its cap");
    }

    #[test]
    fn connections_within_is_the_largest_count_that_fits() {
        let b = budget();
        for limit in [8, 9, 100, 305, 306, 1024, 20_000] {
            let c = b.connections_within(limit);
            assert!(b.needed(c) <= limit, "{c} connections need {} > {limit}", b.needed(c));
            assert!(b.needed(c + 1) > limit, "{} would fit {limit} too", c + 1);
        }
        assert_eq!(b.connections_within(7), 0, "one connection needs 8");
    }

    #[test]
    fn a_limit_that_fits_keeps_the_configured_connections_without_a_warning() {
        let limit = OpenFileLimit { soft: 20_000, hard: 20_000 };
        let plan = plan_connections(1000, 1000, &budget(), limit).unwrap();
        assert_eq!((plan.max_connections, plan.lowered_from), (1000, None));
        assert!(plan.warning().is_none() && plan.notice().is_none());
    }

    #[test]
    fn a_limit_too_low_lowers_max_connections_and_the_warning_says_what_to_raise() {
        let limit = OpenFileLimit { soft: 1024, hard: 1024 };
        let plan = plan_connections(10_000, 500, &budget(), limit).unwrap();
        assert_eq!(plan.max_connections, budget().connections_within(1024));
        assert!(plan.notice().is_none());
        assert_eq!(plan.lowered_from, Some(10_000));
        let w = plan.warning().unwrap();
        assert!(w.contains("max_connections = 10000") && w.contains("20105"), "{w}");
        assert!(w.contains(&format!("at most {}", plan.max_connections)), "{w}");
        assert!(w.contains("client socket 1/connection") && w.contains("idle pool 1/connection up to 100"));
    }

    #[test]
    fn the_default_is_fitted_quietly_to_a_limit_of_as_many_descriptors_and_warned_below() {
        // 10,000 connections need 20,105 descriptors here; 20,000 hold 9,947 of them.
        let stock = OpenFileLimit { soft: 20_000, hard: 20_000 };
        let plan = plan_connections(10_000, 10_000, &budget(), stock).unwrap();
        assert_eq!((plan.max_connections, plan.lowered_from), (9_947, Some(10_000)));
        assert!(plan.warning().is_none(), "the default on a stock host: no warning");
        let notice = plan.notice().unwrap();
        assert!(notice.contains("the default 10000") && notice.contains("at most 9947"), "{notice}");
        // The same value configured (the default is another) is warned of.
        let configured = plan_connections(10_000, 5_000, &budget(), stock).unwrap();
        assert!(configured.warning().is_some() && configured.notice().is_none());
        // The default under a limit of fewer descriptors than it has connections is warned of.
        let edge = OpenFileLimit { soft: 10_000, hard: 10_000 };
        let plan = plan_connections(10_000, 10_000, &budget(), edge).unwrap();
        assert!(plan.max_connections < 5_000 && plan.warning().is_none() && plan.notice().is_some());
        let small = OpenFileLimit { soft: 9_999, hard: 20_000 };
        let cut = plan_connections(10_000, 10_000, &budget(), small).unwrap();
        assert!(cut.warning().is_some() && cut.notice().is_none());
    }

    #[test]
    fn a_limit_that_cannot_hold_one_connection_is_an_error_naming_the_need() {
        let limit = OpenFileLimit { soft: 6, hard: 6 };
        let e = plan_connections(10, 10, &budget(), limit).unwrap_err().to_string();
        assert!(e.contains("needs 8 descriptors") && e.contains("(6, hard 6)"), "{e}");
    }

    #[test]
    fn raising_lifts_the_soft_limit_to_the_hard_one() {
        let raised = raise_open_file_limit().unwrap();
        let now = open_file_limit().unwrap();
        assert_eq!(raised.limit, now);
        assert!(now.soft >= raised.from);
        assert!(now.soft == now.hard || now.soft == system_ceiling());
    }
}
