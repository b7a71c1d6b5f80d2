//! Property tests of the wire encodings of `TcpRepairState` and `HandoffMessage` (with or
//! without a TLS session): everything
//! round-trips; decoding accepts only canonical encodings; truncated, extended and garbled
//! input is an error (or another canonical message), never a panic.

use std::net::{Ipv4Addr, SocketAddrV4};

use locus_core::NodeId;
use locus_handoff::{
    ConnectionId, DecodeError, HandoffHint, HandoffMessage, STATE_HEADER_LEN, TcpRepairState, TcpRepairWindow,
};
use locus_tls::{SessionExport, Suite};
use proptest::prelude::*;

fn addr() -> impl Strategy<Value = SocketAddrV4> {
    (any::<u32>(), any::<u16>()).prop_map(|(ip, port)| SocketAddrV4::new(Ipv4Addr::from(ip), port))
}

fn repair_state() -> impl Strategy<Value = TcpRepairState> {
    (
        (addr(), addr(), any::<u32>(), any::<u32>()),
        (proptest::collection::vec(any::<u8>(), 0..300), proptest::collection::vec(any::<u8>(), 0..300)),
        (any::<prop::sample::Index>(), 1..=u16::MAX, any::<bool>(), 0u8..=14, 0u8..=14),
        (any::<bool>(), any::<bool>(), any::<u32>(), any::<[u32; 5]>()),
    )
        .prop_map(|((local, peer, recv_seq, send_seq), (recv_queue, send_queue), opts, more)| {
            let (unsent, mss, window_scaling, snd_wscale, rcv_wscale) = opts;
            let (sack_permitted, timestamps, timestamp, w) = more;
            let unsent_len = unsent.index(send_queue.len() + 1) as u32;
            TcpRepairState {
                local,
                peer,
                recv_seq,
                send_seq,
                recv_queue,
                send_queue,
                unsent_len,
                mss,
                window_scaling,
                snd_wscale,
                rcv_wscale,
                sack_permitted,
                timestamps,
                timestamp,
                window: TcpRepairWindow {
                    snd_wl1: w[0],
                    snd_wnd: w[1],
                    max_window: w[2],
                    rcv_wnd: w[3],
                    rcv_wup: w[4],
                },
            }
        })
}

fn tls_session() -> impl Strategy<Value = Option<Box<SessionExport>>> {
    let secret = || proptest::collection::vec(any::<u8>(), 1..=48);
    let bytes = |n| proptest::collection::vec(any::<u8>(), 0..n);
    let suite = prop_oneof![
        Just(Suite::Aes128GcmSha256),
        Just(Suite::Aes256GcmSha384),
        Just(Suite::Chacha20Poly1305Sha256)
    ];
    proptest::option::of(
        (suite, secret(), any::<u64>(), secret(), any::<u64>(), bytes(100), bytes(40)).prop_map(
            |(suite, tx, tx_seq, rx, rx_seq, plaintext, undecrypted)| {
                Box::new(SessionExport {
                    suite,
                    tx_secret: tx.into(),
                    tx_seq,
                    rx_secret: rx.into(),
                    rx_seq,
                    plaintext,
                    undecrypted,
                })
            },
        ),
    )
}

fn message() -> impl Strategy<Value = HandoffMessage> {
    let id = any::<u64>().prop_map(ConnectionId);
    prop_oneof![
        (id.clone(), repair_state(), ".{0,40}", any::<u32>(), tls_session()).prop_map(
            |(id, state, target, request_len, tls)| {
                HandoffMessage::HandOver { id, state, hint: HandoffHint { target, request_len }, tls }
            }
        ),
        id.clone().prop_map(|id| HandoffMessage::Ready { id }),
        (id.clone(), ".{0,80}").prop_map(|(id, reason)| HandoffMessage::Refused { id, reason }),
        id.clone().prop_map(|id| HandoffMessage::Go { id }),
        id.clone().prop_map(|id| HandoffMessage::Closed { id }),
        (id.clone(), ".{0,80}", any::<bool>()).prop_map(|(id, target, moves)| HandoffMessage::Route {
            id,
            target,
            moves
        }),
        (id.clone(), any::<u32>()).prop_map(|(id, node)| HandoffMessage::RouteTo { id, node: NodeId(node) }),
        (id, repair_state(), tls_session()).prop_map(|(id, state, tls)| HandoffMessage::Rehandoff {
            id,
            state,
            tls
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn repair_states_round_trip(state in repair_state()) {
        let bytes = state.encode();
        prop_assert_eq!(bytes.len(), state.encoded_len());
        prop_assert_eq!(bytes.len(), STATE_HEADER_LEN + state.recv_queue.len() + state.send_queue.len());
        prop_assert_eq!(TcpRepairState::decode(&bytes).unwrap(), state);
    }

    #[test]
    fn messages_round_trip(m in message()) {
        let bytes = m.encode();
        prop_assert_eq!(bytes.len(), m.encoded_len());
        prop_assert_eq!(HandoffMessage::decode(&bytes).unwrap(), m);
    }

    #[test]
    fn every_truncation_of_a_message_is_an_error(m in message(), cut in any::<prop::sample::Index>()) {
        let bytes = m.encode();
        let cut = cut.index(bytes.len());
        prop_assert!(HandoffMessage::decode(&bytes[..cut]).is_err());
    }

    #[test]
    fn a_message_with_bytes_after_it_is_an_error(m in message(), extra in proptest::collection::vec(any::<u8>(), 1..20)) {
        let mut bytes = m.encode();
        let n = extra.len();
        bytes.extend_from_slice(&extra);
        // Every message ends with a fixed field or a length-delimited one, so the extra
        // bytes are trailing (a string's last byte can't absorb them: its length is fixed).
        prop_assert_eq!(HandoffMessage::decode(&bytes).unwrap_err(), DecodeError::Trailing(n));
    }

    #[test]
    fn garbled_messages_decode_to_errors_or_canonical_messages(
        m in message(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..6),
    ) {
        let mut bytes = m.encode();
        for (at, mask) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
        }
        // Never a panic; what decodes at all decodes from its one canonical encoding.
        if let Ok(decoded) = HandoffMessage::decode(&bytes) {
            prop_assert_eq!(decoded.encode(), bytes);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_only_canonical_ones_decode(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(m) = HandoffMessage::decode(&bytes) {
            prop_assert_eq!(m.encode(), bytes.clone());
        }
        if let Ok(s) = TcpRepairState::decode(&bytes) {
            prop_assert_eq!(s.encode(), bytes);
        }
    }

    #[test]
    fn a_state_claiming_queues_longer_than_the_input_is_an_error(state in repair_state(), grow in 1u32..1_000_000) {
        let mut bytes = state.encode();
        let len = u32::from_le_bytes(bytes[50..54].try_into().unwrap());
        bytes[50..54].copy_from_slice(&len.saturating_add(grow).to_le_bytes());
        let is_truncation = matches!(TcpRepairState::decode(&bytes), Err(DecodeError::Truncated { .. }));
        prop_assert!(is_truncation);
    }
}

#[test]
fn impossible_field_values_are_named_in_the_error() {
    let state = TcpRepairState {
        local: "127.0.0.1:80".parse().unwrap(),
        peer: "127.0.0.1:5000".parse().unwrap(),
        recv_seq: 1,
        send_seq: 1,
        recv_queue: Vec::new(),
        send_queue: Vec::new(),
        unsent_len: 0,
        mss: 1460,
        window_scaling: true,
        snd_wscale: 7,
        rcv_wscale: 7,
        sack_permitted: true,
        timestamps: true,
        timestamp: 0,
        window: TcpRepairWindow::default(),
    };
    let good = state.encode();
    let with = |at: usize, value: u8| {
        let mut b = good.clone();
        b[at] = value;
        TcpRepairState::decode(&b).unwrap_err().to_string()
    };
    assert_eq!(with(0, 2), "unsupported repair state version 2");
    assert_eq!(with(1, 0x80), "invalid repair state flags");
    assert_eq!(with(2, 15), "invalid window scale (over 14)");
    let mut zero_mss = good.clone();
    zero_mss[4..6].copy_from_slice(&[0, 0]);
    assert_eq!(TcpRepairState::decode(&zero_mss).unwrap_err().to_string(), "invalid mss (zero)");
    assert_eq!(
        HandoffMessage::decode(&[99, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err(),
        DecodeError::UnknownKind(99)
    );
    assert_eq!(
        HandoffMessage::decode(&[]).unwrap_err().to_string(),
        "truncated message kind: needs 1 more bytes"
    );
    let mut bad_utf8 =
        HandoffMessage::Route { id: ConnectionId(1), target: "ab".into(), moves: true }.encode();
    let n = bad_utf8.len();
    bad_utf8[n - 2] = 0xff; // the target's last byte (the moves flag follows it)
    assert_eq!(HandoffMessage::decode(&bad_utf8).unwrap_err(), DecodeError::Invalid("route target"));
    let mut bad_flag =
        HandoffMessage::Route { id: ConnectionId(1), target: "ab".into(), moves: true }.encode();
    bad_flag[n - 1] = 2;
    assert_eq!(HandoffMessage::decode(&bad_flag).unwrap_err(), DecodeError::Invalid("route moves flag"));
}
