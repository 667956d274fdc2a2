//! Every meter a command reads, as one: a [`Source`] whose counters are a CPU source's (RAPL or
//! the model), then NVML's GPUs, then the platform meters and devices read beside them, each
//! counter keeping its own provenance.

use crate::discover::SourceChoice;
use crate::error::EnergyError;
use crate::model_params::ModelParams;
use crate::nvml::NvmlSource;
use crate::opening::OpenRequest;
use crate::redfish::PlatformUrl;
use crate::root::SysRoot;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance};
use crate::Source;
use std::ffi::OsStr;

/// The counters of several sources read as one: a CPU source's, then NVML's GPUs, then the
/// meters read beside them (platform, devices), each counter keeping its own provenance.
pub struct CombinedSource {
    parts: Vec<Box<dyn Source>>,
    /// Where each part's counters start in the combined order.
    starts: Vec<usize>,
    specs: Vec<CounterSpec>,
}

impl CombinedSource {
    /// Both sources, or either; `None` when both are `None`.
    pub fn new(
        cpu: Option<Box<dyn Source>>,
        gpu: Option<Box<dyn Source>>,
    ) -> Option<CombinedSource> {
        CombinedSource::of(cpu.into_iter().chain(gpu).collect())
    }

    /// The parts in this order (the first one's provenance is the whole's); `None` when there
    /// is none. Two meters of one scope from different parts (two platform meters, an NVML GPU
    /// and an hwmon one) keep apart: the later one's number moves past the earlier's, so no
    /// report adds them up.
    pub fn of(parts: Vec<Box<dyn Source>>) -> Option<CombinedSource> {
        if parts.is_empty() {
            return None;
        }
        let mut starts = Vec::with_capacity(parts.len());
        let mut specs: Vec<CounterSpec> = Vec::new();
        for (k, part) in parts.iter().enumerate() {
            starts.push(specs.len());
            let before = specs.len();
            for c in part.counters() {
                let mut c = c.clone();
                let own_scope = matches!(
                    c.domain,
                    Domain::Platform | Domain::Device | Domain::Psys | Domain::Gpu
                );
                if k > 0 && own_scope {
                    while specs[..before]
                        .iter()
                        .any(|s| s.domain == c.domain && s.socket == c.socket)
                    {
                        c.socket += 1;
                    }
                }
                specs.push(c);
            }
        }
        Some(CombinedSource {
            parts,
            starts,
            specs,
        })
    }

    /// The part holding combined counter `i`, and `i` within it.
    fn locate(&self, i: usize) -> (usize, usize) {
        let k = self.starts.partition_point(|&s| s <= i).saturating_sub(1);
        (k, i - self.starts[k])
    }
}

impl Source for CombinedSource {
    /// The first part's provenance (the one `total_j` carries: the CPU's, or the GPUs' without
    /// a CPU).
    fn provenance(&self) -> &Provenance {
        self.parts[0].provenance()
    }

    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    fn counter_provenance(&self, i: usize) -> &Provenance {
        let (k, j) = self.locate(i);
        self.parts[k].counter_provenance(j)
    }

    /// The reader's rate goes to the first part (a CPU source on its own clock, eBPF's).
    fn set_rate_hz(&mut self, hz: f64) -> Result<(), EnergyError> {
        self.parts[0].set_rate_hz(hz)
    }

    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        let mut rest = out;
        for part in &mut self.parts {
            let (mine, tail) = rest.split_at_mut(part.counters().len());
            part.read_raw(mine)?;
            rest = tail;
        }
        Ok(())
    }

    fn take_counter_errors(&mut self) -> Vec<String> {
        self.parts
            .iter_mut()
            .flat_map(|p| p.take_counter_errors())
            .collect()
    }

    fn energy_between(&self, i: usize, t0_ns: u64, t1_ns: u64) -> Option<(f64, f64)> {
        let (k, j) = self.locate(i);
        self.parts[k].energy_between(j, t0_ns, t1_ns)
    }

    fn late_timing(&self, i: usize) -> Option<crate::LateTiming> {
        let (k, j) = self.locate(i);
        self.parts[k].late_timing(j)
    }
}

/// The domains the meters beside the CPU cover (platform meters and devices), which
/// `--domains` may ask for.
const BESIDE_DOMAINS: [Domain; 2] = [Domain::Platform, Domain::Device];

/// The meters opened beside the CPU, and why each one passed over was.
pub type BesideMeters = (Vec<Box<dyn Source>>, Vec<String>);

/// Opens the meters read beside the CPU (every [`crate::Role::Beside`] mechanism of the
/// registry) that cover `domains` (all when `None`): those usable, and, for each one passed
/// over, why. Asked for by `--domains` and none usable: an error saying why each failed.
pub fn open_beside(
    root: &SysRoot,
    domains: Option<&[Domain]>,
) -> Result<BesideMeters, EnergyError> {
    open_beside_with(root, domains, &[])
}

/// [`open_beside`] with the platform meters named on the command line (`--platform`): each
/// must open, or the error says why (they were asked for by name).
pub fn open_beside_with(
    root: &SysRoot,
    domains: Option<&[Domain]>,
    platforms: &[PlatformUrl],
) -> Result<BesideMeters, EnergyError> {
    if !platforms.is_empty() && domains.is_some_and(|d| !d.contains(&Domain::Platform)) {
        return Err(EnergyError::Invalid(
            "--platform reads the platform domain, but --domains leaves it out: add platform to --domains".into(),
        ));
    }
    let asked: Option<Vec<Domain>> = domains.map(|d| {
        d.iter()
            .copied()
            .filter(|d| BESIDE_DOMAINS.contains(d))
            .collect()
    });
    if asked.as_ref().is_some_and(|a| a.is_empty()) {
        return Ok((vec![], vec![]));
    }
    let params = ModelParams::default();
    let request = OpenRequest {
        root,
        domains: asked.as_deref(),
        params: &params,
        platforms,
    };
    let (mut opened, mut passed_over) = (Vec::new(), Vec::new());
    for m in Mechanism::beside() {
        match crate::registry::open(m, &request).0 {
            Ok(s) => opened.push(s),
            Err(e) if m == crate::redfish::MECHANISM && !platforms.is_empty() => return Err(e),
            Err(e) => passed_over.push(format!("{m}: {}", crate::opening::split_error(&e).0)),
        }
    }
    if let (Some(a), true) = (&asked, opened.is_empty()) {
        let names: Vec<&str> = a.iter().map(|d| d.as_str()).collect();
        return Err(EnergyError::Invalid(format!(
            "--domains asks for {} but no meter of it can be read here ({}); `wattio probe` lists what is",
            names.join(" and "),
            passed_over.join("; ")
        )));
    }
    Ok((opened, passed_over))
}

/// [`open_with_gpus`] followed by the meters read beside the CPU ([`open_beside`]): every
/// source a command reads, in one. `domains` may name CPU domains, `gpu`, `platform` and
/// `device`; what is passed over is returned as with `open_with_gpus` (the beside meters
/// only when `--domains` asked for them: elsewhere they are usually absent, and `probe` says
/// why). `platforms` are the BMCs named by `--platform` ([`open_beside_with`]).
pub fn open_all(
    choice: SourceChoice,
    domains: Option<&[Domain]>,
    platforms: &[PlatformUrl],
    nvml_lib: &OsStr,
    root: &SysRoot,
    open_cpu: impl FnOnce(Option<&[Domain]>) -> Result<(Box<dyn Source>, Vec<String>), EnergyError>,
) -> Result<(Box<dyn Source>, Vec<String>), EnergyError> {
    let inner: Option<Vec<Domain>> = domains.map(|d| {
        d.iter()
            .copied()
            .filter(|d| !BESIDE_DOMAINS.contains(d))
            .collect()
    });
    let beside_only = inner.as_ref().is_some_and(|d| d.is_empty());
    let (beside, beside_passed_over) = open_beside_with(root, domains, platforms)?;
    let (main, mut passed_over) = if beside_only {
        (None, vec![])
    } else {
        let (s, p) = open_with_gpus(choice, inner.as_deref(), nvml_lib, open_cpu)?;
        (Some(s), p)
    };
    if domains.is_some() {
        passed_over.extend(beside_passed_over);
    }
    if beside.is_empty() {
        if let Some(m) = main {
            return Ok((m, passed_over));
        }
    }
    let parts: Vec<Box<dyn Source>> = main.into_iter().chain(beside).collect();
    let src = CombinedSource::of(parts).ok_or_else(|| {
        EnergyError::Invalid(
            "no domain selected: give --domains a CPU domain, gpu, platform or device".into(),
        )
    })?;
    Ok((Box::new(src), passed_over))
}

/// Opens the CPU source `choice` asks for (through `open_cpu`, given the CPU domains; e.g.
/// [`crate::discover::open_source`]) together with NVML's GPUs (the library `nvml_lib`).
///
/// * GPUs asked for (`gpu` in `domains`, or `choice` = nvml): NVML must be usable, else the error
///   says why and how to fix it. With only `gpu` in `domains`, or `--source nvml` without CPU
///   domains, no CPU source is opened.
/// * `domains` not given: the CPU source as before, plus the GPUs when NVML is usable; when it
///   is not, nothing changes (and the CPU choice never depends on NVML).
/// * `domains` given without `gpu`: the CPU source only; NVML is not even loaded.
///
/// Also returns, with `--source auto`, why CPU mechanisms were passed over.
pub fn open_with_gpus(
    choice: SourceChoice,
    domains: Option<&[Domain]>,
    nvml_lib: &OsStr,
    open_cpu: impl FnOnce(Option<&[Domain]>) -> Result<(Box<dyn Source>, Vec<String>), EnergyError>,
) -> Result<(Box<dyn Source>, Vec<String>), EnergyError> {
    let gpu_only_choice = choice == SourceChoice::Only(Mechanism::Nvml);
    let cpu_domains: Option<Vec<Domain>> =
        domains.map(|d| d.iter().copied().filter(|&d| d != Domain::Gpu).collect());
    let gpu_asked = gpu_only_choice || domains.is_some_and(|d| d.contains(&Domain::Gpu));
    let want_cpu = match &cpu_domains {
        Some(d) => !d.is_empty(),
        None => !gpu_only_choice,
    };
    if gpu_only_choice && want_cpu {
        return Err(EnergyError::Invalid(
            "--source nvml reads GPUs only, but --domains asks for CPU domains: keep the CPU's --source (auto, perf, …) and add gpu to --domains".into(),
        ));
    }
    let (cpu, passed_over) = if want_cpu {
        let (s, p) = open_cpu(cpu_domains.as_deref())?;
        (Some(s), p)
    } else {
        (None, vec![])
    };
    let gpu: Option<Box<dyn Source>> = if gpu_asked {
        Some(Box::new(NvmlSource::open(nvml_lib)?))
    } else if domains.is_none() {
        NvmlSource::open(nvml_lib)
            .ok()
            .map(|s| Box::new(s) as Box<dyn Source>)
    } else {
        None
    };
    match (cpu, gpu) {
        (Some(c), None) => Ok((c, passed_over)),
        (cpu, gpu) => {
            let src = CombinedSource::new(cpu, gpu).ok_or_else(|| {
                EnergyError::Invalid(
                    "no domain selected: give --domains a CPU domain or gpu".into(),
                )
            })?;
            Ok((Box::new(src), passed_over))
        }
    }
}
