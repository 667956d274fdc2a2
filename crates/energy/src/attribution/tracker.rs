//! Interval attribution for a whole machine: who used the energy of each interval, by process or
//! by cgroup. Used by `wattio top`, `record --by` and `export`.
//!
//! Each [`Attributor::step`] reads the CPU time of every process (`/proc/PID/stat`) or cgroup
//! (`cpu.stat`), takes the deltas since the previous step and [`split`]s the interval's energy by
//! them. What is missed, and how it shows:
//! * by process, a process that ends between two steps is not seen again; when its parent waits
//!   for it, the kernel adds its time to the parent's `cutime` + `cstime`, and the parent is
//!   charged that growth less what was already attributed to descendants seen alive (a debt
//!   kept until the growth shows, so each tick counts once even when the reap comes a scan
//!   late or a whole subtree ends at once). An orphan reaped by a process that owed nothing for
//!   it (a reparented child) could be counted twice: the reaped part of an interval is capped
//!   by the busy time that the entries' own time leaves. Time nobody explains (children not yet
//!   waited for, interrupts) is still in the machine's busy time: [`Interval::unseen_cpu_s`]
//!   reports it, and with [`IdlePolicy::Apart`] its energy stays in the idle/unattributed part;
//!   [`Interval::over_cpu_s`] reports the opposite. A process that starts after one step is
//!   counted from its start;
//! * by cgroup nothing is lost that way: a cgroup keeps the usage of its ended processes, and a
//!   removed cgroup's last partial interval stays in its parent's usage, where it is charged
//!   ([`cgroup::own_deltas`]).

use super::cgroup;
use super::cputime::{self, ProcTimes};
use super::entry::{By, Entry, GpuInterval, Interval, Key, ProcKey, HOST_ENTRY};
use super::gpu::{split_gpu, GpuUse};
use super::kernel_io::{KernelIo, KERNEL_IO_ENV};
use super::proc_reader::{ProcReader, CPU_TIMES_ENV};
use super::split::{split, IdlePolicy};
use crate::root::SysRoot;
use std::collections::HashMap;
use std::io;

struct ProcInfo {
    comm: String,
    /// Its cgroup, read the first time it has CPU time to report (`None` until then): most
    /// processes `top` lists sleep, and reading every one's at start-up cost a second file each.
    cgroup: Option<Option<String>>,
    ppid: u32,
    /// By VM: its VM, found the first time it has CPU time (`Some(None)`: in no VM).
    vm: Option<Option<String>>,
    last_ns: u64,
    last_children_ns: u64,
    /// Nanoseconds of ended descendants already attributed (to them, while alive) that this
    /// process's cutime + cstime has not shown yet: kept until it does.
    debt: u64,
    seen: u64,
}

/// A process's CPU nanoseconds in an interval, before the reaped part is capped.
struct ProcDelta {
    key: ProcKey,
    own: u64,
    reaped: u64,
}

/// Attributes interval energies to processes or cgroups. Create it at the start of the first
/// interval, then call [`Attributor::step`] at the end of each.
pub struct Attributor {
    root: SysRoot,
    by: By,
    policy: IdlePolicy,
    n_cpus: usize,
    /// Nanoseconds per clock tick (the /proc path's unit).
    ns_per_tick: u64,
    procs: HashMap<ProcKey, ProcInfo>,
    cgroup_mount: Option<std::path::PathBuf>,
    cgroups: HashMap<String, cgroup::Previous>,
    /// By VM: the VMs of the processes present at the last scan.
    vms: std::collections::HashSet<String>,
    /// By container or pod: those whose cgroups were present at the last scan.
    workloads: std::collections::HashSet<Key>,
    /// The cgroups present at the scan before the last and gone at the last.
    ended_cgroups: Vec<String>,
    totals: HashMap<Key, f64>,
    gpu_totals: HashMap<Key, f64>,
    last_busy_s: f64,
    /// When the CPU times were last read: the capacity of an interval is n_cpus × the time
    /// between two reads, which may differ from the energy window's length.
    last_scan: std::time::Instant,
    generation: u64,
    /// Every process's CPU times, by the task iterator or /proc (by process or VM).
    reader: ProcReader,
    /// The kernel's I/O work, moved to its owners ([`KernelIo`]), where its program loads.
    kernel_io: Option<KernelIo>,
    /// Why the program did not load, when it was wanted (`auto`).
    kernel_io_off: Option<String>,
}

impl Attributor {
    /// Starts attributing on a machine of `n_cpus` online CPUs; reads the starting CPU times,
    /// by process from the reader `WATTIO_CPU_TIMES` names ([`CPU_TIMES_ENV`]).
    pub fn new(root: SysRoot, by: By, policy: IdlePolicy, n_cpus: usize) -> io::Result<Self> {
        let wanted = std::env::var(CPU_TIMES_ENV).unwrap_or_default();
        Self::with_cpu_times(root, by, policy, n_cpus, &wanted)
    }

    /// As [`Attributor::new`], reading process CPU times as `cpu_times` says (`auto`, `proc` or
    /// `bpf`, as `WATTIO_CPU_TIMES`).
    pub fn with_cpu_times(
        root: SysRoot,
        by: By,
        policy: IdlePolicy,
        n_cpus: usize,
        cpu_times: &str,
    ) -> io::Result<Self> {
        let cgroup_mount = match by.read_as() {
            By::Cgroup => Some(cgroup::v2_mount(&root).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "no cgroup v2 hierarchy under {} (looked for sys/fs/cgroup/cgroup.controllers and sys/fs/cgroup/unified/cgroup.controllers); mount cgroup2 or use --by process",
                        root.base().display()
                    ),
                )
            })?),
            _ => None,
        };
        let reader = match by.read_as() {
            By::Cgroup => ProcReader::open(&root, None)?,
            _ => ProcReader::open(&root, Some(cpu_times))?,
        };
        let (kernel_io, kernel_io_off) = KernelIo::open_or_why(
            &std::env::var(KERNEL_IO_ENV).unwrap_or_default(),
            &root,
            Some(by.read_as()),
        )?;
        let mut a = Attributor {
            last_busy_s: cputime::machine_busy_cpu_s(&root)?,
            root,
            by,
            policy,
            n_cpus: n_cpus.max(1),
            ns_per_tick: cputime::ns_per_tick(),
            procs: HashMap::new(),
            cgroup_mount,
            cgroups: HashMap::new(),
            vms: Default::default(),
            workloads: Default::default(),
            ended_cgroups: Vec::new(),
            totals: HashMap::new(),
            gpu_totals: HashMap::new(),
            last_scan: std::time::Instant::now(),
            generation: 0,
            kernel_io,
            kernel_io_off,
            reader,
        };
        match a.by.read_as() {
            By::Cgroup => {
                a.scan_cgroups()?;
            }
            _ => {
                a.scan_processes()?;
            }
        }
        a.last_scan = std::time::Instant::now();
        Ok(a)
    }

    pub fn by(&self) -> By {
        self.by
    }

    /// Where process CPU times are read from (by process or VM): `bpf task iterator` or
    /// `/proc/PID/stat`; `None` by cgroup (`cpu.stat`).
    pub fn cpu_times_source(&self) -> Option<&'static str> {
        match self.by.read_as() {
            By::Cgroup => None,
            _ => Some(self.reader.source()),
        }
    }

    /// Whether the process or cgroup `key` was present at the last step.
    pub fn is_alive(&self, key: &Key) -> bool {
        key_alive(key, &self.procs, &self.cgroups, &self.vms, &self.workloads)
    }

    /// Why the kernel's I/O work stays with the tasks that ran it (the kernel I/O program did
    /// not load), where it was wanted.
    pub fn kernel_io_off(&self) -> Option<&str> {
        self.kernel_io_off.as_deref()
    }

    pub fn policy(&self) -> IdlePolicy {
        self.policy
    }

    /// Ends an interval of `interval_s` seconds whose energy was `total_j`: reads the CPU times
    /// and splits the energy, with n_cpus × `interval_s` as the interval's CPU capacity (the
    /// caller's energy window, read right before this). On an error nothing is changed: the
    /// next step covers this interval too.
    pub fn step(&mut self, total_j: f64, interval_s: f64) -> io::Result<Interval> {
        self.step_inner(total_j, Some(interval_s))
    }

    /// As [`Attributor::step`], for a caller whose energy window is not read together with the
    /// CPU times (`record --by` takes energy on the sampling thread and CPU times on the
    /// writer): the interval is the time since the previous read of the CPU times.
    pub fn step_timed(&mut self, total_j: f64) -> io::Result<Interval> {
        self.step_inner(total_j, None)
    }

    fn step_inner(&mut self, total_j: f64, interval_s: Option<f64>) -> io::Result<Interval> {
        let busy = cputime::machine_busy_cpu_s(&self.root)?;
        let busy_cpu_s = (busy - self.last_busy_s).max(0.0);
        let (by, ns_per_tick) = (self.by.read_as(), self.ns_per_tick);
        let mut kernel_io = None;
        let mut with_kernel_io = |mut e: Vec<Entry>, kio: Option<&mut KernelIo>| {
            kernel_io = kio.map(|k| k.step(&mut e, by, ns_per_tick));
            e
        };
        let deltas = match self.by {
            By::Process => {
                let d = self.scan_processes()?;
                with_kernel_io(self.process_entries(d, busy_cpu_s), self.kernel_io.as_mut())
            }
            By::Cgroup => with_kernel_io(self.scan_cgroups()?, self.kernel_io.as_mut()),
            By::Container | By::Pod => {
                let e = with_kernel_io(self.scan_cgroups()?, self.kernel_io.as_mut());
                let now = self.cgroups.keys().cloned();
                let (e, alive) = super::workload::group(self.by, e, &self.ended_cgroups, now);
                self.workloads = alive;
                e
            }
            By::Vm => {
                let d = self.scan_processes()?;
                let e = self.process_entries(d, busy_cpu_s);
                let e = with_kernel_io(e, self.kernel_io.as_mut());
                self.vm_entries(e)
            }
        };
        self.last_busy_s = busy;
        let now = std::time::Instant::now();
        let interval_s = interval_s.unwrap_or(now.duration_since(self.last_scan).as_secs_f64());
        self.last_scan = now;
        let cpu: Vec<f64> = deltas.iter().map(|d| d.cpu_s).collect();
        let s = split(total_j, self.n_cpus as f64 * interval_s, &cpu, self.policy);
        let mut entries: Vec<Entry> = deltas
            .into_iter()
            .zip(s.entries_j)
            .map(|(mut e, j)| {
                e.energy_j = j;
                if e.cpu_s > 0.0 {
                    e.kernel_io_j = j * (e.kernel_io_cpu_s / e.cpu_s).min(1.0);
                }
                e.power_w = if interval_s > 0.0 {
                    j / interval_s
                } else {
                    0.0
                };
                let t = self.totals.entry(e.key.clone()).or_insert(0.0);
                *t += j;
                e.total_energy_j = *t;
                e
            })
            .collect();
        entries.sort_by(|a, b| {
            b.energy_j
                .total_cmp(&a.energy_j)
                .then(b.cpu_s.total_cmp(&a.cpu_s))
                .then(a.key.cmp(&b.key))
        });
        let seen: f64 = cpu.iter().sum();
        // Forget the totals of entities that are gone.
        let (procs, cgroups, vms, w) = (&self.procs, &self.cgroups, &self.vms, &self.workloads);
        self.totals
            .retain(|k, _| key_alive(k, procs, cgroups, vms, w));
        Ok(Interval {
            interval_s,
            total_j: if total_j.is_finite() {
                total_j.max(0.0)
            } else {
                0.0
            },
            idle_j: s.idle_j,
            busy_cpu_s,
            unseen_cpu_s: (busy_cpu_s - seen).max(0.0),
            over_cpu_s: (seen - busy_cpu_s).max(0.0),
            entries,
            gpus: vec![],
            cpu_times: self.cpu_times_source(),
            kernel_io,
        })
    }

    /// Adds the GPUs' energy of the interval `interval` (just returned by a step): for each GPU,
    /// its joules, what its processes did ([`GpuUse`], from [`crate::GpuProcessReader`]) and
    /// the provenance label of its energy. Each process's share ([`split_gpu`]) goes to its
    /// entry, or, by cgroup, to its cgroup's; one that used a GPU without CPU time in the
    /// interval gets an entry of its own. A process no longer in `/proc`, or whose cgroup cannot
    /// be read, keeps its pid as its name.
    pub fn attribute_gpus(&mut self, interval: &mut Interval, gpus: &[(GpuUse, f64, String)]) {
        for (u, energy_j, energy_label) in gpus {
            let s = split_gpu(*energy_j, u, self.policy);
            for (pid, j) in s.by_pid {
                if j <= 0.0 {
                    continue;
                }
                let entry = self.gpu_entry(interval, pid);
                *entry.gpu_energy_j.get_or_insert(0.0) += j;
            }
            interval.gpus.push(GpuInterval {
                index: u.index,
                energy_j: energy_j.max(0.0),
                idle_j: s.idle_j,
                basis: u.basis,
                label: match u.basis {
                    Some(b) => format!("{energy_label}, {}", b.label()),
                    None => energy_label.clone(),
                },
                note: u.note.clone(),
            });
        }
        for e in &mut interval.entries {
            if let Some(j) = e.gpu_energy_j {
                let t = self.gpu_totals.entry(e.key.clone()).or_insert(0.0);
                *t += j;
                e.total_gpu_energy_j = Some(*t);
            } else if let Some(t) = self.gpu_totals.get(&e.key) {
                e.total_gpu_energy_j = Some(*t);
            }
        }
        interval.entries.sort_by(|a, b| {
            let all = |e: &Entry| e.energy_j + e.gpu_energy_j.unwrap_or(0.0);
            all(b)
                .total_cmp(&all(a))
                .then(b.cpu_s.total_cmp(&a.cpu_s))
                .then(a.key.cmp(&b.key))
        });
        let (procs, cgroups, vms, w) = (&self.procs, &self.cgroups, &self.vms, &self.workloads);
        self.gpu_totals
            .retain(|k, _| key_alive(k, procs, cgroups, vms, w));
    }

    /// The entry of `interval` that process `pid`'s GPU use goes to, made when it has none.
    fn gpu_entry<'a>(&mut self, interval: &'a mut Interval, pid: u32) -> &'a mut Entry {
        let (key, comm, cgroup) = match self.by {
            By::Vm => {
                let cg = cgroup::cgroup_of(&self.root, pid);
                let key = self.procs.keys().find(|k| k.pid == pid).copied();
                let vm = match key {
                    Some(k) => self.vm_of(&k),
                    None => {
                        let comm = cputime::read_proc_stat(&self.root, pid)
                            .map(|st| st.comm)
                            .unwrap_or_default();
                        super::vm::vm_of_process(&self.root, pid, &comm, cg.as_deref())
                    }
                }
                .unwrap_or_else(|| HOST_ENTRY.to_string());
                (Key::Vm(vm.clone()), Some(vm), cg)
            }
            By::Process => match self.procs.iter().find(|(k, _)| k.pid == pid) {
                Some((k, info)) => (
                    Key::Process(*k),
                    Some(info.comm.clone()),
                    info.cgroup.clone().flatten(),
                ),
                None => (
                    Key::Process(ProcKey {
                        pid,
                        start_ticks: 0,
                    }),
                    None,
                    None,
                ),
            },
            By::Cgroup => {
                let cg = cgroup::cgroup_of(&self.root, pid).unwrap_or_else(|| format!("pid {pid}"));
                (Key::Cgroup(cg.clone()), None, Some(cg))
            }
            By::Container | By::Pod => {
                let cg = cgroup::cgroup_of(&self.root, pid).unwrap_or_else(|| format!("pid {pid}"));
                let one = vec![Entry {
                    cgroup: Some(cg.clone()),
                    ..Entry::new(Key::Cgroup(cg))
                }];
                let (grouped, _) = super::workload::group(self.by, one, &[], std::iter::empty());
                let g = grouped.into_iter().next().expect("one entry in, one out");
                (g.key.clone(), g.comm.clone(), g.cgroup.clone())
            }
        };
        if let Some(i) = interval.entries.iter().position(|e| e.key == key) {
            return &mut interval.entries[i];
        }
        let cgroup = cgroup.or_else(|| cgroup::cgroup_of(&self.root, pid));
        let (container_id, pod_uid) = match &cgroup {
            Some(c) if matches!(self.by, By::Container | By::Pod) => (
                super::workload::container_of(c).map(|(_, id)| id),
                super::workload::pod_of(c),
            ),
            _ => (None, None),
        };
        interval.entries.push(Entry {
            pid: matches!(self.by, By::Process).then_some(pid),
            comm: comm.or_else(|| match self.by {
                By::Process => Some(format!("pid {pid}")),
                _ => None,
            }),
            container_id: container_id.filter(|_| self.by == By::Container),
            pod_uid,
            vm: match &key {
                Key::Vm(v) => Some(v.clone()),
                _ => None,
            },
            cgroup,
            total_energy_j: self.totals.get(&key).copied().unwrap_or(0.0),
            ..Entry::new(key)
        });
        interval.entries.last_mut().expect("just pushed")
    }

    /// Reads every process's CPU times; returns those with time since the previous scan.
    fn scan_processes(&mut self) -> io::Result<Vec<ProcDelta>> {
        self.generation += 1;
        let gen = self.generation;
        let first = gen == 1;
        let mut current: Vec<(ProcKey, ProcTimes)> = Vec::new();
        for st in self.reader.read_all()? {
            let key = ProcKey {
                pid: st.pid,
                start_ticks: st.start_ticks,
            };
            if let Some(info) = self.procs.get_mut(&key) {
                info.seen = gen;
            }
            current.push((key, st));
        }
        // Processes gone since the previous scan: what their reaper's cutime + cstime will show
        // of them (their own time, their children's, and what those owed) was attributed
        // already, so it becomes a debt of the nearest ancestor still alive (normally the
        // parent that reaps them), paid from its reaped time before anything is charged.
        let gone: HashMap<u32, (u32, u64)> = self
            .procs
            .iter()
            .filter(|(_, i)| i.seen != gen)
            .map(|(k, i)| (k.pid, (i.ppid, i.last_ns + i.last_children_ns + i.debt)))
            .collect();
        self.procs.retain(|_, i| i.seen == gen);
        // Built only when something ended: most refreshes of `top` see no process end.
        let alive: HashMap<u32, ProcKey> = if gone.is_empty() {
            HashMap::new()
        } else {
            current.iter().map(|(k, _)| (k.pid, *k)).collect()
        };
        for &(ppid, owed) in gone.values() {
            let mut p = ppid;
            for _ in 0..64 {
                match gone.get(&p) {
                    Some(&(up, _)) if up != p => p = up,
                    _ => break,
                }
            }
            if let Some(info) = alive.get(&p).and_then(|k| self.procs.get_mut(k)) {
                info.debt += owed;
            }
        }
        let mut out = Vec::new();
        for (key, st) in current {
            let (own, reaped) = match self.procs.get_mut(&key) {
                Some(info) => {
                    let own = st.cpu_ns.saturating_sub(info.last_ns);
                    let grown = st.children_ns.saturating_sub(info.last_children_ns);
                    let paid = grown.min(info.debt);
                    info.debt -= paid;
                    info.last_ns = st.cpu_ns;
                    info.last_children_ns = st.children_ns;
                    info.ppid = st.ppid;
                    if info.comm != st.comm {
                        // An exec (libvirt and Proxmox start QEMU as a child that moves into the
                        // VM's scope, then execs): its cgroup and VM are read again.
                        info.cgroup = None;
                        info.vm = None;
                    }
                    info.comm = st.comm;
                    (own, grown - paid)
                }
                None => {
                    self.procs.insert(
                        key,
                        ProcInfo {
                            comm: st.comm,
                            cgroup: None,
                            ppid: st.ppid,
                            vm: None,
                            last_ns: st.cpu_ns,
                            last_children_ns: st.children_ns,
                            debt: 0,
                            seen: gen,
                        },
                    );
                    // Started since the previous scan: all its time is in this interval.
                    if first {
                        (0, 0)
                    } else {
                        (st.cpu_ns, st.children_ns)
                    }
                }
            };
            if own + reaped > 0 {
                out.push(ProcDelta { key, own, reaped });
            }
        }
        for d in &out {
            if let Some(info) = self.procs.get_mut(&d.key) {
                if info.cgroup.is_none() {
                    info.cgroup = Some(cgroup::cgroup_of(&self.root, d.key.pid));
                }
            }
        }
        Ok(out)
    }

    /// Entries of a process scan. Children reaped in the interval that no scan saw alive (a
    /// shell loop's commands, make's compilers) are charged to the process that reaped them, as
    /// `time` and `wait4` do; the reaped part of all entries together is capped at the busy
    /// time that their own time leaves unexplained (plus two ticks per entry of read skew), so
    /// a child reaped by a process that never knew it (a reparented orphan) is not counted twice.
    fn process_entries(&self, deltas: Vec<ProcDelta>, busy_cpu_s: f64) -> Vec<Entry> {
        let tick = self.ns_per_tick as f64 * 1e-9;
        let own_s: f64 = deltas.iter().map(|d| d.own as f64 * 1e-9).sum();
        let reaped_s: f64 = deltas.iter().map(|d| d.reaped as f64 * 1e-9).sum();
        let slack = 2.0 * tick * deltas.len() as f64;
        let room = (busy_cpu_s - own_s).max(0.0) + slack;
        let scale = if reaped_s > room {
            room / reaped_s
        } else {
            1.0
        };
        deltas
            .into_iter()
            .map(|d| {
                let info = &self.procs[&d.key];
                let children = d.reaped as f64 * 1e-9 * scale;
                Entry {
                    pid: Some(d.key.pid),
                    comm: Some(info.comm.clone()),
                    cgroup: info.cgroup.clone().flatten(),
                    cpu_s: d.own as f64 * 1e-9 + children,
                    children_cpu_s: children,
                    ..Entry::new(Key::Process(d.key))
                }
            })
            .collect()
    }

    /// The VM of process `k` (cached on first use), `None` for a process in no VM.
    fn vm_of(&mut self, k: &ProcKey) -> Option<String> {
        let root = &self.root;
        let info = self.procs.get_mut(k)?;
        if info.vm.is_none() {
            if info.cgroup.is_none() {
                info.cgroup = Some(cgroup::cgroup_of(root, k.pid));
            }
            let cg = info.cgroup.clone().flatten();
            info.vm = Some(super::vm::vm_of_process(
                root,
                k.pid,
                &info.comm,
                cg.as_deref(),
            ));
        }
        info.vm.clone().flatten()
    }

    /// Process entries grouped by VM ([`super::vm`]), the processes in no VM as [`HOST_ENTRY`];
    /// also notes which VMs are present.
    fn vm_entries(&mut self, entries: Vec<Entry>) -> Vec<Entry> {
        let mut by_vm: std::collections::BTreeMap<String, Entry> = Default::default();
        for e in entries {
            let Key::Process(k) = e.key else { continue };
            let vm = self.vm_of(&k).unwrap_or_else(|| HOST_ENTRY.to_string());
            let cg = e.cgroup.clone();
            let g = by_vm.entry(vm.clone()).or_insert_with(|| Entry {
                comm: Some(vm.clone()),
                // The VM's scope, where its cgroup names it.
                cgroup: cg.filter(|c| super::vm::vm_of_cgroup(c).is_some()),
                vm: Some(vm.clone()),
                ..Entry::new(Key::Vm(vm.clone()))
            });
            g.cpu_s += e.cpu_s;
            g.children_cpu_s += e.children_cpu_s;
            g.kernel_io_cpu_s += e.kernel_io_cpu_s;
        }
        // Every process present, not only those with CPU time: a VM idle this interval is
        // still there.
        let keys: Vec<ProcKey> = self.procs.keys().copied().collect();
        self.vms = keys
            .iter()
            .filter_map(|k| self.procs[k].vm.clone().flatten())
            .collect();
        self.vms.insert(HOST_ENTRY.to_string());
        self.vms.extend(by_vm.keys().cloned());
        by_vm.into_values().collect()
    }

    /// Reads every cgroup's usage; returns those with time of their own since the previous
    /// scan ([`cgroup::own_deltas`]).
    fn scan_cgroups(&mut self) -> io::Result<Vec<Entry>> {
        let mount = self
            .cgroup_mount
            .clone()
            .expect("set when attributing by cgroup");
        let all = cgroup::read_usage(&mount)?;
        let root_usec = (cputime::machine_busy_cpu_s(&self.root)? * 1e6) as u64;
        let first = self.cgroups.is_empty();
        let own = cgroup::own_deltas(&all, &self.cgroups, Some(root_usec));
        let now = cgroup::previous(&all, Some(root_usec));
        self.ended_cgroups = self
            .cgroups
            .keys()
            .filter(|c| !now.contains_key(*c))
            .cloned()
            .collect();
        self.cgroups = now;
        if first {
            return Ok(Vec::new());
        }
        Ok(own
            .into_iter()
            .filter(|(_, d)| *d > 0)
            .map(|(path, d)| Entry {
                cgroup: Some(path.clone()),
                cpu_s: d as f64 * 1e-6,
                ..Entry::new(Key::Cgroup(path))
            })
            .collect())
    }
}

/// Whether `key` is among the processes, cgroups or VMs present at the last scan.
fn key_alive(
    key: &Key,
    procs: &HashMap<ProcKey, ProcInfo>,
    cgroups: &HashMap<String, cgroup::Previous>,
    vms: &std::collections::HashSet<String>,
    workloads: &std::collections::HashSet<Key>,
) -> bool {
    match key {
        Key::Process(p) => procs.contains_key(p),
        Key::Cgroup(c) => cgroups.contains_key(c),
        Key::Vm(v) => vms.contains(v),
        Key::Container(_) | Key::Pod(_) => workloads.contains(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child killed and reaped when the test ends, passed or not.
    struct Reaped(std::process::Child);

    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// Under the real `/proc` the stat files stay open between scans: a busy process's kept
    /// file shows its new ticks, and a reaped process's file is dropped with the process.
    #[test]
    fn kept_stat_files_follow_real_processes() {
        let root = SysRoot::new("/");
        let mut a =
            Attributor::with_cpu_times(root, By::Process, IdlePolicy::Apart, 2, "proc").unwrap();
        assert!(a.reader.stat_file_budget > 0);
        let busy = Reaped(
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap(),
        );
        let busy = &busy.0;
        let mut idle = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        a.step(1.0, 0.1).unwrap();
        assert!(
            a.reader.stat_files.contains_key(&busy.id())
                && a.reader.stat_files.contains_key(&idle.id())
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        let iv = a.step(1.0, 0.3).unwrap();
        let busy_s: f64 = iv
            .entries
            .iter()
            .filter(|e| e.pid == Some(busy.id()))
            .map(|e| e.cpu_s)
            .sum();
        assert!(
            busy_s > 0.05,
            "the kept file showed {busy_s} s of a spinning shell"
        );
        idle.kill().unwrap();
        idle.wait().unwrap();
        a.step(1.0, 0.1).unwrap();
        assert!(!a.reader.stat_files.contains_key(&idle.id()));
        assert!(a.procs.keys().all(|k| k.pid != idle.id()));
    }

    #[test]
    fn fixture_trees_open_their_stat_files_afresh() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "/proc/stat", &proc_stat(0));
        let a = Attributor::new(SysRoot::new(d.path()), By::Process, IdlePolicy::Apart, 2).unwrap();
        assert_eq!(a.reader.stat_file_budget, 0);
    }

    fn stat_line(pid: u32, comm: &str, ticks: u64, start: u64) -> String {
        stat_line_full(pid, 1, comm, ticks, 0, start)
    }

    fn stat_line_full(
        pid: u32,
        ppid: u32,
        comm: &str,
        ticks: u64,
        children: u64,
        start: u64,
    ) -> String {
        format!("{pid} ({comm}) S {ppid} 1 1 0 -1 0 0 0 0 0 {ticks} 0 {children} 0 20 0 1 0 {start} 0 0\n")
    }

    fn write(root: &std::path::Path, p: &str, s: &str) {
        let p = root.join(p.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    fn proc_stat(busy_ticks: u64) -> String {
        format!(
            "cpu  {busy_ticks} 0 0 100000 0 0 0 0 0 0\ncpu0 {busy_ticks} 0 0 50000 0 0 0 0 0 0\n"
        )
    }

    /// A host with a libvirt domain, a Proxmox VM, a plain QEMU process with its vhost worker,
    /// and its own shell: by VM, each VM's processes together and the shell as the host.
    #[test]
    fn vms_by_the_cpu_time_of_their_processes() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "/proc/stat", &proc_stat(1000));
        let libvirt = "0::/machine.slice/machine-qemu\\x2d1\\x2dweb\\x2d1.scope/libvirt/emulator\n";
        let procs: [(u32, &str, &str, &str); 5] = [
            (
                100,
                "qemu-system-x86",
                libvirt,
                "qemu-system-x86_64\0-name\0guest=web-1\0",
            ),
            (
                101,
                "qemu-system-x86",
                "0::/qemu.slice/101.scope\n",
                "/usr/bin/kvm\0-id\0vm101\0",
            ),
            (
                102,
                "qemu-system-x86",
                "0::/user.slice\n",
                "qemu-system-x86_64\0-name\0guest=plain,debug-threads=on\0",
            ),
            (103, "vhost-102", "0::/\n", ""),
            (200, "bash", "0::/user.slice\n", "bash\0"),
        ];
        for (pid, comm, cg, cmd) in procs {
            write(r, &format!("/proc/{pid}/stat"), &stat_line(pid, comm, 0, 5));
            write(r, &format!("/proc/{pid}/cgroup"), cg);
            write(r, &format!("/proc/{pid}/cmdline"), cmd);
        }
        let mut a = Attributor::new(SysRoot::new(r), By::Vm, IdlePolicy::Apart, 4).unwrap();
        // 1 s on 4 CPUs (4 CPU-s): web-1 1 s, 101 0.5 s, plain 0.4 s + vhost 0.2 s, bash 0.1 s.
        write(r, "/proc/stat", &proc_stat(1220));
        for (pid, comm, ticks) in [
            (100, "qemu-system-x86", 100),
            (101, "qemu-system-x86", 50),
            (102, "qemu-system-x86", 40),
            (103, "vhost-102", 20),
            (200, "bash", 10),
        ] {
            write(
                r,
                &format!("/proc/{pid}/stat"),
                &stat_line(pid, comm, ticks, 5),
            );
        }
        let i = a.step(40.0, 1.0).unwrap();
        let vm = |name: &str| {
            i.entries
                .iter()
                .find(|e| e.vm.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("no {name}: {:?}", i.entries))
        };
        // 40 J over 4 CPU-s: 10 J per CPU-second.
        assert!((vm("web-1").energy_j - 10.0).abs() < 1e-9);
        assert!((vm("101").energy_j - 5.0).abs() < 1e-9);
        assert!((vm("plain").energy_j - 6.0).abs() < 1e-9);
        assert!((vm(HOST_ENTRY).energy_j - 1.0).abs() < 1e-9);
        assert_eq!(i.entries.len(), 4);
        assert_eq!(i.entries[0].vm.as_deref(), Some("web-1"));
        assert_eq!(
            vm("web-1").cgroup.as_deref(),
            Some("/machine.slice/machine-qemu\\x2d1\\x2dweb\\x2d1.scope/libvirt/emulator")
        );
        assert!((i.idle_j - 18.0).abs() < 1e-9);
        // A VM idle for an interval is still there; one whose QEMU ended is not.
        write(r, "/proc/stat", &proc_stat(1230));
        write(r, "/proc/200/stat", &stat_line(200, "bash", 20, 5));
        std::fs::remove_dir_all(r.join("proc/101")).unwrap();
        let i = a.step(4.0, 1.0).unwrap();
        assert_eq!(i.entries.len(), 1);
        assert!(a.is_alive(&Key::Vm("web-1".into())));
        assert!(!a.is_alive(&Key::Vm("101".into())));
    }

    #[test]
    fn processes_by_cpu_time_with_pid_reuse_and_exits() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "/proc/stat", &proc_stat(1000));
        write(r, "/proc/10/stat", &stat_line(10, "a", 100, 5));
        write(r, "/proc/10/cgroup", "0::/system.slice/a.service\n");
        write(r, "/proc/11/stat", &stat_line(11, "b b", 100, 6));
        write(r, "/proc/12/stat", &stat_line(12, "gone", 100, 7));
        let mut a = Attributor::new(SysRoot::new(r), By::Process, IdlePolicy::Apart, 2).unwrap();
        // 1 s on 2 CPUs: a +50 ticks (0.5 s), b +100 (1 s), 12 ended, 13 started with 20 ticks,
        // pid 11 unchanged. Machine busy +200 ticks.
        write(r, "/proc/stat", &proc_stat(1200));
        write(r, "/proc/10/stat", &stat_line(10, "a", 150, 5));
        write(r, "/proc/11/stat", &stat_line(11, "b b", 200, 6));
        std::fs::remove_dir_all(r.join("proc/12")).unwrap();
        write(r, "/proc/13/stat", &stat_line(13, "new", 20, 900));
        let i = a.step(40.0, 1.0).unwrap();
        let e = |pid: u32| i.entries.iter().find(|e| e.pid == Some(pid)).unwrap();
        // capacity 2 CPU-s: 40 J × 1.0/2, × 0.5/2, × 0.2/2
        assert!((e(11).energy_j - 20.0).abs() < 1e-9);
        assert!((e(10).energy_j - 10.0).abs() < 1e-9);
        assert!((e(13).energy_j - 4.0).abs() < 1e-9);
        assert_eq!(e(10).cgroup.as_deref(), Some("/system.slice/a.service"));
        assert_eq!(e(11).comm.as_deref(), Some("b b"));
        assert!((i.idle_j - 6.0).abs() < 1e-9);
        assert_eq!(i.entries[0].pid, Some(11)); // most energy first
        assert!((i.busy_cpu_s - 2.0).abs() < 1e-9);
        assert!((i.unseen_cpu_s - 0.3).abs() < 1e-9);
        // pid 10 reused by a new process: not the old one's continuation.
        write(r, "/proc/10/stat", &stat_line(10, "a2", 30, 1000));
        let i = a.step(10.0, 1.0).unwrap();
        let e10 = i.entries.iter().find(|e| e.pid == Some(10)).unwrap();
        assert!((e10.cpu_s - 0.3).abs() < 1e-9);
        assert!((e10.total_energy_j - e10.energy_j).abs() < 1e-12);
        assert_eq!(e10.comm.as_deref(), Some("a2"));
        let s: f64 = i.entries.iter().map(|e| e.energy_j).sum::<f64>() + i.idle_j;
        assert!((s - 10.0).abs() < 1e-9);
    }

    #[test]
    fn reaped_children_no_scan_saw_are_charged_to_their_parent_once() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "/proc/stat", &proc_stat(0));
        write(r, "/proc/20/stat", &stat_line_full(20, 1, "sh", 10, 0, 5));
        write(r, "/proc/21/stat", &stat_line_full(21, 20, "cc", 40, 0, 6));
        let mut a = Attributor::new(SysRoot::new(r), By::Process, IdlePolicy::Apart, 1).unwrap();
        // Interval 1: cc (seen at 40 ticks) runs 10 more and is reaped by sh; sh also reaps a
        // child no scan saw, 30 ticks. sh's cutime grows by 50 + 30 = 80; sh itself +5.
        write(r, "/proc/stat", &proc_stat(100));
        write(r, "/proc/20/stat", &stat_line_full(20, 1, "sh", 15, 80, 5));
        std::fs::remove_dir_all(r.join("proc/21")).unwrap();
        let i = a.step(10.0, 1.0).unwrap();
        assert_eq!(i.entries.len(), 1);
        // sh: own 5 + unseen child 30 + cc's last 10 ticks = 45 ticks; cc's first 40 were
        // attributed to cc before.
        assert!(
            (i.entries[0].cpu_s - 0.45).abs() < 1e-9,
            "{:?}",
            i.entries[0]
        );
        // Nothing new: nothing charged again.
        let i = a.step(10.0, 1.0).unwrap();
        assert!(i.entries.is_empty());
    }

    #[test]
    fn nested_endings_and_late_reaps_are_counted_once() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "/proc/stat", &proc_stat(0));
        write(r, "/proc/30/stat", &stat_line_full(30, 1, "make", 10, 0, 5));
        write(r, "/proc/31/stat", &stat_line_full(31, 30, "sh", 5, 0, 6));
        write(r, "/proc/32/stat", &stat_line_full(32, 31, "cc", 10, 0, 7));
        let mut a = Attributor::new(SysRoot::new(r), By::Process, IdlePolicy::Apart, 1).unwrap();
        // cc runs 3 more ticks and is reaped by sh, sh 1 more and is reaped by make: make's
        // cutime grows by sh's 6 + sh's cutime 13 = 19, of which 15 were attributed already.
        write(r, "/proc/stat", &proc_stat(4));
        write(
            r,
            "/proc/30/stat",
            &stat_line_full(30, 1, "make", 10, 19, 5),
        );
        std::fs::remove_dir_all(r.join("proc/31")).unwrap();
        std::fs::remove_dir_all(r.join("proc/32")).unwrap();
        let i = a.step(1.0, 1.0).unwrap();
        assert_eq!(i.entries.len(), 1);
        assert!(
            (i.entries[0].cpu_s - 0.04).abs() < 1e-9,
            "{:?}",
            i.entries[0]
        );
        assert!((i.entries[0].children_cpu_s - 0.04).abs() < 1e-9);
        assert!(i.over_cpu_s < 1e-9);

        // A child seen with its final ticks, gone at the next scan, while its parent's cutime
        // only grows one scan later (the reap came after the parent's stat was read).
        write(r, "/proc/33/stat", &stat_line_full(33, 30, "ld", 0, 0, 900));
        let i = a.step(1.0, 1.0).unwrap();
        assert!(i.entries.is_empty(), "{:?}", i.entries);
        write(r, "/proc/stat", &proc_stat(54));
        write(
            r,
            "/proc/33/stat",
            &stat_line_full(33, 30, "ld", 50, 0, 900),
        );
        let i = a.step(1.0, 1.0).unwrap();
        assert!((i.entries[0].cpu_s - 0.5).abs() < 1e-9); // ld itself, alive
        std::fs::remove_dir_all(r.join("proc/33")).unwrap();
        let i = a.step(1.0, 1.0).unwrap();
        assert!(i.entries.is_empty(), "{:?}", i.entries);
        write(
            r,
            "/proc/30/stat",
            &stat_line_full(30, 1, "make", 10, 69, 5),
        );
        let i = a.step(1.0, 1.0).unwrap();
        assert!(
            i.entries.is_empty(),
            "ld's 50 ticks were ld's: {:?}",
            i.entries
        );
    }

    #[test]
    fn an_orphan_reaped_by_a_stranger_is_not_counted_twice() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "/proc/stat", &proc_stat(0));
        write(r, "/proc/5/stat", &stat_line_full(5, 1, "shim", 0, 0, 2));
        write(r, "/proc/40/stat", &stat_line_full(40, 5, "app", 100, 0, 5));
        write(
            r,
            "/proc/41/stat",
            &stat_line_full(41, 40, "worker", 300, 0, 6),
        );
        let mut a = Attributor::new(SysRoot::new(r), By::Process, IdlePolicy::Apart, 1).unwrap();
        // app and worker are killed together; worker, reparented, is reaped by shim, whose
        // cutime grows by app's 100 and worker's 300 though both were attributed already.
        // The debt walks up from worker past app (gone) to shim.
        write(r, "/proc/stat", &proc_stat(0));
        write(r, "/proc/5/stat", &stat_line_full(5, 1, "shim", 0, 400, 2));
        std::fs::remove_dir_all(r.join("proc/40")).unwrap();
        std::fs::remove_dir_all(r.join("proc/41")).unwrap();
        let i = a.step(1.0, 1.0).unwrap();
        assert!(i.entries.is_empty(), "{:?}", i.entries);
        // A reaper that was never told (the debt went elsewhere): the cap keeps the reaped
        // time within the busy time nobody's own time explains.
        write(
            r,
            "/proc/50/stat",
            &stat_line_full(50, 1, "init2", 0, 0, 10),
        );
        a.step(1.0, 1.0).unwrap();
        write(r, "/proc/stat", &proc_stat(2));
        write(
            r,
            "/proc/50/stat",
            &stat_line_full(50, 1, "init2", 0, 500, 10),
        );
        let i = a.step(1.0, 1.0).unwrap();
        let c: f64 = i.entries.iter().map(|e| e.cpu_s).sum();
        assert!(c <= 0.02 + 0.02 + 1e-9, "reaped {c} s with 0.02 s busy");
    }

    #[test]
    fn a_comm_cut_mid_character_keeps_its_process() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "/proc/stat", &proc_stat(0));
        let mut line = b"60 (\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe5\x90\x8d\xe5\x89) S 1 1 1 0 -1 0 0 0 0 0 ".to_vec();
        line.extend_from_slice(b"0 0 0 0 20 0 1 0 9 0 0\n");
        let path = r.join("proc/60/stat");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &line).unwrap();
        let mut a = Attributor::new(SysRoot::new(r), By::Process, IdlePolicy::Apart, 1).unwrap();
        let mut line2 = line.clone();
        let at = line2.len() - b"0 0 0 0 20 0 1 0 9 0 0\n".len();
        line2.truncate(at);
        line2.extend_from_slice(b"7 0 0 0 20 0 1 0 9 0 0\n");
        std::fs::write(&path, &line2).unwrap();
        write(r, "/proc/stat", &proc_stat(7));
        let i = a.step(1.0, 1.0).unwrap();
        assert_eq!(i.entries.len(), 1);
        assert!(i.entries[0].comm.as_deref().unwrap().starts_with("日本語"));
    }

    #[test]
    fn a_removed_cgroup_does_not_hand_its_life_to_its_parent() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let cg = "/sys/fs/cgroup";
        write(r, "/proc/stat", &proc_stat(0));
        write(r, &format!("{cg}/cgroup.controllers"), "cpu\n");
        let usage = |p: &str, u: u64| {
            write(
                r,
                &format!("{cg}{p}/cpu.stat"),
                &format!("usage_usec {u}\n"),
            )
        };
        usage("", 3_700_000_000);
        usage("/system.slice", 3_600_100_000);
        usage("/system.slice/old.service", 3_600_000_000);
        let mut a = Attributor::new(SysRoot::new(r), By::Cgroup, IdlePolicy::Apart, 2).unwrap();
        // old.service runs 0.1 s more and is stopped; the slice keeps its usage.
        std::fs::remove_dir_all(r.join("sys/fs/cgroup/system.slice/old.service")).unwrap();
        usage("", 3_700_100_000);
        usage("/system.slice", 3_600_200_000);
        let i = a.step(10.0, 1.0).unwrap();
        assert_eq!(i.entries.len(), 1, "{:?}", i.entries);
        assert_eq!(i.entries[0].cgroup.as_deref(), Some("/system.slice"));
        assert!(
            (i.entries[0].cpu_s - 0.1).abs() < 1e-9,
            "{:?}",
            i.entries[0]
        );
    }

    #[test]
    fn nested_cgroups_each_get_their_own_time() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let cg = "/sys/fs/cgroup";
        let usage = |p: &str, u: u64| {
            write(
                r,
                &format!("{cg}{p}/cpu.stat"),
                &format!("usage_usec {u}\nuser_usec {u}\nsystem_usec 0\n"),
            )
        };
        write(r, "/proc/stat", &proc_stat(0));
        write(r, &format!("{cg}/cgroup.controllers"), "cpu\n");
        let pod = "/kubepods.slice/kubepods-pod1.slice";
        let ctr = "/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope";
        let set = |root_u, pod_u, ctr_u, svc_u| {
            usage("", root_u);
            usage("/kubepods.slice", pod_u);
            usage(pod, pod_u);
            usage(ctr, ctr_u);
            usage("/system.slice", svc_u);
            usage("/system.slice/nginx.service", svc_u);
        };
        set(1_000_000, 500_000, 400_000, 200_000);
        let mut a = Attributor::new(SysRoot::new(r), By::Cgroup, IdlePolicy::Apart, 4).unwrap();
        // +1.5 s in the container, +0.5 s in the pod outside it, +1 s in nginx, +0.2 s at root.
        set(4_200_000, 2_500_000, 1_900_000, 1_200_000);
        let i = a.step(80.0, 1.0).unwrap();
        let get = |p: &str| {
            i.entries
                .iter()
                .find(|e| e.cgroup.as_deref() == Some(p))
                .map(|e| (e.cpu_s, e.energy_j))
        };
        assert_eq!(get(ctr), Some((1.5, 30.0)));
        assert_eq!(get(pod), Some((0.5, 10.0)));
        assert_eq!(get("/system.slice/nginx.service"), Some((1.0, 20.0)));
        assert!((get("/").unwrap().0 - 0.2).abs() < 1e-9);
        assert!(get("/kubepods.slice").is_none()); // no time of its own
        assert!(i.entries.iter().all(|e| e.pid.is_none()));
        let s: f64 = i.entries.iter().map(|e| e.energy_j).sum::<f64>() + i.idle_j;
        assert!((s - 80.0).abs() < 1e-9);
    }

    #[test]
    fn missing_cgroup_tree_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "/proc/stat", &proc_stat(0));
        let e = Attributor::new(SysRoot::new(d.path()), By::Cgroup, IdlePolicy::Apart, 1)
            .err()
            .unwrap();
        assert!(e.to_string().contains("--by process"), "{e}");
    }
}
