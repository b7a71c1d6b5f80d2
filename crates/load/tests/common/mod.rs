//! A scripted HTTP/1.1 server on 127.0.0.1 for the integration tests: it answers each
//! request with whatever a test's responder says (right or wrong), and logs what it saw —
//! connections, each connection's requests in order, and how many requests arrived before
//! it answered (to observe pipelining). Threads only; stopped and joined on drop.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One request as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenRequest {
    pub method: String,
    pub target: String,
    pub connection_close: bool,
}

/// One connection's requests, the sizes of the batches it answered, and how many of those
/// were answered because the wait for a full batch ran out.
#[derive(Clone, Debug, Default)]
pub struct SeenConnection {
    pub requests: Vec<SeenRequest>,
    pub batches: Vec<usize>,
    pub cut_short: usize,
}

/// What the server answers.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    /// Content-Length to send instead of the body's length.
    pub content_length: Option<usize>,
    /// Wait this long before answering.
    pub delay: Duration,
}

impl Reply {
    pub fn ok(body: Vec<u8>) -> Reply {
        Reply { status: 200, body, content_length: None, delay: Duration::ZERO }
    }

    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            body: format!("{status}\n").into_bytes(),
            content_length: None,
            delay: Duration::ZERO,
        }
    }
}

pub type Responder = Arc<dyn Fn(&SeenRequest) -> Reply + Send + Sync>;

/// Serve the files under `root` (404 for anything else).
pub fn file_responder(root: &Path) -> Responder {
    let root: PathBuf = root.to_path_buf();
    Arc::new(move |req: &SeenRequest| {
        let path = req.target.split('?').next().unwrap_or("/");
        let path = if path.ends_with('/') { format!("{path}index.html") } else { path.to_string() };
        match std::fs::read(root.join(path.trim_start_matches('/'))) {
            Ok(body) => Reply::ok(body),
            Err(_) => Reply::status(404),
        }
    })
}

pub struct ScriptedServer {
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<SeenConnection>>>,
    thread: Option<JoinHandle<()>>,
}

impl ScriptedServer {
    /// Answer with `responder`; with `batch` > 1, wait (up to 300 ms) until that many
    /// requests are buffered before answering any of them.
    pub fn start(responder: Responder, batch: usize) -> ScriptedServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (stop2, log2) = (stop.clone(), log.clone());
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            // Blocking accepts; dropping the server wakes the last one with a connection.
            for stream in listener.incoming() {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let index = {
                    let mut l = log2.lock().unwrap();
                    l.push(SeenConnection::default());
                    l.len() - 1
                };
                let (stop, log, responder) = (stop2.clone(), log2.clone(), responder.clone());
                conns.push(std::thread::spawn(move || serve(stream, index, batch, &responder, &log, &stop)));
            }
            for c in conns {
                let _ = c.join();
            }
        });
        ScriptedServer { addr, stop, log, thread: Some(thread) }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn connections(&self) -> Vec<SeenConnection> {
        self.log.lock().unwrap().clone()
    }

    pub fn all_requests(&self) -> Vec<SeenRequest> {
        self.connections().into_iter().flat_map(|c| c.requests).collect()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn parse_requests(buf: &mut Vec<u8>, out: &mut Vec<SeenRequest>) {
    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let mut parts = lines.next().unwrap_or("").split(' ');
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let connection_close = lines.any(|l| {
            l.to_ascii_lowercase().starts_with("connection:") && l.to_ascii_lowercase().contains("close")
        });
        out.push(SeenRequest { method, target, connection_close });
    }
}

fn serve(
    mut stream: TcpStream,
    index: usize,
    batch: usize,
    responder: &Responder,
    log: &Mutex<Vec<SeenConnection>>,
    stop: &AtomicBool,
) {
    stream.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    let mut pending = Vec::new();
    let mut chunk = [0u8; 16384];
    let mut waiting_since: Option<Instant> = None;
    let mut eof = false;
    while !stop.load(Ordering::Relaxed) {
        match stream.read(&mut chunk) {
            Ok(0) => eof = true,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                parse_requests(&mut buf, &mut pending);
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => eof = true,
        }
        if pending.is_empty() {
            if eof {
                return;
            }
            continue;
        }
        let started = *waiting_since.get_or_insert_with(Instant::now);
        if pending.len() < batch && !eof && started.elapsed() < Duration::from_millis(300) {
            continue;
        }
        waiting_since = None;
        let cut_short = pending.len() < batch && !eof;
        let answered: Vec<SeenRequest> = std::mem::take(&mut pending);
        {
            let mut l = log.lock().unwrap();
            l[index].cut_short += usize::from(cut_short);
            l[index].batches.push(answered.len());
            l[index].requests.extend(answered.iter().cloned());
        }
        let mut out = Vec::new();
        let mut close = false;
        for req in &answered {
            let reply = responder(req);
            if !reply.delay.is_zero() {
                std::thread::sleep(reply.delay);
            }
            let len = reply.content_length.unwrap_or(reply.body.len());
            out.extend_from_slice(
                format!(
                    "HTTP/1.1 {} X\r\nContent-Length: {len}\r\n{}\r\n",
                    reply.status,
                    if req.connection_close { "Connection: close\r\n" } else { "" }
                )
                .as_bytes(),
            );
            if req.method != "HEAD" {
                out.extend_from_slice(&reply.body);
            }
            close |= req.connection_close;
        }
        if stream.write_all(&out).is_err() || close || eof {
            return;
        }
    }
}

/// A Locus-format trace file with these (client, method, target) records.
pub fn write_locus_trace(path: &Path, records: &[(u32, &str, &str)]) {
    let mut text = String::from("#locus-trace v1\n");
    for (i, (client, method, target)) in records.iter().enumerate() {
        text.push_str(&format!("{i}\t{client}\t{method}\t{target}\t0\t200\t-\n"));
    }
    std::fs::write(path, text).unwrap();
}
