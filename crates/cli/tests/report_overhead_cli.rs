//! End-to-end tests of `wattio report` and `wattio overhead` through the real binary
//! (the overhead test runs the real `wattio record` as its recorder).

use std::path::Path;
use std::process::{Command, Output};

fn wattio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wattio"))
        .args(args)
        .output()
        .expect("run wattio")
}

fn stderr_one_line(o: &Output) -> String {
    let e = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "stderr: {e}");
    assert_eq!(e.trim_end().lines().count(), 1, "want one line, got: {e}");
    e
}

#[test]
fn report_from_fixture_results() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures/results");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r.html");
    let o = wattio(&[
        "report",
        fixtures.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout)
        .contains("9 result file(s), 0 skipped, 0 other file(s) not read"));
    assert!(std::fs::read_to_string(out).unwrap().contains("<svg"));
}

#[test]
fn report_errors_are_one_line() {
    let d = tempfile::tempdir().unwrap();
    let e = stderr_one_line(&wattio(&["report", d.path().to_str().unwrap()]));
    assert!(
        e.starts_with("wattio: error: no wattio result files in"),
        "{e}"
    );
    let e = stderr_one_line(&wattio(&["report", "/nonexistent/results"]));
    assert!(e.contains("does not exist"), "{e}");
    assert!(!d.path().join("report.html").exists());
}

#[test]
fn overhead_bad_flags_are_one_line_errors() {
    let e = stderr_one_line(&wattio(&["overhead", "--freqs", "5000", "--", "true"]));
    assert!(e.contains("--freqs"), "{e}");
    let e = stderr_one_line(&wattio(&[
        "overhead",
        "--mechanisms",
        "bogus",
        "--",
        "true",
    ]));
    assert!(e.contains("--mechanisms"), "{e}");
    let d = tempfile::tempdir().unwrap();
    let e = stderr_one_line(&wattio(&[
        "overhead",
        "--mechanisms",
        "model",
        "-o",
        d.path().to_str().unwrap(),
        "--",
        "false",
    ]));
    assert!(e.contains("workload") && e.contains("failed"), "{e}");
}

#[test]
fn overhead_small_real_run() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ov");
    let o = wattio(&[
        "overhead",
        "--mechanisms",
        "model",
        "--freqs",
        "10,100",
        "--reps",
        "2",
        "--rounds",
        "1",
        "--idle-s",
        "0.3",
        "--settle",
        "0.05",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sleep",
        "0.2",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    // 1 workload × (off + 2 frequencies) × 2 reps.
    assert_eq!(runs.lines().count(), 1 + 6, "{runs}");
    let idle = std::fs::read_to_string(out.join("idle.csv")).unwrap();
    assert_eq!(idle.lines().count(), 1 + 6, "{idle}");
    // The 100 Hz recorder really sampled: at least 30 % of the rate (lenient: CI is loaded).
    let rates: Vec<f64> = runs
        .lines()
        .skip(1)
        .filter(|l| l.contains(",model,100,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            f[7].parse::<f64>().unwrap() / f[8].parse::<f64>().unwrap()
        })
        .collect();
    assert_eq!(rates.len(), 2);
    assert!(rates.iter().all(|r| (30.0..200.0).contains(r)), "{rates:?}");
    let tests = std::fs::read_to_string(out.join("tests.csv")).unwrap();
    assert_eq!(tests.lines().count(), 1 + 2, "{tests}");
    assert!(out.join("report.html").exists() && out.join("summary.md").exists());
    assert!(!out.join(".scratch").exists(), "scratch dir left behind");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("ESTIMATED by ccf-linear"), "{summary}");
}
