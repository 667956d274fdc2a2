//! The machine a result was produced on, for the provenance line of every result file and
//! report: CPU model, online CPUs, memory, kernel, and whether it is a virtual machine.
//!
//! Everything is read under a [`SysRoot`], so a fixture tree under `WATTIO_ROOT` describes its
//! own machine and results made against it never claim the host's hardware.

use crate::cpu;
use crate::root::SysRoot;
use serde::Serialize;
use std::fmt;

/// What a result was produced on. Each field is `None` where the machine does not say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    /// `model name` of the first processor in `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// Online logical CPUs (`/sys/devices/system/cpu/online`): what the kernel schedules on,
    /// not this process's affinity or cgroup quota.
    pub online_cpus: Option<usize>,
    /// `MemTotal` of `/proc/meminfo`, in bytes.
    pub memory_bytes: Option<u64>,
    /// Kernel release (`/proc/sys/kernel/osrelease`, as `uname -r` prints it).
    pub kernel: Option<String>,
    /// Whether `/proc/cpuinfo` lists the `hypervisor` flag: the kernel runs in a VM, so the CPU
    /// counts are vCPUs and the physical machine is shared.
    pub virtualised: bool,
}

impl Machine {
    /// Reads the machine under `root` (use [`SysRoot::from_env`] for this machine, honouring
    /// `WATTIO_ROOT`). Never fails: what cannot be read is `None`.
    pub fn read(root: &SysRoot) -> Machine {
        let read = |p: &str| std::fs::read_to_string(root.path(p)).ok();
        Machine {
            cpu_model: cpu::cpu_id(root)
                .ok()
                .map(|id| id.model_name)
                .filter(|n| !n.is_empty()),
            online_cpus: cpu::online_cpu_count(root).ok().filter(|&n| n > 0),
            memory_bytes: read("/proc/meminfo").as_deref().and_then(mem_total_bytes),
            kernel: read("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
            virtualised: virtualised(root),
        }
    }
}

/// Whether `/proc/cpuinfo` under `root` carries the `hypervisor` flag (the kernel runs in a VM).
pub(crate) fn virtualised(root: &SysRoot) -> bool {
    std::fs::read_to_string(root.path("/proc/cpuinfo"))
        .map(|t| {
            t.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|f| f == "hypervisor"))
        })
        .unwrap_or(false)
}

/// `MemTotal:   16337456 kB` → bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    meminfo_bytes(meminfo, "MemTotal")
}

/// The field `key` of a `/proc/meminfo` text (`Dirty:   1024 kB`) in bytes: the kernel's `kB`
/// is KiB (`fs/proc/meminfo.c`); a field in another unit, or missing, is `None`.
pub fn meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?;
    let mut f = line.split_whitespace();
    let kib: u64 = f.next()?.parse().ok()?;
    (f.next() == Some("kB")).then(|| kib.checked_mul(1024))?
}

impl fmt::Display for Machine {
    /// One line for result headers, e.g. `2 vCPUs (VM), AMD EPYC 7763 64-Core Processor,
    /// 23.5 GiB RAM, Linux 6.1.0-18-amd64`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cpus = if self.virtualised {
            "vCPUs (VM)"
        } else {
            "CPUs"
        };
        match self.online_cpus {
            Some(n) => write!(f, "{n} {cpus}")?,
            None => write!(f, "unknown number of {cpus}")?,
        }
        write!(
            f,
            ", {}",
            self.cpu_model.as_deref().unwrap_or("unknown CPU model")
        )?;
        match self.memory_bytes {
            Some(b) => write!(f, ", {:.1} GiB RAM", b as f64 / (1u64 << 30) as f64)?,
            None => write!(f, ", unknown RAM")?,
        }
        match &self.kernel {
            Some(k) => write!(f, ", Linux {k}"),
            None => write!(f, ", unknown kernel"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_fixture::FixtureTree;

    #[test]
    fn a_fixture_root_describes_its_own_machine() {
        let d = tempfile::tempdir().unwrap();
        let t = FixtureTree::new(d.path()).unwrap();
        t.cpuinfo(
            "GenuineIntel",
            6,
            0x55,
            "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz",
            4,
        )
        .unwrap();
        t.topology(&[(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)])
            .unwrap();
        t.write(
            "/proc/meminfo",
            "MemTotal:       16337456 kB\nMemFree:         1000000 kB\n",
        )
        .unwrap();
        t.write("/proc/sys/kernel/osrelease", "5.10.0-fixture\n")
            .unwrap();
        let m = Machine::read(&SysRoot::new(d.path()));
        assert_eq!(
            m,
            Machine {
                cpu_model: Some("Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz".into()),
                online_cpus: Some(4),
                memory_bytes: Some(16_729_554_944),
                kernel: Some("5.10.0-fixture".into()),
                virtualised: false,
            }
        );
        assert_eq!(
            m.to_string(),
            "4 CPUs, Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz, 15.6 GiB RAM, Linux 5.10.0-fixture"
        );
    }

    #[test]
    fn a_vm_says_vcpus() {
        let d = tempfile::tempdir().unwrap();
        let t = FixtureTree::new(d.path()).unwrap();
        t.write(
            "/proc/cpuinfo",
            "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7763 64-Core Processor\nflags\t\t: fpu msr hypervisor avx2\n\n",
        )
        .unwrap();
        t.topology(&[(0, 0, 0), (1, 0, 0)]).unwrap();
        let m = Machine::read(&SysRoot::new(d.path()));
        assert!(m.virtualised && virtualised(&SysRoot::new(d.path())));
        assert_eq!(
            m.to_string(),
            "2 vCPUs (VM), AMD EPYC 7763 64-Core Processor, unknown RAM, unknown kernel"
        );
    }

    #[test]
    fn an_empty_root_is_unknown_not_the_host() {
        let d = tempfile::tempdir().unwrap();
        let m = Machine::read(&SysRoot::new(d.path()));
        assert_eq!(
            m.to_string(),
            "unknown number of CPUs, unknown CPU model, unknown RAM, unknown kernel"
        );
    }

    #[test]
    fn meminfo_needs_memtotal_in_kb() {
        assert_eq!(mem_total_bytes("MemTotal: 2 kB\n"), Some(2048));
        assert_eq!(mem_total_bytes("MemFree: 2 kB\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: 2 MB\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: lots kB\n"), None);
    }
}
