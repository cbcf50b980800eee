//! What std's start-up does that the runner's own entry point (`runner/src/main.rs`, which skips std's `main`
//! for start-up time) must still do before anything else.

/// As std: SIGPIPE ignored (a write to a closed pipe is an EPIPE error, not a signal; children get the default
/// back), and descriptors 0–2 open (on /dev/null when they were closed), so that no pipe or file of the runner
/// can become stdin, stdout or stderr by accident. Call it first, while the process has one thread.
pub fn start_like_std() {
    // SAFETY: single-threaded start-up, so no other thread races the disposition; SIG_IGN installs no handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    standard_fds_open();
}

/// (Raw libc: rustix's poll takes borrowed descriptors, which must be open; here they may not be.)
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
        if pfd.revents & libc::POLLNVAL != 0 {
            use rustix::fs::{Mode, OFlags};
            use std::os::fd::IntoRawFd;
            // Kept open for good (never dropped): it takes the lowest free number, the closed standard one.
            if rustix::fs::open(c"/dev/null", OFlags::RDWR, Mode::empty())
                .map(IntoRawFd::into_raw_fd)
                .is_err()
            {
                std::process::abort();
            }
        }
    }
}
