//! Numbers that come from outside (a tool's `--schemas`, the command line, the settings file, a task file) are
//! checked where they enter. A duration from such a number must never panic (`Duration::from_secs_f64` does on
//! infinity, NaN, negatives and values past `u64::MAX` seconds) nor overflow a deadline (`Instant + Duration`).

use std::time::Duration;

/// The longest deadline a call, a probe or a wait may have: 7 days. Longer work belongs in a background task
/// that reports progress, and a bound keeps every deadline representable.
pub const MAX_SECONDS: f64 = 7.0 * 86400.0;

/// A number of seconds out of range: the sentence names what it was for and the accepted range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what} must be a number of seconds above 0 and at most {max} (7 days), not {value}", max = MAX_SECONDS as u64)]
pub struct OutOfRange {
    pub what: String,
    pub value: f64,
}

/// `v` seconds as a duration, when `v` is a number above 0 and at most [`MAX_SECONDS`].
pub fn seconds(v: f64, what: &str) -> Result<Duration, OutOfRange> {
    if v.is_finite() && v > 0.0 && v <= MAX_SECONDS {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(OutOfRange {
            what: what.to_owned(),
            value: v,
        })
    }
}

/// `v` seconds, forced into range: for numbers already stored (a task file, a cached manifest) where refusing
/// would strand work; anything not a positive number becomes `fallback`.
pub fn clamp_seconds(v: f64, fallback: f64) -> Duration {
    let v = if v.is_finite() && v > 0.0 { v } else { fallback };
    Duration::from_secs_f64(v.clamp(0.001, MAX_SECONDS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_panics() {
        for v in [f64::INFINITY, f64::NAN, -1.0, 0.0, 1e30, f64::MAX, f64::MIN_POSITIVE] {
            let _ = seconds(v, "x");
            let d = clamp_seconds(v, 60.0);
            assert!(d.as_secs_f64() <= MAX_SECONDS && d > Duration::ZERO);
        }
        assert_eq!(seconds(2.5, "x").unwrap(), Duration::from_millis(2500));
        assert!(seconds(1e30, "--timeout")
            .unwrap_err()
            .to_string()
            .contains("--timeout"));
    }
}

/// The environment variable that sets the runner's output cap.
pub const MAX_OUTPUT_ENV: &str = crate::env_vars::MAX_OUTPUT.name;
/// Default output cap: 8 MiB (protocol.md §5.3).
pub const DEFAULT_MAX_OUTPUT: u64 = 8 * 1024 * 1024;
/// The highest output cap a call may set (`--max-output`, `ANIMAWORKS_TOOL_MAX_OUTPUT`, a request's
/// `max_output`): 1 GiB. Output up to the cap is held in memory; past it, it goes to a file (protocol.md §5.3).
pub const MAX_OUTPUT_CEILING: u64 = 1 << 30;
