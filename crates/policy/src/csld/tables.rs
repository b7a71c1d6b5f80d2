//! `FileRefs`: CSLD's file table state — for each document the latest (estimated)
//! reference time on every node, kept for at most `max_files` documents, the least
//! recently seen going first.

use lru::LruCache;

/// Per-document, per-node latest reference times (ns; 0 = never referenced there).
#[derive(Debug)]
pub(crate) struct FileRefs {
    map: LruCache<u64, Box<[u64]>>,
    nodes: usize,
    max_files: usize,
}

impl FileRefs {
    /// An empty table for `nodes` nodes holding at most `max_files` (≥ 1) documents.
    pub(crate) fn new(nodes: usize, max_files: usize) -> FileRefs {
        FileRefs { map: LruCache::unbounded(), nodes, max_files: max_files.max(1) }
    }

    /// The reference times of document `file` on every node (zeros for a document not seen
    /// before), marking it the most recently seen. Evicting the least recently seen
    /// document to make room reuses its storage.
    pub(crate) fn refs(&mut self, file: u64) -> &mut [u64] {
        if !self.map.contains(&file) {
            let row = if self.map.len() >= self.max_files {
                let (_, mut row) = self.map.pop_lru().expect("a full table has a least recent entry");
                row.fill(0);
                row
            } else {
                vec![0; self.nodes].into_boxed_slice()
            };
            self.map.put(file, row);
        }
        self.map.get_mut(&file).expect("just inserted")
    }

    /// Forget every reference on `node` (its cache is gone).
    pub(crate) fn forget_node(&mut self, node: usize) {
        for (_, row) in self.map.iter_mut() {
            if let Some(t) = row.get_mut(node) {
                *t = 0;
            }
        }
    }

    /// Documents held.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_table_stays_bounded_under_a_flood_of_distinct_targets() {
        let mut t = FileRefs::new(3, 100);
        for f in 0..10_000u64 {
            t.refs(f)[1] = f + 1;
            assert!(t.len() <= 100);
        }
        assert_eq!(t.len(), 100);
        // The most recent documents survive with their times; an evicted one starts fresh.
        assert_eq!(t.refs(9_999)[1], 10_000);
        assert_eq!(t.refs(0), &[0, 0, 0]);
    }

    #[test]
    fn least_recently_seen_document_is_evicted_first() {
        let mut t = FileRefs::new(2, 2);
        t.refs(1)[0] = 5;
        t.refs(2)[0] = 6;
        t.refs(1); // seen again: 2 is now the least recent
        t.refs(3);
        assert_eq!(t.refs(1)[0], 5);
        assert_eq!(t.refs(2)[0], 0, "2 was evicted");
        t.forget_node(0);
        assert_eq!(t.refs(1), &[0, 0]);
    }
}
