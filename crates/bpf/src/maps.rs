//! The BPF maps' keys and values as `#[repr(C)]` Rust types laid out exactly like the structs of
//! `bpf/forward.c` (a test here and `_Static_assert`s there check sizes and offsets), the map
//! names and capacities, and the byte views used to pass them to the `bpf(2)` map commands.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};

use crate::net::MacAddr;

/// Names of the program and of every map in the object (also the pin file names).
pub(crate) const PROGRAM: &str = "locus_forward";
pub(crate) const CONNS: &str = "conns";
pub(crate) const NODES: &str = "nodes";
pub(crate) const SERVICES: &str = "services";
pub(crate) const SELECTION: &str = "selection";
pub(crate) const CONFIG: &str = "config";
pub(crate) const RR_CURSOR: &str = "rr_cursor";
pub(crate) const STATS: &str = "stats";
pub(crate) const ALL_MAPS: [&str; 7] = [CONNS, NODES, SERVICES, SELECTION, CONFIG, RR_CURSOR, STATS];

/// Default capacity of the connection map (`ForwarderOptions::max_entries`).
pub const DEFAULT_MAX_ENTRIES: u32 = 262_144;
/// Node slots (`set_nodes`).
pub const MAX_NODES: usize = 256;
/// Services (`set_services`).
pub const MAX_SERVICES: usize = 64;
/// Slots of the selection table (`set_selection`).
pub const MAX_SELECTION: usize = 65_536;

pub(crate) const ACTION_HOLD: u8 = 1;
pub(crate) const ACTION_FORWARD: u8 = 2;
/// `ConnEntry::flags`: the entry was created by the program's l4 path at SYN time.
pub const FLAG_L4: u8 = 1;
/// `ConnEntry::flags`: the egress interface is a veth (or netkit) whose peer is in another
/// network namespace; the program hands frames straight to the peer's ingress
/// (`bpf_redirect_peer`) instead of transmitting them.
pub const FLAG_PEER: u8 = 2;
/// `ConnEntry::node` of entries made by user space (handoff): no node slot.
pub const NODE_NONE: u16 = 0xffff;
pub(crate) const SELECT_ROUND_ROBIN: u32 = 0;
pub(crate) const SELECT_HASH: u32 = 1;
/// Counter slots of the per-CPU `stats` array.
pub(crate) const STAT_SLOTS: usize = 8;

/// Plain-old-data: `#[repr(C)]`, no padding, every bit pattern valid, so a value and its bytes
/// can be converted both ways.
///
/// # Safety
/// Implement only for types that satisfy the above.
pub(crate) unsafe trait Plain: Copy + Default {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: Plain types have no padding, so all size_of::<Self>() bytes are initialised.
        unsafe { std::slice::from_raw_parts((self as *const Self).cast::<u8>(), size_of::<Self>()) }
    }

    fn from_bytes(bytes: &[u8]) -> Self {
        assert_eq!(bytes.len(), size_of::<Self>(), "byte length of a map key or value");
        // SAFETY: the length matches and every bit pattern is a valid Self.
        unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<Self>()) }
    }
}

// SAFETY: an integer: no padding, every bit pattern valid.
unsafe impl Plain for u32 {}

/// What the program does with a connection's packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Action {
    /// Drop them (the client retransmits): the connection is being moved to its node.
    Hold = ACTION_HOLD,
    /// Rewrite both MACs and redirect them to the node.
    Forward = ACTION_FORWARD,
}

impl Action {
    /// The action of a raw `ConnEntry::action` byte.
    pub fn from_raw(raw: u8) -> Option<Action> {
        match raw {
            ACTION_HOLD => Some(Action::Hold),
            ACTION_FORWARD => Some(Action::Forward),
            _ => None,
        }
    }
}

/// A connection as the program sees it: the client's packets' 4-tuple, each field in network byte
/// order (C `struct conn_key`, 12 bytes).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct ConnKey {
    saddr: u32,
    daddr: u32,
    sport: u16,
    dport: u16,
}

// SAFETY: repr(C), 4+4+2+2 bytes, no padding.
unsafe impl Plain for ConnKey {}

impl ConnKey {
    /// The key of the packets `client` sends to `server` (the VIP and port it connected to).
    pub fn new(client: SocketAddrV4, server: SocketAddrV4) -> ConnKey {
        ConnKey {
            saddr: u32::from_ne_bytes(client.ip().octets()),
            daddr: u32::from_ne_bytes(server.ip().octets()),
            sport: u16::from_ne_bytes(client.port().to_be_bytes()),
            dport: u16::from_ne_bytes(server.port().to_be_bytes()),
        }
    }

    /// The client's address and port.
    pub fn client(&self) -> SocketAddrV4 {
        SocketAddrV4::new(
            Ipv4Addr::from(self.saddr.to_ne_bytes()),
            u16::from_be_bytes(self.sport.to_ne_bytes()),
        )
    }

    /// The address and port the client connected to (the VIP).
    pub fn server(&self) -> SocketAddrV4 {
        SocketAddrV4::new(
            Ipv4Addr::from(self.daddr.to_ne_bytes()),
            u16::from_be_bytes(self.dport.to_ne_bytes()),
        )
    }

    /// The hash the program uses in hash selection mode (murmur3's finaliser over the key's
    /// words as they sit in memory), so user space can predict which slot a connection takes.
    pub fn flow_hash(&self) -> u32 {
        fn mix(mut h: u32) -> u32 {
            h ^= h >> 16;
            h = h.wrapping_mul(0x85eb_ca6b);
            h ^= h >> 13;
            h = h.wrapping_mul(0xc2b2_ae35);
            h ^= h >> 16;
            h
        }
        let h = mix(self.saddr ^ 0x9e37_79b9);
        let h = mix(h ^ self.daddr);
        mix(h ^ ((u32::from(self.sport) << 16) | u32::from(self.dport)))
    }
}

impl fmt::Display for ConnKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.client(), self.server())
    }
}

impl fmt::Debug for ConnKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConnKey({self})")
    }
}

/// Where a connection's packets go (C `struct conn_entry`, 48 bytes). `last_seen_ns`, `packets`
/// and `bytes` are updated by the program on every matching packet without atomics: good enough
/// for expiry and statistics, not exact under concurrent packets of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ConnEntry {
    /// Destination MAC written on forwarded frames.
    pub node_mac: MacAddr,
    /// Source MAC written on forwarded frames (the switch's egress interface).
    pub switch_mac: MacAddr,
    /// Interface the frames are redirected out of.
    pub ifindex: u32,
    /// Raw action: see [`ConnEntry::action`].
    pub action: u8,
    /// [`FLAG_L4`] and [`FLAG_PEER`] bits.
    pub flags: u8,
    /// Node slot of entries made by the l4 path, [`NODE_NONE`] otherwise.
    pub node: u16,
    /// Unused, zero.
    pub reserved: u32,
    /// `CLOCK_MONOTONIC` time of the last packet that matched (or of the last user-space write).
    pub last_seen_ns: u64,
    /// Frames forwarded.
    pub packets: u64,
    /// Bytes forwarded.
    pub bytes: u64,
}

// SAFETY: repr(C), 6+6+4+1+1+2+4+8+8+8 = 48 bytes at their natural alignment, no padding.
unsafe impl Plain for ConnEntry {}

impl ConnEntry {
    /// The entry's action, `None` for a byte the program does not know (it passes such packets).
    pub fn action(&self) -> Option<Action> {
        Action::from_raw(self.action)
    }

    /// Whether the program's l4 path created it at SYN time.
    pub fn is_l4(&self) -> bool {
        self.flags & FLAG_L4 != 0
    }

    /// Whether the program redirects into the peer of the egress interface.
    pub fn into_peer(&self) -> bool {
        self.flags & FLAG_PEER != 0
    }
}

/// One node slot of the `nodes` array (C `struct node_slot`, 20 bytes); `ifindex` 0 is empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct NodeValue {
    pub mac: MacAddr,
    pub switch_mac: MacAddr,
    pub ifindex: u32,
    /// [`FLAG_PEER`] or 0, copied into the entries the l4 path makes.
    pub flags: u32,
}

// SAFETY: repr(C), 6+6+4+4 bytes, no padding.
unsafe impl Plain for NodeValue {}

/// A service the l4 path directs (C `struct service_key`, 8 bytes, network order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub(crate) struct ServiceKey {
    vip: u32,
    port: u16,
    reserved: u16,
}

// SAFETY: repr(C), 4+2+2 bytes, no padding.
unsafe impl Plain for ServiceKey {}

impl ServiceKey {
    pub fn new(vip: Ipv4Addr, port: u16) -> ServiceKey {
        ServiceKey {
            vip: u32::from_ne_bytes(vip.octets()),
            port: u16::from_ne_bytes(port.to_be_bytes()),
            reserved: 0,
        }
    }
}

/// The single `config` entry (C `struct fwd_config`, 8 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct FwdConfig {
    pub selection_len: u32,
    pub selection_mode: u32,
}

// SAFETY: repr(C), two u32, no padding.
unsafe impl Plain for FwdConfig {}

/// What a map must look like (adopted pinned maps are checked against it).
pub(crate) struct MapShape {
    pub name: &'static str,
    /// `bpf_map_type` number.
    pub kind: u32,
    pub key_size: u32,
    pub value_size: u32,
}

impl MapShape {
    /// (type, key size, value size), as `map_dims` reads them from a map.
    pub fn dims(&self) -> (u32, u32, u32) {
        (self.kind, self.key_size, self.value_size)
    }
}

pub(crate) const MAP_SHAPES: [MapShape; 7] = [
    MapShape { name: CONNS, kind: 1, key_size: 12, value_size: 48 },
    MapShape { name: NODES, kind: 2, key_size: 4, value_size: 20 },
    MapShape { name: SERVICES, kind: 1, key_size: 8, value_size: 4 },
    MapShape { name: SELECTION, kind: 2, key_size: 4, value_size: 4 },
    MapShape { name: CONFIG, kind: 2, key_size: 4, value_size: 8 },
    MapShape { name: RR_CURSOR, kind: 6, key_size: 4, value_size: 4 },
    MapShape { name: STATS, kind: 6, key_size: 4, value_size: 8 },
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn rust_layouts_match_the_c_structs() {
        assert_eq!(size_of::<MacAddr>(), 6);
        assert_eq!(size_of::<ConnKey>(), 12);
        assert_eq!(
            [
                offset_of!(ConnKey, saddr),
                offset_of!(ConnKey, daddr),
                offset_of!(ConnKey, sport),
                offset_of!(ConnKey, dport)
            ],
            [0, 4, 8, 10]
        );
        assert_eq!(size_of::<ConnEntry>(), 48);
        assert_eq!(align_of::<ConnEntry>(), 8);
        assert_eq!(
            [
                offset_of!(ConnEntry, node_mac),
                offset_of!(ConnEntry, switch_mac),
                offset_of!(ConnEntry, ifindex),
                offset_of!(ConnEntry, action),
                offset_of!(ConnEntry, flags),
                offset_of!(ConnEntry, node),
                offset_of!(ConnEntry, reserved),
                offset_of!(ConnEntry, last_seen_ns),
                offset_of!(ConnEntry, packets),
                offset_of!(ConnEntry, bytes),
            ],
            [0, 6, 12, 16, 17, 18, 20, 24, 32, 40]
        );
        assert_eq!(size_of::<NodeValue>(), 20);
        assert_eq!(
            [
                offset_of!(NodeValue, mac),
                offset_of!(NodeValue, switch_mac),
                offset_of!(NodeValue, ifindex),
                offset_of!(NodeValue, flags),
            ],
            [0, 6, 12, 16]
        );
        assert_eq!(size_of::<ServiceKey>(), 8);
        assert_eq!([offset_of!(ServiceKey, vip), offset_of!(ServiceKey, port)], [0, 4]);
        assert_eq!(size_of::<FwdConfig>(), 8);
        for shape in &MAP_SHAPES {
            let (key, value) = match shape.name {
                CONNS => (size_of::<ConnKey>(), size_of::<ConnEntry>()),
                NODES => (4, size_of::<NodeValue>()),
                SERVICES => (size_of::<ServiceKey>(), 4),
                SELECTION | RR_CURSOR => (4, 4),
                CONFIG => (4, size_of::<FwdConfig>()),
                STATS => (4, 8),
                other => panic!("unknown map {other}"),
            };
            assert_eq!((shape.key_size as usize, shape.value_size as usize), (key, value), "{}", shape.name);
        }
    }

    #[test]
    fn conn_key_bytes_are_in_network_order() {
        let key = ConnKey::new("10.0.0.2:40000".parse().unwrap(), "10.0.0.100:80".parse().unwrap());
        assert_eq!(key.as_bytes(), &[10, 0, 0, 2, 10, 0, 0, 100, 0x9c, 0x40, 0, 80]);
        assert_eq!(ConnKey::from_bytes(key.as_bytes()), key);
        assert_eq!(key.to_string(), "10.0.0.2:40000 -> 10.0.0.100:80");
        assert_eq!(
            ServiceKey::new(Ipv4Addr::new(10, 0, 0, 100), 80).as_bytes(),
            &[10, 0, 0, 100, 0, 80, 0, 0]
        );
    }

    #[test]
    fn flow_hash_spreads_neighbouring_ports() {
        let server: SocketAddrV4 = "10.0.0.100:80".parse().unwrap();
        let mut buckets = [0u32; 4];
        for port in 40_000..40_400 {
            let key = ConnKey::new(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), port), server);
            buckets[(key.flow_hash() % 4) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| (60..=140).contains(&n)), "{buckets:?}");
    }

    proptest::proptest! {
        #[test]
        fn conn_key_round_trips_addresses_and_bytes(a: u32, b: u32, p: u16, q: u16) {
            let client = SocketAddrV4::new(Ipv4Addr::from(a), p);
            let server = SocketAddrV4::new(Ipv4Addr::from(b), q);
            let key = ConnKey::new(client, server);
            proptest::prop_assert_eq!(key.client(), client);
            proptest::prop_assert_eq!(key.server(), server);
            proptest::prop_assert_eq!(ConnKey::from_bytes(key.as_bytes()), key);
        }
    }
}
