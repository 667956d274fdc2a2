//! The kernel's I/O work by the coarser rule, where the BPF program cannot load: by cgroup, the
//! CPU time of the kernel threads that do block I/O, split between the cgroups by the bytes of
//! block I/O each did over the interval (cgroup v2 `io.stat`, kernel
//! Documentation/admin-guide/cgroup-v2.rst, "IO Interface Files").
//!
//! Which threads: `jbd2/*` (the ext4 journal) and the kworkers whose latest work queue is a
//! block I/O one. A kworker's name carries the queue of the work it runs or last ran
//! (`kworker/u8:2-flush-254:0`, `kworker/1:1H-kblockd`: kernel/workqueue.c, `wq_worker_comm`);
//! a kworker counts for an interval if its name said so at either end. Its time is taken from
//! the root cgroup, where kernel threads run, and given to the cgroups by their bytes.
//!
//! What this rule cannot see, and the BPF program can: interrupt frames (block completions and
//! network softirqs run in whatever task they interrupt), network work of any kind (io.stat is
//! block I/O only), and a kworker's I/O work between two other work items. Writeback is charged
//! to the cgroup that dirtied the pages only where the kernel's cgroup writeback is on (the
//! `memory` and `io` controllers both on the v2 hierarchy, a file system that supports it:
//! ext2/4, xfs, btrfs); otherwise the bytes are the root's. The root cgroup's own bytes (its
//! `io.stat`, system-wide, less its children's: Linux 5.8 and later) take their share too; on
//! older kernels the root has no `io.stat` and the cgroups that did I/O share all of it.
//! The work is reported as the kind `writeback`, whichever of these threads did it.

use std::collections::HashMap;
use std::path::PathBuf;

use super::{reattribute, Context, DoerRecord, OwnerRecord, Summary, Work};
use crate::attribution::cgroup::{self, Previous};
use crate::attribution::cputime;
use crate::attribution::entry::{By, Entry};
use crate::root::SysRoot;

/// The label of kernel I/O work charged by this rule.
pub const BYTES_LABEL: &str = "attributed (kernel I/O work, coarser rule: the CPU time of kworkers on block I/O work queues and jbd2, split by each cgroup's io.stat bytes; interrupt frames and network work not split)";

/// Whether a kernel thread's name (as `/proc/PID/stat` gives it, up to 63 bytes for a kworker)
/// says it does, or last did, block I/O work.
pub fn is_io_thread(comm: &str) -> bool {
    if comm.starts_with("jbd2/") {
        return true;
    }
    let Some(rest) = comm.strip_prefix("kworker/") else {
        return false;
    };
    // `+` while the work runs, `-` after.
    let Some(i) = rest.find(['-', '+']) else {
        return false;
    };
    let queue = &rest[i + 1..];
    ["flush-", "writeback", "kblockd", "dio/", "blkcg_punt_bio"]
        .iter()
        .any(|q| queue.starts_with(q))
}

/// A kernel thread as last read.
#[derive(Debug, Clone, Copy)]
struct Seen {
    start_ticks: u64,
    cpu_ns: u64,
    io: bool,
}

/// The coarser rule's state: each kernel thread's and cgroup's counters at the previous step.
pub struct ByBytes {
    root: SysRoot,
    mount: PathBuf,
    ns_per_tick: u64,
    /// `None` before the first step, which only sets the counters.
    threads: Option<HashMap<u32, Seen>>,
    bytes: HashMap<String, Previous>,
}

impl ByBytes {
    /// Starts on the cgroup v2 hierarchy at `mount`, or says why the rule cannot work there.
    pub fn open(root: &SysRoot, mount: PathBuf) -> Result<ByBytes, String> {
        let controllers = std::fs::read_to_string(mount.join("cgroup.controllers"))
            .map_err(|e| format!("{}: {e}", mount.join("cgroup.controllers").display()))?;
        if !controllers.split_ascii_whitespace().any(|c| c == "io") {
            return Err(format!(
                "the io controller is not on the cgroup v2 hierarchy at {} (it is bound to cgroup v1), so there is no io.stat to split by; boot with systemd.unified_cgroup_hierarchy=1",
                mount.display()
            ));
        }
        let mut b = ByBytes {
            root: root.clone(),
            mount,
            ns_per_tick: cputime::ns_per_tick(),
            threads: None,
            bytes: HashMap::new(),
        };
        b.take()?;
        Ok(b)
    }

    /// The work since the previous step: the I/O threads' CPU time as doers in the root cgroup,
    /// each cgroup's share of it by its own bytes as an owner (a cgroup's id is its directory's
    /// inode, named by `paths`), all of it unowned where no cgroup did block I/O.
    fn take(&mut self) -> Result<(Work, HashMap<u64, String>), String> {
        // Both read before either is kept: a failed read leaves the previous counters whole, so
        // the next step covers this interval's threads and bytes together.
        let now = cgroup::read_io_bytes(&self.mount).map_err(|e| e.to_string())?;
        let (doers, seen) = self.io_threads()?;
        let own = cgroup::own_deltas(&now, &self.bytes, None);
        self.bytes = cgroup::previous(&now, None);
        self.threads = Some(seen);
        let root_ino = std::fs::metadata(&self.mount)
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .unwrap_or(0);
        let mut paths: HashMap<u64, String> = now.iter().map(|c| (c.ino, c.path.clone())).collect();
        paths.insert(root_ino, "/".into());
        let doers: Vec<DoerRecord> = doers
            .into_iter()
            .map(|mut d| {
                d.cgroup_id = root_ino;
                d
            })
            .collect();
        let pool_ns: u64 = doers.iter().map(|d| d.task_ns).sum();
        let total_bytes: u64 = own.values().sum();
        let mut work = Work {
            doers,
            ..Work::default()
        };
        if total_bytes == 0 {
            // The threads keep their time: it is reported as unowned, not moved.
            work.doers.clear();
            work.unowned_ns[0] = pool_ns;
            return Ok((work, paths));
        }
        for c in &now {
            let b = own.get(&c.path).copied().unwrap_or(0);
            if b == 0 {
                continue;
            }
            let mut ns = [0; 5];
            ns[0] = (pool_ns as u128 * b as u128 / total_bytes as u128) as u64;
            work.owners.push(OwnerRecord {
                tgid: 0,
                ns,
                cgroup_id: c.ino,
                start_ns: 0,
                comm: String::new(),
            });
        }
        Ok((work, paths))
    }

    /// The CPU time each I/O kernel thread ran since the previous step (the children of
    /// kthreadd, pid 2: `/proc/2/task/2/children`, proc(5)).
    fn io_threads(&self) -> Result<(Vec<DoerRecord>, HashMap<u32, Seen>), String> {
        let list = self.root.path("/proc/2/task/2/children");
        let pids = std::fs::read_to_string(&list).map_err(|e| {
            format!(
                "{}: {e} (a kernel without CONFIG_PROC_CHILDREN cannot list its kernel threads)",
                list.display()
            )
        })?;
        let mut seen = HashMap::new();
        let mut out = Vec::new();
        for pid in pids
            .split_ascii_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            // A thread that ended since the list was read is skipped.
            let Ok(st) = cputime::read_proc_stat(&self.root, pid) else {
                continue;
            };
            let cpu_ns = std::fs::read_to_string(self.root.path(format!("/proc/{pid}/schedstat")))
                .ok()
                .and_then(|s| cputime::parse_schedstat(&s))
                .unwrap_or(st.cpu_ticks.saturating_mul(self.ns_per_tick));
            let now = Seen {
                start_ticks: st.start_ticks,
                cpu_ns,
                io: is_io_thread(&st.comm),
            };
            let before = self
                .threads
                .as_ref()
                .and_then(|t| t.get(&pid))
                .filter(|b| b.start_ticks == now.start_ticks);
            let grown = cpu_ns.saturating_sub(before.map_or(0, |b| b.cpu_ns));
            if grown > 0 && (now.io || before.is_some_and(|b| b.io)) {
                out.push(DoerRecord {
                    tgid: pid,
                    task_ns: grown,
                    irq_ns: 0,
                    cgroup_id: 0,
                    start_ns: st.start_ticks.saturating_mul(self.ns_per_tick),
                    comm: st.comm,
                });
            }
            seen.insert(pid, now);
        }
        // The first step only sets the counters: a thread's time before wattio started is not
        // this interval's.
        if self.threads.is_none() {
            out.clear();
        }
        Ok((out, seen))
    }

    /// Takes the work since the previous step and moves it between `entries` (by cgroup).
    pub fn step(&mut self, entries: &mut Vec<Entry>) -> Result<Summary, String> {
        let (work, paths) = self.take()?;
        let path_of = |id: u64| paths.get(&id).cloned();
        let cx = Context {
            by: By::Cgroup,
            ns_per_tick: self.ns_per_tick,
            irq_time_apart: false,
            cgroup_path: &path_of,
            label: BYTES_LABEL,
        };
        Ok(reattribute(entries, &work, &cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::entry::Key;

    fn write(root: &std::path::Path, path: &str, text: &str) {
        let p = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A kernel thread `pid` named `comm` that has run `ms` milliseconds (schedstat).
    fn thread(root: &std::path::Path, pid: u32, comm: &str, ms: u64) {
        write(
            root,
            &format!("/proc/{pid}/stat"),
            &format!("{pid} ({comm}) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 20 0 1 0 {pid}0 0 0"),
        );
        write(
            root,
            &format!("/proc/{pid}/schedstat"),
            &format!("{} 0 0\n", ms * 1_000_000),
        );
    }

    fn cgroup_entry(path: &str, cpu_s: f64) -> Entry {
        Entry {
            cgroup: Some(path.into()),
            cpu_s,
            ..Entry::new(Key::Cgroup(path.into()))
        }
    }

    #[test]
    fn io_threads_time_goes_to_the_cgroups_by_their_own_bytes() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let cg = "/sys/fs/cgroup";
        write(r, "/proc/2/task/2/children", "10 11 12 13");
        thread(r, 10, "kworker/u8:2-flush-254:0", 1000);
        thread(r, 11, "jbd2/vda1-8", 500);
        thread(r, 12, "kworker/0:1-events", 700);
        thread(r, 13, "kworker/1:1H-kblockd", 100);
        write(r, &format!("{cg}/cgroup.controllers"), "cpu io memory\n");
        let io = |p: &str, rb: u64, wb: u64| {
            write(
                r,
                &format!("{cg}{p}/io.stat"),
                &format!("254:0 rbytes={rb} wbytes={wb} rios=1 wios=1 dbytes=99999 dios=1\n"),
            )
        };
        io("/a", 0, 1000);
        io("/b", 0, 0);
        io("/b/c", 0, 0);
        let mut b = ByBytes::open(&SysRoot::new(r), r.join("sys/fs/cgroup")).unwrap();
        // Over the interval: the flusher 300 ms, jbd2 100 ms, kblockd's worker 0 ms; the events
        // worker 200 ms, not I/O work. /a writes 300 MB, /b/c 100 MB (in /b's figure too, as
        // io.stat is hierarchical), /b itself nothing; the discards are not counted.
        thread(r, 10, "kworker/u8:2-flush-254:0", 1300);
        thread(r, 11, "jbd2/vda1-8", 600);
        thread(r, 12, "kworker/0:1-events", 900);
        io("/a", 0, 300_001_000);
        io("/b", 50_000_000, 50_000_000);
        io("/b/c", 50_000_000, 50_000_000);
        let mut entries = vec![cgroup_entry("/", 2.0), cgroup_entry("/a", 1.0)];
        let s = b.step(&mut entries).unwrap();
        assert_eq!(s.label, BYTES_LABEL);
        let cpu = |p: &str| {
            entries
                .iter()
                .find(|e| e.cgroup.as_deref() == Some(p))
                .map(|e| (e.cpu_s, e.kernel_io_cpu_s))
        };
        // 0.4 CPU-s of I/O threads' time: taken from the root, 3/4 to /a, 1/4 to /b/c.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        let (root_cpu, root_kio) = cpu("/").unwrap();
        assert!(close(root_cpu, 1.6) && root_kio == 0.0, "{entries:?}");
        let (a_cpu, a_kio) = cpu("/a").unwrap();
        assert!(close(a_cpu, 1.3) && close(a_kio, 0.3), "{entries:?}");
        let (c_cpu, c_kio) = cpu("/b/c").unwrap();
        assert!(close(c_cpu, 0.1) && close(c_kio, 0.1), "{entries:?}");
        assert!(cpu("/b").is_none(), "{entries:?}");
        assert!(s.unowned_cpu_s.is_empty(), "{s:?}");
        // An interval with I/O threads' time and no bytes: all of it unowned, nothing moved.
        thread(r, 10, "kworker/u8:2-flush-254:0", 1350);
        let mut entries = vec![cgroup_entry("/", 1.0)];
        let s = b.step(&mut entries).unwrap();
        assert!(close(entries[0].cpu_s, 1.0), "{entries:?}");
        assert!(close(s.unowned_cpu_s["writeback"], 0.05), "{s:?}");
    }

    #[test]
    fn without_the_io_controller_on_v2_it_says_why() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "/sys/fs/cgroup/unified/cgroup.controllers", "\n");
        let e = ByBytes::open(&SysRoot::new(r), r.join("sys/fs/cgroup/unified"))
            .err()
            .unwrap();
        assert!(
            e.contains("io controller is not on the cgroup v2 hierarchy"),
            "{e}"
        );
    }

    #[test]
    fn io_threads_are_named_by_their_latest_queue() {
        for yes in [
            "kworker/u8:2-flush-254:0",
            "kworker/u8:0+writeback",
            "kworker/1:1H-kblockd",
            "kworker/u4:3+dio/vda1",
            "jbd2/vda1-8",
        ] {
            assert!(is_io_thread(yes), "{yes}");
        }
        for no in [
            "kworker/0:1-events",
            "kworker/u8:1",
            "kworker/0:0H",
            "ksoftirqd/0",
            "flush-254:0",
            "kworker/1:2-mm_percpu_wq",
        ] {
            assert!(!is_io_thread(no), "{no}");
        }
    }
}
