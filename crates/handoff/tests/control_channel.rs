//! The control channel on loopback: messages arrive intact and in order; a wrong key is
//! refused by both sides; frames tampered with, replayed, reordered or oversized by a
//! man in the middle are refused and the connection dropped; what it sees of a TLS session's
//! handoff holds no secret; silent peers time out.

use std::net::SocketAddr;
use std::time::Duration;

use locus_core::NodeId;
use locus_handoff::{
    BlockingControlChannel, ConnectionId, ControlChannel, ControlConfig, ControlError, ControlKey,
    ControlListener, HandoffHint, HandoffMessage, TcpRepairState, TcpRepairWindow,
};
use locus_tls::{SessionExport, Suite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(10);

fn key(byte: u8) -> ControlKey {
    ControlKey::new(&[byte; 32]).unwrap()
}

fn fast() -> ControlConfig {
    ControlConfig {
        handshake_timeout: Duration::from_millis(500),
        send_timeout: Duration::from_secs(2),
        recv_timeout: Some(Duration::from_secs(5)),
        ..ControlConfig::default()
    }
}

fn state() -> TcpRepairState {
    TcpRepairState {
        local: "10.253.0.100:80".parse().unwrap(),
        peer: "10.253.0.2:41000".parse().unwrap(),
        recv_seq: 0xdead_beef,
        send_seq: 7,
        recv_queue: b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        send_queue: vec![0xab; 3000],
        unsent_len: 1000,
        mss: 1448,
        window_scaling: true,
        snd_wscale: 7,
        rcv_wscale: 7,
        sack_permitted: true,
        timestamps: true,
        timestamp: 123_457,
        window: TcpRepairWindow {
            snd_wl1: 1,
            snd_wnd: 65535,
            max_window: 65535,
            rcv_wnd: 64240,
            rcv_wup: 0xdead_beef,
        },
    }
}

fn every_message() -> Vec<HandoffMessage> {
    let id = ConnectionId(42);
    vec![
        HandoffMessage::HandOver {
            id,
            state: state(),
            hint: HandoffHint { target: "/index.html".into(), request_len: 38 },
            tls: None,
        },
        HandoffMessage::HandOver {
            id,
            state: state(),
            hint: HandoffHint { target: "/index.html".into(), request_len: 0 },
            tls: Some(tls_session()),
        },
        HandoffMessage::Ready { id },
        HandoffMessage::Refused { id, reason: "overloaded".into() },
        HandoffMessage::Go { id },
        HandoffMessage::Closed { id },
        HandoffMessage::Route { id, target: "/next.html".into(), moves: false },
        HandoffMessage::RouteTo { id, node: NodeId(3) },
        HandoffMessage::Rehandoff { id, state: state(), tls: None },
        HandoffMessage::Rehandoff { id, state: state(), tls: Some(tls_session()) },
    ]
}

/// Bytes no other field has: `seed`, `seed + 7`, ... (mod 256).
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add((i as u8).wrapping_mul(7))).collect()
}

/// A TLS session as the switch hands it over.
fn tls_session() -> Box<SessionExport> {
    Box::new(SessionExport {
        suite: Suite::Aes256GcmSha384,
        tx_secret: pattern(11, 48).into(),
        tx_seq: 2,
        rx_secret: pattern(13, 48).into(),
        rx_seq: 1,
        plaintext: b"GET /private/account HTTP/1.1\r\nCookie: session=0123456789\r\n\r\n".to_vec(),
        undecrypted: vec![23, 3, 3, 0, 40],
    })
}

/// A listener and a connected, authenticated pair of channels.
async fn channel_pair() -> (ControlChannel, ControlChannel) {
    let listener = ControlListener::bind_with("127.0.0.1:0", &key(1), fast()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let k = key(1);
    let (a, b) = tokio::join!(ControlChannel::connect_with(addr, &k, fast()), listener.accept());
    (a.unwrap(), b.unwrap())
}

#[tokio::test]
async fn every_message_arrives_intact_and_in_order_both_ways() {
    tokio::time::timeout(LIMIT, async {
        let (mut switch, mut node) = channel_pair().await;
        for m in every_message() {
            switch.send(&m).await.unwrap();
        }
        for m in every_message() {
            assert_eq!(node.recv().await.unwrap(), m);
        }
        for m in every_message().into_iter().rev() {
            node.send(&m).await.unwrap();
            assert_eq!(switch.recv().await.unwrap(), m);
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn split_halves_send_and_receive_concurrently() {
    tokio::time::timeout(LIMIT, async {
        let (switch, mut node) = channel_pair().await;
        let (mut tx, mut rx) = switch.into_split();
        let sender = tokio::spawn(async move {
            for i in 0..200 {
                tx.send(&HandoffMessage::Go { id: ConnectionId(i) }).await.unwrap();
            }
            tx
        });
        for i in 0..200 {
            assert_eq!(node.recv().await.unwrap(), HandoffMessage::Go { id: ConnectionId(i) });
            node.send(&HandoffMessage::Ready { id: ConnectionId(i) }).await.unwrap();
        }
        for i in 0..200 {
            assert_eq!(rx.recv().await.unwrap(), HandoffMessage::Ready { id: ConnectionId(i) });
        }
        sender.await.unwrap();
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_wrong_key_is_refused_by_both_sides() {
    tokio::time::timeout(LIMIT, async {
        let listener = ControlListener::bind_with("127.0.0.1:0", &key(1), fast()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let wrong = key(2);
        let (client, server) =
            tokio::join!(ControlChannel::connect_with(addr, &wrong, fast()), listener.accept());
        let client = client.err().expect("the initiator refuses the responder");
        let server = server.err().expect("the responder refuses the initiator");
        assert!(matches!(client, ControlError::AuthenticationFailed { role: "responder" }), "{client}");
        assert!(matches!(server, ControlError::AuthenticationFailed { role: "initiator" }), "{server}");
        assert!(server.to_string().contains("wrong key"), "{server}");
        // The listener goes on accepting peers with the right key.
        let right = key(1);
        let (client, server) =
            tokio::join!(ControlChannel::connect_with(addr, &right, fast()), listener.accept());
        let (mut client, mut server) = (client.unwrap(), server.unwrap());
        client.send(&HandoffMessage::Go { id: ConnectionId(1) }).await.unwrap();
        assert_eq!(server.recv().await.unwrap(), HandoffMessage::Go { id: ConnectionId(1) });
    })
    .await
    .unwrap();
}

/// What a man in the middle does to the initiator's frames (after the handshake, which it
/// passes through): gets each frame's bytes and its index, returns the bytes to forward.
type Meddle = Box<dyn FnMut(usize, Vec<u8>, &mut Vec<Vec<u8>>) -> Vec<Vec<u8>> + Send>;

/// A proxy between an initiator and the real listener at `upstream` that passes the
/// handshake through and lets `meddle` rewrite the initiator's frames.
async fn man_in_the_middle(upstream: SocketAddr, mut meddle: Meddle) -> SocketAddr {
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = proxy.local_addr().unwrap();
    tokio::spawn(async move {
        let (client, _) = proxy.accept().await.unwrap();
        let server = TcpStream::connect(upstream).await.unwrap();
        let (mut client_read, mut client_write) = client.into_split();
        let (mut server_read, mut server_write) = server.into_split();
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        });
        // Handshake from the initiator: hello (8 + 32), then, after the challenge, proof (32).
        for len in [40, 32] {
            let mut handshake = vec![0u8; len];
            if client_read.read_exact(&mut handshake).await.is_err() {
                return;
            }
            server_write.write_all(&handshake).await.unwrap();
        }
        let mut seen = Vec::new();
        for index in 0.. {
            let mut header = [0u8; 12];
            if client_read.read_exact(&mut header).await.is_err() {
                return;
            }
            let len = u32::from_le_bytes(header[..4].try_into().unwrap()) as usize;
            let mut frame = header.to_vec();
            frame.resize(12 + len + 16, 0);
            client_read.read_exact(&mut frame[12..]).await.unwrap();
            for out in meddle(index, frame.clone(), &mut seen) {
                if server_write.write_all(&out).await.is_err() {
                    return;
                }
            }
            seen.push(frame);
        }
    });
    addr
}

/// Connect through a meddling proxy; returns (initiator, responder).
async fn meddled_pair(meddle: Meddle) -> (ControlChannel, ControlChannel) {
    let listener = ControlListener::bind_with("127.0.0.1:0", &key(1), fast()).await.unwrap();
    let proxy = man_in_the_middle(listener.local_addr().unwrap(), meddle).await;
    let k = key(1);
    let (a, b) = tokio::join!(ControlChannel::connect_with(proxy, &k, fast()), listener.accept());
    (a.unwrap(), b.unwrap())
}

/// The initiator sees its connection dropped: its next receive ends.
async fn assert_dropped(initiator: &mut ControlChannel) {
    match initiator.recv().await {
        Err(ControlError::Closed { .. }) | Err(ControlError::Io { .. }) => {}
        other => panic!("the connection should be dropped, got {other:?}"),
    }
}

#[tokio::test]
async fn a_tampered_frame_is_refused_and_the_connection_dropped() {
    tokio::time::timeout(LIMIT, async {
        let (mut switch, mut node) = meddled_pair(Box::new(|index, mut frame, _| {
            if index == 1 {
                let last = frame.len() - 17;
                frame[last] ^= 0x01; // the last payload byte: the node id of RouteTo
            }
            vec![frame]
        }))
        .await;
        let id = ConnectionId(9);
        switch.send(&HandoffMessage::Go { id }).await.unwrap();
        switch.send(&HandoffMessage::RouteTo { id, node: NodeId(1) }).await.unwrap();
        assert_eq!(node.recv().await.unwrap(), HandoffMessage::Go { id });
        let err = node.recv().await.unwrap_err();
        assert!(matches!(err, ControlError::BadTag { seq: 1 }), "{err}");
        assert!(matches!(node.recv().await, Err(ControlError::Poisoned)), "nothing more is accepted");
        assert_dropped(&mut switch).await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_replayed_frame_is_refused_and_the_connection_dropped() {
    tokio::time::timeout(LIMIT, async {
        let (mut switch, mut node) = meddled_pair(Box::new(|index, frame, seen| {
            // After the second frame, the first one again.
            if index == 1 { vec![frame, seen[0].clone()] } else { vec![frame] }
        }))
        .await;
        let id = ConnectionId(5);
        switch.send(&HandoffMessage::Go { id }).await.unwrap();
        switch.send(&HandoffMessage::Closed { id }).await.unwrap();
        assert_eq!(node.recv().await.unwrap(), HandoffMessage::Go { id });
        assert_eq!(node.recv().await.unwrap(), HandoffMessage::Closed { id });
        let err = node.recv().await.unwrap_err();
        assert!(matches!(err, ControlError::OutOfSequence { got: 0, expected: 2 }), "{err}");
        assert_dropped(&mut switch).await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn reordered_frames_are_refused() {
    tokio::time::timeout(LIMIT, async {
        let (mut switch, mut node) = meddled_pair(Box::new(|index, frame, seen| match index {
            0 => vec![],                       // hold the first back
            1 => vec![frame, seen[0].clone()], // send it after the second
            _ => vec![frame],
        }))
        .await;
        switch.send(&HandoffMessage::Go { id: ConnectionId(1) }).await.unwrap();
        switch.send(&HandoffMessage::Go { id: ConnectionId(2) }).await.unwrap();
        let err = node.recv().await.unwrap_err();
        assert!(matches!(err, ControlError::OutOfSequence { got: 1, expected: 0 }), "{err}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_frame_from_another_session_is_refused() {
    tokio::time::timeout(LIMIT, async {
        // Record a frame of one session, then inject it into another with the same key.
        let recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = recorded.clone();
        let (mut first, mut first_node) = meddled_pair(Box::new(move |_, frame, _| {
            keep.lock().unwrap().push(frame.clone());
            vec![frame]
        }))
        .await;
        first.send(&HandoffMessage::Go { id: ConnectionId(1) }).await.unwrap();
        assert_eq!(first_node.recv().await.unwrap(), HandoffMessage::Go { id: ConnectionId(1) });
        let old = recorded.lock().unwrap()[0].clone();
        let (mut second, mut second_node) = meddled_pair(Box::new(move |_, _, _| vec![old.clone()])).await;
        second.send(&HandoffMessage::Closed { id: ConnectionId(2) }).await.unwrap();
        let err = second_node.recv().await.unwrap_err();
        assert!(matches!(err, ControlError::BadTag { seq: 0 }), "{err}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn an_oversized_frame_is_refused_before_its_body_is_read() {
    tokio::time::timeout(LIMIT, async {
        let (mut switch, mut node) = meddled_pair(Box::new(|_, mut frame, _| {
            frame[..4].copy_from_slice(&u32::MAX.to_le_bytes());
            vec![frame]
        }))
        .await;
        switch.send(&HandoffMessage::Go { id: ConnectionId(1) }).await.unwrap();
        let err = node.recv().await.unwrap_err();
        assert!(matches!(err, ControlError::FrameTooLarge { len: 4_294_967_295, .. }), "{err}");
        assert_dropped(&mut switch).await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_message_over_the_limit_is_not_sent() {
    tokio::time::timeout(LIMIT, async {
        let config = ControlConfig { max_frame_len: 1000, ..fast() };
        let listener = ControlListener::bind_with("127.0.0.1:0", &key(1), config).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let k = key(1);
        let (a, b) = tokio::join!(ControlChannel::connect_with(addr, &k, config), listener.accept());
        let (mut switch, mut node) = (a.unwrap(), b.unwrap());
        let big = HandoffMessage::Rehandoff { id: ConnectionId(1), state: state(), tls: None };
        let err = switch.send(&big).await.unwrap_err();
        assert!(matches!(err, ControlError::FrameTooLarge { limit: 1000, .. }), "{err}");
        // Nothing was written: the channel still works.
        switch.send(&HandoffMessage::Go { id: ConnectionId(2) }).await.unwrap();
        assert_eq!(node.recv().await.unwrap(), HandoffMessage::Go { id: ConnectionId(2) });
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn silent_or_foreign_peers_time_out_or_are_refused() {
    tokio::time::timeout(LIMIT, async {
        // A server that accepts and says nothing: the initiator's handshake times out.
        let mute = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mute_addr = mute.local_addr().unwrap();
        let holder = tokio::spawn(async move { mute.accept().await.map(|(s, _)| s) });
        let err = ControlChannel::connect_with(mute_addr, &key(1), fast()).await.err().unwrap();
        assert!(matches!(err, ControlError::Timeout { during: "handshake", .. }), "{err}");
        drop(holder.await);

        // A client that connects and says nothing: accept times out.
        let listener = ControlListener::bind_with("127.0.0.1:0", &key(1), fast()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_silent, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let err = accepted.err().unwrap();
        assert!(matches!(err, ControlError::Timeout { during: "handshake", .. }), "{err}");

        // A client speaking another protocol is refused at once.
        let (speaker, accepted) = tokio::join!(
            async {
                let mut s = TcpStream::connect(addr).await.unwrap();
                s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456789012").await.unwrap();
                s
            },
            listener.accept()
        );
        assert!(matches!(accepted.err().unwrap(), ControlError::BadGreeting));
        drop(speaker);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn recv_within_times_out_and_loses_nothing() {
    tokio::time::timeout(LIMIT, async {
        let (mut switch, mut node) = channel_pair().await;
        let err = node.recv_within(Duration::from_millis(50)).await.unwrap_err();
        assert!(matches!(err, ControlError::Timeout { during: "recv", .. }), "{err}");
        let m = HandoffMessage::Rehandoff { id: ConnectionId(3), state: state(), tls: None };
        switch.send(&m).await.unwrap();
        assert_eq!(node.recv().await.unwrap(), m);
        drop(switch);
        assert!(matches!(node.recv().await, Err(ControlError::Closed { .. })));
    })
    .await
    .unwrap();
}

/// A channel pair made blocking: (initiator, responder), each moved to a thread of its own.
async fn blocking_pair() -> (BlockingControlChannel, BlockingControlChannel) {
    let (a, b) = channel_pair().await;
    (a.into_blocking().unwrap(), b.into_blocking().unwrap())
}

#[tokio::test]
async fn a_channel_made_blocking_keeps_its_session_and_talks_to_an_async_peer() {
    let (initiator, mut responder) = channel_pair().await;
    // Something sent before the switch to blocking is received after it, in order.
    responder.send(&HandoffMessage::Go { id: ConnectionId(1) }).await.unwrap();
    let mut blocking = initiator.into_blocking().unwrap();
    let messages = every_message();
    let sent = messages.clone();
    let peer = std::thread::spawn(move || {
        let first = blocking.recv().unwrap();
        let echoed: Vec<HandoffMessage> = (0..sent.len()).map(|_| blocking.recv().unwrap()).collect();
        for m in &sent {
            blocking.send(m).unwrap();
        }
        (first, echoed)
    });
    for m in &messages {
        responder.send(m).await.unwrap();
    }
    for m in &messages {
        assert_eq!(&responder.recv().await.unwrap(), m);
    }
    let (first, echoed) = tokio::task::spawn_blocking(move || peer.join().unwrap()).await.unwrap();
    assert_eq!(first, HandoffMessage::Go { id: ConnectionId(1) });
    assert_eq!(echoed, messages);
}

#[tokio::test]
async fn blocking_channels_sleeping_or_busy_polling_exchange_every_message() {
    let (mut initiator, mut responder) = blocking_pair().await;
    responder.set_busy_poll(Some(Duration::from_millis(50)));
    let messages = every_message();
    let expected = messages.clone();
    let echo = std::thread::spawn(move || {
        for _ in 0..expected.len() {
            let m = responder.recv().unwrap();
            responder.send(&m).unwrap();
        }
    });
    for m in &messages {
        initiator.send(m).unwrap();
        assert_eq!(&initiator.recv().unwrap(), m);
    }
    echo.join().unwrap();
}

#[tokio::test]
async fn a_blocking_recv_times_out_at_its_limit_and_loses_nothing() {
    let (mut initiator, mut responder) = blocking_pair().await;
    for spin in [None, Some(Duration::from_millis(20))] {
        initiator.set_busy_poll(spin);
        let started = std::time::Instant::now();
        match initiator.recv_within(Duration::from_millis(100)) {
            Err(ControlError::Timeout { during: "recv", .. }) => {}
            other => panic!("expected a timeout, got {other:?}"),
        }
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(90) && waited < Duration::from_secs(2), "{waited:?}");
    }
    responder.send(&HandoffMessage::Go { id: ConnectionId(9) }).unwrap();
    assert_eq!(initiator.recv().unwrap(), HandoffMessage::Go { id: ConnectionId(9) });
}

#[tokio::test]
async fn a_tampered_frame_drops_a_blocking_channel() {
    let (initiator, responder) = meddled_pair(Box::new(|index, mut frame, _| {
        if index == 1 {
            let last = frame.len() - 1;
            frame[last] ^= 1;
        }
        vec![frame]
    }))
    .await;
    let mut responder = responder.into_blocking().unwrap();
    let mut initiator = initiator;
    initiator.send(&HandoffMessage::Go { id: ConnectionId(1) }).await.unwrap();
    initiator.send(&HandoffMessage::Go { id: ConnectionId(2) }).await.unwrap();
    let got = tokio::task::spawn_blocking(move || {
        let first = responder.recv();
        let second = responder.recv();
        let third = responder.recv();
        (first, second, third)
    })
    .await
    .unwrap();
    assert_eq!(got.0.unwrap(), HandoffMessage::Go { id: ConnectionId(1) });
    assert!(matches!(got.1, Err(ControlError::BadTag { seq: 1 })), "{:?}", got.1);
    assert!(matches!(got.2, Err(ControlError::Poisoned)), "{:?}", got.2);
    assert_dropped(&mut initiator).await;
}

#[tokio::test]
async fn the_bytes_on_the_channel_hold_no_traffic_secret_control_key_or_request() {
    tokio::time::timeout(LIMIT, async {
        let listener = ControlListener::bind_with("127.0.0.1:0", &key(1), fast()).await.unwrap();
        let upstream = listener.local_addr().unwrap();
        let wire = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = wire.clone();
        let proxy = man_in_the_middle(
            upstream,
            Box::new(move |_, frame, _| {
                seen.lock().unwrap().extend_from_slice(&frame);
                vec![frame]
            }),
        )
        .await;
        let k = key(1);
        let (a, b) = tokio::join!(ControlChannel::connect_with(proxy, &k, fast()), listener.accept());
        let (mut switch, mut node) = (a.unwrap(), b.unwrap());
        let message = HandoffMessage::HandOver {
            id: ConnectionId(9),
            state: state(),
            hint: HandoffHint::default(),
            tls: Some(tls_session()),
        };
        switch.send(&message).await.unwrap();
        assert_eq!(node.recv().await.unwrap(), message, "the node gets the session whole");
        let wire = wire.lock().unwrap().clone();
        let session = tls_session();
        assert!(wire.len() > session.plaintext.len() + 96, "the frame went through the proxy");
        for (what, secret) in [
            ("the sending traffic secret", &session.tx_secret[..]),
            ("the receiving traffic secret", &session.rx_secret[..]),
            ("the control key", &[1u8; 32][..]),
            ("the request", &session.plaintext[..]),
        ] {
            let leaked = secret.windows(6).find(|piece| wire.windows(6).any(|w| w == *piece));
            assert!(leaked.is_none(), "{what} is on the wire: {leaked:?}");
        }
    })
    .await
    .unwrap();
}
