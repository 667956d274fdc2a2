//! Probing every mechanism and opening the best usable one.
//!
//! Discovery never fails because an unrelated mechanism is missing: each mechanism is probed on
//! its own and reports whether it can be used, why not, and how to fix it. The automatic order is
//! perf → powercap → MSR → model (Raffin & Trystram 2024 §V-D recommend perf-events; MSR is the
//! last hardware resort; the model only where no counter exists). eBPF reads perf's counters
//! through more machinery for no gain (same section), so auto never picks it: only on request.

use crate::error::EnergyError;
use crate::model::{ModelParams, ModelSource};
use crate::msr::MsrSource;
use crate::perf::{self, PerfSource};
use crate::powercap::{self, PowercapSource};
use crate::registry::{self, OpenRequest, Opened};
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

pub(crate) fn split_error(e: &EnergyError) -> (String, Option<String>) {
    match e {
        EnergyError::Unusable { reason, fix, .. } => (reason.clone(), Some(fix.clone())),
        EnergyError::Permission { path, fix } => (
            format!("{}: permission denied", path.display()),
            Some(fix.clone()),
        ),
        EnergyError::Missing { path, fix } => {
            (format!("{}: not found", path.display()), Some(fix.clone()))
        }
        EnergyError::Malformed { fix, .. } => (e.to_string(), Some(fix.clone())),
        other => (other.to_string(), None),
    }
}

/// Refuses a hardware source whose counters all read zero and stay at zero for 50 ms.
///
/// Some hypervisors expose RAPL events whose counters never move; using them gives the "silent
/// 0 W" that issue trackers are full of (scaphandre #214, #351). A live counter is essentially
/// never exactly zero, so the 50 ms wait only happens in the suspicious case.
fn check_alive(mut src: Box<dyn Source>) -> Result<Box<dyn Source>, EnergyError> {
    let n = src.counters().len();
    let mut raw = vec![0u64; n];
    src.read_raw(&mut raw)?;
    if raw.iter().any(|&v| v != 0) {
        return Ok(src);
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    src.read_raw(&mut raw)?;
    if raw.iter().any(|&v| v != 0) {
        return Ok(src);
    }
    Err(EnergyError::Unusable {
        mechanism: src.provenance().mechanism,
        reason: format!(
            "its {} counter(s) read 0 and did not advance in 50 ms: the energy events are exposed but not backed by working counters (typical of VMs)",
            n
        ),
        fix: "nothing to fix on this machine: use bare metal for measurements; wattio falls back to the labelled model".into(),
    })
}

/// NVML reads GPUs: it is opened beside the CPU source, never as one.
pub(crate) fn refuse_nvml_as_cpu(_: &OpenRequest) -> Opened {
    (
        Err(EnergyError::Unusable {
            mechanism: Mechanism::Nvml,
            reason: "nvml reads GPUs, not the CPU".into(),
            fix: "read GPUs with --domains gpu (or --source nvml for GPUs alone)".into(),
        }),
        vec![],
    )
}

/// The perf-events `power` PMU.
pub(crate) fn open_perf(req: &OpenRequest) -> Opened {
    let (root, domains) = (req.root, req.domains);
    match perf::discover_power_pmu(root) {
        Ok(pmu) => {
            let notes = pmu.notes.clone();
            if pmu.events.is_empty() {
                return (
                    Err(EnergyError::Unusable {
                        mechanism: Mechanism::Perf,
                        reason: "the power PMU advertises no usable energy event".into(),
                        fix: perf::MISSING_FIX.into(),
                    }),
                    notes,
                );
            }
            let r = PerfSource::open(root, &pmu, domains).map(|s| Box::new(s) as Box<dyn Source>);
            (
                r.and_then(check_alive).and_then(|s| filter(s, domains)),
                notes,
            )
        }
        Err(e) => (Err(e), vec![]),
    }
}

/// The powercap sysfs tree.
pub(crate) fn open_powercap(req: &OpenRequest) -> Opened {
    match powercap::discover_powercap(req.root) {
        Ok(d) => {
            let mut notes = d.notes.clone();
            for z in &d.zones {
                if let Err(why) = &z.max_uj {
                    notes.push(format!("{}: max_energy_range_uj unusable ({why})", z.id));
                }
            }
            let r = PowercapSource::open(&d.zones).map(|s| Box::new(s) as Box<dyn Source>);
            (
                r.and_then(check_alive).and_then(|s| filter(s, req.domains)),
                notes,
            )
        }
        Err(e) => (Err(e), vec![]),
    }
}

/// RAPL's model-specific registers.
pub(crate) fn open_msr(req: &OpenRequest) -> Opened {
    match MsrSource::open(req.root) {
        Ok(s) => {
            let notes = s.notes.clone();
            (
                check_alive(Box::new(s)).and_then(|s| filter(s, req.domains)),
                notes,
            )
        }
        Err(e) => (Err(e), vec![]),
    }
}

/// In a guest, the share its host published.
pub(crate) fn open_host(req: &OpenRequest) -> Opened {
    (
        crate::host::HostSource::open(req.root)
            .map(|s| Box::new(s) as Box<dyn Source>)
            .and_then(|s| filter(s, req.domains)),
        vec![],
    )
}

/// The utilisation model.
pub(crate) fn open_model(req: &OpenRequest) -> Opened {
    let r = ModelSource::open(req.root, req.params.clone()).map(|s| Box::new(s) as Box<dyn Source>);
    // How the model was chosen (tdp-curve, or why it fell back to ccf-linear).
    (
        r.and_then(|s| filter(s, req.domains)),
        req.params.notes.clone(),
    )
}

/// Opens one mechanism through the registry, returning its source and discovery notes.
fn open_mechanism(
    root: &SysRoot,
    mechanism: Mechanism,
    domains: Option<&[Domain]>,
    params: &ModelParams,
) -> Opened {
    registry::open(
        mechanism,
        &OpenRequest {
            root,
            domains,
            params,
        },
    )
}

/// Opens the eBPF mechanism. Where it cannot be used for want of RAPL, a note says whether BPF
/// itself would work here, so a user knows what a machine with RAPL would need.
pub(crate) fn open_ebpf(req: &OpenRequest) -> Opened {
    let (root, domains) = (req.root, req.domains);
    if !crate::ebpf::EBPF_BUILT_IN {
        return (Err(crate::ebpf::not_built()), vec![]);
    }
    let bpf_note = || {
        match crate::ebpf::bpf_check(root) {
        Ok(()) => "BPF itself works here (the program loads and attaches to a cpu-clock timer); only RAPL is missing".to_string(),
        Err(e) => format!("BPF would fail here too: {}", split_error(&e).0),
    }
    };
    let unusable = |reason: String| {
        EnergyError::Unusable {
        mechanism: Mechanism::Ebpf,
        reason,
        fix: "eBPF reads RAPL through the perf `power` PMU, which this kernel does not expose (VM, or `sudo modprobe rapl`); use --source powercap or msr".into(),
    }
    };
    match perf::discover_power_pmu(root) {
        Ok(pmu) if pmu.events.is_empty() => (
            Err(unusable(
                "the power PMU advertises no usable energy event".into(),
            )),
            [pmu.notes, vec![bpf_note()]].concat(),
        ),
        Ok(pmu) => {
            let r = crate::ebpf::open(root, &pmu, domains);
            (
                r.and_then(check_alive).and_then(|s| filter(s, domains)),
                pmu.notes,
            )
        }
        Err(e) => (
            Err(unusable(format!("no RAPL perf PMU: {}", split_error(&e).0))),
            vec![bpf_note()],
        ),
    }
}

/// Probes every mechanism under `root`.
pub fn discover(root: &SysRoot, params: ModelParams) -> ProbeReport {
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
        let (r, notes) = open_mechanism(root, m, None, &params);
        let mut status = status_from(m, &r, notes);
        if status.beside {
            let before = beside_counters.len();
            for c in &mut status.counters {
                crate::combined::keep_apart(&beside_counters[..before], c);
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
        SourceChoice::Only(m) => open_mechanism(root, m, domains, &params)
            .0
            .map(|s| (s, vec![])),
        SourceChoice::Auto => {
            let mut passed_over = Vec::new();
            for m in Mechanism::auto() {
                match open_mechanism(root, m, domains, &params).0 {
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

/// A source restricted to some domains.
struct Filtered {
    inner: Box<dyn Source>,
    keep: Vec<usize>,
    specs: Vec<CounterSpec>,
    scratch: Vec<u64>,
}

pub(crate) fn filter(
    inner: Box<dyn Source>,
    domains: Option<&[Domain]>,
) -> Result<Box<dyn Source>, EnergyError> {
    let Some(domains) = domains else {
        return Ok(inner);
    };
    let keep: Vec<usize> = inner
        .counters()
        .iter()
        .enumerate()
        .filter(|(_, c)| domains.contains(&c.domain))
        .map(|(i, _)| i)
        .collect();
    if keep.len() == inner.counters().len() {
        return Ok(inner);
    }
    if keep.is_empty() {
        let have: BTreeSet<_> = inner.counters().iter().map(|c| c.domain.as_str()).collect();
        return Err(EnergyError::Unusable {
            mechanism: inner.provenance().mechanism,
            reason: format!(
                "none of the requested domains is available (it has: {})",
                have.into_iter().collect::<Vec<_>>().join(", ")
            ),
            fix: "pick --domains from what `wattio probe` lists".into(),
        });
    }
    let specs = keep.iter().map(|&i| inner.counters()[i].clone()).collect();
    let scratch = vec![0; inner.counters().len()];
    Ok(Box::new(Filtered {
        inner,
        keep,
        specs,
        scratch,
    }))
}

impl Source for Filtered {
    fn provenance(&self) -> &Provenance {
        self.inner.provenance()
    }
    fn counter_provenance(&self, i: usize) -> &Provenance {
        self.inner.counter_provenance(self.keep[i])
    }
    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }
    fn set_rate_hz(&mut self, hz: f64) -> Result<(), EnergyError> {
        self.inner.set_rate_hz(hz)
    }
    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        self.inner.read_raw(&mut self.scratch)?;
        for (o, &i) in out.iter_mut().zip(&self.keep) {
            *o = self.scratch[i];
        }
        Ok(())
    }
    fn take_counter_errors(&mut self) -> Vec<String> {
        self.inner.take_counter_errors()
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
