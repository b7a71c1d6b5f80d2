//! `PolicyInputs`: what a content-aware policy knows a priori besides its parameters — the
//! class table's per-class costs (indexed by `RequestInfo::class`) and, optionally, the file
//! table (size and modification time of every document the site serves).

use locus_core::ClassCost;
use std::collections::HashMap;
use std::sync::Arc;

/// Size and modification time of one document.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileInfo {
    /// Bytes.
    pub size: u64,
    /// Modification time, seconds since the Unix epoch.
    pub mtime: u64,
}

/// The documents a site serves, by `target_hash` of their request target.
#[derive(Clone, Debug, Default)]
pub struct FileTable {
    files: HashMap<u64, FileInfo>,
}

impl FileTable {
    /// An empty table.
    pub fn new() -> FileTable {
        FileTable::default()
    }

    /// Add (or replace) the document with this target hash.
    pub fn insert(&mut self, target_hash: u64, info: FileInfo) {
        self.files.insert(target_hash, info);
    }

    /// The document with this target hash, if the site has it.
    pub fn get(&self, target_hash: u64) -> Option<&FileInfo> {
        self.files.get(&target_hash)
    }

    /// Every document, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &FileInfo)> {
        self.files.iter().map(|(&h, info)| (h, info))
    }

    /// Documents in the table.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

impl FromIterator<(u64, FileInfo)> for FileTable {
    fn from_iter<I: IntoIterator<Item = (u64, FileInfo)>>(iter: I) -> FileTable {
        FileTable { files: iter.into_iter().collect() }
    }
}

/// What the caller knows of the site when it builds a policy. Policies that do not look at
/// content ignore it; `PolicyInputs::default()` is "nothing known".
#[derive(Clone, Debug, Default)]
pub struct PolicyInputs {
    /// Per-class costs; `RequestInfo::class == Some(i)` means `classes[i]`.
    pub classes: Arc<[ClassCost]>,
    /// The site's documents, if known. Without it a content sniffer treats every request
    /// that matches no class as a static document of the size the request hints.
    pub files: Option<Arc<FileTable>>,
}
