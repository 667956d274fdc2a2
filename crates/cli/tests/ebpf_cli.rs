//! `--source ebpf` end to end: `wattio probe`, `record` and `measure` on the stand-in RAPL PMU
//! (a fixture `power` PMU whose event is the kernel's `cpu-clock` counter, 10^9 counts a second,
//! so `energy-pkg` at scale 1e-9 is a constant 1 W), through the BPF program loaded into this
//! kernel. Needs a build with the `ebpf` feature and root (or CAP_BPF + CAP_PERFMON); without
//! them the tests check the refusal says why, and `WATTIO_REQUIRE_EBPF=1` (as `make test` sets)
//! makes a missing BPF path fail instead.

mod common;

use common::wattio;
use std::path::Path;

/// The AMD EPYC fixture (CPUs, `/proc/stat`) with its `power` PMU replaced by the stand-in.
fn standin() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    wattio_fixture::amd_epyc(dir.path())
        .unwrap()
        .standin_power_pmu("0", &[("energy-pkg", 1e-9)])
        .unwrap();
    dir
}

fn required() -> bool {
    std::env::var_os("WATTIO_REQUIRE_EBPF").is_some_and(|v| v == "1")
}

/// Runs `args` under `root`; `None` (with a note) where this build or process cannot use eBPF
/// and the run does not require it, after checking the refusal is the one-line reason and fix.
fn run_ebpf(root: &Path, args: &[&str]) -> Option<String> {
    let out = wattio(Some(root), args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        return Some(String::from_utf8(out.stdout).unwrap());
    }
    if !wattio_energy::EBPF_BUILT_IN {
        assert!(
            stderr.contains("built without the eBPF mechanism")
                && stderr.contains("--features ebpf"),
            "{stderr}"
        );
        assert!(
            !required(),
            "WATTIO_REQUIRE_EBPF=1 but this build lacks the ebpf feature"
        );
        return None;
    }
    assert!(!required(), "{args:?} failed: {stderr}");
    assert!(stderr.contains("CAP_BPF"), "{stderr}");
    eprintln!("skipped: {stderr}");
    None
}

#[test]
fn record_source_ebpf_writes_rows_of_the_standin_power() {
    let dir = standin();
    // The stand-in's timer is on CPU 0; an idle vCPU gets its timer interrupts late.
    let _awake = wattio_fixture::BusyCpus::new(&[0]);
    let Some(csv) = run_ebpf(
        dir.path(),
        &[
            "record",
            "--source",
            "ebpf",
            "--freq",
            "50",
            "--duration",
            "1",
        ],
    ) else {
        return;
    };
    let mut rows = csv::Reader::from_reader(csv.as_bytes());
    let headers = rows.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (mech, est, energy) = (col("mechanism"), col("estimated"), col("energy_j"));
    let mut n = 0;
    let mut total = 0.0;
    for r in rows.records() {
        let r = r.unwrap();
        assert_eq!(&r[mech], "ebpf");
        assert_eq!(&r[est], "false");
        total += r[energy].parse::<f64>().unwrap();
        n += 1;
    }
    assert!((40..=55).contains(&n), "{n} rows at 50 Hz for 1 s");
    // 1 W for 1 s; each end may be one 20 ms tick off.
    assert!((total - 1.0).abs() < 0.05, "{total} J");
}

#[test]
fn measure_source_ebpf_reports_the_standin_power_over_the_command() {
    let dir = standin();
    let _awake = wattio_fixture::BusyCpus::new(&[0]);
    let Some(json) = run_ebpf(
        dir.path(),
        &[
            "measure", "--source", "ebpf", "--json", "--", "sleep", "0.5",
        ],
    ) else {
        return;
    };
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["mechanism"], "ebpf");
    assert_eq!(v["estimated"], false);
    let (total, secs) = (
        v["total_j"].as_f64().unwrap(),
        v["duration_s"].as_f64().unwrap(),
    );
    // 1 W; the window's two ends are each up to two 10 ms ticks from the kernel's readings.
    assert!((total - secs).abs() < 0.05, "{total} J over {secs} s");
}

#[test]
fn probe_lists_ebpf_beside_perf_and_auto_keeps_perf() {
    let dir = standin();
    let out = wattio(Some(dir.path()), &["probe"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("ebpf"))
        .unwrap_or_else(|| panic!("no ebpf line in:\n{text}"));
    if line.contains("not usable") {
        assert!(!required(), "{text}");
        let fix = text
            .lines()
            .skip_while(|l| !l.starts_with("ebpf"))
            .nth(1)
            .unwrap_or_default();
        assert!(fix.contains("fix:"), "{text}");
    } else {
        assert!(line.contains("usable"), "{text}");
    }
    assert!(
        text.contains("verdict: `--source auto` uses perf"),
        "{text}"
    );
}
