//! `wattio iobench` end to end: a tiny study (two methods, tiny file, three runs) through the
//! real binary, Maven-built JMH jar, forked JVMs and the energy socket. Needs mvn and a JDK 17
//! (`make deps` installs them).

mod common;

use common::{check_interrupted, csv_rows, terminate_when};
use std::process::Command;
use std::sync::Mutex;

/// JMH holds a machine-wide lock (/tmp/jmh.lock): one study at a time.
static JMH: Mutex<()> = Mutex::new(());

fn wattio() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wattio"))
}

/// `wattio iobench` on the tiny file, two read methods, `runs` runs each, the model meter.
fn tiny_study(runs: &str, data: &std::path::Path) -> Command {
    let mut c = wattio();
    c.args([
        "iobench",
        "--sizes",
        "tiny",
        "--ops",
        "read",
        "--methods",
        "channel,scanner",
        "--runs",
        runs,
        "--heap",
        "256m",
        "--source",
        "model",
    ])
    .arg("--data-dir")
    .arg(data)
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

#[test]
fn tiny_study_end_to_end() {
    let _jmh = JMH.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let data = dir.path().join("data");
    let o = tiny_study("3", &data).arg("-o").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stdout.contains("read by chunks/lines — tiny file, 3 runs"),
        "{stdout}"
    );
    assert!(
        stdout.contains("recommendations:") && stdout.contains("read: use "),
        "{stdout}"
    );
    assert!(stdout.contains("estimated (model: ccf-linear"), "{stdout}");

    let mut rd = csv::Reader::from_path(out.join("results.csv")).unwrap();
    let h = rd.headers().unwrap().clone();
    let col = |name: &str| {
        h.iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    // Every column the report recognises results.csv by.
    for c in wattio_iobench::RESULTS_CSV_COLUMNS {
        col(c);
    }
    let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 6, "2 methods × 3 runs");
    for m in ["channel", "scanner"] {
        let mut runs: Vec<&str> = rows
            .iter()
            .filter(|r| &r[col("method")] == m)
            .map(|r| &r[col("run")])
            .collect();
        runs.sort();
        assert_eq!(runs, ["1", "2", "3"], "{m}");
    }
    for r in &rows {
        assert_eq!(
            &r[col("bytes")],
            "100000",
            "the tiny file is 100,000 bytes (Table I)"
        );
        assert_eq!(&r[col("mechanism")], "model");
        assert_eq!(&r[col("estimated")], "true");
        assert_eq!(&r[col("checked")], "true");
        assert_eq!(&r[col("cache")], "warm");
        let e: f64 = r[col("energy_j")].parse().unwrap();
        let t: f64 = r[col("time_s")].parse().unwrap();
        assert!(e > 0.0 && t > 0.0 && t < 30.0, "{r:?}");
    }
    // Interleaved: the methods alternate over time instead of all runs of one in a row.
    let order: Vec<&str> = rows.iter().map(|r| &r[col("method")]).collect();
    assert_ne!(
        order,
        ["channel", "channel", "channel", "scanner", "scanner", "scanner"]
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("estimated") && summary.contains("| channel |"),
        "{summary}"
    );
    let svg = std::fs::read_to_string(out.join("ranking-read.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("estimated"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 6);
    assert!(out.join("box-read.svg").exists());

    // Re-analysis of the CSV gives the same per-cell medians without running anything.
    let again = dir.path().join("again");
    let o = wattio()
        .args(["iobench", "--from"])
        .arg(out.join("results.csv"))
        .arg("-o")
        .arg(&again)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j2: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(again.join("results.json")).unwrap())
            .unwrap();
    assert_eq!(json["cells"], j2["cells"]);
}

#[test]
fn bad_flags_give_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["--methods", "fsync"], "unknown method 'fsync'"),
        (vec!["--runs", "0"], "--runs must be at least 1"),
        (
            vec!["--from", "/nonexistent/results.csv"],
            "/nonexistent/results.csv",
        ),
    ] {
        let o = wattio()
            .arg("iobench")
            .args(&args)
            .arg("-o")
            .arg(dir.path())
            .args(["--source", "model"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        let last = err.lines().last().unwrap_or("");
        assert!(
            last.starts_with("wattio: error:") && last.contains(want),
            "{err}"
        );
    }
    let o = wattio()
        .args(["iobench", "--sizes", "huge"])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tiny, small, medium"));
}

/// Interrupted by SIGTERM after a few runs, a study keeps each finished run in results.csv,
/// leaves no JVM behind, and `--resume` runs exactly the rest: the full set, no duplicates.
#[test]
fn killed_study_keeps_its_runs_and_resumes() {
    let _jmh = JMH.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let data = dir.path().join("data");
    let out_s = out.to_str().unwrap().to_string();
    let study = |extra: &[&str]| {
        let mut c = tiny_study("4", &data);
        c.args(extra);
        c
    };
    let csv = out.join("results.csv");
    let o = terminate_when(study(&["-o", &out_s]), 300, "3 runs in results.csv", || {
        csv_rows(&csv) >= 3
    });
    let kept = csv_rows(&csv);
    assert!((3..8).contains(&kept), "{kept}");
    // The study's JVMs (their jar is in the output directory) are gone.
    check_interrupted(&o, kept, 8, &out_s);
    let before = std::fs::read_to_string(&csv).unwrap();
    // Every kept row is whole.
    let mut rd = csv::Reader::from_reader(before.as_bytes());
    let width = rd.headers().unwrap().len();
    assert!(rd.records().all(|r| r.unwrap().len() == width));

    let o = study(&["--resume", &out_s]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = std::fs::read_to_string(&csv).unwrap();
    assert!(after.starts_with(&before), "kept rows unchanged");
    let mut rd = csv::Reader::from_reader(after.as_bytes());
    let h = rd.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let mut runs: Vec<(String, String)> = rd
        .records()
        .map(|r| {
            let r = r.unwrap();
            (r[col("method")].to_string(), r[col("run")].to_string())
        })
        .collect();
    runs.sort();
    let want: Vec<(String, String)> = ["channel", "scanner"]
        .iter()
        .flat_map(|m| (1..=4).map(move |n| (m.to_string(), n.to_string())))
        .collect();
    assert_eq!(runs, want, "every run once");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 8);
}
