// Why no `fn main`: std's start-up finds the main thread's stack guard by reading and parsing /proc/self/maps (for
// its stack-overflow message), about a tenth of the runner's own CPU time in a one-shot call (bench/README.md,
// 2§8a). The entry point below does the rest of what std's start-up does and the runner relies on; a stack overflow
// is then a plain SIGSEGV.
// (Under `cargo test` the test harness brings its own main.)
#![cfg_attr(not(test), no_main)]

#[cfg(not(test))]
use std::os::raw::{c_char, c_int};

#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    // (std::env::args is filled by std's own .init_array entry on glibc, independently of this function.)
    standard_fds_open();
    // SAFETY: single-threaded start-up, so no other thread races the disposition; SIG_IGN installs no handler.
    unsafe {
        // As std: a write to a closed pipe is an EPIPE error, not a signal (children get the default back).
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    // As std: a panic that reaches main ends the process with 101 after the hook printed it.
    let code = std::panic::catch_unwind(animaworks_tool::cli::main).unwrap_or(101);
    // Flushes stdout, as returning from std's main would.
    std::process::exit(code)
}

/// The libm functions the binary calls (indicatif's rate and ETA estimates; `log2` only where a debug build does
/// not fold it), defined here: the linker then needs nothing from libm.so.6 and, linking `--as-needed`, drops it,
/// so ld.so no longer loads it at every start (tests/it/startup.rs holds the binary to that).
#[cfg(not(test))]
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

#[cfg(not(test))]
#[unsafe(no_mangle)]
pub extern "C" fn log2(x: f64) -> f64 {
    libm::log2(x)
}

/// As std: descriptors 0–2 are open (on /dev/null when they were closed), so that no pipe or file of the runner
/// can become stdin, stdout or stderr by accident.
/// (Raw libc: rustix's poll takes borrowed descriptors, which must be open; here they may not be.)
#[cfg(not(test))]
fn standard_fds_open() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` holds 3 pollfd structs, alive for the call; a closed descriptor is reported, not an error.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } == -1 {
        return;
    }
    for pfd in fds {
        // SAFETY: open of a C string literal; the descriptor it returns is meant to stay open (it fills the
        // lowest free number, the closed standard one).
        if pfd.revents & libc::POLLNVAL != 0 && unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) } == -1 {
            std::process::abort();
        }
    }
}
