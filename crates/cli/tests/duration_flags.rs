//! Every flag that once took a plain number of seconds reads the one duration grammar
//! (`500ms`, `2s`, `1m30s`) and still reads a plain number as seconds; a bad value is one
//! `error:` line that names the grammar. Where a run is cheap the test times it, so that a
//! duration read in the wrong unit (milliseconds, minutes) shows; elsewhere the command must get
//! past argument parsing to its own first check.

use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::wattio;

/// What a bad value of a seconds flag must say (wattio-units' grammar, with the bare reading).
const SECONDS_GRAMMAR: &str = "write e.g. 2 (seconds), 500ms, 2s or 1m30s";

/// Runs wattio and returns how long it took, its status and its standard error.
fn timed(root: Option<&Path>, args: &[&str]) -> (Duration, bool, String) {
    let t0 = Instant::now();
    let o = wattio(root, args);
    let took = t0.elapsed();
    (
        took,
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `args` with `value` after the last one (the flag).
fn with(args: &[&str], value: &'static str) -> Vec<String> {
    args.iter()
        .map(|s| s.to_string())
        .chain([value.to_string()])
        .collect()
}

/// Asserts that `args` + a bad value is refused before anything runs, with one error line that
/// names the value and the grammar `grammar`.
fn refused(root: Option<&Path>, args: &[&str], grammar: &str) {
    let args = with(args, "soon");
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = wattio(root, &argv);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{argv:?}: {err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{argv:?}: {err}");
    assert!(
        errors[0].starts_with("error: invalid value 'soon' for '--")
            && errors[0].ends_with(&format!(
                "duration 'soon': does not start with a number; {grammar}"
            )),
        "{argv:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// Asserts that each of `500ms`, `2s` and a plain `2` gets past argument parsing to the
/// command's own first check, whose message contains `reached`.
fn accepted(root: Option<&Path>, args: &[&str], reached: &str) {
    for value in ["500ms", "2s", "2"] {
        let args = with(args, value);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let (_, _, err) = timed(root, &argv);
        assert!(
            err.contains(reached) && !err.contains("invalid value"),
            "{argv:?}: {err}"
        );
    }
}

/// Asserts that `args` + each value runs successfully and takes at least `at_least` (and not
/// minutes: a value read in the wrong unit shows either way).
fn runs_for(root: Option<&Path>, args: &[&str], cases: &[(&'static str, Duration)]) {
    for &(value, at_least) in cases {
        let args = with(args, value);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let (took, ok, err) = timed(root, &argv);
        assert!(ok, "{argv:?}: {err}");
        assert!(
            took >= at_least && took < at_least + Duration::from_secs(20),
            "{argv:?} took {took:?}, expected at least {at_least:?}"
        );
    }
}

const MS_500: Duration = Duration::from_millis(500);
const S_1: Duration = Duration::from_secs(1);
const S_2: Duration = Duration::from_secs(2);

#[test]
fn record_duration_and_by_interval() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("e.csv");
    let out = out.to_str().unwrap();
    let record = ["record", "--source", "model", "-o", out, "--duration"];
    runs_for(None, &record, &[("500ms", MS_500), ("2s", S_2), ("1", S_1)]);
    refused(None, &record, SECONDS_GRAMMAR);
    let by = [
        "record",
        "--source",
        "model",
        "-o",
        out,
        "--duration",
        "1s",
        "--by",
        "process",
        "--by-interval",
    ];
    runs_for(None, &by, &[("500ms", S_1), ("2s", S_1), ("0.5", S_1)]);
    refused(None, &by, SECONDS_GRAMMAR);
}

#[test]
fn top_interval() {
    for (value, want_s) in [("500ms", 0.5), ("2s", 2.0), ("1", 1.0)] {
        let o = wattio(
            None,
            &[
                "top",
                "--source",
                "model",
                "--once",
                "--json",
                "--interval",
                value,
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let snap: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let interval = snap["interval_s"].as_f64().unwrap();
        // The measured interval: the requested one plus scheduling delay.
        assert!(
            interval >= want_s * 0.95 && interval < want_s + 1.0,
            "--interval {value}: interval_s {interval}"
        );
    }
    refused(None, &["top", "--interval"], SECONDS_GRAMMAR);
    let (_, ok, err) = timed(None, &["top", "--interval", "10ms"]);
    assert!(
        !ok && err.contains("--interval must be between 50ms and 1h (got 10ms)"),
        "{err}"
    );
}

#[test]
fn workload_spin_duration_and_its_old_name() {
    let spin = ["workload", "spin", "--load", "0.1", "--duration"];
    runs_for(None, &spin, &[("500ms", MS_500), ("2s", S_2), ("1", S_1)]);
    runs_for(
        None,
        &["workload", "spin", "--load", "0.1", "--seconds"],
        &[("0.5", MS_500)],
    );
    refused(None, &spin, SECONDS_GRAMMAR);
}

#[test]
fn fixture_tick_interval_and_duration() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    let fx = fx.to_str().unwrap();
    let o = wattio(None, &["fixture", "amd-epyc", fx]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tick = ["fixture", "tick", fx, "--watts", "1", "--duration"];
    runs_for(None, &tick, &[("500ms", MS_500), ("2s", S_2), ("1", S_1)]);
    refused(None, &tick, SECONDS_GRAMMAR);
    // At 1 W a 2 s tick is 2 J, within the default wrap limit of 9.999999 J.
    let every = |flag| [&tick[..], &["500ms", flag]].concat();
    let interval = every("--interval");
    runs_for(
        None,
        &interval,
        &[("500ms", MS_500), ("2s", MS_500), ("0.001", MS_500)],
    );
    refused(None, &interval, SECONDS_GRAMMAR);
    // The old --interval-ms keeps reading a plain number as milliseconds: 50 is a valid tick
    // as 50 ms, and would be refused as 50 s (past the 10 s limit).
    let old = every("--interval-ms");
    runs_for(None, &old, &[("50", MS_500), ("1", MS_500)]);
    refused(
        None,
        &old,
        "write e.g. 500 (milliseconds), 500ms, 2s or 1m30s",
    );
}

#[test]
fn calibrate_duration_and_settle() {
    // A directory as -o is the first thing calibrate refuses, after its arguments parsed.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let reached = "is a directory: give -o a file name";
    for flag in ["--duration", "--seconds", "--settle"] {
        accepted(
            None,
            &["calibrate", "--driver", "spin", "-o", d, flag],
            reached,
        );
        refused(None, &["calibrate", "-o", d, flag], SECONDS_GRAMMAR);
    }
}

#[test]
fn overhead_idle_and_settle() {
    // --scale 0 is refused right after the durations are read, before anything runs.
    let reached = "--scale must be more than 0";
    for flag in ["--idle", "--idle-s", "--settle"] {
        accepted(None, &["overhead", "--scale", "0", flag], reached);
        refused(None, &["overhead", flag], SECONDS_GRAMMAR);
    }
}

#[test]
fn testbed_check_duration() {
    let reached = "is not up: run `wattio testbed up` first";
    for flag in ["--duration", "--seconds"] {
        let args = ["testbed", "--name", "nosuchbed", "check", flag];
        accepted(None, &args, reached);
        refused(None, &args, SECONDS_GRAMMAR);
    }
}

#[test]
fn cache_fixed_timeout_and_ucb_span() {
    let replay = [
        "cache",
        "replay",
        "--workload",
        "email",
        "--json",
        "--ghost-hints",
        "off",
    ];
    for flag in ["--fixed-timeout", "--ucb-span"] {
        let args: Vec<&str> = replay.iter().copied().chain([flag]).collect();
        for value in ["500ms", "2s", "2"] {
            let args = with(&args, value);
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let (_, ok, err) = timed(None, &argv);
            assert!(ok, "{argv:?}: {err}");
        }
        refused(None, &args, SECONDS_GRAMMAR);
    }
    let minutes: Vec<&str> = replay.iter().copied().chain(["--minutes"]).collect();
    refused(None, &minutes, "write e.g. 20 (minutes), 90s, 20m or 1h30m");
    // The seeds check comes right after the arguments parsed.
    let sweep = ["cache", "sweep", "--seeds", "0", "--fixed-timeout"];
    accepted(None, &sweep, "--seeds must be at least 1");
    refused(None, &sweep, SECONDS_GRAMMAR);
}
