//! Energy counters for wattio.
//!
//! Four mechanisms read RAPL: the perf-events `power` PMU ([`PerfSource`], found by
//! [`discover_power_pmu`]), the same perf events read in the kernel by a BPF program on a timer
//! (`EbpfSource`, Cargo feature `ebpf`, only on request; [`EBPF_BUILT_IN`] says whether this
//! build has it), the powercap sysfs tree ([`PowercapSource`], zones from [`discover_powercap`])
//! and raw RAPL model-specific registers ([`MsrSource`]); where no counter can be read, a
//! utilisation model ([`ModelSource`] with [`ModelParams`], chosen by [`ModelChoice`], calibrated
//! into a [`ModelFile`]) estimates, and every such figure is labelled *estimated*
//! ([`HOST_ESTIMATE_SCOPE`]).
//!
//! Each mechanism is a [`Source`]: it lists its counters ([`CounterSpec`]: socket, [`Domain`],
//! unit, [`Wrap`] limit) and reads their raw values. The [`Accumulator`] turns successive raw
//! readings into joules ([`CounterDelta`]), correcting counter wrap with each mechanism's own
//! limit ([`max_safe_period`]). [`discover`] probes every mechanism ([`ProbeReport`],
//! [`MechanismStatus`]), says why each can or cannot be used and how to fix it, and
//! [`open_source`] opens the best one or the [`SourceChoice`] asked for. Where a figure comes from
//! is its [`Provenance`] ([`Mechanism`], [`provenance_label`]).
//!
//! Not every meter is a fast counter. A [`Reading`] says what it is ([`ReadingKind`]: a counter,
//! an instantaneous power, a window average, a model's estimate, an interval), when it was
//! measured and when it arrived, and its channel's [`Scope`]; an [`Integrator`] turns a channel's
//! readings into joules by the rule of its kind. Slow meters (a BMC's DCMI power reading through
//! [`IpmiMeter`], asked in-band through the kernel's `/dev/ipmi0` or through ipmitool, the
//! hwmon channels of [`HwmonMeter`]) are [`ReadingSource`]s polled on their own thread by a
//! [`PolledSource`], so they never delay the sampling loop. Every mechanism is one
//! line of the source registry (`registry.rs`), which `probe`, `--source` and the
//! meters read beside the CPU's ([`Role::Beside`]) all follow.
//!
//! GPUs are read through NVML ([`NvmlSource`], the NVIDIA management library loaded at run time;
//! [`probe_nvml`]) and can be read together with any CPU mechanism ([`open_with_gpus`], a
//! [`CombinedSource`]); each counter then says its own provenance
//! ([`Source::counter_provenance`]).
//!
//! Every path under `/sys`, `/dev` and `/proc` is resolved through [`SysRoot`], which honours the
//! `WATTIO_ROOT` environment variable so fixture trees (crate `wattio-fixture`) can stand in for hardware.
//! The machine itself is described by [`Machine`], [`CpuId`] and [`online_cpu_count`].
//!
//! One module stays public as a namespace: [`attribution`] (whose energy is it: CPU-time
//! readers, cgroups and the split of a window's energy, each a family of related functions).

mod accumulate;
mod arch;
pub mod attribution;
mod carbon;
mod combined;
mod cpu;
mod dcmi;
mod discover;
// Without the `ebpf` feature, the record bookkeeping only the BPF loader uses is still built, for
// its unit tests.
#[cfg_attr(not(feature = "ebpf"), allow(dead_code))]
mod ebpf;
mod error;
mod host;
mod hwmon;
mod ipmi;
mod ipmi_device;
mod machine;
mod model;
mod model_choice;
mod model_file;
mod model_params;
mod msr;
mod nvml;
mod opening;
mod perf;
mod polled;
mod powercap;
mod reading;
mod redfish;
mod registry;
mod root;
mod tdp;
mod types;
mod update_period;
mod wrap;

pub use accumulate::{Accumulator, CounterDelta};
pub use carbon::{
    format_co2e, optional_co2e_slot, regions, CarbonError, CarbonIntensity, Co2e, Co2eFigures,
    Co2eSlot, Region,
};
pub use combined::{
    open_all, open_beside, open_beside_with, open_with_gpus, BesideMeters, CombinedSource,
};
pub use cpu::{cpu_id, online_cpu_count, CpuId, Vendor};
pub use dcmi::DcmiReading;
pub use discover::{
    discover, discover_with_platforms, open_source, MechanismStatus, ProbeReport, SourceChoice,
};
#[cfg(feature = "ebpf")]
pub use ebpf::EbpfSource;
pub use ebpf::{mono_ns, RingRecord, SlotPlan, EBPF_BUILT_IN};
pub use error::EnergyError;
pub use host::{
    host_dir, read_host_info, HostInfo, HostSource, DEFAULT_HOST_DIR, HOST_DIR_ENV, HOST_INFO,
    HOST_ZONE, MAX_VM_POWER_W,
};
pub use hwmon::{HwmonClass, HwmonMeter};
pub use ipmi::{parse_dcmi_reading, IpmiMeter, IPMITOOL_ENV};
pub use machine::{meminfo_bytes, Machine};
pub use model::ModelSource;
pub use model_choice::ModelChoice;
pub use model_file::{load_model_file, FitSummary, LevelResult, ModelFile, MODEL_FILE_FORMAT};
pub use model_params::{ModelParams, CCF_MAX_W, CCF_MIN_W, HOST_ESTIMATE_SCOPE};
pub use msr::MsrSource;
/// The RAPL model-specific register addresses (Intel SDM vol. 4; AMD PPR for family 19h), and
/// where a register sits in a regular file standing in for `/dev/cpu/N/msr`: what the MSR
/// mechanism reads and what `wattio-fixture` writes.
pub use msr::{
    msr_esu, msr_stand_in_offset, AMD_CORE_ENERGY, AMD_PKG_ENERGY, AMD_POWER_UNIT,
    INTEL_DRAM_ENERGY, INTEL_PKG_ENERGY, INTEL_PLATFORM_ENERGY, INTEL_POWER_UNIT, INTEL_PP0_ENERGY,
    INTEL_PP1_ENERGY,
};
pub use nvml::{
    nvml_lib_from_env, probe_nvml, GpuCounter, GpuInfo, GpuProbe, GpuProcessReader, NvmlSource,
};
pub use perf::{discover_power_pmu, PerfEvent, PerfSource, PowerPmu};
pub use polled::{PolledSource, ReadingSource};
pub use powercap::{discover_powercap, PowercapDiscovery, PowercapSource, PowercapZone};
pub use reading::{
    Channel, IntegrationError, Integrator, LateTiming, Reading, ReadingKind, ReadingValue,
    StepEnergy,
};
pub use redfish::{
    PlatformUrl, RedfishMeter, AUTH_ENV as REDFISH_AUTH_ENV, CACERT_ENV as REDFISH_CACERT_ENV,
    CREDENTIALS_ENV as REDFISH_CREDENTIALS_ENV, INTERVAL_ENV as REDFISH_INTERVAL_ENV,
    MAX_AGE_ENV as REDFISH_MAX_AGE_ENV, PASSWORD_ENV as REDFISH_PASSWORD_ENV,
    USER_ENV as REDFISH_USER_ENV,
};
pub use registry::Role;
pub use root::SysRoot;
pub use tdp::model_for_machine;
pub use types::{
    join_provenance_labels, provenance_label, CounterSpec, Domain, Mechanism, Provenance, Scope,
    Wrap,
};
pub use update_period::{is_hardware_counter, watch_update_periods, UpdatePeriod};
pub use wrap::max_safe_period;

/// A set of energy counters read together.
///
/// `read_raw` fills `out` with one raw value per counter, in the order of [`Source::counters`].
/// Raw values are in each counter's own unit ([`CounterSpec::unit_j`] joules per raw step) and
/// wrap at [`CounterSpec::wrap`]; the [`Accumulator`] turns them into joules.
pub trait Source: Send {
    /// Which mechanism reads these counters, and whether its figures are estimates.
    fn provenance(&self) -> &Provenance;
    /// The counters, in the order `read_raw` fills them.
    fn counters(&self) -> &[CounterSpec];
    /// Reads every counter once. Must be cheap: it runs in the sampling loop.
    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError>;
    /// Where counter `i`'s figures come from. A source of one mechanism says
    /// [`Source::provenance`] for every counter (the default); a [`CombinedSource`]
    /// (CPU counters and GPU counters read together) says each counter's own, and NVML says
    /// which GPUs are read from an energy counter and which from integrated power.
    fn counter_provenance(&self, i: usize) -> &Provenance {
        let _ = i;
        self.provenance()
    }
    /// The rate the caller will read at, in reads per second. A source that samples on its own
    /// clock (the eBPF mechanism's kernel timer) ticks at this rate; others ignore it.
    fn set_rate_hz(&mut self, hz: f64) -> Result<(), EnergyError> {
        let _ = hz;
        Ok(())
    }
    /// Failed reads of single counters since the last call, that `read_raw` went past (a
    /// source of several devices, NVML's GPUs, keeps reading the others and repeats the failed
    /// counter's last value). Callers report them as read errors.
    fn take_counter_errors(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// For a meter that answers late ([`PolledSource`]): the energy of counter `i` over
    /// `[t0_ns, t1_ns]` (CLOCK_MONOTONIC, [`mono_ns`]), its readings placed at the times they
    /// were measured, not received, and how far off the window's ends may be, both in joules.
    /// `None` until a reading measured at or after `t1_ns` has
    /// arrived, when `t0_ns` is older than its first reading, and for counters read as they
    /// are (their deltas between two reads are already the window's).
    fn energy_between(&self, i: usize, t0_ns: u64, t1_ns: u64) -> Option<(f64, f64)> {
        let _ = (i, t0_ns, t1_ns);
        None
    }
    /// Counter `i`'s averaging, delay and resolution, for a meter that averages or answers
    /// late; `None` for a counter read as it is.
    fn late_timing(&self, i: usize) -> Option<LateTiming> {
        let _ = i;
        None
    }
}
