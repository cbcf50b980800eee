//! Link-time choices for the runner's start-up (bench/README.md, "Fourth pass"): every call starts the runner.
//!
//! - The functions a call runs are laid out together ([`symbol_order`]).
//! - No `libgcc_s.so.1`: ld.so loading it (open, map, relocate, its constructor) costs ~0.08 ms per start on the
//!   bench machine. Rust's std asks for `-lgcc_s` (the unwinder) by name; a linker script of that name, found
//!   first on the search path, hands the linker the static unwinder (`libgcc_eh.a`, what `gcc -static-libgcc`
//!   links) instead. Only on Linux with glibc, without `crt-static`, and only when the C compiler knows where
//!   `libgcc_eh.a` is, and not when cross-compiling: otherwise nothing changes and the shared library is linked as
//!   before (so does `ANIMAWORKS_TOOL_SHARED_LIBGCC=1`).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    symbol_order();
    static_unwinder();
}

/// The functions a call runs, laid out together (`link/symbol-order.txt`, made by `bench/order-symbols`): a call
/// then faults in 16 text pages instead of 52 (~0.15 ms). Only for the linker that reads such a file: rustc's own
/// lld, its default for x86_64 Linux since 1.90, when nothing chose another linker. Names the binary does not have
/// (after a dependency or toolchain update) are skipped by the linker; `bench/run call` says how many still match.
fn symbol_order() {
    println!("cargo:rerun-if-changed=link/symbol-order.txt");
    println!("cargo:rerun-if-env-changed=ANIMAWORKS_TOOL_NO_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let target = var("TARGET");
    let rustflags = var("CARGO_ENCODED_RUSTFLAGS");
    // A linker of the configuration (`[target.*] linker`, its variable) reaches us as RUSTC_LINKER; one chosen
    // through flags (`-C linker`, `-C link-arg(s)=-fuse-ld=...`, `-C link-self-contained`) in the encoded flags.
    let linker_chosen = !var("RUSTC_LINKER").is_empty()
        || !var("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_empty()
        || ["linker", "link-self-contained", "fuse-ld"]
            .iter()
            .any(|f| rustflags.contains(f));
    if target != "x86_64-unknown-linux-gnu"
        || var("HOST") != target
        || linker_chosen
        || !var("ANIMAWORKS_TOOL_NO_SYMBOL_ORDER").is_empty()
        || rustc_minor() < 90
    {
        return;
    }
    let file = PathBuf::from(var("CARGO_MANIFEST_DIR")).join("link/symbol-order.txt");
    // A comma would split the -Wl argument.
    if !file.is_file() || file.to_string_lossy().contains(',') {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bin=animaworks-tool=-Wl,--symbol-ordering-file={}",
        file.display()
    );
    println!("cargo:rustc-link-arg-bin=animaworks-tool=-Wl,--no-warn-symbol-ordering");
    // For the test that holds the linker to it (tests/it/startup.rs).
    println!("cargo:rustc-env=ANIMAWORKS_TOOL_SYMBOL_ORDER={}", file.display());
}

/// The minor version of the compiler building this crate (`rustc 1.95.0 (...)`), 0 when unknown.
fn rustc_minor() -> u32 {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("--version").output() else {
        return 0;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
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
