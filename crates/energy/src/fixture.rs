//! Fake `/sys`, `/proc` and `/dev` trees that stand in for RAPL hardware.
//!
//! Point `WATTIO_ROOT` at a tree built here and every mechanism reads it instead of the machine:
//! powercap zones are plain files, MSR devices are sparse files holding 8-byte little-endian
//! values (register `r` at offset `8·r`, read with `pread` like `/dev/cpu/N/msr`; see
//! [`crate::msr::MsrFile`]), and the
//! perf PMU description is the sysfs text (its PMU type is deliberately one no kernel has, so
//! `perf_event_open` fails and says why; perf reads are tested with pipes instead).
//!
//! Three machines are provided, modelled on the kernel's layouts (the perf `power` PMU in sysfs, `Documentation/ABI/testing/sysfs-bus-event_source-devices-power` and `arch/x86/events/rapl.c`; powercap, `Documentation/power/powercap/powercap.rst`; the RAPL MSRs of the Intel SDM vol. 4 and AMD's PPR for family 19h):
//! an Intel two-socket Skylake-X server (DRAM unit quirk), an AMD EPYC (Zen 3, per-core core
//! energy, SMT siblings) and an Intel laptop (Tiger Lake: core, uncore, psys, an
//! `intel-rapl-mmio` duplicate).

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A PMU type number no kernel assigns, so opening fixture perf events fails cleanly.
pub const FIXTURE_PMU_TYPE: u32 = 4242;

/// A fixture tree rooted at a directory.
#[derive(Debug, Clone)]
pub struct FixtureTree {
    root: PathBuf,
}

impl FixtureTree {
    /// An empty tree at `root` (created if needed).
    pub fn new(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root)?;
        Ok(FixtureTree { root })
    }

    /// The directory to put in `WATTIO_ROOT`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path of an absolute system path inside the tree.
    pub fn path(&self, absolute: &str) -> PathBuf {
        self.root.join(absolute.trim_start_matches('/'))
    }

    /// Writes `content` at the absolute system path `absolute` inside the tree.
    pub fn write(&self, absolute: &str, content: &str) -> io::Result<()> {
        let p = self.path(absolute);
        if let Some(d) = p.parent() {
            fs::create_dir_all(d)?;
        }
        fs::write(p, content)
    }

    /// `/proc/cpuinfo` with `ncpus` identical processor blocks.
    pub fn cpuinfo(
        &self,
        vendor: &str,
        family: u32,
        model: u32,
        name: &str,
        ncpus: u32,
    ) -> io::Result<()> {
        let mut s = String::new();
        for i in 0..ncpus {
            s.push_str(&format!(
                "processor\t: {i}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\nmodel name\t: {name}\n\n"
            ));
        }
        self.write("/proc/cpuinfo", &s)
    }

    /// CPU topology: `cpus[i] = (cpu, package, core_id)`; also writes the online list and a
    /// `/proc/stat` with zero ticks for each CPU.
    pub fn topology(&self, cpus: &[(u32, u32, u32)]) -> io::Result<()> {
        let list: Vec<String> = cpus.iter().map(|c| c.0.to_string()).collect();
        self.write(
            "/sys/devices/system/cpu/online",
            &format!("{}\n", list.join(",")),
        )?;
        for &(cpu, pkg, core) in cpus {
            let t = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
            self.write(&format!("{t}/physical_package_id"), &format!("{pkg}\n"))?;
            self.write(&format!("{t}/core_id"), &format!("{core}\n"))?;
        }
        let ticks: Vec<(u32, u64)> = cpus.iter().map(|c| (c.0, 0)).collect();
        self.proc_stat(&ticks)
    }

    /// `/proc/stat` where CPU `cpu` has spent `busy` ticks in user mode and 1000 idle.
    pub fn proc_stat(&self, busy: &[(u32, u64)]) -> io::Result<()> {
        let total: u64 = busy.iter().map(|b| b.1).sum();
        let mut s = format!("cpu  {total} 0 0 {} 0 0 0 0 0 0\n", 1000 * busy.len());
        for &(cpu, b) in busy {
            s.push_str(&format!("cpu{cpu} {b} 0 0 1000 0 0 0 0 0 0\n"));
        }
        s.push_str("intr 0\nctxt 0\nbtime 0\n");
        self.write("/proc/stat", &s)
    }

    /// A powercap zone `id` (e.g. `intel-rapl:0:1`) named `name`, with `max_energy_range_uj`
    /// unless `max_uj` is `None`.
    pub fn powercap_zone(
        &self,
        id: &str,
        name: &str,
        energy_uj: u64,
        max_uj: Option<u64>,
    ) -> io::Result<()> {
        let d = format!("/sys/class/powercap/{id}");
        self.write(&format!("{d}/name"), &format!("{name}\n"))?;
        self.set_energy_uj(id, energy_uj)?;
        if let Some(m) = max_uj {
            self.write(&format!("{d}/max_energy_range_uj"), &format!("{m}\n"))?;
        }
        Ok(())
    }

    /// Writes `bytes` at `offset` of the file at `absolute`, creating it but never truncating,
    /// with one `pwrite`: a reader holding the file open sees the new bytes, as with sysfs.
    fn write_in_place(&self, absolute: &str, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let p = self.path(absolute);
        if let Some(d) = p.parent() {
            fs::create_dir_all(d)?;
        }
        let f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&p)?;
        f.write_all_at(bytes, offset)
    }

    /// Rewrites a zone's `energy_uj` in place (fixed width).
    pub fn set_energy_uj(&self, id: &str, energy_uj: u64) -> io::Result<()> {
        let path = format!("/sys/class/powercap/{id}/energy_uj");
        self.write_in_place(&path, 0, format!("{energy_uj:020}\n").as_bytes())
    }

    /// Writes `value` into the sparse stand-in for `/dev/cpu/<cpu>/msr` at `register`.
    pub fn msr(&self, cpu: u32, register: u64, value: u64) -> io::Result<()> {
        let path = format!("/dev/cpu/{cpu}/msr");
        let offset = crate::msr::stand_in_offset(register);
        self.write_in_place(&path, offset, &value.to_le_bytes())
    }

    /// The perf `power` PMU description: `events[i] = (name, code)`, all with the 2^-32 J scale.
    pub fn perf_pmu(&self, cpumask: &str, events: &[(&str, u64)]) -> io::Result<()> {
        let d = "/sys/bus/event_source/devices/power";
        self.write(&format!("{d}/type"), &format!("{FIXTURE_PMU_TYPE}\n"))?;
        self.write(&format!("{d}/cpumask"), &format!("{cpumask}\n"))?;
        for (name, code) in events {
            self.write(
                &format!("{d}/events/{name}"),
                &format!("event={code:#04x}\n"),
            )?;
            self.write(
                &format!("{d}/events/{name}.scale"),
                "2.3283064365386962890625e-10\n",
            )?;
            self.write(&format!("{d}/events/{name}.unit"), "Joules\n")?;
        }
        Ok(())
    }
}

/// The perf type of software events (`PERF_TYPE_SOFTWARE`), for [`FixtureTree::standin_power_pmu`].
pub const SOFTWARE_PMU_TYPE: u32 = 1;

impl FixtureTree {
    /// A test-only stand-in for RAPL that really counts: a `power` PMU whose `type` is the
    /// kernel's software PMU and whose events are all `cpu-clock` (config 0: nanoseconds of the
    /// CPU's clock while the event is enabled, a count that advances at 10^9 per second whatever
    /// the load). Each event gets its own `.scale`, so `(energy-pkg, 1e-9)` reads as a constant
    /// 1 W per package. With `WATTIO_ROOT` at such a tree, the perf and eBPF mechanisms open and
    /// read real kernel counters through their whole path on a machine without RAPL.
    pub fn standin_power_pmu(&self, cpumask: &str, events: &[(&str, f64)]) -> io::Result<()> {
        let d = "/sys/bus/event_source/devices/power";
        self.write(&format!("{d}/type"), &format!("{SOFTWARE_PMU_TYPE}\n"))?;
        self.write(&format!("{d}/cpumask"), &format!("{cpumask}\n"))?;
        // How `event=0x02` maps onto perf_event_attr.config; perf(1) refuses the event without it.
        self.write(&format!("{d}/format/event"), "config:0-7\n")?;
        for (name, scale) in events {
            self.write(&format!("{d}/events/{name}"), "event=0x00\n")?;
            self.write(&format!("{d}/events/{name}.scale"), &format!("{scale:e}\n"))?;
            self.write(&format!("{d}/events/{name}.unit"), "Joules\n")?;
        }
        Ok(())
    }
}

/// The names of the built-in fixture machines, for `wattio fixture`.
pub const MACHINES: &[&str] = &["intel-server", "amd-epyc", "intel-laptop"];

/// Builds the named machine under `dir`.
pub fn build(name: &str, dir: &Path) -> io::Result<FixtureTree> {
    match name {
        "intel-server" => intel_two_socket_server(dir),
        "amd-epyc" => amd_epyc(dir),
        "intel-laptop" => intel_laptop(dir),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "unknown fixture '{other}': use one of {}",
                MACHINES.join(", ")
            ),
        )),
    }
}

/// `max_energy_range_uj` of a package zone at ESU 14 (notes §4).
pub const MAX_UJ_ESU14: u64 = 262_143_328_850;
/// `max_energy_range_uj` of a Haswell-server DRAM zone (15.3 µJ unit, notes §8.1).
pub const MAX_UJ_DRAM_QUIRK: u64 = 65_712_999_613;
/// `max_energy_range_uj` of an AMD package zone at ESU 16: 0xFFFFFFFF × 15258 nJ / 1000.
pub const MAX_UJ_ESU16: u64 = 65_532_610_987;

/// Intel two-socket Skylake-X server (family 6, model 0x55): 4 CPUs per socket; powercap
/// `package-N` with a `dram` sub-zone each; perf `energy-pkg` and `energy-ram`; MSRs at ESU 14
/// with the fixed 2^-16 J DRAM unit.
pub fn intel_two_socket_server(dir: &Path) -> io::Result<FixtureTree> {
    let t = FixtureTree::new(dir)?;
    t.cpuinfo(
        "GenuineIntel",
        6,
        0x55,
        "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz",
        8,
    )?;
    let cpus: Vec<(u32, u32, u32)> = (0..8).map(|c| (c, c / 4, c % 4)).collect();
    t.topology(&cpus)?;
    for s in 0..2u32 {
        t.powercap_zone(
            &format!("intel-rapl:{s}"),
            &format!("package-{s}"),
            100_000_000 + s as u64,
            Some(MAX_UJ_ESU14),
        )?;
        t.powercap_zone(
            &format!("intel-rapl:{s}:0"),
            "dram",
            20_000_000 + s as u64,
            Some(MAX_UJ_DRAM_QUIRK),
        )?;
        let cpu = s * 4;
        t.msr(cpu, crate::msr::INTEL_POWER_UNIT, 0x000a_0e03)?;
        t.msr(cpu, crate::msr::INTEL_PKG_ENERGY, 0x0010_0000 + s as u64)?;
        t.msr(cpu, crate::msr::INTEL_DRAM_ENERGY, 0x0002_0000 + s as u64)?;
    }
    t.perf_pmu("0,4", &[("energy-pkg", 2), ("energy-ram", 3)])?;
    Ok(t)
}

/// AMD EPYC 7713 (Zen 3, family 0x19): one socket, two cores with SMT siblings (CPUs 0,1 and
/// 2,3 share cores 0,1); powercap `package-0` only; perf `energy-pkg`; MSRs at ESU 16 with the
/// per-core core-energy register on CPUs 0 and 1.
pub fn amd_epyc(dir: &Path) -> io::Result<FixtureTree> {
    let t = FixtureTree::new(dir)?;
    t.cpuinfo(
        "AuthenticAMD",
        0x19,
        0x01,
        "AMD EPYC 7713 64-Core Processor",
        4,
    )?;
    t.topology(&[(0, 0, 0), (1, 0, 1), (2, 0, 0), (3, 0, 1)])?;
    t.powercap_zone("intel-rapl:0", "package-0", 50_000_000, Some(MAX_UJ_ESU16))?;
    t.perf_pmu("0", &[("energy-pkg", 2)])?;
    for cpu in 0..4 {
        t.msr(cpu, crate::msr::AMD_POWER_UNIT, 0x000a_1003)?;
    }
    t.msr(0, crate::msr::AMD_PKG_ENERGY, 0x0100_0000)?;
    t.msr(0, crate::msr::AMD_CORE_ENERGY, 0x0010_0000)?;
    t.msr(1, crate::msr::AMD_CORE_ENERGY, 0x0020_0000)?;
    // SMT siblings read the same per-core counters as CPUs 0 and 1.
    t.msr(2, crate::msr::AMD_CORE_ENERGY, 0x0010_0000)?;
    t.msr(3, crate::msr::AMD_CORE_ENERGY, 0x0020_0000)?;
    Ok(t)
}

/// Intel Tiger Lake laptop (family 6, model 0x8C): one socket, 4 CPUs; powercap `package-0`
/// with `core`, `uncore` and `dram` sub-zones, `intel-rapl:1` = `psys`, and an
/// `intel-rapl-mmio:0` duplicate of `package-0`; perf with five events; MSRs at ESU 14.
pub fn intel_laptop(dir: &Path) -> io::Result<FixtureTree> {
    let t = FixtureTree::new(dir)?;
    t.cpuinfo(
        "GenuineIntel",
        6,
        0x8C,
        "11th Gen Intel(R) Core(TM) i7-1185G7 @ 3.00GHz",
        4,
    )?;
    t.topology(&[(0, 0, 0), (1, 0, 1), (2, 0, 0), (3, 0, 1)])?;
    t.powercap_zone("intel-rapl:0", "package-0", 30_000_000, Some(MAX_UJ_ESU14))?;
    t.powercap_zone("intel-rapl:0:0", "core", 10_000_000, Some(MAX_UJ_ESU14))?;
    t.powercap_zone("intel-rapl:0:1", "uncore", 1_000_000, Some(MAX_UJ_ESU14))?;
    t.powercap_zone("intel-rapl:0:2", "dram", 2_000_000, Some(MAX_UJ_ESU14))?;
    t.powercap_zone("intel-rapl:1", "psys", 90_000_000, Some(MAX_UJ_ESU14))?;
    t.powercap_zone(
        "intel-rapl-mmio:0",
        "package-0",
        30_000_000,
        Some(MAX_UJ_ESU14),
    )?;
    t.perf_pmu(
        "0",
        &[
            ("energy-cores", 1),
            ("energy-pkg", 2),
            ("energy-ram", 3),
            ("energy-gpu", 4),
            ("energy-psys", 5),
        ],
    )?;
    t.msr(0, crate::msr::INTEL_POWER_UNIT, 0x000a_0e03)?;
    t.msr(0, crate::msr::INTEL_PKG_ENERGY, 0x0030_0000)?;
    t.msr(0, crate::msr::INTEL_PP0_ENERGY, 0x0010_0000)?;
    t.msr(0, crate::msr::INTEL_PP1_ENERGY, 0x0001_0000)?;
    t.msr(0, crate::msr::INTEL_PLATFORM_ENERGY, 0x0090_0000)?;
    Ok(t)
}
