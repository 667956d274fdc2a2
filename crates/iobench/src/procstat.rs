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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_counts_own_threads() {
        assert_eq!(parse_schedstat("123456 789 10\n"), Some(123_456));
        assert_eq!(parse_schedstat("x"), None);
        let pid = std::process::id();
        let a = process_cpu_ns(Path::new("/proc"), pid).unwrap();
        // Burn 50 ms of CPU on this thread: the process total must grow by most of it.
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 50 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let b = process_cpu_ns(Path::new("/proc"), pid).unwrap();
        assert!(
            b - a >= 25_000_000,
            "{a} -> {b}: less than 25 ms of a 50 ms spin"
        );
        assert!(process_cpu_ns(Path::new("/proc"), u32::MAX).is_err());
    }
}
