//! `scripts/hw-check.py --fixture` end to end: the hardware check the lent GPU machine runs,
//! here on a fixture ticking at a known power (WATTIO_ROOT), the stand-in NVIDIA libraries and a
//! stand-in nvidia-smi reading the same NVML, so the script cannot rot. Its figures are checked
//! against the fixture's truth, and its computed differences against figures recomputed here.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wattio");

fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/hw-check.py")
}

#[test]
fn hw_check_in_fixture_mode_measures_the_known_truth_and_writes_its_report() {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new("python3")
        .arg(script())
        .args([
            "--fixture",
            "--watts",
            "12.5",
            "--budget",
            "200",
            "--wattio",
            BIN,
        ])
        .arg("--stub-lib")
        .arg(nvidia_stub::built_library())
        .arg("--out")
        .arg(out.path())
        // As make test runs: no real NVML for the CPU tests; the script sets its own.
        .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .env_remove("WATTIO_ROOT")
        .output()
        .expect("python3");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let md = stdout
        .trim()
        .strip_prefix("hw-check: wrote ")
        .and_then(|s| s.split(" (").next())
        .unwrap_or_else(|| panic!("where it wrote: {stdout}"));
    assert!(md.ends_with("-fixture.md"), "{md}");
    let report = std::fs::read_to_string(md).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(md.replace(".md", ".json")).unwrap())
            .unwrap();

    // The report names the machine, the commands and the stand-ins.
    assert!(
        report.contains("every figure below comes from stand-ins"),
        "{report}"
    );
    assert!(
        report.contains("## Machine") && report.contains("kernel:"),
        "{report}"
    );
    assert!(
        report.contains("$ ") && report.contains(" measure --source powercap --json -- sleep 3"),
        "{report}"
    );

    // RAPL: the fixture's two packages tick at 12.5 W each; powercap and msr read the same
    // window within a few tenths of a percent of 25 W, idle and "loaded" alike.
    let usable = v["probe"]["usable"].as_array().unwrap();
    assert!(
        usable.contains(&"powercap".into()) && usable.contains(&"msr".into()),
        "{usable:?}"
    );
    for phase in ["idle", "load"] {
        for m in ["powercap", "msr"] {
            let r = &v["rapl"][phase][m];
            let w = r["total_j"].as_f64().unwrap() / r["duration_s"].as_f64().unwrap();
            assert!((w - 25.0).abs() < 0.25, "{phase} {m}: {w} W: {r}");
            // The script's own difference against the truth is the one recomputed here.
            let pct = r["vs_truth_pct"].as_f64().unwrap();
            assert!((pct - 100.0 * (w - 25.0) / 25.0).abs() < 1e-6, "{r}");
        }
    }
    let pacing = &v["pacing"];
    assert!(
        pacing["samples_per_s"].as_f64().unwrap() > 500.0,
        "{pacing}"
    );

    // NVML: wattio against the same counter read through the library by the script (ctypes);
    // the stand-in nvidia-smi, like some real ones, has no total_energy_consumption field, and
    // its power.draw is a one-second mean, close but not the same figure.
    let g = &v["nvml"]["0"];
    let (w, counter) = (
        g["wattio_j"].as_f64().unwrap(),
        g["nvml_counter_j"].as_f64().unwrap(),
    );
    assert!((w - counter).abs() < 0.005 * counter, "{g}");
    assert!(
        (g["vs_nvml_counter_pct"].as_f64().unwrap() - 100.0 * (w - counter) / counter).abs() < 1e-6,
        "{g}"
    );
    assert!(g["smi_counter_j"].is_null(), "{g}");
    let integrated = g["smi_power_integrated_j"].as_f64().unwrap();
    assert!((w - integrated).abs() < 0.03 * w, "{g}");
    // 70 W idle and 300 W more under the load for about 4 of 8 s: well above idle alone.
    assert!(w > 70.0 * 8.0 * 1.3, "{g}");

    // GPU energy per process: the two loads' shares of the GPU's energy, and the driver's raw
    // answer (one sample per process, as nvml.h documents).
    let a = &v["gpu_attribution"];
    assert_eq!(
        a["label"],
        "measured (nvml), attributed (gpu utilisation share)"
    );
    for (asked, got) in [(0.3, &a["shares"]["0.3"]), (0.6, &a["shares"]["0.6"])] {
        let got = got.as_f64().unwrap();
        assert!((got - asked).abs() < 0.06, "asked {asked}, got {got}: {a}");
    }
    assert_eq!(a["raw_samples"].as_array().unwrap().len(), 2, "{a}");

    // measure of the GPU load: its gpu_j, the stand-in's 370 W over about 3 s, nearly all of
    // it the command's (the GPU is busy all the time it runs, start-up aside).
    let m = &v["measure_gpu"];
    let gpu_j = m["gpu_j"].as_f64().unwrap();
    let p = gpu_j / m["duration_s"].as_f64().unwrap();
    assert!(p > 300.0 && p < 380.0, "{m}");
    let share = m["gpu_attributed_j"].as_f64().unwrap() / gpu_j;
    assert!(share > 0.85 && share <= 1.0, "{m}");
    assert_eq!(v["gpu_load"], "wattio workload gpu");
    // Beside RAPL: the fixture's ACPI power meter (200 W, 1 s average) and AMD GPU (5 W),
    // over two idle and two busy blocks of at least 5 averaging periods. The rest is the
    // meter less the packages (2 × 12.5 W), the stand-in NVIDIA GPU idling at 70 W and the
    // AMD GPU.
    let pl = &v["platform"];
    let truth = &pl["fixture_truth"];
    let rest_w =
        truth["platform_w"].as_f64().unwrap() - 25.0 - 70.0 - truth["amdgpu_w"].as_f64().unwrap();
    let blocks = pl["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 4, "{pl}");
    for b in blocks {
        let secs = b["duration_s"].as_f64().unwrap();
        assert!(secs >= 5.0, "{b}");
        let acpi = &b["platforms"][0];
        let rest = acpi["rest_j"]
            .as_f64()
            .unwrap_or_else(|| panic!("no rest: {b}"));
        assert!((rest - rest_w * secs).abs() < 0.02 * rest_w * secs, "{b}");
        assert!(
            b["gpus"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["label"].as_str().unwrap_or("").contains("hwmon amdgpu")),
            "{b}"
        );
    }
    assert!(report.contains("## 6. Platform meters and non-NVIDIA GPUs beside RAPL"));
    storage_step(&v, &report);
    // What a fixture cannot show is skipped with the reason.
    assert!(
        v["skipped"]["calibrate"]
            .as_str()
            .unwrap()
            .contains("fixture"),
        "{v}"
    );
}

/// Step 7 on the fixture's stand-in NVMe drive (8 W at most, 1.5 W idle, 6 W active), busy half
/// of each busy block, the ACPI meter raised by the central estimate's rise while busy:
/// (6 − 1.5) W × 0.5 = 2.25 W.
fn storage_step(v: &serde_json::Value, report: &str) {
    assert!(report.contains("## 7. Storage devices"), "{report}");
    let truth = &v["storage"]["fixture_truth"];
    let (max_w, idle_w, active_w, share) = (
        truth["max_w"].as_f64().unwrap(),
        truth["idle_w"].as_f64().unwrap(),
        truth["active_w"].as_f64().unwrap(),
        truth["busy_share"].as_f64().unwrap(),
    );
    let disk = &v["storage"]["disks"]["nvme0n1"];
    let blocks = disk["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 4, "{disk}");
    for b in blocks {
        let secs = b["duration_s"].as_f64().unwrap();
        let row = &b["disk"];
        let busy = row["busy_s"].as_f64().unwrap();
        let want_busy = if b["kind"] == "busy" {
            share * secs
        } else {
            0.0
        };
        assert!((busy - want_busy).abs() < 0.1 * secs, "{b}");
        let iv = &row["interval"];
        let (lower, upper) = (
            iv["lower_j"].as_f64().unwrap(),
            iv["upper_j"].as_f64().unwrap(),
        );
        assert!((lower - idle_w * secs).abs() < 0.02 * idle_w * secs, "{b}");
        assert!((upper - max_w * secs).abs() < 0.02 * max_w * secs, "{b}");
        // Central: active power over the busy time, idle power over the rest.
        let central = iv["central_j"].as_f64().unwrap();
        let want = active_w * busy + idle_w * (row["window_s"].as_f64().unwrap() - busy);
        assert!((central - want).abs() < 1e-6 * want.max(1.0), "{b}");
    }
    let r = &disk["rises"];
    let rise = (active_w - idle_w) * share;
    for key in ["disk_rise_central_w", "rest_rise_w"] {
        let got = r[key].as_f64().unwrap();
        assert!(
            (got - rise).abs() < 0.15 * rise,
            "{key}: {got} W, not {rise} W: {r}"
        );
    }
    assert_eq!(r["verdict"], "inside the disk's bounds", "{r}");
}
