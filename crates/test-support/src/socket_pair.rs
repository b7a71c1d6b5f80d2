//! A connected pair of loopback TCP sockets, for the unit tests of code that reads, probes or
//! splices a socket (the accepted end second).

use tokio::net::{TcpListener, TcpStream};

/// Two ends of one loopback TCP connection: (the connecting end, the accepted end).
pub async fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback listener");
    let a = TcpStream::connect(listener.local_addr().expect("its address")).await.expect("connect");
    let (b, _) = listener.accept().await.expect("accept");
    (a, b)
}
