//! CPU time of a process from `/proc/PID/task/*/schedstat` (nanoseconds on CPU per thread).
//!
//! `/proc/PID/stat` counts 10 ms ticks, too coarse for millisecond windows; schedstat has ns.
//! A thread that exits inside a window takes its time with it, so the JVM is started with
//! `-XX:-UseDynamicNumberOfCompilerThreads` (its other threads live as long as it does).

use std::io;
use std::path::Path;

/// Sum of the on-CPU nanoseconds of every thread of `pid` under `proc_root` (normally `/proc`).
pub fn process_cpu_ns(proc_root: &Path, pid: u32) -> io::Result<u64> {
    let tasks = proc_root.join(pid.to_string()).join("task");
    let mut total = 0u64;
    for e in std::fs::read_dir(&tasks)? {
        let e = e?;
        match std::fs::read_to_string(e.path().join("schedstat")) {
            Ok(s) => {
                total += parse_schedstat(&s).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("unreadable schedstat under {}", tasks.display()),
                    )
                })?
            }
            // The thread ended between the listing and the read.
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(err),
        }
    }
    Ok(total)
}

/// First field of a schedstat line: time spent on the CPU, in ns.
pub fn parse_schedstat(s: &str) -> Option<u64> {
    s.split_ascii_whitespace().next()?.parse().ok()
}

/// Test helper: spins until this thread has used `ms` of CPU; returns the ns it used.
#[doc(hidden)]
pub fn spin_cpu_ms(ms: u64) -> u64 {
    let now = || {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the struct; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    };
    let t0 = now();
    let mut x = 1u64;
    while now() - t0 < ms * 1_000_000 {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    now() - t0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_counts_own_threads() {
        assert_eq!(parse_schedstat("123456 789 10\n"), Some(123_456));
        assert_eq!(parse_schedstat("x"), None);
        assert!(process_cpu_ns(Path::new("/proc"), u32::MAX).is_err());
    }
}
