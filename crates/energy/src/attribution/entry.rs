//! What attribution produces: [`Entry`]s of an [`Interval`], each named by a [`Key`] (a
//! process, [`ProcKey`], a cgroup, a VM, a container or a pod) and grouped [`By`] one of them. The attributor
//! (`tracker.rs`) fills them; the kernel I/O work (`kernel_io.rs`) moves time between them.

use std::collections::BTreeMap;

use serde::Serialize;

use super::gpu::GpuShareBasis;

/// What the energy is attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Process,
    Cgroup,
    /// Virtual machines on this host ([`super::vm`]), and the host's own processes as one entry.
    Vm,
    /// Containers (docker, podman, containerd, CRI-O) by the id in their cgroup's name
    /// ([`super::workload`]), and the cgroups in no container as one entry.
    Container,
    /// Kubernetes pods by the uid in their cgroup's name, and the cgroups in no pod as one entry.
    Pod,
}

impl std::str::FromStr for By {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "process" | "pid" => Ok(By::Process),
            "cgroup" => Ok(By::Cgroup),
            "vm" | "vms" => Ok(By::Vm),
            "container" | "containers" => Ok(By::Container),
            "pod" | "pods" => Ok(By::Pod),
            other => Err(format!(
                "unknown --by '{other}': use process, cgroup, vm, container or pod"
            )),
        }
    }
}

impl By {
    pub fn as_str(&self) -> &'static str {
        match self {
            By::Process => "process",
            By::Cgroup => "cgroup",
            By::Vm => "vm",
            By::Container => "container",
            By::Pod => "pod",
        }
    }

    /// What is read to attribute this way: containers and pods are groups of cgroups, so
    /// they are attributed by cgroup first ([`By::Cgroup`]), then grouped.
    pub fn read_as(&self) -> By {
        match self {
            By::Container | By::Pod => By::Cgroup,
            other => *other,
        }
    }
}

/// Names one process across pid reuse: pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcKey {
    pub pid: u32,
    pub start_ticks: u64,
}

/// An attributed entity: a process or a cgroup.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Process(ProcKey),
    Cgroup(String),
    /// A VM by its name ([`HOST_ENTRY`] for the processes in no VM).
    Vm(String),
    /// A container by its id ([`HOST_ENTRY`] for the cgroups in no container).
    Container(String),
    /// A pod by its uid ([`HOST_ENTRY`] for the cgroups in no pod).
    Pod(String),
}

/// The `--by vm`, `--by container` and `--by pod` entry of what belongs to no VM, container
/// or pod: the host's own work.
pub const HOST_ENTRY: &str = "(host)";

/// One entry of an interval.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    #[serde(skip)]
    pub key: Key,
    /// The process id (absent when attributing by cgroup).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The command name (absent when attributing by cgroup).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// The cgroup v2 path (`None` where the process's cgroup could not be read).
    pub cgroup: Option<String>,
    /// By VM: the VM's name, as the host names it ([`HOST_ENTRY`] for the host's processes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm: Option<String>,
    /// By container: the container's id, as its cgroup names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// By container or pod: the Kubernetes pod's uid, where the cgroup is a pod's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// By container or pod: the names its runtime or the Kubernetes API gives it, where one
    /// answered (filled by the meter; the cgroup path stands in for them otherwise).
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub names: Option<WorkloadNames>,
    /// CPU-seconds in the interval: its own plus `children_cpu_s`.
    pub cpu_s: f64,
    /// By process: CPU-seconds of children it reaped in the interval that no scan saw alive
    /// (part of `cpu_s`).
    #[serde(skip_serializing_if = "is_zero")]
    pub children_cpu_s: f64,
    /// Of `cpu_s`, the kernel's I/O work done for it in the interval (`attribution::kernel_io`).
    #[serde(skip_serializing_if = "is_zero")]
    pub kernel_io_cpu_s: f64,
    /// Joules attributed in the interval.
    pub energy_j: f64,
    /// Of `energy_j`, the share of its kernel I/O work, labelled as its interval's [`KernelIoSummary::label`] says.
    #[serde(skip_serializing_if = "is_zero")]
    pub kernel_io_j: f64,
    /// `energy_j / interval_s`.
    pub power_w: f64,
    /// Joules attributed since the attributor started.
    pub total_energy_j: f64,
    /// CO₂e of `energy_j` and of `total_energy_j`, where a carbon intensity was given
    /// (`top --carbon-intensity` / `--region`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub co2e_g: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_co2e_g: Option<f64>,
    /// GPU joules attributed in the interval (all GPUs), where GPUs are read: apart from
    /// `energy_j`, as the meter keeps GPUs apart from the CPU total (`Attributor::attribute_gpus`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_energy_j: Option<f64>,
    /// GPU joules attributed since the attributor started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_gpu_energy_j: Option<f64>,
    /// CO₂e of `gpu_energy_j` and of `total_gpu_energy_j`, with a carbon intensity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_co2e_g: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_gpu_co2e_g: Option<f64>,
}

/// A container's or pod's names, from its runtime (docker, podman) or the Kubernetes API; the
/// label names are Kepler's where a Kepler dashboard would look for them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WorkloadNames {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    /// The pod's namespace (Kepler's `container_namespace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_namespace: Option<String>,
    /// Who named it: `docker`, `podman` (their API sockets) or `kubernetes` (the API server).
    pub named_by: String,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Entry {
    /// An entry of `key` with no name, no time and no energy yet.
    pub fn new(key: Key) -> Entry {
        Entry {
            key,
            pid: None,
            comm: None,
            cgroup: None,
            vm: None,
            container_id: None,
            pod_uid: None,
            names: None,
            cpu_s: 0.0,
            children_cpu_s: 0.0,
            kernel_io_cpu_s: 0.0,
            energy_j: 0.0,
            kernel_io_j: 0.0,
            power_w: 0.0,
            total_energy_j: 0.0,
            co2e_g: None,
            total_co2e_g: None,
            gpu_energy_j: None,
            total_gpu_energy_j: None,
            gpu_co2e_g: None,
            total_gpu_co2e_g: None,
        }
    }
}

impl crate::Co2eFigures for Entry {
    /// The entry's energy in the interval and since start, and its GPUs' where GPUs are read.
    fn co2e_slots(
        &mut self,
        _intensity: &crate::CarbonIntensity,
        each: &mut dyn FnMut(crate::Co2eSlot<'_>),
    ) {
        each(crate::Co2eSlot {
            joules: self.energy_j,
            grams: self.co2e_g.insert(0.0),
        });
        each(crate::Co2eSlot {
            joules: self.total_energy_j,
            grams: self.total_co2e_g.insert(0.0),
        });
        crate::optional_co2e_slot(self.gpu_energy_j, &mut self.gpu_co2e_g, each);
        crate::optional_co2e_slot(self.total_gpu_energy_j, &mut self.total_gpu_co2e_g, each);
    }
}

/// One interval's attribution.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    pub interval_s: f64,
    /// The interval's energy (the meter's total: packages + DRAM).
    pub total_j: f64,
    /// The part no entry's CPU time explains.
    pub idle_j: f64,
    /// Busy CPU-seconds of the machine in the interval (`/proc/stat`).
    pub busy_cpu_s: f64,
    /// Busy CPU-seconds not found in any entry: by process, children not (yet) waited for and
    /// interrupt time; by cgroup, read skew.
    pub unseen_cpu_s: f64,
    /// CPU-seconds the entries have beyond the machine's busy time (read skew between the
    /// files, 10 ms ticks): a check that nothing is counted twice.
    pub over_cpu_s: f64,
    /// Entries with CPU time or GPU use in the interval, most energy (CPU and GPU) first.
    pub entries: Vec<Entry>,
    /// Each GPU's split, where GPUs are read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuInterval>,
    /// By process or VM: where the CPU times were read (`Attributor::cpu_times_source`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_times: Option<&'static str>,
    /// The kernel's I/O work moved to its owners, where the kernel I/O program is loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_io: Option<KernelIoSummary>,
}

/// One GPU's energy in an interval and how it was split.
#[derive(Debug, Clone, Serialize)]
pub struct GpuInterval {
    pub index: u32,
    pub energy_j: f64,
    /// The part no process's use explains.
    pub idle_j: f64,
    /// `None` when NVML answered neither way (`note` says why): all of it is idle.
    pub basis: Option<GpuShareBasis>,
    /// E.g. `measured (nvml), attributed (gpu utilisation share)`.
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The kernel's I/O work of one interval, as `attribution::kernel_io::reattribute` moved it
/// to its owners.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct KernelIoSummary {
    /// What the owners' figures are (`attribution::kernel_io::LABEL`, or `BYTES_LABEL` for the coarser io.stat rule).
    pub label: &'static str,
    /// CPU-seconds charged to owners, by kind of work.
    pub owned_cpu_s: BTreeMap<&'static str, f64>,
    /// CPU-seconds of kernel I/O work with no owner found, by kind.
    pub unowned_cpu_s: BTreeMap<&'static str, f64>,
    /// Of the owned time, CPU-seconds taken from the tasks that ran it (the rest was in no
    /// task's time: the idle task's, or interrupt time accounted apart).
    pub taken_cpu_s: f64,
}
