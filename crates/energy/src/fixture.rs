//! Fake `/sys`, `/proc` and `/dev` trees that stand in for RAPL hardware.
//!
//! Point `WATTIO_ROOT` at a tree built here and every mechanism reads it instead of the machine:
//! powercap zones are plain files, MSR devices are sparse files holding 8-byte little-endian
//! values (register `r` at offset `8·r`, read with `pread` like `/dev/cpu/N/msr`; see
//! the MSR mechanism), and the
//! perf PMU description is the sysfs text (its PMU type is deliberately one no kernel has, so
//! `perf_event_open` fails and says why; perf reads are tested with pipes instead).
//!
//! Three machines are provided, modelled on the kernel's layouts (the perf `power` PMU in sysfs, `Documentation/ABI/testing/sysfs-bus-event_source-devices-power` and `arch/x86/events/rapl.c`; powercap, `Documentation/power/powercap/powercap.rst`; the RAPL MSRs of the Intel SDM vol. 4 and AMD's PPR for family 19h):
//! an Intel two-socket Skylake-X server (DRAM unit quirk), an AMD EPYC (Zen 3, per-core core
//! energy, SMT siblings) and an Intel laptop (Tiger Lake: core, uncore, psys, an
//! `intel-rapl-mmio` duplicate).
//!
//! A public namespace (`wattio_energy::fixture::…`) rather than items at the crate root: these
//! are test doubles, not part of measuring energy, and their names (`build`, `amd_epyc`,
//! `MACHINES`) only read well under `fixture::`.

/// RAPL model-specific register addresses (Intel SDM vol. 4; AMD PPR for family 19h), for
/// [`FixtureTree::msr`].
pub use crate::msr::{
    AMD_CORE_ENERGY, AMD_PKG_ENERGY, AMD_POWER_UNIT, INTEL_DRAM_ENERGY, INTEL_PKG_ENERGY,
    INTEL_PLATFORM_ENERGY, INTEL_POWER_UNIT, INTEL_PP0_ENERGY, INTEL_PP1_ENERGY,
};
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

    /// `/proc/modules` listing `names` as loaded (the RAPL drivers a real machine has; Scaphandre
    /// reads this file and panics where it is missing).
    pub fn proc_modules(&self, names: &[&str]) -> io::Result<()> {
        let lines: String = names
            .iter()
            .map(|n| format!("{n} 16384 0 - Live 0x0000000000000000\n"))
            .collect();
        self.write("/proc/modules", &lines)
    }

    /// A powercap zone `id` (e.g. `intel-rapl:0:1`) named `name`, with `max_energy_range_uj`
    /// unless `max_uj` is `None`.
    ///
    /// Laid out as sysfs does (`Documentation/power/powercap/powercap.rst`): the zone's directory
    /// is under `/sys/devices/virtual/powercap/<control type>/`, inside its parent zone's, and
    /// `/sys/class/powercap/<id>` (and `<control type>`) are relative symlinks to them, so tools
    /// that walk either path, or `/sys/class/powercap/intel-rapl/intel-rapl:N`, find it. The
    /// control type's `subsystem` link is left out: it makes the tree a cycle for naive walkers.
    pub fn powercap_zone(
        &self,
        id: &str,
        name: &str,
        energy_uj: u64,
        max_uj: Option<u64>,
    ) -> io::Result<()> {
        let parts: Vec<&str> = id.split(':').collect();
        let control = parts[0];
        let mut device = format!("devices/virtual/powercap/{control}");
        self.class_link(control, &device)?;
        self.write(&format!("/sys/{device}/enabled"), "1\n")?;
        for n in 1..parts.len() {
            device.push('/');
            device.push_str(&parts[..=n].join(":"));
        }
        self.class_link(id, &device)?;
        let d = format!("/sys/{device}");
        self.write(&format!("{d}/name"), &format!("{name}\n"))?;
        self.write(&format!("{d}/enabled"), "1\n")?;
        self.set_energy_uj(id, energy_uj)?;
        if let Some(m) = max_uj {
            self.write(&format!("{d}/max_energy_range_uj"), &format!("{m}\n"))?;
        }
        Ok(())
    }

    /// `/sys/class/powercap/<entry>` as a relative symlink to `/sys/<device>` (kept if present).
    fn class_link(&self, entry: &str, device: &str) -> io::Result<()> {
        let link = self.path(&format!("/sys/class/powercap/{entry}"));
        if link.symlink_metadata().is_ok() {
            return Ok(());
        }
        fs::create_dir_all(self.path(&format!("/sys/{device}")))?;
        if let Some(d) = link.parent() {
            fs::create_dir_all(d)?;
        }
        std::os::unix::fs::symlink(format!("../../{device}"), link)
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
        // How `event=0x02` maps onto perf_event_attr.config; perf(1) refuses the event without it.
        self.write(&format!("{d}/format/event"), "config:0-7\n")?;
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

/// Keeps CPUs busy, one spinning thread pinned to each, until dropped.
///
/// For tests of timer-driven readings on the [`FixtureTree::standin_power_pmu`]: on VMs an idle
/// vCPU's timer interrupts can arrive tens of milliseconds late (the hypervisor coalesces them;
/// on our 2-vCPU VMs a 200 Hz `cpu-clock` timer ticked every 25 ms on an idle vCPU and on time on
/// a busy one), which tests the hypervisor rather than wattio.
pub struct BusyCpus {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyCpus {
    pub fn new(cpus: &[u32]) -> BusyCpus {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let threads = cpus
            .iter()
            .map(|&cpu| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET and sched_setaffinity get valid
                    // pointers to it (0 = this thread).
                    unsafe {
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        libc::CPU_SET(cpu as usize, &mut set);
                        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                    }
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        BusyCpus { stop, threads }
    }
}

impl Drop for BusyCpus {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
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

/// The kernel modules of a machine with RAPL: powercap (`intel_rapl_msr`, `intel_rapl_common`,
/// which AMD uses too), the perf `power` PMU (`rapl`) and the MSR device (`msr`).
const RAPL_MODULES: &[&str] = &["intel_rapl_msr", "intel_rapl_common", "rapl", "msr"];

/// `max_energy_range_uj` of a package zone at ESU 14: 0xFFFFFFFF units of 2^-14 J in µJ
/// (`MSR_RAPL_POWER_UNIT`, Intel SDM vol. 3B §15.10.1; `drivers/powercap/intel_rapl_common.c`).
pub const MAX_UJ_ESU14: u64 = 262_143_328_850;
/// `max_energy_range_uj` of a Haswell-server DRAM zone: 0xFFFFFFFF units of 15.3 µJ (the kernel's
/// `dram_domain_energy_unit` of `rapl_defaults_hsw_server`; Intel Xeon E5 v3 datasheet vol. 2).
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
    t.proc_modules(RAPL_MODULES)?;
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
    t.proc_modules(RAPL_MODULES)?;
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
    t.proc_modules(RAPL_MODULES)?;
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

/// The largest `max_energy_range_uj` a ticking powercap zone may have. With at most 7 digits, a
/// zone's `energy_uj` (zero-padded to a fixed width, then a newline) is 8 bytes, rewritten in
/// place by one aligned 8-byte `pwrite`, which a concurrent `read` sees whole. A longer in-place
/// rewrite of a tmpfs or page-cache file can be seen half old, half new (the kernel copies in
/// 8- or 16-byte chunks with no lock against readers): measured here, 2 torn reads of a 21-byte
/// value in 5 million. Real sysfs never tears, since it formats the value anew for each read.
pub const TICK_MAX_ENERGY_RANGE_UJ: u64 = 9_999_999;

/// How a [`Ticker`] advances a fixture's counters.
#[derive(Debug, Clone)]
pub struct TickConfig {
    /// Power of every ticking counter, in watts (each counter advances by this much).
    pub watts: f64,
    /// Time between two rewrites of the counters.
    pub interval: std::time::Duration,
    /// Which counters tick: powercap zones of these domains, and (for `Package`) the package
    /// energy MSR of each CPU stand-in that holds one. Other counters stay still.
    pub domains: Vec<crate::Domain>,
    /// Written into each ticking zone's `max_energy_range_uj`; its `energy_uj` wraps to 0 after
    /// it, as the kernel's does. At most [`TICK_MAX_ENERGY_RANGE_UJ`].
    pub max_energy_range_uj: u64,
    /// When set, written as the energy status unit (bits 12:8) of every RAPL unit MSR stand-in:
    /// the energy unit becomes 2^-N J and the 32-bit counter wraps after 2^(32-N) J.
    pub msr_esu: Option<u32>,
    /// Stop after this long (else when [`Ticker::run`]'s cancel flag is set).
    pub duration: Option<std::time::Duration>,
}

impl Default for TickConfig {
    fn default() -> Self {
        TickConfig {
            watts: 10.0,
            interval: std::time::Duration::from_millis(1),
            domains: vec![crate::Domain::Package],
            max_energy_range_uj: TICK_MAX_ENERGY_RANGE_UJ,
            msr_esu: None,
            duration: None,
        }
    }
}

/// How a ticking counter is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum TickedKind {
    /// A powercap `energy_uj` file: decimal microjoules, wrapping after `max_energy_range_uj`.
    Powercap {
        /// The zone's `max_energy_range_uj`.
        max_energy_range_uj: u64,
    },
    /// A RAPL energy MSR stand-in: the low 32 bits count units of 2^-esu J.
    Msr {
        /// Register number.
        register: u64,
        /// Energy status unit of the CPU's unit register.
        esu: u32,
    },
}

/// One counter a [`Ticker`] advances, and what it did to it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TickedCounter {
    /// A short name, e.g. `powercap intel-rapl:0 (package-0)` or `msr cpu0 0xc001029b`.
    pub name: String,
    /// The file rewritten.
    pub path: PathBuf,
    /// Its encoding.
    #[serde(flatten)]
    pub kind: TickedKind,
    /// Raw value when ticking started (the fixture's value, reduced into the counter's range).
    pub start_raw: u64,
    /// Raw value last written.
    pub raw: u64,
    /// Times the raw value wrapped.
    pub wraps: u64,
    /// Energy the counter advanced by (what a perfect reader reports), in joules.
    pub energy_j: f64,
}

impl TickedCounter {
    /// The raw value and the number of wraps after `energy_j` joules (floored to the counter's
    /// unit), and the energy that raw value stands for.
    fn advance(&self, energy_j: f64) -> (u64, u64, f64) {
        match self.kind {
            TickedKind::Powercap {
                max_energy_range_uj,
            } => {
                let units = (energy_j * 1e6).floor() as u64;
                let total = self.start_raw + units;
                let range = max_energy_range_uj + 1;
                (total % range, total / range, units as f64 * 1e-6)
            }
            TickedKind::Msr { esu, .. } => {
                let scale = (1u64 << esu) as f64;
                let units = (energy_j * scale).floor() as u64;
                let total = self.start_raw + units;
                (total & 0xFFFF_FFFF, total >> 32, units as f64 / scale)
            }
        }
    }

    fn encode(&self, raw: u64) -> Vec<u8> {
        match self.kind {
            TickedKind::Powercap {
                max_energy_range_uj,
            } => {
                let width = max_energy_range_uj.to_string().len();
                format!("{raw:0width$}\n").into_bytes()
            }
            TickedKind::Msr { .. } => raw.to_le_bytes().to_vec(),
        }
    }

    fn offset(&self) -> u64 {
        match self.kind {
            TickedKind::Powercap { .. } => 0,
            TickedKind::Msr { register, .. } => crate::msr::stand_in_offset(register),
        }
    }
}

/// What a ticker run did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TickSummary {
    /// Every counter advanced.
    pub counters: Vec<TickedCounter>,
    /// Watts of each counter.
    pub watts: f64,
    /// Wall time from the first to the last rewrite, seconds.
    pub seconds: f64,
    /// Rewrites of all counters (one per interval, fewer when the ticker was late).
    pub ticks: u64,
    /// The longest time past a deadline before the counters were rewritten, seconds.
    pub max_late_s: f64,
}

/// Live RAPL counters in a fixture tree: rewrites each ticking counter at a fixed interval so that
/// it advances at known watts and wraps at its limit, as hardware counters do.
///
/// Each value is computed from the time elapsed since the start (not from a tick count), so a late
/// tick never loses energy: what a reader sees at time `t` stands for `watts × (t − start)` minus
/// at most one interval plus the ticker's lateness. Files are rewritten in place (never renamed),
/// so readers that keep the file open, as wattio does, see each new value.
#[derive(Debug)]
pub struct Ticker {
    cfg: TickConfig,
    counters: Vec<TickedCounter>,
    files: Vec<fs::File>,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// The names in directory `dir`, sorted; none when it is missing.
fn entry_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The domain of a powercap zone from its `name` (`package-N`, `package-N-die-M`, `core`, ...).
fn zone_domain(name: &str) -> Option<crate::Domain> {
    if name.starts_with("package") {
        Some(crate::Domain::Package)
    } else {
        name.parse().ok()
    }
}

impl Ticker {
    /// Finds the counters of `cfg.domains` in `tree`, writes each ticking zone's
    /// `max_energy_range_uj` (and the MSR energy unit when asked) and puts every counter in its
    /// fixed-width form. Fails when the configuration cannot give a faithful counter, or when
    /// nothing would tick.
    pub fn prepare(tree: &FixtureTree, cfg: &TickConfig) -> io::Result<Ticker> {
        if !(cfg.watts.is_finite() && cfg.watts > 0.0 && cfg.watts <= 1e6) {
            return Err(invalid(format!(
                "watts must be a positive number up to 1e6 (got {})",
                cfg.watts
            )));
        }
        let interval_s = cfg.interval.as_secs_f64();
        if !(1e-4..=10.0).contains(&interval_s) {
            return Err(invalid(format!(
                "the tick interval must be between 0.1 ms and 10 s (got {interval_s} s)"
            )));
        }
        let max = cfg.max_energy_range_uj;
        if max == 0 || max > TICK_MAX_ENERGY_RANGE_UJ {
            return Err(invalid(format!(
                "max_energy_range_uj must be between 1 and {TICK_MAX_ENERGY_RANGE_UJ} (got {max}): a longer energy_uj cannot be rewritten in one 8-byte write that readers see whole"
            )));
        }
        if let Some(esu) = cfg.msr_esu {
            if esu > 31 {
                return Err(invalid(format!(
                    "the MSR energy status unit is a 5-bit field, 0 to 31 (got {esu})"
                )));
            }
        }
        let per_tick_uj = cfg.watts * interval_s * 1e6;
        if per_tick_uj >= max as f64 {
            return Err(invalid(format!(
                "at {} W a {interval_s} s tick is {per_tick_uj:.0} µJ, more than max_energy_range_uj {max}: raise it or shorten the interval",
                cfg.watts
            )));
        }
        let mut counters = Vec::new();
        Self::powercap_counters(tree, cfg, &mut counters)?;
        if cfg.domains.contains(&crate::Domain::Package) {
            Self::msr_counters(tree, cfg, &mut counters)?;
        }
        if counters.is_empty() {
            return Err(invalid(format!(
                "no powercap zone or package MSR of the chosen domains under {}: build one with `wattio fixture MACHINE DIR`",
                tree.root().display()
            )));
        }
        let mut files = Vec::with_capacity(counters.len());
        for c in &counters {
            let f = OpenOptions::new().read(true).write(true).open(&c.path)?;
            if let TickedKind::Powercap { .. } = c.kind {
                // The one moment a reader could see a short file: before anything reads it.
                f.set_len(0)?;
            }
            f.write_all_at(&c.encode(c.start_raw), c.offset())?;
            files.push(f);
        }
        Ok(Ticker {
            cfg: cfg.clone(),
            counters,
            files,
        })
    }

    fn powercap_counters(
        tree: &FixtureTree,
        cfg: &TickConfig,
        out: &mut Vec<TickedCounter>,
    ) -> io::Result<()> {
        let base = tree.path("/sys/class/powercap");
        let ids = entry_names(&base).into_iter().filter(|id| id.contains(':'));
        let max = cfg.max_energy_range_uj;
        for id in ids {
            let dir = base.join(&id);
            let Ok(name) = fs::read_to_string(dir.join("name")) else {
                continue;
            };
            let name = name.trim().to_string();
            if !zone_domain(&name).is_some_and(|d| cfg.domains.contains(&d)) {
                continue;
            }
            let path = dir.join("energy_uj");
            let current = fs::read_to_string(&path)?;
            let current: u64 = current.trim().parse().map_err(|_| {
                invalid(format!(
                    "{}: not a number of microjoules ({:?})",
                    path.display(),
                    current.trim()
                ))
            })?;
            fs::write(dir.join("max_energy_range_uj"), format!("{max}\n"))?;
            out.push(TickedCounter {
                name: format!("powercap {id} ({name})"),
                path,
                kind: TickedKind::Powercap {
                    max_energy_range_uj: max,
                },
                start_raw: current % (max + 1),
                raw: current % (max + 1),
                wraps: 0,
                energy_j: 0.0,
            });
        }
        Ok(())
    }

    fn msr_counters(
        tree: &FixtureTree,
        cfg: &TickConfig,
        out: &mut Vec<TickedCounter>,
    ) -> io::Result<()> {
        use crate::msr::{AMD_PKG_ENERGY, AMD_POWER_UNIT, INTEL_PKG_ENERGY, INTEL_POWER_UNIT};
        let base = tree.path("/dev/cpu");
        let mut cpus: Vec<u32> = entry_names(&base)
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        cpus.sort_unstable();
        let read = |f: &fs::File, register: u64| -> io::Result<Option<u64>> {
            let mut b = [0u8; 8];
            let n = f.read_at(&mut b, crate::msr::stand_in_offset(register))?;
            Ok((n == 8).then(|| u64::from_le_bytes(b)).filter(|&v| v != 0))
        };
        for cpu in cpus {
            let path = base.join(cpu.to_string()).join("msr");
            let Ok(f) = OpenOptions::new().read(true).write(true).open(&path) else {
                continue;
            };
            for (energy, unit) in [
                (INTEL_PKG_ENERGY, INTEL_POWER_UNIT),
                (AMD_PKG_ENERGY, AMD_POWER_UNIT),
            ] {
                let Some(value) = read(&f, energy)? else {
                    continue;
                };
                let Some(mut unit_value) = read(&f, unit)? else {
                    return Err(invalid(format!(
                        "{}: holds the energy register {energy:#x} but not its unit register {unit:#x}",
                        path.display()
                    )));
                };
                if let Some(esu) = cfg.msr_esu {
                    unit_value = (unit_value & !0x1F00) | (u64::from(esu) << 8);
                    f.write_all_at(&unit_value.to_le_bytes(), crate::msr::stand_in_offset(unit))?;
                }
                let raw = value & 0xFFFF_FFFF;
                out.push(TickedCounter {
                    name: format!("msr cpu{cpu} {energy:#x}"),
                    path: path.clone(),
                    kind: TickedKind::Msr {
                        register: energy,
                        esu: crate::msr::esu(unit_value),
                    },
                    start_raw: raw,
                    raw,
                    wraps: 0,
                    energy_j: 0.0,
                });
            }
        }
        Ok(())
    }

    /// The counters this ticker advances.
    pub fn counters(&self) -> &[TickedCounter] {
        &self.counters
    }

    /// Rewrites the counters every interval until `cancel` is set or the configured duration
    /// has passed (a cancel wakes the wait for the next tick, so it ends at once). When `log` is given, writes CSV rows `unix_ns,elapsed_s,counter,energy_j,raw,wraps`
    /// (`energy_j`: the energy the written raw value stands for since the start) at the start,
    /// at every wrap of a counter, once a second and at the end: the known true energy.
    pub fn run(
        mut self,
        cancel: &wattio_progress::Cancel,
        mut log: Option<&mut dyn io::Write>,
    ) -> io::Result<TickSummary> {
        use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
        let interval = self.cfg.interval;
        let start = Instant::now();
        let unix_start = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        if let Some(w) = log.as_deref_mut() {
            writeln!(w, "unix_ns,elapsed_s,counter,energy_j,raw,wraps")?;
        }
        let mut ticks = 0u64;
        let mut max_late = Duration::ZERO;
        let mut next_log = Duration::ZERO;
        let mut k: u32 = 0;
        let mut elapsed = Duration::ZERO;
        loop {
            let last = cancel.is_set() || self.cfg.duration.is_some_and(|d| elapsed >= d);
            let mut logged = false;
            let log_due = last || elapsed >= next_log;
            for (c, f) in self.counters.iter_mut().zip(&self.files) {
                let (raw, wraps, energy_j) = c.advance(self.cfg.watts * elapsed.as_secs_f64());
                if raw != c.raw || ticks == 0 {
                    f.write_all_at(&c.encode(raw), c.offset())?;
                }
                let wrapped = wraps != c.wraps;
                (c.raw, c.wraps, c.energy_j) = (raw, wraps, energy_j);
                if let Some(w) = log.as_deref_mut() {
                    if log_due || wrapped {
                        let ns = (unix_start + elapsed).as_nanos();
                        writeln!(
                            w,
                            "{ns},{:.9},{},{energy_j:.6},{raw},{wraps}",
                            elapsed.as_secs_f64(),
                            c.name
                        )?;
                        logged = true;
                    }
                }
            }
            ticks += 1;
            if log_due {
                next_log = elapsed + Duration::from_secs(1);
            }
            if logged {
                if let Some(w) = log.as_deref_mut() {
                    w.flush()?;
                }
            }
            if last {
                break;
            }
            // The next deadline on the fixed grid; a tick missed by more than an interval is
            // skipped rather than caught up (the value comes from the clock anyway).
            let now = start.elapsed();
            k = k.max((now.as_nanos() / interval.as_nanos().max(1)) as u32) + 1;
            let mut deadline = interval * k;
            if let Some(d) = self.cfg.duration {
                deadline = deadline.min(d);
            }
            if deadline > now {
                cancel.sleep(deadline - now);
            }
            elapsed = start.elapsed();
            max_late = max_late.max(elapsed.saturating_sub(deadline));
        }
        Ok(TickSummary {
            counters: self.counters,
            watts: self.cfg.watts,
            seconds: elapsed.as_secs_f64(),
            ticks,
            max_late_s: max_late.as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Domain;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    use wattio_progress::Cancel;

    fn unix_ns() -> u128 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    }

    /// Reads `read()` every `every` while `running`, as a sampler would: (unix ns after the
    /// read, raw value).
    fn sample(
        running: Arc<AtomicBool>,
        every: Duration,
        read: impl Fn() -> u64 + Send + 'static,
    ) -> std::thread::JoinHandle<Vec<(u128, u64)>> {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            while running.load(Ordering::Relaxed) {
                let v = read();
                out.push((unix_ns(), v));
                std::thread::sleep(every);
            }
            out
        })
    }

    /// Cumulative energy (in counter units) seen by a reader that corrects one wrap per interval.
    fn accumulate(samples: &[(u128, u64)], modulus: u64) -> (Vec<(u128, u64)>, u64) {
        let mut total = 0;
        let mut wraps = 0;
        let mut out = vec![(samples[0].0, 0)];
        for w in samples.windows(2) {
            let (old, new) = (w[0].1, w[1].1);
            if new < old {
                wraps += 1;
                total += modulus - old + new;
            } else {
                total += new - old;
            }
            out.push((w[1].0, total));
        }
        (out, wraps)
    }

    #[test]
    fn powercap_zones_are_laid_out_as_sysfs() {
        let d = tempfile::tempdir().unwrap();
        let t = intel_laptop(d.path()).unwrap();
        let class = t.path("/sys/class/powercap/intel-rapl:0:1");
        assert_eq!(
            fs::read_link(&class).unwrap(),
            PathBuf::from("../../devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:1")
        );
        let nested = "/sys/devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:1/name";
        assert_eq!(fs::read_to_string(t.path(nested)).unwrap(), "uncore\n");
        // The control type lists its zones, as pyJoules and CodeCarbon read them.
        let via_control = "/sys/class/powercap/intel-rapl/intel-rapl:0/name";
        assert_eq!(
            fs::read_to_string(t.path(via_control)).unwrap(),
            "package-0\n"
        );
        let mmio = fs::read_link(t.path("/sys/class/powercap/intel-rapl-mmio:0")).unwrap();
        assert_eq!(
            mmio,
            PathBuf::from("../../devices/virtual/powercap/intel-rapl-mmio/intel-rapl-mmio:0")
        );
    }

    #[test]
    fn powercap_zones_tick_at_known_watts_and_wrap_at_their_max() {
        let d = tempfile::tempdir().unwrap();
        let t = amd_epyc(d.path()).unwrap();
        let watts = 10.0;
        let max = 999_999; // 1 J: a wrap every 100 ms.
        let cfg = TickConfig {
            watts,
            max_energy_range_uj: max,
            duration: Some(Duration::from_millis(650)),
            ..TickConfig::default()
        };
        let ticker = Ticker::prepare(&t, &cfg).unwrap();
        assert_eq!(ticker.counters().len(), 2, "{:?}", ticker.counters());
        let zone = t.path("/sys/class/powercap/intel-rapl:0");
        assert_eq!(
            fs::read_to_string(zone.join("max_energy_range_uj")).unwrap(),
            "999999\n"
        );
        // The fixture's 50 J start value, reduced into the 1 J range, in 6 digits.
        assert_eq!(
            fs::read_to_string(zone.join("energy_uj")).unwrap(),
            "000000\n"
        );
        let running = Arc::new(AtomicBool::new(true));
        let file = fs::File::open(zone.join("energy_uj")).unwrap();
        let reader = sample(Arc::clone(&running), Duration::from_millis(1), move || {
            let mut b = [0u8; 32];
            let n = file.read_at(&mut b, 0).unwrap();
            std::str::from_utf8(&b[..n])
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        });
        let mut log = Vec::new();
        let summary = ticker
            .run(
                &Cancel::new().unwrap(),
                Some(&mut log as &mut dyn io::Write),
            )
            .unwrap();
        running.store(false, Ordering::Relaxed);
        let samples = reader.join().unwrap();
        let (seen, wraps) = accumulate(&samples, max + 1);
        assert!(wraps >= 5, "only {wraps} wraps seen");
        let first = seen[0].0;
        for &(at, uj) in &seen {
            // What the counter should have advanced by between the first read and this one.
            let span_s = (at - first) as f64 * 1e-9;
            let expected_uj = watts * span_s * 1e6;
            let lag_s = (expected_uj - uj as f64) / watts * 1e-6;
            // A read shows a value written before it, so it never runs ahead of the clock by more
            // than the first read's own staleness; and it trails the clock by the tick interval
            // plus the ticker's lateness.
            assert!(
                (-0.02..0.08).contains(&lag_s),
                "at {span_s:.3} s: read {uj} µJ, expected {expected_uj:.0} µJ"
            );
        }
        let c = &summary.counters[0];
        assert!(c.name.contains("intel-rapl:0"), "{}", c.name);
        assert_eq!(
            c.wraps,
            (c.start_raw + (c.energy_j * 1e6).round() as u64) / (max + 1)
        );
        assert!(c.wraps >= 6, "{c:?}");
        assert!(
            (c.energy_j - watts * summary.seconds).abs() < 1e-5,
            "{} J in {} s",
            c.energy_j,
            summary.seconds
        );
        // The log's rows mark every wrap and say how much energy the written values stand for.
        let text = String::from_utf8(log).unwrap();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect())
            .filter(|r: &Vec<&str>| r[2] == c.name)
            .collect();
        let last = rows.last().unwrap();
        assert_eq!(last[5].parse::<u64>().unwrap(), c.wraps);
        let (elapsed, energy): (f64, f64) = (last[1].parse().unwrap(), last[3].parse().unwrap());
        assert!((energy - watts * elapsed).abs() < 2e-6, "{last:?}");
        assert!(rows.len() as u64 >= c.wraps + 2);
    }

    #[test]
    fn package_msr_stand_ins_tick_in_the_chosen_unit_and_wrap_at_32_bits() {
        let d = tempfile::tempdir().unwrap();
        let t = amd_epyc(d.path()).unwrap();
        let watts = 100.0;
        let cfg = TickConfig {
            watts,
            domains: vec![Domain::Package],
            msr_esu: Some(28), // 2^32 units of 2^-28 J: a wrap every 16 J, 160 ms.
            duration: Some(Duration::from_millis(400)),
            ..TickConfig::default()
        };
        let ticker = Ticker::prepare(&t, &cfg).unwrap();
        let msr = ticker
            .counters()
            .iter()
            .find(|c| c.name.starts_with("msr"))
            .unwrap()
            .clone();
        assert_eq!(msr.name, "msr cpu0 0xc001029b");
        // Only CPU 0 holds the package register; the per-core registers stay still.
        assert_eq!(ticker.counters().len(), 2);
        let file =
            crate::msr::MsrFile::new(fs::File::open(t.path("/dev/cpu/0/msr")).unwrap()).unwrap();
        // The unit register keeps its power and time units, with the new energy unit.
        assert_eq!(file.read(crate::msr::AMD_POWER_UNIT).unwrap(), 0x000a_1c03);
        let running = Arc::new(AtomicBool::new(true));
        let reader = sample(Arc::clone(&running), Duration::from_millis(2), move || {
            file.read(crate::msr::AMD_PKG_ENERGY).unwrap()
        });
        let summary = ticker.run(&Cancel::new().unwrap(), None).unwrap();
        running.store(false, Ordering::Relaxed);
        let samples = reader.join().unwrap();
        assert!(samples.iter().all(|s| s.1 <= u64::from(u32::MAX)));
        let (seen, wraps) = accumulate(&samples, 1 << 32);
        assert!(wraps >= 2, "{wraps} wraps");
        let joules = seen.last().unwrap().1 as f64 / f64::from(1u32 << 28);
        let span_s = (seen.last().unwrap().0 - seen[0].0) as f64 * 1e-9;
        assert!(
            (joules - watts * span_s).abs() < watts * 0.05,
            "{joules} J over {span_s} s"
        );
        let c = summary
            .counters
            .iter()
            .find(|c| c.name == msr.name)
            .unwrap();
        assert_eq!(c.start_raw, 0x0100_0000);
        assert_eq!(
            c.raw,
            (c.start_raw + (c.energy_j * f64::from(1u32 << 28)).round() as u64) & 0xFFFF_FFFF
        );
        assert!(c.wraps >= 2);
    }

    #[test]
    fn concurrent_reads_always_see_a_whole_value() {
        let d = tempfile::tempdir().unwrap();
        let t = amd_epyc(d.path()).unwrap();
        // 0.1 ms ticks at 100 W: 10 mJ a tick, so the low digits change on every write and the
        // high ones carry several times a second.
        let watts = 100.0;
        let cfg = TickConfig {
            watts,
            interval: Duration::from_micros(100),
            duration: Some(Duration::from_millis(500)),
            ..TickConfig::default()
        };
        let ticker = Ticker::prepare(&t, &cfg).unwrap();
        let running = Arc::new(AtomicBool::new(true));
        let path = t.path("/sys/class/powercap/intel-rapl:0/energy_uj");
        let flag = Arc::clone(&running);
        let reader = std::thread::spawn(move || {
            let file = fs::File::open(path).unwrap();
            let mut b = [0u8; 32];
            let (mut reads, mut checked) = (0u64, 0u64);
            let mut last: Option<(u64, std::time::Instant)> = None;
            while flag.load(Ordering::Relaxed) {
                let n = file.read_at(&mut b, 0).unwrap();
                let now = std::time::Instant::now();
                assert_eq!(n, 8, "{:?}", &b[..n]);
                assert_eq!(b[7], b'\n');
                let v: u64 = std::str::from_utf8(&b[..7]).unwrap().parse().unwrap();
                if let Some((l, at)) = last {
                    // Forward distance modulo the range, against the time since the earlier
                    // value was first seen plus 20 ms of its staleness: a value half old, half
                    // new would jump by up to the whole range, or back. Timing from the first
                    // sight of the earlier value, not the last read of it, covers a ticker that
                    // was descheduled (its next value makes up the time it lost). Reads far
                    // apart cannot tell a wrap from a jump, so they are not judged.
                    let dt = (now - at).as_secs_f64();
                    if dt < 0.02 {
                        let range = TICK_MAX_ENERGY_RANGE_UJ + 1;
                        let step = (v + range - l) % range;
                        assert!(step as f64 <= watts * (dt + 0.02) * 1e6, "{l} then {v}");
                        checked += 1;
                    }
                }
                last = match last {
                    Some((l, first_seen)) if l == v => Some((l, first_seen)),
                    _ => Some((v, now)),
                };
                reads += 1;
            }
            (reads, checked)
        });
        ticker.run(&Cancel::new().unwrap(), None).unwrap();
        running.store(false, Ordering::Relaxed);
        let (reads, checked) = reader.join().unwrap();
        assert!(
            reads > 1000 && checked > reads / 2,
            "{reads} reads, {checked} checked"
        );
    }

    #[test]
    fn a_cancel_ends_a_ticker_without_a_duration_mid_interval_with_a_final_log_row() {
        let d = tempfile::tempdir().unwrap();
        let t = amd_epyc(d.path()).unwrap();
        // A 10 s interval: only a cancel that wakes the sleep ends the run within it.
        let cfg = TickConfig {
            watts: 0.5,
            interval: Duration::from_secs(10),
            ..TickConfig::default()
        };
        let ticker = Ticker::prepare(&t, &cfg).unwrap();
        let n = ticker.counters().len();
        let cancel = Arc::new(Cancel::new().unwrap());
        let c = Arc::clone(&cancel);
        let setter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            c.set();
        });
        let t0 = std::time::Instant::now();
        let mut log = Vec::new();
        let summary = ticker
            .run(&cancel, Some(&mut log as &mut dyn io::Write))
            .unwrap();
        setter.join().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(summary.ticks, 2, "the first rewrite and the last");
        // Header, the start rows and the end rows, one per counter each.
        let log = String::from_utf8(log).unwrap();
        assert_eq!(log.lines().count(), 1 + 2 * n, "{log}");
        let last = log.lines().last().unwrap();
        let elapsed_s: f64 = last.split(',').nth(1).unwrap().parse().unwrap();
        assert!((0.25..5.0).contains(&elapsed_s), "{last}");
    }

    #[test]
    fn impossible_configurations_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let t = amd_epyc(dir.path()).unwrap();
        let d = TickConfig::default;
        let cases = [
            (
                TickConfig {
                    max_energy_range_uj: 262_143_328_850,
                    ..d()
                },
                "8-byte write",
            ),
            (
                TickConfig { watts: 0.0, ..d() },
                "watts must be a positive number",
            ),
            (
                TickConfig {
                    interval: Duration::from_micros(10),
                    ..d()
                },
                "between 0.1 ms and 10 s",
            ),
            (
                TickConfig {
                    watts: 20_000.0,
                    ..d()
                },
                "raise it or shorten the interval",
            ),
            (
                TickConfig {
                    msr_esu: Some(32),
                    ..d()
                },
                "5-bit",
            ),
            (
                TickConfig {
                    domains: vec![Domain::Dram],
                    ..d()
                },
                "no powercap zone or package MSR",
            ),
        ];
        for (cfg, expected) in cases {
            let e = Ticker::prepare(&t, &cfg).unwrap_err().to_string();
            assert!(e.contains(expected), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
