//! The load of `locus bench reload`: blocking client threads of two kinds, bounded in time —
//! new-connection clients (one request per connection, `Connection: close`, paced) and
//! keep-alive clients (one connection each, a request every think time) — that count every
//! outcome by kind and never retry: a request that does not get a complete 2xx is failed; a
//! reset (ECONNRESET, EPIPE, or EOF before the response is complete) is counted as such; a
//! keep-alive connection found closed while idle (checked just before each request) is
//! counted apart and replaced by a new connection, no request having been sent on it.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Socket timeouts of every client (connect, read, write).
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How the clients reach the server under test.
#[derive(Clone)]
pub struct Target {
    pub addr: SocketAddr,
    /// HTTPS: the client configuration and the name to ask for.
    pub tls: Option<(Arc<rustls::ClientConfig>, rustls::pki_types::ServerName<'static>)>,
    /// Paths requested, drawn in turn (each client starting at its own offset).
    pub paths: Arc<Vec<String>>,
}

/// The load's shape.
#[derive(Clone, Copy, Debug)]
pub struct LoadShape {
    /// New connections per second, over all new-connection clients.
    pub new_conn_rate: u32,
    pub new_conn_clients: u32,
    pub keepalive_clients: u32,
    /// Pause between a keep-alive client's response and its next request.
    pub think: Duration,
}

/// A request that failed, for the run's failure log.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    /// `new-conn` or `keepalive`.
    pub client: &'static str,
    /// When the request started (its connection opened, or it was sent on a kept one), in
    /// ms since the load started.
    pub at_ms: f64,
    /// How long it had been under way when it failed, in ms.
    pub after_ms: f64,
    /// Sent on a connection that had answered before.
    pub reused: bool,
    pub error: String,
}

/// Failures kept in a run's log at most.
const FAILURES_KEPT: usize = 10_000;

/// One kind's counts (atomics, shared by its threads) and its failure log.
pub struct KindCounters {
    client: &'static str,
    epoch: Instant,
    failures: std::sync::Mutex<Vec<Failure>>,
    /// When keep-alive connections were found closed while idle, in ms since the epoch.
    idle_closes: std::sync::Mutex<Vec<f64>>,
    requests: AtomicU64,
    ok: AtomicU64,
    resets: AtomicU64,
    refused: AtomicU64,
    timeouts: AtomicU64,
    bad_status: AtomicU64,
    other: AtomicU64,
    /// Keep-alive only: connections found closed by the server while idle.
    closed_idle: AtomicU64,
    /// Keep-alive only: responses that said `Connection: close` (the server ends the
    /// connection after a complete answer).
    close_header: AtomicU64,
}

/// One kind's counts at the end of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KindCounts {
    pub requests: u64,
    pub ok: u64,
    /// Requests without a complete 2xx: `requests - ok`.
    pub failed: u64,
    /// ECONNRESET, EPIPE, or EOF before a complete response (a part of `failed`).
    pub resets: u64,
    /// Connections refused (a part of `failed`).
    pub refused: u64,
    pub timeouts: u64,
    pub bad_status: u64,
    pub other: u64,
    pub closed_idle: u64,
    pub close_header: u64,
}

impl KindCounters {
    fn new(client: &'static str, epoch: Instant) -> KindCounters {
        KindCounters {
            client,
            epoch,
            failures: std::sync::Mutex::new(Vec::new()),
            idle_closes: std::sync::Mutex::new(Vec::new()),
            requests: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            bad_status: AtomicU64::new(0),
            other: AtomicU64::new(0),
            closed_idle: AtomicU64::new(0),
            close_header: AtomicU64::new(0),
        }
    }

    /// The failures logged so far (at most [`FAILURES_KEPT`]).
    pub fn failures(&self) -> Vec<Failure> {
        self.failures.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// When keep-alive connections were found closed while idle (at most [`FAILURES_KEPT`]).
    pub fn idle_closes(&self) -> Vec<f64> {
        self.idle_closes.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Count a keep-alive connection found closed while idle.
    fn count_idle_close(&self) {
        self.closed_idle.fetch_add(1, Relaxed);
        if let Ok(mut log) = self.idle_closes.lock()
            && log.len() < FAILURES_KEPT
        {
            log.push(self.epoch.elapsed().as_secs_f64() * 1e3);
        }
    }

    fn snapshot(&self) -> KindCounts {
        let (requests, ok) = (self.requests.load(Relaxed), self.ok.load(Relaxed));
        KindCounts {
            requests,
            ok,
            failed: requests - ok,
            resets: self.resets.load(Relaxed),
            refused: self.refused.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
            bad_status: self.bad_status.load(Relaxed),
            other: self.other.load(Relaxed),
            closed_idle: self.closed_idle.load(Relaxed),
            close_header: self.close_header.load(Relaxed),
        }
    }

    /// Count a request that started at `started` (on a kept connection when `reused`);
    /// log it if it failed, with `error`.
    fn count(&self, outcome: &Outcome, error: &str, started: Instant, reused: bool) {
        self.requests.fetch_add(1, Relaxed);
        if !matches!(outcome, Outcome::Ok { .. })
            && let Ok(mut log) = self.failures.lock()
            && log.len() < FAILURES_KEPT
        {
            log.push(Failure {
                client: self.client,
                at_ms: started.duration_since(self.epoch).as_secs_f64() * 1e3,
                after_ms: started.elapsed().as_secs_f64() * 1e3,
                reused,
                error: error.to_string(),
            });
        }
        let counter = match outcome {
            Outcome::Ok { .. } => &self.ok,
            Outcome::Reset => &self.resets,
            Outcome::Refused => &self.refused,
            Outcome::Timeout => &self.timeouts,
            Outcome::Status => &self.bad_status,
            Outcome::Other => &self.other,
        };
        counter.fetch_add(1, Relaxed);
    }
}

/// What became of one request.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// A complete 2xx; `close` when the server said it closes the connection.
    Ok {
        close: bool,
    },
    Reset,
    Refused,
    Timeout,
    Status,
    Other,
}

fn outcome_of(e: &std::io::Error) -> Outcome {
    match e.kind() {
        ErrorKind::ConnectionReset
        | ErrorKind::BrokenPipe
        | ErrorKind::UnexpectedEof
        | ErrorKind::ConnectionAborted => Outcome::Reset,
        ErrorKind::ConnectionRefused => Outcome::Refused,
        ErrorKind::TimedOut | ErrorKind::WouldBlock => Outcome::Timeout,
        _ => Outcome::Other,
    }
}

/// The running load: its threads, stopped and counted by `finish`.
pub struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    new_conn: Arc<KindCounters>,
    keepalive: Arc<KindCounters>,
}

impl Load {
    /// Start the clients (on the calling thread's network namespace: threads inherit it);
    /// failures are logged with their time since `epoch`.
    pub fn start(target: &Target, shape: LoadShape, seed: u64, epoch: Instant) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let new_conn = Arc::new(KindCounters::new("new-conn", epoch));
        let keepalive = Arc::new(KindCounters::new("keepalive", epoch));
        let mut threads = Vec::new();
        let per_client = f64::from(shape.new_conn_rate.max(1)) / f64::from(shape.new_conn_clients.max(1));
        let interval = Duration::from_secs_f64(1.0 / per_client);
        for i in 0..shape.new_conn_clients {
            let (t, s, c) = (target.clone(), stop.clone(), new_conn.clone());
            let offset = seed as usize * 7919 + i as usize * 104_729;
            threads.push(std::thread::spawn(move || new_conn_client(&t, &s, &c, interval, offset)));
        }
        for i in 0..shape.keepalive_clients {
            let (t, s, c) = (target.clone(), stop.clone(), keepalive.clone());
            let offset = seed as usize * 6007 + i as usize * 15_485_863;
            threads.push(std::thread::spawn(move || keepalive_client(&t, &s, &c, shape.think, offset)));
        }
        Load { stop, threads, new_conn, keepalive }
    }

    /// Stop the clients (each finishes the request it is in) and return the counts of both
    /// kinds and their logs.
    pub fn finish(self) -> Finished {
        self.stop.store(true, Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        Finished {
            new_conn: self.new_conn.snapshot(),
            keepalive: self.keepalive.snapshot(),
            failures: [self.new_conn.failures(), self.keepalive.failures()].concat(),
            idle_closes: self.keepalive.idle_closes(),
        }
    }
}

/// What the load counted and logged.
pub struct Finished {
    pub new_conn: KindCounts,
    pub keepalive: KindCounts,
    pub failures: Vec<Failure>,
    /// When keep-alive connections were found closed while idle, ms since the epoch.
    pub idle_closes: Vec<f64>,
}

/// A client connection, cleartext or TLS.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Conn {
    fn open(target: &Target) -> std::io::Result<Conn> {
        let tcp = TcpStream::connect_timeout(&target.addr, IO_TIMEOUT)?;
        tcp.set_read_timeout(Some(IO_TIMEOUT))?;
        tcp.set_write_timeout(Some(IO_TIMEOUT))?;
        tcp.set_nodelay(true)?;
        Ok(match &target.tls {
            None => Conn::Plain(tcp),
            Some((config, name)) => {
                let session = rustls::ClientConnection::new(config.clone(), name.clone())
                    .map_err(std::io::Error::other)?;
                Conn::Tls(Box::new(rustls::StreamOwned::new(session, tcp)))
            }
        })
    }

    /// Whether the server has closed (or reset, or written to) the connection while it was
    /// idle, read without blocking; over TLS, records that keep the session (a ticket) are
    /// taken in, and an alert, a close or any plaintext counts as closed.
    fn closed_while_idle(&mut self) -> bool {
        let closed = match self {
            Conn::Plain(tcp) => {
                if tcp.set_nonblocking(true).is_err() {
                    return true;
                }
                let mut byte = [0u8; 1];
                match tcp.peek(&mut byte) {
                    Ok(_) => true, // EOF, or bytes nobody asked for (an error page)
                    Err(e) => e.kind() != ErrorKind::WouldBlock,
                }
            }
            Conn::Tls(t) => {
                if t.sock.set_nonblocking(true).is_err() {
                    return true;
                }
                tls_closed_while_idle(t)
            }
        };
        let tcp = match self {
            Conn::Plain(s) => &*s,
            Conn::Tls(t) => &t.sock,
        };
        closed || tcp.set_nonblocking(false).is_err()
    }
}

/// Take in what a TLS server sent while the connection was idle (its socket non-blocking):
/// closed on EOF, an error, an alert or a close, or plaintext nobody asked for.
fn tls_closed_while_idle(t: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>) -> bool {
    loop {
        match t.conn.read_tls(&mut t.sock) {
            Ok(0) => return true,
            Ok(_) => match t.conn.process_new_packets() {
                Ok(state) if state.peer_has_closed() || state.plaintext_bytes_to_read() > 0 => return true,
                Ok(_) => {}
                Err(_) => return true,
            },
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(t) => t.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(t) => t.flush(),
        }
    }
}

/// Send `GET path` on `conn` and read the whole response: the outcome, and what went wrong
/// (empty when nothing did).
fn exchange(conn: &mut Conn, path: &str, keepalive: bool) -> (Outcome, String) {
    let connection = if keepalive { "keep-alive" } else { "close" };
    let request = format!("GET {path} HTTP/1.1\r\nHost: locus.test\r\nConnection: {connection}\r\n\r\n");
    if let Err(e) = conn.write_all(request.as_bytes()).and_then(|()| conn.flush()) {
        return (outcome_of(&e), format!("write: {e}"));
    }
    match read_response(conn) {
        Ok(head) if (200..300).contains(&head.status) => (Outcome::Ok { close: head.close }, String::new()),
        Ok(head) => (Outcome::Status, format!("status {}", head.status)),
        Err(e) => (outcome_of(&e), format!("read: {e}")),
    }
}

/// What the client needs of a response head.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    status: u16,
    close: bool,
}

/// Read one response (head and a `Content-Length` body); EOF before its end is
/// `UnexpectedEof`.
fn read_response(conn: &mut impl Read) -> std::io::Result<Head> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let (head, length) =
        parse_head(&buf[..head_end]).ok_or_else(|| std::io::Error::other("bad response head"))?;
    let mut remaining = length.saturating_sub((buf.len() - head_end) as u64);
    while remaining > 0 {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        remaining = remaining.saturating_sub(n as u64);
    }
    Ok(head)
}

/// The status, `Connection: close` and the body's length (`Content-Length`, 0 without).
fn parse_head(head: &[u8]) -> Option<(Head, u64)> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let (mut close, mut length) = (false, 0);
    for line in lines {
        let Some((name, value)) = line.split_once(':') else { continue };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_ascii_lowercase());
        if name == "content-length" {
            length = value.parse().ok()?;
        } else if name == "connection" && value.contains("close") {
            close = true;
        }
    }
    Some((Head { status, close }, length))
}

/// One request per connection, one every `interval` (no catching up after a slow one).
fn new_conn_client(
    target: &Target,
    stop: &AtomicBool,
    counts: &KindCounters,
    interval: Duration,
    offset: usize,
) {
    let mut next = Instant::now();
    let mut i = offset;
    while !stop.load(Relaxed) {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next = next.max(now) + interval;
        i += 1;
        let path = &target.paths[i % target.paths.len()];
        let started = Instant::now();
        let (outcome, error) = match Conn::open(target) {
            Ok(mut conn) => exchange(&mut conn, path, false),
            Err(e) => (outcome_of(&e), format!("connect: {e}")),
        };
        counts.count(&outcome, &error, started, false);
    }
}

/// One keep-alive connection at a time, a request every `think`; a connection found closed
/// while idle is counted and replaced, a failed request's connection is dropped.
fn keepalive_client(
    target: &Target,
    stop: &AtomicBool,
    counts: &KindCounters,
    think: Duration,
    offset: usize,
) {
    let mut conn: Option<Conn> = None;
    let mut i = offset;
    while !stop.load(Relaxed) {
        if conn.as_mut().is_some_and(Conn::closed_while_idle) {
            counts.count_idle_close();
            conn = None;
        }
        let reused = conn.is_some();
        let mut open = match conn.take() {
            Some(c) => c,
            None => match Conn::open(target) {
                Ok(c) => c,
                Err(e) => {
                    counts.count(&outcome_of(&e), &format!("connect: {e}"), Instant::now(), false);
                    std::thread::sleep(think);
                    continue;
                }
            },
        };
        i += 1;
        let started = Instant::now();
        let (outcome, error) = exchange(&mut open, &target.paths[i % target.paths.len()], true);
        counts.count(&outcome, &error, started, reused);
        match outcome {
            Outcome::Ok { close: false } => conn = Some(open),
            Outcome::Ok { close: true } => {
                counts.close_header.fetch_add(1, Relaxed);
            }
            _ => {}
        }
        std::thread::sleep(think);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_read_to_its_length_and_an_early_eof_is_a_reset() {
        let full = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
        let head = read_response(&mut &full[..]).unwrap();
        assert_eq!(head, Head { status: 200, close: true });
        let cut = &full[..full.len() - 2];
        let e = read_response(&mut &cut[..]).unwrap_err();
        assert_eq!(outcome_of(&e), Outcome::Reset);
        assert_eq!(outcome_of(&read_response(&mut &b""[..]).unwrap_err()), Outcome::Reset);
        let s = read_response(&mut &b"HTTP/1.1 503 No\r\ncontent-length: 0\r\n\r\n"[..]).unwrap();
        assert_eq!(s, Head { status: 503, close: false });
    }

    #[test]
    fn io_errors_map_to_the_outcomes_counted() {
        let of = |k: ErrorKind| outcome_of(&std::io::Error::from(k));
        assert_eq!(of(ErrorKind::ConnectionReset), Outcome::Reset);
        assert_eq!(of(ErrorKind::BrokenPipe), Outcome::Reset);
        assert_eq!(of(ErrorKind::ConnectionRefused), Outcome::Refused);
        assert_eq!(of(ErrorKind::WouldBlock), Outcome::Timeout);
        assert_eq!(of(ErrorKind::NotFound), Outcome::Other);
    }
}
