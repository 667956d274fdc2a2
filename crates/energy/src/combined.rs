//! CPU and GPU counters read together: one [`Source`] whose counters are a CPU source's (RAPL
//! or the model) followed by NVML's, each keeping its own provenance.

use crate::discover::SourceChoice;
use crate::error::EnergyError;
use crate::nvml::NvmlSource;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance};
use crate::Source;
use std::ffi::OsStr;

/// The counters of a CPU source followed by those of a GPU source.
pub struct CombinedSource {
    cpu: Option<Box<dyn Source>>,
    gpu: Option<Box<dyn Source>>,
    n_cpu: usize,
    specs: Vec<CounterSpec>,
}

impl CombinedSource {
    /// Both sources, or either; `None` when both are `None`.
    pub fn new(
        cpu: Option<Box<dyn Source>>,
        gpu: Option<Box<dyn Source>>,
    ) -> Option<CombinedSource> {
        if cpu.is_none() && gpu.is_none() {
            return None;
        }
        let n_cpu = cpu.as_ref().map_or(0, |s| s.counters().len());
        let specs = cpu
            .iter()
            .chain(gpu.iter())
            .flat_map(|s| s.counters().iter().cloned())
            .collect();
        Some(CombinedSource {
            cpu,
            gpu,
            n_cpu,
            specs,
        })
    }
}

impl Source for CombinedSource {
    /// The CPU source's provenance (the one `total_j` carries), or the GPU's without a CPU.
    fn provenance(&self) -> &Provenance {
        match (&self.cpu, &self.gpu) {
            (Some(c), _) => c.provenance(),
            (None, Some(g)) => g.provenance(),
            (None, None) => unreachable!("CombinedSource::new refuses two missing sources"),
        }
    }

    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    fn counter_provenance(&self, i: usize) -> &Provenance {
        match (&self.cpu, &self.gpu) {
            (Some(c), _) if i < self.n_cpu => c.counter_provenance(i),
            (_, Some(g)) => g.counter_provenance(i - self.n_cpu),
            _ => self.provenance(),
        }
    }

    fn set_rate_hz(&mut self, hz: f64) -> Result<(), EnergyError> {
        match &mut self.cpu {
            Some(cpu) => cpu.set_rate_hz(hz),
            None => Ok(()),
        }
    }

    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        let (c, g) = out.split_at_mut(self.n_cpu);
        if let Some(cpu) = &mut self.cpu {
            cpu.read_raw(c)?;
        }
        if let Some(gpu) = &mut self.gpu {
            gpu.read_raw(g)?;
        }
        Ok(())
    }

    fn take_counter_errors(&mut self) -> Vec<String> {
        let mut errors = self
            .cpu
            .as_mut()
            .map(|c| c.take_counter_errors())
            .unwrap_or_default();
        if let Some(gpu) = &mut self.gpu {
            errors.extend(gpu.take_counter_errors());
        }
        errors
    }
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
