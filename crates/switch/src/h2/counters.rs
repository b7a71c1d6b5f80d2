//! What the switch counts of HTTP/2: connections (and those served two-way in a one-way mode),
//! streams, streams reset by reason and GOAWAYs by reason, for `/locus/status` and `/metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why a stream was reset (by the client, or by the switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetReason {
    /// The client reset it (RST_STREAM): a cancelled request.
    ByClient,
    /// Its head broke HTTP/2's or HTTP/1.1's rules; never forwarded.
    Malformed,
    /// The client did not read its response (no window) within the node timeout.
    SlowRead,
    /// The client did not send its request body within the node timeout.
    BodyTimeout,
    /// The node failed after the response had started.
    NodeFailed,
}

impl ResetReason {
    const ALL: [ResetReason; 5] = [
        ResetReason::ByClient,
        ResetReason::Malformed,
        ResetReason::SlowRead,
        ResetReason::BodyTimeout,
        ResetReason::NodeFailed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ResetReason::ByClient => "by_client",
            ResetReason::Malformed => "malformed",
            ResetReason::SlowRead => "slow_read",
            ResetReason::BodyTimeout => "body_timeout",
            ResetReason::NodeFailed => "node_failed",
        }
    }
}

/// Why a connection got GOAWAY (or ended with one from the client).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoawayReason {
    /// The switch is shutting down: streams in flight finish.
    Shutdown,
    /// No stream for the keep-alive timeout.
    Idle,
    /// Too many SETTINGS, PING, PRIORITY, RST_STREAM or empty DATA frames (`FrameMeter`).
    ControlFlood,
    /// The client provoked too many stream errors, reset too many streams before they were
    /// taken, or sent a header list far over the limit (h2's ENHANCE_YOUR_CALM).
    TooManyErrors,
    /// The client broke the protocol (PROTOCOL_ERROR, COMPRESSION_ERROR, FRAME_SIZE_ERROR...).
    ProtocolError,
    /// The client said GOAWAY itself.
    FromClient,
}

impl GoawayReason {
    const ALL: [GoawayReason; 6] = [
        GoawayReason::Shutdown,
        GoawayReason::Idle,
        GoawayReason::ControlFlood,
        GoawayReason::TooManyErrors,
        GoawayReason::ProtocolError,
        GoawayReason::FromClient,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GoawayReason::Shutdown => "shutdown",
            GoawayReason::Idle => "idle",
            GoawayReason::ControlFlood => "control_flood",
            GoawayReason::TooManyErrors => "too_many_errors",
            GoawayReason::ProtocolError => "protocol_error",
            GoawayReason::FromClient => "from_client",
        }
    }
}

/// HTTP/2 counters of the whole switch.
#[derive(Default)]
pub struct H2Counters {
    pub connections: AtomicU64,
    /// Connections a one-way mode (handoff, l4) served two-way, since their streams cannot move.
    pub two_way: AtomicU64,
    pub streams: AtomicU64,
    resets: [AtomicU64; ResetReason::ALL.len()],
    goaways: [AtomicU64; GoawayReason::ALL.len()],
}

impl H2Counters {
    pub fn reset(&self, why: ResetReason) {
        self.resets[why as usize].fetch_add(1, Relaxed);
    }

    pub fn goaway(&self, why: GoawayReason) {
        self.goaways[why as usize].fetch_add(1, Relaxed);
    }

    pub fn resets(&self, why: ResetReason) -> u64 {
        self.resets[why as usize].load(Relaxed)
    }

    pub fn goaways(&self, why: GoawayReason) -> u64 {
        self.goaways[why as usize].load(Relaxed)
    }

    /// The `http2` object of `/locus/status`.
    pub fn to_json(&self) -> serde_json::Value {
        let resets: serde_json::Map<_, _> =
            ResetReason::ALL.iter().map(|&r| (r.name().to_string(), self.resets(r).into())).collect();
        let goaways: serde_json::Map<_, _> =
            GoawayReason::ALL.iter().map(|&r| (r.name().to_string(), self.goaways(r).into())).collect();
        serde_json::json!({
            "connections": self.connections.load(Relaxed),
            "two_way": self.two_way.load(Relaxed),
            "streams": self.streams.load(Relaxed),
            "resets": resets,
            "goaways": goaways,
        })
    }

    /// Register the `h2_*` metrics.
    pub fn register_metrics(&self, reg: &mut Registry) {
        let plain = |v: &AtomicU64| {
            let c = Counter::<u64>::default();
            c.inc_by(v.load(Relaxed));
            c
        };
        reg.register("h2_connections", "HTTP/2 client connections", plain(&self.connections));
        reg.register(
            "h2_two_way",
            "HTTP/2 connections served two-way in a one-way mode (their streams cannot move)",
            plain(&self.two_way),
        );
        reg.register("h2_streams", "HTTP/2 streams (requests) opened by clients", plain(&self.streams));
        let labelled = |names: &mut dyn Iterator<Item = (&'static str, u64)>| {
            let family = Family::<Vec<(String, String)>, Counter<u64, AtomicU64>>::default();
            for (name, v) in names {
                family.get_or_create(&vec![("reason".to_string(), name.to_string())]).inc_by(v);
            }
            family
        };
        let resets = labelled(&mut ResetReason::ALL.iter().map(|&r| (r.name(), self.resets(r))));
        reg.register("h2_resets", "HTTP/2 streams reset, by reason", resets);
        let goaways = labelled(&mut GoawayReason::ALL.iter().map(|&r| (r.name(), self.goaways(r))));
        reg.register("h2_goaways", "HTTP/2 connections ended by GOAWAY, by reason", goaways);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_counter_and_name() {
        let c = H2Counters::default();
        for (i, r) in ResetReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
            c.reset(*r);
        }
        for (i, r) in GoawayReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
            c.goaway(*r);
            c.goaway(*r);
        }
        let j = c.to_json();
        assert_eq!(j["resets"]["slow_read"], 1);
        assert_eq!(j["goaways"]["control_flood"], 2);
        let mut reg = Registry::with_prefix("locus_switch");
        c.register_metrics(&mut reg);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
        assert!(text.contains("locus_switch_h2_goaways_total{reason=\"idle\"} 2"), "{text}");
    }
}
