//! `FrameMeter`: follows the frame headers of the bytes a client sends on an HTTP/2 connection
//! (after the 24-byte preface, 9 bytes of header then the payload, which it skips) and charges
//! the frames that cost the server work without carrying a request — SETTINGS, PING (not their
//! ACKs), PRIORITY, RST_STREAM and empty non-final DATA — to a token bucket. A client that
//! empties it is flooding (SETTINGS and PING floods, rapid reset, CVE-2023-44487 and kin).
//! Written by hand: the h2 crate offers no per-frame hook, and this reads 9 bytes per frame.

use std::time::Instant;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const HEADER_LEN: usize = 9;
const DATA: u8 = 0x0;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
/// ACK on SETTINGS and PING; END_STREAM on DATA.
const FLAG_ACK_OR_END: u8 = 0x1;

/// Which frames emptied the bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flood {
    Settings,
    Ping,
    Priority,
    Reset,
    EmptyData,
}

impl Flood {
    pub fn name(self) -> &'static str {
        match self {
            Flood::Settings => "settings",
            Flood::Ping => "ping",
            Flood::Priority => "priority",
            Flood::Reset => "rst_stream",
            Flood::EmptyData => "empty_data",
        }
    }
}

/// Follows one connection's client-to-switch frames and charges its control frames.
#[derive(Debug)]
pub struct FrameMeter {
    /// Preface bytes still to pass.
    preface_left: usize,
    header: [u8; HEADER_LEN],
    header_len: usize,
    /// Payload bytes of the current frame still to skip.
    payload_left: usize,
    burst: f64,
    per_s: f64,
    tokens: f64,
    last: Option<Instant>,
    flood: Option<Flood>,
}

impl FrameMeter {
    /// A meter allowing `burst` control frames at once, refilled at `per_s` a second.
    pub fn new(burst: u32, per_s: u32) -> FrameMeter {
        FrameMeter {
            preface_left: PREFACE.len(),
            header: [0; HEADER_LEN],
            header_len: 0,
            payload_left: 0,
            burst: f64::from(burst),
            per_s: f64::from(per_s),
            tokens: f64::from(burst),
            last: None,
            flood: None,
        }
    }

    /// The flood found, once the bucket ran dry.
    pub fn flood(&self) -> Option<Flood> {
        self.flood
    }

    /// Follow `bytes`, the next the client sent, read at `now`.
    pub fn feed(&mut self, mut bytes: &[u8], now: Instant) {
        while !bytes.is_empty() && self.flood.is_none() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                self.preface_left -= n;
                bytes = &bytes[n..];
            } else if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
            } else {
                let n = (HEADER_LEN - self.header_len).min(bytes.len());
                self.header[self.header_len..self.header_len + n].copy_from_slice(&bytes[..n]);
                self.header_len += n;
                bytes = &bytes[n..];
                if self.header_len == HEADER_LEN {
                    self.header_len = 0;
                    self.frame(now);
                }
            }
        }
    }

    /// A whole frame header is in `header`: charge it, and skip its payload next.
    fn frame(&mut self, now: Instant) {
        let h = &self.header;
        let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
        let (kind, flags) = (h[3], h[4]);
        self.payload_left = len;
        let charged = match kind {
            SETTINGS if flags & FLAG_ACK_OR_END == 0 => Some(Flood::Settings),
            PING if flags & FLAG_ACK_OR_END == 0 => Some(Flood::Ping),
            PRIORITY => Some(Flood::Priority),
            RST_STREAM => Some(Flood::Reset),
            DATA if len == 0 && flags & FLAG_ACK_OR_END == 0 => Some(Flood::EmptyData),
            _ => None,
        };
        let Some(kind) = charged else { return };
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.per_s;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.last = Some(now);
        self.tokens -= 1.0;
        if self.tokens < 0.0 {
            self.flood = Some(kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags, 0, 0, 0, 1];
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_ping_flood_is_found_after_the_burst_however_the_bytes_are_cut() {
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(SETTINGS, 0, &[0; 6]));
        for _ in 0..10 {
            bytes.extend(frame(PING, 0, &[7; 8]));
        }
        let now = Instant::now();
        for cut in [1, 5, 9, 13, 1000] {
            let mut m = FrameMeter::new(10, 1);
            for piece in bytes.chunks(cut) {
                m.feed(piece, now);
            }
            assert_eq!(m.flood(), Some(Flood::Ping), "cut {cut}");
        }
        let mut m = FrameMeter::new(11, 1);
        m.feed(&bytes, now);
        assert_eq!(m.flood(), None, "11 charged frames fit a burst of 11");
    }

    #[test]
    fn acks_requests_and_data_are_free_and_payloads_are_skipped_not_parsed() {
        let mut m = FrameMeter::new(1, 1);
        let now = Instant::now();
        m.feed(PREFACE, now);
        // A DATA payload that looks like frame headers must not be read as frames.
        let fake = frame(PING, 0, &[0; 8]).repeat(100);
        m.feed(&frame(DATA, 0, &fake), now);
        m.feed(&frame(SETTINGS, FLAG_ACK_OR_END, &[]), now);
        m.feed(&frame(PING, FLAG_ACK_OR_END, &[0; 8]), now);
        m.feed(&frame(0x1, 0x4, &[0x82]), now);
        m.feed(&frame(DATA, FLAG_ACK_OR_END, &[]), now);
        assert_eq!(m.flood(), None);
        m.feed(&frame(RST_STREAM, 0, &[0, 0, 0, 8]), now);
        m.feed(&frame(RST_STREAM, 0, &[0, 0, 0, 8]), now);
        assert_eq!(m.flood(), Some(Flood::Reset));
    }

    #[test]
    fn the_bucket_refills_at_its_rate_so_a_steady_trickle_is_no_flood() {
        let mut m = FrameMeter::new(2, 10);
        let t0 = Instant::now();
        m.feed(PREFACE, t0);
        for i in 0..1000u32 {
            // Ten a second, for 100 seconds: exactly the rate.
            m.feed(&frame(PRIORITY, 0, &[0; 5]), t0 + Duration::from_millis(100 * u64::from(i)));
        }
        assert_eq!(m.flood(), None);
        for _ in 0..3 {
            m.feed(&frame(DATA, 0, &[]), t0 + Duration::from_secs(100));
        }
        assert_eq!(m.flood(), Some(Flood::EmptyData));
    }

    proptest! {
        #[test]
        fn the_verdict_does_not_depend_on_how_the_bytes_are_cut(
            kinds in proptest::collection::vec((0u8..10, 0u8..2, 0usize..40), 0..300),
            cuts in proptest::collection::vec(1usize..64, 1..20),
        ) {
            let mut bytes = PREFACE.to_vec();
            for (kind, flags, len) in kinds {
                bytes.extend(frame(kind, flags, &vec![0xAB; len]));
            }
            let now = Instant::now();
            let mut whole = FrameMeter::new(20, 1);
            whole.feed(&bytes, now);
            let mut cut = FrameMeter::new(20, 1);
            let mut rest = &bytes[..];
            let mut i = 0;
            while !rest.is_empty() {
                let n = cuts[i % cuts.len()].min(rest.len());
                cut.feed(&rest[..n], now);
                rest = &rest[n..];
                i += 1;
            }
            prop_assert_eq!(whole.flood(), cut.flood());
        }

        #[test]
        fn any_bytes_are_followed_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let mut m = FrameMeter::new(5, 1);
            m.feed(&bytes, Instant::now());
            let _ = m.flood();
        }
    }
}
