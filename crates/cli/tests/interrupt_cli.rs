//! Ctrl-C and SIGTERM on the long commands that run until stopped (`fixture tick`, `top`) or
//! for minutes (`calibrate`): the real binary gets the signal part-way, ends through its cancel
//! flag with its usual exit status, and what it wrote is whole. (`record`, `export`: in
//! tests/meter_cli.rs; `measure`: tests/measure_cli.rs; the studies: tests/iobench_e2e.rs and
//! tests/report_overhead_cli.rs.)

mod common;

use common::{terminate, wait_until, Reaper, BIN};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

fn write_fixture(dir: &Path) {
    let o = Command::new(BIN)
        .args(["fixture", "amd-epyc"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A ticker whose next tick is 5 s away ends at once on SIGTERM, with status 0 and its true
/// energy log complete: header, start rows, final rows for every counter, each line whole.
#[test]
fn fixture_tick_ends_on_sigterm_with_its_log_complete() {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    write_fixture(&fx);
    let log = dir.path().join("tick.csv");
    let child = Command::new(BIN)
        .args(["fixture", "tick"])
        .arg(&fx)
        .args(["--watts", "1", "--interval", "5s", "--log"])
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reaper = Reaper(vec![child]);
    // The start rows: one per ticking counter (the amd-epyc fixture's package zone and the
    // package MSR of each CPU stand-in, at least two).
    wait_until(10, "the start rows", || lines(&log).len() >= 3);
    let start_rows = lines(&log).len() - 1;
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let o = terminate(reaper.0.pop().unwrap());
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "ended {:?} after SIGTERM: the 5 s wait was not woken",
        t0.elapsed()
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.ends_with('\n'), "the last line is whole: {text}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(
        text.lines().next(),
        Some("unix_ns,elapsed_s,counter,energy_j,raw,wraps")
    );
    assert!(rows.iter().all(|r| r.len() == 6), "{text}");
    // The start rows, then one final row per counter at the moment of the stop.
    assert_eq!(rows.len(), 2 * start_rows, "{text}");
    let end = &rows[start_rows..];
    for (first, last) in rows[..start_rows].iter().zip(end) {
        assert_eq!(first[2], last[2], "the same counters in the same order");
        let elapsed: f64 = last[1].parse().unwrap();
        let energy: f64 = last[3].parse().unwrap();
        assert!((0.3..4.0).contains(&elapsed), "{last:?}");
        // 1 W: the energy written is the elapsed time in joules, floored to the counter's unit
        // (powercap: 1 uJ; the MSR stand-ins: 2^-16 J, ESU 16 of the fixture's unit register
        // 0xA1003) and printed to 6 decimals. A 1e-5 J bound failed once: 15.3 uJ > 10 uJ.
        let unit = if last[2].starts_with("msr ") {
            2f64.powi(-16)
        } else {
            1e-6
        };
        assert!(
            energy <= elapsed + 5e-7 && elapsed - energy < unit + 5e-7,
            "{last:?}"
        );
    }
    assert!(stderr(&o).contains("J in"), "the summary: {}", stderr(&o));
}

/// `top --json` stopped by SIGTERM between refreshes exits 0, and every line it wrote is one
/// whole JSON object.
#[test]
fn top_ends_on_sigterm_with_every_snapshot_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("top.jsonl");
    let child = Command::new(BIN)
        .args(["top", "--source", "model", "--json", "--interval", "200ms"])
        .env_remove("WATTIO_ROOT")
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reaper = Reaper(vec![child]);
    wait_until(20, "three snapshots", || lines(&out).len() >= 3);
    let o = terminate(reaper.0.pop().unwrap());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.ends_with('\n'), "{text}");
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a whole snapshot ({e}): {line}"));
        assert_eq!(v["mechanism"], "model", "{line}");
    }
}

/// Starts `calibrate` on a fixture with RAPL, one 30 s level after another, and sends `signal`
/// once it has announced its levels: it must stop within the first level, exit 128 + the
/// signal's number as a shell would report it, say how far it got, and write no model file.
fn calibrate_interrupted_by(signal: &str, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    let fx = dir.path().join("fx");
    write_fixture(&fx);
    let model = dir.path().join("model.json");
    let child = Command::new(BIN)
        .args([
            "calibrate",
            "--driver",
            "spin",
            "--levels",
            "0,0.5,1",
            "--duration",
            "30s",
            "--settle",
            "0s",
            "-o",
        ])
        .arg(&model)
        .env("WATTIO_ROOT", &fx)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reaper = Reaper(vec![child]);
    let mut err = BufReader::new(reaper.0[0].stderr.take().unwrap());
    let mut announced = String::new();
    err.read_line(&mut announced).unwrap();
    assert!(
        announced.starts_with("wattio calibrate: 3 levels × 30s"),
        "{announced}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    assert!(Command::new("kill")
        .args([signal, &reaper.0[0].id().to_string()])
        .status()
        .unwrap()
        .success());
    let status = reaper.0[0].wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the 30 s level was not stopped: {:?}",
        t0.elapsed()
    );
    assert_eq!(status.code(), Some(code), "{rest}");
    assert!(
        rest.contains("interrupted after 0 of 3 levels") && rest.contains("was not written"),
        "{rest}"
    );
    assert_eq!(rest.lines().count(), 1, "{rest}");
    assert!(!model.exists(), "no model file from part of the levels");
}

#[test]
fn calibrate_ends_on_sigterm_without_a_model_file() {
    calibrate_interrupted_by("-TERM", 143);
}

#[test]
fn calibrate_ends_on_ctrl_c_without_a_model_file() {
    calibrate_interrupted_by("-INT", 130);
}
