//! What every mechanism's opener shares: the request, its result, the refusal of dead
//! counters, the restriction to `--domains`, and an error split into its reason and its fix.

use crate::error::EnergyError;
use crate::model_params::ModelParams;
use crate::root::SysRoot;
use crate::types::{CounterSpec, Domain, Provenance};
use crate::Source;
use std::collections::BTreeSet;

/// What opening a mechanism needs.
pub struct OpenRequest<'a> {
    pub root: &'a SysRoot,
    /// Only counters of these domains (all when `None`).
    pub domains: Option<&'a [Domain]>,
    /// The model, for the model mechanism.
    pub params: &'a ModelParams,
    /// The platform meters named on the command line (`--platform redfish://BMC`).
    pub platforms: &'a [crate::PlatformUrl],
}

/// A source, or why it cannot be opened; and what discovery noticed on the way (skipped zones,
/// how the model was chosen), which `probe` shows either way.
pub type Opened = (Result<Box<dyn Source>, EnergyError>, Vec<String>);

/// An error as `probe` shows it: the reason, and the fix where it has one.
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
pub(crate) fn check_alive(mut src: Box<dyn Source>) -> Result<Box<dyn Source>, EnergyError> {
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
    fn energy_between(&self, i: usize, t0_ns: u64, t1_ns: u64) -> Option<(f64, f64)> {
        self.inner.energy_between(*self.keep.get(i)?, t0_ns, t1_ns)
    }
    fn late_timing(&self, i: usize) -> Option<crate::LateTiming> {
        self.inner.late_timing(*self.keep.get(i)?)
    }
}
