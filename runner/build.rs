//! Link-time choice for the runner's start-up (bench/README.md): every call starts the runner.
//!
//! No `libgcc_s.so.1`: ld.so loading it (open, map, relocate, its constructor) costs every start of the
//! runner. Rust's std asks for `-lgcc_s` (the unwinder) by name; a linker script of that name, found
//! first on the search path, hands the linker the static unwinder (`libgcc_eh.a`, what `gcc -static-libgcc`
//! links) instead. Only on Linux with glibc, without `crt-static`, and only when the C compiler knows where
//! `libgcc_eh.a` is, and not when cross-compiling: otherwise nothing changes and the shared library is linked as
//! before (so does `ANIMAWORKS_TOOL_SHARED_LIBGCC=1`).
//!
//! Why here and not in `.cargo/config.toml` per target: rustflags reach every crate, build script and proc
//! macro of every profile (and invalidate every build), and a `cargo install` run elsewhere does not read the
//! repository's configuration; a build script's link argument is the runner binary's alone.
//!
//! The order of the functions in the text (`--symbol-ordering-file`, a measurable gain a call) was dropped: its names
//! carry per-build hashes, went stale silently with any dependency or toolchain update, and renewing them needed
//! perf (bench/README.md, "Link tricks dropped").

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    static_unwinder();
}

fn static_unwinder() {
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=ANIMAWORKS_TOOL_SHARED_LIBGCC");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("CARGO_CFG_TARGET_FEATURE").split(',').any(|f| f == "crt-static")
        || !var("ANIMAWORKS_TOOL_SHARED_LIBGCC").is_empty()
        // Cross-compiling: `cc` would name the host's archive, not the target's.
        || var("TARGET") != var("HOST")
    {
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let Ok(out) = Command::new(&cc).arg("-print-file-name=libgcc_eh.a").output() else {
        return;
    };
    let archive = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // An unknown file is printed back as its bare name; a quote could not be written in the script.
    if !out.status.success() || !archive.is_absolute() || !archive.is_file() || archive.to_string_lossy().contains('"')
    {
        return;
    }
    // A compiler upgrade that removes it must not leave a script naming a file that is gone.
    println!("cargo:rerun-if-changed={}", archive.display());
    let dir = PathBuf::from(var("OUT_DIR")).join("static-libgcc");
    std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
    std::fs::write(dir.join("libgcc_s.so"), format!("INPUT(\"{}\")\n", archive.display()))
        .expect("OUT_DIR is writable");
    println!("cargo:rustc-link-search=native={}", dir.display());
    // For the test that holds the runner to it (tests/it/startup.rs).
    println!("cargo:rustc-env=ANIMAWORKS_TOOL_STATIC_LIBGCC=1");
}
