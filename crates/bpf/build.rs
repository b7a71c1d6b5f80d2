//! Compiles the forwarder's BPF C (`bpf/forward.c`) with clang into `$OUT_DIR/forward.o`, which
//! the crate embeds with `include_bytes!`. Fails with a message naming the missing tool or header
//! (`apt-get install clang libbpf-dev`); `CLANG` overrides the compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "bpf/forward.c";
const INSTALL_HINT: &str = "the forwarder needs clang and the libbpf headers: `apt-get install clang libbpf-dev` (the quickstart installs them)";

fn fail(message: String) -> ! {
    for line in message.lines() {
        println!("cargo::error={line}");
    }
    println!("cargo::error={INSTALL_HINT}");
    std::process::exit(1);
}

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let object = out.join("forward.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());

    // `<asm/types.h>` lives in the multiarch include directory of the build host.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    if !Path::new(&multiarch).join("asm/types.h").exists() && !Path::new("/usr/include/asm/types.h").exists()
    {
        fail(format!("kernel headers not found: no {multiarch}/asm/types.h"));
    }
    if !Path::new("/usr/include/bpf/bpf_helpers.h").exists() {
        fail("libbpf headers not found: no /usr/include/bpf/bpf_helpers.h".into());
    }

    let output = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall"])
        .arg(format!("-I{multiarch}"))
        .args(["-c", SOURCE, "-o"])
        .arg(&object)
        .output()
        .unwrap_or_else(|e| fail(format!("cannot run `{clang}` to compile {SOURCE}: {e}")));
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        fail(format!("`{clang} -target bpf` failed on {SOURCE}:\n{stderr}"));
    }
    for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
        println!("cargo:warning={line}");
    }
}
