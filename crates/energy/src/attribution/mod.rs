//! Whose energy is it: CPU-time readers and the split of a window's energy between processes
//! and cgroups. Every wattio figure that names a process's or a cgroup's energy comes from here.
//!
//! A public namespace (`wattio_energy::attribution::…`) rather than items at the crate root: it
//! is a family of its own, read as a whole by whoever attributes energy, and its two readers are
//! namespaces of many small functions whose names only read well under them
//! (`cputime::self_cpu_s`, `cgroup::kind`).
//!
//! * [`cputime`] — how long a process, this process, a child that ended, or the machine ran;
//! * [`cgroup`] — cgroup v2 `cpu.stat` usage, own usage of nested cgroups, workload kinds;
//! * [`split()`](split()), [`share_j`], [`Split`] and [`IdlePolicy`] — the formula (CPU-time
//!   share, idle apart or shared), its label ([`attributed_label`]) and the CPU count its
//!   capacity is taken of ([`machine_cpus`]);
//! * [`split_gpu`], [`GpuUse`], [`GpuShareBasis`] — a GPU's energy split between the processes
//!   using it, by utilisation samples or held memory (read by
//!   [`crate::GpuProcessReader`]);
//! * [`vm`] — which VM a host process belongs to (libvirt and Proxmox scopes, QEMU command lines,
//!   vhost workers), for `--by vm`;
//! * [`workload`] — containers and Kubernetes pods as groups of cgroups (ids and uids from the
//!   cgroup names both cgroup drivers write), for `--by container` and `--by pod`;
//! * [`kernel_io`] — the kernel's I/O work (kworker writeback, block completions, network
//!   softirqs) timed by a BPF program and moved from the task that ran it to the process whose
//!   I/O caused it, labelled [`kernel_io::LABEL`] (or, by cgroup without the BPF program, by the coarser io.stat rule, [`kernel_io::BYTES_LABEL`]);
//! * [`task_iter`] — every process's CPU times in one read of a BPF task iterator, the cheap path
//!   of attribution by process where BPF is available (the /proc path elsewhere);
//! * [`Attributor`] — interval attribution of a whole machine (`wattio top`, `record --by`,
//!   `export`): [`Interval`]s of [`Entry`]s, one per [`Key`] (a process, [`ProcKey`], or a
//!   cgroup), grouped [`By`] process or cgroup (the types in `entry.rs`).
//!
//! With a RAPL mechanism the total is measured and the split is a model: figures are labelled
//! `attributed (cpu-time share)` next to the mechanism ([`attributed_label`]). With the
//! model mechanism the total is itself estimated, and the label says so.

pub mod cgroup;
pub mod cputime;
mod entry;
mod gpu;
pub mod kernel_io;
mod proc_reader;
mod split;
pub mod task_iter;
mod tracker;
pub mod vm;
pub mod workload;

pub use entry::{
    By, Entry, GpuInterval, Interval, KernelIoSummary, Key, ProcKey, WorkloadNames, HOST_ENTRY,
};
pub use gpu::{split_gpu, GpuShareBasis, GpuSplit, GpuUse};
pub use proc_reader::CPU_TIMES_ENV;
pub use split::{attributed_label, machine_cpus, share_j, split, IdlePolicy, Split};
pub use tracker::Attributor;
