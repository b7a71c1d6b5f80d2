//! `TcpRepairState`: everything needed to re-create an established TCP connection on another
//! host (addresses, sequence numbers, both queues, negotiated options, timestamp clock, window
//! state), and its compact fixed little-endian wire encoding (62-byte header + the queues).

use std::net::{Ipv4Addr, SocketAddrV4};

use serde::{Deserialize, Serialize};

use crate::error::DecodeError;

/// The kernel's `struct tcp_repair_window` (TCP_REPAIR_WINDOW): five `u32`s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(C)]
pub struct TcpRepairWindow {
    /// Sequence number of the segment that last updated the send window.
    pub snd_wl1: u32,
    /// The peer's advertised window (unscaled bytes).
    pub snd_wnd: u32,
    /// The largest window the peer ever advertised.
    pub max_window: u32,
    /// Our advertised receive window.
    pub rcv_wnd: u32,
    /// `rcv_nxt` when the receive window was last advertised.
    pub rcv_wup: u32,
}

/// An established TCP connection, taken out of the kernel by `dump_connection` and put back
/// by `restore_connection`.
///
/// Sequence numbers are the *ends* of the queues: the receive queue starts at
/// `recv_seq - recv_queue.len()` and the send queue at `send_seq - send_queue.len()`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpRepairState {
    /// Our address (the virtual IP and service port, for a handed-off client connection).
    pub local: SocketAddrV4,
    /// The client's address.
    pub peer: SocketAddrV4,
    /// `rcv_nxt`: the sequence number after the last byte received from the peer.
    pub recv_seq: u32,
    /// `write_seq`: the sequence number after the last byte queued for the peer.
    pub send_seq: u32,
    /// Bytes to be read by the application: those it had already consumed (put back in
    /// front) followed by the kernel's receive queue.
    pub recv_queue: Vec<u8>,
    /// The kernel's send queue: the part already sent (unacknowledged) then the unsent part.
    pub send_queue: Vec<u8>,
    /// How many bytes at the end of `send_queue` were never sent (SIOCOUTQNSD).
    pub unsent_len: u32,
    /// The MSS clamp (TCP_MAXSEG read in repair mode).
    pub mss: u16,
    /// Window scaling was negotiated.
    pub window_scaling: bool,
    /// Our send window scale (the peer's shift), 0..=14.
    pub snd_wscale: u8,
    /// Our receive window scale, 0..=14.
    pub rcv_wscale: u8,
    /// SACK was negotiated.
    pub sack_permitted: bool,
    /// Timestamps were negotiated.
    pub timestamps: bool,
    /// TCP_TIMESTAMP: our timestamp clock's current value (with its offset); the low bit says
    /// whether the connection uses microsecond timestamps (kernel 6.x), passed through as is.
    pub timestamp: u32,
    /// TCP_REPAIR_WINDOW.
    pub window: TcpRepairWindow,
}

/// Version byte of the encoding.
const STATE_VERSION: u8 = 1;
/// Length of the fixed part of the encoding.
pub const STATE_HEADER_LEN: usize = 62;

const FLAG_SACK: u8 = 1;
const FLAG_TIMESTAMPS: u8 = 2;
const FLAG_WINDOW_SCALING: u8 = 4;

impl TcpRepairState {
    /// The part of the send queue the peer may already have received (restored in repair
    /// mode, retransmitted by the kernel if it was lost).
    pub fn sent_part(&self) -> &[u8] {
        let unsent = (self.unsent_len as usize).min(self.send_queue.len());
        &self.send_queue[..self.send_queue.len() - unsent]
    }

    /// The part of the send queue never sent: after the restore, the new owner writes it
    /// normally, first, once it may send (after `Go`).
    pub fn unsent_part(&self) -> &[u8] {
        let unsent = (self.unsent_len as usize).min(self.send_queue.len());
        &self.send_queue[self.send_queue.len() - unsent..]
    }

    /// Length of the encoding.
    pub fn encoded_len(&self) -> usize {
        STATE_HEADER_LEN + self.recv_queue.len() + self.send_queue.len()
    }

    /// Append the encoding to `out`. Layout, little-endian, offsets in bytes:
    ///
    /// | at | field |
    /// |---|---|
    /// | 0 | version u8 (1) |
    /// | 1 | flags u8: 1 SACK, 2 timestamps, 4 window scaling |
    /// | 2, 3 | snd_wscale u8, rcv_wscale u8 |
    /// | 4 | mss u16 |
    /// | 6, 12 | local, peer: IPv4 \[4\] then port u16 |
    /// | 18, 22, 26 | recv_seq, send_seq, timestamp: u32 |
    /// | 30 | window: snd_wl1, snd_wnd, max_window, rcv_wnd, rcv_wup: 5 × u32 |
    /// | 50, 54, 58 | lengths of the receive queue, send queue, unsent part: u32 |
    /// | 62 | the receive queue, then the send queue |
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        let flags = if self.sack_permitted { FLAG_SACK } else { 0 }
            | if self.timestamps { FLAG_TIMESTAMPS } else { 0 }
            | if self.window_scaling { FLAG_WINDOW_SCALING } else { 0 };
        out.extend_from_slice(&[STATE_VERSION, flags, self.snd_wscale, self.rcv_wscale]);
        out.extend_from_slice(&self.mss.to_le_bytes());
        for addr in [self.local, self.peer] {
            out.extend_from_slice(&addr.ip().octets());
            out.extend_from_slice(&addr.port().to_le_bytes());
        }
        let w = &self.window;
        for v in [
            self.recv_seq,
            self.send_seq,
            self.timestamp,
            w.snd_wl1,
            w.snd_wnd,
            w.max_window,
            w.rcv_wnd,
            w.rcv_wup,
            queue_len(&self.recv_queue),
            queue_len(&self.send_queue),
            self.unsent_len,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.recv_queue);
        out.extend_from_slice(&self.send_queue);
    }

    /// The encoding as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// Decode a state from the front of `input`; returns it and the bytes it took.
    pub fn decode_prefix(input: &[u8]) -> Result<(TcpRepairState, usize), DecodeError> {
        let mut r = WireReader::new(input);
        let version = r.u8("state version")?;
        if version != STATE_VERSION {
            return Err(DecodeError::Version { what: "repair state", version });
        }
        let flags = r.u8("state flags")?;
        if flags & !(FLAG_SACK | FLAG_TIMESTAMPS | FLAG_WINDOW_SCALING) != 0 {
            return Err(DecodeError::Invalid("repair state flags"));
        }
        let snd_wscale = r.u8("snd_wscale")?;
        let rcv_wscale = r.u8("rcv_wscale")?;
        if snd_wscale > 14 || rcv_wscale > 14 {
            return Err(DecodeError::Invalid("window scale (over 14)"));
        }
        let mss = r.u16("mss")?;
        if mss == 0 {
            return Err(DecodeError::Invalid("mss (zero)"));
        }
        let local = r.addr("local address")?;
        let peer = r.addr("peer address")?;
        let recv_seq = r.u32("recv_seq")?;
        let send_seq = r.u32("send_seq")?;
        let timestamp = r.u32("timestamp")?;
        let window = TcpRepairWindow {
            snd_wl1: r.u32("window")?,
            snd_wnd: r.u32("window")?,
            max_window: r.u32("window")?,
            rcv_wnd: r.u32("window")?,
            rcv_wup: r.u32("window")?,
        };
        let recv_len = r.u32("receive queue length")? as usize;
        let send_len = r.u32("send queue length")? as usize;
        let unsent_len = r.u32("unsent length")?;
        if unsent_len as usize > send_len {
            return Err(DecodeError::Invalid("unsent length (longer than the send queue)"));
        }
        let recv_queue = r.bytes(recv_len, "receive queue")?.to_vec();
        let send_queue = r.bytes(send_len, "send queue")?.to_vec();
        let state = TcpRepairState {
            local,
            peer,
            recv_seq,
            send_seq,
            recv_queue,
            send_queue,
            unsent_len,
            mss,
            window_scaling: flags & FLAG_WINDOW_SCALING != 0,
            snd_wscale,
            rcv_wscale,
            sack_permitted: flags & FLAG_SACK != 0,
            timestamps: flags & FLAG_TIMESTAMPS != 0,
            timestamp,
            window,
        };
        Ok((state, r.position()))
    }

    /// Decode a state that fills `input` exactly.
    pub fn decode(input: &[u8]) -> Result<TcpRepairState, DecodeError> {
        let (state, used) = TcpRepairState::decode_prefix(input)?;
        match input.len() - used {
            0 => Ok(state),
            extra => Err(DecodeError::Trailing(extra)),
        }
    }
}

/// A queue's length as the u32 of the encoding (queues are bounded far below 4 GiB by the
/// kernel's socket buffers).
fn queue_len(queue: &[u8]) -> u32 {
    u32::try_from(queue.len()).unwrap_or(u32::MAX)
}

/// Reads little-endian fields from a byte slice, failing (never panicking) when it ends.
pub(crate) struct WireReader<'a> {
    input: &'a [u8],
    pos: usize,
}

impl<'a> WireReader<'a> {
    pub(crate) fn new(input: &'a [u8]) -> WireReader<'a> {
        WireReader { input, pos: 0 }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn rest(&self) -> &'a [u8] {
        &self.input[self.pos..]
    }

    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let rest = self.rest();
        if rest.len() < n {
            return Err(DecodeError::Truncated { what, needed: n - rest.len() });
        }
        self.pos += n;
        Ok(&rest[..n])
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn addr(&mut self, what: &'static str) -> Result<SocketAddrV4, DecodeError> {
        let ip = Ipv4Addr::from(self.array::<4>(what)?);
        Ok(SocketAddrV4::new(ip, self.u16(what)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TcpRepairState {
        TcpRepairState {
            local: "10.253.0.100:80".parse().unwrap(),
            peer: "10.253.0.2:40000".parse().unwrap(),
            recv_seq: 1000,
            send_seq: u32::MAX - 3,
            recv_queue: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            send_queue: b"sentunsent".to_vec(),
            unsent_len: 6,
            mss: 1448,
            window_scaling: true,
            snd_wscale: 7,
            rcv_wscale: 9,
            sack_permitted: true,
            timestamps: true,
            timestamp: 0x1234_5679,
            window: TcpRepairWindow { snd_wl1: 1, snd_wnd: 2, max_window: 3, rcv_wnd: 4, rcv_wup: 5 },
        }
    }

    #[test]
    fn header_is_62_bytes_and_queues_follow_it() {
        let s = sample();
        let bytes = s.encode();
        assert_eq!(bytes.len(), STATE_HEADER_LEN + 18 + 10);
        assert_eq!(&bytes[STATE_HEADER_LEN..STATE_HEADER_LEN + 18], s.recv_queue.as_slice());
        assert_eq!(TcpRepairState::decode(&bytes).unwrap(), s);
    }

    #[test]
    fn send_queue_splits_into_sent_and_unsent_parts() {
        let s = sample();
        assert_eq!(s.sent_part(), b"sent");
        assert_eq!(s.unsent_part(), b"unsent");
    }

    #[test]
    fn unsent_longer_than_the_send_queue_is_rejected() {
        let mut bytes = sample().encode();
        bytes[58..62].copy_from_slice(&11u32.to_le_bytes());
        assert!(matches!(TcpRepairState::decode(&bytes), Err(DecodeError::Invalid(_))));
    }
}
