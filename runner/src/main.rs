// Why no `fn main`: std's start-up finds the main thread's stack guard by reading and parsing /proc/self/maps (for
// its stack-overflow message), about a tenth of the runner's own CPU time in a one-shot call (bench/README.md,
// 2§8a). The entry point below does the rest of what std's start-up does and the runner relies on
// (`awt_sys::entry`); a stack overflow is then a plain SIGSEGV.
// (Under `cargo test` the test harness brings its own main.)
#![cfg_attr(not(test), no_main)]
// Why not `forbid`: the entry point and the libm replacements below must be unmangled symbols of the binary
// itself (the linker takes them from here, before libm), and `no_mangle` counts as unsafe code. Nothing else
// here is; every unsafe block is in awt_sys.
#![deny(unsafe_code)]

#[cfg(not(test))]
use std::os::raw::{c_char, c_int};

#[cfg(not(test))]
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    // (std::env::args is filled by std's own .init_array entry on glibc, independently of this function.)
    awt_sys::entry::start_like_std();
    // As std: a panic that reaches main ends the process with 101 after the hook printed it.
    let code = std::panic::catch_unwind(animaworks_tool::cli::main).unwrap_or(101);
    // The empty temp dirs kept for later calls of this process (awt_core's sandbox/tmp.rs).
    awt_core::sandbox::release_spares();
    // Flushes stdout, as returning from std's main would.
    std::process::exit(code)
}

/// The libm functions the binary calls (indicatif's rate and ETA estimates; `log2` only where a debug build does
/// not fold it), defined here: the linker then needs nothing from libm.so.6 and, linking `--as-needed`, drops it,
/// so ld.so no longer loads it at every start (tests/it/startup.rs holds the binary to that).
#[cfg(not(test))]
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

#[cfg(not(test))]
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub extern "C" fn log2(x: f64) -> f64 {
    libm::log2(x)
}
