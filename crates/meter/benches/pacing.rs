//! Pacing and CPU cost of the sampling loop (`make bench`).
//!
//! 1. At 1000 Hz for `WATTIO_BENCH_SECONDS` (default 60) seconds, side by side in one run: the
//!    `timerfd` loop and the paper's "badsleep" loop (`sleep(period)` after each read). Reports
//!    achieved samples per second and the p50 / p99 / max error of the interval between
//!    consecutive samples against the nominal 1 ms.
//! 2. The process's CPU time (user + system, `getrusage`) as a share of one core while sampling
//!    at 1, 10, 100 and 1000 Hz for `WATTIO_BENCH_CPU_SECONDS` (default 10) seconds each, writing
//!    CSV rows to a file as `wattio record` does, for two read paths: powercap fixture files
//!    (a `pread` per counter, the path of real sysfs) and the model (`/proc/stat`).
//!
//! 3. The floor under both: a bare `timerfd` loop that only wakes and timestamps, so the cost of
//!    the kernel's and hypervisor's wake-ups is told apart from the meter's own.
//!
//! 4. perf and eBPF on a stand-in for RAPL that counts on any machine (a fixture `power` PMU
//!    whose event is the kernel's `cpu-clock` counter, `FixtureTree::standin_power_pmu`), at the
//!    same rates: the process's CPU time as above and, for eBPF, the BPF program's time in the
//!    kernel's timer interrupt, which no process is charged for. That comes from the kernel's
//!    BPF statistics (`run_time_ns` / `run_cnt` in the program's fdinfo, with
//!    `kernel.bpf_stats_enabled` set to 1 for the run and restored after; root). Skipped where
//!    the build lacks the `ebpf` feature or the process may not use BPF.
//!
//! Prints Markdown tables; `docs/benchmarks/meter.md` holds a run.

use std::time::Duration;
use wattio_energy::{discover_powercap, PowercapSource};
use wattio_energy::{Mechanism, ModelParams, ModelSource, Source, SourceChoice, SysRoot};
use wattio_fixture as fixture;
use wattio_meter::{run_sampler, Pacing, RecordFormat, RowSink, Sample, SampleSink, SamplerConfig};
use wattio_progress::Cancel;

fn env_secs(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Records sample times and also writes the rows, as `record` would.
struct TimingSink {
    rows: RowSink<std::fs::File>,
    times: Vec<u64>,
}

impl SampleSink for TimingSink {
    fn consume(&mut self, s: &Sample) -> std::io::Result<()> {
        self.times.push(s.mono_ns);
        self.rows.consume(s)
    }
    fn finish(&mut self) -> std::io::Result<()> {
        self.rows.finish()
    }
}

fn powercap_source(dir: &std::path::Path) -> Box<dyn Source> {
    let root = SysRoot::new(dir);
    let zones: Vec<_> = discover_powercap(&root)
        .unwrap()
        .zones
        .into_iter()
        .filter(|z| z.name == "package-0")
        .collect();
    Box::new(PowercapSource::open(&zones).unwrap())
}

fn cpu_seconds() -> f64 {
    // SAFETY: zeroed rusage is valid for getrusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn run(
    source: Box<dyn Source>,
    freq: f64,
    secs: f64,
    pacing: Pacing,
    out: &std::path::Path,
) -> (Vec<u64>, f64, f64) {
    let rows = RowSink::new(
        source.as_ref(),
        RecordFormat::Csv,
        std::fs::File::create(out).unwrap(),
    )
    .unwrap();
    let sink = TimingSink {
        rows,
        times: Vec::with_capacity((freq * secs) as usize + 10),
    };
    let cfg = SamplerConfig {
        freq_hz: freq,
        duration: Some(Duration::from_secs_f64(secs)),
        pacing,
        ..SamplerConfig::default()
    };
    let cpu0 = cpu_seconds();
    let (stats, sink) = run_sampler(source, &cfg, &Cancel::new().unwrap(), sink).unwrap();
    let cpu = cpu_seconds() - cpu0;
    (sink.times, stats.wall_s, cpu)
}

/// The floor: a bare `timerfd` loop that only waits and timestamps, no read, no writer thread.
/// What the kernel and hypervisor charge for 1000 wake-ups a second, whatever the meter does.
fn bare_timerfd_loop(freq: f64, secs: f64) -> (Vec<u64>, f64, f64) {
    let period_ns = (1e9 / freq) as i64;
    let now = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid timespec.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts
    };
    // SAFETY: plain syscalls on a descriptor we own and close.
    unsafe {
        let fd = libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC);
        assert!(fd >= 0);
        let mut first = now(libc::CLOCK_MONOTONIC);
        first.tv_sec += 1;
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: (period_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (period_ns % 1_000_000_000) as libc::c_long,
            },
            it_value: first,
        };
        let r = libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut());
        assert_eq!(r, 0, "timerfd_settime: {}", std::io::Error::last_os_error());
        let n = (freq * secs) as usize;
        let mut times = Vec::with_capacity(n);
        let cpu0 = cpu_seconds();
        let t0 = std::time::Instant::now();
        let mut exp = 0u64;
        while times.len() < n {
            libc::read(fd, (&mut exp as *mut u64).cast(), 8);
            let t = now(libc::CLOCK_MONOTONIC);
            times.push(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
        }
        let wall = t0.elapsed().as_secs_f64() - 1.0; // the first tick waits one second
        let cpu = cpu_seconds() - cpu0;
        libc::close(fd);
        (times, wall.max(1e-9), cpu)
    }
}

/// perf or eBPF on the stand-in RAPL PMU under `root`, or why not.
fn standin_source(root: &SysRoot, m: Mechanism) -> Result<Box<dyn Source>, String> {
    wattio_energy::open_source(root, SourceChoice::Only(m), None, ModelParams::default())
        .map(|(s, _)| s)
        .map_err(|e| e.to_string())
}

/// `kernel.bpf_stats_enabled` set to 1 while alive, restored on drop.
struct BpfStats {
    before: String,
}

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl BpfStats {
    fn enable() -> std::io::Result<BpfStats> {
        let before = std::fs::read_to_string(BPF_STATS)?;
        std::fs::write(BPF_STATS, "1")?;
        Ok(BpfStats { before })
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write(BPF_STATS, self.before.trim());
    }
}

/// The (run_time_ns, run_cnt) fields of an fdinfo text: a BPF program's statistics.
fn bpf_stats_of(fdinfo: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        fdinfo
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((field("run_time_ns:")?, field("run_cnt:")?))
}

/// Duplicates of the BPF program descriptors this process holds open: they keep each
/// program's statistics readable after the source that loaded it is gone.
fn hold_bpf_programs() -> Vec<std::os::fd::OwnedFd> {
    use std::os::fd::{BorrowedFd, RawFd};
    let mut held = Vec::new();
    for e in std::fs::read_dir("/proc/self/fdinfo")
        .into_iter()
        .flatten()
        .flatten()
    {
        let is_prog = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|i| bpf_stats_of(&i))
            .is_some();
        let fd: Option<RawFd> = e.file_name().to_str().and_then(|n| n.parse().ok());
        if let (true, Some(fd)) = (is_prog, fd) {
            // SAFETY: fd was open a moment ago in this process and nothing closes it meanwhile
            // (the source that owns it is alive in the caller).
            let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
            if let Ok(dup) = borrowed.try_clone_to_owned() {
                held.push(dup);
            }
        }
    }
    held
}

/// Total (run_time_ns, run_cnt) of the programs `held`.
fn bpf_program_time(held: &[std::os::fd::OwnedFd]) -> (u64, u64) {
    use std::os::fd::AsRawFd;
    held.iter()
        .filter_map(|fd| {
            std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()
        })
        .filter_map(|i| bpf_stats_of(&i))
        .fold((0, 0), |(a, b), (ns, cnt)| (a + ns, b + cnt))
}

fn interval_errors_us(times: &[u64], period_ns: f64) -> Vec<f64> {
    times
        .windows(2)
        .map(|w| ((w[1] - w[0]) as f64 - period_ns).abs() / 1000.0)
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; filters are not supported by this harness.
    let secs = env_secs("WATTIO_BENCH_SECONDS", 60.0);
    let cpu_secs = env_secs("WATTIO_BENCH_CPU_SECONDS", 10.0);
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    fixture::intel_laptop(&fx).unwrap();
    let out = dir.path().join("rows.csv");

    println!(
        "## Pacing at 1000 Hz for {secs} s (source: powercap fixture, rows written to a file)\n"
    );
    println!("| loop | samples/s | p50 error (µs) | p99 error (µs) | max error (µs) |");
    println!("|---|---|---|---|---|");
    for (name, pacing) in [
        ("timerfd (wattio)", Some(Pacing::Timerfd)),
        ("sleep (badsleep)", Some(Pacing::Sleep)),
        ("bare timerfd loop (floor: no read, no writer)", None),
    ] {
        let (times, wall, _) = match pacing {
            Some(p) => run(powercap_source(&fx), 1000.0, secs, p, &out),
            None => bare_timerfd_loop(1000.0, secs),
        };
        let errs = interval_errors_us(&times, 1e6);
        let q = |p| wattio_stats::quantile(&errs, p).unwrap_or(f64::NAN);
        let max = errs.iter().copied().fold(0.0, f64::max);
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} |",
            times.len() as f64 / wall,
            q(0.5),
            q(0.99),
            max
        );
    }

    println!("\n## CPU time of the meter process ({cpu_secs} s per rate, timerfd, rows written to a file)\n");
    println!("| read path | rate (Hz) | CPU (% of one core) |");
    println!("|---|---|---|");
    for freq in [1.0, 10.0, 100.0, 1000.0] {
        let (_, wall, cpu) = bare_timerfd_loop(freq, cpu_secs);
        println!(
            "| none: bare timerfd loop (floor) | {freq} | {:.3} |",
            100.0 * cpu / wall
        );
    }
    for (name, model) in [
        ("powercap (fixture file)", false),
        ("model (/proc/stat)", true),
    ] {
        for freq in [1.0, 10.0, 100.0, 1000.0] {
            let src: Box<dyn Source> = if model {
                Box::new(ModelSource::open(&SysRoot::new("/"), ModelParams::default()).unwrap())
            } else {
                powercap_source(&fx)
            };
            let (_, wall, cpu) = run(src, freq, cpu_secs, Pacing::Timerfd, &out);
            println!("| {name} | {freq} | {:.3} |", 100.0 * cpu / wall);
        }
    }

    println!("\n## perf and eBPF on the stand-in RAPL PMU (cpu-clock counter; {cpu_secs} s per rate, timerfd, rows written to a file)\n");
    let standin = dir.path().join("standin");
    fixture::FixtureTree::new(&standin)
        .unwrap()
        .standin_power_pmu("0", &[("energy-pkg", 1e-9)])
        .unwrap();
    let standin = SysRoot::new(&standin);
    let stats = BpfStats::enable();
    if let Err(e) = &stats {
        eprintln!("kernel.bpf_stats_enabled could not be set ({e}): the BPF program's time is not measured");
    }
    println!("| read path | rate (Hz) | process CPU (% of one core) | BPF program in the timer interrupt (% of one core) | program time per tick (ns) |");
    println!("|---|---|---|---|---|");
    for (name, m) in [
        ("perf (stand-in)", Mechanism::Perf),
        ("ebpf (stand-in)", Mechanism::Ebpf),
    ] {
        for freq in [1.0, 10.0, 100.0, 1000.0] {
            let src = match standin_source(&standin, m) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("{name} skipped: {e}");
                    break;
                }
            };
            let held = hold_bpf_programs();
            let (ns0, cnt0) = bpf_program_time(&held);
            let (_, wall, cpu) = run(src, freq, cpu_secs, Pacing::Timerfd, &out);
            let (ns1, cnt1) = bpf_program_time(&held);
            drop(held);
            let (prog, per_tick) = match (m, &stats) {
                (Mechanism::Ebpf, Ok(_)) if cnt1 > cnt0 => (
                    format!("{:.4}", 100.0 * (ns1 - ns0) as f64 * 1e-9 / wall),
                    format!("{:.0}", (ns1 - ns0) as f64 / (cnt1 - cnt0) as f64),
                ),
                (Mechanism::Ebpf, _) => ("not measured".into(), "not measured".into()),
                _ => ("none".into(), "none".into()),
            };
            println!(
                "| {name} | {freq} | {:.3} | {prog} | {per_tick} |",
                100.0 * cpu / wall
            );
        }
    }
}
