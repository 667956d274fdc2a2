//! The result files' bytes, pinned: each schema type, written from a fixture value as its
//! producer writes it (CSV with its header, JSON compact and pretty), and compared with the files
//! under `tests/data/schemas/`, which the build before the types moved here wrote (from their
//! producers: `wattio-sim`, `wattio-overhead`, `wattio-runner`, `wattio-testbed`,
//! `wattio-iobench`).
//! `WATTIO_WRITE_GOLDEN=1` rewrites them (only when a format is meant to change).

use serde::Serialize;
use std::path::PathBuf;
use wattio_results::iobench::{Libs, Op, Size};
use wattio_results::{
    sweep_csv, IdleRun, LoadRun, RunRecord, RunResult, RunStats, StudyManifest, SweepRow,
};

fn golden(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/schemas")
        .join(name);
    if std::env::var_os("WATTIO_WRITE_GOLDEN").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        text, want,
        "{name} differs from what the earlier build wrote"
    );
}

/// CSV with a header, as `CsvLog` and the sweep write rows.
fn csv_of<T: Serialize>(rows: &[T]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(r).unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

fn json_of<T: Serialize>(name: &str, v: &T) {
    golden(
        &format!("{name}.json"),
        &format!(
            "{}\n{}\n",
            serde_json::to_string(v).unwrap(),
            serde_json::to_string_pretty(v).unwrap()
        ),
    );
}

fn sweep_rows() -> Vec<SweepRow> {
    vec![
        SweepRow {
            workload: "email".into(),
            strategy: "adaptive+ghost-paper".into(),
            knob: 95,
            ghost_hints: "paper".into(),
            mean_response_s: 0.012_345_678,
            energy_j: 812.5,
            seeds: 3,
            disk_spinups: 4.0 / 3.0,
            ghost_hints_issued: 2.5,
            energy_kind: "simulated (estimated from device profile a, \"b\")".into(),
        },
        SweepRow {
            workload: String::new(),
            strategy: "oracle".into(),
            knob: 50,
            ghost_hints: "-".into(),
            mean_response_s: 1e-9,
            energy_j: 0.1 + 0.2,
            seeds: 1,
            disk_spinups: 0.0,
            ghost_hints_issued: 0.0,
            energy_kind: String::new(),
        },
    ]
}

#[test]
fn cache_sweep_rows_and_replays() {
    let rows = sweep_rows();
    golden("sweep.csv", &sweep_csv(&rows));
    json_of("sweep_rows", &rows);
    let replay = RunResult {
        strategy: "stpm".into(),
        knob: 70,
        ghost_hints: "predictive".into(),
        mean_response_s: 0.25,
        energy_j: 1_234.567_891_011,
        duration_s: 3600.0,
        disk_energy_j: 1000.0 / 3.0,
        net_energy_j: 12.0,
        reads: 10_000,
        from_disk: 7_000,
        from_network: 2_000,
        from_memory: 1_000,
        disk_spinups: 42,
        net_ups: 7,
        ghost_hints_issued: 5,
        ghost_transitions: 2,
        energy_kind: "simulated (estimated from device profile hdd)".into(),
    };
    json_of("replay", &vec![replay]);
}

#[test]
fn testbed_run_stats() {
    let measured = RunStats {
        wall_s: 12.5,
        user_s: 3.25,
        sys_s: 0.125,
        exit_code: 0,
        n_cpus: 8,
        energy_j: 456.789,
        estimated: true,
        model: "ccf-linear(min=0.74W,max=3.5W per vCPU)".into(),
        energy_scope: "estimated energy of a host running only this process".into(),
        system_energy_j: Some(900.0),
        attributed_j: Some(123.456),
        attributed_label: Some("measured (perf), attributed (cpu-time share)".into()),
    };
    let bare = RunStats {
        system_energy_j: None,
        attributed_j: None,
        attributed_label: None,
        exit_code: 130,
        ..measured.clone()
    };
    json_of("run_stats", &vec![measured, bare]);
}

#[test]
fn overhead_rows() {
    let load = vec![
        LoadRun {
            round: 1,
            seq: 3,
            workload: "stress, \"cpu\"".into(),
            mechanism: "perf".into(),
            freq_hz: 1000.0,
            rep: 2,
            elapsed_s: 10.123_456_789,
            samples: 10_123,
            recorder_s: 10.2,
            recorder_cpu_s: 0.031,
            start_unix: 1_700_000_000.5,
        },
        LoadRun {
            round: 1,
            seq: 4,
            workload: "idle".into(),
            mechanism: "off".into(),
            freq_hz: 0.0,
            rep: 1,
            elapsed_s: 9.9,
            samples: 0,
            recorder_s: 0.0,
            recorder_cpu_s: 0.0,
            start_unix: 1_700_000_011.0,
        },
    ];
    golden("runs.csv", &csv_of(&load));
    json_of("load_runs", &load);
    let idle = vec![
        IdleRun {
            round: 2,
            seq: 9,
            mechanism: "powercap".into(),
            freq_hz: 10.0,
            rep: 1,
            wall_s: 30.0,
            busy_cpu_s: 0.75,
            recorder_s: 29.9,
            recorder_cpu_s: 0.02,
            samples: 299,
            est_power_w: 23.456,
            model: "ccf-linear(min=0.74W,max=3.5W per vCPU)".into(),
            cstates: "C1=0.12;C6=0.80".into(),
            n_cpus: Some(4),
        },
        IdleRun {
            round: 2,
            seq: 10,
            mechanism: "off".into(),
            freq_hz: 0.0,
            rep: 1,
            wall_s: 30.0,
            busy_cpu_s: 0.5,
            recorder_s: 0.0,
            recorder_cpu_s: 0.0,
            samples: 0,
            est_power_w: 20.0,
            model: String::new(),
            cstates: "unavailable: no cpuidle".into(),
            n_cpus: None,
        },
    ];
    golden("idle.csv", &csv_of(&idle));
    json_of("idle_runs", &idle);
}

#[test]
fn study_manifest() {
    let m = StudyManifest {
        study: "wattio overhead".into(),
        command: "wattio overhead -o out --rounds 3".into(),
        plan: serde_json::json!({"rounds": 3, "mechanisms": ["perf", "powercap"], "seed": 7}),
        total_runs: 42,
        complete: false,
    };
    json_of("study_manifest", &m);
}

fn iobench_rows() -> Vec<RunRecord> {
    let read = RunRecord {
        method: "FileChannel, \"mapped\"".into(),
        op: Op::Readall,
        size: Size::Medlarge,
        buffer: 8192,
        run: 3,
        energy_j: 0.1 + 0.2,
        time_s: 0.012_5,
        bytes: 3_200_000_000,
        mechanism: "perf".into(),
        estimated: false,
        model: String::new(),
        energy_scope: "system".into(),
        system_energy_j: 12.75,
        cpu_s: 0.031,
        window_s: 0.02,
        cache: "cold".into(),
        cache_resident: Some(0.0),
        libs: Libs::Paper,
        checked: true,
        attributed_j: Some(1e-7),
        disk: Some("md0+nvme0n1".into()),
        disk_lower_j: Some(0.012_5),
        disk_central_j: Some(0.031),
        disk_upper_j: Some(0.16),
        disk_label: Some("nvme0n1: estimated (device-reported interval: \"x\", y)".into()),
    };
    let write = RunRecord {
        method: "Files.write".into(),
        op: Op::Writesync,
        size: Size::Tiny,
        run: 1,
        model: "ccf-linear(min=0.74W,max=3.5W per vCPU)".into(),
        mechanism: "model".into(),
        estimated: true,
        energy_scope: "process".into(),
        cache: "n/a".into(),
        cache_resident: None,
        libs: Libs::Current,
        attributed_j: None,
        disk: Some("vda".into()),
        disk_lower_j: None,
        disk_central_j: None,
        disk_upper_j: None,
        disk_label: Some("no interval: vda: a virtual disk: its energy is the host's".into()),
        ..read.clone()
    };
    vec![read, write]
}

#[test]
fn iobench_runs() {
    let rows = iobench_rows();
    golden("iobench_results.csv", &csv_of(&rows));
    json_of("iobench_runs", &rows);
    let labels: Vec<String> = rows.iter().map(RunRecord::provenance).collect();
    golden(
        "iobench_provenance.txt",
        &format!("{}\n", labels.join("\n")),
    );
}
