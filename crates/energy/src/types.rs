//! Names shared by every mechanism: domains, mechanisms, provenance, counter specifications.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What part of the machine a counter or reading covers: its scope. A RAPL domain (or the
/// model's stand-in for one), a whole GPU board (NVML), the whole machine as a platform meter
/// sees it (a BMC, the ACPI power meter), or one device or board rail (hwmon).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Domain {
    /// The whole processor package (socket).
    Package,
    /// The cores of a package (PP0); included in `Package`.
    Core,
    /// The uncore / integrated GPU (PP1); included in `Package`.
    Uncore,
    /// Memory attached to a package; *not* included in `Package`.
    Dram,
    /// The platform (whole SoC / laptop); one per machine, includes everything else.
    Psys,
    /// A discrete NVIDIA GPU, read through NVML; the counter's `socket` is the GPU's index.
    /// Never in the CPU total: reported beside it (`gpu_j`).
    Gpu,
    /// The whole machine, from a platform meter outside the CPU (a BMC's DCMI power reading,
    /// the ACPI power meter): it includes every other domain, so it is never added to them.
    Platform,
    /// One device or board rail (an hwmon channel of a driver that is neither a platform meter
    /// nor a CPU or GPU), reported on its own: it may overlap the other domains.
    Device,
}

/// A reading's scope is its domain: the part of the machine it covers.
pub type Scope = Domain;

impl Domain {
    /// Every domain, in the order reports list them.
    pub const ALL: [Domain; 8] = [
        Domain::Package,
        Domain::Core,
        Domain::Uncore,
        Domain::Dram,
        Domain::Psys,
        Domain::Gpu,
        Domain::Platform,
        Domain::Device,
    ];

    /// The short lowercase name used in CSV, JSON and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Domain::Package => "package",
            Domain::Core => "core",
            Domain::Uncore => "uncore",
            Domain::Dram => "dram",
            Domain::Psys => "psys",
            Domain::Gpu => "gpu",
            Domain::Platform => "platform",
            Domain::Device => "device",
        }
    }

    /// Whether this domain counts towards a machine total (`package + dram`).
    /// Core and uncore are inside package; psys overlaps everything and is reported apart; GPUs
    /// are reported beside the total.
    pub fn counts_in_total(self) -> bool {
        matches!(self, Domain::Package | Domain::Dram)
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Domain {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "package" | "pkg" => Ok(Domain::Package),
            "core" | "cores" | "pp0" => Ok(Domain::Core),
            // `gpu` was once an alias of uncore (RAPL's PP1, the integrated GPU); it now names
            // discrete GPUs read through NVML.
            "uncore" | "pp1" => Ok(Domain::Uncore),
            "dram" | "ram" => Ok(Domain::Dram),
            "psys" => Ok(Domain::Psys),
            "gpu" | "gpus" | "nvml" => Ok(Domain::Gpu),
            // `platform` was once an alias of psys (RAPL's platform domain); it now names the
            // platform meters outside the CPU (BMC, ACPI power meter).
            "platform" | "machine" => Ok(Domain::Platform),
            "device" | "devices" => Ok(Domain::Device),
            other => Err(format!(
                "unknown domain '{other}': use package, core, uncore, dram, psys, gpu, platform or device"
            )),
        }
    }
}

/// How energy figures were obtained: the name of a mechanism in the source registry
/// (`registry.rs`), which says what each one reads, in which order `--source auto` tries them and
/// how to open it. A mechanism is its lowercase name, written as such in CSV, JSON and metrics;
/// its order is the registry's.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mechanism(&'static str);

// The built-in mechanisms keep the names they had as enum variants, so `Mechanism::Perf` reads as
// before; a mechanism added later is a constant in its own file and a line in the registry.
#[allow(non_upper_case_globals)]
impl Mechanism {
    /// The perf-events `power` PMU (`perf_event_open`).
    pub const Perf: Mechanism = Mechanism("perf");
    /// The same perf events read in the kernel by a BPF program on a timer, handed to user
    /// space through a ring buffer (Raffin & Trystram 2024, §III-F). Only on request (feature
    /// `ebpf`).
    pub const Ebpf: Mechanism = Mechanism("ebpf");
    /// The powercap sysfs tree (`/sys/class/powercap/intel-rapl*`).
    pub const Powercap: Mechanism = Mechanism("powercap");
    /// RAPL model-specific registers through `/dev/cpu/N/msr`.
    pub const Msr: Mechanism = Mechanism("msr");
    /// Inside a VM: the energy the host measured and attributed to this VM, published by the
    /// host's `wattio vm publish` in a shared tree ([`crate::HostSource`]).
    pub const Host: Mechanism = Mechanism("host");
    /// A utilisation model: figures are estimates, never measurements.
    pub const Model: Mechanism = Mechanism("model");
    /// The NVIDIA management library (GPUs only): `nvmlDeviceGetTotalEnergyConsumption`, or
    /// `nvmlDeviceGetPowerUsage` integrated over time where that counter is not supported.
    pub const Nvml: Mechanism = Mechanism("nvml");

    /// A mechanism of this name; its registry entry makes it known to `--source`, `probe` and
    /// the result files.
    pub(crate) const fn named(name: &'static str) -> Mechanism {
        Mechanism(name)
    }

    /// The lowercase name used on the command line and in outputs.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl fmt::Debug for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for Mechanism {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

/// Where a figure comes from. Nothing downstream may drop it.
///
/// The one provenance type of wattio: the meter attaches it to every counter and the report
/// reads it back from result files.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Provenance {
    /// The mechanism that produced the figure.
    pub mechanism: Mechanism,
    /// True for model estimates, false for hardware counters.
    pub estimated: bool,
    /// For estimates: the model's name and coefficients, e.g.
    /// `ccf-linear(min=0.74W,max=3.5W per vCPU)`. For measurements `None`, except for a
    /// measurement that is not a counter's reading, which says how it was made: `power,
    /// integrated` for NVML power readings integrated over time ([`Provenance::integrated_power`]).
    /// Left out of JSON when `None`, as the result types that embed a provenance always wrote it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<String>,
}

impl Provenance {
    /// A hardware measurement by `mechanism`.
    pub fn measured(mechanism: Mechanism) -> Self {
        Provenance {
            mechanism,
            estimated: false,
            model: None,
        }
    }

    /// A measurement by `mechanism` of power, integrated over time by wattio (NVML's
    /// `nvmlDeviceGetPowerUsage` where the GPU has no energy counter): not an estimate, but not
    /// a counter either, and labelled so: `measured (nvml power, integrated)`.
    pub fn integrated_power(mechanism: Mechanism) -> Self {
        Provenance {
            mechanism,
            estimated: false,
            model: Some(INTEGRATED_POWER.into()),
        }
    }

    /// An estimate by the utilisation model named `model` (its name and coefficients).
    pub fn estimated(model: impl Into<String>) -> Self {
        Provenance {
            mechanism: Mechanism::Model,
            estimated: true,
            model: Some(model.into()),
        }
    }

    /// A short label for humans: `measured (perf)`, `measured (nvml power, integrated)` or
    /// `estimated (model: ccf-linear(...))` ([`provenance_label`]).
    pub fn label(&self) -> String {
        provenance_label(
            self.mechanism.as_str(),
            self.estimated,
            self.model.as_deref(),
        )
    }

    /// The labels of several figures' provenances, each once, joined as one
    /// ([`join_provenance_labels`]).
    pub fn join_labels<'a>(provenances: impl IntoIterator<Item = &'a Provenance>) -> String {
        join_provenance_labels(provenances.into_iter().map(Provenance::label))
    }
}

// The one wording of provenance lives with the result schemas, which the report reads without
// this crate.
pub use wattio_results::{join_provenance_labels, provenance_label};

/// The `model` of a measurement made by integrating power readings ([`Provenance::integrated_power`]).
pub(crate) const INTEGRATED_POWER: &str = "power, integrated";

/// How a raw counter wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wrap {
    /// The counter counts `0..=max` then restarts at 0.
    AtMax(u64),
    /// The wrap limit could not be read: a decrease cannot be corrected and is reported as an
    /// error instead of being turned into invented energy.
    Unknown,
    /// The driver does not say where its counter wraps, but it comes from a register of a known
    /// width: a decrease is taken for one wrap at this limit only where the energy it implies
    /// is one a device can draw over the step (checked by the reading's integrator); values
    /// above the limit are read as they are (a driver that widens the register itself).
    LikelyAt(u64),
}

/// One energy counter of a [`crate::Source`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterSpec {
    /// Package (socket) number; psys is attached to socket 0.
    pub socket: u32,
    /// What the counter covers.
    pub domain: Domain,
    /// Joules per raw step.
    pub unit_j: f64,
    /// The raw counter's wrap limit.
    pub wrap: Wrap,
    /// Where it is read from (a sysfs path, an MSR address, a perf event), for `probe`.
    pub origin: String,
}

impl CounterSpec {
    /// How messages name the counter: `socket 0 package`, `gpu 1` for a GPU (whose
    /// `socket` is its NVML index), `platform 0` or `device 3` for the meters read beside the
    /// CPU (the number tells two of them apart).
    pub fn name(&self) -> String {
        match self.domain {
            Domain::Gpu | Domain::Platform | Domain::Device => {
                format!("{} {}", self.domain.as_str(), self.socket)
            }
            d => format!("socket {} {}", self.socket, d.as_str()),
        }
    }

    /// Moves a platform meter's, GPU's or device's number past those of the same scope in
    /// `earlier` (the counters of the sources before it), so two meters of one scope are never
    /// added up and an hwmon GPU never takes an NVML GPU's index.
    pub(crate) fn keep_apart(&mut self, earlier: &[CounterSpec]) {
        if !matches!(self.domain, Domain::Platform | Domain::Device | Domain::Gpu) {
            return;
        }
        while earlier
            .iter()
            .any(|s| s.domain == self.domain && s.socket == self.socket)
        {
            self.socket += 1;
        }
    }

    /// Seconds until this counter wraps at a constant `watts` (None when the limit is unknown).
    pub fn seconds_to_wrap(&self, watts: f64) -> Option<f64> {
        match self.wrap {
            Wrap::AtMax(max) if watts > 0.0 => Some((max as f64 + 1.0) * self.unit_j / watts),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_and_mechanisms_round_trip_their_names() {
        for d in Domain::ALL {
            assert_eq!(d.as_str().parse::<Domain>().unwrap(), d);
        }
        for m in Mechanism::all().into_iter().chain(Mechanism::beside()) {
            assert_eq!(m.as_str().parse::<Mechanism>().unwrap(), m);
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(serde_json::from_str::<Mechanism>(&json).unwrap(), m);
        }
        assert!(Mechanism::Perf < Mechanism::Model && Mechanism::Model < Mechanism::Nvml);
        assert_eq!("nvml".parse::<Mechanism>().unwrap(), Mechanism::Nvml);
        assert_eq!("gpu".parse::<Domain>().unwrap(), Domain::Gpu);
        assert_eq!("pp1".parse::<Domain>().unwrap(), Domain::Uncore);
        assert!("watts".parse::<Domain>().unwrap_err().contains("gpu"));
        assert!("rapl"
            .parse::<Mechanism>()
            .unwrap_err()
            .contains("powercap"));
    }

    #[test]
    fn estimates_name_their_model_and_a_lost_model_says_so() {
        assert_eq!(
            Provenance::estimated("ccf-linear(min=0.74W,max=3.5W per vCPU)").label(),
            "estimated (model: ccf-linear(min=0.74W,max=3.5W per vCPU))"
        );
        assert_eq!(
            Provenance::measured(Mechanism::Perf).label(),
            "measured (perf)"
        );
        // A row whose model cell is empty: the label must not read like a named model.
        assert_eq!(
            provenance_label("model", true, Some("")),
            "estimated (model, model not recorded)"
        );
        assert_eq!(provenance_label("msr", false, Some("")), "measured (msr)");
    }

    #[test]
    fn integrated_power_is_labelled_as_such_and_not_as_an_estimate() {
        let p = Provenance::integrated_power(Mechanism::Nvml);
        assert!(!p.estimated);
        assert_eq!(p.label(), "measured (nvml power, integrated)");
        assert_eq!(
            Provenance::measured(Mechanism::Nvml).label(),
            "measured (nvml)"
        );
    }

    #[test]
    fn only_package_and_dram_count_in_the_total() {
        let counted: Vec<_> = Domain::ALL
            .into_iter()
            .filter(|d| d.counts_in_total())
            .collect();
        assert_eq!(counted, vec![Domain::Package, Domain::Dram]);
    }

    #[test]
    fn wrap_time_at_esu_14_and_200_watts_is_about_1311_seconds() {
        // 2^32 raw steps of 2^-14 J = 262 144 J; at 200 W that is 1310.72 s. The counter is the
        // low 32 bits of the energy status MSR (Intel SDM vol. 4, MSR_PKG_ENERGY_STATUS).
        let spec = CounterSpec {
            socket: 0,
            domain: Domain::Package,
            unit_j: 2f64.powi(-14),
            wrap: Wrap::AtMax(u32::MAX as u64),
            origin: String::new(),
        };
        let s = spec.seconds_to_wrap(200.0).unwrap();
        assert!((s - 1310.72).abs() < 1e-6, "{s}");
    }
}
