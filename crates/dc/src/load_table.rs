//! Load information: `LoadMeter` smooths a server's own connections per second (EWMA over the
//! caller's ticks), `LoadTable` keeps every peer's last reported load with its receive time
//! (freshness, the mean of fresh loads, who the pinger should ask), and the `X-DC-Load` header
//! codec `<name>=<L>[;free=<bytes>]` that carries loads on fetch traffic and pings.

use std::collections::BTreeMap;

use crate::ServerId;

const NS_PER_S: f64 = 1e9;

/// Why a load setting or an `X-DC-Load` value is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// The EWMA weight is outside `0..=1` or not a number.
    #[error("load smoothing weight {0} must be within 0..=1")]
    BadAlpha(f64),
    /// The header has no `<name>=<load>` part.
    #[error("X-DC-Load `{0}`: expected `<name>=<load>[;free=<bytes>]`")]
    Malformed(String),
    /// The server name is empty or has characters other than letters, digits, `-`, `_`.
    #[error("X-DC-Load `{0}`: bad server name")]
    BadName(String),
    /// The load is not a finite non-negative number.
    #[error("X-DC-Load `{0}`: load must be a finite number >= 0")]
    BadLoad(String),
    /// The `free` parameter is not a whole number of bytes, or is given twice.
    #[error("X-DC-Load `{0}`: free must be given once, as whole bytes")]
    BadFree(String),
}

/// How long (ns) a peer's load stays fresh when a pinger runs every `ping_period_ns` and asks
/// peers whose entry is older than `stale_after_ns`: the entry is refreshed at the pinger's
/// first round after it turns stale, up to a period later, and the answer takes up to another
/// period. A shorter freshness makes a live peer's load unknown for part of every cycle, and
/// an unknown load counts as the mean, so an overloaded peer looked average a third of the
/// time and kept being chosen.
pub fn fresh_for(ping_period_ns: u64, stale_after_ns: u64) -> u64 {
    stale_after_ns.saturating_add(ping_period_ns.saturating_mul(2))
}

/// A server's own load: connections per second, smoothed by `L <- a*L + (1-a)*S` at each tick,
/// where `S` is the connections counted since the last tick over the seconds elapsed.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadMeter {
    alpha: f64,
    load: f64,
    last_tick: u64,
    /// Connections handed to a tick that came at the same instant as the previous one.
    pending: u64,
}

impl LoadMeter {
    /// The design's weight `a` for the previous value.
    pub const DEFAULT_ALPHA: f64 = 0.5;

    /// A meter with load 0 whose first interval starts at `now` (ns).
    pub fn new(alpha: f64, now: u64) -> Result<LoadMeter, LoadError> {
        if !(0.0..=1.0).contains(&alpha) {
            return Err(LoadError::BadAlpha(alpha));
        }
        Ok(LoadMeter { alpha, load: 0.0, last_tick: now, pending: 0 })
    }

    /// Ends an interval at `now` in which `connections` arrived; returns the new load. A tick at
    /// or before the previous one changes nothing (its connections count in the next interval).
    pub fn tick(&mut self, now: u64, connections: u64) -> f64 {
        self.pending = self.pending.saturating_add(connections);
        if now <= self.last_tick {
            return self.load;
        }
        let seconds = (now - self.last_tick) as f64 / NS_PER_S;
        let sample = self.pending as f64 / seconds;
        self.load = self.alpha * self.load + (1.0 - self.alpha) * sample;
        self.last_tick = now;
        self.pending = 0;
        self.load
    }

    /// The current smoothed load (connections per second).
    pub fn load(&self) -> f64 {
        self.load
    }
}

/// A peer's last reported load and when it arrived (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadEntry {
    pub load: f64,
    pub received_at: u64,
}

/// Every peer's last known load. Peers named at construction are listed by `stale` until
/// they report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadTable {
    entries: BTreeMap<ServerId, Option<LoadEntry>>,
}

impl LoadTable {
    /// A table that knows `peers` (normally every server but this one) and has no loads yet.
    pub fn new(peers: impl IntoIterator<Item = ServerId>) -> LoadTable {
        LoadTable { entries: peers.into_iter().map(|id| (id, None)).collect() }
    }

    /// Records `load` from `id` received at `now`; a non-finite or negative load is ignored
    /// (returns false). An unknown id becomes a peer.
    pub fn update(&mut self, id: ServerId, load: f64, now: u64) -> bool {
        if !load.is_finite() || load < 0.0 {
            return false;
        }
        self.entries.insert(id, Some(LoadEntry { load, received_at: now }));
        true
    }

    /// The last report from `id`, if any.
    pub fn get(&self, id: ServerId) -> Option<LoadEntry> {
        self.entries.get(&id).copied().flatten()
    }

    /// Every peer, in id order.
    pub fn peers(&self) -> impl Iterator<Item = ServerId> + '_ {
        self.entries.keys().copied()
    }

    /// Every peer with its last report, in id order (for a status page).
    pub fn iter(&self) -> impl Iterator<Item = (ServerId, Option<LoadEntry>)> + '_ {
        self.entries.iter().map(|(&id, &e)| (id, e))
    }

    /// Whether `id` reported at most `max_age` ns before `now`.
    pub fn is_fresh(&self, id: ServerId, now: u64, max_age: u64) -> bool {
        self.get(id).is_some_and(|e| now.saturating_sub(e.received_at) <= max_age)
    }

    /// The load of `id` if fresh.
    pub fn fresh_load(&self, id: ServerId, now: u64, max_age: u64) -> Option<f64> {
        self.get(id).filter(|e| now.saturating_sub(e.received_at) <= max_age).map(|e| e.load)
    }

    /// The mean load of this server (`self_id`, `self_load`) and every peer with a fresh entry.
    /// An entry for `self_id` in the table is ignored in favour of `self_load`.
    pub fn mean_fresh(&self, now: u64, max_age: u64, self_id: ServerId, self_load: f64) -> f64 {
        let (mut sum, mut count) = (self_load, 1u32);
        for &id in self.entries.keys().filter(|&&id| id != self_id) {
            if let Some(load) = self.fresh_load(id, now, max_age) {
                sum += load;
                count += 1;
            }
        }
        sum / f64::from(count)
    }

    /// Peers that never reported or whose report is more than `older_than` ns old at `now`:
    /// the ones the pinger asks.
    pub fn stale(&self, now: u64, older_than: u64) -> Vec<ServerId> {
        self.entries
            .iter()
            .filter(|(_, e)| e.is_none_or(|e| now.saturating_sub(e.received_at) > older_than))
            .map(|(&id, _)| id)
            .collect()
    }
}

/// One `X-DC-Load` value: who sent it, its load, and optionally its free replica bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReport {
    pub name: String,
    pub load: f64,
    pub free: Option<u64>,
}

/// The header name.
pub const LOAD_HEADER: &str = "X-DC-Load";

/// Formats an `X-DC-Load` value: `<name>=<L>[;free=<bytes>]`, the load with 3 decimals. A
/// non-finite or negative load is sent as 0.
pub fn format_load_header(name: &str, load: f64, free: Option<u64>) -> String {
    let load = if load.is_finite() && load > 0.0 { load } else { 0.0 };
    match free {
        Some(free) => format!("{name}={load:.3};free={free}"),
        None => format!("{name}={load:.3}"),
    }
}

/// Parses an `X-DC-Load` value. Spaces around parts are allowed; unknown `key=value`
/// parameters and empty ones after the load are skipped.
pub fn parse_load_header(value: &str) -> Result<LoadReport, LoadError> {
    let mut parts = value.split(';');
    let head = parts.next().unwrap_or_default();
    let (name, load) = head.split_once('=').ok_or_else(|| LoadError::Malformed(value.into()))?;
    let name = name.trim();
    let name_ok = !name.is_empty()
        && name.len() <= 32
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !name_ok {
        return Err(LoadError::BadName(value.into()));
    }
    let load: f64 = load.trim().parse().map_err(|_| LoadError::BadLoad(value.into()))?;
    if !load.is_finite() || load < 0.0 {
        return Err(LoadError::BadLoad(value.into()));
    }
    let mut free = None;
    for param in parts.filter(|p| !p.trim().is_empty()) {
        let (key, val) = param.split_once('=').ok_or_else(|| LoadError::Malformed(value.into()))?;
        if key.trim().eq_ignore_ascii_case("free") {
            let bytes = val.trim().parse().map_err(|_| LoadError::BadFree(value.into()))?;
            if free.replace(bytes).is_some() {
                return Err(LoadError::BadFree(value.into()));
            }
        }
    }
    Ok(LoadReport { name: name.into(), load, free })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn meter_smooths_with_half_weight_per_one_second_tick() {
        let mut m = LoadMeter::new(0.5, 0).unwrap();
        assert_eq!(m.tick(S, 100), 50.0);
        assert_eq!(m.tick(2 * S, 100), 75.0);
        assert_eq!(m.tick(4 * S, 100), 0.5 * 75.0 + 0.5 * 50.0);
    }

    #[test]
    fn meter_keeps_connections_of_a_tick_without_elapsed_time() {
        let mut m = LoadMeter::new(0.0, 5).unwrap();
        assert_eq!(m.tick(5, 10), 0.0);
        assert_eq!(m.tick(5 + S, 10), 20.0);
    }

    #[test]
    fn meter_refuses_alpha_outside_unit_interval() {
        for alpha in [-0.1, 1.5, f64::NAN] {
            assert!(matches!(LoadMeter::new(alpha, 0), Err(LoadError::BadAlpha(_))));
        }
    }

    #[test]
    fn table_freshness_mean_and_stale_peers_follow_receive_times() {
        let mut t = LoadTable::new([ServerId(1), ServerId(2), ServerId(3)]);
        assert_eq!(t.stale(0, 2 * S), vec![ServerId(1), ServerId(2), ServerId(3)]);
        t.update(ServerId(1), 10.0, 0);
        t.update(ServerId(2), 30.0, 5 * S);
        assert!(!t.update(ServerId(3), f64::NAN, 5 * S));
        assert!(t.is_fresh(ServerId(2), 6 * S, 2 * S));
        assert!(!t.is_fresh(ServerId(1), 6 * S, 2 * S));
        // Fresh: self (20) and server 2 (30); server 1 too old, server 3 never reported.
        assert_eq!(t.mean_fresh(6 * S, 2 * S, ServerId(0), 20.0), 25.0);
        assert_eq!(t.stale(6 * S, 2 * S), vec![ServerId(1), ServerId(3)]);
    }

    #[test]
    fn header_round_trips_with_and_without_free() {
        let v = format_load_header("s2", 12.5, Some(4096));
        assert_eq!(v, "s2=12.500;free=4096");
        let r = parse_load_header(&v).unwrap();
        assert_eq!(r, LoadReport { name: "s2".into(), load: 12.5, free: Some(4096) });
        let r = parse_load_header(" s1 = 3 ; other=x;").unwrap();
        assert_eq!((r.name.as_str(), r.load, r.free), ("s1", 3.0, None));
    }

    #[test]
    fn header_parse_refuses_bad_values_without_panicking() {
        for bad in ["", "s1", "=3", "a/b=1", "s1=NaN", "s1=-1", "s1=inf", "s1=x", "s1=1;free=-3"] {
            assert!(parse_load_header(bad).is_err(), "{bad:?} accepted");
        }
        assert!(matches!(parse_load_header("s1=1;free=1;free=2"), Err(LoadError::BadFree(_))));
        assert!(matches!(parse_load_header("s1=1;junk"), Err(LoadError::Malformed(_))));
    }
}
