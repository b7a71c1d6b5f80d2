//! The files of a throughput bench: its scratch folder (removed afterwards, or kept where
//! `--keep` says) and a document root with one file of patterned bytes per size, named
//! `<size>.bin`, that every path serves.

use std::path::PathBuf;

use locus_rig::ScratchFolder;

/// A bench's scratch folder and document root; the folder goes when this is dropped unless
/// it was kept.
pub struct BenchFiles {
    pub scratch: PathBuf,
    pub root: PathBuf,
    _folder: ScratchFolder,
}

impl BenchFiles {
    /// A scratch folder named for `bench` (or `keep`), and `<scratch>/www/<size>.bin` for each
    /// of `sizes`: `a`..`z` repeated.
    pub fn create(
        bench: &str,
        keep: Option<&PathBuf>,
        sizes: impl IntoIterator<Item = u64>,
    ) -> anyhow::Result<BenchFiles> {
        let folder = ScratchFolder::new(bench)?;
        let scratch = match keep {
            Some(p) => {
                std::fs::create_dir_all(p)?;
                p.clone()
            }
            None => folder.path().to_path_buf(),
        };
        let root = scratch.join("www");
        std::fs::create_dir_all(&root)?;
        for size in sizes {
            let body: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
            std::fs::write(root.join(format!("{size}.bin")), body)?;
        }
        Ok(BenchFiles { scratch, root, _folder: folder })
    }
}
