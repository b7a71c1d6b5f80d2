//! A raw HTTP/2 client for the flood and malformed-request tests: frames and HPACK field
//! blocks written byte by byte (literals, no Huffman, so any name, value or repetition can be
//! sent), and the server's frames read back with their types, flags, streams and codes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

pub const PROTOCOL_ERROR: u32 = 0x1;
pub const CANCEL: u32 = 0x8;
pub const REFUSED_STREAM: u32 = 0x7;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// A frame from the server.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY.
    pub fn code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        let b = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// One frame's bytes.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HPACK integer with an `n`-bit prefix, `flags` in the first byte's high bits.
pub fn hpack_int(out: &mut Vec<u8>, flags: u8, n: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128 + 128) as u8);
        v /= 128;
    }
    out.push(v as u8);
}

fn hpack_string(out: &mut Vec<u8>, s: &[u8]) {
    hpack_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// A literal field without indexing, new name.
pub fn literal(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(0x00);
    hpack_string(out, name.as_bytes());
    hpack_string(out, value);
}

/// A literal field added to the dynamic table, new name.
pub fn literal_indexed(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(0x40);
    hpack_string(out, name.as_bytes());
    hpack_string(out, value);
}

/// A field by its index (static 1–61, dynamic from 62).
pub fn indexed(out: &mut Vec<u8>, index: usize) {
    hpack_int(out, 0x80, 7, index);
}

/// The field block of a request: method, scheme http, path, authority, then `extra`.
pub fn request_block(method: &str, path: &str, extra: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = Vec::new();
    literal(&mut b, ":method", method.as_bytes());
    literal(&mut b, ":scheme", b"http");
    literal(&mut b, ":path", path.as_bytes());
    literal(&mut b, ":authority", b"localhost");
    for (n, v) in extra {
        literal(&mut b, n, v);
    }
    b
}

/// A cleartext HTTP/2 connection with prior knowledge, frames written and read by hand.
pub struct RawH2 {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawH2 {
    /// Connect and send the preface and an empty SETTINGS frame (plus `settings` pairs).
    pub fn connect(addr: SocketAddr, settings: &[(u16, u32)]) -> RawH2 {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut c = RawH2 { stream, buf: Vec::new() };
        let mut payload = Vec::new();
        for (id, v) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&v.to_be_bytes());
        }
        let mut first = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        first.extend(frame(SETTINGS, 0, 0, &payload));
        c.send(&first);
        c
    }

    /// Write bytes; a connection the server closed is no failure here (the test reads why).
    pub fn send(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).is_ok()
    }

    /// A GET (or any bodiless request) on `id` with END_STREAM.
    pub fn request(&mut self, id: u32, method: &str, path: &str, extra: &[(&str, &[u8])]) -> bool {
        let block = request_block(method, path, extra);
        self.send(&frame(HEADERS, END_HEADERS | END_STREAM, id, &block))
    }

    /// The next frame, if one arrives before `limit` (`None` too when the server closed).
    pub fn next_frame(&mut self, limit: Duration) -> Option<Frame> {
        let end = Instant::now() + limit;
        loop {
            if self.buf.len() >= 9 {
                let len = (usize::from(self.buf[0]) << 16)
                    | (usize::from(self.buf[1]) << 8)
                    | usize::from(self.buf[2]);
                if self.buf.len() >= 9 + len {
                    let b: Vec<u8> = self.buf.drain(..9 + len).collect();
                    let stream = u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff;
                    return Some(Frame { kind: b[3], flags: b[4], stream, payload: b[9..].to_vec() });
                }
            }
            let left = end.checked_duration_since(Instant::now())?;
            self.stream.set_read_timeout(Some(left.max(Duration::from_millis(1)))).unwrap();
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Frames until one matches `want` (returned) or `limit` passes.
    pub fn until(&mut self, limit: Duration, mut want: impl FnMut(&Frame) -> bool) -> Option<Frame> {
        let end = Instant::now() + limit;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            let f = self.next_frame(left)?;
            if want(&f) {
                return Some(f);
            }
        }
        None
    }

    /// The GOAWAY's error code, if one comes within `limit`.
    pub fn goaway(&mut self, limit: Duration) -> Option<u32> {
        self.until(limit, |f| f.kind == GOAWAY).and_then(|f| f.code())
    }

    /// Whether the server closed the connection within `limit` (after any frames it sent).
    pub fn closed_within(&mut self, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            self.stream.set_read_timeout(Some(left.max(Duration::from_millis(1)))).unwrap();
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
        false
    }
}
