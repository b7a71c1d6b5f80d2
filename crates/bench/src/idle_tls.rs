//! Idle TLS keep-alive connections: open many HTTPS connections to a server (each a full
//! handshake and one request, so it is a real keep-alive session), hold them all on a runtime
//! kept alive for as long as they are held, and let the caller read the server's memory.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use locus_tls::TlsStream;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

/// Handshakes in flight at once while opening.
const OPENING_AT_ONCE: usize = 64;
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// The held connections; dropping this closes them.
pub struct IdleTlsConnections {
    pub held: usize,
    /// Why fewer than asked for are held (the first failure), if they are: a server at its
    /// connection limit stops taking more.
    pub stopped: Option<String>,
    _streams: Vec<TlsStream>,
    _runtime: tokio::runtime::Runtime,
}

/// Open `n` HTTPS connections to `addr` for `name`, each completing `GET path`, and hold them.
pub fn hold_idle_tls_connections(
    addr: SocketAddr,
    path: &str,
    n: usize,
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
) -> anyhow::Result<IdleTlsConnections> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n");
    let streams = runtime.block_on(async {
        let gate = Arc::new(Semaphore::new(OPENING_AT_ONCE));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..n {
            let (gate, config, name, request) = (gate.clone(), config.clone(), name.clone(), request.clone());
            tasks.spawn(async move {
                let _permit = gate.acquire_owned().await.context("the opening gate closed")?;
                open_one(addr, config, name, &request).await.with_context(|| format!("connection {i} of {n}"))
            });
        }
        let (mut streams, mut stopped) = (Vec::with_capacity(n), None);
        while let Some(done) = tasks.join_next().await {
            match done? {
                Ok(s) => streams.push(s),
                Err(e) => {
                    stopped.get_or_insert_with(|| format!("{e:#}"));
                }
            }
        }
        anyhow::Ok((streams, stopped))
    })?;
    let (streams, stopped) = streams;
    if streams.is_empty() {
        bail!("no idle TLS connection to {addr} could be opened: {}", stopped.unwrap_or_default());
    }
    Ok(IdleTlsConnections { held: streams.len(), stopped, _streams: streams, _runtime: runtime })
}

/// One connection: handshake, one request, its whole response (Content-Length framed).
async fn open_one(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
    request: &str,
) -> anyhow::Result<TlsStream> {
    let deadline = tokio::time::Instant::now() + STEP_TIMEOUT;
    let tcp = tokio::time::timeout_at(deadline, tokio::net::TcpStream::connect(addr)).await??;
    let mut s = locus_tls::connect(tcp, config, name, deadline).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    s.write_all(request.as_bytes()).await?;
    s.flush().await?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout_at(deadline, s.read(&mut chunk)).await??;
        if n == 0 {
            bail!("closed before the response ended");
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200") {
                bail!("answered {}", head.lines().next().unwrap_or(""));
            }
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .context("no Content-Length")?;
            if buf.len() >= end + 4 + len {
                return Ok(s);
            }
        }
    }
}
