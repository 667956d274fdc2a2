//! Every process's CPU times for attribution by process: one walk of the BPF task iterator
//! ([`super::task_iter`]) where it loads, else one read of `/proc/PID/stat` per process, kept
//! open between scans. `WATTIO_CPU_TIMES` ([`CPU_TIMES_ENV`]) chooses.

use super::cputime::{self, ProcStat, ProcTimes};
#[cfg(feature = "ebpf")]
use super::task_iter;
use crate::root::SysRoot;
use std::collections::HashMap;
use std::io;

/// Where attribution by process reads every process's CPU times.
enum CpuTimes {
    /// `/proc/PID/stat`, one read per process.
    Proc,
    /// The BPF task iterator ([`super::task_iter`]): one walk per refresh.
    #[cfg(feature = "ebpf")]
    TaskIter(task_iter::TaskIter),
}

/// `WATTIO_CPU_TIMES`: `auto` (the task iterator where it loads, else /proc), `proc` or `bpf`
/// (the iterator or an error).
pub const CPU_TIMES_ENV: &str = "WATTIO_CPU_TIMES";

/// The CPU-time reader `wanted` names (a `WATTIO_CPU_TIMES` value), for attribution by process
/// under `root`.
fn choose_cpu_times(root: &SysRoot, wanted: &str) -> io::Result<CpuTimes> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{CPU_TIMES_ENV}={wanted:?}: not auto, proc or bpf; unset it or give one of those"
            ),
        )
    };
    match wanted {
        "proc" => return Ok(CpuTimes::Proc),
        "" | "auto" | "bpf" => {}
        _ => return Err(bad()),
    }
    let required = wanted == "bpf";
    if !root.is_real() {
        if required {
            return Err(io::Error::other(format!(
                "{CPU_TIMES_ENV}=bpf: the task iterator reads the real kernel, not the tree under {}; unset WATTIO_ROOT or {CPU_TIMES_ENV}",
                root.base().display()
            )));
        }
        return Ok(CpuTimes::Proc);
    }
    match open_task_iter() {
        Ok(c) => Ok(c),
        Err(why) if required => Err(io::Error::other(format!("{CPU_TIMES_ENV}=bpf: {why}"))),
        Err(_) => Ok(CpuTimes::Proc),
    }
}

/// The task iterator, or why it cannot be used here and what to do.
#[cfg(feature = "ebpf")]
fn open_task_iter() -> Result<CpuTimes, String> {
    task_iter::TaskIter::open()
        .map(CpuTimes::TaskIter)
        .map_err(|e| {
            format!("{e}; run as root (CAP_BPF and CAP_PERFMON) or set {CPU_TIMES_ENV}=proc")
        })
}

/// A build without the `ebpf` feature has no task iterator.
#[cfg(not(feature = "ebpf"))]
fn open_task_iter() -> Result<CpuTimes, String> {
    Err(format!(
        "this build has no BPF support; {}",
        crate::ebpf::NOT_BUILT_FIX
    ))
}

/// Reads every process's CPU times, the cheapest way this machine allows.
pub(super) struct ProcReader {
    root: SysRoot,
    ns_per_tick: u64,
    cpu_times: CpuTimes,
    /// The scan in progress: kept stat files not read in it are closed at its end.
    generation: u64,
    buf: Vec<u8>,
    /// Open `/proc/PID/stat` files of the live processes, with the scan that last listed them:
    /// read again from offset 0 each scan instead of opened and closed (a third of a scan's
    /// CPU). Only under the real `/proc`, where a reaped process's file answers `ESRCH`, so a
    /// reused PID is opened afresh; a fixture's file would keep its old content.
    pub(super) stat_files: HashMap<u32, (std::fs::File, u64)>,
    /// How many of those may be open: half the descriptor limit, at most 8192.
    pub(super) stat_file_budget: usize,
}

impl ProcReader {
    /// A reader under `root`: the one `wanted` names (a `WATTIO_CPU_TIMES` value), or `/proc`
    /// alone with `None`.
    pub(super) fn open(root: &SysRoot, wanted: Option<&str>) -> io::Result<ProcReader> {
        let cpu_times = match wanted {
            Some(w) => choose_cpu_times(root, w)?,
            None => CpuTimes::Proc,
        };
        Ok(ProcReader {
            root: root.clone(),
            ns_per_tick: cputime::ns_per_tick(),
            cpu_times,
            generation: 0,
            buf: Vec::with_capacity(1024),
            stat_files: HashMap::new(),
            stat_file_budget: if root.is_real() {
                stat_file_budget()
            } else {
                0
            },
        })
    }

    /// `bpf task iterator` or `/proc/PID/stat`.
    pub(super) fn source(&self) -> &'static str {
        match self.cpu_times {
            #[cfg(feature = "ebpf")]
            CpuTimes::TaskIter(_) => "bpf task iterator",
            CpuTimes::Proc => "/proc/PID/stat",
        }
    }

    /// Every live process's times; stat files of processes gone since the last call are closed.
    pub(super) fn read_all(&mut self) -> io::Result<Vec<ProcTimes>> {
        self.generation += 1;
        let out = self.read_processes()?;
        let gen = self.generation;
        self.stat_files.retain(|_, (_, seen)| *seen == gen);
        Ok(out)
    }

    /// Every process's stat: from the task iterator where it was opened, else from `/proc`. A
    /// walk that fails leaves the iterator for good and reads `/proc` instead.
    fn read_processes(&mut self) -> io::Result<Vec<ProcTimes>> {
        #[cfg(feature = "ebpf")]
        if let CpuTimes::TaskIter(it) = &mut self.cpu_times {
            match it.walk() {
                Ok(bytes) => {
                    let records = task_iter::decode_all(bytes);
                    return Ok(task_iter::aggregate(&records, self.ns_per_tick));
                }
                Err(_) => self.cpu_times = CpuTimes::Proc,
            }
        }
        self.read_proc_dir()
    }

    /// Every process's `/proc/PID/stat`, listed from `/proc`.
    fn read_proc_dir(&mut self) -> io::Result<Vec<ProcTimes>> {
        let proc_dir = self.root.path("/proc");
        let dir = std::fs::read_dir(&proc_dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{}: {e}; is /proc mounted?", proc_dir.display()),
            )
        })?;
        let mut out = Vec::new();
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            // None: ended between the listing and the read.
            let ns_per_tick = self.ns_per_tick;
            out.extend(
                self.read_stat(pid)
                    .map(|st| ProcTimes::from_stat(st, ns_per_tick)),
            );
        }
        Ok(out)
    }

    /// One `read` per process: of its `/proc/PID/stat` kept open since an earlier scan (from
    /// offset 0, so the kernel formats it afresh), else opened now and kept while the budget
    /// allows. A kept file that fails (the process was reaped: `ESRCH`) is dropped and the
    /// path opened again, which finds the PID's new process if it was reused. A stat line is a
    /// few hundred bytes; a full buffer falls back to reading the rest.
    fn read_stat(&mut self, pid: u32) -> Option<ProcStat> {
        let gen = self.generation;
        if let Some((f, seen)) = self.stat_files.get_mut(&pid) {
            if read_whole_at_start(f, &mut self.buf).is_ok() {
                *seen = gen;
                return cputime::parse_proc_stat(&String::from_utf8_lossy(&self.buf));
            }
            self.stat_files.remove(&pid);
        }
        let path = self.root.path(format!("/proc/{pid}/stat"));
        let f = std::fs::File::open(path).ok()?;
        read_whole_at_start(&f, &mut self.buf).ok()?;
        if self.stat_files.len() < self.stat_file_budget {
            self.stat_files.insert(pid, (f, gen));
        }
        // comm is any 15 bytes, cut mid-character at times: never lose a process to UTF-8.
        cputime::parse_proc_stat(&String::from_utf8_lossy(&self.buf))
    }
}

/// Reads all of `f` from offset 0 into `buf` (`pread`, so a kept `/proc` file is formatted
/// afresh): one call for a stat line, more only for a longer file.
fn read_whole_at_start(f: &std::fs::File, buf: &mut Vec<u8>) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    buf.clear();
    let mut chunk = [0u8; 1024];
    loop {
        let n = f.read_at(&mut chunk, buf.len() as u64)?;
        buf.extend_from_slice(&chunk[..n]);
        if n < chunk.len() {
            return Ok(());
        }
    }
}

/// How many `/proc/PID/stat` files a process scan may keep open: half the soft descriptor
/// limit, so the rest of the process keeps room, and at most 8192.
fn stat_file_budget() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into `lim`, which outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    ((lim.rlim_cur / 2) as usize).min(8192)
}
