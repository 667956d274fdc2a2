//! GPUs through NVML end to end: the real binary loading the stand-in NVML library built from
//! `crates/nvidia-stub` (WATTIO_NVML_LIB), in `probe`, `record`, `measure` and `export`, beside the
//! CPU model (the CI machines have no RAPL).

use std::process::{Command, Output, Stdio};

mod common;
use common::Reaper;

const BIN: &str = env!("CARGO_BIN_EXE_wattio");

/// Two GPUs: one with the energy counter at 150 W, one without it (power fallback at 60 W).
const TWO_GPUS: &str = "name=Stub H100,uuid=GPU-11111111-2222-3333-4444-555555555555,energy_w=150|name=Stub P100,uuid=GPU-66666666-7777-8888-9999-000000000000,energy=unsupported,power_mw=60000";

fn wattio(gpus: &str, init: Option<&str>, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env_remove("WATTIO_ROOT")
        .env_remove("WATTIO_NVML_STUB_FILE")
        .env("WATTIO_NVML_LIB", nvidia_stub::built_library())
        .env("WATTIO_NVML_STUB", gpus);
    match init {
        Some(v) => c.env("WATTIO_NVML_STUB_INIT", v),
        None => c.env_remove("WATTIO_NVML_STUB_INIT"),
    };
    c
}

/// wattio's GPUs read from the stand-in described by the file `spec`, read again at every call
/// (so a test can change a GPU mid-run).
trait WithStubFile {
    fn with_stub_file(&mut self, spec: &std::path::Path) -> &mut Self;
}

impl WithStubFile for Command {
    fn with_stub_file(&mut self, spec: &std::path::Path) -> &mut Self {
        self.env_remove("WATTIO_ROOT")
            .env_remove("WATTIO_NVML_STUB")
            .env("WATTIO_NVML_LIB", nvidia_stub::built_library())
            .env("WATTIO_NVML_STUB_FILE", spec)
    }
}

fn run(c: &mut Command) -> Output {
    c.output().expect("run wattio")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn probe_lists_the_gpus_and_how_each_is_read() {
    let o = run(&mut wattio(TWO_GPUS, None, &["probe", "--json"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let g = &v["gpu"];
    assert_eq!(g["mechanism"], "nvml");
    assert_eq!(g["usable"], true);
    let gpus = g["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0]["index"], 0);
    assert_eq!(gpus[0]["name"], "Stub H100");
    assert_eq!(gpus[0]["uuid"], "GPU-11111111-2222-3333-4444-555555555555");
    assert_eq!(gpus[0]["counter"], "energy-counter");
    assert_eq!(gpus[1]["counter"], "power-integrated");
    assert_eq!(gpus[1]["label"], "measured (nvml power, integrated)");
    // The CPU choice does not depend on the GPUs.
    assert_eq!(v["chosen"], "model");

    let o = run(&mut wattio(TWO_GPUS, None, &["probe"]));
    let t = text(&o.stdout);
    assert!(t.contains("nvml      usable"), "{t}");
    assert!(
        t.contains("gpu 0 Stub H100  GPU-11111111-2222-3333-4444-555555555555"),
        "{t}"
    );
    assert!(
        t.contains("energy counter (nvmlDeviceGetTotalEnergyConsumption"),
        "{t}"
    );
    assert!(t.contains("power fallback (nvmlDeviceGetPowerUsage"), "{t}");
    assert!(t.contains("NVML_ERROR_NOT_SUPPORTED"), "{t}");
}

#[test]
fn probe_without_nvml_says_why_and_the_fix_and_still_succeeds() {
    let mut c = wattio(TWO_GPUS, None, &["probe", "--json"]);
    c.env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
    let o = run(&mut c);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["gpu"]["usable"], false);
    assert!(v["gpu"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("library not found"));
    let fix = v["gpu"]["fix"].as_str().unwrap();
    assert!(fix.contains("install the NVIDIA driver") && fix.contains("WATTIO_NVML_LIB"));
    assert_eq!(v["chosen"], "model");

    let o = run(&mut wattio(TWO_GPUS, Some("no_permission"), &["probe"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = text(&o.stdout);
    assert!(
        t.contains("nvml      not usable: nvmlInit failed with NVML_ERROR_NO_PERMISSION"),
        "{t}"
    );
    assert!(
        t.contains("fix: run wattio as a user allowed to open /dev/nvidiactl"),
        "{t}"
    );
}

#[test]
fn asking_for_gpus_without_nvml_is_a_one_line_error_with_the_fix() {
    let mut c = wattio(
        TWO_GPUS,
        None,
        &["record", "--domains", "gpu", "--duration", "0.2"],
    );
    c.env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
    let o = run(&mut c);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("nvml is not usable: library not found"), "{e}");
    assert!(e.contains("set WATTIO_NVML_LIB"), "{e}");

    let o = run(&mut wattio(
        TWO_GPUS,
        Some("no_permission"),
        &["measure", "--domains", "gpu", "--", "true"],
    ));
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("NVML_ERROR_NO_PERMISSION"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn record_gpu_rows_say_nvml_beside_estimated_cpu_rows() {
    let o = run(&mut wattio(
        TWO_GPUS,
        None,
        &[
            "record",
            "--source",
            "model",
            "--freq",
            "10",
            "--duration",
            "0.55",
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut rdr = csv::Reader::from_reader(&o.stdout[..]);
    let rows: Vec<csv::StringRecord> = rdr.records().map(|r| r.unwrap()).collect();
    let gpu: Vec<&csv::StringRecord> = rows.iter().filter(|r| &r[3] == "gpu").collect();
    let cpu: Vec<&csv::StringRecord> = rows.iter().filter(|r| &r[3] == "package").collect();
    assert!(!cpu.is_empty() && gpu.len() == 2 * cpu.len(), "{rows:?}");
    for r in &cpu {
        assert_eq!((&r[1], &r[5]), ("model", "true"));
    }
    for r in &gpu {
        assert_eq!((&r[1], &r[5]), ("nvml", "false"));
        let expected = if &r[2] == "1" {
            "power, integrated"
        } else {
            ""
        };
        assert_eq!(&r[6], expected, "{r:?}");
    }
    // The counter GPU at 150 W: its rows add up to 150 W over the span they cover.
    let ts = |r: &csv::StringRecord| r[0].parse::<f64>().unwrap();
    let g0: Vec<_> = gpu.iter().filter(|r| &r[2] == "0").collect();
    let span = ts(g0.last().unwrap()) - ts(g0.first().unwrap());
    let j: f64 = g0[1..].iter().map(|r| r[4].parse::<f64>().unwrap()).sum();
    assert!(span > 0.3, "{span}");
    assert!((j / span - 150.0).abs() < 10.0, "{j} J over {span} s");

    // --domains gpu: GPU rows only, and no CPU warning about estimates.
    let o = run(&mut wattio(
        TWO_GPUS,
        None,
        &[
            "record",
            "--domains",
            "gpu",
            "--format",
            "jsonl",
            "--duration",
            "0.25",
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.lines().count() >= 2);
    for l in out.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["domain"], "gpu");
        assert_eq!(v["mechanism"], "nvml");
        assert_eq!(v["estimated"], false);
    }
}

#[test]
fn measure_reports_gpu_energy_beside_the_cpu_total() {
    let o = run(&mut wattio(
        TWO_GPUS,
        None,
        &[
            "measure", "--source", "model", "--json", "--", "sleep", "0.4",
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = v["duration_s"].as_f64().unwrap();
    let gpu = v["gpu_j"].as_f64().unwrap();
    // 150 W + 60 W over the run.
    assert!((gpu / d - 210.0).abs() < 15.0, "{gpu} J over {d} s");
    assert_eq!(
        v["gpu_label"],
        "measured (nvml); measured (nvml power, integrated)"
    );
    // total_j stays the CPU's packages + DRAM, with the CPU's label.
    let cpu: f64 = v["domains"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["domain"] != "gpu")
        .map(|d| d["energy_j"].as_f64().unwrap())
        .sum();
    assert!((v["total_j"].as_f64().unwrap() - cpu).abs() < 1e-9, "{v}");
    assert_eq!(v["mechanism"], "model");
    assert_eq!(v["estimated"], true);
    let g1 = v["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["domain"] == "gpu" && d["socket"] == 1)
        .unwrap();
    assert_eq!(g1["label"], "measured (nvml power, integrated)");

    let o = run(&mut wattio(
        TWO_GPUS,
        None,
        &["measure", "--", "sleep", "0.1"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = text(&o.stdout);
    assert!(t.contains("gpu          "), "{t}");
    assert!(t.contains("beside the total, not in it"), "{t}");

    // GPUs alone: no CPU total to speak of, and the text says so.
    let o = run(&mut wattio(
        TWO_GPUS,
        None,
        &["measure", "--domains", "gpu", "--", "sleep", "0.1"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = text(&o.stdout);
    assert!(t.contains("total        no CPU domain was read"), "{t}");
    assert!(t.contains("mean power   0.000 W"), "{t}");
}

#[test]
fn export_has_gpu_series_with_their_own_labels() {
    let child = wattio(
        TWO_GPUS,
        None,
        &[&["export"][..], &common::MODEL_EXPORTER[..]].concat(),
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut child = Reaper(vec![child]);
    let addr = common::exporter_addr(child.0[0].stderr.take().unwrap());
    std::thread::sleep(std::time::Duration::from_millis(200));
    let r = common::http(&addr, "GET /metrics HTTP/1.1\r\n\r\n");
    let series = |needle: &str| -> String {
        r.lines()
            .find(|l| l.starts_with("wattio_energy_joules_total{") && l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle} in {r}"))
            .to_string()
    };
    let g0 = series("socket=\"0\",domain=\"gpu\"");
    assert!(
        g0.contains("mechanism=\"nvml\",estimated=\"false\",model=\"\""),
        "{g0}"
    );
    let g1 = series("socket=\"1\",domain=\"gpu\"");
    assert!(g1.contains("model=\"power, integrated\""), "{g1}");
    let cpu = series("domain=\"package\"");
    assert!(
        cpu.contains("mechanism=\"model\",estimated=\"true\""),
        "{cpu}"
    );
}

#[test]
fn probe_measures_how_often_each_gpu_counter_changes() {
    // One GPU whose counter moves every 50 ms, as a real GPU's does; one read from power,
    // which wattio integrates on every read, so it has no update period of its own.
    let gpus =
        "name=Slow,energy_w=200,energy_update_ms=50|name=Old,energy=unsupported,power_mw=60000";
    let o = run(&mut wattio(gpus, None, &["probe", "--json"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let periods = v["gpu"]["update_periods"].as_array().unwrap();
    assert_eq!(periods.len(), 2, "{periods:?}");
    let ms = periods[0]["period_ms"].as_f64().unwrap();
    assert!((40.0..=60.0).contains(&ms), "{ms} ms: {periods:?}");
    assert!(periods[1].is_null(), "{periods:?}");
    let o = run(&mut wattio(gpus, None, &["probe"]));
    assert!(
        text(&o.stdout).contains("    changes every "),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn measure_warns_when_a_run_spans_few_updates_of_a_counter() {
    // The GPU counter moves every 100 ms: a 50 ms run sees at most one step of it.
    let gpus = "name=Slow,energy_w=200,energy_update_ms=100";
    let o = run(&mut wattio(
        gpus,
        None,
        &["measure", "--source", "model", "--", "sleep", "0.05"],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    let w = e
        .lines()
        .find(|l| l.contains("under three updates of the gpu 0 counter"))
        .unwrap_or_else(|| panic!("no warning: {e}"));
    assert!(
        w.starts_with("wattio measure: warning: a run lasted "),
        "{w}"
    );
    let ms: f64 = w
        .split("(it changes every ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{w}"));
    assert!((90.0..=110.0).contains(&ms), "{w}");
    // A run of a second spans ten updates: no warning.
    let o = run(&mut wattio(
        gpus,
        None,
        &["measure", "--source", "model", "--", "sleep", "1"],
    ));
    assert!(
        o.status.success() && !text(&o.stderr).contains("warning"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_gpu_lost_mid_run_is_reported_while_the_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("gpus");
    std::fs::write(&spec, "name=A,energy_w=100|name=B,energy_w=100").unwrap();
    let rows = dir.path().join("rows.csv");
    let child = Command::new(BIN)
        .args([
            "record",
            "--source",
            "model",
            "--freq",
            "20",
            "--duration",
            "1500ms",
            "-o",
        ])
        .arg(&rows)
        .with_stub_file(&spec)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaper(vec![child]);
    std::thread::sleep(std::time::Duration::from_millis(600));
    // GPU 1 falls off the bus.
    std::fs::write(&spec, "name=A,energy_w=100|name=B,energy_w=100,lost=yes").unwrap();
    let o = child.0.pop().unwrap().wait_with_output().unwrap();
    let e = text(&o.stderr);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("read errors (first: GPU 1: nvmlDeviceGetTotalEnergyConsumption failed"),
        "{e}"
    );
    // After the loss GPU 0 still has energy in its rows and GPU 1 none.
    let csv = std::fs::read_to_string(&rows).unwrap();
    let last_rows = |socket: &str| -> Vec<f64> {
        let r: Vec<f64> = csv
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split(',').collect();
                f.len() > 4 && f[3] == "gpu" && f[2] == socket
            })
            .map(|l| l.split(',').nth(4).unwrap().parse().unwrap())
            .collect();
        r[r.len() - 5..].to_vec()
    };
    assert!(last_rows("0").iter().all(|&j| j > 0.0), "{csv}");
    assert!(last_rows("1").iter().all(|&j| j == 0.0), "{csv}");
}

/// `wattio` with the stand-in as both NVML and the CUDA driver, sharing `activity`.
fn wattio_cuda(gpus: &str, activity: &std::path::Path, args: &[&str]) -> Command {
    let mut c = wattio(gpus, None, args);
    c.env("WATTIO_CUDA_LIB", nvidia_stub::built_library())
        .env("WATTIO_GPU_STUB_DIR", activity)
        .env_remove("WATTIO_CUDA_STUB_INIT");
    c
}

/// The busy seconds the stand-in driver recorded for GPU 0, over all processes.
fn recorded_busy_s(activity: &std::path::Path) -> f64 {
    let mut us = 0u64;
    for e in std::fs::read_dir(activity).unwrap().flatten() {
        for line in std::fs::read_to_string(e.path()).unwrap().lines() {
            let f: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            if line.starts_with("busy 0 ") {
                us += f[2] - f[1];
            }
        }
    }
    us as f64 / 1e6
}

#[test]
fn workload_gpu_keeps_the_gpu_busy_for_the_asked_share() {
    let d = tempfile::tempdir().unwrap();
    let o = run(&mut wattio_cuda(
        "name=Stub H200",
        d.path(),
        &[
            "workload",
            "gpu",
            "--util",
            "30",
            "--duration",
            "1s",
            "--json",
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["device_name"], "Stub H200");
    let elapsed = v["elapsed_s"].as_f64().unwrap();
    assert!((0.95..1.5).contains(&elapsed), "{v}");
    // The driver's own record of kernel time (calibration included) against the asked 30 %.
    let busy = recorded_busy_s(d.path());
    assert!(
        (busy / elapsed - 0.30).abs() < 0.06,
        "{busy} s busy in {elapsed} s"
    );
    assert!(text(&o.stderr).contains("workload gpu: Stub H200 (device 0, 4 SMs)"));
}

#[test]
fn measure_sees_the_gpu_load_in_the_gpu_counter() {
    // 50 W idle, 200 W more while kernels run: a run at 100 % gives about 250 W.
    let d = tempfile::tempdir().unwrap();
    let o = run(&mut wattio_cuda(
        "name=Stub H200,energy_w=50,busy_w=200",
        d.path(),
        &[
            "measure",
            "--source",
            "model",
            "--json",
            "--",
            BIN,
            "workload",
            "gpu",
            "--duration",
            "1s",
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let dur = v["duration_s"].as_f64().unwrap();
    let gpu = v["gpu_j"].as_f64().unwrap();
    let expected = 50.0 * dur + 200.0 * recorded_busy_s(d.path());
    assert!(
        (gpu - expected).abs() < 0.02 * expected,
        "{gpu} J measured, {expected} J from the driver's record over {dur} s"
    );
    assert!(gpu / dur > 200.0, "{gpu} J over {dur} s");
}

#[test]
fn workload_gpu_without_a_driver_is_a_one_line_error_with_the_fix() {
    let d = tempfile::tempdir().unwrap();
    let o = run(wattio_cuda(
        "name=Stub H200",
        d.path(),
        &["workload", "gpu", "--duration", "100ms"],
    )
    .env("WATTIO_CUDA_LIB", "/nonexistent/libcuda.so.1"));
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(
        e.contains("cannot load the CUDA driver library /nonexistent/libcuda.so.1"),
        "{e}"
    );
    assert!(e.contains("set WATTIO_CUDA_LIB"), "{e}");

    let o = run(wattio_cuda(
        "name=Stub H200",
        d.path(),
        &["workload", "gpu", "--duration", "100ms"],
    )
    .env("WATTIO_CUDA_STUB_INIT", "no_device"));
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("cuInit failed: CUDA error 100 (no CUDA-capable device is detected)"),
        "{e}"
    );
    assert!(e.contains("nvidia-smi -L"), "{e}");

    let o = run(&mut wattio_cuda(
        "name=Stub H200",
        d.path(),
        &["workload", "gpu", "--device", "3", "--duration", "100ms"],
    ));
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("no CUDA device 3 (the driver lists 1)"));
}

/// `workload gpu` processes on the stand-in GPU, one per `utils` percentage, for 6 s, sharing
/// `activity`; returned once past their calibration (reaped when dropped), with their pids.
fn gpu_loads(gpus: &str, activity: &std::path::Path, utils: &[&str]) -> (Reaper, Vec<u32>) {
    let mut loads = Reaper(vec![]);
    for util in utils {
        loads.0.push(
            wattio_cuda(
                gpus,
                activity,
                &["workload", "gpu", "--util", util, "--duration", "6s"],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        );
    }
    let pids = loads.0.iter().map(|c| c.id()).collect();
    std::thread::sleep(std::time::Duration::from_millis(700));
    (loads, pids)
}

/// Two `workload gpu` processes on the stand-in GPU at `utils` percent for `secs`, and what
/// `wattio top --json` said over one interval of `interval` while they ran.
fn top_beside_two_gpu_loads(
    gpus: &str,
    utils: [&str; 2],
    extra: &[&str],
) -> (Vec<u32>, serde_json::Value) {
    let d = tempfile::tempdir().unwrap();
    let (_loads, pids) = gpu_loads(gpus, d.path(), &utils);
    let mut args = vec![
        "top",
        "--source",
        "model",
        "--json",
        "--interval",
        "2s",
        "--iterations",
        "1",
    ];
    args.extend_from_slice(extra);
    let o = run(&mut wattio_cuda(gpus, d.path(), &args));
    assert!(o.status.success(), "{}", text(&o.stderr));
    (pids, serde_json::from_slice(&o.stdout).unwrap())
}

fn gpu_j_of(v: &serde_json::Value, pid: u32) -> f64 {
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["pid"] == pid)
        .unwrap_or_else(|| panic!("no entry for pid {pid}: {v}"))["gpu_energy_j"]
        .as_f64()
        .unwrap()
}

#[test]
fn top_splits_gpu_energy_between_processes_by_their_utilisation() {
    // 100 W whatever runs: the GPU's joules over the interval are known.
    let (pids, v) = top_beside_two_gpu_loads(
        "name=Stub H200,energy_w=100",
        ["30", "60"],
        &["--carbon-intensity", "360"],
    );
    let g = &v["gpus"][0];
    assert_eq!(g["index"], 0);
    assert_eq!(g["basis"], "utilisation");
    assert_eq!(
        g["label"],
        "measured (nvml), attributed (gpu utilisation share)"
    );
    let e = g["energy_j"].as_f64().unwrap();
    let interval = v["interval_s"].as_f64().unwrap();
    assert!((e / interval - 100.0).abs() < 5.0, "{e} J in {interval} s");
    let (a, b) = (gpu_j_of(&v, pids[0]), gpu_j_of(&v, pids[1]));
    // Shares of the window: 30 % and 60 %, the rest idle (samples are whole 100 ms slots,
    // and an interval's edges cut a slot: a tenth of the figure).
    assert!((a / e - 0.30).abs() < 0.05, "{a} J of {e} J: {v}");
    assert!((b / e - 0.60).abs() < 0.07, "{b} J of {e} J: {v}");
    let idle = g["idle_j"].as_f64().unwrap();
    assert!((a + b + idle - e).abs() < 1e-6 * e, "{v}");
    // The workloads' CPU figures stay apart from their GPU figures.
    let entry = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["pid"] == pids[1])
        .unwrap();
    assert_eq!(entry["comm"], "wattio");
    assert!(entry["total_gpu_energy_j"].as_f64().unwrap() >= b);
    // And each GPU figure its CO₂e, as the CPU ones.
    let g = |k: &str| entry[k].as_f64().unwrap();
    assert!(
        (g("gpu_co2e_g") - g("gpu_energy_j") / 3.6e6 * 360.0).abs() < 1e-12,
        "{entry}"
    );
    assert!((g("total_gpu_co2e_g") - g("total_gpu_energy_j") / 3.6e6 * 360.0).abs() < 1e-12);
    assert!(
        (v["gpu_co2e_g"].as_f64().unwrap() - e / 3.6e6 * 360.0).abs() < 1e-12,
        "{v}"
    );
}

#[test]
fn without_utilisation_samples_gpu_energy_goes_by_held_memory_and_says_so() {
    let (pids, v) = top_beside_two_gpu_loads(
        "name=Stub V100,energy_w=100,process_util=unsupported",
        ["30", "60"],
        &[],
    );
    let g = &v["gpus"][0];
    assert_eq!(g["basis"], "memory");
    assert_eq!(g["label"], "measured (nvml), attributed (gpu memory share)");
    let e = g["energy_j"].as_f64().unwrap();
    // Each holds the same 4 bytes: halves, whatever their utilisation.
    for pid in pids {
        assert!((gpu_j_of(&v, pid) / e - 0.5).abs() < 1e-6, "{v}");
    }
}

#[test]
fn top_screen_shows_the_gpu_line_and_column() {
    let (_, v) = top_beside_two_gpu_loads("name=Stub H200,energy_w=100", ["50", "50"], &[]);
    assert!(v["gpus"].as_array().unwrap().len() == 1);
    let d = tempfile::tempdir().unwrap();
    let o = run(&mut wattio_cuda(
        "name=Stub H200,energy_w=100",
        d.path(),
        &[
            "top",
            "--source",
            "model",
            "--interval",
            "200ms",
            "--iterations",
            "1",
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = text(&o.stdout);
    assert!(t.contains("gpu 0   "), "{t}");
    assert!(
        t.contains("measured (nvml), attributed (gpu utilisation share)"),
        "{t}"
    );
    assert!(t.contains("GPU J"), "{t}");
}

#[test]
fn export_by_process_has_gpu_and_co2e_series_split_by_utilisation_that_promtool_accepts() {
    let gpus = "name=Stub H200,energy_w=100";
    let d = tempfile::tempdir().unwrap();
    let (mut kids, pids) = gpu_loads(gpus, d.path(), &["30", "60"]);
    kids.0.push(
        wattio_cuda(
            gpus,
            d.path(),
            &[
                "export",
                "--interval",
                "100ms",
                "--source",
                "model",
                "--listen",
                "127.0.0.1:0",
                "--by",
                "process",
                "--carbon-intensity",
                "360",
            ],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let addr = common::exporter_addr(kids.0[2].stderr.take().unwrap());
    let get = || common::http(&addr, "GET /metrics HTTP/1.1\r\n\r\n");
    get();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let r2 = get();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let r = get();
    let value_in = |r: &str, prefix: &str, needle: &str| -> Option<f64> {
        r.lines()
            .find(|l| l.starts_with(prefix) && l.contains(needle))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
    };
    let value_of = |prefix: &str, needle: &str| -> f64 {
        value_in(&r, prefix, needle).unwrap_or_else(|| panic!("no {prefix} with {needle} in {r}"))
    };
    let series = "wattio_process_gpu_energy_joules_total{";
    // A series starts at 0 in the interval that earns it its place (that interval goes to
    // "other", and a load may have had no kernel in the first, short one): the last interval's
    // growth of each is in the ratio of their utilisations, 2 to 1.
    let growth = |pid: u32| {
        let needle = format!("pid=\"{pid}\"");
        value_of(series, &needle) - value_in(&r2, series, &needle).unwrap_or(0.0)
    };
    let (a, b) = (growth(pids[0]), growth(pids[1]));
    assert!((b / a - 2.0).abs() < 0.4, "{a} J and {b} J: {r2}\n{r}");
    let b = value_of(series, &format!("pid=\"{}\"", pids[1]));
    let a = value_of(series, &format!("pid=\"{}\"", pids[0]));
    assert!(
        r.contains("attribution=\"measured (nvml), attributed (gpu utilisation share)\""),
        "{r}"
    );
    let gpu_total: f64 = value_of("wattio_energy_joules_total{", "domain=\"gpu\"");
    let other = value_of(series, "comm=\"other\"");
    let idle = value_of("wattio_gpu_unattributed_energy_joules_total", "");
    assert!(
        (a + b + other + idle - gpu_total).abs() < 0.01 * gpu_total,
        "series {a} + {b} + other {other} + idle {idle} against the GPU's {gpu_total}: {r}"
    );
    // Every energy series has its CO₂e twin, per entity too: grams = joules / 3.6e6 × g/kWh.
    let grams = value_of(
        "wattio_process_gpu_energy_co2e_grams_total{",
        &format!("pid=\"{}\"", pids[1]),
    );
    assert!(
        (grams - b / 3.6e6 * 360.0).abs() < 1e-9,
        "{grams} g for {b} J"
    );
    for twin in [
        "wattio_process_energy_co2e_grams_total{",
        "wattio_unattributed_energy_co2e_grams_total",
        "wattio_gpu_unattributed_energy_co2e_grams_total",
        "wattio_energy_co2e_grams_total{",
    ] {
        assert!(r.contains(twin), "no {twin} in {r}");
    }
    let body = r.split_once("\r\n\r\n").unwrap().1;
    common::assert_promtool_accepts(body);
}

#[test]
fn record_by_process_adds_gpu_rows_that_add_up_to_the_gpu_counter() {
    let gpus = "name=Stub H200,energy_w=100";
    let d = tempfile::tempdir().unwrap();
    let (_loads, pids) = gpu_loads(gpus, d.path(), &["30", "60"]);
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    let out = d.path().join("rows.csv");
    let o = run(&mut wattio_cuda(
        gpus,
        d.path(),
        &[
            "record",
            "--source",
            "model",
            "--by",
            "process",
            "--by-interval",
            "1s",
            "--duration",
            "3.5s",
            "-o",
            out.to_str().unwrap(),
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut r = csv::Reader::from_path(&out).unwrap();
    let h = r.headers().unwrap().clone();
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let (domain, energy, entity, pid, mech, model) = (
        col("domain"),
        col("energy_j"),
        col("entity"),
        col("pid"),
        col("mechanism"),
        col("model"),
    );
    let (mut counter_j, mut rows_j) = (0.0, 0.0);
    let mut by_pid = std::collections::HashMap::<String, f64>::new();
    for rec in r.records() {
        let rec = rec.unwrap();
        if &rec[domain] != "gpu" {
            continue;
        }
        let j: f64 = rec[energy].parse().unwrap();
        if rec[entity].is_empty() {
            counter_j += j;
            continue;
        }
        rows_j += j;
        assert_eq!(&rec[mech], "nvml", "{rec:?}");
        assert!(
            rec[model].ends_with("attributed (gpu utilisation share)"),
            "{rec:?}"
        );
        if &rec[entity] == "process" {
            *by_pid.entry(rec[pid].to_string()).or_default() += j;
        }
    }
    // Every joule of the GPU counter is in the attribution rows (processes, other, idle).
    assert!(
        (rows_j - counter_j).abs() < 1e-6 * counter_j.max(1.0),
        "{rows_j} against {counter_j}"
    );
    let (a, b) = (by_pid[&pids[0]], by_pid[&pids[1]]);
    assert!(
        (b / a - 2.0).abs() < 0.35,
        "{a} J and {b} J of {counter_j} J"
    );
    assert!((a + b) / counter_j > 0.7, "{a} + {b} of {counter_j}");
}

#[test]
fn measure_gives_the_command_its_share_of_the_gpu_beside_gpu_j() {
    // Another process keeps the GPU busy 40 % of the time the whole run; the command, a shell
    // whose child uses the GPU 30 %, gets its own share, not the other's.
    let gpus = "name=Stub H200,energy_w=100";
    let d = tempfile::tempdir().unwrap();
    let _other = Reaper(vec![wattio_cuda(
        gpus,
        d.path(),
        &["workload", "gpu", "--util", "40", "--duration", "6s"],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap()]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let script = format!("{BIN} workload gpu --util 30 --duration 3s; true");
    let o = run(&mut wattio_cuda(
        gpus,
        d.path(),
        &[
            "measure",
            "--source",
            "model",
            "--carbon-intensity",
            "360",
            "--json",
            "--",
            "sh",
            "-c",
            &script,
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let gpu = v["gpu_j"].as_f64().unwrap();
    let mine = v["gpu_attributed_j"].as_f64().unwrap();
    assert_eq!(
        v["gpu_attributed_label"],
        "measured (nvml), attributed (gpu utilisation share)"
    );
    // About 30 % of the GPU's joules over the run (its calibration and start-up are inside the
    // run too, a few percent).
    assert!((mine / gpu - 0.30).abs() < 0.06, "{mine} J of {gpu} J: {v}");
    let grams = v["gpu_attributed_co2e_g"].as_f64().unwrap();
    assert!((grams - mine / 3.6e6 * 360.0).abs() < 1e-12, "{v}");

    // Text: a line of its own below the gpu line.
    let o = run(&mut wattio_cuda(
        gpus,
        d.path(),
        &[
            "measure",
            "--source",
            "model",
            "--",
            BIN,
            "workload",
            "gpu",
            "--util",
            "50",
            "--duration",
            "1s",
        ],
    ));
    let t = text(&o.stdout);
    assert!(
        t.contains("command GPU  ") && t.contains("its share of the GPUs' energy: measured (nvml), attributed (gpu utilisation share)"),
        "{t}"
    );
}

#[test]
fn a_process_that_leaves_mid_window_keeps_the_gpu_share_of_its_time() {
    // One load at 60 % for 1 s inside a 2.5 s interval: 0.6 × 1 s of the GPU's busy time, a
    // quarter of the window, whatever happened to it after.
    let gpus = "name=Stub H200,energy_w=100";
    let d = tempfile::tempdir().unwrap();
    let top = wattio_cuda(
        gpus,
        d.path(),
        &[
            "top",
            "--source",
            "model",
            "--json",
            "--interval",
            "2500ms",
            "--iterations",
            "1",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut top = Reaper(vec![top]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = run(&mut wattio_cuda(
        gpus,
        d.path(),
        &[
            "workload",
            "gpu",
            "--util",
            "60",
            "--duration",
            "1s",
            "--json",
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    let load: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let o = top.0.pop().unwrap().wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let g = &v["gpus"][0];
    let (e, window) = (
        g["energy_j"].as_f64().unwrap(),
        v["interval_s"].as_f64().unwrap(),
    );
    // The driver's record of its kernels, calibration included, against the window.
    let busy = recorded_busy_s(d.path());
    let gone = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["gpu_energy_j"].as_f64().is_some_and(|j| j > 0.0))
        .unwrap_or_else(|| panic!("no entry with GPU energy: {v}"));
    let share = gone["gpu_energy_j"].as_f64().unwrap() / e;
    assert!(
        (share - busy / window).abs() < 0.06,
        "{share} of the GPU for {busy} s busy in {window} s ({load}): {v}"
    );
    // It had ended by the end of the window: named by its pid.
    assert!(gone["comm"].as_str().unwrap().starts_with("pid "), "{gone}");
}

#[test]
fn a_gpu_whose_process_reading_fails_keeps_its_energy_idle_and_says_why() {
    let d = tempfile::tempdir().unwrap();
    let spec = d.path().join("gpus");
    std::fs::write(&spec, "name=A,energy_w=100|name=B,energy_w=100").unwrap();
    let activity = d.path().join("activity");
    std::fs::create_dir(&activity).unwrap();
    let (_loads, pids) = gpu_loads(
        "name=A,energy_w=100|name=B,energy_w=100",
        &activity,
        &["50"],
    );
    let top = Command::new(BIN)
        .args([
            "top",
            "--source",
            "model",
            "--json",
            "--interval",
            "1s",
            "--iterations",
            "2",
        ])
        .with_stub_file(&spec)
        .env("WATTIO_GPU_STUB_DIR", &activity)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut top = Reaper(vec![top]);
    std::thread::sleep(std::time::Duration::from_millis(1300));
    // GPU 1 falls off the bus during the second interval.
    std::fs::write(&spec, "name=A,energy_w=100|name=B,energy_w=100,lost=yes").unwrap();
    let o = top.0.pop().unwrap().wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let second: serde_json::Value = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    let g1 = &second["gpus"][1];
    assert!(g1["basis"].is_null(), "{g1}");
    assert!(
        g1["note"]
            .as_str()
            .unwrap()
            .contains("nvmlDeviceGetProcessUtilization"),
        "{g1}"
    );
    assert_eq!(
        g1["energy_j"].as_f64().unwrap(),
        g1["idle_j"].as_f64().unwrap()
    );
    // GPU 0 goes on: the load on it still gets its share.
    let g0 = &second["gpus"][0];
    assert_eq!(g0["basis"], "utilisation", "{g0}");
    let mine = second["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["pid"] == pids[0])
        .unwrap_or_else(|| panic!("{second}"));
    let share = mine["gpu_energy_j"].as_f64().unwrap() / g0["energy_j"].as_f64().unwrap();
    assert!((share - 0.5).abs() < 0.1, "{share}: {second}");
}
