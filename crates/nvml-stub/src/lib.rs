//! A stand-in for the NVIDIA management library (`libnvidia-ml.so.1`), for tests only.
//!
//! It exports, with the C ABI and NVML's names and return codes, the few functions wattio calls
//! (NVML API reference, <https://docs.nvidia.com/deploy/nvml-api/>): `nvmlInit_v2`,
//! `nvmlShutdown`, `nvmlSystemGetDriverVersion`, `nvmlDeviceGetCount_v2`,
//! `nvmlDeviceGetHandleByIndex_v2`, `nvmlDeviceGetName`, `nvmlDeviceGetUUID`,
//! `nvmlDeviceGetTotalEnergyConsumption` (mJ) and `nvmlDeviceGetPowerUsage` (mW), and
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
//! | `power_mw` | what `nvmlDeviceGetPowerUsage` returns (default: `energy_w` in mW) |
//! | `power=unsupported` | `nvmlDeviceGetPowerUsage` returns `NVML_ERROR_NOT_SUPPORTED` |
//! | `lost=yes` | both readings return `NVML_ERROR_GPU_IS_LOST` (with `WATTIO_NVML_STUB_FILE`, a GPU lost mid-run) |
//!
//! `WATTIO_NVML_STUB_INIT=no_permission` (or `driver_not_loaded`) makes `nvmlInit_v2` fail with
//! `NVML_ERROR_NO_PERMISSION` (or `NVML_ERROR_DRIVER_NOT_LOADED`).

#![allow(non_snake_case)]

use std::ffi::{c_char, c_uint, c_ulonglong, c_void};
use std::sync::Mutex;
use std::time::Instant;

/// `nvmlReturn_t` values (nvml.h).
pub const NVML_SUCCESS: c_uint = 0;
pub const NVML_ERROR_UNINITIALIZED: c_uint = 1;
pub const NVML_ERROR_INVALID_ARGUMENT: c_uint = 2;
pub const NVML_ERROR_NOT_SUPPORTED: c_uint = 3;
pub const NVML_ERROR_NO_PERMISSION: c_uint = 4;
pub const NVML_ERROR_INSUFFICIENT_SIZE: c_uint = 7;
pub const NVML_ERROR_DRIVER_NOT_LOADED: c_uint = 9;
pub const NVML_ERROR_GPU_IS_LOST: c_uint = 15;

/// When `nvmlInit_v2` last succeeded (counters grow from there); `None` when not initialised.
static STARTED: Mutex<Option<Instant>> = Mutex::new(None);

/// One pretend GPU.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StubGpu {
    pub name: String,
    pub uuid: String,
    pub energy_mj: u64,
    pub energy_w: f64,
    /// The counter's update period in ms (0: it changes on every call).
    pub energy_update_ms: f64,
    pub energy_supported: bool,
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

fn gpus() -> Vec<StubGpu> {
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
        .map(|t| t.elapsed().as_secs_f64())
}

/// The GPU a handle stands for (handles are index + 1, never null).
fn gpu_of(device: *mut c_void) -> Result<StubGpu, c_uint> {
    if elapsed_s().is_none() {
        return Err(NVML_ERROR_UNINITIALIZED);
    }
    let i = (device as usize).wrapping_sub(1);
    gpus().get(i).cloned().ok_or(NVML_ERROR_INVALID_ARGUMENT)
}

/// Copies `s` with its NUL into `buf` of `len` bytes.
unsafe fn put_str(s: &str, buf: *mut c_char, len: c_uint) -> c_uint {
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
    let mut s = STARTED.lock().unwrap_or_else(|p| p.into_inner());
    s.get_or_insert_with(Instant::now);
    NVML_SUCCESS
}

/// # Safety
/// Called through the C ABI by an NVML user.
#[no_mangle]
pub unsafe extern "C" fn nvmlShutdown() -> c_uint {
    *STARTED.lock().unwrap_or_else(|p| p.into_inner()) = None;
    NVML_SUCCESS
}

/// # Safety
/// `buf` must hold `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(buf: *mut c_char, len: c_uint) -> c_uint {
    put_str("0.0-wattio-nvml-stub", buf, len)
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
    let g = match gpu_of(device) {
        Ok(g) => g,
        Err(e) => return e,
    };
    if g.lost {
        return NVML_ERROR_GPU_IS_LOST;
    }
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
    *energy = g.energy_mj + (g.energy_w * t * 1000.0) as u64;
    NVML_SUCCESS
}

/// # Safety
/// `power` must be writable.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(
    device: *mut c_void,
    power: *mut c_uint,
) -> c_uint {
    let g = match gpu_of(device) {
        Ok(g) => g,
        Err(e) => return e,
    };
    if g.lost {
        return NVML_ERROR_GPU_IS_LOST;
    }
    if !g.power_supported {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if power.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *power = g
        .power_mw
        .unwrap_or((g.energy_w * 1000.0).round() as c_uint);
    NVML_SUCCESS
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
        _ => b"Unknown Error\0",
    };
    s.as_ptr() as *const c_char
}

/// Where Cargo put the stand-in's shared library for the test binary calling this: next to
/// it in `target/<profile>/deps/`, or in `target/<profile>/` (a crate that names `nvml-stub` as
/// a dev-dependency gets it built by `cargo test`, in debug and in release alike). Panics with
/// the command to run when it is not there.
pub fn built_library() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's own path");
    let name = format!(
        "{}nvml_stub{}",
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
        "{name} not found next to {}: build it with `cargo build -p nvml-stub` (add --release for release tests)",
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
