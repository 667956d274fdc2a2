//! The stand-in `libcuda.so.1`: the CUDA driver API calls `wattio workload gpu` makes
//! (CUDA Driver API reference, <https://docs.nvidia.com/cuda/cuda-driver-api/>), with the
//! driver's names, C ABI and return codes.
//!
//! Its devices are the stand-in NVML's GPUs (the same `WATTIO_NVML_STUB` description).
//! `cuModuleLoadData` accepts PTX text only, and only when it has a `.version`, a `.target`
//! and at least one `.entry`; `cuModuleGetFunction` finds those entries by name. A launch of
//! any entry "runs" for `iters × threads / 10⁹` seconds (its second parameter is read as the
//! `u32` iteration count, as wattio's spin kernel takes it), one kernel after another as on a
//! stream; `cuCtxSynchronize` waits for them and records each one's interval, and
//! `cuMemAlloc_v2` the memory held, in the activity files the stand-in NVML reads
//! ([`crate::activity`]). `WATTIO_CUDA_STUB_INIT=no_device` makes `cuInit` fail with
//! `CUDA_ERROR_NO_DEVICE`.

use crate::activity;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const CUDA_SUCCESS: c_int = 0;
pub const CUDA_ERROR_INVALID_VALUE: c_int = 1;
pub const CUDA_ERROR_NOT_INITIALIZED: c_int = 3;
pub const CUDA_ERROR_NO_DEVICE: c_int = 100;
pub const CUDA_ERROR_INVALID_DEVICE: c_int = 101;
pub const CUDA_ERROR_INVALID_PTX: c_int = 218;
pub const CUDA_ERROR_INVALID_CONTEXT: c_int = 201;
pub const CUDA_ERROR_INVALID_HANDLE: c_int = 400;
pub const CUDA_ERROR_NOT_FOUND: c_int = 500;

/// `CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK` and `CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`.
const ATTR_MAX_THREADS_PER_BLOCK: c_int = 1;
const ATTR_MULTIPROCESSOR_COUNT: c_int = 16;

/// Thread-iterations the stand-in device does per second.
const THREAD_ITERS_PER_S: f64 = 1e9;

#[derive(Default)]
struct State {
    initialised: bool,
    /// The device of the current context (contexts are device + 1).
    device: Option<u32>,
    /// Entry names of each loaded module (modules are index + 1).
    modules: Vec<Vec<String>>,
    /// Loaded functions (index + 1).
    functions: Vec<String>,
    /// Kernels launched and not yet synchronised: start and end on the monotonic clock (the
    /// wall clock may be stepped while one runs; a real GPU does not wait for it).
    pending: Vec<(Instant, Instant)>,
    mem_bytes: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    initialised: false,
    device: None,
    modules: Vec::new(),
    functions: Vec::new(),
    pending: Vec::new(),
    mem_bytes: 0,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

fn device_count() -> usize {
    crate::gpus().len()
}

/// The `.entry` names of a PTX module, or `None` when it does not look like PTX.
pub fn ptx_entries(ptx: &str) -> Option<Vec<String>> {
    if !ptx.contains(".version") || !ptx.contains(".target") {
        return None;
    }
    let names: Vec<String> = ptx
        .split(".entry")
        .skip(1)
        .filter_map(|rest| {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect();
    (!names.is_empty()).then_some(names)
}

/// # Safety
/// Called through the C ABI by a CUDA driver API user.
#[no_mangle]
pub unsafe extern "C" fn cuInit(_flags: c_uint) -> c_int {
    if std::env::var("WATTIO_CUDA_STUB_INIT").as_deref() == Ok("no_device") || device_count() == 0 {
        return CUDA_ERROR_NO_DEVICE;
    }
    state().initialised = true;
    CUDA_SUCCESS
}

/// # Safety
/// `count` must be writable.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> c_int {
    if !state().initialised {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if count.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *count = device_count() as c_int;
    CUDA_SUCCESS
}

/// # Safety
/// `device` must be writable.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> c_int {
    if !state().initialised {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if device.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if ordinal < 0 || ordinal as usize >= device_count() {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *device = ordinal;
    CUDA_SUCCESS
}

/// # Safety
/// `name` must hold `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: c_int) -> c_int {
    let Some(g) = crate::gpus().get(dev.max(0) as usize).cloned() else {
        return CUDA_ERROR_INVALID_DEVICE;
    };
    match crate::put_str(&g.name, name, len.max(0) as c_uint) {
        crate::NVML_SUCCESS => CUDA_SUCCESS,
        _ => CUDA_ERROR_INVALID_VALUE,
    }
}

/// # Safety
/// `pi` must be writable.
#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(pi: *mut c_int, attrib: c_int, dev: c_int) -> c_int {
    if pi.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if dev < 0 || dev as usize >= device_count() {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *pi = match attrib {
        ATTR_MAX_THREADS_PER_BLOCK => 1024,
        ATTR_MULTIPROCESSOR_COUNT => 4,
        _ => return CUDA_ERROR_INVALID_VALUE,
    };
    CUDA_SUCCESS
}

/// # Safety
/// `ctx` must be writable.
#[no_mangle]
pub unsafe extern "C" fn cuCtxCreate_v2(
    ctx: *mut *mut c_void,
    _flags: c_uint,
    dev: c_int,
) -> c_int {
    let mut s = state();
    if !s.initialised {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if ctx.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if dev < 0 || dev as usize >= device_count() {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    s.device = Some(dev as u32);
    *ctx = (dev as usize + 1) as *mut c_void;
    activity::append(&format!("mem {dev} 0"));
    CUDA_SUCCESS
}

/// # Safety
/// Called through the C ABI.
#[no_mangle]
pub unsafe extern "C" fn cuCtxDestroy_v2(_ctx: *mut c_void) -> c_int {
    let mut s = state();
    if let Some(d) = s.device.take() {
        activity::append(&format!("mem {d} 0"));
    }
    s.pending.clear();
    s.mem_bytes = 0;
    CUDA_SUCCESS
}

/// # Safety
/// `module` must be writable; `image` a NUL-terminated PTX text.
#[no_mangle]
pub unsafe extern "C" fn cuModuleLoadData(module: *mut *mut c_void, image: *const c_void) -> c_int {
    let mut s = state();
    if s.device.is_none() {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if module.is_null() || image.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let text = CStr::from_ptr(image as *const c_char).to_string_lossy();
    let Some(entries) = ptx_entries(&text) else {
        return CUDA_ERROR_INVALID_PTX;
    };
    s.modules.push(entries);
    *module = s.modules.len() as *mut c_void;
    CUDA_SUCCESS
}

/// # Safety
/// `func` must be writable; `name` NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn cuModuleGetFunction(
    func: *mut *mut c_void,
    module: *mut c_void,
    name: *const c_char,
) -> c_int {
    let mut s = state();
    if func.is_null() || name.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let name = CStr::from_ptr(name).to_string_lossy().into_owned();
    let Some(entries) = (module as usize)
        .checked_sub(1)
        .and_then(|i| s.modules.get(i))
    else {
        return CUDA_ERROR_INVALID_HANDLE;
    };
    if !entries.contains(&name) {
        return CUDA_ERROR_NOT_FOUND;
    }
    s.functions.push(name);
    *func = s.functions.len() as *mut c_void;
    CUDA_SUCCESS
}

/// # Safety
/// `dptr` must be writable.
#[no_mangle]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut c_ulonglong, bytesize: usize) -> c_int {
    let mut s = state();
    let Some(d) = s.device else {
        return CUDA_ERROR_INVALID_CONTEXT;
    };
    if dptr.is_null() || bytesize == 0 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    s.mem_bytes += bytesize as u64;
    *dptr = 0x7f00_0000_0000 + s.mem_bytes;
    activity::append(&format!("mem {d} {}", s.mem_bytes));
    CUDA_SUCCESS
}

/// # Safety
/// Called through the C ABI.
#[no_mangle]
pub unsafe extern "C" fn cuMemFree_v2(_dptr: c_ulonglong) -> c_int {
    CUDA_SUCCESS
}

/// # Safety
/// `params` must point at the kernel's parameters (the second a `u32`).
#[no_mangle]
pub unsafe extern "C" fn cuLaunchKernel(
    f: *mut c_void,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    _shared_mem_bytes: c_uint,
    _stream: *mut c_void,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> c_int {
    let mut s = state();
    if s.device.is_none() {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (f as usize)
        .checked_sub(1)
        .and_then(|i| s.functions.get(i))
        .is_none()
    {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if params.is_null() || (*params.add(1)).is_null() || block_x * block_y * block_z > 1024 {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let iters = *(*params.add(1) as *const u32) as f64;
    let threads = [grid_x, grid_y, grid_z, block_x, block_y, block_z]
        .iter()
        .map(|&d| d as f64)
        .product::<f64>();
    let dur = Duration::from_secs_f64((iters * threads / THREAD_ITERS_PER_S).max(1e-6));
    let now = Instant::now();
    let start = s.pending.last().map_or(now, |&(_, e)| e.max(now));
    s.pending.push((start, start + dur));
    CUDA_SUCCESS
}

/// # Safety
/// Called through the C ABI.
#[no_mangle]
pub unsafe extern "C" fn cuCtxSynchronize() -> c_int {
    let (device, pending) = {
        let mut s = state();
        let Some(d) = s.device else {
            return CUDA_ERROR_INVALID_CONTEXT;
        };
        (d, std::mem::take(&mut s.pending))
    };
    if let Some(&(_, end)) = pending.last() {
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
    }
    // On the epoch clock for the stand-in NVML, as of now.
    let (now, now_us) = (Instant::now(), activity::now_us());
    let us =
        |t: Instant| now_us.saturating_sub(now.saturating_duration_since(t).as_micros() as u64);
    for (a, b) in pending {
        activity::append(&format!("busy {device} {} {}", us(a), us(b)));
    }
    CUDA_SUCCESS
}

/// # Safety
/// `p` must be writable.
#[no_mangle]
pub unsafe extern "C" fn cuGetErrorString(error: c_int, p: *mut *const c_char) -> c_int {
    if p.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let s: &'static [u8] = match error {
        CUDA_SUCCESS => b"no error\0",
        CUDA_ERROR_INVALID_VALUE => b"invalid argument\0",
        CUDA_ERROR_NOT_INITIALIZED => b"initialization error\0",
        CUDA_ERROR_NO_DEVICE => b"no CUDA-capable device is detected\0",
        CUDA_ERROR_INVALID_DEVICE => b"invalid device ordinal\0",
        CUDA_ERROR_INVALID_PTX => b"a PTX JIT compilation failed\0",
        CUDA_ERROR_INVALID_CONTEXT => b"invalid device context\0",
        CUDA_ERROR_INVALID_HANDLE => b"invalid resource handle\0",
        CUDA_ERROR_NOT_FOUND => b"named symbol not found\0",
        _ => return CUDA_ERROR_INVALID_VALUE,
    };
    *p = s.as_ptr() as *const c_char;
    CUDA_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_entries_are_found() {
        let ptx =
            ".version 6.0\n.target sm_50\n.visible .entry wattio_spin(\n.param .u64 a)\n{ ret; }";
        assert_eq!(ptx_entries(ptx), Some(vec!["wattio_spin".to_string()]));
        assert_eq!(ptx_entries("not ptx"), None);
        assert_eq!(ptx_entries(".version 6.0\n.target sm_50\n"), None);
    }
}
