//! GPU energy through NVML, the NVIDIA management library.

use crate::error::EnergyError;
use crate::types::{CounterSpec, Domain, Mechanism, Provenance, Wrap};
use crate::Source;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use serde::Serialize;
use std::ffi::{OsStr, OsString};
use std::time::Instant;

/// The environment variable naming the NVML library to load instead of [`DEFAULT_LIB`].
pub(crate) const LIB_ENV: &str = "WATTIO_NVML_LIB";

/// The library loaded by default, through the dynamic loader's search path (the NVIDIA driver
/// installs it; it is not in the CUDA toolkit alone).
pub(crate) const DEFAULT_LIB: &str = "libnvidia-ml.so.1";

/// The fix printed when the library cannot be loaded.
pub(crate) const MISSING_FIX: &str = "install the NVIDIA driver (it ships libnvidia-ml.so.1), or set WATTIO_NVML_LIB to the library's path";

/// The library to load: `WATTIO_NVML_LIB` when set and not empty, else `libnvidia-ml.so.1`.
pub fn nvml_lib_from_env() -> OsString {
    std::env::var_os(LIB_ENV)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_LIB.into())
}

/// How a GPU's energy is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuCounter {
    /// `nvmlDeviceGetTotalEnergyConsumption`, millijoules since the driver was loaded.
    EnergyCounter,
    /// `nvmlDeviceGetPowerUsage`, milliwatts, integrated over time by wattio.
    PowerIntegrated,
}

/// One GPU NVML lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuInfo {
    /// NVML's index (the `socket` of its counter).
    pub index: u32,
    pub name: String,
    pub uuid: String,
    pub counter: GpuCounter,
    /// The provenance label of its figures.
    pub label: String,
    /// Why the energy counter is not used, for a power-integrated GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What probing NVML found: the GPUs and how each is read, or why NVML cannot be used.
#[derive(Debug, Clone, Serialize)]
pub struct GpuProbe {
    pub mechanism: Mechanism,
    /// The library it tried to load.
    pub lib: String,
    pub usable: bool,
    pub gpus: Vec<GpuInfo>,
    /// Why it cannot be used (empty when usable).
    pub reason: String,
    pub fix: Option<String>,
    /// GPUs left out, and why.
    pub notes: Vec<String>,
    /// How often each GPU's counter changed while `probe` watched it, in the order of `gpus`
    /// (`None` for a GPU read from integrated power: wattio's own integration changes on every
    /// read). Empty when NVML is not usable or nothing watched it.
    pub update_periods: Vec<Option<crate::update_period::UpdatePeriod>>,
}

/// Probes NVML through `lib`. Never fails: an unusable NVML is a report, not an error.
pub fn probe_nvml(lib: &OsStr) -> GpuProbe {
    probe_nvml_keeping_source(lib).0
}

/// As [`probe_nvml`], also returning the opened source (to watch its counters).
pub(crate) fn probe_nvml_keeping_source(lib: &OsStr) -> (GpuProbe, Option<NvmlSource>) {
    let lib_s = lib.to_string_lossy().into_owned();
    match NvmlSource::open(lib) {
        Ok(src) => (
            GpuProbe {
                mechanism: Mechanism::Nvml,
                lib: lib_s,
                usable: true,
                gpus: src.gpus.clone(),
                reason: String::new(),
                fix: None,
                notes: src.notes.clone(),
                update_periods: vec![],
            },
            Some(src),
        ),
        Err(e) => {
            let (reason, fix) = match e {
                EnergyError::Unusable { reason, fix, .. } => (reason, Some(fix)),
                other => (other.to_string(), None),
            };
            (
                GpuProbe {
                    mechanism: Mechanism::Nvml,
                    lib: lib_s,
                    usable: false,
                    gpus: vec![],
                    reason,
                    fix,
                    notes: vec![],
                    update_periods: vec![],
                },
                None,
            )
        }
    }
}

fn unusable(reason: String, fix: &str) -> EnergyError {
    EnergyError::Unusable {
        mechanism: Mechanism::Nvml,
        reason,
        fix: fix.into(),
    }
}

/// Why `nvmlInit` (or loading the library) failed, and the fix.
fn init_error(lib: &str, e: NvmlError) -> EnergyError {
    match e {
        NvmlError::LibloadingError(e) => unusable(
            format!("library not found: cannot load {lib} ({e})"),
            MISSING_FIX,
        ),
        NvmlError::FailedToLoadSymbol(s) => unusable(
            format!("{lib} does not export nvmlInit_v2 ({s}): it is not the NVIDIA management library"),
            MISSING_FIX,
        ),
        NvmlError::NoPermission => unusable(
            "nvmlInit failed with NVML_ERROR_NO_PERMISSION: this user may not talk to the NVIDIA driver".into(),
            "run wattio as a user allowed to open /dev/nvidiactl and /dev/nvidia* (root, or the group the driver gives them), or, in a container, start it with the NVIDIA container toolkit",
        ),
        NvmlError::DriverNotLoaded => unusable(
            "nvmlInit failed with NVML_ERROR_DRIVER_NOT_LOADED: the NVIDIA kernel driver is not running".into(),
            "load it (`sudo modprobe nvidia`) or reinstall the NVIDIA driver; `nvidia-smi` must work first",
        ),
        other => unusable(
            format!("nvmlInit failed: {other}"),
            "check that `nvidia-smi` works; reinstall the NVIDIA driver if it does not",
        ),
    }
}

/// How one GPU is read.
#[derive(Debug)]
enum Reading {
    Counter,
    /// Trapezoid integral of power in µJ since the first read, and the previous reading.
    Power {
        total_uj: f64,
        last: Option<(u32, Instant)>,
    },
}

#[derive(Debug)]
struct Gpu {
    /// The `nvmlDevice_t`, as an integer so the source is `Send` (a handle stays valid while
    /// NVML is initialised, which `nvml` keeps it).
    handle: usize,
    index: u32,
    reading: Reading,
    /// The last value handed out: repeated while a read fails, so the next good read's
    /// delta carries the energy of the failed interval.
    last_raw: u64,
}

/// NVML's GPUs as a [`Source`]: one counter per GPU.
///
/// GPU energy through NVML, the NVIDIA management library.
///
/// The library is loaded at run time with `dlopen` (through the `nvml-wrapper` crate, which
/// resolves each symbol when it is first called), never linked: wattio starts on machines
/// without an NVIDIA driver, and a missing library only makes this mechanism unusable. It loads
/// `libnvidia-ml.so.1` through the normal dynamic loader search, or the file named by
/// `WATTIO_NVML_LIB`; the tests point that at a stand-in built from
/// `crates/nvidia-stub`.
///
/// One counter per GPU (domain [`Domain::Gpu`], `socket` = the GPU's NVML index), from
/// `nvmlDeviceGetTotalEnergyConsumption`: millijoules since the driver was last loaded, on Volta
/// and later (NVML API reference, Device Queries,
/// <https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html>). Where a GPU answers
/// `NVML_ERROR_NOT_SUPPORTED` (or any other error) for it, wattio reads
/// `nvmlDeviceGetPowerUsage` (milliwatts; "for Fermi or newer fully supported devices"; on Ampere
/// other than GA100 and later the driver returns the average over one second, on GA100 and older
/// the instantaneous draw) at every read and integrates it with the trapezoid rule between
/// reads: such a counter is labelled `measured (nvml power, integrated)`, never as a counter's
/// reading, and is only as good as the read rate. Both are board-level figures: NVML documents the
/// power reading as the GPU "and its associated circuitry (e.g. memory)", and `nvidia-smi` the
/// same reading as "the power draw for the entire board".
pub struct NvmlSource {
    // Declared first so the devices are forgotten before `nvmlShutdown` (Drop of `Nvml`).
    gpus_state: Vec<Gpu>,
    nvml: Nvml,
    gpus: Vec<GpuInfo>,
    specs: Vec<CounterSpec>,
    provenances: Vec<Provenance>,
    /// Reads of single GPUs that failed since [`Source::take_counter_errors`] last took them.
    failed_reads: Vec<String>,
    provenance: Provenance,
    /// GPUs left out, and why.
    pub notes: Vec<String>,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource")
            .field("gpus", &self.gpus)
            .finish_non_exhaustive()
    }
}

impl NvmlSource {
    /// Loads `lib`, initialises NVML and sets up one counter per GPU. Fails with a one-line
    /// reason and fix when the library is missing, `nvmlInit` fails, or there is no usable GPU.
    pub fn open(lib: &OsStr) -> Result<NvmlSource, EnergyError> {
        let lib_s = lib.to_string_lossy().into_owned();
        let nvml = Nvml::builder()
            .lib_path(lib)
            .init()
            .map_err(|e| init_error(&lib_s, e))?;
        let count = nvml.device_count().map_err(|e| {
            unusable(
                format!("nvmlDeviceGetCount failed: {e}"),
                "check that `nvidia-smi -L` lists the GPUs",
            )
        })?;
        let mut gpus = Vec::new();
        let mut state = Vec::new();
        let mut notes = Vec::new();
        for index in 0..count {
            let dev = match nvml.device_by_index(index) {
                Ok(d) => d,
                Err(e) => {
                    notes.push(format!("GPU {index}: left out, no handle ({e})"));
                    continue;
                }
            };
            let name = dev.name().unwrap_or_else(|e| format!("unknown ({e})"));
            let uuid = dev.uuid().unwrap_or_else(|e| format!("unknown ({e})"));
            let (counter, reading, note) = match choose_reading(&dev) {
                Ok(chosen) => chosen,
                Err(why) => {
                    notes.push(format!("GPU {index} ({name}): left out, {why}"));
                    continue;
                }
            };
            // SAFETY: the handle is only turned back into a `Device` of this `nvml`.
            let handle = unsafe { dev.handle() } as usize;
            state.push(Gpu {
                handle,
                index,
                reading,
                last_raw: 0,
            });
            gpus.push(GpuInfo {
                index,
                name,
                uuid,
                counter,
                label: counter.provenance().label(),
                note,
            });
        }
        if gpus.is_empty() {
            return Err(if count == 0 {
                unusable(
                    "NVML lists no GPU".into(),
                    "nothing to fix unless a GPU should be there: `nvidia-smi -L` lists what the driver sees",
                )
            } else {
                unusable(
                    format!("no GPU can be read: {}", notes.join("; ")),
                    "these GPUs give NVML neither energy nor power readings (`nvidia-smi -q -d POWER` shows what they report): nothing wattio can read",
                )
            });
        }
        Ok(NvmlSource {
            gpus_state: state,
            nvml,
            specs: gpus.iter().map(GpuInfo::counter_spec).collect(),
            provenances: gpus.iter().map(|g| g.counter.provenance()).collect(),
            gpus,
            provenance: Provenance::measured(Mechanism::Nvml),
            notes,
            failed_reads: Vec::new(),
        })
    }

    /// The GPUs read, in counter order.
    pub fn gpus(&self) -> &[GpuInfo] {
        &self.gpus
    }
}

fn read_error(index: u32, what: &str, e: NvmlError) -> EnergyError {
    unusable(
        format!("GPU {index}: {what} failed: {e}"),
        "check the GPU with `nvidia-smi`; leave it out with --domains without gpu",
    )
}

/// How a GPU is read: its energy counter where it has one (Volta and later), else its power
/// readings integrated over time, with a note saying why. `Err`: why it cannot be read at all.
fn choose_reading(dev: &Device) -> Result<(GpuCounter, Reading, Option<String>), String> {
    let energy_err = match dev.total_energy_consumption() {
        Ok(_) => return Ok((GpuCounter::EnergyCounter, Reading::Counter, None)),
        Err(e) => e,
    };
    let why = match energy_err {
        NvmlError::NotSupported => {
            "nvmlDeviceGetTotalEnergyConsumption: NVML_ERROR_NOT_SUPPORTED (before Volta)"
                .to_string()
        }
        e => format!("nvmlDeviceGetTotalEnergyConsumption: {e}"),
    };
    match dev.power_usage() {
        Ok(_) => Ok((
            GpuCounter::PowerIntegrated,
            Reading::Power {
                total_uj: 0.0,
                last: None,
            },
            Some(format!("{why}; power readings integrated instead")),
        )),
        Err(e) => Err(format!(
            "neither an energy counter ({why}) nor power readings (nvmlDeviceGetPowerUsage: {e})"
        )),
    }
}

impl GpuCounter {
    /// How this GPU's energy is measured: a counter, or power readings integrated by wattio.
    pub fn provenance(&self) -> Provenance {
        match self {
            GpuCounter::EnergyCounter => Provenance::measured(Mechanism::Nvml),
            GpuCounter::PowerIntegrated => Provenance::integrated_power(Mechanism::Nvml),
        }
    }
}

impl GpuInfo {
    /// The counter this GPU is read as.
    fn counter_spec(&self) -> CounterSpec {
        let (unit_j, origin) = match self.counter {
            GpuCounter::EnergyCounter => (1e-3, "nvmlDeviceGetTotalEnergyConsumption (mJ)"),
            GpuCounter::PowerIntegrated => (
                1e-6,
                "nvmlDeviceGetPowerUsage (mW) integrated between reads",
            ),
        };
        CounterSpec {
            socket: self.index,
            domain: Domain::Gpu,
            unit_j,
            // The energy counter, an unsigned long long of millijoules, never wraps in practice
            // (5·10^8 years at 1 kW), but it restarts when the driver is reloaded: a decrease is
            // a reset, never a wrap, and must be reported as an error rather than "corrected"
            // into 2^64 mJ. Unknown does exactly that (and asks for a read at least once a
            // second). The integrated sum is wattio's own and never decreases; Unknown makes
            // readers at a low row rate still read it at least once a second, the integration
            // step.
            wrap: Wrap::Unknown,
            origin: format!("{origin}, GPU {} {} {}", self.index, self.name, self.uuid),
        }
    }
}

impl Source for NvmlSource {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }

    fn counter_provenance(&self, i: usize) -> &Provenance {
        &self.provenances[i]
    }

    /// Reads every GPU. One GPU's failure does not stop the others: its counter keeps its last
    /// value (its energy for the interval comes with its next good read) and the error waits
    /// in [`Source::take_counter_errors`]. Only when every GPU fails is the reading an error.
    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        let mut failed = Vec::new();
        for (g, o) in self.gpus_state.iter_mut().zip(out.iter_mut()) {
            // SAFETY: `handle` came from `device_by_index` of this still-initialised `nvml`.
            let dev = unsafe { Device::new(g.handle as _, &self.nvml) };
            let index = g.index;
            let value = match &mut g.reading {
                Reading::Counter => dev
                    .total_energy_consumption()
                    .map_err(|e| read_error(index, "nvmlDeviceGetTotalEnergyConsumption", e)),
                Reading::Power { total_uj, last } => dev
                    .power_usage()
                    .map_err(|e| read_error(index, "nvmlDeviceGetPowerUsage", e))
                    .map(|mw| {
                        let now = Instant::now();
                        if let Some((prev_mw, at)) = *last {
                            let dt = now.saturating_duration_since(at).as_secs_f64();
                            // mW × s = mJ; × 1000 = µJ.
                            *total_uj += (prev_mw as f64 + mw as f64) / 2.0 * dt * 1000.0;
                        }
                        *last = Some((mw, now));
                        *total_uj as u64
                    }),
            };
            match value {
                Ok(v) => g.last_raw = v,
                Err(e) => failed.push(e),
            }
            *o = g.last_raw;
        }
        if !failed.is_empty() && failed.len() == self.gpus_state.len() {
            return Err(failed.swap_remove(0));
        }
        self.failed_reads
            .extend(failed.into_iter().map(|e| match e {
                EnergyError::Unusable { reason, .. } => format!(
                "{reason}; its rows hold 0 J until it answers again (check it with `nvidia-smi`)"
            ),
                other => other.to_string(),
            }));
        // Bounded if nobody takes them.
        if self.failed_reads.len() > 100 {
            self.failed_reads.drain(..50);
        }
        Ok(())
    }

    fn take_counter_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.failed_reads)
    }
}

/// Reads which processes used each GPU since the previous read, for the attribution layer
/// ([`crate::attribution::split_gpu`]): per-process utilisation samples
/// (`nvmlDeviceGetProcessUtilization`, Maxwell and later) or, where a GPU does not support
/// them, the memory each process with a compute context holds
/// (`nvmlDeviceGetComputeRunningProcesses_v3`). A second NVML handle of its own (NVML counts
/// its initialisations), so the energy source it sits beside is left as it is.
pub struct GpuProcessReader {
    // Declared first so the devices are forgotten before `nvmlShutdown`.
    devices: Vec<ProcessDevice>,
    nvml: Nvml,
}

struct ProcessDevice {
    index: u32,
    handle: usize,
    /// When it was last read (µs, the CPU clock of NVML's timestamps): the next read asks for
    /// the utilisation since then.
    last_seen_us: u64,
    util_supported: bool,
}

impl std::fmt::Debug for GpuProcessReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuProcessReader").finish_non_exhaustive()
    }
}

impl GpuProcessReader {
    /// Opens NVML through `lib` for the GPUs `indices` (those the energy source reads); samples
    /// from now on.
    pub fn open(lib: &OsStr, indices: &[u32]) -> Result<GpuProcessReader, EnergyError> {
        let lib_s = lib.to_string_lossy().into_owned();
        let nvml = Nvml::builder()
            .lib_path(lib)
            .init()
            .map_err(|e| init_error(&lib_s, e))?;
        let now = now_us();
        let mut devices = Vec::new();
        for &index in indices {
            let dev = nvml
                .device_by_index(index)
                .map_err(|e| read_error(index, "nvmlDeviceGetHandleByIndex", e))?;
            // SAFETY: the handle is only turned back into a `Device` of this `nvml`.
            let handle = unsafe { dev.handle() } as usize;
            devices.push(ProcessDevice {
                index,
                handle,
                last_seen_us: now,
                util_supported: true,
            });
        }
        Ok(GpuProcessReader { devices, nvml })
    }

    /// What each GPU's processes did since the previous call (or since opening).
    pub fn read(&mut self) -> Vec<crate::attribution::GpuUse> {
        use crate::attribution::{GpuShareBasis, GpuUse};
        let mut out = Vec::new();
        for d in &mut self.devices {
            // SAFETY: `handle` came from `device_by_index` of this still-initialised `nvml`.
            let dev = unsafe { Device::new(d.handle as _, &self.nvml) };
            let mut u = GpuUse {
                index: d.index,
                basis: None,
                by_pid: vec![],
                window_s: 0.0,
                note: None,
            };
            let since = d.last_seen_us;
            if d.util_supported {
                match utilisation_since(&dev, d) {
                    Ok(by_pid) => {
                        u.basis = Some(GpuShareBasis::Utilisation);
                        u.by_pid = by_pid;
                    }
                    Err(NvmlError::NotSupported) => d.util_supported = false,
                    Err(e) => u.note = Some(format!("nvmlDeviceGetProcessUtilization: {e}")),
                }
            }
            if !d.util_supported {
                match dev.running_compute_processes() {
                    Ok(ps) => {
                        u.basis = Some(GpuShareBasis::Memory);
                        u.by_pid = ps
                            .iter()
                            .map(|p| {
                                let bytes = match p.used_gpu_memory {
                                    nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => b as f64,
                                    // Not reported (WDDM, some containers): equal shares.
                                    nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => 1.0,
                                };
                                (p.pid, bytes)
                            })
                            .collect();
                    }
                    Err(e) => {
                        u.note = Some(format!(
                            "nvmlDeviceGetProcessUtilization: not supported; nvmlDeviceGetComputeRunningProcesses: {e}"
                        ))
                    }
                }
            }
            if !d.util_supported {
                d.last_seen_us = now_us();
            }
            u.window_s = d.last_seen_us.saturating_sub(since) as f64 / 1e6;
            out.push(u);
        }
        out
    }
}

/// Microseconds since the Unix epoch: the clock of NVML's sample timestamps.
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Each process's SM utilisation since the device's last read, as a fraction: NVML returns one
/// sample per process that used the GPU, its `smUtil` the mean "since the previous query" when
/// asked with that query's time (`nvml.h`); should a driver return several samples for one
/// process, their mean. Moves the device's last read to now (or to the newest sample, if the
/// driver's clock is ahead), also when nobody used the GPU (`NVML_ERROR_NOT_FOUND`), so that
/// each window's means cover that window alone.
fn utilisation_since(dev: &Device, d: &mut ProcessDevice) -> Result<Vec<(u32, f64)>, NvmlError> {
    let asked_at = now_us();
    // A process that appears between the count and the fetch makes the fetch too small: ask
    // again once.
    let samples = match dev.process_utilization_stats(d.last_seen_us) {
        Err(NvmlError::InsufficientSize(_)) => dev.process_utilization_stats(d.last_seen_us),
        other => other,
    };
    let samples = match samples {
        Ok(s) => s,
        Err(NvmlError::NotFound) => {
            d.last_seen_us = asked_at;
            return Ok(vec![]);
        }
        Err(e) => return Err(e),
    };
    let mut by_pid: std::collections::BTreeMap<u32, (f64, u32)> = Default::default();
    for s in samples.iter().filter(|s| s.timestamp > d.last_seen_us) {
        let e = by_pid.entry(s.pid).or_default();
        // smUtil is a percentage; anything beyond 100 is the driver's noise.
        e.0 += s.sm_util.min(100) as f64 / 100.0;
        e.1 += 1;
    }
    let newest = samples.iter().map(|s| s.timestamp).max().unwrap_or(0);
    d.last_seen_us = asked_at.max(newest);
    Ok(by_pid
        .into_iter()
        .map(|(p, (sum, n))| (p, sum / n.max(1) as f64))
        .collect())
}

/// NVML reads GPUs: it is opened beside the CPU source, never as one.
pub(crate) fn open_mechanism(_: &crate::opening::OpenRequest) -> crate::opening::Opened {
    (
        Err(crate::error::EnergyError::Unusable {
            mechanism: crate::types::Mechanism::Nvml,
            reason: "nvml reads GPUs, not the CPU".into(),
            fix: "read GPUs with --domains gpu (or --source nvml for GPUs alone)".into(),
        }),
        vec![],
    )
}
