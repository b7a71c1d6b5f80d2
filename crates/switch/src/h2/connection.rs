//! One HTTP/2 client connection: the handshake (under the header timeout) with the switch's
//! limits as SETTINGS and h2's abuse limits set, then every stream accepted and served beside
//! the connection in this one task (each polled only when woken). It ends with GOAWAY: NO_ERROR at
//! shutdown (streams in flight finish, up to the drain timeout) or after the keep-alive
//! timeout without a stream; ENHANCE_YOUR_CALM when the `FrameMeter` finds a flood or h2 finds
//! too many stream errors. Each GOAWAY is counted by reason.

use super::client_io::{FloodFlag, H2Io};
use super::counters::GoawayReason;
use super::frame_meter::FrameMeter;
use super::stream::StreamContext;
use crate::client_stream::ClientStream;
use crate::mode::Mode;
use crate::state::Shared;
use crate::worker::Worker;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use h2::server::{Builder, Connection};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, timeout};

/// Response bytes h2 may hold for one stream that the socket has not taken yet: one DATA frame.
/// With a stream's own read of one frame, a stream holds at most 32 KiB of its response, however
/// large the windows a client opens while it does not read its socket.
const MAX_SEND_BUFFER: usize = 16 * 1024;

/// How long a connection sent GOAWAY for abuse is given to take it before it is dropped.
const ABUSE_GRACE: Duration = Duration::from_secs(1);

/// What woke the connection task.
enum Event {
    Stream(Box<(http::Request<h2::RecvStream>, h2::server::SendResponse<Bytes>)>),
    Ended(Option<h2::Error>),
    Flood,
    /// Time to say GOAWAY NO_ERROR (shutdown, or idle).
    Goaway(GoawayReason),
    /// A stream ended (or the idle deadline passed with streams open).
    StreamDone,
}

/// Serve an HTTP/2 connection on `stream` (`preread`: bytes read from it already) until it ends.
pub async fn serve(
    worker: Rc<Worker>,
    stream: ClientStream,
    peer: SocketAddr,
    mut shutdown: watch::Receiver<bool>,
    preread: Vec<u8>,
) {
    let shared = worker.shared.clone();
    let config = shared.config();
    let settings = &config.http2;
    shared.h2.connections.fetch_add(1, Relaxed);
    if matches!(config.mode, Mode::Handoff | Mode::L4) {
        shared.h2.two_way.fetch_add(1, Relaxed);
    }
    let ctx = Rc::new(StreamContext {
        worker: worker.clone(),
        peer,
        local: stream.tcp().local_addr().ok(),
        scheme: stream.scheme(),
        rtt: crate::sniff::tcp_rtt(stream.tcp()).unwrap_or(Duration::ZERO),
    });
    let meter = FrameMeter::new(settings.control_frame_burst, settings.control_frames_per_s);
    let (io, flood) = H2Io::new(stream, preread, meter);
    let handshake = builder(&shared).handshake::<_, Bytes>(io);
    let mut conn = match timeout(shared.config().limits.header_timeout(), handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return tracing::debug!(%peer, "HTTP/2 handshake failed: {e}"),
        Err(_) => return tracing::debug!(%peer, "HTTP/2 handshake timed out"),
    };
    // The streams run inside this task: waking one polls it alone, with no task to spawn or
    // join per request.
    let mut streams: FuturesUnordered<Pin<Box<dyn Future<Output = ()>>>> = FuturesUnordered::new();
    let keepalive = shared.config().limits.keepalive_timeout();
    // Without a stream: when the connection is idle; after GOAWAY: when the drain ends.
    let deadline = sleep(keepalive);
    // A shutdown that began before the connection did is one to answer at once.
    let already = *shutdown.borrow_and_update();
    // One wait for the shutdown signal for the connection's life, not one per event.
    let shutting_down = shutdown.changed();
    tokio::pin!(deadline, shutting_down);
    let mut ending = false;
    loop {
        let event = tokio::select! {
            biased;
            () = flood_found(&flood) => Event::Flood,
            _ = &mut shutting_down, if !ending => Event::Goaway(GoawayReason::Shutdown),
            () = std::future::ready(()), if already && !ending => Event::Goaway(GoawayReason::Shutdown),
            () = &mut deadline => match (ending, streams.is_empty()) {
                (true, _) => Event::Ended(None),
                (false, true) => Event::Goaway(GoawayReason::Idle),
                (false, false) => Event::StreamDone,
            },
            Some(()) = streams.next(), if !streams.is_empty() => Event::StreamDone,
            accepted = conn.accept() => match accepted {
                Some(Ok(accepted)) => Event::Stream(Box::new(accepted)),
                Some(Err(e)) => Event::Ended(Some(e)),
                None => Event::Ended(None),
            },
        };
        match event {
            Event::StreamDone => {
                if streams.is_empty() && !ending {
                    deadline.as_mut().reset(Instant::now() + keepalive);
                }
            }
            Event::Stream(accepted) => {
                let (req, respond) = *accepted;
                streams.push(Box::pin(super::stream::serve(ctx.clone(), req, respond)));
            }
            Event::Ended(error) => {
                if let Some(e) = error {
                    count_end(&shared, &e, peer);
                }
                break;
            }
            Event::Flood => {
                let kind = flood.get().map_or("", |f| f.name());
                tracing::info!(%peer, "HTTP/2 {kind} flood: GOAWAY");
                shared.h2.goaway(GoawayReason::ControlFlood);
                conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                // Taken: the client's bytes are no longer read, and the GOAWAY is written.
                flood.set(None);
                drive_out(&mut conn).await;
                break;
            }
            Event::Goaway(why) => {
                shared.h2.goaway(why);
                conn.graceful_shutdown();
                ending = true;
                deadline.as_mut().reset(Instant::now() + shared.config().limits.drain_timeout());
            }
        }
    }
}

/// The h2 server configuration from the switch's limits and `[http2]`.
fn builder(shared: &Shared) -> Builder {
    let s = &shared.config().http2;
    let mut b = Builder::new();
    b.max_concurrent_streams(s.max_concurrent_streams)
        .initial_window_size(s.stream_window_bytes)
        .initial_connection_window_size(s.connection_window_bytes)
        .max_header_list_size(shared.config().limits.max_head_bytes as u32)
        .max_send_buffer_size(MAX_SEND_BUFFER)
        .max_local_error_reset_streams(Some(s.max_stream_errors));
    b
}

/// Resolves once the connection's `H2Io` has posted a flood.
async fn flood_found(flag: &FloodFlag) {
    std::future::poll_fn(|_| {
        if flag.get().is_some() { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
    })
    .await
}

/// Let h2 write the GOAWAY it owes, for at most `ABUSE_GRACE`.
async fn drive_out(conn: &mut Connection<H2Io, Bytes>) {
    let _ = timeout(ABUSE_GRACE, std::future::poll_fn(|cx| conn.poll_closed(cx))).await;
}

/// Count how a connection ended with an error: a GOAWAY h2 sent for abuse or a protocol
/// error, or one the client sent.
fn count_end(shared: &Shared, e: &h2::Error, peer: SocketAddr) {
    if !e.is_go_away() {
        return tracing::debug!(%peer, "HTTP/2 connection ended: {e}");
    }
    let why = match (e.is_remote(), e.reason()) {
        (true, _) => GoawayReason::FromClient,
        (false, Some(h2::Reason::ENHANCE_YOUR_CALM)) => GoawayReason::TooManyErrors,
        (false, _) => GoawayReason::ProtocolError,
    };
    tracing::debug!(%peer, "HTTP/2 GOAWAY ({}): {e}", why.name());
    shared.h2.goaway(why);
}
