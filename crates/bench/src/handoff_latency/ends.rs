//! The two ends of a measured connection in `locus bench handoff`: cleartext, or with `--tls`
//! a TLS 1.3 session (ECDSA P-256 certificate made for the run, `TLS13_AES_128_GCM_SHA256`)
//! that the switch accepts to hand over (`accept_exportable`) and the node continues after
//! the restore (`TlsStream::continued`). Each thread drives its sessions in a runtime of its
//! own; the client checks the node's response through its session.

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use locus_tls::TlsStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

use super::LatencyError;

/// The suite the client offers (the one every TLS figure of the benches uses).
const SUITE: &str = "TLS13_AES_128_GCM_SHA256";
/// The name on the certificate.
const SERVER_NAME: &str = "handoff.locus.test";
/// How long one read of a check may wait.
const READ_LIMIT: Duration = Duration::from_secs(5);

/// The TLS configurations of a `--tls` run (the certificate's folder lives as long).
pub struct TlsSetup {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
    _dir: tempfile::TempDir,
}

impl TlsSetup {
    /// A certificate for the run, and the server and client configurations trusting it.
    pub fn new() -> Result<TlsSetup, LatencyError> {
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            LatencyError::Protocol(format!("TLS set-up, {what}: {e}"))
        };
        let dir = tempfile::tempdir().map_err(|e| LatencyError::io("TLS scratch folder", e))?;
        let files = locus_rig::servers::write_tls_files(
            dir.path(),
            locus_rig::servers::CertKind::EcdsaP256,
            SERVER_NAME,
        )
        .map_err(|e| fail("certificate", &e))?;
        let server = locus_tls::TlsSettings::single(files.cert.clone(), files.key)
            .load(&[locus_tls::ALPN_HTTP1], std::time::SystemTime::now())
            .map_err(|e| fail("server", &e))?;
        let client =
            locus_load::tls_client_config(&files.cert, false, Some(SUITE)).map_err(|e| fail("client", &e))?;
        Ok(TlsSetup { server, client, _dir: dir })
    }
}

/// One end of a connection.
pub enum End {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl End {
    /// Write `data` whole.
    pub fn write_all(&mut self, rt: &Runtime, data: &[u8]) -> std::io::Result<()> {
        match self {
            End::Plain(s) => s.write_all(data),
            End::Tls(t) => rt.block_on(async {
                t.write_all(data).await?;
                t.flush().await
            }),
        }
    }

    /// Read exactly `buf.len()` bytes, waiting at most `READ_LIMIT` per read.
    pub fn read_exact(&mut self, rt: &Runtime, buf: &mut [u8]) -> std::io::Result<()> {
        match self {
            End::Plain(s) => {
                s.set_read_timeout(Some(READ_LIMIT))?;
                s.read_exact(buf)
            }
            End::Tls(t) => rt.block_on(async {
                match tokio::time::timeout(READ_LIMIT, t.read_exact(buf)).await {
                    Ok(r) => r.map(|_| ()),
                    Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
                }
            }),
        }
    }

    /// The TCP socket (for the dump, and for the client's abortive close).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        match self {
            End::Plain(s) => s.as_fd(),
            End::Tls(t) => t.tcp().as_fd(),
        }
    }
}

/// A client connected to `service` and the switch's end of it (with the client's address),
/// over TLS when `tls` is given (the handshake done, both in `rt`).
pub fn connect_pair(
    rt: &Runtime,
    service: &TcpListener,
    service_addr: SocketAddrV4,
    tls: Option<&TlsSetup>,
) -> Result<(End, End, SocketAddrV4), LatencyError> {
    let client = TcpStream::connect(service_addr).map_err(|e| LatencyError::io("client connect", e))?;
    let (server, peer) = service.accept().map_err(|e| LatencyError::io("accept", e))?;
    let std::net::SocketAddr::V4(peer) = peer else {
        return Err(LatencyError::Protocol("IPv6 client on an IPv4 listener".into()));
    };
    // As the switch and the load generator do: no Nagle delay on the handshake's last flight.
    for s in [&client, &server] {
        s.set_nodelay(true).map_err(|e| LatencyError::io("TCP_NODELAY", e))?;
    }
    let Some(tls) = tls else { return Ok((End::Plain(client), End::Plain(server), peer)) };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let name = rustls::pki_types::ServerName::try_from(SERVER_NAME).expect("a DNS name").to_owned();
    let (client, server) = rt.block_on(async {
        let tokio_socket = |s: TcpStream| {
            s.set_nonblocking(true)?;
            tokio::net::TcpStream::from_std(s)
        };
        let client = tokio_socket(client).map_err(|e| LatencyError::io("client socket", e))?;
        let server = tokio_socket(server).map_err(|e| LatencyError::io("switch socket", e))?;
        let (c, s) = tokio::join!(
            locus_tls::connect(client, Arc::clone(&tls.client), name, deadline),
            locus_tls::accept_exportable(server, &tls.server, deadline)
        );
        let handshake =
            |e: locus_tls::HandshakeFailure| LatencyError::Protocol(format!("TLS handshake: {e}"));
        Ok::<_, LatencyError>((c.map_err(handshake)?, s.map_err(handshake)?))
    })?;
    Ok((End::Tls(Box::new(client)), End::Tls(Box::new(server)), peer))
}

/// The node's end of a restored connection: the socket itself, or the TLS session `session`
/// continued on it (in `rt`).
pub fn continue_on(
    rt: &Runtime,
    stream: TcpStream,
    session: Option<Box<locus_tls::SessionExport>>,
) -> Result<End, String> {
    let Some(session) = session else { return Ok(End::Plain(stream)) };
    let _inside = rt.enter();
    stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    let tcp = tokio::net::TcpStream::from_std(stream).map_err(|e| e.to_string())?;
    TlsStream::continued(tcp, *session).map(|t| End::Tls(Box::new(t))).map_err(|e| e.to_string())
}
