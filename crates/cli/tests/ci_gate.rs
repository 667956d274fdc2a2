//! `wattio measure --max-increase`: the energy gate for CI, against a baseline file or a
//! baseline command run interleaved.

mod common;

use common::BIN;
use std::process::{Command, Output};

fn measure(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(["measure", "--source", "model", "--no-sync"])
        .args(args)
        .output()
        .unwrap()
}

fn spin(seconds: &str) -> String {
    format!("{BIN} workload spin --duration {seconds}")
}

#[test]
fn the_gate_passes_the_same_work_and_fails_four_times_the_work() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().join("base.json");
    let o = measure(&[
        "--runs",
        "6",
        "--export-json",
        base.to_str().unwrap(),
        &spin("0.05s"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The same work against the file: passes, exit 0, and says what it compared.
    let summary = d.path().join("gate.md");
    let o = measure(&[
        "--runs",
        "6",
        "--baseline",
        base.to_str().unwrap(),
        "--max-increase",
        "25%",
        "--gate-summary",
        summary.to_str().unwrap(),
        &spin("0.05s"),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("gate         pass"), "{out}");
    assert!(out.contains("a CPU-time gate"), "{out}");
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.starts_with("### wattio energy gate: ✅ passes"), "{md}");

    // Four times the work, interleaved with the baseline command: exit 1, in JSON too.
    let o = measure(&[
        "--runs",
        "6",
        "--max-increase",
        "25%",
        "--json",
        &spin("0.05s"),
        &spin("0.2s"),
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["gate"]["failed"], true, "{v}");
    let increase = v["gate"]["increase"].as_f64().unwrap();
    assert!((1.5..5.0).contains(&increase), "{increase}: {v}");
    assert_eq!(v["gate"]["estimated"], true, "{v}");
}

#[test]
fn the_gate_refuses_what_it_cannot_judge_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.json");
    std::fs::write(&bad, "{\"not\": \"a report\"}").unwrap();
    for (args, expected) in [
        (vec!["--max-increase", "5%", "true"], "got 1 command(s)"),
        (
            vec!["--max-increase", "5%", "true", "true", "true"],
            "got 3 command(s)",
        ),
        (
            vec!["--max-increase", "five", "true", "true"],
            "not a percentage",
        ),
        (
            vec!["--max-increase", "5%", "--alpha", "0.9", "true", "true"],
            "--alpha must be",
        ),
        (
            vec![
                "--max-increase",
                "5%",
                "--baseline",
                bad.to_str().unwrap(),
                "true",
            ],
            "not a `wattio measure --export-json` document",
        ),
        (
            vec!["--max-increase", "5%", "--runs", "3", "true", "true"],
            "at least 5 kept runs",
        ),
    ] {
        let o = measure(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}
