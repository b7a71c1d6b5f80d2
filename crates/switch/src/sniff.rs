//! The content sniffer's reading of a request and its connection: the policy's
//! `RequestInfo` with the request's class (from the class table) and its `If-Modified-Since`
//! date, and the client connection's round-trip time from the kernel's TCP_INFO.

use locus_classify::RequestClassifier;
use locus_core::{Method, RequestInfo};
use std::os::fd::AsRawFd;
use std::time::{Duration, UNIX_EPOCH};

/// The policy's view of a request for `target`: its class, and the date of an
/// `If-Modified-Since` header (`ims`, the raw value) when it parses as an HTTP-date.
pub fn request_info<'a>(
    classifier: &RequestClassifier,
    method: Method,
    target: &'a str,
    ims: Option<&[u8]>,
) -> RequestInfo<'a> {
    let mut info = RequestInfo::new(method, target);
    info.class = classifier.classify(target);
    info.if_modified_since = ims.and_then(if_modified_since);
    info
}

/// An `If-Modified-Since` value as seconds since the Unix epoch; `None` when it is not an
/// HTTP-date (RFC 9110 says to ignore such a header).
pub fn if_modified_since(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let t = httpdate::parse_http_date(text).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

/// The smoothed round-trip time the kernel keeps for a TCP socket (`tcpi_rtt`); `None` when
/// TCP_INFO cannot be read or has no sample yet.
pub fn tcp_rtt(socket: &impl AsRawFd) -> Option<Duration> {
    // SAFETY: tcp_info is plain old data; getsockopt fills at most `len` bytes of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid descriptor, a buffer of `len` bytes and its length.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0 && info.tcpi_rtt > 0).then(|| Duration::from_micros(u64::from(info.tcpi_rtt)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use locus_classify::ClassConfig;

    #[test]
    fn if_modified_since_reads_http_dates_and_ignores_anything_else() {
        assert_eq!(if_modified_since(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(784111777));
        assert_eq!(if_modified_since(b" Sunday, 06-Nov-94 08:49:37 GMT "), Some(784111777));
        assert_eq!(if_modified_since(b"yesterday"), None);
        assert_eq!(if_modified_since(b"\xff"), None);
    }

    #[test]
    fn request_info_carries_the_class_and_the_conditional_date() {
        let class: ClassConfig = toml::from_str(
            "name = \"cgi\"\nprefix = \"/cgi\"\ncost = { dist = \"const\", ms = 1 }\nsize = 10\n",
        )
        .unwrap();
        let classifier = RequestClassifier::new(&[class]).unwrap();
        let ims = Some(&b"Sun, 06 Nov 1994 08:49:37 GMT"[..]);
        let info = request_info(&classifier, Method::Get, "/cgi/run?x=1", ims);
        assert_eq!((info.class, info.if_modified_since), (Some(0), Some(784111777)));
        assert_eq!(info.target_hash, locus_core::target_hash("/cgi/run?x=1"));
        let info = request_info(&classifier, Method::Get, "/index.html", None);
        assert_eq!((info.class, info.if_modified_since), (None, None));
    }

    #[test]
    fn tcp_rtt_is_read_from_a_connected_socket_and_none_for_another_descriptor() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let rtt = tcp_rtt(&client).expect("the handshake gave an RTT sample");
        assert!(rtt < Duration::from_secs(1), "{rtt:?}");
        let file = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(tcp_rtt(&file), None);
    }
}
