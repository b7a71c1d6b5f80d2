//! `PeerGate`: whether a request under `/locus/coop/` or `/~dc/` comes from a member of the
//! cluster. With the peer key: by its `X-Locus-Peer-Auth` signature — made under the key, for
//! this node, by a member, within the clock-skew window, its nonce not seen before — from
//! whatever address it comes. Without a key: by its source address among the members'
//! (the check of old, kept for clusters without a key; the node warns at start). Refusals are
//! counted by reason, answered 403 with `X-Locus-Peer-Refused: <reason>` (so the requester
//! tells them from the home's own answers), and logged at most once a minute. A reload gives
//! the gate a new key, members or addresses in place (`reconfigure`, `rekey`): its counters go
//! on, and so do the nonces seen, while it checks signatures.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use locus_http::RequestHead;
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::key::PeerKey;
use super::mac::{AUTH_HEADER, Invalid, MAX_SKEW_MS, Signature, SignedRequest};
use super::replay::{ReplayGuard, Unfresh};

/// The response header that says why a peer request was refused.
pub const REFUSED_HEADER: &str = "X-Locus-Peer-Refused";
/// Nonces one generation of the replay guard holds (about 50,000 signed requests a second).
const REPLAY_CAPACITY: usize = 1 << 20;
/// Refusals are logged at most this often.
const WARN_EVERY_MS: u64 = 60_000;

/// Why a peer request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No key: the source address is no member's.
    Stranger,
    /// A key: the request carries no signature.
    Unsigned,
    /// A signature that cannot be read.
    Malformed,
    /// A signature not made under this key for this request (another key, or altered).
    BadMac,
    /// A genuine signature made too far from this node's clock (clocks out of step).
    Stale,
    /// A genuine signature seen before: a replay.
    Replayed,
    /// A genuine signature by an identity that is no member's.
    UnknownSender,
    /// More signed requests than the replay guard holds.
    Busy,
}

impl Refusal {
    pub const ALL: [Refusal; 8] = [
        Refusal::Stranger,
        Refusal::Unsigned,
        Refusal::Malformed,
        Refusal::BadMac,
        Refusal::Stale,
        Refusal::Replayed,
        Refusal::UnknownSender,
        Refusal::Busy,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Refusal::Stranger => "stranger",
            Refusal::Unsigned => "unsigned",
            Refusal::Malformed => "malformed",
            Refusal::BadMac => "bad_mac",
            Refusal::Stale => "stale",
            Refusal::Replayed => "replayed",
            Refusal::UnknownSender => "unknown_sender",
            Refusal::Busy => "busy",
        }
    }

    /// The header line a refusal's 403 carries.
    pub fn header_line(self) -> String {
        format!("{REFUSED_HEADER}: {}\r\n", self.label())
    }
}

/// The signature check under the peer key (boxed: the keyed MAC is a few hundred bytes).
struct KeyCheck {
    key: Box<PeerKey>,
    seen: Mutex<ReplayGuard>,
}

/// Who the members are and how they are told from strangers.
struct Rules {
    /// By the signature under the peer key; `None`: by the source address (no key configured).
    key: Option<KeyCheck>,
    /// The members' addresses, checked without a key.
    allowed: Vec<IpAddr>,
    /// This node's authority as the members spell it (what signatures must be made for).
    authority: String,
    /// The other members' identities (coop: `host:port`; DC: names).
    members: Vec<String>,
}

/// The check of one node's incoming peer requests; see the module documentation.
pub struct PeerGate {
    rules: RwLock<Rules>,
    accepted: AtomicU64,
    refused: [AtomicU64; 8],
    last_warning_ms: AtomicU64,
}

/// Wall-clock ms since the epoch (signatures carry the sender's; both sides' clocks are
/// assumed to be kept in step, as by NTP).
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl PeerGate {
    /// A gate for the node reached at `authority` whose other members are `members`; with
    /// `key` it checks signatures, else source addresses among `allowed_ips`.
    pub fn new(
        key: Option<PeerKey>,
        authority: String,
        members: Vec<String>,
        allowed_ips: Vec<IpAddr>,
    ) -> PeerGate {
        let key = key.map(|key| KeyCheck { key: Box::new(key), seen: Mutex::new(new_replay_guard()) });
        PeerGate {
            rules: RwLock::new(Rules { key, allowed: allowed_ips, authority, members }),
            accepted: AtomicU64::new(0),
            refused: Default::default(),
            last_warning_ms: AtomicU64::new(0),
        }
    }

    /// Check from now on as `new` would (a reloaded configuration). The counters go on; so
    /// do the nonces seen when the gate checked signatures before and does now (a nonce seen
    /// under the old key is still refused if it comes again).
    pub fn reconfigure(
        &self,
        key: Option<PeerKey>,
        authority: String,
        members: Vec<String>,
        allowed_ips: Vec<IpAddr>,
    ) {
        let mut rules = self.rules.write();
        let seen = match rules.key.take() {
            Some(old) => old.seen,
            None => Mutex::new(new_replay_guard()),
        };
        let key = key.map(|key| KeyCheck { key: Box::new(key), seen });
        *rules = Rules { key, allowed: allowed_ips, authority, members };
    }

    /// `reconfigure` with only the key changed (`None`: by address from now on).
    pub fn rekey(&self, key: Option<PeerKey>) {
        let (authority, members, allowed) = {
            let rules = self.rules.read();
            (rules.authority.clone(), rules.members.clone(), rules.allowed.clone())
        };
        self.reconfigure(key, authority, members, allowed);
    }

    /// Whether requests are told by the peer key (else by address).
    pub fn keyed(&self) -> bool {
        self.rules.read().key.is_some()
    }

    /// Admit the request `head` (in `buf`) from `ip`, now; refusals are counted and logged.
    pub fn admit(&self, ip: IpAddr, head: &RequestHead, buf: &[u8]) -> Result<(), Refusal> {
        let authority = self.rules.read().authority.clone();
        let request =
            SignedRequest { method: head.method_str(buf), target: head.target_str(buf), to: &authority };
        let now = unix_ms();
        let outcome = self.admit_at(ip, request, head.header(buf, AUTH_HEADER), now);
        match outcome {
            Ok(()) => {
                self.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                self.refused[why as usize].fetch_add(1, Ordering::Relaxed);
                self.warn(why, ip, now);
            }
        }
        outcome
    }

    /// `admit` with everything given: `auth` is the `X-Locus-Peer-Auth` value, if any.
    pub fn admit_at(
        &self,
        ip: IpAddr,
        request: SignedRequest<'_>,
        auth: Option<&[u8]>,
        now_ms: u64,
    ) -> Result<(), Refusal> {
        let rules = self.rules.read();
        let Some(KeyCheck { key, seen }) = &rules.key else {
            return if rules.allowed.contains(&canonical(ip)) { Ok(()) } else { Err(Refusal::Stranger) };
        };
        let auth = auth.ok_or(Refusal::Unsigned)?;
        let signature = Signature::parse(auth).map_err(|_| Refusal::Malformed)?;
        signature.verify(key, request, now_ms).map_err(|e| match e {
            Invalid::Malformed => Refusal::Malformed,
            Invalid::BadMac => Refusal::BadMac,
            Invalid::Stale => Refusal::Stale,
        })?;
        if !rules.members.contains(&signature.from) {
            return Err(Refusal::UnknownSender);
        }
        seen.lock().take(signature.nonce, now_ms).map_err(|e| match e {
            Unfresh::Replayed => Refusal::Replayed,
            Unfresh::Full => Refusal::Busy,
        })
    }

    /// One log line about a refusal, at most every `WARN_EVERY_MS` (strangers can send many).
    fn warn(&self, why: Refusal, ip: IpAddr, now_ms: u64) {
        let last = self.last_warning_ms.load(Ordering::Relaxed);
        if now_ms < last.saturating_add(WARN_EVERY_MS)
            || self
                .last_warning_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let hint = match why {
            Refusal::Stranger => {
                "no member has this address; with nodes on several addresses, set peer_key_file"
            }
            Refusal::Unsigned => "the sender has no peer key (every member needs the same peer_key_file)",
            Refusal::BadMac => "not signed with this node's peer key (do the members' keys differ?)",
            Refusal::Stale => {
                "the sender's clock is more than 10 s from this node's (keep clocks in step, e.g. NTP)"
            }
            Refusal::UnknownSender => "the sender is not in this node's member list",
            Refusal::Replayed => "a request seen before was sent again",
            Refusal::Malformed | Refusal::Busy => "",
        };
        tracing::warn!(%ip, reason = why.label(), "refused a peer request: {hint} (logged at most once a minute; counts in /locus/status peer_auth)");
    }

    /// The `peer_auth` object of `/locus/status`.
    pub fn status_json(&self) -> serde_json::Value {
        let refused: serde_json::Map<String, serde_json::Value> = Refusal::ALL
            .iter()
            .map(|&r| (r.label().to_string(), self.refused[r as usize].load(Ordering::Relaxed).into()))
            .collect();
        let nonces_held = self.rules.read().key.as_ref().map_or(0, |k| k.seen.lock().len());
        serde_json::json!({
            "by": if self.keyed() { "key" } else { "address" },
            "accepted": self.accepted.load(Ordering::Relaxed),
            "refused": refused,
            "nonces_held": nonces_held,
        })
    }

    /// Register `peer_auth_accepted` and `peer_auth_refused{reason}`.
    pub fn register(&self, registry: &mut Registry) {
        let accepted: Counter = Counter::default();
        accepted.inc_by(self.accepted.load(Ordering::Relaxed));
        registry.register("peer_auth_accepted", "Peer requests admitted (by key or address)", accepted);
        let refused = Family::<Vec<(String, String)>, Counter>::default();
        for r in Refusal::ALL {
            let n = self.refused[r as usize].load(Ordering::Relaxed);
            refused.get_or_create(&vec![("reason".to_string(), r.label().to_string())]).inc_by(n);
        }
        registry.register("peer_auth_refused", "Peer requests refused (403), by reason", refused);
    }
}

fn new_replay_guard() -> ReplayGuard {
    ReplayGuard::new(MAX_SKEW_MS, REPLAY_CAPACITY)
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer_link::mac::sign;

    const NOW: u64 = 1_790_000_000_000;
    const TARGET: &str = "/~dc/fetch/a.gif";

    fn gate(key: Option<u8>) -> PeerGate {
        let key = key.map(|b| PeerKey::new(&[b; 32]).unwrap());
        let ips = vec!["127.0.0.2".parse().unwrap()];
        PeerGate::new(key, "127.0.0.3:80".into(), vec!["s0".into()], ips)
    }

    fn request(to: &str) -> SignedRequest<'_> {
        SignedRequest { method: "GET", target: TARGET, to }
    }

    fn signed(key: u8, from: &str, to: &str, time: u64, nonce: u128) -> String {
        sign(&PeerKey::new(&[key; 32]).unwrap(), request(to), from, time, nonce)
    }

    fn admit(g: &PeerGate, ip: &str, auth: Option<&str>) -> Result<(), Refusal> {
        g.admit_at(ip.parse().unwrap(), request("127.0.0.3:80"), auth.map(str::as_bytes), NOW)
    }

    #[test]
    fn without_a_key_members_are_told_by_their_source_address_alone() {
        let g = gate(None);
        assert_eq!(admit(&g, "127.0.0.2", None), Ok(()));
        assert_eq!(admit(&g, "::ffff:127.0.0.2", None), Ok(()));
        assert_eq!(
            admit(&g, "127.0.0.1", Some(&signed(1, "s0", "127.0.0.3:80", NOW, 1))),
            Err(Refusal::Stranger)
        );
    }

    #[test]
    fn with_a_key_a_signed_request_is_admitted_from_any_address_once() {
        let g = gate(Some(1));
        let auth = signed(1, "s0", "127.0.0.3:80", NOW, 1);
        assert_eq!(admit(&g, "10.9.9.9", Some(&auth)), Ok(()));
        assert_eq!(admit(&g, "127.0.0.2", Some(&auth)), Err(Refusal::Replayed));
    }

    #[test]
    fn a_reconfigured_gate_checks_the_new_way_and_remembers_the_nonces_seen() {
        let g = gate(Some(1));
        let auth = signed(1, "s0", "127.0.0.3:80", NOW, 1);
        assert_eq!(admit(&g, "10.9.9.9", Some(&auth)), Ok(()));
        g.rekey(Some(PeerKey::new(&[2; 32]).unwrap()));
        assert_eq!(admit(&g, "10.9.9.9", Some(&auth)), Err(Refusal::BadMac), "the old key no longer signs");
        let auth2 = signed(2, "s0", "127.0.0.3:80", NOW, 1);
        assert_eq!(admit(&g, "10.9.9.9", Some(&auth2)), Err(Refusal::Replayed), "nonces seen are kept");
        g.rekey(None);
        assert!(!g.keyed());
        assert_eq!(admit(&g, "127.0.0.2", None), Ok(()), "by address, the addresses kept");
        g.reconfigure(None, "127.0.0.3:80".into(), vec![], vec!["127.0.0.9".parse().unwrap()]);
        assert_eq!(admit(&g, "127.0.0.2", None), Err(Refusal::Stranger));
        assert_eq!(admit(&g, "127.0.0.9", None), Ok(()));
        g.reconfigure(
            Some(PeerKey::new(&[1; 32]).unwrap()),
            "127.0.0.4:80".into(),
            vec!["s1".into()],
            vec![],
        );
        let for_new_authority = signed(1, "s1", "127.0.0.4:80", NOW, 7);
        assert_eq!(admit_to(&g, "127.0.0.4:80", &for_new_authority), Ok(()));
    }

    fn admit_to(g: &PeerGate, to: &str, auth: &str) -> Result<(), Refusal> {
        g.admit_at("10.0.0.1".parse().unwrap(), request(to), Some(auth.as_bytes()), NOW)
    }

    #[test]
    fn with_a_key_unsigned_foreign_misdirected_stale_and_unknown_requests_are_refused() {
        let g = gate(Some(1));
        assert_eq!(admit(&g, "127.0.0.2", None), Err(Refusal::Unsigned), "a member's address is not enough");
        assert_eq!(admit(&g, "127.0.0.2", Some("v1 s0 1")), Err(Refusal::Malformed));
        assert_eq!(
            admit(&g, "127.0.0.2", Some(&signed(2, "s0", "127.0.0.3:80", NOW, 2))),
            Err(Refusal::BadMac)
        );
        let elsewhere = signed(1, "s0", "127.0.0.4:80", NOW, 3);
        assert_eq!(admit(&g, "127.0.0.2", Some(&elsewhere)), Err(Refusal::BadMac), "made for another node");
        let old = signed(1, "s0", "127.0.0.3:80", NOW - MAX_SKEW_MS - 1, 4);
        assert_eq!(admit(&g, "127.0.0.2", Some(&old)), Err(Refusal::Stale));
        let stranger = signed(1, "s9", "127.0.0.3:80", NOW, 5);
        assert_eq!(admit(&g, "127.0.0.2", Some(&stranger)), Err(Refusal::UnknownSender));
    }
}
