//! The kernel's I/O work charged to its owner: the CPU time that kworker writeback, block I/O
//! completions and network receive/transmit spend in the kernel, moved from the task that ran
//! it (a kworker, ksoftirqd, whichever process an interrupt hit) to the process whose I/O
//! caused it.
//!
//! A BPF program (`bpf/kio.bpf.c`) records who owns what in the owner's own context (an
//! inode's dirty pages: the process that dirtied them; a socket: the process that last sent or
//! received on it; a bio: its submitter, or the owner of the inode a kworker is writing back),
//! times the work where it runs (a kernel thread's `__writeback_single_inode` less the time it
//! was switched out or interrupted; each hard interrupt, NET_TX/NET_RX/BLOCK softirq and
//! cross-CPU call less the frames nested in it) and splits an interrupt frame's time between
//! the owners of the requests it completed and the packets it handled, one weight per request
//! or packet plus one per 4 KiB. [`Work`] is one interval of it; [`reattribute`] moves it
//! between an interval's entries, labelled [`LABEL`].
//!
//! What stays unexplained is reported as such ([`Summary::unowned_cpu_s`]): an interrupt frame
//! with no owned event (an ARP packet, a timer's retransmit, a hard interrupt of a device that
//! is not storage or network), writeback of pages dirtied before wattio started, owners pushed
//! out of the program's bounded maps.
//!
//! Whose CPU time held the work before: a kernel thread's writeback is in its own time; the
//! work of an interrupt frame is in the interrupted task's time unless the kernel accounts
//! interrupt time apart (`CONFIG_IRQ_TIME_ACCOUNTING`, kernel/sched/cputime.c), where it is in
//! no task's but ksoftirqd's ([`irq_time_apart`]).

use std::collections::{BTreeMap, HashMap};

pub use super::entry::KernelIoSummary as Summary;
use super::entry::{By, Entry, Key, ProcKey};

/// `WATTIO_KERNEL_IO`: `auto` (the default: the BPF program where it loads; otherwise, by
/// cgroup, the coarser io.stat rule), `bpf` (an error where it cannot load), `bytes` (the
/// io.stat rule, by cgroup) or `off`.
pub const KERNEL_IO_ENV: &str = "WATTIO_KERNEL_IO";

/// The label of the kernel I/O work an entry is charged.
pub const LABEL: &str = "attributed (kernel I/O work: writeback to the process that dirtied the pages, block completions to the request's submitter, network softirqs to the socket's user; by CPU time)";

/// Kinds of kernel I/O work, in the program's order (`K_*` in `bpf/kio.bpf.c`).
pub const KINDS: [&str; 5] = [
    "writeback",
    "block completion",
    "network receive",
    "network transmit",
    "hard interrupts",
];

/// One process's kernel I/O work, cumulative since the program loaded (`struct owner_work`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRecord {
    pub tgid: u32,
    pub ns: [u64; 5],
    /// The cgroup v2 id (the inode number of its directory) it was in when it became an owner.
    pub cgroup_id: u64,
    /// `start_boottime`: with the tgid, which process it is.
    pub start_ns: u64,
    pub comm: String,
}

/// Time a task gave to others' I/O work, cumulative (`struct doer_work`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoerRecord {
    pub tgid: u32,
    /// In a kernel thread's writeback: always part of its own CPU time.
    pub task_ns: u64,
    /// In interrupt frames on top of it: part of its CPU time unless interrupt time is apart.
    pub irq_ns: u64,
    pub cgroup_id: u64,
    pub start_ns: u64,
    pub comm: String,
}

/// The program's counters at one moment.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub owners: HashMap<u32, OwnerRecord>,
    pub doers: HashMap<u32, DoerRecord>,
    pub unowned_ns: [u64; 5],
}

/// The kernel I/O work of one interval: what grew between two snapshots.
#[derive(Debug, Clone, Default)]
pub struct Work {
    pub owners: Vec<OwnerRecord>,
    pub doers: Vec<DoerRecord>,
    pub unowned_ns: [u64; 5],
}

impl Work {
    /// The growth from `prev` to `now`. A record new since `prev`, or of another process under
    /// a reused tgid, counts whole.
    pub fn between(prev: &Counters, now: &Counters) -> Work {
        let owners = now
            .owners
            .values()
            .filter_map(|o| {
                let before = prev
                    .owners
                    .get(&o.tgid)
                    .filter(|p| p.start_ns == o.start_ns)
                    .map(|p| p.ns)
                    .unwrap_or_default();
                let mut d = o.clone();
                for (k, v) in d.ns.iter_mut().enumerate() {
                    *v = v.saturating_sub(before[k]);
                }
                (d.ns.iter().any(|&v| v > 0)).then_some(d)
            })
            .collect();
        let doers = now
            .doers
            .values()
            .filter_map(|d| {
                let (t, i) = prev
                    .doers
                    .get(&d.tgid)
                    .filter(|p| p.start_ns == d.start_ns)
                    .map(|p| (p.task_ns, p.irq_ns))
                    .unwrap_or_default();
                let mut g = d.clone();
                g.task_ns = g.task_ns.saturating_sub(t);
                g.irq_ns = g.irq_ns.saturating_sub(i);
                (g.task_ns + g.irq_ns > 0).then_some(g)
            })
            .collect();
        let mut unowned_ns = [0; 5];
        for (k, v) in unowned_ns.iter_mut().enumerate() {
            *v = now.unowned_ns[k].saturating_sub(prev.unowned_ns[k]);
        }
        Work {
            owners,
            doers,
            unowned_ns,
        }
    }
}

/// The kernel I/O work of the watched processes (`wattio measure`'s command), cumulative.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Watched {
    /// Done for them, by kind ([`KINDS`]).
    pub ns: [u64; 5],
    /// Interrupt-frame time they gave to I/O work, theirs or others'.
    pub gave_ns: u64,
    irq_time_apart: bool,
}

impl Watched {
    /// The work done for the watched processes from `self` to `later`, in CPU-seconds by kind,
    /// and its total less what their own CPU time already holds (interrupt frames that ran on
    /// top of them, unless interrupt time is accounted apart): what to add to their CPU time.
    pub fn between(&self, later: &Watched) -> (BTreeMap<&'static str, f64>, f64) {
        let mut by_kind = BTreeMap::new();
        let mut total = 0u64;
        for (k, name) in KINDS.iter().enumerate() {
            let d = later.ns[k].saturating_sub(self.ns[k]);
            if d > 0 {
                by_kind.insert(*name, d as f64 * 1e-9);
                total += d;
            }
        }
        let held = match self.irq_time_apart {
            true => 0,
            false => later.gave_ns.saturating_sub(self.gave_ns),
        };
        (by_kind, total.saturating_sub(held) as f64 * 1e-9)
    }
}

/// How [`reattribute`] finds entries.
pub struct Context<'a> {
    pub by: By,
    /// Nanoseconds per clock tick: a process's key is its start time in ticks.
    pub ns_per_tick: u64,
    /// Whether the kernel accounts interrupt time apart from tasks ([`irq_time_apart`]).
    pub irq_time_apart: bool,
    /// By cgroup: the path of a cgroup v2 id, as the entries name cgroups.
    pub cgroup_path: &'a dyn Fn(u64) -> Option<String>,
    /// How the work was found: [`LABEL`] or [`BYTES_LABEL`].
    pub label: &'static str,
}

impl Context<'_> {
    fn key(&self, tgid: u32, start_ns: u64, cgroup_id: u64) -> Key {
        match self.by {
            By::Process | By::Vm => Key::Process(ProcKey {
                pid: tgid,
                start_ticks: start_ns / self.ns_per_tick.max(1),
            }),
            By::Cgroup | By::Container | By::Pod => Key::Cgroup(
                (self.cgroup_path)(cgroup_id).unwrap_or_else(|| format!("cgroup id {cgroup_id}")),
            ),
        }
    }
}

/// Moves `work` between `entries` (one interval's, before its energy is split): each doer's
/// entry loses the time it gave that was in its own CPU time, each owner's gains its work as
/// `kernel_io_cpu_s` (part of `cpu_s`); an owner with no entry (it ended, or used no CPU of its
/// own) gets one. By VM, call it on the process entries before they are grouped.
pub fn reattribute(entries: &mut Vec<Entry>, work: &Work, cx: &Context) -> Summary {
    let mut s = Summary {
        label: cx.label,
        ..Summary::default()
    };
    for (k, &ns) in work.unowned_ns.iter().enumerate() {
        if ns > 0 {
            s.unowned_cpu_s.insert(KINDS[k], ns as f64 * 1e-9);
        }
    }
    for d in &work.doers {
        let in_task = !cx.irq_time_apart || d.comm.starts_with("ksoftirqd");
        let held = d.task_ns + if in_task { d.irq_ns } else { 0 };
        let key = cx.key(d.tgid, d.start_ns, d.cgroup_id);
        s.taken_cpu_s += take(entries, &key, held);
        // Interrupt time accounted apart is in no task's time, but it is in the machine's busy
        // time, which by cgroup is the root's own usage: taken from there.
        if !in_task && cx.by == By::Cgroup {
            s.taken_cpu_s += take(entries, &Key::Cgroup("/".into()), d.irq_ns);
        }
    }
    for o in &work.owners {
        let key = cx.key(o.tgid, o.start_ns, o.cgroup_id);
        let i = match entries.iter().position(|e| e.key == key) {
            Some(i) => i,
            None => {
                entries.push(owner_entry(key, o, cx));
                entries.len() - 1
            }
        };
        let e = &mut entries[i];
        for (k, &ns) in o.ns.iter().enumerate() {
            if ns == 0 {
                continue;
            }
            let cpu_s = ns as f64 * 1e-9;
            e.cpu_s += cpu_s;
            e.kernel_io_cpu_s += cpu_s;
            *s.owned_cpu_s.entry(KINDS[k]).or_insert(0.0) += cpu_s;
        }
    }
    s
}

/// Takes `ns` (at most all its CPU time) from the entry of `key`, if any; the CPU-seconds taken.
fn take(entries: &mut [Entry], key: &Key, ns: u64) -> f64 {
    match entries.iter_mut().find(|e| &e.key == key) {
        Some(e) if ns > 0 => {
            let taken = (ns as f64 * 1e-9).min(e.cpu_s);
            e.cpu_s -= taken;
            taken
        }
        _ => 0.0,
    }
}

/// The entry of an owner the interval had none for.
fn owner_entry(key: Key, o: &OwnerRecord, cx: &Context) -> Entry {
    match cx.by {
        By::Process | By::Vm => Entry {
            pid: Some(o.tgid),
            comm: Some(o.comm.clone()),
            cgroup: (cx.cgroup_path)(o.cgroup_id),
            ..Entry::new(key)
        },
        By::Cgroup | By::Container | By::Pod => Entry {
            cgroup: match &key {
                Key::Cgroup(c) => Some(c.clone()),
                _ => None,
            },
            ..Entry::new(key)
        },
    }
}

/// Whether the kernel accounts interrupt time apart from tasks (`CONFIG_IRQ_TIME_ACCOUNTING=y`
/// in its configuration, `/boot/config-RELEASE` or `/proc/config.gz`); `config` is that text.
/// Unknown (no configuration readable) counts as apart: time is then not taken from a task
/// that may not hold it, and the owner still gains it.
pub fn irq_time_apart(config: Option<&str>) -> bool {
    match config {
        Some(text) => text
            .lines()
            .any(|l| l.trim() == "CONFIG_IRQ_TIME_ACCOUNTING=y"),
        None => true,
    }
}

/// The running kernel's configuration text, where it can be read.
pub fn kernel_config() -> Option<String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    if let Ok(t) = std::fs::read_to_string(format!("/boot/config-{}", release.trim())) {
        return Some(t);
    }
    #[cfg(feature = "ebpf")]
    {
        use std::io::Read;
        let f = std::fs::File::open("/proc/config.gz").ok()?;
        let mut text = String::new();
        flate2::read::GzDecoder::new(f)
            .take(8 << 20)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    }
    #[cfg(not(feature = "ebpf"))]
    None
}

/// The cgroup v2 ids (directory inode numbers) under `mount`, as paths from its root (`/`,
/// `/system.slice`): what a BPF program's `bpf_get_current_cgroup_id` names. None where the
/// hierarchy cannot be read.
pub fn cgroup_ids(mount: &std::path::Path) -> HashMap<u64, String> {
    super::cgroup::ids(mount).unwrap_or_default()
}

/// The kernel I/O work of an attributor: the BPF program with the counters of its previous
/// step, or, where it cannot load, the coarser io.stat rule by cgroup ([`ByBytes`]).
pub struct KernelIo {
    source: Source,
}

enum Source {
    #[cfg(feature = "ebpf")]
    Bpf(Program),
    Bytes(ByBytes),
}

/// The loaded program, its counters at the previous step, and what naming its records takes.
#[cfg(feature = "ebpf")]
struct Program {
    tracer: Tracer,
    prev: Counters,
    irq_time_apart: bool,
    cgroup_mount: Option<std::path::PathBuf>,
    cgroup_paths: HashMap<u64, String>,
}

impl KernelIo {
    /// Opens the work as `mode` (a [`KERNEL_IO_ENV`] value; empty is `auto`) says, for an
    /// attributor grouping `by` (`None`: one command's processes, as `measure` watches them):
    /// `Ok(None)` for `off`, and for `auto` where neither rule can work (no BPF in this build or
    /// not root, and not by cgroup or no `io` controller on cgroup v2; a fixture tree under
    /// `WATTIO_ROOT`: the program sees the real kernel only). The io.stat rule reads
    /// world-readable files: by cgroup, a user other than root gets it too.
    pub fn open(
        mode: &str,
        root: &crate::root::SysRoot,
        by: Option<By>,
    ) -> std::io::Result<Option<KernelIo>> {
        Self::open_or_why(mode, root, by).map(|(k, _)| k)
    }

    /// As [`KernelIo::open`], with why `auto` runs without the kernel's I/O work, as root
    /// (`None` when it is charged, is off, or this is not root). `auto` tries the program, then,
    /// by cgroup, the io.stat rule; `bytes` asks for the io.stat rule (by cgroup only).
    pub fn open_or_why(
        mode: &str,
        root: &crate::root::SysRoot,
        by: Option<By>,
    ) -> std::io::Result<(Option<KernelIo>, Option<String>)> {
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
        let required = match mode {
            "" | "auto" => false,
            "bpf" => true,
            "bytes" if by == Some(By::Cgroup) => {
                return Self::by_bytes(root).map(|k| (Some(k), None)).map_err(|e| {
                    std::io::Error::other(format!(
                        "cannot split the kernel's I/O work by io.stat: {e}; or set {KERNEL_IO_ENV}=off"
                    ))
                })
            }
            "bytes" => {
                return Err(invalid(format!(
                    "{KERNEL_IO_ENV}=bytes splits the kernel's I/O work by cgroup (io.stat) only; use --by cgroup, or {KERNEL_IO_ENV}=bpf"
                )))
            }
            "off" => return Ok((None, None)),
            other => {
                return Err(invalid(format!(
                    "{KERNEL_IO_ENV}={other:?} is not a mode; use auto, bpf, bytes or off"
                )))
            }
        };
        if !root.is_real() {
            // Under a fixture tree neither rule is expected to work unasked: nothing to say.
            return match required {
                true => Err(std::io::Error::other(format!(
                    "cannot attribute the kernel's I/O work: {} is a fixture tree; the kernel I/O program sees only the real kernel; set {KERNEL_IO_ENV}=off",
                    root.base().display()
                ))),
                false => Ok((None, None)),
            };
        }
        let e = match Self::load() {
            Ok(tracer) => return Ok((Some(KernelIo::with(tracer, root)), None)),
            Err(e) if required => {
                return Err(std::io::Error::other(format!(
                    "cannot attribute the kernel's I/O work: {e}; run as root or set {KERNEL_IO_ENV}=off"
                )))
            }
            Err(e) => e,
        };
        let why = match by {
            Some(By::Cgroup) => match Self::by_bytes(root) {
                Ok(k) => return Ok((Some(k), None)),
                Err(b) => format!("{e}; and by io.stat: {b}"),
            },
            _ => e,
        };
        // As another user than root the program is not expected to load: nothing to say.
        // SAFETY: geteuid has no preconditions and cannot fail.
        Ok((None, (unsafe { libc::geteuid() } == 0).then_some(why)))
    }

    fn by_bytes(root: &crate::root::SysRoot) -> Result<KernelIo, String> {
        let mount = super::cgroup::v2_mount(root).ok_or("no cgroup v2 hierarchy")?;
        Ok(KernelIo {
            source: Source::Bytes(ByBytes::open(root, mount)?),
        })
    }

    /// The label of the work this charges: [`LABEL`] for the program, [`BYTES_LABEL`] for the
    /// io.stat rule.
    pub fn label(&self) -> &'static str {
        match self.source {
            #[cfg(feature = "ebpf")]
            Source::Bpf(_) => LABEL,
            Source::Bytes(_) => BYTES_LABEL,
        }
    }

    /// Loads the program; a failure is tried four more times, 0.1 to 0.8 s apart (a load failed
    /// for a moment here while other processes loaded and unloaded it, cause not found).
    #[cfg(feature = "ebpf")]
    fn load() -> Result<Tracer, String> {
        let mut last = String::new();
        for attempt in 0..5 {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(50 << attempt));
            }
            match Tracer::open() {
                Ok(t) => return Ok(t),
                Err(e) => last = e.to_string(),
            }
        }
        Err(last)
    }

    #[cfg(not(feature = "ebpf"))]
    fn load() -> Result<std::convert::Infallible, String> {
        Err(format!(
            "this build has no BPF support; {}",
            crate::ebpf::NOT_BUILT_FIX
        ))
    }

    #[cfg(feature = "ebpf")]
    fn with(tracer: Tracer, root: &crate::root::SysRoot) -> KernelIo {
        KernelIo {
            source: Source::Bpf(Program {
                prev: tracer.snapshot(),
                tracer,
                irq_time_apart: irq_time_apart(kernel_config().as_deref()),
                cgroup_mount: super::cgroup::v2_mount(root),
                cgroup_paths: HashMap::new(),
            }),
        }
    }

    #[cfg(not(feature = "ebpf"))]
    fn with(never: std::convert::Infallible, _: &crate::root::SysRoot) -> KernelIo {
        match never {}
    }

    /// Watches process `tgid` and every process it starts from now on, and no other
    /// (`wattio measure` watches itself around the spawn of each command, then
    /// [`KernelIo::unwatch`]es itself: an earlier run's processes, or a process that reused
    /// one of their pids, are not counted in the next). Only the program watches.
    pub fn watch(&self, tgid: u32) -> std::io::Result<()> {
        match &self.source {
            #[cfg(feature = "ebpf")]
            Source::Bpf(p) => p.tracer.watch(tgid),
            Source::Bytes(_) => {
                let _ = tgid;
                Ok(())
            }
        }
    }

    pub fn unwatch(&self, tgid: u32) {
        match &self.source {
            #[cfg(feature = "ebpf")]
            Source::Bpf(p) => p.tracer.unwatch(tgid),
            Source::Bytes(_) => {
                let _ = tgid;
            }
        }
    }

    /// The watched processes' counters now ([`Watched::between`] gives a window's work).
    pub fn watched(&self) -> Watched {
        let (ns, gave_ns, irq_time_apart) = match &self.source {
            #[cfg(feature = "ebpf")]
            Source::Bpf(p) => {
                let (ns, gave_ns) = p.tracer.watched_ns();
                (ns, gave_ns, p.irq_time_apart)
            }
            Source::Bytes(_) => ([0; 5], 0, false),
        };
        Watched {
            ns,
            gave_ns,
            irq_time_apart,
        }
    }

    /// Takes the work since the previous step and moves it between `entries` ([`reattribute`]).
    /// The io.stat rule works by cgroup only; a failed read of it charges nothing this step.
    pub fn step(&mut self, entries: &mut Vec<Entry>, by: By, ns_per_tick: u64) -> Summary {
        match &mut self.source {
            #[cfg(feature = "ebpf")]
            Source::Bpf(p) => p.step(entries, by, ns_per_tick),
            Source::Bytes(b) => {
                let _ = (by, ns_per_tick);
                b.step(entries).unwrap_or(Summary {
                    label: BYTES_LABEL,
                    ..Summary::default()
                })
            }
        }
    }
}

#[cfg(feature = "ebpf")]
impl Program {
    fn step(&mut self, entries: &mut Vec<Entry>, by: By, ns_per_tick: u64) -> Summary {
        let now = self.tracer.snapshot();
        let work = Work::between(&self.prev, &now);
        self.prev = now;
        let wanted: Vec<u64> = work
            .owners
            .iter()
            .map(|o| o.cgroup_id)
            .chain(work.doers.iter().map(|d| d.cgroup_id))
            .collect();
        if wanted.iter().any(|id| !self.cgroup_paths.contains_key(id)) {
            if let Some(m) = &self.cgroup_mount {
                // New cgroups since the last walk: walk again (cgroups come and go rarely).
                self.cgroup_paths = cgroup_ids(m);
            }
            // Ended cgroups are not walked for again: they keep their id as their name.
            for id in wanted {
                self.cgroup_paths
                    .entry(id)
                    .or_insert_with(|| format!("cgroup id {id}"));
            }
        }
        let paths = &self.cgroup_paths;
        let path_of = |id: u64| paths.get(&id).cloned();
        let cx = Context {
            by,
            ns_per_tick,
            irq_time_apart: self.irq_time_apart,
            cgroup_path: &path_of,
            label: LABEL,
        };
        reattribute(entries, &work, &cx)
    }
}

#[cfg(feature = "ebpf")]
mod bpf;
mod by_bytes;
#[cfg(feature = "ebpf")]
pub use bpf::Tracer;
pub use by_bytes::{is_io_thread, ByBytes, BYTES_LABEL};

#[cfg(test)]
mod tests;
