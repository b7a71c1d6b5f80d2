//! A web site's document tree on disk (`DocumentTree`): its regular files with their sizes,
//! modification times and the request targets naming them, scanned with optional bounds.
//! Shared by the switch (its file table) and the trace tools (sizes, surfing).

mod document_tree;
mod error;

pub use document_tree::{DocumentFile, DocumentTree, ScanLimits, decode_path, target_for};
pub use error::SiteError;
