//! What a response is made of, apart from its body: the head written into an `OutQueue`
//! (`head`), the `Range` header's outcome (`byte_range`) and conditional requests on the
//! modification time (`conditional`).

mod byte_range;
mod conditional;
mod head;

pub use byte_range::{RangeOutcome, evaluate_range};
pub use conditional::{if_range_allows, not_modified, parse_http_date_secs, unix_secs};
pub use head::{Persistence, content_length, end_head, simple, start_head};
