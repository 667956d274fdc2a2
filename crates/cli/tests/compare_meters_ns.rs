//! The method of `make compare-meters`, checked on wattio itself: a fixture made live by
//! `wattio fixture tick` (counters at known watts, wrapping many times) is bind-mounted over the
//! real powercap and MSR paths in a private mount namespace (`scripts/fake-rapl-ns.sh`), and
//! `wattio record` reads it there with no `WATTIO_ROOT`, as any other tool would. Needs root and
//! `unshare` (CI runs as root); the namespace dies with the command, and the test checks that
//! nothing stays mounted.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{Reaper, BIN};

const WATTS: f64 = 20.0;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/fake-rapl-ns.sh")
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A fixture ticking at [`WATTS`]: powercap wraps every 1 J (50 ms), the package MSR every 8 J.
fn ticking_fixture(dir: &Path) -> (PathBuf, PathBuf, Reaper) {
    let fx = dir.join("fixture");
    let o = Command::new(BIN)
        .args(["fixture", "amd-epyc"])
        .arg(&fx)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = dir.join("tick.csv");
    let ticker = Command::new(BIN)
        .args(["fixture", "tick"])
        .arg(&fx)
        .args([
            "--watts",
            &WATTS.to_string(),
            "--max-energy-range-uj",
            "999999",
        ])
        .args(["--msr-esu", "29", "--log"])
        .arg(&log)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reaper = Reaper(vec![ticker]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&log).map_or(0, |s| s.lines().count()) < 3 {
        assert!(Instant::now() < deadline, "the ticker did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (fx, log, reaper)
}

/// Runs `wattio record --source SOURCE` inside the namespace; (joules after the first row, first
/// and last row times, wraps wattio says it corrected).
fn record_in_namespace(fx: &Path, dir: &Path, source: &str) -> (f64, f64, f64, u64) {
    let out = dir.join(format!("{source}.csv"));
    // The fixture is an AMD machine: its /proc/cpuinfo goes over the host's too, or an MSR
    // reader on an Intel host would look for Intel's registers in it.
    let o = Command::new(script())
        .arg("--cpuinfo")
        .arg(fx)
        .args([
            "--",
            BIN,
            "record",
            "--source",
            source,
            "--domains",
            "package",
        ])
        .args(["--freq", "200", "--duration", "1.5", "-o"])
        .arg(&out)
        .env_remove("WATTIO_ROOT")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{source}: {err}");
    let wraps: u64 = err
        .split(" wraps corrected")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no wrap count in: {err}"));
    let mut rows = csv::Reader::from_path(&out).unwrap();
    let rows: Vec<(f64, f64)> = rows
        .records()
        .map(|r| r.unwrap())
        .inspect(|r| assert_eq!(&r[1], source, "{r:?}"))
        .filter(|r| &r[3] == "package")
        .map(|r| (r[0].parse().unwrap(), r[4].parse().unwrap()))
        .collect();
    assert!(rows.len() > 200, "{} rows", rows.len());
    let joules = rows[1..].iter().map(|r| r.1).sum();
    (joules, rows[0].0, rows[rows.len() - 1].0, wraps)
}

/// Wraps of the counter named `prefix…` in the ticker's log between unix times `t0` and `t1`.
fn logged_wraps(log: &Path, prefix: &str, t0: f64, t1: f64) -> u64 {
    let text = std::fs::read_to_string(log).unwrap();
    let at = |t: f64| {
        text.lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|r| r[2].starts_with(prefix) && r[0].parse::<f64>().unwrap() * 1e-9 <= t)
            .map(|r| r[5].parse::<u64>().unwrap())
            .last()
            .unwrap_or(0)
    };
    at(t1) - at(t0)
}

#[test]
fn wattio_reads_a_ticking_fixture_mounted_over_the_real_paths_across_wraps() {
    if !is_root() {
        eprintln!("skipped: mounting in a namespace needs root (CI runs this as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (fx, log, _ticker) = ticking_fixture(dir.path());
    let host_had_powercap = Path::new("/sys/class/powercap").exists();
    for (source, counter, min_wraps) in [("powercap", "powercap", 20), ("msr", "msr", 2)] {
        let (joules, t0, t1, corrected) = record_in_namespace(&fx, dir.path(), source);
        let known = WATTS * (t1 - t0);
        // The fixture is rewritten every millisecond: each end of the window may trail the clock
        // by about that much (0.02 J at 20 W) plus the ticker's lateness. A missed or doubled
        // wrap would cost 1 J (powercap) or 8 J (MSR): half a powercap wrap, 0.5 J, still
        // catches one while allowing the ticker 25 ms of lateness at the ends (0.2 J, 10 ms,
        // is within reach of a loaded 2-vCPU host).
        assert!(
            (joules - known).abs() < 0.5,
            "{source}: read {joules} J, known {known} J"
        );
        let wraps = logged_wraps(&log, counter, t0, t1);
        assert!(
            wraps >= min_wraps,
            "{source}: only {wraps} wraps in the window"
        );
        // wattio corrected each wrap of its window (±1 at the window's edges).
        assert!(corrected + 1 >= wraps, "{source}: {corrected} of {wraps}");
    }
    // Nothing of the namespace outlives it.
    assert_eq!(Path::new("/sys/class/powercap").exists(), host_had_powercap);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let path = dir.path().to_string_lossy().into_owned();
    assert!(!mounts.contains(&path), "still mounted: {mounts}");
    let scratch = fx.join(".fake-rapl-ns");
    assert_eq!(std::fs::read_dir(scratch).unwrap().count(), 0);
}

#[test]
fn the_namespace_script_refuses_a_directory_without_a_fixture_in_one_line() {
    if !is_root() {
        eprintln!("skipped: the script checks for root first");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(script())
        .arg(dir.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("holds no fixture tree"), "{err}");
    assert!(err.contains("wattio fixture amd-epyc"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn fixture_tick_refuses_bad_input_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    let run = |args: &[&str]| {
        let o = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        assert_eq!(err.lines().count(), 1, "{err}");
        err
    };
    let fxs = fx.to_str().unwrap();
    let err = run(&["fixture", "tick", fxs, "--watts", "5"]);
    assert!(err.contains("holds no fixture tree"), "{err}");
    assert!(Command::new(BIN)
        .args(["fixture", "amd-epyc", fxs])
        .output()
        .unwrap()
        .status
        .success());
    let err = run(&[
        "fixture",
        "tick",
        fxs,
        "--watts",
        "5",
        "--max-energy-range-uj",
        "262143328850",
    ]);
    assert!(err.contains("8-byte write"), "{err}");
    let err = run(&["fixture", "tick", fxs, "--watts", "5", "--duration", "0"]);
    assert!(err.contains("--duration must be more than 0"), "{err}");
    let err = run(&["fixture", "tick", fxs, "--watts", "5", "--domains", "dram"]);
    assert!(err.contains("no powercap zone or package MSR"), "{err}");
}
