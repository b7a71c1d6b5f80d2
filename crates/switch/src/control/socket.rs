//! The runtime API's Unix socket: one command line in, one JSON answer line out, as many as
//! the client sends. Only root and the switch's own user are served (the peer's credentials,
//! `SO_PEERCRED`, checked on every connection; the socket file is made 0660 besides); anyone
//! else gets `permission denied`. A line over `MAX_LINE` bytes, a connection silent for
//! `IDLE`, or more than `MAX_CLIENTS` at once are refused, not waited for.

use super::command::{Command, MAX_LINE};
use crate::state::Shared;
use serde_json::json;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// How long a control connection may stay silent.
const IDLE: Duration = Duration::from_secs(30);

/// Most control connections served at once.
const MAX_CLIENTS: usize = 16;

/// Bind `path` for the runtime API: a stale socket file (nobody listening) is replaced, a
/// live one (another switch) or any other file is an error.
pub fn bind(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    if path.exists() {
        let meta = std::fs::symlink_metadata(path)?;
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a file that is not a socket is in the way",
            ));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(io::ErrorKind::AddrInUse, "another process is serving this socket"));
        }
        std::fs::remove_file(path)?;
    }
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Serve the runtime API on `listener` until the task is aborted; the socket file goes
/// with the returned guard.
pub async fn serve(shared: Arc<Shared>, listener: std::os::unix::net::UnixListener) {
    let listener = match UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return tracing::error!("control socket: cannot serve: {e}"),
    };
    let clients = Arc::new(tokio::sync::Semaphore::new(MAX_CLIENTS));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!("control socket: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = clients.clone().try_acquire_owned() else {
            shared.counters.ctl_refused.fetch_add(1, Relaxed);
            tokio::spawn(answer_once(stream, json!({"ok": false, "error": "too many control connections"})));
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            serve_client(&shared, stream).await;
            drop(permit);
        });
    }
}

/// Answer `answer` and close.
async fn answer_once(mut stream: UnixStream, answer: serde_json::Value) {
    let _ = tokio::time::timeout(IDLE, stream.write_all(format!("{answer}\n").as_bytes())).await;
    linger_close(stream).await;
}

/// Close `stream` after reading what the client sent meanwhile (up to `MAX_UNREAD` bytes, for
/// a second at most): a Unix socket closed with unread bytes resets its peer, which would
/// lose the answers it has not read yet.
async fn linger_close(mut stream: UnixStream) {
    const MAX_UNREAD: u64 = 64 * 1024;
    let _ = stream.shutdown().await;
    let mut unread = Vec::new();
    let mut limited = (&mut stream).take(MAX_UNREAD);
    let _ = tokio::time::timeout(Duration::from_secs(1), limited.read_to_end(&mut unread)).await;
}

/// Who the peer is, if allowed: root or the switch's own user.
fn allowed_peer(stream: &UnixStream) -> Result<String, String> {
    let cred = stream.peer_cred().map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let own = unsafe { libc::geteuid() };
    if cred.uid() == 0 || cred.uid() == own {
        Ok(format!("uid {}", cred.uid()))
    } else {
        Err(format!(
            "permission denied: uid {} is neither root nor the switch's user (uid {own})",
            cred.uid()
        ))
    }
}

/// Whether the next line waiting is `takeover` (read only then; otherwise left unread).
async fn line_is_takeover(lines: &mut BufReader<tokio::net::unix::OwnedReadHalf>) -> bool {
    let want = format!("{}\n", crate::upgrade::TAKEOVER);
    let Ok(Ok(buffered)) = tokio::time::timeout(IDLE, lines.fill_buf()).await else { return false };
    if buffered.starts_with(want.as_bytes()) {
        lines.consume(want.len());
        return true;
    }
    false
}

async fn serve_client(shared: &Arc<Shared>, stream: UnixStream) {
    let who = match allowed_peer(&stream) {
        Ok(who) => who,
        Err(e) => {
            shared.counters.ctl_refused.fetch_add(1, Relaxed);
            tracing::warn!("control socket: {e}");
            return answer_once(stream, json!({"ok": false, "error": e})).await;
        }
    };
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        if lines.buffer().is_empty() && line_is_takeover(&mut lines).await {
            // A binary upgrade: the rest of the exchange carries descriptors, off the loop.
            let Ok(stream) = lines.into_inner().reunite(write) else { return };
            let Ok(stream) = stream.into_std().and_then(|s| s.set_nonblocking(false).map(|()| s)) else {
                return;
            };
            let shared = shared.clone();
            let _ = tokio::task::spawn_blocking(move || crate::upgrade::hand_over(&shared, stream)).await;
            return;
        }
        let mut limited = (&mut lines).take(MAX_LINE as u64 + 1);
        match tokio::time::timeout(IDLE, limited.read_until(b'\n', &mut line)).await {
            Ok(Ok(0)) | Err(_) | Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
        }
        let answer = answer_line(shared, &line, &who);
        if write.write_all(format!("{answer}\n").as_bytes()).await.is_err() {
            return;
        }
        if line.len() > MAX_LINE {
            // The rest of the line is not read as a command of its own.
            if let Ok(stream) = lines.into_inner().reunite(write) {
                linger_close(stream).await;
            }
            return;
        }
    }
}

/// The JSON answer to one command line: `{"ok": true, ...}` or `{"ok": false, "error"}`.
pub fn answer_line(shared: &Shared, line: &[u8], who: &str) -> serde_json::Value {
    let parsed = match std::str::from_utf8(line) {
        Ok(text) => Command::parse(text).map_err(|e| e.to_string()),
        Err(_) => Err("the command is not UTF-8".to_string()),
    };
    let result = match parsed {
        Ok(command) => shared.execute(&command, who),
        Err(e) => {
            shared.counters.ctl_commands.fetch_add(1, Relaxed);
            shared.counters.ctl_refused.fetch_add(1, Relaxed);
            tracing::warn!(who, "control command refused: {e}");
            Err(e)
        }
    };
    match result {
        Ok(mut value) => {
            if let Some(map) = value.as_object_mut() {
                map.insert("ok".into(), true.into());
            }
            value
        }
        Err(error) => json!({"ok": false, "error": error}),
    }
}

/// Removes the socket file when the switch stops, unless it handed the socket over to a new
/// switch (a binary upgrade), which serves it now.
pub struct SocketFile {
    path: PathBuf,
    shared: Arc<Shared>,
}

impl SocketFile {
    pub fn new(path: PathBuf, shared: Arc<Shared>) -> SocketFile {
        SocketFile { path, shared }
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if !self.shared.handed_over.load(Relaxed) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
