//! `[http2]`: whether the switch speaks HTTP/2 to clients (ALPN `h2` on the TLS listener, h2c
//! with prior knowledge on the cleartext one) and the limits each HTTP/2 connection runs under:
//! concurrent streams, flow-control windows, and the budgets past which a client flooding
//! control frames or provoking stream errors is sent GOAWAY.

use crate::mode::Mode;
use serde::Deserialize;

/// The `[http2]` table.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http2Settings {
    /// Speak HTTP/2 to clients. Unset: on in proxy and splice modes; off in handoff mode, whose
    /// point is moving connections, which an HTTP/2 connection's multiplexed streams cannot.
    pub enabled: Option<bool>,
    /// Streams a client may have open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_concurrent_streams: u32,
    /// Request body bytes a client may send on one stream before the switch has passed them on.
    pub stream_window_bytes: u32,
    /// Request body bytes a client may send on one connection, over all its streams, before the
    /// switch has passed them on.
    pub connection_window_bytes: u32,
    /// Control frames (SETTINGS, PING, PRIORITY, RST_STREAM, empty DATA) a client may send in a
    /// burst before the switch calls it a flood.
    pub control_frame_burst: u32,
    /// Control frames per second a client may send indefinitely (the burst refills at this rate).
    pub control_frames_per_s: u32,
    /// Streams the switch may have to reset over one connection because the client broke the
    /// protocol on them (the MadeYouReset attack provokes exactly these) before GOAWAY.
    pub max_stream_errors: usize,
}

impl Default for Http2Settings {
    fn default() -> Http2Settings {
        Http2Settings {
            enabled: None,
            max_concurrent_streams: 100,
            stream_window_bytes: 256 * 1024,
            connection_window_bytes: 1024 * 1024,
            control_frame_burst: 200,
            control_frames_per_s: 50,
            max_stream_errors: 100,
        }
    }
}

impl Http2Settings {
    /// Whether HTTP/2 is spoken in `mode`.
    pub fn enabled_in(&self, mode: Mode) -> bool {
        self.enabled.unwrap_or(matches!(mode, Mode::Proxy | Mode::Splice))
    }

    /// What is wrong with these settings, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.max_concurrent_streams == 0 {
            return Err("http2.max_concurrent_streams must be greater than 0".into());
        }
        // RFC 9113 §6.9.2: a window above 2^31 - 1 is a flow-control error.
        for (key, v) in [
            ("http2.stream_window_bytes", self.stream_window_bytes),
            ("http2.connection_window_bytes", self.connection_window_bytes),
        ] {
            if !(16_384..=0x7fff_ffff).contains(&v) {
                return Err(format!("{key} must be between 16384 and 2147483647, not {v}"));
            }
        }
        if self.control_frame_burst == 0 || self.max_stream_errors == 0 {
            return Err("http2.control_frame_burst and http2.max_stream_errors must be greater than 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http2_is_on_by_default_except_where_connections_move() {
        let s = Http2Settings::default();
        assert!(s.enabled_in(Mode::Proxy) && s.enabled_in(Mode::Splice));
        assert!(!s.enabled_in(Mode::Handoff) && !s.enabled_in(Mode::L4));
        let forced = Http2Settings { enabled: Some(true), ..s.clone() };
        assert!(forced.enabled_in(Mode::Handoff));
        assert!(s.check().is_ok());
        assert!(Http2Settings { stream_window_bytes: 1 << 31, ..s.clone() }.check().is_err());
        assert!(Http2Settings { max_concurrent_streams: 0, ..s }.check().is_err());
    }
}
