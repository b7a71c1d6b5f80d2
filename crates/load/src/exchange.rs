//! One exchange on a client connection, shared by the load client's `ClientConnection`, its
//! HTTP/2 streams and the live surfer: connect within the timeout, read until a response
//! completes (or say why none did: `Fault`), check a response against its template's
//! expectation, and count a measured response.

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::response_reader::{FramingError, ResponseReader, ResponseSummary};
use crate::stats::{ErrorKind, LiveCounters, ThreadStats};
use crate::verifier::Mismatch;
use crate::workload::RequestTemplate;

/// Why a connection stopped waiting (also the live surfer's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The run is over (its end passed): abandon without counting.
    Stop,
    Error(ErrorKind),
}

impl Fault {
    /// A response that does not frame: cut off reads as a closed connection.
    pub(crate) fn framing(e: FramingError) -> Fault {
        Fault::Error(if e.is_truncation() { ErrorKind::Closed } else { ErrorKind::Framing })
    }
}

/// The server closed the connection: the response it completed (never kept alive), or why not.
fn response_at_eof(reader: &mut ResponseReader) -> Result<ResponseSummary, Fault> {
    match reader.at_eof() {
        Ok(Some(summary)) => Ok(ResponseSummary { keep_alive: false, ..summary }),
        Ok(None) => Err(Fault::Error(ErrorKind::Closed)),
        Err(e) => Err(Fault::framing(e)),
    }
}

/// Open a connection to `addr` (Nagle off) within `timeout` (the client's and the live
/// surfer's): `Connect` when that fails or takes too long, `Stop` once `run_end` passed.
pub(crate) async fn connect_within(
    addr: SocketAddr,
    mut timer: Pin<&mut Sleep>,
    timeout: Duration,
    run_end: Option<Instant>,
) -> Result<TcpStream, Fault> {
    let now = Instant::now();
    let deadline = run_end.map_or(now + timeout, |e| e.min(now + timeout));
    timer.as_mut().reset(deadline.into());
    let connected = tokio::select! {
        biased;
        r = TcpStream::connect(addr) => Some(r),
        () = &mut timer => None,
    };
    match connected {
        Some(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        Some(Err(_)) => Err(Fault::Error(ErrorKind::Connect)),
        None if run_end.is_some_and(|e| Instant::now() >= e) => Err(Fault::Stop),
        None => Err(Fault::Error(ErrorKind::Connect)),
    }
}

/// Read on `stream` into `reader` until `poll` completes a response (the client's and the live
/// surfer's reads): the response, or why none came (`Timeout` at `timeout_at`, `Stop` once
/// `run_end` passes).
pub(crate) async fn read_response<S: tokio::io::AsyncRead + Unpin>(
    mut stream: Option<&mut S>,
    reader: &mut ResponseReader,
    mut timer: Pin<&mut Sleep>,
    timeout_at: Instant,
    run_end: Option<Instant>,
    mut poll: impl FnMut(&mut ResponseReader) -> Result<Option<ResponseSummary>, FramingError>,
) -> Result<ResponseSummary, Fault> {
    let deadline = run_end.map_or(timeout_at, |e| e.min(timeout_at));
    loop {
        match poll(reader) {
            Ok(Some(summary)) => return Ok(summary),
            Ok(None) => {}
            Err(e) => return Err(Fault::framing(e)),
        }
        let Some(stream) = stream.as_deref_mut() else { return Err(Fault::Error(ErrorKind::Closed)) };
        // The timer may be set earlier than needed (it is moved only when it fires, not
        // for every request, e.g. still at an earlier request's deadline); never later.
        if timer.is_elapsed() || timer.deadline().into_std() > deadline {
            timer.as_mut().reset(deadline.into());
        }
        let space = reader.read_space();
        let read = tokio::select! {
            biased;
            r = stream.read(space) => Some(r),
            () = &mut timer => None,
        };
        match read {
            Some(Ok(0)) => return response_at_eof(reader),
            Some(Ok(n)) => reader.commit(n),
            Some(Err(_)) => return Err(Fault::Error(ErrorKind::Closed)),
            None => {
                let now = Instant::now();
                if run_end.is_some_and(|e| now >= e) {
                    return Err(Fault::Stop);
                }
                if now >= timeout_at {
                    return Err(Fault::Error(ErrorKind::Timeout));
                }
                timer.as_mut().reset(deadline.into());
            }
        }
    }
}

/// Count a measured response, answered at `now` to a request timed from `latency_from` (the
/// client's and the live surfer's): request, bytes, latency and status, and a 4xx or 5xx as an
/// error, in `stats` and the live counters.
pub(crate) fn count_response(
    stats: &mut ThreadStats,
    live: &LiveCounters,
    summary: &ResponseSummary,
    latency_from: Instant,
    now: Instant,
) {
    stats.requests += 1;
    stats.bytes += summary.wire_bytes;
    stats.last_response = Some(now);
    let us = now.saturating_duration_since(latency_from).as_micros();
    stats.latency.record_us(u64::try_from(us).unwrap_or(u64::MAX));
    stats.count_status(summary.status);
    live.add_request();
    let kind = match summary.status {
        400..=499 => Some(ErrorKind::Status4xx),
        500..=599 => Some(ErrorKind::Status5xx),
        _ => None,
    };
    if let Some(kind) = kind {
        stats.errors.add(kind, 1);
        live.add_errors(1);
    }
}

/// Check `summary` against what `template` expects (when anything is), counting it verified
/// and any mismatch with a sample (up to `max_samples`) naming the request on `base`.
pub(crate) fn check_response(
    stats: &mut ThreadStats,
    template: &RequestTemplate,
    summary: &ResponseSummary,
    base: &str,
    max_samples: usize,
) {
    if !template.expect.is_checked() {
        return;
    }
    stats.verified += 1;
    if let Some((kind, expected, actual)) = template.expect.check(template.head_only, summary) {
        stats.mismatches.add(kind);
        if stats.mismatch_samples.len() < max_samples {
            stats.mismatch_samples.push(Mismatch {
                request: format!("{} {base}{}", template.method, template.target),
                kind,
                expected,
                actual,
            });
        }
    }
}
