//! CPU-time readers: the one place wattio reads how long a process, a cgroup or the machine ran.
//!
//! * a process of ours that ended: `wait4` rusage ([`wait_child`], [`wait4_child`]) —
//!   user + system time of it and every descendant it waited for, taken at exit, so nothing
//!   that started and ended inside the window is lost;
//! * this process: `CLOCK_PROCESS_CPUTIME_ID` ([`self_cpu_s`]), nanoseconds, every thread
//!   including ended ones;
//! * another live process: the sum of `/proc/PID/task/*/schedstat` (nanoseconds on CPU per
//!   thread, kernel `Documentation/scheduler/sched-stats.rst`), or `/proc/PID/stat`
//!   utime + stime in clock ticks where schedstat is missing (kernel without CONFIG_SCHEDSTATS
//!   / CONFIG_SCHED_INFO) ([`process_cpu_ns`]);
//! * every process at once, for `wattio top`: `/proc/PID/stat` ([`read_proc_stat`]): one read per
//!   process, and it keeps the time of the process's ended threads, which per-task schedstat loses;
//! * the machine: busy ticks of `/proc/stat` ([`machine_busy_cpu_s`]).
//!
//! Every path goes through [`SysRoot`], so fixture trees stand in for `/proc`.

use crate::root::SysRoot;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// Clock ticks per second of `/proc` tick counters (`USER_HZ`, 100 on Linux).
pub fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// First field of a schedstat line: time spent on the CPU, in ns.
pub fn parse_schedstat(s: &str) -> Option<u64> {
    s.split_ascii_whitespace().next()?.parse().ok()
}

/// What `/proc/PID/stat` says about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    /// The command name (`comm`, at most 15 bytes; may hold spaces and parentheses).
    pub comm: String,
    /// The parent's pid (field 4).
    pub ppid: u32,
    /// User + system time in clock ticks (field 14 + 15), ended threads included.
    pub cpu_ticks: u64,
    /// User + system time of the children it has waited for, in clock ticks (cutime + cstime,
    /// field 16 + 17): each reaped child's own time plus that of the children it waited for.
    pub children_ticks: u64,
    /// Start time after boot in clock ticks (field 22): with the pid, it names one process
    /// even when pids are reused.
    pub start_ticks: u64,
}

/// A process's CPU times in nanoseconds, as attribution by process keeps them: from the task
/// iterator to the nanosecond ([`super::task_iter`]), from `/proc/PID/stat` to the tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcTimes {
    pub pid: u32,
    pub comm: String,
    pub ppid: u32,
    /// On-CPU time, ended threads included.
    pub cpu_ns: u64,
    /// On-CPU time of the children it has waited for (cutime + cstime).
    pub children_ns: u64,
    /// Start time after boot in clock ticks, as `/proc/PID/stat` gives it (field 22).
    pub start_ticks: u64,
}

impl ProcTimes {
    /// A stat line's times, each tick `ns_per_tick` nanoseconds.
    pub fn from_stat(st: ProcStat, ns_per_tick: u64) -> ProcTimes {
        ProcTimes {
            pid: st.pid,
            comm: st.comm,
            ppid: st.ppid,
            cpu_ns: st.cpu_ticks.saturating_mul(ns_per_tick),
            children_ns: st.children_ticks.saturating_mul(ns_per_tick),
            start_ticks: st.start_ticks,
        }
    }
}

/// Nanoseconds per clock tick ([`ticks_per_s`]).
pub fn ns_per_tick() -> u64 {
    (1e9 / ticks_per_s().max(1.0)).round() as u64
}

/// Parses a `/proc/PID/stat` line (see proc(5)). `comm` is found between the first `(` and
/// the *last* `)`, since it may itself contain parentheses.
pub fn parse_proc_stat(line: &str) -> Option<ProcStat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    if close < open {
        return None;
    }
    let pid = line[..open].trim().parse().ok()?;
    let comm = line[open + 1..close].to_string();
    // Fields after comm start at field 3 (state); 3 to 22 are all this needs. Kept in an array,
    // not a Vec: `top` parses one line per process per refresh.
    let mut rest = [""; 20];
    for (slot, f) in rest
        .iter_mut()
        .zip(line[close + 1..].split_ascii_whitespace())
    {
        *slot = f;
    }
    let field = |n: usize| -> Option<u64> { rest.get(n - 3)?.parse().ok() };
    Some(ProcStat {
        pid,
        comm,
        ppid: field(4)?.try_into().ok()?,
        cpu_ticks: field(14)?.checked_add(field(15)?)?,
        children_ticks: field(16)?.checked_add(field(17)?)?,
        start_ticks: field(22)?,
    })
}

/// Reads `/proc/PID/stat` under `root`.
pub fn read_proc_stat(root: &SysRoot, pid: u32) -> io::Result<ProcStat> {
    let path = root.path(format!("/proc/{pid}/stat"));
    let text = std::fs::read_to_string(&path)?;
    parse_proc_stat(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a proc(5) stat line", path.display()),
        )
    })
}

/// On-CPU nanoseconds of every live thread of `pid`: the sum of its tasks' schedstat, or, where
/// the kernel has no schedstat, `/proc/PID/stat` ticks converted to ns. A thread that ended
/// takes its schedstat time with it: callers watching a window keep such threads alive (the
/// JVM's compiler threads) or use [`wait4_child`] at exit.
pub fn process_cpu_ns(root: &SysRoot, pid: u32) -> io::Result<u64> {
    let tasks = root.path(format!("/proc/{pid}/task"));
    let mut total = 0u64;
    let mut any = false;
    for e in std::fs::read_dir(&tasks)? {
        let e = e?;
        match std::fs::read_to_string(e.path().join("schedstat")) {
            Ok(s) => {
                any = true;
                total += parse_schedstat(&s).ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("unreadable schedstat under {}", tasks.display()),
                    )
                })?
            }
            // The thread ended between the listing and the read (ENOENT, or ESRCH once the file
            // is open), or there is no schedstat.
            Err(err)
                if err.kind() == io::ErrorKind::NotFound
                    || err.raw_os_error() == Some(libc::ESRCH) => {}
            Err(err) => return Err(err),
        }
    }
    if any {
        return Ok(total);
    }
    let st = read_proc_stat(root, pid)?;
    Ok((st.cpu_ticks as f64 / ticks_per_s() * 1e9) as u64)
}

fn clock_s(clock: libc::clockid_t) -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct; the CPU-time clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// CPU seconds of this process so far (every thread, ended ones included).
pub fn self_cpu_s() -> f64 {
    clock_s(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU seconds of the calling thread so far: what a load generator burns, whatever the
/// scheduler gives to other threads.
pub fn thread_cpu_s() -> f64 {
    clock_s(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Busy ticks of one `cpuN` (or aggregate `cpu`) line of `/proc/stat`, given the counters after
/// its label: user + nice + system + irq + softirq (not idle, iowait, or steal: time the
/// hypervisor gave to another guest). The one definition of "busy" in wattio.
pub fn busy_ticks(counters: &str) -> Option<u64> {
    let v: Vec<u64> = counters
        .split_ascii_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq [steal guest guest_nice]
    (v.len() >= 7).then(|| v[0] + v[1] + v[2] + v[5] + v[6])
}

/// Busy CPU-seconds of the whole machine since boot: user, nice, system, irq and softirq ticks of
/// the aggregate `cpu` line of `/proc/stat` (idle, iowait and steal are not busy: steal is time
/// the hypervisor gave to another guest).
pub fn machine_busy_cpu_s(root: &SysRoot) -> io::Result<f64> {
    let path = root.path("/proc/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{}: {e}; is /proc mounted?", path.display()),
        )
    })?;
    let busy = text
        .lines()
        .find_map(|l| l.strip_prefix("cpu "))
        .and_then(busy_ticks)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: no aggregate `cpu` line with 7 tick counters",
                    path.display()
                ),
            )
        })?;
    Ok(busy as f64 / ticks_per_s())
}

/// How a waited-for child ended and what CPU time it and its waited-for descendants used.
#[derive(Debug, Clone, Copy)]
pub struct ChildUsage {
    pub status: ExitStatus,
    /// User + system seconds (`ru_utime + ru_stime`).
    pub cpu_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// Bytes it and its waited-for descendants dirtied in the page cache or wrote directly
    /// (`ru_oublock` × 512: the task's `write_bytes`).
    pub written_bytes: u64,
}

/// `wait4` on one child, retrying on EINTR: its status and resource usage.
pub fn wait4_child(pid: u32) -> io::Result<ChildUsage> {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value for wait4 to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pointers are valid; pid is the caller's child.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut ru) };
        if r == pid as libc::pid_t {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
            let (user_s, sys_s) = (tv(ru.ru_utime), tv(ru.ru_stime));
            return Ok(ChildUsage {
                status: ExitStatus::from_raw(status),
                cpu_s: user_s + sys_s,
                user_s,
                sys_s,
                written_bytes: (ru.ru_oublock.max(0) as u64).saturating_mul(512),
            });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reaps `child` with [`wait4_child`] and tells `std` it is gone, so its handle does not wait
/// again.
pub fn wait_child(child: std::process::Child) -> io::Result<ChildUsage> {
    let usage = wait4_child(child.id())?;
    // Our wait4 reaped it; dropping the handle does not wait (std never reaps on drop).
    drop(child);
    Ok(usage)
}

/// The shell convention for an exit status: the code, or 128 + the signal.
pub fn shell_code(status: &ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines_with_awkward_comms() {
        // Fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
        // cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime ...
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 10 0 0 0 7 3 5 6 20 0 1 0 12345 1000 10";
        let s = parse_proc_stat(line).unwrap();
        assert_eq!(s.pid, 42);
        assert_eq!(s.comm, "a (b) c");
        assert_eq!(s.cpu_ticks, 10);
        assert_eq!(s.children_ticks, 11);
        assert_eq!(s.ppid, 1);
        assert_eq!(s.start_ticks, 12345);
        assert!(parse_proc_stat("42 (x) S 1 2").is_none());
        assert!(parse_proc_stat("garbage").is_none());
    }

    #[test]
    fn schedstat_first_field() {
        assert_eq!(parse_schedstat("123456 789 10\n"), Some(123_456));
        assert_eq!(parse_schedstat("x"), None);
    }

    #[test]
    fn own_process_readers_agree() {
        let root = SysRoot::new("/");
        // This thread's own clock: other test threads must not shorten the spin.
        let spin_until = thread_cpu_s() + 0.05;
        while thread_cpu_s() < spin_until {
            std::hint::black_box(0u64);
        }
        let sched = process_cpu_ns(&root, std::process::id()).unwrap() as f64 * 1e-9;
        let clock = self_cpu_s();
        // Threads of other tests come and go: schedstat of live threads ≤ the process clock.
        assert!(sched > 0.04 && sched <= clock + 0.01, "{sched} vs {clock}");
        let st = read_proc_stat(&root, std::process::id()).unwrap();
        assert!(st.cpu_ticks > 0);
        assert!(machine_busy_cpu_s(&root).unwrap() > 0.0);
        assert!(process_cpu_ns(&root, u32::MAX).is_err());
    }

    #[test]
    fn wait4_takes_the_cpu_time_of_a_short_lived_child() {
        let child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; exit 3",
            ])
            .spawn()
            .unwrap();
        let u = wait_child(child).unwrap();
        assert_eq!(shell_code(&u.status), 3);
        assert!(u.cpu_s > 0.0 && (u.cpu_s - u.user_s - u.sys_s).abs() < 1e-9);
    }
}
