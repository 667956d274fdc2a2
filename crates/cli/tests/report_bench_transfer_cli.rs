//! `wattio report bench-transfer` through the real binary, on runs of a real `make
//! bench-transfer` (the report crate's fixture).

use std::path::PathBuf;
use std::process::{Command, Output};

fn wattio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wattio"))
        .args(args)
        .output()
        .expect("run wattio")
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures/bench-transfer")
}

#[test]
fn writes_tables_and_charts_and_charts_only_on_request() {
    let out = tempfile::tempdir().unwrap();
    let o = wattio(&[
        "report",
        "bench-transfer",
        fixture().to_str().unwrap(),
        "-o",
        out.path().to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The tables go to standard output as well as report.md.
    assert!(
        stdout.contains("### small (1000 files, 106 MB)"),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(stdout.starts_with(&md));
    for f in ["throughput", "energy", "cpu", "eett"] {
        assert!(
            out.path().join(format!("transfer-{f}.svg")).is_file(),
            "{f}"
        );
    }
    assert!(out.path().join("results.csv").is_file());

    let charts = tempfile::tempdir().unwrap();
    let o = wattio(&[
        "report",
        "bench-transfer",
        fixture().to_str().unwrap(),
        "-o",
        charts.path().to_str().unwrap(),
        "--charts-only",
        "--prefix",
        "https",
    ]);
    assert!(o.status.success());
    let mut names: Vec<String> = std::fs::read_dir(charts.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "https-cpu.svg",
            "https-eett.svg",
            "https-energy.svg",
            "https-throughput.svg"
        ]
    );
}

#[test]
fn a_directory_that_is_no_bench_run_is_one_line_and_status_2() {
    let empty = tempfile::tempdir().unwrap();
    let o = wattio(&["report", "bench-transfer", empty.path().to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("make bench-transfer"), "{e}");
}
