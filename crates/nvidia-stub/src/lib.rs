//! A stand-in for the NVIDIA driver's user-space libraries, the management library
//! (`libnvidia-ml.so.1`) and the CUDA driver (`libcuda.so.1`, [`cuda`]), for tests only: one
//! shared library exporting both sets of symbols, loaded through `WATTIO_NVML_LIB` and
//! `WATTIO_CUDA_LIB`.
//!
//! It exports, with the C ABI and NVML's names and return codes, the few functions wattio calls
//! (NVML API reference, <https://docs.nvidia.com/deploy/nvml-api/>): `nvmlInit_v2`,
//! `nvmlShutdown`, `nvmlSystemGetDriverVersion`, `nvmlDeviceGetCount_v2`,
//! `nvmlDeviceGetHandleByIndex_v2`, `nvmlDeviceGetName`, `nvmlDeviceGetUUID`,
//! `nvmlDeviceGetTotalEnergyConsumption` (mJ) and `nvmlDeviceGetPowerUsage` (mW), and
//! `nvmlDeviceGetProcessUtilization`, `nvmlDeviceGetComputeRunningProcesses_v3` and
//! `nvmlErrorString`. wattio loads it in place of the real library when `WATTIO_NVML_LIB` names
//! it, so the real loading and calling code runs in CI without a GPU.
//!
//! The GPUs it pretends to have are described by the `WATTIO_NVML_STUB` environment variable,
//! or, when `WATTIO_NVML_STUB_FILE` names a file, by that file's content, read again on every
//! call (so a test can change a counter between two readings). GPUs are separated by `|`, each a
//! comma-separated list of `key=value`:
//!
//! | key | meaning |
//! |---|---|
//! | `name`, `uuid` | what `nvmlDeviceGetName` / `nvmlDeviceGetUUID` return |
//! | `energy_mj` | the energy counter's value at `nvmlInit` (default 0) |
//! | `energy_w` | the counter then grows at this many watts of wall-clock time |
//! | `energy_update_ms` | the counter moves only every this many ms, as a real GPU's does (NVML's energy counter updates every 20 to 100 ms); default 0: on every call |
//! | `energy=unsupported` | `nvmlDeviceGetTotalEnergyConsumption` returns `NVML_ERROR_NOT_SUPPORTED` (pre-Volta) |
//! | `power_mw` | what `nvmlDeviceGetPowerUsage` returns (default: `energy_w` plus `busy_w` × the share of the last second kernels ran, in mW: a one-second mean, as Ampere and later report) |
//! | `power=unsupported` | `nvmlDeviceGetPowerUsage` returns `NVML_ERROR_NOT_SUPPORTED` |
//! | `busy_w` | the counter grows by this many more watts while kernels of the stand-in CUDA driver run on it ([`activity`]) |
//! | `process_util=unsupported` | `nvmlDeviceGetProcessUtilization` returns `NVML_ERROR_NOT_SUPPORTED` (processes are still listed, with their memory) |
//! | `lost=yes` | both readings return `NVML_ERROR_GPU_IS_LOST` (with `WATTIO_NVML_STUB_FILE`, a GPU lost mid-run) |
//!
//! Per-process utilisation and running processes come from what processes did with the
//! stand-in CUDA driver ([`activity`]): as `nvml.h` documents the call, one sample per process
//! whose kernels ran since `lastSeenTimeStamp` (at most the last 10 s), `smUtil` the percentage
//! of that time they ran.
//!
//! `WATTIO_NVML_STUB_INIT=no_permission` (or `driver_not_loaded`) makes `nvmlInit_v2` fail with
//! `NVML_ERROR_NO_PERMISSION` (or `NVML_ERROR_DRIVER_NOT_LOADED`).

#![allow(non_snake_case)]

pub mod activity;
pub mod cuda;

use std::ffi::{c_char, c_uint, c_ulonglong, c_void};
use std::sync::Mutex;
use std::time::Instant;

/// `nvmlReturn_t` values (nvml.h).
pub const NVML_SUCCESS: c_uint = 0;
pub const NVML_ERROR_UNINITIALIZED: c_uint = 1;
pub const NVML_ERROR_INVALID_ARGUMENT: c_uint = 2;
pub const NVML_ERROR_NOT_SUPPORTED: c_uint = 3;
pub const NVML_ERROR_NO_PERMISSION: c_uint = 4;
pub const NVML_ERROR_NOT_FOUND: c_uint = 6;
pub const NVML_ERROR_INSUFFICIENT_SIZE: c_uint = 7;
pub const NVML_ERROR_DRIVER_NOT_LOADED: c_uint = 9;
pub const NVML_ERROR_GPU_IS_LOST: c_uint = 15;

/// When `nvmlInit_v2` last succeeded (counters grow from there), as an instant and in µs since
/// the epoch; `None` when not initialised.
static STARTED: Mutex<Option<(Instant, u64)>> = Mutex::new(None);

/// `nvmlInit` calls not yet matched by `nvmlShutdown`: as in NVML, only the last shutdown of a
/// process uninitialises it.
static INITS: Mutex<u32> = Mutex::new(0);

/// One pretend GPU.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StubGpu {
    pub name: String,
    pub uuid: String,
    pub energy_mj: u64,
    pub energy_w: f64,
    /// The counter's update period in ms (0: it changes on every call).
    pub energy_update_ms: f64,
    /// Watts added while the stand-in CUDA driver's kernels run on it.
    pub busy_w: f64,
    pub energy_supported: bool,
    pub process_util_supported: bool,
    /// The GPU fell off the bus: every reading answers `NVML_ERROR_GPU_IS_LOST`.
    pub lost: bool,
    pub power_mw: Option<u32>,
    pub power_supported: bool,
}

/// Parses the `WATTIO_NVML_STUB` description (see the crate documentation).
pub fn parse(spec: &str) -> Vec<StubGpu> {
    spec.split('|')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .enumerate()
        .map(|(i, g)| {
            let mut gpu = StubGpu {
                name: format!("Stub GPU {i}"),
                uuid: format!("GPU-00000000-0000-0000-0000-00000000000{i}"),
                energy_supported: true,
                process_util_supported: true,
                power_supported: true,
                ..StubGpu::default()
            };
            for kv in g.split(',') {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                let v = v.trim();
                match k.trim() {
                    "name" => gpu.name = v.to_string(),
                    "uuid" => gpu.uuid = v.to_string(),
                    "energy_mj" => gpu.energy_mj = v.parse().unwrap_or(0),
                    "energy_w" => gpu.energy_w = v.parse().unwrap_or(0.0),
                    "energy_update_ms" => gpu.energy_update_ms = v.parse().unwrap_or(0.0),
                    "energy" => gpu.energy_supported = v != "unsupported",
                    "busy_w" => gpu.busy_w = v.parse().unwrap_or(0.0),
                    "process_util" => gpu.process_util_supported = v != "unsupported",
                    "lost" => gpu.lost = v == "yes",
                    "power_mw" => gpu.power_mw = v.parse().ok(),
                    "power" => gpu.power_supported = v != "unsupported",
                    _ => {}
                }
            }
            gpu
        })
        .collect()
}

pub(crate) fn gpus() -> Vec<StubGpu> {
    let spec = match std::env::var_os("WATTIO_NVML_STUB_FILE") {
        Some(f) => std::fs::read_to_string(f).unwrap_or_default(),
        None => std::env::var("WATTIO_NVML_STUB").unwrap_or_default(),
    };
    parse(&spec)
}

fn elapsed_s() -> Option<f64> {
    STARTED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map(|(t, _)| t.elapsed().as_secs_f64())
}

/// When NVML was initialised, in µs since the epoch.
fn started_us() -> u64 {
    STARTED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map_or(0, |(_, us)| us)
}

/// Seconds the stand-in CUDA driver's kernels ran on GPU `index` between `from_us` and `to_us`.
fn busy_s(index: u32, from_us: u64, to_us: u64) -> f64 {
    activity::read(index)
        .values()
        .map(|u| activity::busy_us_between(&u.busy, from_us, to_us))
        .sum::<u64>() as f64
        / 1e6
}

/// The GPU a handle stands for (handles are index + 1, never null).
fn gpu_of(device: *mut c_void) -> Result<StubGpu, c_uint> {
    gpu_and_index_of(device).map(|(g, _)| g)
}

/// The GPU of a handle and its index, or `NVML_ERROR_GPU_IS_LOST` for a GPU that fell off the
/// bus (`lost=yes`): what every reading checks first.
fn answering_gpu(device: *mut c_void) -> Result<(StubGpu, u32), c_uint> {
    let (g, index) = gpu_and_index_of(device)?;
    if g.lost {
        return Err(NVML_ERROR_GPU_IS_LOST);
    }
    Ok((g, index))
}

fn gpu_and_index_of(device: *mut c_void) -> Result<(StubGpu, u32), c_uint> {
    if elapsed_s().is_none() {
        return Err(NVML_ERROR_UNINITIALIZED);
    }
    let i = (device as usize).wrapping_sub(1);
    gpus()
        .get(i)
        .cloned()
        .map(|g| (g, i as u32))
        .ok_or(NVML_ERROR_INVALID_ARGUMENT)
}

/// Copies `s` with its NUL into `buf` of `len` bytes.
pub(crate) unsafe fn put_str(s: &str, buf: *mut c_char, len: c_uint) -> c_uint {
    if buf.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    let b = s.as_bytes();
    if b.len() + 1 > len as usize {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    std::ptr::copy_nonoverlapping(b.as_ptr() as *const c_char, buf, b.len());
    *buf.add(b.len()) = 0;
    NVML_SUCCESS
}

/// # Safety
/// Called through the C ABI by an NVML user.
#[no_mangle]
pub unsafe extern "C" fn nvmlInit_v2() -> c_uint {
    match std::env::var("WATTIO_NVML_STUB_INIT").as_deref() {
        Ok("no_permission") => return NVML_ERROR_NO_PERMISSION,
        Ok("driver_not_loaded") => return NVML_ERROR_DRIVER_NOT_LOADED,
        _ => {}
    }
    *INITS.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    let mut s = STARTED.lock().unwrap_or_else(|p| p.into_inner());
    s.get_or_insert_with(|| (Instant::now(), activity::now_us()));
    NVML_SUCCESS
}

/// # Safety
/// Called through the C ABI by an NVML user.
#[no_mangle]
pub unsafe extern "C" fn nvmlShutdown() -> c_uint {
    let mut inits = INITS.lock().unwrap_or_else(|p| p.into_inner());
    *inits = inits.saturating_sub(1);
    if *inits == 0 {
        *STARTED.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
    NVML_SUCCESS
}

/// # Safety
/// `buf` must hold `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(buf: *mut c_char, len: c_uint) -> c_uint {
    put_str("0.0-wattio-nvidia-stub", buf, len)
}

/// # Safety
/// `count` must be writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> c_uint {
    if elapsed_s().is_none() {
        return NVML_ERROR_UNINITIALIZED;
    }
    if count.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *count = gpus().len() as c_uint;
    NVML_SUCCESS
}

/// # Safety
/// `device` must be writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut *mut c_void,
) -> c_uint {
    if elapsed_s().is_none() {
        return NVML_ERROR_UNINITIALIZED;
    }
    if device.is_null() || index as usize >= gpus().len() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *device = (index as usize + 1) as *mut c_void;
    NVML_SUCCESS
}

/// # Safety
/// `buf` must hold `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: *mut c_void,
    buf: *mut c_char,
    len: c_uint,
) -> c_uint {
    match gpu_of(device) {
        Ok(g) => put_str(&g.name, buf, len),
        Err(e) => e,
    }
}

/// # Safety
/// `buf` must hold `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: *mut c_void,
    buf: *mut c_char,
    len: c_uint,
) -> c_uint {
    match gpu_of(device) {
        Ok(g) => put_str(&g.uuid, buf, len),
        Err(e) => e,
    }
}

/// # Safety
/// `energy` must be writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: *mut c_void,
    energy: *mut c_ulonglong,
) -> c_uint {
    let (g, index) = match answering_gpu(device) {
        Ok(g) => g,
        Err(e) => return e,
    };
    if !g.energy_supported {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if energy.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    let mut t = elapsed_s().unwrap_or(0.0);
    if g.energy_update_ms > 0.0 {
        // The value of the counter's last update.
        let step = g.energy_update_ms / 1000.0;
        t = (t / step).floor() * step;
    }
    let busy = if g.busy_w > 0.0 {
        let from = started_us();
        busy_s(index, from, from + (t * 1e6) as u64)
    } else {
        0.0
    };
    *energy = g.energy_mj + ((g.energy_w * t + g.busy_w * busy) * 1000.0) as u64;
    NVML_SUCCESS
}

/// # Safety
/// `power` must be writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: *mut c_void,
    power: *mut c_uint,
) -> c_uint {
    let (g, index) = match answering_gpu(device) {
        Ok(g) => g,
        Err(e) => return e,
    };
    if !g.power_supported {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if power.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    // As Ampere and later GPUs report it: the mean over the last second.
    let busy_share = if g.busy_w > 0.0 {
        let now = activity::now_us();
        busy_s(index, now.saturating_sub(1_000_000), now)
    } else {
        0.0
    };
    *power = g
        .power_mw
        .unwrap_or(((g.energy_w + g.busy_w * busy_share) * 1000.0).round() as c_uint);
    NVML_SUCCESS
}

/// `nvmlProcessUtilizationSample_t` (nvml.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessUtilizationSample {
    pub pid: c_uint,
    pub time_stamp: c_ulonglong,
    pub sm_util: c_uint,
    pub mem_util: c_uint,
    pub enc_util: c_uint,
    pub dec_util: c_uint,
}

/// `nvmlProcessInfo_t` (nvml.h, `_v3` of the call).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// How long the driver keeps its samples, in µs.
const KEPT_US: u64 = 10_000_000;

/// The utilisation of GPU `index` since `last_seen` (µs since the epoch; 0: all that is kept),
/// as NVML returns it: one sample per process whose kernels ran in that window, `smUtil` the
/// percentage of the window they ran, stamped now.
pub fn utilisation_samples(index: u32, last_seen: u64) -> Vec<ProcessUtilizationSample> {
    let now = activity::now_us();
    let from = last_seen.max(now.saturating_sub(KEPT_US));
    if now <= from {
        return vec![];
    }
    activity::read(index)
        .into_iter()
        .filter_map(|(pid, u)| {
            let busy = activity::busy_us_between(&u.busy, from, now);
            (busy > 0).then(|| ProcessUtilizationSample {
                pid,
                time_stamp: now,
                sm_util: ((busy * 100 + (now - from) / 2) / (now - from)) as c_uint,
                ..Default::default()
            })
        })
        .collect()
}

/// Copies `items` into the caller's array of `*count`, NVML's way: the count needed and
/// `NVML_ERROR_INSUFFICIENT_SIZE` when it is too small or null.
unsafe fn put_array<T: Copy>(items: &[T], out: *mut T, count: *mut c_uint) -> c_uint {
    if count.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    let room = *count as usize;
    *count = items.len() as c_uint;
    if out.is_null() || room < items.len() {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    std::ptr::copy_nonoverlapping(items.as_ptr(), out, items.len());
    NVML_SUCCESS
}

/// # Safety
/// `utilization` must hold `*count` samples (or be null to ask for the count).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: *mut c_void,
    utilization: *mut ProcessUtilizationSample,
    count: *mut c_uint,
    last_seen_time_stamp: c_ulonglong,
) -> c_uint {
    let (g, index) = match answering_gpu(device) {
        Ok(g) => g,
        Err(e) => return e,
    };
    if !g.process_util_supported {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    let samples = utilisation_samples(index, last_seen_time_stamp);
    if samples.is_empty() {
        if !count.is_null() {
            *count = 0;
        }
        // What the driver answers when no process used the GPU since `last_seen`.
        return NVML_ERROR_NOT_FOUND;
    }
    put_array(&samples, utilization, count)
}

/// # Safety
/// `infos` must hold `*count` entries (or be null to ask for the count).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> c_uint {
    let (_, index) = match answering_gpu(device) {
        Ok(g) => g,
        Err(e) => return e,
    };
    let running: Vec<ProcessInfo> = activity::read(index)
        .into_iter()
        .filter(|(pid, _)| activity::alive(*pid))
        .map(|(pid, u)| ProcessInfo {
            pid,
            used_gpu_memory: u.mem_bytes,
            ..Default::default()
        })
        .collect();
    if running.is_empty() && !count.is_null() {
        *count = 0;
        return NVML_SUCCESS;
    }
    put_array(&running, infos, count)
}

/// # Safety
/// Returns a static NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn nvmlErrorString(result: c_uint) -> *const c_char {
    let s: &'static [u8] = match result {
        NVML_SUCCESS => b"Success\0",
        NVML_ERROR_UNINITIALIZED => b"Uninitialized\0",
        NVML_ERROR_INVALID_ARGUMENT => b"Invalid Argument\0",
        NVML_ERROR_NOT_SUPPORTED => b"Not Supported\0",
        NVML_ERROR_NO_PERMISSION => b"Insufficient Permissions\0",
        NVML_ERROR_DRIVER_NOT_LOADED => b"Driver Not Loaded\0",
        NVML_ERROR_GPU_IS_LOST => b"GPU is lost\0",
        NVML_ERROR_NOT_FOUND => b"Not Found\0",
        _ => b"Unknown Error\0",
    };
    s.as_ptr() as *const c_char
}

/// Where Cargo put the stand-in's shared library for the test binary calling this: next to
/// it in `target/<profile>/deps/`, or in `target/<profile>/` (a crate that names `nvidia-stub` as
/// a dev-dependency gets it built by `cargo test`, in debug and in release alike). Panics with
/// the command to run when it is not there.
pub fn built_library() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's own path");
    let name = format!(
        "{}nvidia_stub{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    for dir in exe.ancestors().skip(1).take(2) {
        let p = dir.join(&name);
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "{name} not found next to {}: build it with `cargo build -p nvidia-stub` (add --release for release tests)",
        exe.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_parses() {
        let g = parse("name=A,energy_w=150,energy_mj=7 | energy=unsupported,power_mw=70000");
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].name, "A");
        assert_eq!(g[0].energy_w, 150.0);
        assert_eq!(g[0].energy_mj, 7);
        assert!(!g[1].energy_supported);
        assert_eq!(g[1].power_mw, Some(70000));
        assert_eq!(g[1].name, "Stub GPU 1");
        assert!(parse("").is_empty());
    }
}
