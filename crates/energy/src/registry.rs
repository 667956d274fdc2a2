//! The source registry: every mechanism wattio can read, in one table.
//!
//! A mechanism is one file that implements [`crate::Source`] (a fast counter read in the sampling
//! loop) or [`crate::ReadingSource`] (a slow meter polled on its own thread, handed over through
//! [`crate::PolledSource`]), plus one line below. `probe` lists what this table lists, in its
//! order; `--source` and the result files know a mechanism by the name it gives; `--source auto`
//! tries the CPU mechanisms marked `auto` in this order; the meters marked [`Role::Beside`] are
//! opened next to the CPU's whenever they are usable, so `measure`, `record`, `top` and `export`
//! all read them without a line of their own.

use crate::discover;
use crate::error::EnergyError;
use crate::model::ModelParams;
use crate::root::SysRoot;
use crate::types::{Domain, Mechanism};
use crate::Source;

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

/// What opening a mechanism needs.
pub struct OpenRequest<'a> {
    pub root: &'a SysRoot,
    /// Only counters of these domains (all when `None`).
    pub domains: Option<&'a [Domain]>,
    /// The model, for the model mechanism.
    pub params: &'a ModelParams,
}

/// A source, or why it cannot be opened; and what discovery noticed on the way (skipped zones,
/// how the model was chosen), which `probe` shows either way.
pub type Opened = (Result<Box<dyn Source>, EnergyError>, Vec<String>);

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
    Registered { mechanism: Mechanism::Perf, aliases: &["perf-events", "perf_event"], role: Role::Cpu { auto: true }, open: discover::open_perf },
    Registered { mechanism: Mechanism::Ebpf, aliases: &["bpf"], role: Role::Cpu { auto: false }, open: discover::open_ebpf },
    Registered { mechanism: Mechanism::Powercap, aliases: &[], role: Role::Cpu { auto: true }, open: discover::open_powercap },
    Registered { mechanism: Mechanism::Msr, aliases: &[], role: Role::Cpu { auto: true }, open: discover::open_msr },
    Registered { mechanism: Mechanism::Host, aliases: &[], role: Role::Cpu { auto: true }, open: discover::open_host },
    Registered { mechanism: Mechanism::Model, aliases: &[], role: Role::Cpu { auto: true }, open: discover::open_model },
    Registered { mechanism: Mechanism::Nvml, aliases: &[], role: Role::Gpu, open: discover::refuse_nvml_as_cpu },
    Registered { mechanism: crate::hwmon::MECHANISM, aliases: &[], role: Role::Beside, open: crate::hwmon::open },
    Registered { mechanism: crate::ipmi::MECHANISM, aliases: &["dcmi", "bmc"], role: Role::Beside, open: crate::ipmi::open },
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
        assert!(names_for_humans().ends_with("hwmon or ipmi"));
    }
}
