//! End-to-end tests of `wattio report` and `wattio overhead` through the real binary
//! (the overhead test runs the real `wattio record` as its recorder).

mod common;

use common::{check_interrupted, csv_rows, terminate_when};
use std::path::Path;
use std::process::{Command, Output};

fn wattio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wattio"))
        .args(args)
        .output()
        .expect("run wattio")
}

/// The rows of a CSV file, each as column → cell.
fn read_csv(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut rd = csv::Reader::from_path(path).unwrap();
    let h = rd.headers().unwrap().clone();
    rd.records()
        .map(|r| {
            let r = r.unwrap();
            h.iter()
                .zip(r.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
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

/// A small overhead study: the model mechanism at 10 and 100 Hz, 2 reps, 0.3 s idle runs.
const SMALL_STUDY: &[&str] = &[
    "overhead",
    "--mechanisms",
    "model",
    "--freqs",
    "10,100",
    "--reps",
    "2",
    "--idle-s",
    "0.3",
    "--settle",
    "0.05",
];

#[test]
fn overhead_small_real_run() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ov");
    let o = wattio(
        &[
            SMALL_STUDY,
            &[
                "--rounds",
                "1",
                "-o",
                out.to_str().unwrap(),
                "--",
                "sleep",
                "0.2",
            ],
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs = read_csv(&out.join("runs.csv"));
    // 1 workload × (off + 2 frequencies) × 2 reps.
    assert_eq!(runs.len(), 6, "{runs:?}");
    let idle = read_csv(&out.join("idle.csv"));
    assert_eq!(idle.len(), 6, "{idle:?}");
    // The 100 Hz recorder really sampled: at least 30 % of the rate (lenient: CI is loaded).
    let num =
        |r: &std::collections::HashMap<String, String>, c: &str| -> f64 { r[c].parse().unwrap() };
    let rates: Vec<f64> = runs
        .iter()
        .filter(|r| r["mechanism"] == "model" && num(r, "freq_hz") == 100.0)
        .map(|r| num(r, "samples") / num(r, "recorder_s"))
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

/// A study killed part-way keeps every finished run, ends its processes, and `--resume`
/// runs exactly the rest.
#[test]
fn overhead_killed_part_way_keeps_its_runs_and_resumes() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("ov");
    let out_s = out.to_str().unwrap().to_string();
    // The workload names the directory, so a process it leaves behind can be found.
    let workload = ["--", "sh", "-c", "sleep 0.2", &out_s];
    let study_of = |rounds: &str, extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_wattio"));
        c.args(SMALL_STUDY)
            .args(["--rounds", rounds])
            .args(extra)
            .args(workload);
        c
    };
    let study = |extra: &[&str]| study_of("2", extra);
    // (1 workload + idle) × (off + 2 frequencies) × 2 reps × 2 rounds.
    let total = 24;
    let files = || csv_rows(&out.join("runs.csv")) + csv_rows(&out.join("idle.csv"));
    let o = terminate_when(study(&["-o", &out_s]), 120, "5 runs on disk", || {
        files() >= 5
    });
    let kept = files();
    assert!(kept >= 5 && kept < total, "{kept}");
    check_interrupted(&o, kept, total, &out_s);
    assert!(!out.join(".scratch").exists());
    let before_load = std::fs::read_to_string(out.join("runs.csv")).unwrap();

    // A fresh study there would overwrite the runs: refused. So is another plan.
    let e = stderr_one_line(&study(&["-o", &out_s]).output().unwrap());
    assert!(e.contains("unfinished wattio overhead study"), "{e}");
    let e = stderr_one_line(&study_of("3", &["--resume", &out_s]).output().unwrap());
    assert!(e.contains("rounds: 2 there, 3 now"), "{e}");

    let o = study(&["--resume", &out_s]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let load = read_csv(&out.join("runs.csv"));
    let idle = read_csv(&out.join("idle.csv"));
    assert_eq!((load.len(), idle.len()), (12, 12));
    let mut seqs: Vec<usize> = load
        .iter()
        .chain(&idle)
        .map(|r| r["seq"].parse().unwrap())
        .collect();
    seqs.sort();
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>(), "every run once");
    let after_load = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert!(after_load.starts_with(&before_load), "kept rows unchanged");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("interrupted, then resumed by"),
        "{summary}"
    );
    let tests = read_csv(&out.join("tests.csv"));
    assert_eq!(tests.len(), 2);
}
