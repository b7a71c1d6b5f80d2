//! An HTTP/2 server on 127.0.0.1 for the load generator's tests, on the h2 crate's server
//! side: cleartext h2c (prior knowledge) or TLS with the ALPN protocols a test gives, serving
//! documents from memory — or misbehaving on purpose (`Misbehaviour`) — and noting the most
//! streams it had open at once on one connection. One thread with its own runtime; stopped and
//! joined on drop.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use http::{Method, Request, Response};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// How the server answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Misbehaviour {
    /// The documents, byte for byte (404 for any other path).
    None,
    /// The right length with the first byte changed.
    WrongBytes,
    /// Reset every `n`-th request's stream (counted over the server) instead of answering.
    ResetEvery(u64),
    /// After `n` requests on a connection, a GOAWAY at once (its streams in flight are lost).
    GoAwayAfter(u64),
    /// Never answer requests for this path (the stream stays open).
    Silent(String),
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub requests: AtomicU64,
    pub connections: AtomicU64,
    /// The most streams open at once on one connection.
    pub max_streams: AtomicUsize,
}

struct State {
    docs: HashMap<String, Bytes>,
    misbehaviour: Misbehaviour,
    /// Each answer waits this long, so that a client's streams overlap.
    delay: Duration,
    tls: Option<Arc<rustls::ServerConfig>>,
    seen: Arc<Seen>,
}

pub struct H2Server {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    tls: bool,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl H2Server {
    /// Serve `docs` (path → body), answering each request after `delay`, over TLS when
    /// `tls` is given.
    pub fn start(
        docs: HashMap<String, Vec<u8>>,
        misbehaviour: Misbehaviour,
        delay: Duration,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> H2Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let docs = docs.into_iter().map(|(k, v)| (k, Bytes::from(v))).collect();
        let is_tls = tls.is_some();
        let state = Arc::new(State { docs, misbehaviour, delay, tls, seen: seen.clone() });
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                accept_loop(TcpListener::from_std(listener).unwrap(), state, stopped).await;
            });
        });
        H2Server { addr, seen, tls: is_tls, stop: Some(stop), thread: Some(thread) }
    }

    /// The URL of `path` on this server (`https://localhost:…` over TLS).
    pub fn url(&self, path: &str) -> String {
        if self.tls {
            format!("https://localhost:{}{path}", self.addr.port())
        } else {
            format!("http://{}{path}", self.addr)
        }
    }

    pub fn max_streams(&self) -> usize {
        self.seen.max_streams.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> u64 {
        self.seen.requests.load(Ordering::SeqCst)
    }

    pub fn connections(&self) -> u64 {
        self.seen.connections.load(Ordering::SeqCst)
    }
}

impl Drop for H2Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, mut stopped: oneshot::Receiver<()>) {
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            a = listener.accept() => a,
        };
        if let Ok((tcp, _)) = accepted {
            tokio::spawn(serve_tcp(tcp, state.clone()));
        }
    }
}

async fn serve_tcp(tcp: TcpStream, state: Arc<State>) {
    // A second handle keeps the socket open once the server is done with it, until the client
    // closes its end: closing with the client's bytes unread would reset the connection, and a
    // reset can destroy what was sent last (a TLS alert, a GOAWAY) before the client reads it.
    let Ok(socket) = tcp.into_std() else { return };
    let Ok(spare) = socket.try_clone() else { return };
    let Ok(tcp) = TcpStream::from_std(socket) else { return };
    match &state.tls {
        None => serve(tcp, state.clone()).await,
        Some(config) => {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            if let Ok(tls) = locus_tls::accept(tcp, config.clone(), deadline).await {
                serve(tls, state.clone()).await;
            }
        }
    }
    drain(spare).await;
}

/// Read and drop what the client still sends until it closes (for two seconds at most).
async fn drain(spare: std::net::TcpStream) {
    let Ok(mut tcp) = TcpStream::from_std(spare) else { return };
    let mut buf = [0u8; 4096];
    let until_closed = async { while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(Duration::from_secs(2), until_closed).await;
}

/// One HTTP/2 connection: every request answered by a task of its own.
async fn serve<T: AsyncRead + AsyncWrite + Unpin>(io: T, state: Arc<State>) {
    let Ok(mut connection) = h2::server::handshake(io).await else { return };
    state.seen.connections.fetch_add(1, Ordering::SeqCst);
    let open = Arc::new(AtomicUsize::new(0));
    let mut served = 0;
    while let Some(Ok((request, respond))) = connection.accept().await {
        served += 1;
        let n = state.seen.requests.fetch_add(1, Ordering::SeqCst) + 1;
        if state.misbehaviour == Misbehaviour::GoAwayAfter(served) {
            connection.abrupt_shutdown(h2::Reason::NO_ERROR);
        }
        let now_open = open.fetch_add(1, Ordering::SeqCst) + 1;
        state.seen.max_streams.fetch_max(now_open, Ordering::SeqCst);
        let (state, open) = (state.clone(), open.clone());
        tokio::spawn(async move {
            answer(&request, respond, n, &state).await;
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// Answer request number `n` (over the whole server) as the misbehaviour says.
async fn answer(request: &Request<h2::RecvStream>, mut respond: SendResponse<Bytes>, n: u64, state: &State) {
    tokio::time::sleep(state.delay).await;
    let path = request.uri().path();
    match &state.misbehaviour {
        Misbehaviour::ResetEvery(k) if n.is_multiple_of(*k) => {
            return respond.send_reset(h2::Reason::INTERNAL_ERROR);
        }
        Misbehaviour::Silent(p) if p == path => return tokio::time::sleep(Duration::from_secs(60)).await,
        _ => {}
    }
    let (status, mut body) = match state.docs.get(path) {
        Some(doc) => (200, doc.to_vec()),
        None => (404, b"not found\n".to_vec()),
    };
    if state.misbehaviour == Misbehaviour::WrongBytes && !body.is_empty() {
        body[0] ^= 0xff;
    }
    let head = Response::builder().status(status).header("content-length", body.len()).body(()).unwrap();
    let head_only = request.method() == Method::HEAD || body.is_empty();
    let Ok(mut stream) = respond.send_response(head, head_only) else { return };
    if !head_only {
        let _ = stream.send_data(Bytes::from(body), true);
    }
}
