//! Meters beside the CPU through every command: the `server-platform` fixture's ACPI power meter
//! (hwmon `power1_average` over 1 s, at 200 W) and its BMC (a stand-in `ipmitool` answering DCMI
//! power readings at 260 W after 2 s) flow through the same sources as RAPL into `probe`,
//! `measure`, `record`, `export` and `top`, labelled with their mechanism and never added to
//! the CPU's total.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use wattio_fixture::{self as fixture, ACPI_METER_W, BMC_DELAY_S, BMC_W, FAKE_BMC_DIR};

mod common;
use common::{Reaper, BIN};

struct Platform {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ipmitool: PathBuf,
}

fn platform() -> Platform {
    let dir = tempfile::tempdir().unwrap();
    fixture::server_with_platform_meters(dir.path()).unwrap();
    Platform {
        root: dir.path().to_path_buf(),
        ipmitool: dir.path().join(FAKE_BMC_DIR).join("ipmitool"),
        _dir: dir,
    }
}

impl Platform {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("WATTIO_ROOT", &self.root)
            .env("WATTIO_IPMITOOL", &self.ipmitool)
            .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        let o = self.command(args).output().unwrap();
        assert!(
            o.status.success(),
            "wattio {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const HWMON_LABEL: &str = "measured (hwmon power_meter power1_average)";
const IPMI_LABEL: &str = "measured (ipmi dcmi, 1 s average)";

#[test]
fn probe_lists_both_platform_meters_beside_the_cpu_mechanism() {
    let p = platform();
    let t = text(&p.run(&["probe"]));
    assert!(t.contains("hwmon     usable (beside the CPU total"), "{t}");
    assert!(t.contains(&format!("platform 0  {HWMON_LABEL}")), "{t}");
    assert!(
        t.contains(
            "hwmon0 (power_meter, platform) power1_average → platform 0: µW averaged over 1000 ms"
        ),
        "{t}"
    );
    assert!(t.contains(&format!("platform 1  {IPMI_LABEL}")), "{t}");
    assert!(t.contains("verdict: `--source auto` uses powercap"), "{t}");
    assert!(
        t.contains("beside it, every command also reads: platform 0 (hwmon), platform 1 (ipmi)"),
        "{t}"
    );
    let v: serde_json::Value = serde_json::from_slice(&p.run(&["probe", "--json"]).stdout).unwrap();
    let ipmi = v["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mechanism"] == "ipmi")
        .unwrap();
    assert_eq!(ipmi["beside"], true);
    assert_eq!(ipmi["counters"][0]["domain"], "platform");
}

#[test]
fn a_bmc_without_dcmi_is_refused_with_its_answer_and_the_rest_still_reads() {
    let p = platform();
    std::fs::write(
        &p.ipmitool,
        "#!/bin/sh\necho 'DCMI request failed because: Invalid command (c1)' >&2\nexit 1\n",
    )
    .unwrap();
    let t = text(&p.run(&["probe"]));
    assert!(
        t.contains("ipmi      not usable: no DCMI power reading on this BMC (")
            && t.contains("Invalid command (c1)"),
        "{t}"
    );
    let m = text(&p.run(&["measure", "--", "true"]));
    assert!(m.contains(HWMON_LABEL) && !m.contains("ipmi"), "{m}");
    // Asked for by name, the platform meters that cannot be read are an error saying why.
    std::fs::remove_dir_all(p.root.join("sys/class/hwmon")).unwrap();
    let o = p
        .command(&["measure", "--domains", "platform", "--", "true"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{e}");
    assert!(
        e.contains("--domains asks for platform but no meter of it can be read here")
            && e.contains("Invalid command (c1)"),
        "{e}"
    );
}

/// The joules of `platform N` in `measure`'s report.
fn platform_j(report: &str, n: u32) -> f64 {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("platform {n} ")))
        .unwrap_or_else(|| panic!("no platform {n} in {report}"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn measure_reports_each_platform_meter_apart_from_the_cpu_total() {
    let p = platform();
    let t = text(&p.run(&["measure", "--", "sleep", "4"]));
    assert!(t.contains("total        0.000 J (package + dram"), "{t}");
    let secs: f64 = t
        .lines()
        .find_map(|l| l.strip_prefix("duration     "))
        .and_then(|d| d.trim_end_matches(" s").parse().ok())
        .unwrap();
    // Each meter's readings are placed at the times they were measured and the window's end
    // is waited for: the ACPI meter polled every second, the BMC answering 2 s late
    // (BMC_DELAY_S) both give the window's own energy.
    let acpi = platform_j(&t, 0);
    assert!(
        (acpi - ACPI_METER_W * secs).abs() < 0.01 * ACPI_METER_W * secs,
        "{acpi} J over {secs} s at {ACPI_METER_W} W\n{t}"
    );
    assert!(t.contains(&format!("J  {HWMON_LABEL}")), "{t}");
    let bmc = platform_j(&t, 1);
    let bmc_w = f64::from(BMC_W);
    assert!(
        (bmc - bmc_w * secs).abs() < 0.01 * bmc_w * secs && BMC_DELAY_S == 2,
        "{bmc} J over {secs} s at {bmc_w} W\n{t}"
    );
    assert!(t.contains(&format!("J  {IPMI_LABEL}")), "{t}");
    let json: serde_json::Value =
        serde_json::from_slice(&p.run(&["measure", "--json", "--", "true"]).stdout).unwrap();
    let domains = json["domains"].as_array().unwrap();
    let platform: Vec<_> = domains
        .iter()
        .filter(|d| d["domain"] == "platform")
        .collect();
    assert_eq!(platform.len(), 2, "{json}");
    assert_eq!(platform[0]["label"], HWMON_LABEL);
    assert_eq!(platform[1]["label"], IPMI_LABEL);
}

#[test]
fn record_writes_rows_of_every_meter_and_keeps_its_1khz_loop() {
    let p = platform();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    let o = p.run(&[
        "record",
        "--freq",
        "1000",
        "--duration",
        "3s",
        "-o",
        out.to_str().unwrap(),
    ]);
    let summary = String::from_utf8_lossy(&o.stderr).into_owned();
    let csv = std::fs::read_to_string(&out).unwrap();
    let rows_of = |mechanism: &str| -> Vec<f64> {
        csv.lines()
            .filter(|l| l.contains(&format!(",{mechanism},")) && l.contains(",platform,"))
            .map(|l| l.split(',').nth(4).unwrap().parse().unwrap())
            .collect()
    };
    let (acpi, bmc) = (rows_of("hwmon"), rows_of("ipmi"));
    // One row per sample for each meter, whatever its own rate: the loop is not slowed by a
    // BMC that takes 2 s to answer.
    assert!(
        acpi.len() >= 2500 && acpi.len() == bmc.len(),
        "{} {}\n{summary}",
        acpi.len(),
        bmc.len()
    );
    let acpi_j: f64 = acpi.iter().sum();
    assert!(
        (ACPI_METER_W * 1.5..=ACPI_METER_W * 4.0).contains(&acpi_j),
        "{acpi_j} J\n{summary}"
    );
    // Most rows add nothing (the meter updates once a second) and none is negative.
    assert!(acpi.iter().filter(|&&j| j > 0.0).count() <= 5, "{acpi:?}");
    assert!(bmc.iter().all(|&j| j >= 0.0));
    // The machine over the recording: 3 s is under 5 × the ACPI meter's 1 s averaging.
    assert!(
        summary.contains("machine platform 0 over the recording")
            && summary.contains("no rest: the window"),
        "{summary}"
    );
}

#[test]
fn export_and_top_show_each_platform_meter_with_its_label() {
    let p = platform();
    let child = p
        .command(&["export", "--listen", "127.0.0.1:0", "--interval", "100ms"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaper(vec![child]);
    let addr = common::exporter_addr(child.0[0].stderr.take().unwrap());
    std::thread::sleep(Duration::from_millis(2500));
    let r = common::http(&addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let series = |mechanism: &str| {
        r.lines()
            .find(|l| {
                l.starts_with("wattio_platform_energy_joules_total{")
                    && l.contains("domain=\"platform\"")
                    && l.contains(&format!("mechanism=\"{mechanism}\""))
            })
            .unwrap_or_else(|| panic!("no {mechanism} series in {r}"))
            .to_string()
    };
    let acpi = series("hwmon");
    assert!(acpi.contains("estimated=\"false\""), "{acpi}");
    let j: f64 = acpi.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(j > 0.0, "{acpi}");
    series("ipmi");
    common::assert_promtool_accepts(r.split("\r\n\r\n").nth(1).unwrap_or(""));
    drop(child);

    let t = text(&p.run(&["top", "--once"]));
    assert!(
        t.lines()
            .any(|l| l.starts_with("platform 0 ") && l.contains(HWMON_LABEL)),
        "{t}"
    );
    assert!(t.contains("(beside the total, not in it)"), "{t}");
    // One interval since start: shorter than 5 × the ACPI meter's 1 s averaging, so no rest.
    assert!(
        t.lines()
            .any(|l| l.starts_with("machine platform 0 since start")
                && l.contains("no rest: the window")),
        "{t}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&p.run(&["top", "--once", "--json"]).stdout).unwrap();
    assert_eq!(v["beside"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(
        v["machine"]["platforms"].as_array().map(Vec::len),
        Some(2),
        "{v}"
    );
}

#[test]
fn a_meter_beside_the_cpu_is_not_a_source_instead_of_it() {
    let p = platform();
    let o = p
        .command(&["measure", "--source", "ipmi", "--", "true"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        e.contains("ipmi is read beside the CPU's mechanism, not instead of it")
            && e.lines().count() == 1,
        "{e}"
    );
}

#[test]
fn the_fixture_command_says_how_to_reach_its_bmc() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("fx");
    let o = Command::new(BIN)
        .args(["fixture", "server-platform", tree.to_str().unwrap()])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    let program: &Path = &tree.join(FAKE_BMC_DIR).join("ipmitool");
    assert!(
        e.contains(&format!("WATTIO_IPMITOOL={}", program.display())),
        "{e}"
    );
}
