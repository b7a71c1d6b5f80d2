//! Compiles the BPF C (`bpf/forward.c`, the tc forwarder) with clang into `$OUT_DIR/<name>.o`,
//! which the crate embeds with `include_bytes!`. Fails with a message naming the missing tool or
//! header (`apt-get install clang libbpf-dev`); `CLANG` overrides the compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCES: [&str; 1] = ["bpf/forward.c"];
const INSTALL_HINT: &str = "the forwarder needs clang and the libbpf headers: `apt-get install clang libbpf-dev` (the quickstart installs them)";

fn fail(message: String) -> ! {
    for line in message.lines() {
        println!("cargo::error={line}");
    }
    println!("cargo::error={INSTALL_HINT}");
    std::process::exit(1);
}

fn main() {
    for source in SOURCES {
        println!("cargo:rerun-if-changed={source}");
    }
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
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

    for source in SOURCES {
        let stem = Path::new(source).file_stem().expect("sources are files");
        let object = out.join(stem).with_extension("o");
        let output = Command::new(&clang)
            .args(["-target", "bpf", "-O2", "-g", "-Wall"])
            .arg(format!("-I{multiarch}"))
            .args(["-c", source, "-o"])
            .arg(&object)
            .output()
            .unwrap_or_else(|e| fail(format!("cannot run `{clang}` to compile {source}: {e}")));
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            fail(format!("`{clang} -target bpf` failed on {source}:\n{stderr}"));
        }
        for line in stderr.lines().filter(|l| !l.trim().is_empty()) {
            println!("cargo:warning={line}");
        }
    }
}
