//! Is a recorded process (a pid and its start time) still running? A worker asks this of every running task's
//! worker and every registered worker at each look, several looks a task; reading `/proc/<pid>/stat` each time
//! was a measurable share of a worker's CPU (the kernel sums the times of all of a process's threads for that file). So a
//! process answers the first question for a pid from `/proc` and keeps a pidfd of it for the next ones.

use rustix::process::{pidfd_open, Pid, PidfdFlags};
use std::os::fd::OwnedFd;
use std::sync::Mutex;

/// More than the workers and running tasks of an anima; an older entry goes first past it.
const KEPT: usize = 64;

static KNOWN: Mutex<Vec<(i32, u64, OwnedFd)>> = Mutex::new(Vec::new());

/// Is process `pid` running, not a zombie, and started at `start` (clock ticks after boot, `/proc/<pid>/stat`
/// field 22)?
pub fn alive(pid: i32, start: u64) -> bool {
    if pid == std::process::id() as i32 {
        return own_start() == Some(start);
    }
    let Ok(mut known) = KNOWN.lock() else {
        return super::start_time(pid) == Some(start);
    };
    if let Some(i) = known.iter().position(|(p, s, _)| *p == pid && *s == start) {
        match awt_sys::process::pidfd_exited(&known[i].2) {
            Some(false) => return true,
            Some(true) => {
                known.remove(i);
                return false;
            }
            // The kernel did not say: asked of /proc below, as the first time.
            None => {
                known.remove(i);
            }
        }
    }
    // Why the pidfd before the read: the recorded process started before this question was asked, so if the pid
    // still has its start time after the open, the pidfd is of that process and not of one that took the pid.
    let fd = Pid::from_raw(pid).and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
    if super::start_time(pid) != Some(start) {
        return false;
    }
    if let Some(fd) = fd {
        if known.len() >= KEPT {
            known.remove(0);
        }
        known.push((pid, start, fd));
    }
    true
}

fn own_start() -> Option<u64> {
    static OWN: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| super::start_time(std::process::id() as i32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn child() -> std::process::Child {
        Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep")
    }

    #[test]
    fn a_process_is_alive_until_it_exits_even_once_its_pidfd_is_kept() {
        let mut c = child();
        let pid = c.id() as i32;
        let start = super::super::start_time(pid).expect("a start time");
        assert!(alive(pid, start), "first answer, from /proc");
        assert!(alive(pid, start), "second answer, from the kept pidfd");
        assert!(!alive(pid, start + 1), "another start time is another process");
        c.kill().expect("kill");
        // A zombie until reaped: exited all the same.
        for _ in 0..200 {
            if !alive(pid, start) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!alive(pid, start), "a killed process, not yet reaped, is not alive");
        c.wait().expect("reap");
        assert!(!alive(pid, start), "nor once reaped");
    }

    #[test]
    fn this_process_is_alive_and_a_pid_that_never_was_is_not() {
        let me = std::process::id() as i32;
        let start = super::super::start_time(me).expect("own start time");
        assert!(alive(me, start));
        assert!(!alive(me, start + 1));
        assert!(!alive(i32::MAX, 1));
    }
}
