//! One attributed interval as `top` shows it and `top --once --json` prints it: the
//! attribution's interval with its provenance, the meters and devices read beside the CPU, and
//! its CO₂e where a carbon intensity was given.

use crate::meter::unix_now;
use serde::Serialize;
use wattio_energy::attribution::{attributed_label, By, IdlePolicy, Interval};
use wattio_energy::{optional_co2e_slot, CarbonIntensity, Co2eFigures, Co2eSlot, Provenance};

/// One attributed interval with its provenance: what `wattio top --once --json` prints (the
/// interval's own fields, [`Interval`], flattened beside these).
#[derive(Debug, Clone, Serialize)]
pub struct AttributedInterval {
    /// Seconds since the Unix epoch at the end of the interval.
    pub timestamp: f64,
    pub by: By,
    pub mechanism: String,
    pub estimated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// E.g. `measured (perf), attributed (cpu-time share)`.
    pub label: String,
    pub idle_policy: IdlePolicy,
    #[serde(flatten)]
    pub interval: Interval,
    /// With a carbon intensity: the CO₂e of the interval's figures (each entry has its own).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub co2e: Option<IntervalCo2e>,
    /// The platform meters and devices read beside the CPU over the interval, each on its own
    /// (never in `total_j`, never attributed to processes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub beside: Vec<crate::DomainEnergy>,
    /// Since start: the whole machine as each platform meter read it, and the rest RAPL and
    /// the GPU meters do not see where it is sound ([`crate::MachineView`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<crate::MachineView>,
    /// Each disk's estimated energy interval over the interval and its split by bytes, where
    /// `top` meters the disks ([`crate::DeviceIntervals`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<wattio_devices::DiskEnergyRow>,
    /// Each network interface's estimated energy interval over the interval (link state and
    /// speed, bytes; no per-process split), where `top` meters the devices.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nics: Vec<wattio_devices::NicEnergyRow>,
}

/// The CO₂e of an interval's `total_j` and `idle_j`, and the intensity used.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalCo2e {
    pub co2e_g: f64,
    pub idle_co2e_g: f64,
    /// All GPUs' energy of the interval, where GPUs are read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_co2e_g: Option<f64>,
    pub carbon_intensity: CarbonIntensity,
}

impl AttributedInterval {
    pub fn new(interval: Interval, by: By, policy: IdlePolicy, p: &Provenance) -> Self {
        AttributedInterval {
            timestamp: unix_now(),
            by,
            mechanism: p.mechanism.to_string(),
            estimated: p.estimated,
            model: p.model.clone(),
            label: attributed_label(&p.label()),
            idle_policy: policy,
            interval,
            co2e: None,
            beside: Vec::new(),
            machine: None,
            disks: Vec::new(),
            nics: Vec::new(),
        }
    }
}

impl Co2eFigures for AttributedInterval {
    /// Each entry's figures, then the interval's total, idle part and all GPUs' energy.
    fn co2e_slots(&mut self, intensity: &CarbonIntensity, each: &mut dyn FnMut(Co2eSlot<'_>)) {
        for e in &mut self.interval.entries {
            e.co2e_slots(intensity, each);
        }
        let i = &self.interval;
        let gpus_j = (!i.gpus.is_empty()).then(|| i.gpus.iter().map(|g| g.energy_j).sum());
        let c = self.co2e.insert(IntervalCo2e {
            co2e_g: 0.0,
            idle_co2e_g: 0.0,
            gpu_co2e_g: None,
            carbon_intensity: intensity.clone(),
        });
        each(Co2eSlot {
            joules: i.total_j,
            grams: &mut c.co2e_g,
        });
        each(Co2eSlot {
            joules: i.idle_j,
            grams: &mut c.idle_co2e_g,
        });
        optional_co2e_slot(gpus_j, &mut c.gpu_co2e_g, each);
    }
}
