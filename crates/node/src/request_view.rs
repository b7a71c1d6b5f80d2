//! `RequestView`: the parts of a parsed request head that responders use (borrowed from the
//! connection's read buffer), whether an absolute-form target's authority is accepted, and
//! `Served`: the status a responder chose and whatever body the connection must still stream
//! after the queued head.

use std::sync::Arc;

use locus_core::Method;
use locus_http::{RequestHead, authority_host};

use crate::doc_store::LargeFile;
use crate::origin::OriginBody;
use crate::response::Persistence;
use crate::shared_pages::SharedPages;

/// A request as the responders see it.
#[derive(Debug)]
pub struct RequestView<'a> {
    pub method: Method,
    /// Path and query as sent (the part after the authority for absolute-form targets).
    pub target: &'a str,
    /// The path part of `target`, still percent-encoded.
    pub raw_path: &'a str,
    pub query: Option<&'a str>,
    /// The decoded, normalised path.
    pub path: &'a str,
    /// Key of the document in the cache: `path`, plus `?query` when misses go to an origin.
    pub cache_key: &'a str,
    pub persistence: Persistence,
    pub if_modified_since: Option<&'a [u8]>,
    pub if_none_match: bool,
    pub range: Option<&'a [u8]>,
    pub if_range: Option<&'a [u8]>,
}

impl RequestView<'_> {
    /// HEAD: send the head only.
    pub fn head_only(&self) -> bool {
        self.method == Method::Head
    }
}

/// A body the connection streams after the queued head.
#[derive(Debug)]
pub enum BodySource {
    /// Nothing more: any body is already queued.
    Queued,
    /// `len` bytes of a cached body's shared pages from `offset`, sent with sendfile.
    Pages { pages: Arc<SharedPages>, offset: u64, len: u64 },
    /// `len` bytes of a large file from `offset`.
    File { file: Arc<LargeFile>, offset: u64, len: u64 },
    /// The rest of an origin response.
    Origin(OriginBody),
}

/// What a responder did.
#[derive(Debug)]
pub struct Served {
    pub status: u16,
    pub body: BodySource,
}

impl Served {
    pub fn queued(status: u16) -> Served {
        Served { status, body: BodySource::Queued }
    }
}

/// An absolute-form target is accepted only for the request's own Host or a server name.
pub fn authority_allowed(head: &RequestHead, buf: &[u8], server_names: &[String]) -> bool {
    let Some(authority) = head.authority else { return false };
    let host = authority_host(authority.get(buf));
    head.host.is_some_and(|h| authority_host(h.get(buf)).eq_ignore_ascii_case(host))
        || server_names.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(host))
}
