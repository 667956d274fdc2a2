//! `wattio report` reads what the real producers write: `wattio record` (CSV and JSON lines, on
//! a fixture tree whose counter moves while it records), `wattio measure --json` (one run, and
//! several runs of two commands), `wattio cache sweep` and `cache replay --json`. Every expected
//! figure is read from the producer's file with the csv crate or serde_json, not by the report.

mod common;

use common::wattio;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use wattio_fixture as fixture;
use wattio_report::{
    load_result_files, scan_results, CacheSweep, Dataset, MeasuredCommand, Recording,
};

fn ok(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Records `--format format` into `out` on a laptop fixture whose package counter gains 1 J
/// every 20 ms while the recorder runs.
fn record(format: &str, out: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let t = fixture::intel_laptop(dir.path()).unwrap();
    let ticking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flag = ticking.clone();
    let ticker = std::thread::spawn(move || {
        let mut uj = 1_000_000_000u64;
        while flag.load(std::sync::atomic::Ordering::Relaxed) {
            uj += 1_000_000;
            t.set_energy_uj("intel-rapl:0", uj).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let o = wattio(
        Some(dir.path()),
        &[
            "record",
            "--source",
            "powercap",
            "--domains",
            "package,dram",
            "--freq",
            "50",
            "--duration",
            "0.6",
            "--format",
            format,
            "-o",
            out.to_str().unwrap(),
        ],
    );
    ticking.store(false, std::sync::atomic::Ordering::Relaxed);
    ticker.join().unwrap();
    ok(&o);
}

/// (socket, domain) → (rows, joules) of a record's counters as the report loaded them.
fn report_counters(path: &Path) -> BTreeMap<(u32, String), (usize, f64)> {
    let Dataset::Record(Recording { counters, .. }) = load_result_files(path).unwrap().remove(0)
    else {
        panic!("{} is not a record", path.display())
    };
    counters
        .iter()
        .map(|c| {
            let e: f64 = c.rows.iter().map(|r| r.1).sum();
            ((c.socket, c.domain.clone()), (c.rows.len(), e))
        })
        .collect()
}

fn add(m: &mut BTreeMap<(u32, String), (usize, f64)>, socket: u32, domain: &str, e: f64) {
    let c = m.entry((socket, domain.to_string())).or_default();
    c.0 += 1;
    c.1 += e;
}

#[test]
fn record_csv_and_json_lines_read_as_the_recorder_wrote_them() {
    let d = tempfile::tempdir().unwrap();
    let csv_path = d.path().join("rec.csv");
    record("csv", &csv_path);
    let mut want = BTreeMap::new();
    let mut rd = csv::Reader::from_path(&csv_path).unwrap();
    for r in rd.deserialize::<BTreeMap<String, String>>() {
        let r = r.unwrap();
        assert_eq!(r["mechanism"], "powercap");
        assert_eq!(r["estimated"], "false");
        add(
            &mut want,
            r["socket"].parse().unwrap(),
            &r["domain"],
            r["energy_j"].parse().unwrap(),
        );
    }
    assert_eq!(want.len(), 2, "package and dram: {want:?}");
    assert!(want[&(0, "package".to_string())].1 > 0.0, "{want:?}");
    assert_eq!(report_counters(&csv_path), want);

    let jsonl_path = d.path().join("rec.jsonl");
    record("jsonl", &jsonl_path);
    let mut want = BTreeMap::new();
    for line in std::fs::read_to_string(&jsonl_path).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        add(
            &mut want,
            v["socket"].as_u64().unwrap() as u32,
            v["domain"].as_str().unwrap(),
            v["energy_j"].as_f64().unwrap(),
        );
    }
    assert_eq!(want.len(), 2);
    assert_eq!(report_counters(&jsonl_path), want);
}

#[test]
fn measure_json_of_one_run_and_of_a_comparison_read_per_command() {
    let d = tempfile::tempdir().unwrap();
    let one = d.path().join("one.json");
    let text = ok(&wattio(
        None,
        &["measure", "--source", "model", "--json", "--", "true"],
    ));
    std::fs::write(&one, &text).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let Dataset::Measure(MeasuredCommand {
        command,
        runs,
        provenance,
    }) = load_result_files(&one).unwrap().remove(0)
    else {
        panic!("not a measure result")
    };
    assert_eq!(command, "true");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].total_j, v["total_j"].as_f64().unwrap());
    assert_eq!(runs[0].duration_s, v["duration_s"].as_f64().unwrap());
    assert_eq!(provenance.label(), v["total_label"].as_str().unwrap());

    let two = d.path().join("two.json");
    let text = ok(&wattio(
        None,
        &[
            "measure",
            "--source",
            "model",
            "--runs",
            "3",
            "--json",
            "true",
            "sleep 0.01",
        ],
    ));
    std::fs::write(&two, &text).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let datasets = load_result_files(&two).unwrap();
    assert_eq!(datasets.len(), 2, "one dataset per command");
    for (i, data) in datasets.iter().enumerate() {
        let Dataset::Measure(MeasuredCommand { command, runs, .. }) = data else {
            panic!("not a measure result")
        };
        let c = &v["results"][i];
        assert_eq!(command, c["command"].as_str().unwrap());
        let want: Vec<f64> = c["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == "ok")
            .map(|r| r["total_j"].as_f64().unwrap())
            .collect();
        assert_eq!(want.len(), 3);
        assert_eq!(runs.iter().map(|r| r.total_j).collect::<Vec<_>>(), want);
    }
}

#[test]
fn cache_sweep_csv_and_replay_json_read_as_the_simulator_wrote_them() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("cache");
    ok(&wattio(
        None,
        &[
            "cache",
            "sweep",
            "--workload",
            "email",
            "--seeds",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
    ));
    let mut want = Vec::new();
    let mut rd = csv::Reader::from_path(out.join("sweep.csv")).unwrap();
    for r in rd.deserialize::<BTreeMap<String, String>>() {
        let r = r.unwrap();
        want.push((
            r["strategy"].clone(),
            r["knob"].parse::<u8>().unwrap(),
            r["energy_j"].parse::<f64>().unwrap(),
        ));
    }
    let Dataset::Cache(CacheSweep { rows }) =
        load_result_files(&out.join("sweep.csv")).unwrap().remove(0)
    else {
        panic!("not cache rows")
    };
    let got: Vec<(String, u8, f64)> = rows
        .iter()
        .map(|r| (r.strategy.clone(), r.knob, r.energy_j))
        .collect();
    assert_eq!(got, want);
    assert!(rows.iter().all(|r| r.workload == "email"));

    let replay = d.path().join("replay.json");
    let text = ok(&wattio(
        None,
        &["cache", "replay", "--workload", "email", "--json"],
    ));
    std::fs::write(&replay, &text).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let Dataset::Cache(CacheSweep { rows }) = load_result_files(&replay).unwrap().remove(0) else {
        panic!("not cache rows")
    };
    let want: Vec<(String, f64)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["strategy"].as_str().unwrap().to_string(),
                r["energy_j"].as_f64().unwrap(),
            )
        })
        .collect();
    let got: Vec<(String, f64)> = rows
        .iter()
        .map(|r| (r.strategy.clone(), r.energy_j))
        .collect();
    assert_eq!(got, want);

    // The whole directory, as `wattio report` reads it: nothing skipped.
    let s = scan_results(d.path()).unwrap();
    assert!(s.skipped.is_empty(), "{:?}", s.skipped);
    assert_eq!(s.loaded.len(), 2);
}

#[test]
fn transfer_json_summaries_read_as_the_transfer_wrote_them() {
    // Files of three sizes, so Algorithm 1 makes several partitions (pipelining is a list).
    let src = tempfile::tempdir().unwrap();
    std::fs::create_dir(src.path().join("d")).unwrap();
    for (name, n) in [
        ("a.bin", 2_500_000),
        ("d/b.bin", 1_800_000),
        ("c.bin", 70_000),
    ] {
        let bytes: Vec<u8> = (0..n).map(|i: usize| (i * 7 % 251) as u8).collect();
        std::fs::write(src.path().join(name), bytes).unwrap();
    }
    let (_server, port) = common::serve_rate_limited(src.path(), "40mbit");
    let results = tempfile::tempdir().unwrap();
    for sla in ["max-throughput", "min-energy"] {
        let dest = tempfile::tempdir().unwrap();
        let text = ok(&wattio(
            None,
            &[
                "transfer",
                &format!("http://127.0.0.1:{port}/"),
                dest.path().to_str().unwrap(),
                "--cpu-actuator",
                "none",
                "--cpufreq",
                "off",
                "--sla",
                sla,
                "--json",
                "--interval",
                "100ms",
                "--rtt",
                "1ms",
            ],
        ));
        let file = results.path().join(format!("{sla}.json"));
        std::fs::write(&file, &text).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let Dataset::Transfer(section) = load_result_files(&file).unwrap().remove(0) else {
            panic!("not a transfer summary")
        };
        let summary = &section.summary;
        assert_eq!(summary.sla, v["sla"].as_str().unwrap());
        assert_eq!(summary.tuner, v["tuner"].as_str().unwrap());
        assert_eq!(summary.bytes, v["bytes"].as_u64().unwrap());
        assert_eq!(summary.files, v["files"].as_u64().unwrap() as usize);
        assert_eq!(
            summary.throughput_mbps,
            v["throughput_mbps"].as_f64().unwrap()
        );
        assert_eq!(
            summary.energy_process.total_j,
            v["energy_process"]["total_j"].as_f64().unwrap()
        );
        let intervals = v["intervals"].as_array().unwrap();
        assert!(!intervals.is_empty(), "{sla}: no intervals");
        assert_eq!(summary.intervals.len(), intervals.len());
        for (got, want) in summary.intervals.iter().zip(intervals) {
            assert_eq!(got.t_s, want["t_s"].as_f64().unwrap());
            assert_eq!(
                got.throughput_mbps,
                want["throughput_mbps"].as_f64().unwrap()
            );
            // What the parameter chart plots: every partition's pipelining and the files in
            // flight (the concurrency), as written.
            let params = got.parameters();
            let charted = |name: &str| params.iter().find(|(n, _)| n == name).map(|p| p.1);
            let pipelining = want["pipelining"].as_array().unwrap();
            for (i, p) in pipelining.iter().enumerate() {
                let name = match pipelining.len() {
                    1 => "pipelining".to_string(),
                    _ => format!("pipelining (partition {})", i + 1),
                };
                assert_eq!(charted(&name), p.as_f64(), "{sla}: {name}");
            }
            assert_eq!(
                charted("files in flight (concurrency)"),
                want["files_in_flight"].as_f64()
            );
        }
    }
    // The whole directory, as `wattio report` reads it: both summaries, nothing skipped, and
    // the page charts their tuning parameters.
    let s = scan_results(results.path()).unwrap();
    assert!(s.skipped.is_empty(), "{:?}", s.skipped);
    assert_eq!(s.loaded.len(), 2);
    let page = results.path().join("report.html");
    ok(&wattio(
        None,
        &[
            "report",
            results.path().to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
        ],
    ));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("Tuning parameters over time").count(), 2);
}
