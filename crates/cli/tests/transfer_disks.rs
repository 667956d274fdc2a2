//! `wattio transfer`'s summary gives the disks under DEST with their energy interval over the
//! run and per GB received, or why there is none: real transfers from a local `wattio serve`,
//! into a directory of this machine's own file system (on a virtual disk here: the reason), and
//! under a fixture root whose `/sys/dev/block` maps that file system's device number to a
//! stand-in NVMe drive with power figures (an interval, checked by hand against its figures).

mod common;

use common::{serve_rate_limited, Reaper, BIN};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

use wattio_devices::nvme::{ApstTable, StandInController};
use wattio_devices::PowerState;

/// Two files, 3 MB in all.
fn dataset(dir: &Path) -> u64 {
    let mut total = 0;
    for (name, n) in [("a.bin", 2_000_000usize), ("b.bin", 1_000_000)] {
        let bytes: Vec<u8> = (0..n).map(|i| (i * 13 % 251) as u8).collect();
        std::fs::write(dir.join(name), bytes).unwrap();
        total += n as u64;
    }
    total
}

/// The dataset (its directory and server, dropped together), its size and the server's port.
fn served() -> ((tempfile::TempDir, Reaper), u64, u16) {
    let src = tempfile::tempdir().unwrap();
    let bytes = dataset(src.path());
    let (server, port) = serve_rate_limited(src.path(), "80mbit");
    ((src, server), bytes, port)
}

/// `wattio transfer` of the server's files into `dest`, under `root` (or the real machine).
fn transfer(port: u16, dest: &Path, root: Option<&Path>, extra: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    c.arg("transfer")
        .arg(format!("http://127.0.0.1:{port}/"))
        .arg(dest)
        .args(["--cpu-actuator", "none", "--cpufreq", "off"])
        .args([
            "--sla",
            "max-throughput",
            "--interval",
            "100ms",
            "--rtt",
            "1ms",
        ])
        .arg("--no-progress")
        .args(extra)
        .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1");
    match root {
        Some(r) => c.env("WATTIO_ROOT", r),
        None => c.env_remove("WATTIO_ROOT"),
    };
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).expect("one JSON object")
}

/// `major:minor` of the file system holding `path`, decoded from `st_dev` as glibc's
/// `gnu_dev_major`/`gnu_dev_minor` do.
fn dev_number(path: &Path) -> (u64, u64) {
    let d = std::fs::metadata(path).unwrap().dev();
    let major = ((d >> 8) & 0xfff) | ((d >> 32) & !0xfff);
    let minor = (d & 0xff) | ((d >> 12) & !0xff);
    (major, minor)
}

/// The whole disk under `path` on this machine, read from sysfs here: its name and whether it
/// is a virtio disk; `None` where the file system has no block device.
fn disk_under(path: &Path) -> Option<(String, bool)> {
    let (major, minor) = dev_number(path);
    if major == 0 {
        return None;
    }
    let real = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let disk = if real.join("partition").exists() {
        real.parent().unwrap().to_path_buf()
    } else {
        real
    };
    let virtio = disk
        .components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with("virtio"));
    Some((
        disk.file_name().unwrap().to_string_lossy().into_owned(),
        virtio,
    ))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The per-GB interval is the run's interval times 1e9 over the summary's own bytes.
fn check_per_gb(disk: &serde_json::Value, bytes: u64) {
    let (i, g) = (&disk["interval"], &disk["per_gb"]);
    let k = 1e9 / bytes as f64;
    for f in ["lower_j", "central_j", "upper_j"] {
        match i[f].as_f64() {
            Some(j) => assert!(close(g[f].as_f64().unwrap(), j * k), "{f}: {disk}"),
            None => assert!(g[f].is_null(), "{disk}"),
        }
    }
}

#[test]
fn the_destination_disk_of_this_machine_gives_its_interval_or_why_it_has_none() {
    let (_served, bytes, port) = served();
    let dest = tempfile::tempdir().unwrap();
    let v = json(&transfer(port, dest.path(), None, &["--json"]));
    assert_eq!(v["bytes"].as_u64(), Some(bytes));
    let d = &v["dest_disks"];
    match disk_under(dest.path()) {
        None => {
            assert!(d["disks"].as_array().unwrap().is_empty(), "{d}");
            assert!(d["note"].as_str().unwrap().starts_with("none: "), "{d}");
        }
        Some((name, virtio)) => {
            let disks = d["disks"].as_array().unwrap();
            assert_eq!(disks.len(), 1, "{d}");
            let disk = &disks[0];
            assert_eq!(disk["device"], name.as_str(), "{d}");
            // the window opens before the first byte and closes after the last sync
            assert!(disk["window_s"].as_f64() >= v["seconds"].as_f64(), "{v}");
            if virtio {
                assert_eq!(disk["reason"], "a virtual disk: its energy is the host's");
                assert!(disk.get("interval").is_none() && disk.get("per_gb").is_none());
            } else if disk.get("interval").is_some() {
                check_per_gb(disk, bytes);
            } else {
                assert!(disk["reason"].is_string(), "{disk}");
            }
        }
    }
    assert!(d.get("window_note").is_none(), "synced by default: {d}");

    // The text summary says the same, and with --fsync off it says what the window may miss.
    let dest = tempfile::tempdir().unwrap();
    let o = transfer(port, dest.path(), None, &["--fsync", "off"]);
    let text = String::from_utf8_lossy(&o.stdout);
    match disk_under(dest.path()) {
        Some((name, true)) => assert!(
            text.contains(&format!(
                "destination disk {name} (virtual (virtio disk)): no interval: a virtual disk: its energy is the host's"
            )),
            "{text}"
        ),
        _ => assert!(text.contains("destination disk"), "{text}"),
    }
    assert!(
        text.contains("destination disk: note: --fsync off: the data was not synced"),
        "{text}"
    );
}

#[test]
fn a_destination_on_tmpfs_has_no_disk() {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    if !mounts
        .lines()
        .any(|l| l.starts_with("tmpfs /dev/shm tmpfs"))
    {
        eprintln!("skipped: no tmpfs at /dev/shm on this machine");
        return;
    }
    let (_served, _, port) = served();
    let dest = tempfile::tempdir_in("/dev/shm").unwrap();
    let v = json(&transfer(port, dest.path(), None, &["--json"]));
    let d = &v["dest_disks"];
    assert!(d["disks"].as_array().unwrap().is_empty(), "{d}");
    assert_eq!(
        d["note"],
        "none: DEST is on no block device (tmpfs, overlay or a network file system): no disk energy of its own"
    );
}

fn write(base: &Path, rel: &str, text: &str) {
    let p = base.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn state(max_w: f64, idle_w: f64, active_w: Option<f64>, nops: bool) -> PowerState {
    PowerState {
        id: 0,
        name: String::new(),
        max_w,
        idle_w: Some(idle_w),
        active_w,
        non_operational: nops,
        entry_latency_us: 1_000,
        exit_latency_us: 5_000,
    }
}

/// The stand-in drive's states: (max, idle) W of PS0 and PS1.
const PS0: (f64, f64) = (8.0, 2.5);
const PS1: (f64, f64) = (0.05, 0.05);

/// A fixture root whose `/sys/dev/block/MAJ:MIN` (the real number of `dest`'s file system)
/// is a stand-in NVMe drive in PS0 with two power states.
fn nvme_root(dest: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path();
    wattio_fixture::intel_laptop(b).unwrap();
    write(b, "sys/block/nvme0n1/dev", "259:0\n");
    write(
        b,
        "sys/block/nvme0n1/stat",
        "10 0 80 5 20 0 160 9 0 30 14 0 0 0 0 0 0\n",
    );
    std::fs::create_dir_all(b.join("sys/class/nvme/nvme0/nvme0n1")).unwrap();
    std::fs::create_dir_all(b.join("sys/class/block/nvme0n1")).unwrap();
    let (major, minor) = dev_number(dest);
    std::fs::create_dir_all(b.join("sys/dev/block")).unwrap();
    std::os::unix::fs::symlink(
        "../../block/nvme0n1",
        b.join(format!("sys/dev/block/{major}:{minor}")),
    )
    .unwrap();
    std::fs::create_dir_all(b.join("dev")).unwrap();
    StandInController {
        model: "WATTIO TWO-STATE NVME".into(),
        states: vec![
            state(PS0.0, PS0.1, Some(6.0), false),
            state(PS1.0, PS1.1, None, true),
        ],
        current: 0,
        apst: ApstTable {
            enabled: false,
            entries: vec![],
        },
    }
    .write(&b.join("dev/nvme0"))
    .unwrap();
    dir
}

#[test]
fn a_stand_in_nvme_under_dest_gives_an_interval_and_its_share_per_gb() {
    let (_served, bytes, port) = served();
    let dest = tempfile::tempdir().unwrap();
    if dev_number(dest.path()).0 == 0 {
        eprintln!("skipped: the temporary directory is on no block device here");
        return;
    }
    let root = nvme_root(dest.path());
    let out = transfer(port, dest.path(), Some(root.path()), &["--json"]);
    let v = json(&out);
    assert_eq!(v["bytes"].as_u64(), Some(bytes));
    let d = &v["dest_disks"];
    let disks = d["disks"].as_array().unwrap();
    assert_eq!(disks.len(), 1, "{d}");
    let disk = &disks[0];
    assert_eq!(disk["device"], "nvme0n1");
    assert_eq!(disk["kind"], "NVMe");
    let label = disk["label"].as_str().unwrap();
    assert!(
        label.starts_with(
            "estimated (device-reported interval: the drive's NVMe power-state descriptors"
        ),
        "{label}"
    );
    let i = &disk["interval"];
    let (lower, upper) = (
        i["lower_j"].as_f64().unwrap(),
        i["upper_j"].as_f64().unwrap(),
    );
    let w = disk["window_s"].as_f64().unwrap();
    assert!(w >= v["seconds"].as_f64().unwrap(), "{v}");
    // By hand from the stand-in's figures: at least the least idle power (PS1's) and at most
    // the greatest maximum (PS0's) over the window; it stays in PS0, so its idle power there.
    let tol = 1e-6;
    assert!(lower >= PS1.1 * w - tol, "{lower} < {} × {w}", PS1.1);
    assert!(upper <= PS0.0 * w + tol, "{upper} > {} × {w}", PS0.0);
    assert!(lower >= PS0.1 * w * 0.99 - tol, "PS0 idle × window: {i}");
    let central = i["central_j"].as_f64().unwrap();
    assert!(lower <= central && central <= upper, "{i}");
    check_per_gb(disk, bytes);

    // `wattio report` shows the disk in the transfer's section; an older summary, without
    // the disks, still loads.
    let results = tempfile::tempdir().unwrap();
    std::fs::write(results.path().join("new.json"), &out.stdout).unwrap();
    let mut old = v.clone();
    old.as_object_mut().unwrap().remove("dest_disks");
    std::fs::write(results.path().join("old.json"), old.to_string()).unwrap();
    let page = results.path().join("report.html");
    let o = common::wattio(
        None,
        &[
            "report",
            results.path().to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("destination disk nvme0n1 (NVMe)").count(), 1);
    assert!(
        html.contains("per GB received"),
        "no per-GB figure in the page"
    );
}
