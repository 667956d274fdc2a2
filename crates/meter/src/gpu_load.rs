//! `wattio workload gpu`: a known GPU load wherever the NVIDIA driver is, without the CUDA
//! toolkit, PyTorch or a compiler.
//!
//! The CUDA driver library (`libcuda.so.1`, installed by the driver, as `libnvidia-ml.so.1` is)
//! is loaded at run time, and a spin kernel written in PTX, NVIDIA's virtual instruction set, is
//! handed to it as text: the driver compiles PTX for whatever GPU it runs on (`cuModuleLoadData`,
//! CUDA Driver API, Module Management, <https://docs.nvidia.com/cuda/cuda-driver-api/>; PTX ISA,
//! <https://docs.nvidia.com/cuda/parallel-thread-execution/>). Each launch fills every
//! multiprocessor (8 blocks of 256 threads per SM) with four independent chains of fused
//! multiply-adds, sized to last about 10 ms. `--util` is a duty cycle over 100 ms periods: the
//! GPU is busy for that fraction of each period and idle for the rest, so the per-process
//! utilisation NVML reports for this process is the asked one.

use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr, OsStr, OsString};
use std::time::{Duration, Instant};

/// The environment variable naming the CUDA driver library to load instead of `libcuda.so.1`.
pub const CUDA_LIB_ENV: &str = "WATTIO_CUDA_LIB";

/// The library loaded by default: the NVIDIA driver's, through the dynamic loader's search path.
const DEFAULT_CUDA_LIB: &str = "libcuda.so.1";

/// The library to load: `WATTIO_CUDA_LIB` when set and not empty, else `libcuda.so.1`.
pub fn cuda_lib_from_env() -> OsString {
    std::env::var_os(CUDA_LIB_ENV)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_CUDA_LIB.into())
}

/// The spin kernel: `wattio_spin(float *out, u32 iters)`. Every thread runs `iters` rounds of
/// four independent fused multiply-adds converging towards 10⁴; the sum is stored only when it
/// is exactly zero (never), which keeps the work from being optimised away. PTX ISA 6.0 for
/// `sm_50`: any driver since CUDA 9 compiles it for any GPU since Maxwell.
pub const SPIN_PTX: &str = r#"//
// wattio workload gpu: spin kernel (see crates/meter/src/gpu_load.rs)
//
.version 6.0
.target sm_50
.address_size 64

.visible .entry wattio_spin(
	.param .u64 wattio_spin_param_0,
	.param .u32 wattio_spin_param_1
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<4>;
	.reg .f32 	%f<10>;
	.reg .b64 	%rd<3>;

	ld.param.u64 	%rd1, [wattio_spin_param_0];
	ld.param.u32 	%r1, [wattio_spin_param_1];
	mov.u32 	%r2, %tid.x;
	cvt.rn.f32.u32 	%f1, %r2;
	add.f32 	%f2, %f1, 0f3F800000;
	add.f32 	%f3, %f1, 0f40000000;
	add.f32 	%f4, %f1, 0f40400000;
	mov.f32 	%f5, 0f3F7FFFEF;
	mov.f32 	%f6, 0f3C23D70A;
	mov.u32 	%r3, 0;
	setp.eq.u32 	%p1, %r1, 0;
	@%p1 bra 	$L_done;
$L_loop:
	fma.rn.f32 	%f1, %f1, %f5, %f6;
	fma.rn.f32 	%f2, %f2, %f5, %f6;
	fma.rn.f32 	%f3, %f3, %f5, %f6;
	fma.rn.f32 	%f4, %f4, %f5, %f6;
	add.u32 	%r3, %r3, 1;
	setp.lt.u32 	%p2, %r3, %r1;
	@%p2 bra 	$L_loop;
$L_done:
	add.f32 	%f7, %f1, %f2;
	add.f32 	%f8, %f3, %f4;
	add.f32 	%f9, %f7, %f8;
	setp.neu.f32 	%p3, %f9, 0f00000000;
	@%p3 bra 	$L_end;
	cvta.to.global.u64 	%rd2, %rd1;
	st.global.f32 	[%rd2], %f9;
$L_end:
	ret;
}
"#;

/// What `wattio workload gpu` is asked to do.
#[derive(Debug, Clone)]
pub struct GpuLoadConfig {
    /// The CUDA driver library ([`cuda_lib_from_env`]).
    pub lib: OsString,
    /// The CUDA device ordinal.
    pub device: u32,
    /// Fraction of each 100 ms period the GPU is kept busy, in (0, 1].
    pub util: f64,
    pub duration: Duration,
}

/// What it did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GpuLoadReport {
    pub device: u32,
    pub device_name: String,
    pub multiprocessors: u32,
    /// Seconds from the first timed launch to the end.
    pub elapsed_s: f64,
    /// Seconds kernels ran (launch to synchronise), and that over `elapsed_s`.
    pub busy_s: f64,
    pub busy_fraction: f64,
    pub launches: u64,
    pub iters_per_launch: u32,
}

/// Why the load could not run: what failed, and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{what}; {fix}")]
pub struct GpuLoadError {
    pub what: String,
    pub fix: String,
}

const FIX_DRIVER: &str = "check that `nvidia-smi` works, or set WATTIO_CUDA_LIB to the driver's libcuda.so.1 (PyTorch is another GPU load: python3 -c 'import torch; …')";

type CuResult = c_int;

/// The driver API entry points used, resolved once.
struct Cuda {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult,
    device_get_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuResult,
    device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> CuResult,
    ctx_create: unsafe extern "C" fn(*mut *mut c_void, c_uint, c_int) -> CuResult,
    ctx_destroy: unsafe extern "C" fn(*mut c_void) -> CuResult,
    ctx_synchronize: unsafe extern "C" fn() -> CuResult,
    module_load_data: unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CuResult,
    module_get_function:
        unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *const c_char) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut c_ulonglong, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(c_ulonglong) -> CuResult,
    #[allow(clippy::type_complexity)]
    launch_kernel: unsafe extern "C" fn(
        *mut c_void,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        *mut c_void,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> CuResult,
    get_error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
    // Last: the pointers above are valid while the library stays loaded.
    _lib: Library,
}

impl Cuda {
    fn load(path: &OsStr) -> Result<Cuda, GpuLoadError> {
        let shown = path.to_string_lossy();
        // SAFETY: loading the CUDA driver library runs its initialisers, which NVIDIA's
        // driver and the stand-in keep free of side effects beyond their own state.
        let lib = unsafe { Library::new(path) }.map_err(|e| GpuLoadError {
            what: format!("cannot load the CUDA driver library {shown} ({e})"),
            fix: "install the NVIDIA driver (it ships libcuda.so.1), or set WATTIO_CUDA_LIB to its path".into(),
        })?;
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol's type is the CUDA driver API's prototype for it.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| GpuLoadError {
                    what: format!(
                        "{shown} has no {} ({e}): it is not the CUDA driver library",
                        $name
                    ),
                    fix: FIX_DRIVER.into(),
                })?
            };
        }
        Ok(Cuda {
            init: sym!("cuInit"),
            device_get_count: sym!("cuDeviceGetCount"),
            device_get: sym!("cuDeviceGet"),
            device_get_name: sym!("cuDeviceGetName"),
            device_get_attribute: sym!("cuDeviceGetAttribute"),
            ctx_create: sym!("cuCtxCreate_v2"),
            ctx_destroy: sym!("cuCtxDestroy_v2"),
            ctx_synchronize: sym!("cuCtxSynchronize"),
            module_load_data: sym!("cuModuleLoadData"),
            module_get_function: sym!("cuModuleGetFunction"),
            mem_alloc: sym!("cuMemAlloc_v2"),
            mem_free: sym!("cuMemFree_v2"),
            launch_kernel: sym!("cuLaunchKernel"),
            get_error_string: sym!("cuGetErrorString"),
            _lib: lib,
        })
    }

    /// `Ok` for `CUDA_SUCCESS`, else the call, the driver's code and its message.
    fn check(&self, call: &str, r: CuResult) -> Result<(), GpuLoadError> {
        if r == 0 {
            return Ok(());
        }
        let mut msg: *const c_char = std::ptr::null();
        // SAFETY: `msg` is writable; the driver returns a static string.
        let text = if unsafe { (self.get_error_string)(r, &mut msg) } == 0 && !msg.is_null() {
            unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned()
        } else {
            "unknown error".into()
        };
        Err(GpuLoadError {
            what: format!("{call} failed: CUDA error {r} ({text})"),
            fix: if r == 100 {
                "no GPU this driver can use: `nvidia-smi -L` lists what it sees".into()
            } else {
                FIX_DRIVER.into()
            },
        })
    }
}

/// A context on one device with the spin kernel loaded; destroyed on drop.
struct SpinKernel<'a> {
    cuda: &'a Cuda,
    ctx: *mut c_void,
    function: *mut c_void,
    out: c_ulonglong,
    grid: c_uint,
}

impl Drop for SpinKernel<'_> {
    fn drop(&mut self) {
        // SAFETY: created by this context, destroyed once.
        unsafe {
            if self.out != 0 {
                (self.cuda.mem_free)(self.out);
            }
            (self.cuda.ctx_destroy)(self.ctx);
        }
    }
}

const BLOCK_THREADS: c_uint = 256;
const BLOCKS_PER_SM: c_uint = 8;

impl SpinKernel<'_> {
    /// Runs one launch of `iters` and waits for it: its wall time.
    fn run(&self, iters: u32) -> Result<Duration, GpuLoadError> {
        let mut out = self.out;
        let mut iters = iters;
        let mut params = [
            &mut out as *mut c_ulonglong as *mut c_void,
            &mut iters as *mut u32 as *mut c_void,
        ];
        let t = Instant::now();
        // SAFETY: the parameters match wattio_spin's (u64, u32) and live across the call.
        let r = unsafe {
            (self.cuda.launch_kernel)(
                self.function,
                self.grid,
                1,
                1,
                BLOCK_THREADS,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        self.cuda.check("cuLaunchKernel", r)?;
        self.cuda
            .check("cuCtxSynchronize", unsafe { (self.cuda.ctx_synchronize)() })?;
        Ok(t.elapsed())
    }
}

/// Keeps GPU `cfg.device` busy for `cfg.util` of each 100 ms for `cfg.duration`.
pub fn gpu_load(cfg: &GpuLoadConfig) -> Result<GpuLoadReport, GpuLoadError> {
    if !(cfg.util.is_finite() && cfg.util > 0.0 && cfg.util <= 1.0) {
        return Err(GpuLoadError {
            what: format!(
                "--util must be more than 0 and at most 100 (got {})",
                cfg.util * 100.0
            ),
            fix: "e.g. --util 50 for half of each 100 ms".into(),
        });
    }
    let cuda = Cuda::load(&cfg.lib)?;
    // SAFETY (every call below): out-pointers are valid locals; handles come from the driver.
    cuda.check("cuInit", unsafe { (cuda.init)(0) })?;
    let mut count = 0;
    cuda.check("cuDeviceGetCount", unsafe {
        (cuda.device_get_count)(&mut count)
    })?;
    if cfg.device as i64 >= count as i64 {
        return Err(GpuLoadError {
            what: format!("no CUDA device {} (the driver lists {count})", cfg.device),
            fix: format!("use --device 0 to {}", (count - 1).max(0)),
        });
    }
    let mut dev = 0;
    cuda.check("cuDeviceGet", unsafe {
        (cuda.device_get)(&mut dev, cfg.device as c_int)
    })?;
    let mut name = [0 as c_char; 256];
    cuda.check("cuDeviceGetName", unsafe {
        (cuda.device_get_name)(name.as_mut_ptr(), name.len() as c_int, dev)
    })?;
    let device_name = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut sms = 0;
    // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    cuda.check("cuDeviceGetAttribute", unsafe {
        (cuda.device_get_attribute)(&mut sms, 16, dev)
    })?;
    let mut ctx = std::ptr::null_mut();
    cuda.check("cuCtxCreate", unsafe {
        (cuda.ctx_create)(&mut ctx, 0, dev)
    })?;
    let mut kernel = SpinKernel {
        cuda: &cuda,
        ctx,
        function: std::ptr::null_mut(),
        out: 0,
        grid: sms.max(1) as c_uint * BLOCKS_PER_SM,
    };
    let ptx = std::ffi::CString::new(SPIN_PTX).expect("the PTX has no NUL");
    let mut module = std::ptr::null_mut();
    cuda.check(
        "cuModuleLoadData (compiling the spin kernel's PTX)",
        unsafe { (cuda.module_load_data)(&mut module, ptx.as_ptr() as *const c_void) },
    )?;
    cuda.check("cuModuleGetFunction", unsafe {
        (cuda.module_get_function)(&mut kernel.function, module, c"wattio_spin".as_ptr())
    })?;
    cuda.check("cuMemAlloc", unsafe {
        (cuda.mem_alloc)(&mut kernel.out, 4)
    })?;

    let iters = calibrate(&kernel, Duration::from_millis(10))?;
    let period = Duration::from_millis(100);
    let busy_per_period = period.mul_f64(cfg.util);
    let start = Instant::now();
    let end = start + cfg.duration;
    let (mut busy, mut launches) = (Duration::ZERO, 0u64);
    let mut period_start = start;
    while Instant::now() < end {
        let mut busy_here = Duration::ZERO;
        while busy_here < busy_per_period && Instant::now() < end {
            // The last launch of a period shortened so the period's busy time is the asked one.
            let left = busy_per_period - busy_here;
            let n = if left < Duration::from_millis(10) {
                ((iters as f64 * left.as_secs_f64() / 0.010).round() as u32).max(1)
            } else {
                iters
            };
            let t = kernel.run(n)?;
            busy_here += t;
            launches += 1;
        }
        busy += busy_here;
        period_start += period;
        let now = Instant::now();
        if period_start > now {
            std::thread::sleep((period_start.min(end)).saturating_duration_since(now));
        } else {
            period_start = now;
        }
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    Ok(GpuLoadReport {
        device: cfg.device,
        device_name,
        multiprocessors: sms.max(0) as u32,
        elapsed_s,
        busy_s: busy.as_secs_f64(),
        busy_fraction: busy.as_secs_f64() / elapsed_s.max(1e-9),
        launches,
        iters_per_launch: iters,
    })
}

/// The iteration count that makes one launch last about `target`: doubled from 1024 until a
/// launch takes at least a fifth of it, then scaled.
fn calibrate(kernel: &SpinKernel, target: Duration) -> Result<u32, GpuLoadError> {
    // The first launch pays for loading the code onto the GPU.
    kernel.run(1)?;
    let mut iters: u32 = 1024;
    loop {
        let t = kernel.run(iters)?;
        if t >= target / 5 || iters >= 1 << 30 {
            let scaled = iters as f64 * target.as_secs_f64() / t.as_secs_f64().max(1e-9);
            return Ok(scaled.clamp(1.0, (1u64 << 31) as f64) as u32);
        }
        iters *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ptx_declares_the_kernel_the_loader_asks_for() {
        assert!(SPIN_PTX.contains(".visible .entry wattio_spin("));
        assert!(SPIN_PTX.contains(".version 6.0") && SPIN_PTX.contains(".target sm_50"));
        // Every register used is declared: %p1-3, %r1-3, %f1-9, %rd1-2.
        for (reg, declared) in [("%p", 4), ("%r", 4), ("%f", 10), ("%rd", 3)] {
            for n in declared..declared + 3 {
                let used = format!("{reg}{n},");
                assert!(
                    !SPIN_PTX.contains(&used),
                    "{used} is beyond the declared {reg}<{declared}>"
                );
            }
        }
    }

    #[test]
    fn a_missing_library_says_how_to_fix_it() {
        let e = gpu_load(&GpuLoadConfig {
            lib: "/nonexistent/libcuda.so.1".into(),
            device: 0,
            util: 1.0,
            duration: Duration::from_millis(10),
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("cannot load the CUDA driver library /nonexistent/libcuda.so.1"),
            "{e}"
        );
        assert!(e.contains("WATTIO_CUDA_LIB"), "{e}");
    }
}
