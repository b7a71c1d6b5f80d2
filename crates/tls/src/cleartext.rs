//! Cleartext HTTP sent to a TLS port: answered `400 Bad Request` in cleartext, as NGINX does,
//! rather than with an alert the client cannot read or a handshake that hangs. The request is
//! read first (for a moment), so closing does not reset the answer away.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// How long the cleartext request is read for before it is answered, and the close drained.
const CLEARTEXT_READ: Duration = Duration::from_millis(200);

/// The answer, with `headers` (whole `Name: value\r\n` lines) after the status line.
pub fn cleartext_answer(headers: &[u8]) -> Vec<u8> {
    const BODY: &[u8] = b"400 Bad Request: this port speaks HTTPS\n";
    let mut answer = b"HTTP/1.1 400 Bad Request\r\n".to_vec();
    answer.extend_from_slice(headers);
    answer.extend_from_slice(b"Content-Type: text/plain\r\n");
    answer
        .extend_from_slice(format!("Content-Length: {}\r\nConnection: close\r\n\r\n", BODY.len()).as_bytes());
    answer.extend_from_slice(BODY);
    answer
}

/// Read what the client sent, answer it (`cleartext_answer(headers)`) and close.
pub async fn answer_cleartext(mut tcp: TcpStream, headers: &[u8]) {
    let mut sink = [0u8; 4096];
    let _ = timeout(CLEARTEXT_READ, tcp.read(&mut sink)).await;
    let _ = timeout(CLEARTEXT_READ, tcp.write_all(&cleartext_answer(headers))).await;
    let _ = tcp.shutdown().await;
    let _ = timeout(CLEARTEXT_READ, tcp.read(&mut sink)).await;
}
