//! Strict HTTP/1.x framing shared by the switch, the node and the load generator: request
//! heads parsed in place with every request-smuggling vector refused, response heads and
//! their body framing, a pass-through body tracker for Content-Length and chunked bodies,
//! request-target checks (a path above the root, an authority's host), and small writers
//! for status lines and dates. Built on `httparse`.

mod body;
mod date;
mod head;
mod request;
mod response;
mod status;
mod target;

pub use body::{BodyError, BodyKind, BodyProgress, BodyTracker};
pub use date::http_date_now;
pub use head::{HeaderSpan, LineFault, Span, Version, find_header_end, has_token};
pub use request::{Limits, RequestError, RequestHead, TargetForm, parse_request};
pub use response::{ResponseError, ResponseHead, is_hop_by_hop, parse_response};
pub use status::reason_phrase;
pub use target::{authority_host, climbs_above_root};
