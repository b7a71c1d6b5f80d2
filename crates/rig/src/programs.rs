//! Programs a lab or benchmark runs (`ip`, HAProxy, NGINX, wrk, Chromium): found on PATH or
//! in the usual system folders, or an error naming the Debian package that has them.

use std::path::{Path, PathBuf};

use crate::error::RigError;

/// A program on PATH or in the usual system directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let candidates = ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin", "/usr/local/sbin"];
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .filter(|d| !d.is_empty())
        .chain(candidates)
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// A program, or the error that names the Debian package to install.
pub fn require_program(name: &str, package: &str) -> Result<PathBuf, RigError> {
    find_program(name)
        .ok_or_else(|| RigError::MissingProgram { program: name.to_string(), package: package.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_the_path_and_a_missing_one_names_its_package() {
        assert!(find_program("sh").is_some());
        assert!(matches!(require_program("no-such-program-x", "pkg"), Err(RigError::MissingProgram { .. })));
    }
}
