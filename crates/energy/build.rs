//! Builds the BPF program of the eBPF mechanism (feature `ebpf`) with clang.
//!
//! Without the feature nothing is built and nothing is needed. With it, clang compiles
//! `bpf/rapl.bpf.c` (the eBPF mechanism) and `bpf/tasks.bpf.c` (the task iterator of attribution
//! by process) for the `bpf` target, with BTF (`-g`) for libbpf's map definitions, against
//! the libbpf headers libbpf-sys installed (`DEP_BPF_INCLUDE`) and the system's `linux/bpf.h`.
//! `CLANG` names another clang.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_EBPF").is_none() {
        return;
    }
    println!("cargo:rerun-if-env-changed=CLANG");
    for name in ["rapl", "tasks", "kio"] {
        compile(name);
    }
}

/// Compiles `bpf/NAME.bpf.c` into `OUT_DIR/NAME.bpf.o`.
fn compile(name: &str) {
    let src = format!("bpf/{name}.bpf.c");
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join(format!("{name}.bpf.o"));
    let libbpf_include = env::var("DEP_BPF_INCLUDE").expect("libbpf-sys exports its include dir");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // `asm/types.h`, which linux/bpf.h includes, lives in the multiarch directory on Debian.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let status = Command::new(&clang)
        .args([
            "-g", "-O2", "-Wall", "-Werror", "-target", "bpf", "-c", &src, "-o",
        ])
        .arg(&out)
        .arg(format!("-I{libbpf_include}"))
        .arg(format!("-I{multiarch}"))
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} failed ({s}) on {src}; the `ebpf` feature needs clang with the BPF target and linux-libc-dev (`make deps`)"),
        Err(e) => panic!("cannot run {clang}: {e}; the `ebpf` feature needs clang (`make deps`, or apt-get install clang libelf-dev zlib1g-dev pkg-config), or build without it"),
    }
}
