//! `HandoffMessage`: what the switch and the nodes tell each other about handed-off
//! connections, and its binary encoding (kind u8, connection id u64 LE, then the fields:
//! strings as u16 LE length + UTF-8, states as `TcpRepairState`'s own encoding, a TLS
//! session as `tls_state` encodes it).

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use locus_core::NodeId;
use locus_tls::SessionExport;
use serde::{Deserialize, Serialize};

use super::tls_state::{get_tls, put_tls, tls_len};
use crate::error::DecodeError;
use crate::repair_state::{TcpRepairState, WireReader};

/// The switch's name for one client connection, stable across handoffs of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ConnectionId(pub u64);

impl ConnectionId {
    /// The id of the client connection `client` → the service on port `service_port`:
    /// `client ip << 32 | client port << 16 | service port`. Derived from the 4-tuple (the
    /// virtual IP is fixed per switch), so any switch process, also one restarted since the
    /// handoff, and any node can name the connection and find its forwarding entry from it.
    pub fn from_tuple(client: SocketAddrV4, service_port: u16) -> ConnectionId {
        ConnectionId(
            u64::from(u32::from(*client.ip())) << 32
                | u64::from(client.port()) << 16
                | u64::from(service_port),
        )
    }

    /// The client's address of an id made by [`ConnectionId::from_tuple`].
    pub fn client(&self) -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::from((self.0 >> 32) as u32), (self.0 >> 16) as u16)
    }

    /// The service port of an id made by [`ConnectionId::from_tuple`].
    pub fn service_port(&self) -> u16 {
        self.0 as u16
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn{}", self.0)
    }
}

/// What the switch tells a node about the request that made it pick that node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffHint {
    /// The request target (URI) the decision was made on; may be empty.
    pub target: String,
    /// Bytes at the front of the receive queue that the sender had already read (the
    /// request it parsed). Advisory: a receiver must not trust it beyond the queue's length.
    pub request_len: u32,
}

/// A control message. Every message names the connection it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandoffMessage {
    /// Switch → node: take over this connection (dumped, request put back in front).
    HandOver {
        /// The connection.
        id: ConnectionId,
        /// Its dumped state.
        state: TcpRepairState,
        /// What the request was.
        hint: HandoffHint,
        /// The connection's TLS session, when the switch terminated it (one-way HTTPS): the
        /// node continues it; the request is in its plaintext, not in the receive queue.
        tls: Option<Box<SessionExport>>,
    },
    /// Node → switch: restored; waiting for `Go` before writing.
    Ready {
        /// The connection.
        id: ConnectionId,
    },
    /// Node → switch: could not take the connection (the switch then restores it itself).
    Refused {
        /// The connection.
        id: ConnectionId,
        /// Why (for logs; at most 65,535 bytes).
        reason: String,
    },
    /// Switch → node: the forwarder now delivers the client's packets to you; write.
    Go {
        /// The connection.
        id: ConnectionId,
    },
    /// Node → switch: the client connection ended; delete its forwarding entry.
    Closed {
        /// The connection.
        id: ConnectionId,
    },
    /// Node → switch: which node serves this next request on the connection?
    Route {
        /// The connection.
        id: ConnectionId,
        /// The next request's target.
        target: String,
        /// Whether the asking node hands the connection on (`Rehandoff`) if the answer is
        /// another node — the switch then holds its packets — or keeps it and fetches the
        /// response from that node (back-end forwarding).
        moves: bool,
    },
    /// Switch → node: this node serves it (if it is another one, hand the connection back
    /// with `Rehandoff`).
    RouteTo {
        /// The connection.
        id: ConnectionId,
        /// The node.
        node: NodeId,
    },
    /// Switch → node, first on every new channel: "you are `node`", and the nodes of the
    /// cluster with their HTTP addresses (for back-end forwarding). Its connection id is 0.
    Hello {
        /// Always `ConnectionId(0)`.
        id: ConnectionId,
        /// The receiving node's id in the switch's policy.
        node: NodeId,
        /// Every node's id and HTTP address (at most 65,535).
        peers: Vec<(NodeId, SocketAddr)>,
    },
    /// Node → switch: here is the live connection back (dumped, with the next request put
    /// back in front), to hand on to another node.
    Rehandoff {
        /// The connection.
        id: ConnectionId,
        /// Its dumped state.
        state: TcpRepairState,
        /// Its TLS session (the next request in its plaintext), when it has one.
        tls: Option<Box<SessionExport>>,
    },
}

const KIND_HAND_OVER: u8 = 1;
const KIND_READY: u8 = 2;
const KIND_REFUSED: u8 = 3;
const KIND_GO: u8 = 4;
const KIND_CLOSED: u8 = 5;
const KIND_ROUTE: u8 = 6;
const KIND_ROUTE_TO: u8 = 7;
const KIND_REHANDOFF: u8 = 8;
const KIND_HELLO: u8 = 9;

impl HandoffMessage {
    /// The connection the message is about.
    pub fn id(&self) -> ConnectionId {
        match self {
            HandoffMessage::HandOver { id, .. }
            | HandoffMessage::Ready { id }
            | HandoffMessage::Refused { id, .. }
            | HandoffMessage::Go { id }
            | HandoffMessage::Closed { id }
            | HandoffMessage::Route { id, .. }
            | HandoffMessage::RouteTo { id, .. }
            | HandoffMessage::Rehandoff { id, .. }
            | HandoffMessage::Hello { id, .. } => *id,
        }
    }

    /// The message's name, for logs and errors.
    pub fn kind_name(&self) -> &'static str {
        match self {
            HandoffMessage::HandOver { .. } => "HandOver",
            HandoffMessage::Ready { .. } => "Ready",
            HandoffMessage::Refused { .. } => "Refused",
            HandoffMessage::Go { .. } => "Go",
            HandoffMessage::Closed { .. } => "Closed",
            HandoffMessage::Route { .. } => "Route",
            HandoffMessage::RouteTo { .. } => "RouteTo",
            HandoffMessage::Rehandoff { .. } => "Rehandoff",
            HandoffMessage::Hello { .. } => "Hello",
        }
    }

    /// Length of the encoding.
    pub fn encoded_len(&self) -> usize {
        9 + match self {
            HandoffMessage::HandOver { state, hint, tls, .. } => {
                state.encoded_len() + 2 + short(&hint.target).len() + 4 + tls_len(tls.as_deref())
            }
            HandoffMessage::Refused { reason: text, .. } => 2 + short(text).len(),
            HandoffMessage::Route { target, .. } => 2 + short(target).len() + 1,
            HandoffMessage::RouteTo { .. } => 4,
            HandoffMessage::Rehandoff { state, tls, .. } => state.encoded_len() + tls_len(tls.as_deref()),
            HandoffMessage::Hello { peers, .. } => {
                4 + 2 + peers.iter().take(usize::from(u16::MAX)).map(|(_, a)| 4 + peer_len(a)).sum::<usize>()
            }
            HandoffMessage::Ready { .. } | HandoffMessage::Go { .. } | HandoffMessage::Closed { .. } => 0,
        }
    }

    /// Append the encoding to `out`. Strings longer than 65,535 bytes are cut (at a
    /// character boundary).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        let kind = match self {
            HandoffMessage::HandOver { .. } => KIND_HAND_OVER,
            HandoffMessage::Ready { .. } => KIND_READY,
            HandoffMessage::Refused { .. } => KIND_REFUSED,
            HandoffMessage::Go { .. } => KIND_GO,
            HandoffMessage::Closed { .. } => KIND_CLOSED,
            HandoffMessage::Route { .. } => KIND_ROUTE,
            HandoffMessage::RouteTo { .. } => KIND_ROUTE_TO,
            HandoffMessage::Rehandoff { .. } => KIND_REHANDOFF,
            HandoffMessage::Hello { .. } => KIND_HELLO,
        };
        out.push(kind);
        out.extend_from_slice(&self.id().0.to_le_bytes());
        match self {
            HandoffMessage::HandOver { state, hint, tls, .. } => {
                state.encode_into(out);
                put_string(out, &hint.target);
                out.extend_from_slice(&hint.request_len.to_le_bytes());
                put_tls(out, tls.as_deref());
            }
            HandoffMessage::Refused { reason: text, .. } => put_string(out, text),
            HandoffMessage::Route { target, moves, .. } => {
                put_string(out, target);
                out.push(u8::from(*moves));
            }
            HandoffMessage::RouteTo { node, .. } => out.extend_from_slice(&node.0.to_le_bytes()),
            HandoffMessage::Rehandoff { state, tls, .. } => {
                state.encode_into(out);
                put_tls(out, tls.as_deref());
            }
            HandoffMessage::Hello { node, peers, .. } => {
                out.extend_from_slice(&node.0.to_le_bytes());
                let peers = &peers[..peers.len().min(usize::from(u16::MAX))];
                out.extend_from_slice(&(peers.len() as u16).to_le_bytes());
                for (id, addr) in peers {
                    out.extend_from_slice(&id.0.to_le_bytes());
                    put_peer(out, addr);
                }
            }
            HandoffMessage::Ready { .. } | HandoffMessage::Go { .. } | HandoffMessage::Closed { .. } => {}
        }
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// Decode a message that fills `input` exactly.
    pub fn decode(input: &[u8]) -> Result<HandoffMessage, DecodeError> {
        let mut r = WireReader::new(input);
        let kind = r.u8("message kind")?;
        let id = ConnectionId(r.u64("connection id")?);
        let message = match kind {
            KIND_HAND_OVER => {
                let (state, used) = TcpRepairState::decode_prefix(r.rest())?;
                r.bytes(used, "repair state")?;
                let target = get_string(&mut r, "hint target")?;
                let request_len = r.u32("hint request length")?;
                let tls = get_tls(&mut r)?;
                HandoffMessage::HandOver { id, state, hint: HandoffHint { target, request_len }, tls }
            }
            KIND_READY => HandoffMessage::Ready { id },
            KIND_REFUSED => HandoffMessage::Refused { id, reason: get_string(&mut r, "refusal reason")? },
            KIND_GO => HandoffMessage::Go { id },
            KIND_CLOSED => HandoffMessage::Closed { id },
            KIND_ROUTE => {
                let target = get_string(&mut r, "route target")?;
                let moves = match r.u8("route moves flag")? {
                    0 => false,
                    1 => true,
                    _ => return Err(DecodeError::Invalid("route moves flag")),
                };
                HandoffMessage::Route { id, target, moves }
            }
            KIND_ROUTE_TO => HandoffMessage::RouteTo { id, node: NodeId(r.u32("node id")?) },
            KIND_REHANDOFF => {
                let (state, used) = TcpRepairState::decode_prefix(r.rest())?;
                r.bytes(used, "repair state")?;
                let tls = get_tls(&mut r)?;
                HandoffMessage::Rehandoff { id, state, tls }
            }
            KIND_HELLO => {
                let node = NodeId(r.u32("hello node id")?);
                let count = r.u16("hello peer count")?;
                let mut peers = Vec::with_capacity(usize::from(count).min(r.rest().len() / 11));
                for _ in 0..count {
                    let id = NodeId(r.u32("peer id")?);
                    peers.push((id, get_peer(&mut r)?));
                }
                HandoffMessage::Hello { id, node, peers }
            }
            other => return Err(DecodeError::UnknownKind(other)),
        };
        match r.rest().len() {
            0 => Ok(message),
            extra => Err(DecodeError::Trailing(extra)),
        }
    }
}

/// `text` cut to at most 65,535 bytes at a character boundary.
fn short(text: &str) -> &str {
    if text.len() <= usize::from(u16::MAX) {
        return text;
    }
    let mut end = usize::from(u16::MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A socket address: family byte (4 or 6), address, port u16 LE.
fn peer_len(addr: &SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(_) => 1 + 4 + 2,
        SocketAddr::V6(_) => 1 + 16 + 2,
    }
}

fn put_peer(out: &mut Vec<u8>, addr: &SocketAddr) {
    match addr {
        SocketAddr::V4(a) => {
            out.push(4);
            out.extend_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            out.push(6);
            out.extend_from_slice(&a.ip().octets());
        }
    }
    out.extend_from_slice(&addr.port().to_le_bytes());
}

fn get_peer(r: &mut WireReader<'_>) -> Result<SocketAddr, DecodeError> {
    let ip: std::net::IpAddr = match r.u8("peer family")? {
        4 => <[u8; 4]>::try_from(r.bytes(4, "peer address")?).map(Ipv4Addr::from).expect("4 bytes").into(),
        6 => <[u8; 16]>::try_from(r.bytes(16, "peer address")?)
            .map(std::net::Ipv6Addr::from)
            .expect("16 bytes")
            .into(),
        _ => return Err(DecodeError::Invalid("peer family")),
    };
    Ok(SocketAddr::new(ip, r.u16("peer port")?))
}

fn put_string(out: &mut Vec<u8>, text: &str) {
    let text = short(text);
    out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

fn get_string(r: &mut WireReader<'_>, what: &'static str) -> Result<String, DecodeError> {
    let len = usize::from(r.u16(what)?);
    let bytes = r.bytes(len, what)?;
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Invalid(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tuple_id_gives_back_its_client_and_service_port() {
        let client: SocketAddrV4 = "10.253.0.2:51234".parse().unwrap();
        let id = ConnectionId::from_tuple(client, 80);
        assert_eq!(id.client(), client);
        assert_eq!(id.service_port(), 80);
        assert_ne!(id, ConnectionId::from_tuple(client, 81));
    }

    #[test]
    fn long_strings_are_cut_at_a_character_boundary() {
        let reason = "é".repeat(40_000);
        let m = HandoffMessage::Refused { id: ConnectionId(1), reason };
        let bytes = m.encode();
        assert_eq!(bytes.len(), m.encoded_len());
        let HandoffMessage::Refused { reason, .. } = HandoffMessage::decode(&bytes).unwrap() else {
            panic!()
        };
        assert_eq!(reason.len(), 65_534);
    }

    fn state() -> TcpRepairState {
        TcpRepairState {
            local: "127.0.0.1:80".parse().unwrap(),
            peer: "127.0.0.1:4000".parse().unwrap(),
            recv_seq: 1,
            send_seq: 2,
            recv_queue: Vec::new(),
            send_queue: Vec::new(),
            unsent_len: 0,
            mss: 1,
            window_scaling: false,
            snd_wscale: 0,
            rcv_wscale: 0,
            sack_permitted: false,
            timestamps: false,
            timestamp: 0,
            window: Default::default(),
        }
    }

    #[test]
    fn every_kind_has_its_own_byte() {
        let id = ConnectionId(7);
        let kinds: Vec<u8> = [
            HandoffMessage::HandOver { id, state: state(), hint: HandoffHint::default(), tls: None },
            HandoffMessage::HandOver { id, state: state(), hint: HandoffHint::default(), tls: Some(tls()) },
            HandoffMessage::Ready { id },
            HandoffMessage::Refused { id, reason: String::new() },
            HandoffMessage::Go { id },
            HandoffMessage::Closed { id },
            HandoffMessage::Route { id, target: "/".into(), moves: true },
            HandoffMessage::RouteTo { id, node: NodeId(2) },
            HandoffMessage::Rehandoff { id, state: state(), tls: None },
            HandoffMessage::Rehandoff { id, state: state(), tls: Some(tls()) },
            HandoffMessage::Hello {
                id: ConnectionId(0),
                node: NodeId(1),
                peers: vec![
                    (NodeId(0), "10.0.0.1:80".parse().unwrap()),
                    (NodeId(1), "[::1]:8080".parse().unwrap()),
                ],
            },
        ]
        .iter()
        .map(|m| {
            let bytes = m.encode();
            assert_eq!(bytes.len(), m.encoded_len(), "{}", m.kind_name());
            assert_eq!(&HandoffMessage::decode(&bytes).unwrap(), m);
            bytes[0]
        })
        .collect();
        assert_eq!(kinds, vec![1, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9]);
    }

    fn tls() -> Box<SessionExport> {
        Box::new(SessionExport {
            suite: locus_tls::Suite::Aes256GcmSha384,
            tx_secret: vec![1u8; 48].into(),
            tx_seq: 3,
            rx_secret: vec![2u8; 48].into(),
            rx_seq: 1,
            plaintext: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            undecrypted: vec![23, 3, 3, 0],
        })
    }

    #[test]
    fn a_tls_session_with_an_impossible_field_does_not_decode() {
        let id = ConnectionId(7);
        let good = HandoffMessage::Rehandoff { id, state: state(), tls: Some(tls()) }.encode();
        let at = good.len() - tls_len(Some(&tls()));
        let mut unknown_suite = good.clone();
        unknown_suite[at + 1] = 0x05;
        assert!(matches!(HandoffMessage::decode(&unknown_suite), Err(DecodeError::Invalid("tls suite"))));
        let mut long_secret = good.clone();
        long_secret[at + 3] = 49;
        assert!(HandoffMessage::decode(&long_secret).is_err());
        assert!(HandoffMessage::decode(&good[..good.len() - 1]).is_err(), "truncated");
    }
}
