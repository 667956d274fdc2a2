//! The whole machine in `measure`: on the `server-platform` fixture with an AMD GPU added
//! (hwmon amdgpu, 100 W) and its RAPL packages ticking, each platform meter (the ACPI power
//! meter at 200 W, the BMC at 260 W answering 2 s late) gives the machine's figure and the rest
//! RAPL and the GPUs do not see, only where that is sound, and says why otherwise.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use wattio_fixture::{self as fixture, ACPI_METER_W, BMC_W, FAKE_BMC_DIR};

mod common;
use common::{Reaper, BIN};

const GPU_W: f64 = 100.0;

struct Machine {
    _dir: tempfile::TempDir,
    root: PathBuf,
    _ticker: Reaper,
}

/// The fixture with its two packages ticking at `package_w` each.
fn machine(package_w: f64) -> Machine {
    let dir = tempfile::tempdir().unwrap();
    let t = fixture::server_with_platform_meters(dir.path()).unwrap();
    t.hwmon(
        7,
        "amdgpu",
        &[
            ("power1_average", format!("{}", (GPU_W * 1e6) as u64)),
            ("power1_label", "PPT".into()),
        ],
    )
    .unwrap();
    let ticker = Command::new(BIN)
        .args(["fixture", "tick", "-q", "--duration", "120s", "--watts"])
        .arg(package_w.to_string())
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The ticker's first rewrite, before any window opens.
    std::thread::sleep(std::time::Duration::from_millis(300));
    Machine {
        root: dir.path().to_path_buf(),
        _dir: dir,
        _ticker: Reaper(vec![ticker]),
    }
}

impl Machine {
    /// `wattio measure ARGS`'s standard output; with `--json` among `args`, its JSON.
    fn measure(&self, args: &[&str]) -> String {
        let o = Command::new(BIN)
            .arg("measure")
            .args(args)
            .env("WATTIO_ROOT", &self.root)
            .env(
                "WATTIO_IPMITOOL",
                self.root.join(FAKE_BMC_DIR).join("ipmitool"),
            )
            .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn measure_json(&self, args: &[&str]) -> serde_json::Value {
        let args: Vec<&str> = ["--json"].iter().chain(args).copied().collect();
        serde_json::from_str(&self.measure(&args)).unwrap()
    }
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_rest_is_the_machine_less_rapl_and_the_gpus_within_its_uncertainty() {
    let m = machine(20.0);
    let json = m.measure_json(&["--", "sleep", "8"]);
    let secs = f(&json["duration_s"]);
    let gpu = f(&json["gpu_j"]);
    assert!((gpu - GPU_W * secs).abs() < 0.01 * GPU_W * secs, "{json}");
    assert!(
        json["gpu_label"].as_str().unwrap().contains("hwmon amdgpu"),
        "{json}"
    );
    let platforms = json["machine"]["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 2, "{json}");
    // RAPL at 40 W and the GPU at 100 W: the ACPI meter's rest is 60 W, the BMC's 120 W.
    for (p, platform_w) in platforms.iter().zip([ACPI_METER_W, f64::from(BMC_W)]) {
        let expected = (platform_w - 40.0 - GPU_W) * secs;
        let (rest, u) = (f(&p["rest_j"]), f(&p["rest_uncertainty_j"]));
        assert!(
            (rest - expected).abs() <= u + 0.01 * expected,
            "rest {rest} ± {u} J, expected {expected} J: {p}"
        );
        assert!(
            p.get("disagreement").is_none() && p.get("note").is_none(),
            "{p}"
        );
        assert!((f(&p["platform_j"]) - platform_w * secs).abs() < 0.01 * platform_w * secs);
    }
    // The BMC's whole watts over the run.
    assert!(f(&platforms[1]["rest_uncertainty_j"]) >= secs, "{json}");
    assert!(
        f(&platforms[1]["delay_s"]) >= 1.5,
        "the BMC answers 2 s late: {json}"
    );
    let text = m.measure(&["--", "sleep", "6"]);
    assert!(
        text.contains("machine      platform 0")
            && text.contains("(60.0 W): the machine less package, DRAM and GPUs"),
        "{text}"
    );
    // The report of the --json file shows the machine and the rest of the run.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("measure.json");
    std::fs::write(&file, json.to_string()).unwrap();
    let html = dir.path().join("report.html");
    let o = Command::new(BIN)
        .args(["report", "-q", "-o"])
        .arg(&html)
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let rest = format!("{:.3} ±", f(&platforms[0]["rest_j"]));
    assert!(
        page.contains("<th>rest (J)</th>") && page.contains(&rest),
        "no machine table with {rest} in the report"
    );
}

#[test]
fn a_platform_meter_below_its_parts_is_reported_as_a_disagreement() {
    let m = machine(150.0);
    let json = m.measure_json(&["--", "sleep", "6"]);
    let acpi = &json["machine"]["platforms"][0];
    assert!(f(&acpi["rest_j"]) < -500.0, "{acpi}");
    assert_eq!(acpi["disagreement"], true, "{acpi}");
    assert!(
        acpi["note"]
            .as_str()
            .unwrap()
            .starts_with("meters disagree"),
        "{acpi}"
    );
}

#[test]
fn a_model_or_a_short_window_gives_no_rest_and_says_why() {
    let m = machine(20.0);
    let json = m.measure_json(&["--source", "model", "--", "sleep", "1"]);
    for p in json["machine"]["platforms"].as_array().unwrap() {
        assert!(p.get("rest_j").is_none(), "{p}");
        assert!(
            p["note"]
                .as_str()
                .unwrap()
                .contains("the CPU figure is a model's estimate"),
            "{p}"
        );
    }
    let text = m.measure(&["--", "sleep", "2"]);
    assert!(
        !text.contains("  rest       0") && !text.contains("± "),
        "{text}"
    );
    assert!(
        text.contains(
            "no rest: the window (2.0 s) is shorter than 5 × the meter's 1.0 s averaging"
        ),
        "{text}"
    );
}

#[test]
fn psys_is_the_platform_meter_of_a_laptop() {
    let dir = tempfile::tempdir().unwrap();
    fixture::intel_laptop(dir.path()).unwrap();
    // The package at 10 W and psys, the whole platform, at 25 W.
    let tick = |domains: &str, watts: &str| {
        Command::new(BIN)
            .args([
                "fixture",
                "tick",
                "-q",
                "--duration",
                "60s",
                "--domains",
                domains,
            ])
            .args(["--watts", watts])
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let _tickers = Reaper(vec![tick("package", "10"), tick("psys", "25")]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = Command::new(BIN)
        .args(["measure", "--json", "--", "sleep", "2"])
        .env("WATTIO_ROOT", dir.path())
        .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let psys = &json["machine"]["platforms"][0];
    assert_eq!(psys["meter"], "socket 0 psys", "{json}");
    // A RAPL counter neither averages nor answers late: 2 s is enough for a rest of 15 W.
    let secs = f(&json["duration_s"]);
    let rest = f(&psys["rest_j"]);
    assert!((rest - 15.0 * secs).abs() < 0.01 * 15.0 * secs, "{psys}");
}
