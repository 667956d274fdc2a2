//! `wattio power run` on an NVMe drive with its own figures: a stand-in controller
//! (`/dev/nvme0` a regular file in the fixture tree, the format of wattio-devices' `nvme`
//! module) with an operational state idling at 1 W and two non-operational states, PS3
//! (0.05 W, entry 2 ms + exit 2 ms) and PS4 (0.005 W, entry 5 ms + exit 40 ms). The manager's
//! modes are the APST latency tolerances that admit each: `apst-off`, `apst≤4000us`,
//! `apst≤45000us`; each decision writes the controller's `pm_qos_latency_tolerance_us` and
//! states what it trades by the drive's own figures, checked here by hand: to `apst≤4000us`
//! saves 1 − 0.05 = 0.95 W and adds PS3's 2 ms exit; to `apst≤45000us` saves 1 − 0.005 =
//! 0.995 W and adds PS4's 40 ms exit. With `--apply` the tolerance is written and, at the end,
//! put back.

mod common;

use common::nvme_tree::{stand_in_nvme, symlink, write, CTRL, PCI};
use common::BIN;
use std::fs;
use std::path::Path;
use std::process::Command;

use wattio_devices::PowerState;

const TOLERANCE: &str = "sys/class/nvme/nvme0/power/pm_qos_latency_tolerance_us";
const ORIGINAL: &str = "100000\n";

fn state(id: u8, max_w: f64, idle_w: f64, nops: bool, en: u64, ex: u64) -> PowerState {
    PowerState {
        id,
        name: format!("ps{id}"),
        max_w,
        idle_w: Some(idle_w),
        active_w: None,
        non_operational: nops,
        entry_latency_us: en,
        exit_latency_us: ex,
    }
}

/// The drive at nvme0n1 behind PCIe function 0000:00:1d.0, its tolerance at its original.
fn fixture() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let b = t.path();
    let states = vec![
        state(0, 8.0, 1.0, false, 0, 0),
        state(1, 0.05, 0.05, true, 2_000, 2_000),
        state(2, 0.005, 0.005, true, 5_000, 40_000),
    ];
    stand_in_nvme(b, states, true);
    write(
        b,
        &format!("{CTRL}/power/pm_qos_latency_tolerance_us"),
        ORIGINAL,
    );
    write(b, &format!("{PCI}/power/control"), "on\n");
    symlink(b, PCI, "sys/bus/pci/devices/0000:00:1d.0");
    write(
        b,
        "proc/self/mountinfo",
        "22 1 8:2 / / rw - ext4 /dev/sda2 rw\n",
    );
    t
}

fn power(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .env("WATTIO_ROOT", root)
        .arg("power")
        .args(args)
        .args(["--device", "nvme0n1", "--knob", "0", "--interval", "0.05"])
        .output()
        .unwrap()
}

/// Each decision line's modes from and to, tolerance written and trade.
fn decisions(stdout: &str) -> Vec<(String, String, String, String)> {
    stdout
        .lines()
        .filter(|l| l.contains("nvme0n1 ") && l.contains(" → "))
        .map(|l| {
            let from = l
                .split(" → ")
                .next()
                .unwrap()
                .rsplit("nvme0n1 ")
                .next()
                .unwrap();
            let to = l.split(" → ").nth(1).unwrap().split(':').next().unwrap();
            let value = l
                .split("pm_qos_latency_tolerance_us = ")
                .nth(1)
                .map(|v| v.split([';', ',']).next().unwrap().to_string())
                .unwrap_or_default();
            let trade = l.rsplit("; ").next().unwrap().to_string();
            (from.to_string(), to.to_string(), value, trade)
        })
        .collect()
}

/// The hand-computed tolerance written and trade of a step from mode `from` to `to`.
fn expected(from: &str, to: &str) -> (&'static str, &'static str) {
    match (from, to) {
        // The manager first takes the drive, as it found it, to its performance mode.
        ("(as found)", "apst-off") => ("0", "trade unknown (from the setting as found)"),
        ("apst-off", "apst≤4000us") => (
            "4000",
            "saves 0.950 W, adds 2.000 ms wake latency (device figures)",
        ),
        ("apst-off", "apst≤45000us") => (
            "45000",
            "saves 0.995 W, adds 40.000 ms wake latency (device figures)",
        ),
        // 0.05 − 0.005 W; PS4's 40 ms exit less PS3's 2 ms.
        ("apst≤4000us", "apst≤45000us") => (
            "45000",
            "saves 0.045 W, adds 38.000 ms wake latency (device figures)",
        ),
        // Back up on an access: the tolerance 0 (APST off) costs the difference.
        ("apst≤4000us", "apst-off") | ("apst≤45000us", "apst-off") => ("0", ""),
        other => panic!("unexpected step {other:?}"),
    }
}

/// Every decision checked against [`expected`]; at least one step down.
fn check(out: &str) {
    let d = decisions(out);
    assert!(
        d.iter().any(|(_, to, _, _)| to.starts_with("apst≤")),
        "no step down in 1 s at knob 0: {out}"
    );
    for (from, to, value, trade) in &d {
        let (want_value, want_trade) = expected(from, to);
        assert_eq!(value, want_value, "{from} → {to}: {out}");
        if !want_trade.is_empty() {
            assert_eq!(trade, want_trade, "{from} → {to}: {out}");
        }
    }
}

#[test]
fn the_drives_own_figures_set_the_tolerances_and_the_trade() {
    let t = fixture();
    let before = fs::read(t.path().join(TOLERANCE)).unwrap();
    let o = power(t.path(), &["run", "--duration", "1"]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("nvme0n1: managing, modes apst-off → apst≤4000us → apst≤45000us"),
        "{err}"
    );
    check(&out);
    assert!(
        out.contains("would write") && !out.contains("wrote"),
        "{out}"
    );
    assert_eq!(fs::read(t.path().join(TOLERANCE)).unwrap(), before);
}

#[test]
fn applied_the_tolerance_is_written_and_put_back() {
    if !fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    {
        eprintln!("skipped: --apply needs root");
        return;
    }
    let t = fixture();
    let o = power(t.path(), &["run", "--apply", "--duration", "1"]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{err}");
    check(&out);
    assert!(out.contains("wrote"), "{out}{err}");
    assert_eq!(
        fs::read_to_string(t.path().join(TOLERANCE)).unwrap(),
        ORIGINAL
    );
    assert!(!t.path().join("var/lib/wattio/power-restore.json").exists());
}
