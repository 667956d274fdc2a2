//! The CPU actuator: applies Algorithm 3's (cores, frequency step) through whatever the
//! machine offers, and reports what it could and could not apply.
//!
//! - Frequency: cpufreq policies under `/sys/devices/system/cpu/cpufreq/policyN`. With the
//!   `userspace` governor available it is selected and `scaling_setspeed` written; otherwise
//!   `scaling_max_freq` is clamped (what works under intel_pstate). Needs root.
//! - Cores, `Affinity` backend: every thread of this process is restricted to the first N
//!   allowed CPUs (sched_setaffinity; no privilege; what runs on VMs and containers).
//! - Cores, `Hotplug` backend: `cpuN/online` written (never cpu0). Needs root; opt-in.
//!
//! Sysfs paths resolve under `WATTIO_ROOT` (fixture trees in tests); affinity always acts on
//! the real process. Everything changed is put back by [`CpuActuator::restore`].

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use wattio_energy::SysRoot;

/// How "active cores" is applied (`wattio transfer --cpu-actuator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CoreBackend {
    /// Do not scale cores.
    None,
    /// Restrict this process's threads to N cores (no privilege needed).
    #[default]
    Affinity,
    /// Take CPUs offline through cpuN/online (root; restored at exit).
    Hotplug,
}

/// Outcome of one knob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", content = "detail", rename_all = "snake_case")]
pub enum KnobOutcome {
    Applied(String),
    Unavailable(String),
    Failed(String),
}

/// What one `apply` did, knob by knob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyReport {
    pub cores: KnobOutcome,
    pub frequency: KnobOutcome,
}

struct Policy {
    dir: PathBuf,
    orig_max: Option<String>,
    orig_governor: Option<String>,
    userspace: bool,
}

/// The CPU actuator.
pub(crate) struct CpuActuator {
    root: SysRoot,
    backend: CoreBackend,
    use_cpufreq: bool,
    allowed: Vec<usize>,
    ladder_khz: Vec<u64>,
    policies: Vec<Policy>,
    hotplugged_off: Vec<usize>,
    touched_policies: bool,
}

fn read_trim(p: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Parses a CPU list such as `0-3,6`.
pub(crate) fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => {
                if let Ok(a) = part.trim().parse() {
                    out.push(a)
                }
            }
        }
    }
    out
}

/// CPUs this process may run on (sched_getaffinity).
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for pid 0 (this thread).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Restricts every thread of this process to `cpus`.
pub(crate) fn set_process_affinity(cpus: &[usize]) -> std::io::Result<usize> {
    // SAFETY: as above; each call targets one thread id of this process.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let mut n = 0;
    for ent in std::fs::read_dir("/proc/self/task")? {
        let Ok(tid) = ent?.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        let r =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if r == 0 {
            n += 1;
        } else {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e); // ESRCH: the thread exited meanwhile
            }
        }
    }
    Ok(n)
}

impl CpuActuator {
    /// Looks at the machine under `root`.
    pub fn probe(root: SysRoot, backend: CoreBackend, use_cpufreq: bool) -> CpuActuator {
        let mut allowed = allowed_cpus();
        if backend == CoreBackend::Hotplug {
            let online = read_trim(&root.path("/sys/devices/system/cpu/online"))
                .map(|s| parse_cpu_list(&s))
                .unwrap_or_default();
            if !online.is_empty() {
                allowed = online;
            }
        }
        let mut policies = Vec::new();
        let mut ladder = Vec::new();
        let cpufreq = root.path("/sys/devices/system/cpu/cpufreq");
        if let Ok(rd) = std::fs::read_dir(&cpufreq) {
            let mut dirs: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("policy"))
                .map(|e| e.path())
                .collect();
            dirs.sort();
            for dir in dirs {
                let govs = read_trim(&dir.join("scaling_available_governors")).unwrap_or_default();
                if ladder.is_empty() {
                    ladder = freq_ladder(&dir);
                }
                policies.push(Policy {
                    orig_max: read_trim(&dir.join("scaling_max_freq")),
                    orig_governor: read_trim(&dir.join("scaling_governor")),
                    userspace: govs.split_whitespace().any(|g| g == "userspace"),
                    dir,
                });
            }
        }
        CpuActuator {
            root,
            backend,
            use_cpufreq,
            allowed,
            ladder_khz: ladder,
            policies,
            hotplugged_off: Vec::new(),
            touched_policies: false,
        }
    }

    /// Cores the scaler may use.
    pub fn n_cores(&self) -> usize {
        self.allowed.len().max(1)
    }

    /// Frequency steps in kHz, ascending (empty when no cpufreq policy is exposed).
    pub fn ladder_khz(&self) -> &[u64] {
        &self.ladder_khz
    }

    /// Applies `cores` active cores and frequency step `freq_idx`.
    pub fn apply(&mut self, cores: usize, freq_idx: usize) -> ApplyReport {
        let cores = cores.clamp(1, self.n_cores());
        ApplyReport {
            cores: self.apply_cores(cores),
            frequency: self.apply_freq(freq_idx),
        }
    }

    fn apply_cores(&mut self, cores: usize) -> KnobOutcome {
        match self.backend {
            CoreBackend::None => {
                KnobOutcome::Unavailable("core scaling off (--cpu-actuator none)".into())
            }
            CoreBackend::Affinity => {
                let cpus: Vec<usize> = self.allowed.iter().copied().take(cores).collect();
                match set_process_affinity(&cpus) {
                    Ok(n) => KnobOutcome::Applied(format!(
                        "affinity to CPUs {} on {n} threads",
                        cpus.iter()
                            .map(|c| c.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    )),
                    Err(e) => KnobOutcome::Failed(format!("sched_setaffinity: {e}")),
                }
            }
            CoreBackend::Hotplug => {
                let mut done = Vec::new();
                for (k, &cpu) in self.allowed.iter().enumerate() {
                    if cpu == 0 {
                        continue; // cpu0 usually cannot go offline
                    }
                    let want = if k < cores { "1" } else { "0" };
                    let p = self
                        .root
                        .path(format!("/sys/devices/system/cpu/cpu{cpu}/online"));
                    if !p.exists() {
                        return KnobOutcome::Unavailable(format!(
                            "{} missing: no hotplug",
                            p.display()
                        ));
                    }
                    if let Err(e) = std::fs::write(&p, want) {
                        return KnobOutcome::Failed(format!(
                            "write {}: {e} (needs root)",
                            p.display()
                        ));
                    }
                    if want == "0" && !self.hotplugged_off.contains(&cpu) {
                        self.hotplugged_off.push(cpu);
                    }
                    done.push(format!("cpu{cpu}={want}"));
                }
                KnobOutcome::Applied(format!("hotplug {}", done.join(" ")))
            }
        }
    }

    fn apply_freq(&mut self, idx: usize) -> KnobOutcome {
        if !self.use_cpufreq {
            return KnobOutcome::Unavailable("frequency scaling off (--cpufreq off)".into());
        }
        if self.policies.is_empty() || self.ladder_khz.is_empty() {
            return KnobOutcome::Unavailable(format!(
                "no cpufreq policy under {}",
                self.root.path("/sys/devices/system/cpu/cpufreq").display()
            ));
        }
        let khz = self.ladder_khz[idx.min(self.ladder_khz.len() - 1)];
        self.touched_policies = true;
        let mut how = "scaling_max_freq";
        for p in &self.policies {
            let r = if p.userspace {
                how = "userspace governor";
                std::fs::write(p.dir.join("scaling_governor"), "userspace")
                    .and_then(|_| std::fs::write(p.dir.join("scaling_setspeed"), khz.to_string()))
            } else {
                std::fs::write(p.dir.join("scaling_max_freq"), khz.to_string())
            };
            if let Err(e) = r {
                return KnobOutcome::Failed(format!(
                    "write under {}: {e} (needs root)",
                    p.dir.display()
                ));
            }
        }
        KnobOutcome::Applied(format!(
            "{khz} kHz via {how} on {} policies",
            self.policies.len()
        ))
    }

    /// Puts back frequencies, governors and offlined CPUs.
    pub fn restore(&mut self) -> Vec<String> {
        let mut errs = Vec::new();
        for cpu in self.hotplugged_off.drain(..) {
            let p = self
                .root
                .path(format!("/sys/devices/system/cpu/cpu{cpu}/online"));
            if let Err(e) = std::fs::write(&p, "1") {
                errs.push(format!("cannot bring cpu{cpu} back online: {e}"));
            }
        }
        if self.touched_policies {
            for p in &self.policies {
                if let (true, Some(g)) = (p.userspace, &p.orig_governor) {
                    if let Err(e) = std::fs::write(p.dir.join("scaling_governor"), g) {
                        errs.push(format!(
                            "cannot restore governor of {}: {e}",
                            p.dir.display()
                        ));
                    }
                }
                if let Some(m) = &p.orig_max {
                    if let Err(e) = std::fs::write(p.dir.join("scaling_max_freq"), m) {
                        errs.push(format!("cannot restore {}: {e}", p.dir.display()));
                    }
                }
            }
            self.touched_policies = false;
        }
        if self.backend == CoreBackend::Affinity {
            if let Err(e) = set_process_affinity(&self.allowed) {
                errs.push(format!("cannot restore affinity: {e}"));
            }
        }
        errs
    }
}

impl Drop for CpuActuator {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

fn freq_ladder(dir: &std::path::Path) -> Vec<u64> {
    if let Some(s) = read_trim(&dir.join("scaling_available_frequencies")) {
        let mut v: Vec<u64> = s
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        v.sort_unstable();
        v.dedup();
        if !v.is_empty() {
            return v;
        }
    }
    let min = read_trim(&dir.join("cpuinfo_min_freq")).and_then(|s| s.parse::<u64>().ok());
    let max = read_trim(&dir.join("cpuinfo_max_freq")).and_then(|s| s.parse::<u64>().ok());
    match (min, max) {
        // ours: four evenly spaced steps when the driver lists no discrete frequencies
        (Some(a), Some(b)) if b > a => (0..4).map(|k| a + (b - a) * k / 3).collect(),
        (Some(a), Some(_)) => vec![a],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fixture(userspace: bool, freqs: Option<&str>) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let cpu = d.path().join("sys/devices/system/cpu");
        for n in 0..2 {
            let p = cpu.join(format!("cpufreq/policy{n}"));
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("cpuinfo_min_freq"), "800000\n").unwrap();
            fs::write(p.join("cpuinfo_max_freq"), "3500000\n").unwrap();
            fs::write(p.join("scaling_max_freq"), "3500000\n").unwrap();
            fs::write(p.join("scaling_governor"), "schedutil\n").unwrap();
            let g = if userspace {
                "performance schedutil userspace"
            } else {
                "performance powersave"
            };
            fs::write(p.join("scaling_available_governors"), g).unwrap();
            if let Some(f) = freqs {
                fs::write(p.join("scaling_available_frequencies"), f).unwrap();
            }
            fs::create_dir_all(cpu.join(format!("cpu{n}"))).unwrap();
        }
        fs::write(cpu.join("cpu1/online"), "1\n").unwrap();
        fs::write(cpu.join("online"), "0-1\n").unwrap();
        d
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6\n"), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
    }

    #[test]
    fn clamps_scaling_max_freq_and_restores_it() {
        let d = fixture(false, None);
        let root = SysRoot::new(d.path());
        let mut a = CpuActuator::probe(root, CoreBackend::None, true);
        // 800000 + 2700000·k/3
        assert_eq!(a.ladder_khz(), &[800000, 1700000, 2600000, 3500000]);
        let r = a.apply(1, 1);
        assert!(
            matches!(r.frequency, KnobOutcome::Applied(ref s) if s.contains("scaling_max_freq")),
            "{r:?}"
        );
        assert!(matches!(r.cores, KnobOutcome::Unavailable(_)));
        let p0 = d.path().join("sys/devices/system/cpu/cpufreq/policy0");
        assert_eq!(
            fs::read_to_string(p0.join("scaling_max_freq")).unwrap(),
            "1700000"
        );
        assert!(a.restore().is_empty());
        assert_eq!(
            fs::read_to_string(p0.join("scaling_max_freq")).unwrap(),
            "3500000"
        );
    }

    #[test]
    fn userspace_governor_and_listed_frequencies() {
        let d = fixture(true, Some("2000000 1000000 3000000"));
        let mut a = CpuActuator::probe(SysRoot::new(d.path()), CoreBackend::None, true);
        assert_eq!(a.ladder_khz(), &[1000000, 2000000, 3000000]);
        a.apply(1, 9);
        let p1 = d.path().join("sys/devices/system/cpu/cpufreq/policy1");
        assert_eq!(
            fs::read_to_string(p1.join("scaling_governor")).unwrap(),
            "userspace"
        );
        assert_eq!(
            fs::read_to_string(p1.join("scaling_setspeed")).unwrap(),
            "3000000"
        );
        drop(a); // restore on drop
        assert_eq!(
            fs::read_to_string(p1.join("scaling_governor")).unwrap(),
            "schedutil"
        );
    }

    #[test]
    fn hotplug_offlines_and_brings_back_never_cpu0() {
        let d = fixture(false, None);
        let mut a = CpuActuator::probe(SysRoot::new(d.path()), CoreBackend::Hotplug, false);
        assert_eq!(a.n_cores(), 2);
        let r = a.apply(1, 0);
        assert_eq!(r.cores, KnobOutcome::Applied("hotplug cpu1=0".into()));
        assert!(matches!(r.frequency, KnobOutcome::Unavailable(_)));
        let on = d.path().join("sys/devices/system/cpu/cpu1/online");
        assert_eq!(fs::read_to_string(&on).unwrap(), "0");
        a.restore();
        assert_eq!(fs::read_to_string(&on).unwrap(), "1");
        assert!(!d.path().join("sys/devices/system/cpu/cpu0/online").exists());
    }

    #[test]
    fn missing_cpufreq_is_reported_not_fatal() {
        let d = tempfile::tempdir().unwrap();
        let mut a = CpuActuator::probe(SysRoot::new(d.path()), CoreBackend::None, true);
        assert!(a.ladder_khz().is_empty());
        let r = a.apply(1, 0);
        assert!(
            matches!(r.frequency, KnobOutcome::Unavailable(ref s) if s.contains("no cpufreq policy"))
        );
    }

    #[test]
    fn read_only_sysfs_fails_with_reason() {
        let d = fixture(false, None);
        let p0 = d
            .path()
            .join("sys/devices/system/cpu/cpufreq/policy0/scaling_max_freq");
        // a directory where a file is expected makes the write fail even as root
        fs::remove_file(&p0).unwrap();
        fs::create_dir(&p0).unwrap();
        let mut a = CpuActuator::probe(SysRoot::new(d.path()), CoreBackend::None, true);
        let r = a.apply(1, 0);
        assert!(
            matches!(r.frequency, KnobOutcome::Failed(ref s) if s.contains("needs root")),
            "{r:?}"
        );
    }

    #[test]
    fn affinity_restricts_this_process_and_restores() {
        let before = allowed_cpus();
        let mut a = CpuActuator::probe(SysRoot::new("/nonexistent"), CoreBackend::Affinity, false);
        let r = a.apply(1, 0);
        assert!(matches!(r.cores, KnobOutcome::Applied(_)), "{r:?}");
        assert_eq!(allowed_cpus(), vec![before[0]]);
        a.restore();
        assert_eq!(allowed_cpus(), before);
    }
}
