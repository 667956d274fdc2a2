//! The JVM's CPU time is read by `wattio_energy::attribution::cputime::process_cpu_ns` (the sum of
//! `/proc/PID/task/*/schedstat`, nanoseconds on CPU per thread; `/proc/PID/stat` ticks where the
//! kernel has no schedstat), the one CPU-time reader of wattio. `/proc/PID/stat` counts 10 ms
//! ticks, too coarse for millisecond windows; schedstat has ns. A thread that exits inside a
//! window takes its time with it, so the JVM is started with
//! `-XX:-UseDynamicNumberOfCompilerThreads` (its other threads live as long as it does).
//!
//! What is left here is a test helper.

/// Test helper: spins until this thread has used `ms` of CPU; returns the ns it used.
#[doc(hidden)]
pub fn spin_cpu_ms(ms: u64) -> u64 {
    let now = || (wattio_energy::attribution::cputime::thread_cpu_s() * 1e9) as u64;
    let t0 = now();
    let mut x = 1u64;
    while now() - t0 < ms * 1_000_000 {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    now() - t0
}
