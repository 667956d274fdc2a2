//! RAPL through the perf-events `power` PMU.

use crate::cpu;
use crate::error::EnergyError;
use crate::root::SysRoot;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance, Wrap};
use crate::Source;
use std::fs::{self, File};
use std::io::Read;
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};

/// One `energy-*` event of the PMU.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfEvent {
    /// `energy-pkg`.
    pub name: String,
    pub domain: Domain,
    /// The `event=` code (`perf_event_attr.config`).
    pub code: u64,
    /// Joules per count.
    pub scale: f64,
}

/// What the `power` PMU advertises.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerPmu {
    pub dir: PathBuf,
    pub pmu_type: u32,
    /// (cpu, package) pairs from `cpumask`.
    pub cpus: Vec<(u32, u32)>,
    pub events: Vec<PerfEvent>,
    /// Events skipped and why.
    pub notes: Vec<String>,
}

fn domain_of_event(name: &str) -> Option<Domain> {
    match name {
        "energy-pkg" => Some(Domain::Package),
        "energy-cores" => Some(Domain::Core),
        "energy-gpu" => Some(Domain::Uncore),
        "energy-ram" => Some(Domain::Dram),
        "energy-psys" => Some(Domain::Psys),
        _ => None,
    }
}

fn parse_event_code(s: &str) -> Option<u64> {
    let v = s.trim().strip_prefix("event=")?;
    let v = v.split(',').next()?;
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

fn read_file(path: &Path, fix: &str) -> Result<String, EnergyError> {
    fs::read_to_string(path).map_err(|e| EnergyError::from_io(path, e, fix))
}

/// The fix printed when the PMU is absent.
pub(crate) const MISSING_FIX: &str = "this kernel exposes no RAPL perf PMU (VM, or the rapl module is not loaded: `sudo modprobe rapl`); use --source powercap or msr";

/// What to do when the kernel refuses BPF (the eBPF mechanism's counters are perf events too).
pub(crate) fn bpf_permission_fix(root: &SysRoot) -> String {
    let unpriv = std::fs::read_to_string(root.path("/proc/sys/kernel/unprivileged_bpf_disabled"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "loading BPF programs needs CAP_BPF and CAP_PERFMON (Linux >= 5.8; CAP_SYS_ADMIN before): run as root or `sudo setcap cap_bpf,cap_perfmon=ep $(command -v wattio)` (kernel.unprivileged_bpf_disabled is {unpriv}: {})",
        match unpriv.as_str() {
            "0" => "unprivileged BPF is allowed, but perf_event programs still need CAP_PERFMON",
            "1" => "unprivileged BPF is off until reboot; capabilities are the only way",
            "2" => "unprivileged BPF is off; an administrator may set it to 0, but capabilities are the safer way",
            _ => "capabilities are the way",
        }
    )
}

/// The fix printed when `perf_event_open` is refused.
pub(crate) fn permission_fix(root: &SysRoot) -> String {
    let paranoid = fs::read_to_string(root.path("/proc/sys/kernel/perf_event_paranoid"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!("perf_event_paranoid is {paranoid}: run as root, or `sudo sysctl kernel.perf_event_paranoid=0`, or grant CAP_PERFMON with `sudo setcap cap_perfmon=ep $(command -v wattio)`")
}

/// Reads the `power` PMU description under `root`.
pub fn discover_power_pmu(root: &SysRoot) -> Result<PowerPmu, EnergyError> {
    let dir = root.path("/sys/bus/event_source/devices/power");
    let type_path = dir.join("type");
    let pmu_type_s = read_file(&type_path, MISSING_FIX)?;
    let pmu_type = pmu_type_s
        .trim()
        .parse()
        .map_err(|_| EnergyError::Malformed {
            path: type_path.clone(),
            content: pmu_type_s.trim().into(),
            expected: "a PMU type number".into(),
            fix: "check WATTIO_ROOT".into(),
        })?;
    let mask_path = dir.join("cpumask");
    let mask = read_file(&mask_path, MISSING_FIX)?;
    let mask_cpus = cpu::parse_cpu_list(&mask).ok_or_else(|| EnergyError::Malformed {
        path: mask_path.clone(),
        content: mask.trim().into(),
        expected: "a CPU list".into(),
        fix: "check WATTIO_ROOT".into(),
    })?;
    let packages = cpu::packages(root).unwrap_or_default();
    let cpus = mask_cpus
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let pkg = packages
                .iter()
                .find(|(_, cs)| cs.contains(&c))
                .map(|(p, _)| *p)
                .unwrap_or(i as u32);
            (c, pkg)
        })
        .collect();
    let events_dir = dir.join("events");
    let mut names: Vec<String> = fs::read_dir(&events_dir)
        .map_err(|e| EnergyError::from_io(&events_dir, e, MISSING_FIX))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("energy-") && !n.contains('.'))
        .collect();
    names.sort();
    let mut events = Vec::new();
    let mut notes = Vec::new();
    for name in names {
        let Some(domain) = domain_of_event(&name) else {
            notes.push(format!("{name}: unknown event, skipped"));
            continue;
        };
        let code_path = events_dir.join(&name);
        let code = match read_file(&code_path, MISSING_FIX).map(|s| parse_event_code(&s)) {
            Ok(Some(c)) => c,
            _ => {
                notes.push(format!(
                    "{name}: unreadable or malformed event code, skipped"
                ));
                continue;
            }
        };
        let scale = match read_file(&events_dir.join(format!("{name}.scale")), MISSING_FIX)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
        {
            Some(s) if s > 0.0 && s.is_finite() => s,
            _ => {
                notes.push(format!("{name}: missing or malformed .scale, skipped"));
                continue;
            }
        };
        if let Ok(unit) = read_file(&events_dir.join(format!("{name}.unit")), MISSING_FIX) {
            if unit.trim() != "Joules" {
                notes.push(format!(
                    "{name}: unit is '{}', not Joules, skipped",
                    unit.trim()
                ));
                continue;
            }
        }
        events.push(PerfEvent {
            name,
            domain,
            code,
            scale,
        });
    }
    Ok(PowerPmu {
        dir,
        pmu_type,
        cpus,
        events,
        notes,
    })
}

/// Opens the perf event `attr` describes, system-wide on `cpu` (`pid = -1`), close-on-exec.
/// Shared by the counting RAPL events and the eBPF mechanism's cpu-clock timers.
pub(crate) fn open_event(
    attr: &mut perf_event_open_sys::bindings::perf_event_attr,
    cpu: u32,
) -> std::io::Result<File> {
    attr.size = std::mem::size_of::<perf_event_open_sys::bindings::perf_event_attr>() as u32;
    // SAFETY: attr is a valid, fully initialised perf_event_attr; pid = -1 with a cpu counts
    // system-wide on that cpu; the returned fd is owned by the File.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            attr,
            -1,
            cpu as i32,
            -1,
            perf_event_open_sys::bindings::PERF_FLAG_FD_CLOEXEC as _,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor returned by the kernel.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// One RAPL event to open: the event, the CPU to open it on and the package it measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EventSlot<'a> {
    pub event: &'a PerfEvent,
    pub cpu: u32,
    pub socket: u32,
}

/// The events to open for `domains` (all when `None`): each event once per package, on the CPU
/// the PMU's cpumask names for that package; psys once for the whole machine. Event by event,
/// package by package: the counter order of both perf and eBPF.
pub(crate) fn select_events<'a>(
    pmu: &'a PowerPmu,
    domains: Option<&[Domain]>,
) -> Vec<EventSlot<'a>> {
    let mut slots = Vec::new();
    for ev in &pmu.events {
        if domains.is_some_and(|d| !d.contains(&ev.domain)) {
            continue;
        }
        for (k, &(cpu, socket)) in pmu.cpus.iter().enumerate() {
            if ev.domain == Domain::Psys && k > 0 {
                continue; // psys is one counter for the whole machine
            }
            slots.push(EventSlot {
                event: ev,
                cpu,
                socket,
            });
        }
    }
    slots
}

/// The counter an event's count is: joules per count from the PMU's `.scale`, and no wrap but
/// at 2^64 (the kernel keeps the count in 64 bits). The perf and the eBPF mechanisms read the
/// same counts and go through the same [`crate::Accumulator`] with this spec.
pub(crate) fn counter_spec(slot: &EventSlot) -> CounterSpec {
    CounterSpec {
        socket: slot.socket,
        domain: slot.event.domain,
        unit_j: slot.event.scale,
        wrap: Wrap::AtMax(u64::MAX),
        origin: format!("perf power/{}/ cpu {}", slot.event.name, slot.cpu),
    }
}

/// RAPL events opened for counting, with their counters, in [`select_events`] order.
pub(crate) struct OpenEvents {
    pub specs: Vec<CounterSpec>,
    pub files: Vec<File>,
    /// The CPU each event is bound to.
    pub cpus: Vec<u32>,
}

/// Opens the events [`select_events`] picks, as counting events; errors name `mechanism`.
pub(crate) fn open_events(
    root: &SysRoot,
    pmu: &PowerPmu,
    domains: Option<&[Domain]>,
    mechanism: Mechanism,
) -> Result<OpenEvents, EnergyError> {
    use perf_event_open_sys::bindings::perf_event_attr;
    let mut open = OpenEvents {
        specs: Vec::new(),
        files: Vec::new(),
        cpus: Vec::new(),
    };
    for slot in select_events(pmu, domains) {
        let mut attr = perf_event_attr::default();
        attr.type_ = pmu.pmu_type;
        attr.config = slot.event.code;
        let file = open_event(&mut attr, slot.cpu).map_err(|e| {
            let reason = format!(
                "perf_event_open({}, cpu {}) failed: {e}",
                slot.event.name, slot.cpu
            );
            match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => EnergyError::Unusable {
                    mechanism,
                    reason,
                    fix: match mechanism {
                        Mechanism::Ebpf => bpf_permission_fix(root),
                        _ => permission_fix(root),
                    },
                },
                _ => EnergyError::Unusable {
                    mechanism,
                    reason,
                    fix: "the kernel advertises this event but cannot count it (common in VMs); use --source powercap, msr or model".into(),
                },
            }
        })?;
        open.specs.push(counter_spec(&slot));
        open.files.push(file);
        open.cpus.push(slot.cpu);
    }
    Ok(open)
}

/// Reads the count of each event in `files` (counter `i` described by `specs[i]`) into `out`.
pub(crate) fn read_counts(
    files: &mut [File],
    specs: &[CounterSpec],
    out: &mut [u64],
) -> Result<(), EnergyError> {
    for (i, f) in files.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        // perf fds are read at their cursor (no pread): a plain read returns the count.
        f.read_exact(&mut b).map_err(|e| EnergyError::Io {
            path: PathBuf::from(&specs[i].origin),
            err: e,
        })?;
        out[i] = u64::from_ne_bytes(b);
    }
    Ok(())
}

/// Reads perf energy events.
///
/// RAPL through the perf-events `power` PMU.
///
/// The PMU is described under `/sys/bus/event_source/devices/power`: `type` (the dynamic PMU
/// number for `perf_event_attr.type`), `cpumask` (one CPU per package), and
/// `events/energy-*` with `event=0x..`, `.scale` (joules per count, 2^-32) and `.unit`. Each
/// event is opened once per package on the CPU the cpumask names, system-wide (`pid = -1`), and
/// read as a 64-bit count. The kernel keeps the count wrap-free (it folds the 32-bit MSR into a
/// 64-bit sum on an hrtimer), so the only wrap is at 2^64 counts.
pub struct PerfSource {
    provenance: Provenance,
    specs: Vec<CounterSpec>,
    fds: Vec<File>,
}

impl PerfSource {
    /// Opens every event of `pmu` (optionally only `domains`) once per package.
    pub fn open(
        root: &SysRoot,
        pmu: &PowerPmu,
        domains: Option<&[Domain]>,
    ) -> Result<Self, EnergyError> {
        let open = open_events(root, pmu, domains, Mechanism::Perf)?;
        Self::from_files(open.specs, open.files)
    }

    /// A source over already-open descriptors: perf fds, or pipes standing in for them in tests.
    /// Each read takes 8 bytes (a native-endian u64 count) from each descriptor.
    pub fn from_files(specs: Vec<CounterSpec>, fds: Vec<File>) -> Result<Self, EnergyError> {
        if specs.is_empty() || specs.len() != fds.len() {
            return Err(EnergyError::Unusable {
                mechanism: Mechanism::Perf,
                reason: "no energy event could be opened".into(),
                fix: "use another --source".into(),
            });
        }
        Ok(PerfSource {
            provenance: Provenance::measured(Mechanism::Perf),
            specs,
            fds,
        })
    }
}

impl Source for PerfSource {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        read_counts(&mut self.fds, &self.specs, out)
    }
}

/// The perf-events `power` PMU.
pub(crate) fn open_mechanism(req: &crate::opening::OpenRequest) -> crate::opening::Opened {
    let (root, domains) = (req.root, req.domains);
    match crate::perf::discover_power_pmu(root) {
        Ok(pmu) => {
            let notes = pmu.notes.clone();
            if pmu.events.is_empty() {
                return (
                    Err(crate::error::EnergyError::Unusable {
                        mechanism: crate::types::Mechanism::Perf,
                        reason: "the power PMU advertises no usable energy event".into(),
                        fix: crate::perf::MISSING_FIX.into(),
                    }),
                    notes,
                );
            }
            let r = crate::perf::PerfSource::open(root, &pmu, domains)
                .map(|s| Box::new(s) as Box<dyn crate::Source>);
            (
                r.and_then(crate::opening::check_alive)
                    .and_then(|s| crate::opening::filter(s, domains)),
                notes,
            )
        }
        Err(e) => (Err(e), vec![]),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn event_codes() {
        assert_eq!(parse_event_code("event=0x02\n"), Some(2));
        assert_eq!(parse_event_code("event=5"), Some(5));
        assert_eq!(parse_event_code("umask=1"), None);
    }

    fn pipe() -> (File, File) {
        let mut fds = [0; 2];
        // SAFETY: fds is a valid 2-element array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh descriptors from pipe().
        unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
    }

    /// Feeds the counts u64::MAX − 42 then 2^32 of an `energy-pkg` event (scale 2^-32 J) through
    /// `read` (a mechanism's user-space path from a kernel count to the raw value its source
    /// hands over) and the accumulator with [`counter_spec`], and checks the 64-bit wrap is
    /// corrected: 43 + 2^32 counts. The perf and eBPF mechanisms both pass it.
    pub(crate) fn check_u64_wrap_is_corrected(mut read: impl FnMut(u64) -> u64) {
        let event = PerfEvent {
            name: "energy-pkg".into(),
            domain: Domain::Package,
            code: 2,
            scale: 2f64.powi(-32),
        };
        let spec = counter_spec(&EventSlot {
            event: &event,
            cpu: 0,
            socket: 0,
        });
        assert_eq!(spec.wrap, Wrap::AtMax(u64::MAX));
        let mut acc = crate::Accumulator::new(std::slice::from_ref(&spec));
        let mut out = [crate::CounterDelta {
            joules: 0.0,
            wrapped: false,
        }];
        for count in [u64::MAX - 42, 1u64 << 32] {
            acc.update(&[read(count)], &mut out).unwrap();
        }
        let expected = (43.0 + 2f64.powi(32)) * 2f64.powi(-32);
        assert!(
            (out[0].joules - expected).abs() < 1e-12,
            "{}",
            out[0].joules
        );
        assert!(out[0].wrapped);
    }

    #[test]
    fn pipes_stand_in_for_perf_fds_and_u64_wraps_are_corrected() {
        let (r, mut w) = pipe();
        let spec = CounterSpec {
            socket: 0,
            domain: Domain::Package,
            unit_j: 2f64.powi(-32),
            wrap: Wrap::AtMax(u64::MAX),
            origin: "pipe".into(),
        };
        let mut src = PerfSource::from_files(vec![spec], vec![r]).unwrap();
        check_u64_wrap_is_corrected(|count| {
            w.write_all(&count.to_ne_bytes()).unwrap();
            let mut raw = [0u64];
            src.read_raw(&mut raw).unwrap();
            raw[0]
        });
    }
}
