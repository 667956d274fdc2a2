//! The source registry: every mechanism wattio can read, in one table.
//!
//! A mechanism is one file that implements [`crate::Source`] (a fast counter read in the sampling
//! loop) or [`crate::ReadingSource`] (a slow meter polled on its own thread, handed over through
//! [`crate::PolledSource`]), plus one line below. `probe` lists what this table lists, in its
//! order; `--source` and the result files know a mechanism by the name it gives; `--source auto`
//! tries the CPU mechanisms marked `auto` in this order; the meters marked [`Role::Beside`] are
//! opened next to the CPU's whenever they are usable, so `measure`, `record`, `top` and `export`
//! all read them without a line of their own.

use crate::error::EnergyError;
use crate::opening::{OpenRequest, Opened};
use crate::types::Mechanism;
use serde::Deserialize;
use std::str::FromStr;

/// What a mechanism measures, which decides when it is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The CPU's energy (RAPL, the host's share, the model): one is chosen by `--source`;
    /// `auto` says whether `--source auto` may choose it.
    Cpu { auto: bool },
    /// GPUs through NVML, opened beside the CPU source by [`crate::open_with_gpus`] and probed
    /// apart ([`crate::probe_nvml`]).
    Gpu,
    /// A meter of other parts of the machine (the platform, a device), opened beside the CPU
    /// source whenever it is usable, and listed by `probe` after the CPU mechanisms.
    Beside,
}

/// One line of the registry.
pub struct Registered {
    pub mechanism: Mechanism,
    /// Other names `--source` accepts for it.
    pub aliases: &'static [&'static str],
    pub role: Role,
    pub open: fn(&OpenRequest) -> Opened,
}

/// Every mechanism, in the order `probe` lists them and `--source auto` tries them.
#[rustfmt::skip]
static REGISTRY: &[Registered] = &[
    Registered { mechanism: Mechanism::Perf, aliases: &["perf-events", "perf_event"], role: Role::Cpu { auto: true }, open: crate::perf::open_mechanism },
    Registered { mechanism: Mechanism::Ebpf, aliases: &["bpf"], role: Role::Cpu { auto: false }, open: crate::ebpf::open_mechanism },
    Registered { mechanism: Mechanism::Powercap, aliases: &[], role: Role::Cpu { auto: true }, open: crate::powercap::open_mechanism },
    Registered { mechanism: Mechanism::Msr, aliases: &[], role: Role::Cpu { auto: true }, open: crate::msr::open_mechanism },
    Registered { mechanism: Mechanism::Host, aliases: &[], role: Role::Cpu { auto: true }, open: crate::host::open_mechanism },
    Registered { mechanism: Mechanism::Model, aliases: &[], role: Role::Cpu { auto: true }, open: crate::model::open_mechanism },
    Registered { mechanism: Mechanism::Nvml, aliases: &[], role: Role::Gpu, open: crate::nvml::open_mechanism },
    Registered { mechanism: crate::hwmon::MECHANISM, aliases: &[], role: Role::Beside, open: crate::hwmon::open_mechanism },
    Registered { mechanism: crate::ipmi::MECHANISM, aliases: &["dcmi", "bmc"], role: Role::Beside, open: crate::ipmi::open_mechanism },
    Registered { mechanism: crate::redfish::MECHANISM, aliases: &[], role: Role::Beside, open: crate::redfish::open_mechanism },
];

/// The registry's entry for `mechanism`.
pub(crate) fn entry(mechanism: Mechanism) -> Option<&'static Registered> {
    REGISTRY.iter().find(|r| r.mechanism == mechanism)
}

/// Where `mechanism` stands in the registry (its sort order); past the end when unknown.
pub(crate) fn position(mechanism: Mechanism) -> usize {
    REGISTRY
        .iter()
        .position(|r| r.mechanism == mechanism)
        .unwrap_or(REGISTRY.len())
}

/// The registered mechanisms whose role `keep` accepts, in the registry's order.
pub(crate) fn mechanisms(keep: impl Fn(Role) -> bool) -> Vec<Mechanism> {
    REGISTRY
        .iter()
        .filter(|r| keep(r.role))
        .map(|r| r.mechanism)
        .collect()
}

/// The mechanism named `name` (or one of its aliases), case and surrounding space ignored.
pub(crate) fn lookup(name: &str) -> Option<Mechanism> {
    let name = name.trim().to_ascii_lowercase();
    REGISTRY
        .iter()
        .find(|r| r.mechanism.as_str() == name || r.aliases.contains(&name.as_str()))
        .map(|r| r.mechanism)
}

/// `perf, ebpf, …, hwmon or ipmi`: every name, for error messages.
pub(crate) fn names_for_humans() -> String {
    let names: Vec<&str> = REGISTRY.iter().map(|r| r.mechanism.as_str()).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// Opens `mechanism` through its registry entry.
pub(crate) fn open(mechanism: Mechanism, request: &OpenRequest) -> Opened {
    match entry(mechanism) {
        Some(r) => (r.open)(request),
        None => (
            Err(EnergyError::Invalid(format!(
                "unknown mechanism '{mechanism}': use {}",
                names_for_humans()
            ))),
            vec![],
        ),
    }
}

// Mechanism's order, names and lists are the registry's: they are implemented here, beside the
// table, so the type itself (types.rs) depends on nothing.
impl Mechanism {
    /// Every CPU mechanism, in the order `probe` lists them. GPUs (NVML) and the meters read
    /// beside the CPU (platform meters, devices) are listed apart ([`Mechanism::beside`]).
    pub fn all() -> Vec<Mechanism> {
        mechanisms(|role| matches!(role, Role::Cpu { .. }))
    }

    /// The order `--source auto` tries. eBPF reads the same counters as perf with more
    /// machinery and no gain (Raffin & Trystram 2024, §V-D), so it is used only on request. The
    /// host's share comes before the model: inside a VM it is a measurement where there is one.
    pub fn auto() -> Vec<Mechanism> {
        mechanisms(|role| matches!(role, Role::Cpu { auto: true }))
    }

    /// The mechanisms read beside the CPU's whenever they are usable (platform meters, devices).
    pub fn beside() -> Vec<Mechanism> {
        mechanisms(|role| matches!(role, Role::Beside))
    }
}

impl PartialOrd for Mechanism {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Mechanism {
    /// The registry's order (perf, ebpf, powercap, msr, host, model, nvml, then the meters read
    /// beside them), as the enum this type replaced sorted.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let key = |m: &Mechanism| (position(*m), m.as_str());
        key(self).cmp(&key(other))
    }
}

impl FromStr for Mechanism {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        lookup(s).ok_or_else(|| {
            format!(
                "unknown mechanism '{}': use {}",
                s.trim(),
                names_for_humans()
            )
        })
    }
}

impl<'de> Deserialize<'de> for Mechanism {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_order_is_the_documented_one() {
        let mut names: Vec<&str> = REGISTRY
            .iter()
            .flat_map(|r| std::iter::once(r.mechanism.as_str()).chain(r.aliases.iter().copied()))
            .collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "a name or alias is registered twice");
        let auto: Vec<&str> = Mechanism::auto().iter().map(|m| m.as_str()).collect();
        assert_eq!(auto, ["perf", "powercap", "msr", "host", "model"]);
        let all: Vec<&str> = Mechanism::all().iter().map(|m| m.as_str()).collect();
        assert_eq!(all, ["perf", "ebpf", "powercap", "msr", "host", "model"]);
        assert_eq!(lookup(" BMC "), Some(crate::ipmi::MECHANISM));
        assert!(names_for_humans().ends_with("hwmon, ipmi or redfish"));
    }
}
