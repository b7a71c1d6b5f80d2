//! `ControlChannel` and `ControlListener`: the authenticated, framed control connection over
//! TCP (tokio). The handshake runs inside `connect` / `accept`; then each message is one frame
//! `len u32 | seq u64 | payload | tag[16]`; frame size and waiting are bounded.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;
use zeroize::Zeroize;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};

use crate::control::auth::{
    ControlKey, FRAME_HEADER_LEN, FrameOpener, FrameSealer, GREETING, Handshake, NONCE_LEN, PROOF_LEN,
    TAG_LEN,
};
use crate::control::blocking::BlockingControlChannel;
use crate::control::message::HandoffMessage;
use crate::error::ControlError;

/// Limits of a control channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlConfig {
    /// Longest frame payload accepted or sent (a `HandOver` carries both socket queues).
    /// Default 16 MiB.
    pub max_frame_len: usize,
    /// Time for connecting and the whole handshake. Default 5 s.
    pub handshake_timeout: Duration,
    /// Time for one `send` to be written out. Default 5 s.
    pub send_timeout: Duration,
    /// Time `recv` waits for a message; `None` waits as long as the peer stays connected.
    /// Default `None`.
    pub recv_timeout: Option<Duration>,
}

impl Default for ControlConfig {
    fn default() -> ControlConfig {
        ControlConfig {
            max_frame_len: 16 << 20,
            handshake_timeout: Duration::from_secs(5),
            send_timeout: Duration::from_secs(5),
            recv_timeout: None,
        }
    }
}

/// An authenticated control connection to a peer (a node agent, or the switch).
pub struct ControlChannel {
    sender: ControlSender,
    receiver: ControlReceiver,
}

/// The sending half of a [`ControlChannel`].
pub struct ControlSender {
    stream: OwnedWriteHalf,
    sealer: FrameSealer,
    frame: Vec<u8>,
    config: ControlConfig,
    /// A send failed or was cancelled half-way: the stream is out of step.
    failed: bool,
}

/// The receiving half of a [`ControlChannel`].
pub struct ControlReceiver {
    stream: OwnedReadHalf,
    opener: FrameOpener,
    inbox: Inbox,
    config: ControlConfig,
    failed: bool,
    peer: SocketAddr,
}

/// Bytes read from a channel and not yet used (they start at `start`), and the frames in
/// them: shared by the async and the blocking channel.
pub(crate) struct Inbox {
    buffer: Vec<u8>,
    start: usize,
}

impl Inbox {
    pub(crate) fn new(buffer: Vec<u8>) -> Inbox {
        Inbox { buffer, start: 0 }
    }

    /// The buffer to append the next read to, with room for at least what completes the
    /// frame being read (or 4 KiB).
    pub(crate) fn room(&mut self) -> &mut Vec<u8> {
        let wanted = self.bytes_wanted();
        if self.start > 0 && self.buffer.capacity() - self.buffer.len() < wanted {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.reserve(wanted);
        &mut self.buffer
    }

    /// Read into room at the end of the buffer with `read` (given initialised bytes, it
    /// returns how many it filled), as `room` would.
    pub(crate) fn read_with(
        &mut self,
        read: impl FnOnce(&mut [u8]) -> std::io::Result<usize>,
    ) -> std::io::Result<usize> {
        let wanted = self.bytes_wanted();
        let buffer = self.room();
        let filled = buffer.len();
        buffer.resize(filled + wanted, 0);
        let result = read(&mut buffer[filled..]);
        let n = *result.as_ref().unwrap_or(&0);
        buffer.truncate(filled + n.min(wanted));
        result
    }

    /// How many more bytes complete the frame being read (at least a read's worth).
    fn bytes_wanted(&self) -> usize {
        let have = &self.buffer[self.start..];
        if have.len() >= FRAME_HEADER_LEN {
            let len = u32::from_le_bytes([have[0], have[1], have[2], have[3]]) as usize;
            (FRAME_HEADER_LEN + len + TAG_LEN).saturating_sub(have.len()).max(4096)
        } else {
            4096
        }
    }

    /// The next whole frame in the buffer, checked and decoded: `None` if incomplete; the
    /// outer error (authentication, size) must drop the connection, the inner one (a message
    /// that does not decode) need not.
    #[allow(clippy::type_complexity)]
    pub(crate) fn take_frame(
        &mut self,
        opener: &mut FrameOpener,
        max_frame_len: usize,
    ) -> Result<Option<Result<HandoffMessage, crate::error::DecodeError>>, ControlError> {
        let have = &self.buffer[self.start..];
        if have.len() < FRAME_HEADER_LEN {
            return Ok(None);
        }
        let len = u32::from_le_bytes([have[0], have[1], have[2], have[3]]) as usize;
        if len > max_frame_len {
            return Err(ControlError::FrameTooLarge { len: len as u64, limit: max_frame_len });
        }
        let total = FRAME_HEADER_LEN + len + TAG_LEN;
        if have.len() < total {
            return Ok(None);
        }
        let frame = &mut self.buffer[self.start..self.start + total];
        let message = HandoffMessage::decode(opener.open(frame)?);
        // The plaintext may hold a TLS session's secrets: none stays behind in the buffer.
        frame.zeroize();
        self.start += total;
        if self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
            if self.buffer.capacity() > 1 << 20 {
                self.buffer = Vec::new();
            }
        }
        Ok(Some(message))
    }

    /// Forget everything buffered (after a failure).
    pub(crate) fn discard(&mut self) {
        self.buffer = Vec::new();
        self.start = 0;
    }

    /// The bytes buffered and not yet used.
    pub(crate) fn into_pending(mut self) -> Vec<u8> {
        self.buffer.drain(..self.start);
        self.buffer
    }
}

/// Encode `message` as one sealed frame into `frame` (cleared first).
pub(crate) fn seal_message(
    frame: &mut Vec<u8>,
    sealer: &mut FrameSealer,
    message: &HandoffMessage,
    max_frame_len: usize,
) -> Result<(), ControlError> {
    let len = message.encoded_len();
    if len > max_frame_len {
        return Err(ControlError::FrameTooLarge { len: len as u64, limit: max_frame_len });
    }
    frame.clear();
    frame.reserve(FRAME_HEADER_LEN + len + TAG_LEN);
    frame.resize(FRAME_HEADER_LEN, 0);
    message.encode_into(frame);
    sealer.seal(frame);
    Ok(())
}

async fn within<T>(
    limit: Duration,
    during: &'static str,
    work: impl Future<Output = Result<T, ControlError>>,
) -> Result<T, ControlError> {
    tokio::time::timeout(limit, work).await.map_err(|_| ControlError::Timeout { during, after: limit })?
}

pub(crate) fn io_error(during: &'static str) -> impl Fn(std::io::Error) -> ControlError {
    move |source| {
        if source.kind() == std::io::ErrorKind::UnexpectedEof {
            ControlError::Closed { during }
        } else {
            ControlError::Io { during, error: source }
        }
    }
}

impl ControlChannel {
    /// Connect to a control listener and authenticate with `key`.
    pub async fn connect(addr: impl ToSocketAddrs, key: &ControlKey) -> Result<ControlChannel, ControlError> {
        ControlChannel::connect_with(addr, key, ControlConfig::default()).await
    }

    /// `connect` with explicit limits.
    pub async fn connect_with(
        addr: impl ToSocketAddrs,
        key: &ControlKey,
        config: ControlConfig,
    ) -> Result<ControlChannel, ControlError> {
        let stream = within(config.handshake_timeout, "connect", async {
            TcpStream::connect(addr).await.map_err(io_error("connect"))
        })
        .await?;
        ControlChannel::initiate(stream, key, config).await
    }

    /// Run the initiator's side of the handshake on a connected stream.
    pub async fn initiate(
        mut stream: TcpStream,
        key: &ControlKey,
        config: ControlConfig,
    ) -> Result<ControlChannel, ControlError> {
        stream.set_nodelay(true).map_err(io_error("handshake"))?;
        let (sealer, opener) = within(config.handshake_timeout, "handshake", async {
            let my_nonce: [u8; NONCE_LEN] = rand::random();
            let mut hello = [0u8; 8 + NONCE_LEN];
            hello[..8].copy_from_slice(GREETING);
            hello[8..].copy_from_slice(&my_nonce);
            stream.write_all(&hello).await.map_err(io_error("handshake"))?;
            let mut challenge = [0u8; 8 + NONCE_LEN + PROOF_LEN];
            stream.read_exact(&mut challenge).await.map_err(io_error("handshake"))?;
            if &challenge[..8] != GREETING {
                return Err(ControlError::BadGreeting);
            }
            let mut their_nonce = [0u8; NONCE_LEN];
            their_nonce.copy_from_slice(&challenge[8..8 + NONCE_LEN]);
            let handshake = Handshake::new(key, my_nonce, their_nonce);
            // Our proof goes out even if theirs is wrong, so both sides learn of a key
            // mismatch; it is bound to both fresh nonces and useless elsewhere.
            stream.write_all(&handshake.initiator_proof()).await.map_err(io_error("handshake"))?;
            handshake.verify_responder(&challenge[8 + NONCE_LEN..])?;
            Ok(handshake.session(true))
        })
        .await?;
        ControlChannel::split_stream(stream, sealer, opener, config)
    }

    /// Run the responder's side of the handshake on an accepted stream.
    pub async fn respond(
        mut stream: TcpStream,
        key: &ControlKey,
        config: ControlConfig,
    ) -> Result<ControlChannel, ControlError> {
        stream.set_nodelay(true).map_err(io_error("handshake"))?;
        let (sealer, opener) = within(config.handshake_timeout, "handshake", async {
            let mut hello = [0u8; 8 + NONCE_LEN];
            stream.read_exact(&mut hello).await.map_err(io_error("handshake"))?;
            if &hello[..8] != GREETING {
                return Err(ControlError::BadGreeting);
            }
            let mut their_nonce = [0u8; NONCE_LEN];
            their_nonce.copy_from_slice(&hello[8..]);
            let my_nonce: [u8; NONCE_LEN] = rand::random();
            let handshake = Handshake::new(key, their_nonce, my_nonce);
            let mut challenge = [0u8; 8 + NONCE_LEN + PROOF_LEN];
            challenge[..8].copy_from_slice(GREETING);
            challenge[8..8 + NONCE_LEN].copy_from_slice(&my_nonce);
            challenge[8 + NONCE_LEN..].copy_from_slice(&handshake.responder_proof());
            stream.write_all(&challenge).await.map_err(io_error("handshake"))?;
            let mut proof = [0u8; PROOF_LEN];
            stream.read_exact(&mut proof).await.map_err(io_error("handshake"))?;
            handshake.verify_initiator(&proof)?;
            Ok(handshake.session(false))
        })
        .await?;
        ControlChannel::split_stream(stream, sealer, opener, config)
    }

    fn split_stream(
        stream: TcpStream,
        sealer: FrameSealer,
        opener: FrameOpener,
        config: ControlConfig,
    ) -> Result<ControlChannel, ControlError> {
        let peer = stream.peer_addr().map_err(io_error("handshake"))?;
        let (read, write) = stream.into_split();
        Ok(ControlChannel {
            sender: ControlSender { stream: write, sealer, frame: Vec::new(), config, failed: false },
            receiver: ControlReceiver {
                stream: read,
                opener,
                inbox: Inbox::new(Vec::new()),
                config,
                failed: false,
                peer,
            },
        })
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.receiver.peer
    }

    /// Send one message.
    pub async fn send(&mut self, message: &HandoffMessage) -> Result<(), ControlError> {
        self.sender.send(message).await
    }

    /// Receive one message (waiting at most `recv_timeout`, if configured).
    pub async fn recv(&mut self) -> Result<HandoffMessage, ControlError> {
        self.receiver.recv().await
    }

    /// Receive one message, waiting at most `limit`.
    pub async fn recv_within(&mut self, limit: Duration) -> Result<HandoffMessage, ControlError> {
        self.receiver.recv_within(limit).await
    }

    /// Separate the halves, to send from one task while another receives.
    pub fn into_split(self) -> (ControlSender, ControlReceiver) {
        (self.sender, self.receiver)
    }

    /// The channel on a blocking socket, for a thread of its own: nothing between the socket
    /// and the caller (see [`BlockingControlChannel`]). The session (keys, sequence numbers)
    /// and anything already received carry over. Call it inside the runtime the channel was
    /// made in (the socket leaves that runtime's reactor).
    pub fn into_blocking(self) -> Result<BlockingControlChannel, ControlError> {
        let ControlChannel { sender, receiver } = self;
        if sender.failed || receiver.failed {
            return Err(ControlError::Poisoned);
        }
        let stream = receiver.stream.reunite(sender.stream).map_err(|_| ControlError::Io {
            during: "into_blocking",
            error: std::io::Error::other("halves of two different streams"),
        })?;
        let stream = stream.into_std().map_err(io_error("into_blocking"))?;
        BlockingControlChannel::from_parts(
            stream,
            sender.sealer,
            receiver.opener,
            receiver.inbox.into_pending(),
            receiver.config,
            receiver.peer,
        )
    }
}

impl ControlSender {
    /// Send one message: one frame, one write. A send that fails or is cancelled half-way
    /// leaves the channel unusable (`Poisoned`).
    pub async fn send(&mut self, message: &HandoffMessage) -> Result<(), ControlError> {
        if self.failed {
            return Err(ControlError::Poisoned);
        }
        seal_message(&mut self.frame, &mut self.sealer, message, self.config.max_frame_len)?;
        self.failed = true;
        let limit = self.config.send_timeout;
        within(limit, "send", async { self.stream.write_all(&self.frame).await.map_err(io_error("send")) })
            .await?;
        self.failed = false;
        if self.frame.capacity() > 1 << 20 {
            self.frame = Vec::new();
        }
        Ok(())
    }
}

impl ControlReceiver {
    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Receive one message (waiting at most `recv_timeout`, if configured). Cancel-safe: a
    /// cancelled `recv` loses nothing.
    pub async fn recv(&mut self) -> Result<HandoffMessage, ControlError> {
        match self.config.recv_timeout {
            Some(limit) => self.recv_within(limit).await,
            None => self.next_message().await,
        }
    }

    /// Receive one message, waiting at most `limit`. Cancel-safe.
    pub async fn recv_within(&mut self, limit: Duration) -> Result<HandoffMessage, ControlError> {
        within(limit, "recv", self.next_message()).await
    }

    async fn next_message(&mut self) -> Result<HandoffMessage, ControlError> {
        if self.failed {
            return Err(ControlError::Poisoned);
        }
        loop {
            match self.inbox.take_frame(&mut self.opener, self.config.max_frame_len) {
                Ok(Some(message)) => return message.map_err(ControlError::Decode),
                Ok(None) => {}
                Err(error) => {
                    self.drop_connection();
                    return Err(error);
                }
            }
            let n = self.stream.read_buf(self.inbox.room()).await.map_err(io_error("recv"))?;
            if n == 0 {
                return Err(ControlError::Closed { during: "recv" });
            }
        }
    }

    /// After a failed frame: refuse everything further and close the connection both ways,
    /// so the peer sees it dropped.
    fn drop_connection(&mut self) {
        self.failed = true;
        self.inbox.discard();
        let fd = self.stream.as_ref().as_raw_fd();
        // SAFETY: shutdown on a descriptor owned by the stream, which stays open; it only
        // changes the connection's state.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    }
}

/// Accepts control connections and authenticates them.
pub struct ControlListener {
    listener: TcpListener,
    key: ControlKey,
    config: ControlConfig,
}

impl ControlListener {
    /// Listen on `addr` for peers that know `key`.
    pub async fn bind(addr: impl ToSocketAddrs, key: &ControlKey) -> Result<ControlListener, ControlError> {
        ControlListener::bind_with(addr, key, ControlConfig::default()).await
    }

    /// `bind` with explicit limits.
    pub async fn bind_with(
        addr: impl ToSocketAddrs,
        key: &ControlKey,
        config: ControlConfig,
    ) -> Result<ControlListener, ControlError> {
        let listener = TcpListener::bind(addr).await.map_err(io_error("bind"))?;
        Ok(ControlListener { listener, key: key.clone(), config })
    }

    /// Listen on a listener already bound (made inside a network namespace, or handed over
    /// by a supervisor). Must be called inside a tokio runtime.
    pub fn from_std(
        listener: std::net::TcpListener,
        key: &ControlKey,
        config: ControlConfig,
    ) -> Result<ControlListener, ControlError> {
        listener.set_nonblocking(true).map_err(io_error("listen"))?;
        let listener = TcpListener::from_std(listener).map_err(io_error("listen"))?;
        Ok(ControlListener { listener, key: key.clone(), config })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> Result<SocketAddr, ControlError> {
        self.listener.local_addr().map_err(io_error("local_addr"))
    }

    /// Accept one connection and run the handshake on it (bounded by `handshake_timeout`).
    /// A peer that fails the handshake yields an error and is dropped; call `accept` again
    /// for the next.
    pub async fn accept(&self) -> Result<ControlChannel, ControlError> {
        let (stream, _) = self.listener.accept().await.map_err(io_error("accept"))?;
        ControlChannel::respond(stream, &self.key, self.config).await
    }
}
