//! Probing every mechanism and opening the best usable one.
//!
//! Discovery never fails because an unrelated mechanism is missing: each mechanism is probed on
//! its own and reports whether it can be used, why not, and how to fix it. The automatic order is
//! perf → powercap → MSR → model (Raffin & Trystram 2024 §V-D recommend perf-events; MSR is the
//! last hardware resort; the model only where no counter exists). eBPF reads perf's counters
//! through more machinery for no gain (same section), so auto never picks it: only on request.

use crate::error::EnergyError;
use crate::model_params::ModelParams;
use crate::opening::{split_error, OpenRequest, Opened};
use crate::registry;
use crate::root::SysRoot;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance};
use crate::update_period::{is_hardware_counter, watch_update_periods, UpdatePeriod};
use crate::Source;
use serde::Serialize;
use std::collections::BTreeSet;

/// Which mechanism to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceChoice {
    /// The first usable of perf, powercap, MSR, host, model ([`Mechanism::auto`]).
    Auto,
    /// Exactly this mechanism, or an error saying why not.
    Only(Mechanism),
}

impl std::str::FromStr for SourceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("auto") {
            Ok(SourceChoice::Auto)
        } else {
            s.parse::<Mechanism>()
                .map(SourceChoice::Only)
                .map_err(|e| format!("{e} (or auto)"))
        }
    }
}

/// What probing one mechanism found.
#[derive(Debug, Clone, Serialize)]
pub struct MechanismStatus {
    pub mechanism: Mechanism,
    pub usable: bool,
    /// The counters it would read (socket, domain, unit, wrap limit, origin).
    pub counters: Vec<CounterSpec>,
    /// Why it cannot be used (empty when usable).
    pub reason: String,
    /// How to make it usable.
    pub fix: Option<String>,
    /// Things worth knowing: skipped zones, unknown wrap limits.
    pub notes: Vec<String>,
    /// Read beside the CPU's mechanism whenever usable (a platform meter, devices), not
    /// chosen by `--source`.
    pub beside: bool,
    /// Each counter's provenance label, in the order of `counters` (`measured (hwmon
    /// power_meter power1_average)`).
    pub labels: Vec<String>,
    /// How often each counter changed while probe watched it, in the order of `counters`
    /// (`None` for a counter whose reads failed). Empty when not usable, and for the model
    /// (estimates, no counter) and eBPF (its readings change at its own timer's rate).
    pub update_periods: Vec<Option<UpdatePeriod>>,
}

/// The result of probing every mechanism.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    pub root: String,
    pub cpu: Option<String>,
    pub mechanisms: Vec<MechanismStatus>,
    /// The mechanism `--source auto` would use.
    pub chosen: Option<Mechanism>,
    /// The provenance of the chosen mechanism's figures.
    pub provenance: Option<Provenance>,
    /// Cross-mechanism warnings (e.g. perf and powercap disagreeing on domains).
    pub warnings: Vec<String>,
    /// NVIDIA GPUs through NVML, or why NVML cannot be used; never changes `chosen`.
    pub gpu: crate::nvml::GpuProbe,
}

pub(crate) fn status_from(
    mechanism: Mechanism,
    r: &Result<Box<dyn Source>, EnergyError>,
    notes: Vec<String>,
) -> MechanismStatus {
    match r {
        Ok(src) => {
            let mut notes = notes;
            for c in src.counters() {
                if c.wrap == crate::types::Wrap::Unknown {
                    notes.push(format!(
                        "{}: wrap limit unknown, so a wrap cannot be corrected and is reported as an error",
                        c.origin
                    ));
                }
            }
            MechanismStatus {
                mechanism,
                usable: true,
                beside: Mechanism::beside().contains(&mechanism),
                labels: (0..src.counters().len())
                    .map(|i| src.counter_provenance(i).label())
                    .collect(),
                counters: src.counters().to_vec(),
                reason: String::new(),
                fix: None,
                notes,
                update_periods: vec![],
            }
        }
        Err(e) => {
            let (reason, fix) = split_error(e);
            MechanismStatus {
                mechanism,
                usable: false,
                beside: Mechanism::beside().contains(&mechanism),
                labels: vec![],
                counters: vec![],
                reason,
                fix,
                notes,
                update_periods: vec![],
            }
        }
    }
}

/// Opens one mechanism through the registry, returning its source and discovery notes.
fn open_mechanism(
    root: &SysRoot,
    mechanism: Mechanism,
    domains: Option<&[Domain]>,
    params: &ModelParams,
    platforms: &[crate::PlatformUrl],
) -> Opened {
    registry::open(
        mechanism,
        &OpenRequest {
            root,
            domains,
            params,
            platforms,
        },
    )
}

/// Probes every mechanism under `root`.
pub fn discover(root: &SysRoot, params: ModelParams) -> ProbeReport {
    discover_with_platforms(root, params, &[])
}

/// [`discover`], with the platform meters named by `--platform` (`redfish://BMC`) probed too.
pub fn discover_with_platforms(
    root: &SysRoot,
    params: ModelParams,
    platforms: &[crate::PlatformUrl],
) -> ProbeReport {
    let cpu = crate::cpu::cpu_id(root).ok().map(|id| {
        format!(
            "{} (family {:#x}, model {:#x})",
            id.model_name, id.family, id.model
        )
    });
    let mut mechanisms = Vec::new();
    let mut watched: Vec<(usize, Box<dyn Source>)> = Vec::new();
    // The meters beside the CPU numbered as a command's combined source numbers them.
    let mut beside_counters: Vec<CounterSpec> = Vec::new();
    for m in Mechanism::all().into_iter().chain(Mechanism::beside()) {
        let (r, notes) = open_mechanism(root, m, None, &params, platforms);
        let mut status = status_from(m, &r, notes);
        if status.beside {
            let before = beside_counters.len();
            for c in &mut status.counters {
                c.keep_apart(&beside_counters[..before]);
                beside_counters.push(c.clone());
            }
        }
        mechanisms.push(status);
        // The model has no counter and eBPF ticks on its own timer; the meters read beside the
        // CPU are polled on their own clock and say their update period in their notes.
        let own_clock =
            matches!(m, Mechanism::Model | Mechanism::Ebpf) || Mechanism::beside().contains(&m);
        if let (Ok(src), false) = (r, own_clock) {
            watched.push((mechanisms.len() - 1, src));
        }
    }
    let (gpu, gpu_source) =
        crate::nvml::probe_nvml_keeping_source(&crate::nvml::nvml_lib_from_env());
    let mut gpu = gpu;
    watch_counters(&mut mechanisms, watched, &mut gpu, gpu_source);
    let chosen = Mechanism::auto()
        .into_iter()
        .find(|&m| mechanisms.iter().any(|s| s.mechanism == m && s.usable));
    let provenance = chosen.map(|m| match m {
        Mechanism::Model => params.provenance(),
        Mechanism::Host => crate::host::read_host_info(&crate::host::host_dir(root))
            .map(|i| i.guest_provenance())
            .unwrap_or_else(|_| Provenance::measured(m)),
        m => Provenance::measured(m),
    });
    let mut warnings = Vec::new();
    let counters_of = |m: Mechanism| {
        mechanisms
            .iter()
            .find(|s| s.mechanism == m && s.usable)
            .map(|s| s.counters.as_slice())
    };
    if let (Some(p), Some(c)) = (
        counters_of(Mechanism::Perf),
        counters_of(Mechanism::Powercap),
    ) {
        warnings.extend(domain_disagreement(p, c));
    }
    ProbeReport {
        root: root.base().display().to_string(),
        cpu,
        mechanisms,
        chosen,
        provenance,
        warnings,
        gpu,
    }
}

/// How long probe watches the counters for their update periods: three updates of the slowest
/// NVML energy counter (100 ms).
const WATCH_BUDGET: std::time::Duration = std::time::Duration::from_millis(300);

/// Watches the usable hardware sources' counters (and the GPUs') together and records their
/// update periods in the reports.
fn watch_counters(
    mechanisms: &mut [MechanismStatus],
    mut watched: Vec<(usize, Box<dyn Source>)>,
    gpu: &mut crate::nvml::GpuProbe,
    mut gpu_source: Option<crate::nvml::NvmlSource>,
) {
    let mut sources: Vec<(&mut dyn Source, Vec<bool>)> = Vec::new();
    for (_, src) in watched.iter_mut() {
        let n = src.counters().len();
        let on = (0..n)
            .map(|i| is_hardware_counter(src.as_ref(), i))
            .collect();
        sources.push((src.as_mut(), on));
    }
    if let Some(g) = gpu_source.as_mut() {
        let on = (0..g.counters().len())
            .map(|i| is_hardware_counter(g, i))
            .collect();
        sources.push((g as &mut dyn Source, on));
    }
    if sources.is_empty() {
        return;
    }
    let mut periods = watch_update_periods(&mut sources, WATCH_BUDGET).into_iter();
    for (index, _) in &watched {
        mechanisms[*index].update_periods = periods.next().unwrap_or_default();
    }
    if gpu_source.is_some() {
        gpu.update_periods = periods.next().unwrap_or_default();
    }
}

/// A warning when perf and powercap list different (socket, domain) pairs.
///
/// Raffin & Trystram (2024, §IV-A) found the two disagreeing on an AMD EPYC server, with both
/// partly wrong; the safe subset is what both list.
pub(crate) fn domain_disagreement(
    perf: &[CounterSpec],
    powercap: &[CounterSpec],
) -> Option<String> {
    let set = |cs: &[CounterSpec]| -> BTreeSet<(u32, Domain)> {
        cs.iter().map(|c| (c.socket, c.domain)).collect()
    };
    let (p, c) = (set(perf), set(powercap));
    if p == c {
        return None;
    }
    let fmt = |s: &BTreeSet<(u32, Domain)>| {
        s.iter()
            .map(|(k, d)| format!("{d}@{k}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    Some(format!(
        "perf and powercap disagree on domains (perf: {}; powercap: {}); trust only domains both list (on AMD before Linux 5.17 perf advertised domains the CPU lacks)",
        fmt(&p),
        fmt(&c)
    ))
}

/// Opens the source `choice` asks for, restricted to `domains` when given.
///
/// With [`SourceChoice::Auto`] it tries perf, powercap, MSR and the model in turn and also
/// returns, for each mechanism passed over, one line saying why.
pub fn open_source(
    root: &SysRoot,
    choice: SourceChoice,
    domains: Option<&[Domain]>,
    params: ModelParams,
) -> Result<(Box<dyn Source>, Vec<String>), EnergyError> {
    match choice {
        SourceChoice::Only(m) if Mechanism::beside().contains(&m) => Err(EnergyError::Invalid(format!(
            "{m} is read beside the CPU's mechanism, not instead of it: it is read whenever usable; --domains platform,device reads the meters beside the CPU alone"
        ))),
        SourceChoice::Only(m) => open_mechanism(root, m, domains, &params, &[])
            .0
            .map(|s| (s, vec![])),
        SourceChoice::Auto => {
            let mut passed_over = Vec::new();
            for m in Mechanism::auto() {
                match open_mechanism(root, m, domains, &params, &[]).0 {
                    Ok(s) => return Ok((s, passed_over)),
                    Err(e) => passed_over.push(format!("{m}: {}", split_error(&e).0)),
                }
            }
            Err(EnergyError::Invalid(format!(
                "no mechanism could be opened: {}",
                passed_over.join("; ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Wrap;

    fn c(socket: u32, domain: Domain) -> CounterSpec {
        CounterSpec {
            socket,
            domain,
            unit_j: 1.0,
            wrap: Wrap::Unknown,
            origin: String::new(),
        }
    }

    #[test]
    fn disagreement_lists_both_sides() {
        let perf = [
            c(0, Domain::Package),
            c(0, Domain::Core),
            c(0, Domain::Dram),
        ];
        let pc = [c(0, Domain::Package), c(0, Domain::Core)];
        let w = domain_disagreement(&perf, &pc).unwrap();
        assert!(w.contains("perf: package@0,core@0,dram@0"), "{w}");
        assert!(w.contains("powercap: package@0,core@0"), "{w}");
        assert!(domain_disagreement(&pc, &pc).is_none());
    }

    #[test]
    fn source_choice_parses() {
        assert_eq!("auto".parse::<SourceChoice>().unwrap(), SourceChoice::Auto);
        assert_eq!(
            "msr".parse::<SourceChoice>().unwrap(),
            SourceChoice::Only(Mechanism::Msr)
        );
        assert!("rapl".parse::<SourceChoice>().unwrap_err().contains("auto"));
    }
}
