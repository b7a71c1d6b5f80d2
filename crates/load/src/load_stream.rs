//! What a simulated client's connection runs over: the TCP socket, or a TLS session on it
//! (`https://` targets; rustls through `locus_tls::TlsStream`), with the non-blocking writes
//! and the reads the connection loop uses (and `AsyncWrite` for HTTP/2's codec), and the client
//! TLS settings of a run (the certificate to trust, whether sessions are resumed with tickets,
//! the ALPN protocol offered).

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use locus_tls::TlsStream;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::error::LoadError;

/// A client connection's byte stream.
pub enum LoadStream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

/// How a run speaks TLS to a server: the client configuration and the name it asks for.
#[derive(Clone, Debug)]
pub struct TlsTarget {
    pub config: Arc<rustls::ClientConfig>,
    pub name: ServerName<'static>,
    /// Sessions are resumed (`--resume`).
    pub resume: bool,
}

/// Tickets one simulated client keeps per server (a browser keeps a few).
const TICKETS_PER_CLIENT: usize = 16;

impl TlsTarget {
    /// The target as one simulated client sees it: with resumption, a session store of its
    /// own, as every browser has. One store shared by all connections would hold at most eight
    /// TLS 1.3 tickets per server name (rustls's bound), so with more connections than that
    /// most of them would find none and make a full handshake, a client artefact.
    pub fn for_one_client(&self) -> TlsTarget {
        if !self.resume {
            return self.clone();
        }
        let mut config = (*self.config).clone();
        config.resumption = rustls::client::Resumption::in_memory_sessions(TICKETS_PER_CLIENT);
        TlsTarget { config: Arc::new(config), ..self.clone() }
    }
}

/// The client configuration of a run: trust the certificates in `ca` (PEM: the servers' own
/// self-signed certificates, or the CA that signed them), offer HTTP/1.1 and `suite` alone if
/// named, and resume sessions with tickets only when `resume` (otherwise every connection is
/// a full handshake).
pub fn client_config(
    ca: &Path,
    resume: bool,
    suite: Option<&str>,
) -> Result<Arc<rustls::ClientConfig>, LoadError> {
    client_config_offering(ca, resume, suite, locus_tls::ALPN_HTTP1)
}

/// `client_config` offering `alpn` (`h2` for HTTP/2) instead of HTTP/1.1.
pub(crate) fn client_config_offering(
    ca: &Path,
    resume: bool,
    suite: Option<&str>,
    alpn: &[u8],
) -> Result<Arc<rustls::ClientConfig>, LoadError> {
    let bad = |message: String| LoadError::Tls { path: ca.display().to_string(), message };
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca).map_err(|e| bad(e.to_string()))?;
    for cert in certs {
        roots.add(cert.map_err(|e| bad(e.to_string()))?).map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("no certificate in the file".into()));
    }
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(name) = suite {
        provider.cipher_suites.retain(|s| s.suite().as_str() == Some(name));
        if provider.cipher_suites.is_empty() {
            let known: Vec<&str> = rustls::crypto::ring::DEFAULT_CIPHER_SUITES
                .iter()
                .filter_map(|s| s.suite().as_str())
                .collect();
            return Err(LoadError::config(format!(
                "unknown TLS suite `{name}`: use one of {}",
                known.join(", ")
            )));
        }
    }
    let provider = Arc::new(provider);
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    if !resume {
        config.resumption = rustls::client::Resumption::disabled();
    }
    Ok(Arc::new(config))
}

impl LoadStream {
    /// Write from `data` without waiting: the bytes taken (TLS may queue some; see
    /// `try_flush`), `WouldBlock` when none were.
    pub fn try_write(&mut self, data: &[u8]) -> io::Result<usize> {
        match self {
            LoadStream::Plain(s) => s.try_write(data),
            LoadStream::Tls(t) => t.try_write(data),
        }
    }

    /// Send what TLS still queues: `WouldBlock` while some remains.
    pub fn try_flush(&mut self) -> io::Result<()> {
        match self {
            LoadStream::Plain(_) => Ok(()),
            LoadStream::Tls(t) => t.try_flush(),
        }
    }

    /// Whether bytes taken by a write are not sent yet.
    pub fn has_queued_output(&self) -> bool {
        match self {
            LoadStream::Plain(_) => false,
            LoadStream::Tls(t) => t.has_queued_output(),
        }
    }

    pub async fn writable(&self) -> io::Result<()> {
        match self {
            LoadStream::Plain(s) => s.writable().await,
            LoadStream::Tls(t) => t.writable().await,
        }
    }
}

impl AsyncRead for LoadStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LoadStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            LoadStream::Tls(t) => Pin::new(&mut **t).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for LoadStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            LoadStream::Plain(s) => Pin::new(s).poll_write(cx, data),
            LoadStream::Tls(t) => Pin::new(&mut **t).poll_write(cx, data),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            LoadStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, data),
            LoadStream::Tls(t) => Pin::new(&mut **t).poll_write_vectored(cx, data),
        }
    }

    fn is_write_vectored(&self) -> bool {
        matches!(self, LoadStream::Plain(_))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LoadStream::Plain(s) => Pin::new(s).poll_flush(cx),
            LoadStream::Tls(t) => Pin::new(&mut **t).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            LoadStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            LoadStream::Tls(t) => Pin::new(&mut **t).poll_shutdown(cx),
        }
    }
}
