//! `wattio export` with a disk: a stand-in NVMe drive (`/dev/nvme0` a regular file in the
//! fixture tree, the format of wattio-devices' `nvme` module) with one power state, PS0,
//! idling at 1.5 W with a maximum of 8 W, and no I/O. Its interval over any window of t
//! seconds is [1.5 t, 8 t] J (every second in PS0, or of unknown state bounded by the same
//! figures), so between two scrapes the lower series grows at 1.5 W and the upper at 8 W;
//! with no I/O (its busy time stays 0), the central estimate is the idle power over the whole
//! window, so the central series grows at 1.5 W too.

mod common;

use std::time::{Duration, Instant};

use wattio_devices::PowerState;

/// A laptop with the drive at nvme0n1 behind PCIe function 0000:00:1d.0.
fn fixture() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    wattio_fixture::intel_laptop(t.path()).unwrap();
    let ps0 = PowerState {
        id: 0,
        name: "ps0".into(),
        max_w: 8.0,
        idle_w: Some(1.5),
        active_w: None,
        non_operational: false,
        entry_latency_us: 0,
        exit_latency_us: 0,
    };
    common::nvme_tree::stand_in_nvme(t.path(), vec![ps0], false);
    t
}

/// The body of a scrape of `addr`.
fn scrape(addr: &str) -> String {
    let r = common::http(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    r.split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.into())
}

/// The value of the nvme0n1 energy series with `bound`, and its whole line.
fn disk_series(body: &str, bound: &str) -> Option<(f64, String)> {
    body.lines()
        .find(|l| {
            l.starts_with("wattio_disk_energy_joules_total{")
                && l.contains("device=\"nvme0n1\"")
                && l.contains(&format!("bound=\"{bound}\""))
        })
        .map(|l| {
            (
                l.rsplit(' ').next().unwrap().parse().unwrap(),
                l.to_string(),
            )
        })
}

/// When the lower series was first seen at a new value after `after`, and the scrape then:
/// a scrape just after a device step, so two of them are whole steps apart.
fn next_step(addr: &str, after: Option<f64>) -> (Instant, String) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let body = scrape(addr);
        let at = Instant::now();
        if let Some((v, _)) = disk_series(&body, "lower") {
            if after.is_none_or(|a| v > a) {
                return (at, body);
            }
        }
        assert!(Instant::now() < deadline, "no new step in 15 s:\n{body}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn export_counts_the_nvme_drives_bounds_at_its_idle_and_maximum_power() {
    let root = fixture();
    let (_ex, addr) = common::spawn_exporter(&common::MODEL_EXPORTER, |c| {
        c.env("WATTIO_ROOT", root.path())
            .env("WATTIO_KERNEL_IO", "off")
            .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
    });
    let (_, first) = next_step(&addr, None);
    let (t0, a) = next_step(&addr, disk_series(&first, "lower").map(|s| s.0));
    std::thread::sleep(Duration::from_secs(2));
    // The step after the value seen now: `b` too is scraped just after a step.
    let now = disk_series(&scrape(&addr), "lower").map(|s| s.0);
    let (t1, b) = next_step(&addr, now);
    let elapsed = (t1 - t0).as_secs_f64();
    for (bound, watts) in [("lower", 1.5), ("central", 1.5), ("upper", 8.0)] {
        let (v0, line) = disk_series(&a, bound).unwrap_or_else(|| panic!("no {bound}:\n{a}"));
        let (v1, _) = disk_series(&b, bound).unwrap();
        let rate = (v1 - v0) / elapsed;
        assert!(
            (rate / watts - 1.0).abs() <= 0.10,
            "{bound}: {v0} → {v1} J over {elapsed:.3} s is {rate:.3} W, not {watts} W\n{b}"
        );
        assert!(line.contains("estimated=\"true\""), "{line}");
        let model = line.split("model=\"").nth(1).unwrap_or("");
        assert!(model.starts_with("estimated"), "{line}");
        assert!(line.contains("dev=\"259:0\""), "{line}");
    }
    assert!(
        b.lines()
            .any(|l| l.starts_with("wattio_disk_busy_seconds_total{device=\"nvme0n1\"}")),
        "{b}"
    );
    assert!(
        b.contains("# TYPE wattio_disk_energy_joules_total counter"),
        "{b}"
    );
    common::assert_promtool_accepts(&b);
    openmetrics_parses(&addr);
}

/// The OpenMetrics body goes through the Python client's reference parser (strict about
/// metadata, units and `_total`), the disk families in it.
fn openmetrics_parses(addr: &str) {
    use std::io::Write;
    let r = common::http(
        addr,
        "GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n",
    );
    let body = r.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let mut child = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import sys\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families as p\nfor f in p(sys.stdin.read()): print(f.name, f.type, f.unit)"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 with prometheus_client (scripts/install-deps.sh)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    let families = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{}\n{body}",
        String::from_utf8_lossy(&o.stderr)
    );
    for f in [
        "wattio_disk_energy_joules counter joules",
        "wattio_disk_busy_seconds counter seconds",
    ] {
        assert!(families.contains(f), "{f}: {families}");
    }
}
