//! Pacing and CPU cost of the sampling loop (`make bench`).
//!
//! 1. At 1000 Hz for `WATTIO_BENCH_SECONDS` (default 60) seconds per loop, in
//!    `WATTIO_BENCH_ROUNDS` (default 6) interleaved rounds, side by side: a bare
//!    `timerfd` loop (the floor), the sampler on the powercap and the MSR fixtures, and the
//!    paper's "badsleep" loop (`sleep(period)` after each read). Reports samples per second,
//!    each reading's lateness against its deadline on the timer's grid, the interval error
//!    against the nominal 1 ms, and the cause of each tick later than 50 µs: the loop's own
//!    previous reading still running, the writer thread busy on the reading thread's CPU, or
//!    neither (the scheduler or the hypervisor). `scripts/trace-meter-wakeups.py` splits the
//!    last kind further with the kernel's tracepoints.
//!    Then the process's CPU at 1000 Hz of the floor and the sampler (powercap, MSR) without
//!    probes, `WATTIO_BENCH_CPU_SECONDS` per loop per round in up to 5 interleaved rounds, with
//!    each round's difference to the floor: the meter's own cost.
//! 2. The process's CPU time (user + system, `getrusage`) as a share of one core while sampling
//!    at 1, 10, 100 and 1000 Hz for `WATTIO_BENCH_CPU_SECONDS` (default 10) seconds each, writing
//!    CSV rows to a file as `wattio record` does, for three read paths: powercap fixture files
//!    (a `pread` per counter, the path of real sysfs), a sparse MSR fixture file (the path of
//!    `/dev/cpu/N/msr`) and the model (`/proc/stat`).
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
//! 5. What reading faster than a counter updates costs: a fixture's package counter advanced at
//!    known watts every 1 ms (RAPL) or 50 ms (an NVML energy counter) by the fixture ticker,
//!    read at 1 to 1000 Hz for `WATTIO_BENCH_QUANTISATION_SECONDS` (default 10) each; each
//!    row's joules against the truth over its interval.
//!
//! `WATTIO_BENCH_PARTS` runs a comma-separated subset: `pacing` (1), `rates` (2 and 3),
//! `standin` (4), `quantisation` (5). Prints Markdown tables; `docs/benchmarks/meter.md` holds
//! runs.

use std::time::Duration;
use wattio_energy::{discover_powercap, mono_ns, MsrSource, PowercapSource};
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

/// What the writer thread did: the sample times and deadlines it was handed, and when it was
/// busy (one span per `consume` call, with the CPU it ran on), while also writing the rows as
/// `record` does.
struct ProbeSink {
    rows: RowSink<std::fs::File>,
    /// (reading time, deadline) per sample, CLOCK_MONOTONIC ns.
    times: Vec<(u64, u64)>,
    /// (start, end, cpu) per `consume` call.
    busy: Vec<(u64, u64, i32)>,
}

impl SampleSink for ProbeSink {
    fn consume(&mut self, s: &Sample) -> std::io::Result<()> {
        let start = mono_ns();
        self.times.push((s.mono_ns, s.deadline_ns));
        let r = self.rows.consume(s);
        // SAFETY: plain call.
        let cpu = unsafe { libc::sched_getcpu() };
        self.busy.push((start, mono_ns(), cpu));
        r
    }
    fn finish(&mut self) -> std::io::Result<()> {
        self.rows.finish()
    }
}

/// A source that records, on the reading thread, when each of its reads started and ended and
/// on which CPU: the reads' share of the late ticks.
struct ProbedSource {
    inner: Box<dyn Source>,
    reads: std::sync::Arc<std::sync::Mutex<Vec<(u64, u64, i32)>>>,
}

impl Source for ProbedSource {
    fn provenance(&self) -> &wattio_energy::Provenance {
        self.inner.provenance()
    }
    fn counters(&self) -> &[wattio_energy::CounterSpec] {
        self.inner.counters()
    }
    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), wattio_energy::EnergyError> {
        let start = mono_ns();
        let r = self.inner.read_raw(out);
        // SAFETY: plain call.
        let cpu = unsafe { libc::sched_getcpu() };
        self.reads.lock().unwrap().push((start, mono_ns(), cpu));
        r
    }
    fn take_counter_errors(&mut self) -> Vec<String> {
        self.inner.take_counter_errors()
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

/// Samples `source` at `freq` for `secs` with rows written to `out` as `record` does; returns
/// the wall and CPU seconds (user + system of the process).
fn run(
    source: Box<dyn Source>,
    freq: f64,
    secs: f64,
    pacing: Pacing,
    out: &std::path::Path,
) -> (f64, f64) {
    let rows = RowSink::new(
        source.as_ref(),
        RecordFormat::Csv,
        std::fs::File::create(out).unwrap(),
    )
    .unwrap();
    let cfg = SamplerConfig {
        freq_hz: freq,
        duration: Some(Duration::from_secs_f64(secs)),
        pacing,
        ..SamplerConfig::default()
    };
    let cpu0 = cpu_seconds();
    let (stats, _) = run_sampler(source, &cfg, &Cancel::new().unwrap(), rows).unwrap();
    (stats.wall_s, cpu_seconds() - cpu0)
}

/// One pacing run at 1000 Hz and what the probes saw.
struct PacingRun {
    /// (reading time, deadline) per sample.
    times: Vec<(u64, u64)>,
    /// (start, end, cpu) per read of the counters.
    reads: Vec<(u64, u64, i32)>,
    /// (start, end, cpu) per span of the writer thread's work.
    writer: Vec<(u64, u64, i32)>,
}

/// The `steal` column of `/proc/stat`'s `cpu` line, in seconds.
fn steal_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks = stat
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(8))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    // SAFETY: plain call.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// `nonvoluntary_ctxt_switches` of the calling thread.
fn involuntary_switches() -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn run_probed(
    source: Box<dyn Source>,
    secs: f64,
    pacing: Pacing,
    out: &std::path::Path,
) -> PacingRun {
    let freq = 1000.0;
    let capacity = (freq * secs) as usize + 16;
    let reads = std::sync::Arc::new(std::sync::Mutex::new(Vec::with_capacity(capacity)));
    let source = Box::new(ProbedSource {
        inner: source,
        reads: reads.clone(),
    });
    let rows = RowSink::new(
        source.as_ref(),
        RecordFormat::Csv,
        std::fs::File::create(out).unwrap(),
    )
    .unwrap();
    let sink = ProbeSink {
        rows,
        times: Vec::with_capacity(capacity),
        busy: Vec::with_capacity(capacity),
    };
    let cfg = SamplerConfig {
        freq_hz: freq,
        duration: Some(Duration::from_secs_f64(secs)),
        pacing,
        ..SamplerConfig::default()
    };
    let (_, sink) = run_sampler(source, &cfg, &Cancel::new().unwrap(), sink).unwrap();
    let reads = std::mem::take(&mut *reads.lock().unwrap());
    PacingRun {
        times: sink.times,
        reads,
        writer: sink.busy,
    }
}

/// A reading later than this after its deadline is a late tick (the p99 target).
const LATE_NS: u64 = 50_000;

/// Late ticks by cause: the previous reading still running at the deadline (the loop's own
/// work), the writer thread busy on the reading thread's CPU between the deadline and the
/// wake-up, or neither (the scheduler ran something else, or the hypervisor did not run the
/// vCPU).
#[derive(Default)]
struct LateCauses {
    own_work: usize,
    writer: usize,
    scheduler_or_hypervisor: usize,
}

fn late_causes(run: &PacingRun) -> LateCauses {
    let mut causes = LateCauses::default();
    for &(wake, deadline) in &run.times {
        if wake <= deadline + LATE_NS {
            continue;
        }
        let next_read = run.reads.partition_point(|r| r.0 < wake);
        let previous_read_end = next_read
            .checked_sub(1)
            .map(|i| run.reads[i].1)
            .unwrap_or(0);
        let cpu = run.reads.get(next_read).map(|r| r.2).unwrap_or(-1);
        let writer_in_the_way = run
            .writer
            .iter()
            .skip(run.writer.partition_point(|w| w.1 < deadline))
            .take_while(|w| w.0 < wake)
            .any(|w| w.2 == cpu);
        if previous_read_end >= deadline {
            causes.own_work += 1;
        } else if writer_in_the_way {
            causes.writer += 1;
        } else {
            causes.scheduler_or_hypervisor += 1;
        }
    }
    causes
}

/// The floor: a bare `timerfd` loop that only waits and timestamps, no read, no writer thread.
/// What the kernel and hypervisor charge for 1000 wake-ups a second, whatever the meter does.
/// Returns (wake-up time, deadline) per tick, the wall and the CPU seconds.
fn bare_timerfd_loop(freq: f64, secs: f64) -> (Vec<(u64, u64)>, f64, f64) {
    let period_ns = (1e9 / freq) as u64;
    let first = mono_ns() + 1_000_000_000;
    let ts = |ns: u64| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: plain syscalls on a descriptor we own and close.
    unsafe {
        let fd = libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC);
        assert!(fd >= 0);
        let spec = libc::itimerspec {
            it_interval: ts(period_ns),
            it_value: ts(first),
        };
        let r = libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut());
        assert_eq!(r, 0, "timerfd_settime: {}", std::io::Error::last_os_error());
        let n = (freq * secs) as usize;
        let mut times = Vec::with_capacity(n);
        let cpu0 = cpu_seconds();
        let t0 = std::time::Instant::now();
        let mut expirations = 0u64;
        let mut passed = 0u64;
        while times.len() < n {
            libc::read(fd, (&mut expirations as *mut u64).cast(), 8);
            passed += expirations;
            times.push((mono_ns(), first + (passed - 1) * period_ns));
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

fn interval_errors_us(times: &[(u64, u64)], period_ns: f64) -> Vec<f64> {
    times
        .windows(2)
        .map(|w| ((w[1].0 - w[0].0) as f64 - period_ns).abs() / 1000.0)
        .collect()
}

fn lateness_us(times: &[(u64, u64)]) -> Vec<f64> {
    times
        .iter()
        .map(|&(wake, deadline)| wake.saturating_sub(deadline) as f64 / 1000.0)
        .collect()
}

/// The loops of sections 1 and 2: the floor, or the sampler on a fixture with a pacing.
#[derive(Clone, Copy)]
enum Loop {
    Floor,
    Sampler(Mechanism, Pacing),
    /// The powercap fixture with the platform meters beside it: an ACPI power meter (hwmon)
    /// and a BMC that answers in 2 s, both polled on their own threads.
    WithPlatformMeters,
}

impl Loop {
    fn name(self) -> &'static str {
        match self {
            Loop::Floor => "bare timerfd loop (floor: no read, no writer)",
            Loop::Sampler(Mechanism::Msr, _) => "wattio, MSR fixture (4 counters)",
            Loop::Sampler(_, Pacing::Sleep) => "sleep (badsleep), powercap fixture",
            Loop::Sampler(..) => "wattio, powercap fixture (1 counter)",
            Loop::WithPlatformMeters => {
                "wattio, powercap fixture + ACPI power meter + BMC answering in 2 s (3 counters)"
            }
        }
    }

    fn pacing(self) -> Pacing {
        match self {
            Loop::Sampler(_, pacing) => pacing,
            _ => Pacing::Timerfd,
        }
    }

    fn source(self, fx: &std::path::Path) -> Box<dyn Source> {
        match self {
            Loop::WithPlatformMeters => {
                let (beside, passed_over) =
                    wattio_energy::open_beside(&SysRoot::new(fx), None).unwrap();
                assert_eq!(beside.len(), 2, "platform meters: {passed_over:?}");
                let parts = std::iter::once(powercap_source(fx)).chain(beside).collect();
                Box::new(wattio_energy::CombinedSource::of(parts).unwrap())
            }
            Loop::Sampler(Mechanism::Msr, _) => {
                Box::new(MsrSource::open(&SysRoot::new(fx)).unwrap())
            }
            _ => powercap_source(fx),
        }
    }
}

/// What one loop gave over every round of section 1.
#[derive(Default)]
struct PacingTotals {
    /// (reading time, deadline) per sample, one list per round.
    rounds: Vec<Vec<(u64, u64)>>,
    causes: LateCauses,
    steal_s: f64,
    switches: u64,
}

/// Section 1: the loops side by side at 1000 Hz, in interleaved rounds (every loop once, then
/// the next round) so a noisy minute on the host falls on all of them alike.
fn pacing_at_1000_hz(fx: &std::path::Path, secs: f64, rounds: usize, out: &std::path::Path) {
    let loops = [
        Loop::Floor,
        Loop::Sampler(Mechanism::Powercap, Pacing::Timerfd),
        Loop::WithPlatformMeters,
        Loop::Sampler(Mechanism::Msr, Pacing::Timerfd),
        Loop::Sampler(Mechanism::Powercap, Pacing::Sleep),
    ];
    let mut totals: Vec<PacingTotals> = loops.iter().map(|_| PacingTotals::default()).collect();
    let per_round = secs / rounds as f64;
    for _ in 0..rounds {
        for (l, total) in loops.iter().zip(&mut totals) {
            let steal0 = steal_seconds();
            let switches0 = involuntary_switches();
            let times = match *l {
                Loop::Floor => bare_timerfd_loop(1000.0, per_round).0,
                Loop::Sampler(..) | Loop::WithPlatformMeters => {
                    let run = run_probed(l.source(fx), per_round, l.pacing(), out);
                    let c = late_causes(&run);
                    total.causes.own_work += c.own_work;
                    total.causes.writer += c.writer;
                    total.causes.scheduler_or_hypervisor += c.scheduler_or_hypervisor;
                    run.times
                }
            };
            total.switches += involuntary_switches() - switches0;
            total.steal_s += steal_seconds() - steal0;
            total.rounds.push(times);
        }
    }
    println!("## Pacing at 1000 Hz, {secs} s per loop in {rounds} interleaved rounds (rows written to a file)\n");
    println!("Lateness: reading time minus its deadline on the timer's grid. Interval error: |time between consecutive readings − 1 ms|. Steal: the hypervisor's, both vCPUs, over the loop's rounds.\n");
    println!("| loop | samples/s | lateness p50 / p99 / max (µs) | interval error p50 / p99 (µs) | late ticks (> 50 µs) | of which: own work / writer on the CPU / scheduler or hypervisor | steal (s) | involuntary switches |");
    println!("|---|---|---|---|---|---|---|---|");
    let q = |v: &[f64], p| wattio_stats::quantile(v, p).unwrap_or(f64::NAN);
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    for (l, t) in loops.iter().zip(&totals) {
        let all: Vec<(u64, u64)> = t.rounds.iter().flatten().copied().collect();
        let late = lateness_us(&all);
        let errs: Vec<f64> = t
            .rounds
            .iter()
            .flat_map(|r| interval_errors_us(r, 1e6))
            .collect();
        let (gaps, span) =
            t.rounds
                .iter()
                .fold((0usize, 0u64), |(n, s), r| match (r.first(), r.last()) {
                    (Some(f), Some(l)) => (n + r.len() - 1, s + (l.0 - f.0)),
                    _ => (n, s),
                });
        let interval = format!("{:.1} / {:.1}", q(&errs, 0.5), q(&errs, 0.99));
        let (lateness, late_ticks) = match l {
            // A sleep loop has no grid: each wait starts when the last one ended, so its
            // lateness against the grid only grows.
            Loop::Sampler(_, Pacing::Sleep) => ("drifts".to_string(), "—".to_string()),
            _ => (
                format!(
                    "{:.1} / {:.1} / {:.0}",
                    q(&late, 0.5),
                    q(&late, 0.99),
                    max(&late)
                ),
                all.iter()
                    .filter(|&&(w, d)| w > d + LATE_NS)
                    .count()
                    .to_string(),
            ),
        };
        let causes = match l {
            Loop::Floor => "— (nothing else runs)".to_string(),
            Loop::Sampler(_, Pacing::Sleep) => "—".to_string(),
            _ => format!(
                "{} / {} / {}",
                t.causes.own_work, t.causes.writer, t.causes.scheduler_or_hypervisor
            ),
        };
        println!(
            "| {} | {:.1} | {lateness} | {interval} | {late_ticks} | {causes} | {:.2} | {} |",
            l.name(),
            gaps as f64 * 1e9 / span.max(1) as f64,
            t.steal_s,
            t.switches,
        );
    }
}

/// Section 2: the process's CPU at 1000 Hz, the floor and the sampler without probes, in
/// interleaved rounds; each round's difference to the floor is the meter's own cost.
fn cpu_beside_floor(fx: &std::path::Path, secs: f64, rounds: usize, out: &std::path::Path) {
    let loops = [
        Loop::Floor,
        Loop::Sampler(Mechanism::Powercap, Pacing::Timerfd),
        Loop::WithPlatformMeters,
        Loop::Sampler(Mechanism::Msr, Pacing::Timerfd),
    ];
    let mut shares: Vec<Vec<f64>> = loops.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (l, share) in loops.iter().zip(&mut shares) {
            let (wall, cpu) = match *l {
                Loop::Floor => {
                    let (_, wall, cpu) = bare_timerfd_loop(1000.0, secs);
                    (wall, cpu)
                }
                Loop::Sampler(..) | Loop::WithPlatformMeters => {
                    run(l.source(fx), 1000.0, secs, l.pacing(), out)
                }
            };
            share.push(100.0 * cpu / wall);
        }
    }
    println!("\n## CPU at 1000 Hz beside the floor: {secs} s per loop per round, {rounds} interleaved rounds\n");
    println!(
        "| loop | CPU per round (% of one core) | median | above the floor, per round (median) |"
    );
    println!("|---|---|---:|---|");
    let floor = shares[0].clone();
    for (l, share) in loops.iter().zip(&shares) {
        let list = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let above: Vec<f64> = share.iter().zip(&floor).map(|(s, f)| s - f).collect();
        println!(
            "| {} | {} | {:.3} | {} |",
            l.name(),
            list(share),
            wattio_stats::quantile(share, 0.5).unwrap_or(f64::NAN),
            match l {
                Loop::Floor => "—".to_string(),
                _ => format!(
                    "{} ({:.3})",
                    list(&above),
                    wattio_stats::quantile(&above, 0.5).unwrap_or(f64::NAN)
                ),
            }
        );
    }
}

/// Records each row's time and package joules (section 5).
struct RowTimes(Vec<(u64, f64)>);

impl SampleSink for RowTimes {
    fn consume(&mut self, s: &Sample) -> std::io::Result<()> {
        self.0.push((s.mono_ns, s.joules[0]));
        Ok(())
    }
}

/// Section 5: what reading faster than a counter updates costs. A fixture's package counter
/// is advanced at known watts every `period` (1 ms: RAPL; 50 ms: an NVML energy counter) by
/// the fixture ticker; the sampler reads it at 1 to 1000 Hz; each row's joules are compared
/// with the truth over the row's interval (watts × its length).
fn quantisation_error(dir: &std::path::Path, secs: f64) {
    const WATTS: f64 = 10.0;
    println!("\n## Rows faster than the counter: per-row error against the truth ({secs} s per rate, {WATTS} W)\n");
    println!("Error of a row: |row joules − {WATTS} W × row interval| / ({WATTS} W × row interval). Total: the whole run's joules against {WATTS} W × its length.\n");
    println!("| counter updates every | rate (Hz) | rows | rows repeating the previous value | per-row error p50 / p99 | total error |");
    println!("|---|---|---:|---:|---|---:|");
    for period_ms in [1u64, 50] {
        for freq in [1.0, 10.0, 100.0, 1000.0] {
            let fx = dir.join(format!("tick-{period_ms}-{freq}"));
            let tree = fixture::intel_laptop(&fx).unwrap();
            let cfg = fixture::TickConfig {
                watts: WATTS,
                interval: Duration::from_millis(period_ms),
                ..fixture::TickConfig::default()
            };
            let ticker = fixture::Ticker::prepare(&tree, &cfg).unwrap();
            let stop = Cancel::new().unwrap();
            let rows = std::thread::scope(|scope| {
                let ticking = scope.spawn(|| ticker.run(&stop, None));
                // Let the ticker write its first values before the sampler primes.
                std::thread::sleep(Duration::from_millis(2 * period_ms));
                let sampler = SamplerConfig {
                    freq_hz: freq,
                    duration: Some(Duration::from_secs_f64(secs)),
                    ..SamplerConfig::default()
                };
                let result = run_sampler(
                    powercap_source(&fx),
                    &sampler,
                    &Cancel::new().unwrap(),
                    RowTimes(Vec::new()),
                );
                stop.set();
                ticking.join().unwrap().unwrap();
                result.unwrap().1 .0
            });
            let mut errors = Vec::new();
            let mut repeats = 0;
            for w in rows.windows(2) {
                let truth = WATTS * (w[1].0 - w[0].0) as f64 * 1e-9;
                errors.push(100.0 * (w[1].1 - truth).abs() / truth);
                repeats += usize::from(w[1].1 == 0.0);
            }
            let (first, last) = (rows[0].0, rows[rows.len() - 1].0);
            let total_truth = WATTS * (last - first) as f64 * 1e-9;
            let total: f64 = rows[1..].iter().map(|r| r.1).sum();
            let q = |p| wattio_stats::quantile(&errors, p).unwrap_or(f64::NAN);
            println!(
                "| {period_ms} ms | {freq} | {} | {repeats} | {:.2} % / {:.1} % | {:.3} % |",
                errors.len(),
                q(0.5),
                q(0.99),
                100.0 * (total - total_truth).abs() / total_truth,
            );
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; filters are not supported by this harness.
    let secs = env_secs("WATTIO_BENCH_SECONDS", 60.0);
    let cpu_secs = env_secs("WATTIO_BENCH_CPU_SECONDS", 10.0);
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    let tree = fixture::intel_laptop(&fx).unwrap();
    // The platform meters of the WithPlatformMeters loop: an ACPI power meter in hwmon and a
    // BMC whose stand-in ipmitool answers in 2 s.
    tree.hwmon(
        0,
        "power_meter",
        &[
            ("power1_average", "150000000".into()),
            ("power1_average_interval", "1000".into()),
        ],
    )
    .unwrap();
    let ipmitool = tree.fake_bmc(fixture::BMC_W, fixture::BMC_DELAY_S).unwrap();
    std::env::set_var(wattio_energy::IPMITOOL_ENV, ipmitool);
    let out = dir.path().join("rows.csv");

    let rounds = env_secs("WATTIO_BENCH_ROUNDS", 6.0).max(1.0) as usize;
    // WATTIO_BENCH_PARTS: a comma-separated subset of pacing, rates, quantisation, standin.
    let parts = std::env::var("WATTIO_BENCH_PARTS").unwrap_or_default();
    let part = |name: &str| parts.is_empty() || parts.split(',').any(|p| p.trim() == name);
    if part("pacing") {
        pacing_at_1000_hz(&fx, secs, rounds, &out);
        cpu_beside_floor(&fx, cpu_secs, rounds.min(5), &out);
    }
    if part("rates") {
        cpu_per_rate(&fx, cpu_secs, &out);
    }
    if part("quantisation") {
        quantisation_error(
            dir.path(),
            env_secs("WATTIO_BENCH_QUANTISATION_SECONDS", 10.0),
        );
    }
    if part("standin") {
        standin_perf_and_ebpf(dir.path(), cpu_secs, &out);
    }
}

/// Section 2: the process's CPU per read path and rate.
fn cpu_per_rate(fx: &std::path::Path, cpu_secs: f64, out: &std::path::Path) {
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
    for (name, mechanism) in [
        ("powercap (fixture file)", Mechanism::Powercap),
        ("msr (sparse fixture file, 4 counters)", Mechanism::Msr),
        ("model (/proc/stat)", Mechanism::Model),
    ] {
        for freq in [1.0, 10.0, 100.0, 1000.0] {
            let src: Box<dyn Source> = match mechanism {
                Mechanism::Model => {
                    Box::new(ModelSource::open(&SysRoot::new("/"), ModelParams::default()).unwrap())
                }
                Mechanism::Msr => Box::new(MsrSource::open(&SysRoot::new(fx)).unwrap()),
                _ => powercap_source(fx),
            };
            let (wall, cpu) = run(src, freq, cpu_secs, Pacing::Timerfd, out);
            println!("| {name} | {freq} | {:.3} |", 100.0 * cpu / wall);
        }
    }
}

/// Section 4: perf and eBPF on the stand-in RAPL PMU.
fn standin_perf_and_ebpf(dir: &std::path::Path, cpu_secs: f64, out: &std::path::Path) {
    println!("\n## perf and eBPF on the stand-in RAPL PMU (cpu-clock counter; {cpu_secs} s per rate, timerfd, rows written to a file)\n");
    let standin = dir.join("standin");
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
            let (wall, cpu) = run(src, freq, cpu_secs, Pacing::Timerfd, out);
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
