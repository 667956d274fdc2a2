//! Every process's CPU times in one read: a BPF task iterator (`bpf/tasks.bpf.c`, kernel
//! `Documentation/bpf/bpf_iterators.rst`), the cheap path of attribution by process.
//!
//! The /proc path costs one `read` of `/proc/PID/stat` per process per refresh, and the kernel
//! formats each line (about 5 µs a process on this project's VM: a third of procps `top`'s cost
//! at 3,000 processes). The iterator walks the task list in the kernel and writes one 56-byte
//! record per thread into its seq_file; one refresh is a few reads of 64 KiB. The records carry
//! the fields `/proc/PID/stat` is computed from, so [`aggregate`] gives what that file gives
//! ([`ProcTimes`]), with the times to the nanosecond instead of the 10 ms tick and the start time
//! to the tick as the file has it. Kernel threads keep their 15-byte comm (the file names them in
//! full, `kworker/1:1H-kblockd`).
//! Nothing runs between refreshes: no program is attached to a scheduler event, so the rest of
//! the machine pays nothing (a `sched_switch` program would run on every context switch).
//!
//! Loading needs the Cargo feature `ebpf` and `CAP_BPF` + `CAP_PERFMON` (or root), and pids are
//! those of the initial pid namespace, so [`TaskIter::open`] refuses inside another one; the
//! tracker then keeps the /proc path.

use std::collections::HashMap;

use super::cputime::ProcTimes;

/// Bytes of one `struct task_times` (`bpf/tasks.bpf.c`).
pub const RECORD_BYTES: usize = 56;

/// One task's record, as the program writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    pub tgid: u32,
    pub pid: u32,
    pub ppid: u32,
    pub leader: bool,
    /// The thread's on-CPU ns; the leader's adds the group's ended threads.
    pub runtime_ns: u64,
    pub children_ns: u64,
    pub start_ns: u64,
    pub comm: [u8; 16],
}

impl TaskRecord {
    /// Decodes one record (native byte order); `None` for a slice of another length.
    pub fn decode(b: &[u8]) -> Option<TaskRecord> {
        if b.len() != RECORD_BYTES {
            return None;
        }
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        Some(TaskRecord {
            tgid: u32_at(0),
            pid: u32_at(4),
            ppid: u32_at(8),
            leader: u32_at(12) != 0,
            runtime_ns: u64_at(16),
            children_ns: u64_at(24),
            start_ns: u64_at(32),
            comm: b[40..56].try_into().expect("16 bytes"),
        })
    }
}

/// The processes of a walk's records: each thread group's time summed over its threads, named
/// and dated by its leader. A group whose leader the walk did not see (it ended mid-walk) is
/// left out, as the /proc path leaves out a process whose stat file vanished.
/// Times stay in nanoseconds; the start time becomes clock ticks as the kernel's
/// `nsec_to_clock_t` makes field 22 of `/proc/PID/stat`, so a process has the same key either way.
pub fn aggregate(records: &[TaskRecord], ns_per_tick: u64) -> Vec<ProcTimes> {
    let mut runtime: HashMap<u32, u64> = HashMap::with_capacity(records.len());
    for r in records {
        *runtime.entry(r.tgid).or_default() += r.runtime_ns;
    }
    records
        .iter()
        .filter(|r| r.leader)
        .map(|r| {
            let end = r.comm.iter().position(|&c| c == 0).unwrap_or(r.comm.len());
            ProcTimes {
                pid: r.tgid,
                // comm is any 15 bytes, cut mid-character at times: never lose a process to UTF-8.
                comm: String::from_utf8_lossy(&r.comm[..end]).into_owned(),
                ppid: r.ppid,
                cpu_ns: runtime[&r.tgid],
                children_ns: r.children_ns,
                start_ticks: r.start_ns / ns_per_tick.max(1),
            }
        })
        .collect()
}

/// Decodes a walk's bytes; a trailing partial record (never written by the program) is ignored.
pub fn decode_all(bytes: &[u8]) -> Vec<TaskRecord> {
    bytes
        .chunks_exact(RECORD_BYTES)
        .filter_map(TaskRecord::decode)
        .collect()
}

/// Whether this process sees the initial pid namespace's pids (`NSpid:` of
/// `/proc/self/status` has one entry): the iterator reports those.
pub fn in_initial_pid_namespace() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .map(|v| v.split_whitespace().count() == 1)
        })
        .unwrap_or(false)
}

#[cfg(feature = "ebpf")]
mod bpf {
    use std::io::{self, Read};

    use libbpf_rs::{IterOpts, ObjectBuilder};

    static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/tasks.bpf.o"));

    /// The task iterator, loaded and attached; each [`TaskIter::walk`] runs it once.
    pub struct TaskIter {
        link: libbpf_rs::Link,
        buf: Vec<u8>,
        _object: libbpf_rs::Object,
    }

    impl TaskIter {
        /// Loads and attaches the iterator program; the error says why it cannot be used here.
        pub fn open() -> io::Result<TaskIter> {
            if !super::in_initial_pid_namespace() {
                return Err(io::Error::other(
                    "not in the initial pid namespace: the task iterator's pids would not match /proc",
                ));
            }
            crate::ebpf::quiet_libbpf();
            let fail = |step: &str, e: libbpf_rs::Error| io::Error::other(format!("{step}: {e}"));
            let object = ObjectBuilder::default()
                .open_memory(OBJECT)
                .map_err(|e| fail("opening the task iterator", e))?
                .load()
                .map_err(|e| fail("loading the task iterator", e))?;
            let link = object
                .progs_mut()
                .next()
                .expect("bpf/tasks.bpf.c defines one program")
                .attach_iter_with_opts(IterOpts::None)
                .map_err(|e| fail("attaching the task iterator", e))?;
            Ok(TaskIter {
                link,
                buf: Vec::with_capacity(1 << 20),
                _object: object,
            })
        }

        /// Walks every task once and returns its records' bytes.
        pub fn walk(&mut self) -> io::Result<&[u8]> {
            let mut it = libbpf_rs::Iter::new(&self.link).map_err(io::Error::other)?;
            self.buf.clear();
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = it.read(&mut chunk)?;
                if n == 0 {
                    return Ok(&self.buf);
                }
                self.buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

#[cfg(feature = "ebpf")]
pub use bpf::TaskIter;

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(tgid: u32, pid: u32, runtime_ns: u64) -> TaskRecord {
        TaskRecord {
            tgid,
            pid,
            ppid: 0,
            leader: tgid == pid,
            runtime_ns,
            children_ns: 0,
            start_ns: 0,
            comm: [0; 16],
        }
    }

    #[test]
    fn records_decode_at_the_programs_offsets() {
        let mut b = Vec::new();
        for v in [7u32, 9, 1, 1] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [1_234_567_890u64, 20_000_000, 55_000_000_000] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(b"a (b) c\0\0\0\0\0\0\0\0\0");
        let r = TaskRecord::decode(&b).unwrap();
        assert_eq!((r.tgid, r.pid, r.ppid, r.leader), (7, 9, 1, true));
        assert_eq!(
            (r.runtime_ns, r.children_ns, r.start_ns),
            (1_234_567_890, 20_000_000, 55_000_000_000)
        );
        assert!(TaskRecord::decode(&b[..55]).is_none());
        assert_eq!(decode_all(&[b.clone(), b[..10].to_vec()].concat()).len(), 1);
    }

    /// Threads add up under their leader; the start time becomes ticks as `nsec_to_clock_t`
    /// truncates it; a group without its leader is left out.
    #[test]
    fn threads_add_up_under_their_leader() {
        let mut leader = rec(100, 100, 25_000_000);
        leader.children_ns = 19_999_999;
        leader.start_ns = 1_000_000_009;
        leader.ppid = 1;
        leader.comm[..4].copy_from_slice(b"java");
        let recs = vec![
            rec(101, 101, 5_000_000_000),
            leader,
            rec(100, 102, 7_500_000),
            rec(100, 103, 0),
            rec(200, 201, 9_000_000_000),
        ];
        let mut stats = aggregate(&recs, 10_000_000);
        stats.sort_by_key(|s| s.pid);
        assert_eq!(stats.len(), 2, "{stats:?}");
        assert_eq!(
            stats[0],
            ProcTimes {
                pid: 100,
                comm: "java".into(),
                ppid: 1,
                cpu_ns: 32_500_000,
                children_ns: 19_999_999,
                start_ticks: 100,
            }
        );
        assert_eq!((stats[1].pid, stats[1].cpu_ns), (101, 5_000_000_000));
    }
}
