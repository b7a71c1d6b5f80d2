//! The `locus` executable of this build, for tests that run it as a separate process: found
//! next to the test executable (`target/<profile>/locus`) or named by `LOCUS_BIN`; never built
//! from inside a test.

use std::path::{Path, PathBuf};

/// The environment variable that names the `locus` executable to use instead of the one of
/// this build profile.
pub const LOCUS_BIN_VAR: &str = "LOCUS_BIN";

/// The `locus` executable: `$LOCUS_BIN` when set, otherwise `target/<profile>/locus` beside
/// the folder holding this test executable (`target/<profile>/deps/`). Panics, saying how to
/// build it, when it is not there. `cargo test --workspace` builds it (the `locus` package's
/// own tests need it); a test run for one package alone needs `cargo build -p locus` first.
pub fn locus_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(LOCUS_BIN_VAR) {
        let path = PathBuf::from(path);
        assert!(path.is_file(), "{LOCUS_BIN_VAR}={}: no such file", path.display());
        return path;
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("{}: not in target/<profile>/deps/", exe.display()));
    let path = profile_dir.join("locus");
    let release = if profile_dir.file_name().is_some_and(|n| n == "release") { " --release" } else { "" };
    assert!(
        path.is_file(),
        "{} is missing: build it first with `cargo build{release} -p locus` (or run \
         `cargo test --workspace`, which builds it), or name one with {LOCUS_BIN_VAR}=<path>",
        path.display()
    );
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_is_looked_for_beside_the_deps_folder_and_its_absence_says_how_to_build_it() {
        // Run without LOCUS_BIN: the test executable lives in target/<profile>/deps/.
        if std::env::var_os(LOCUS_BIN_VAR).is_some() {
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let expected = exe.parent().unwrap().parent().unwrap().join("locus");
        match std::panic::catch_unwind(locus_binary) {
            Ok(path) => assert_eq!(path, expected),
            Err(e) => {
                let message = e.downcast_ref::<String>().cloned().unwrap_or_default();
                assert!(message.contains("cargo build") && message.contains("-p locus"), "{message}");
            }
        }
    }
}
