//! The disks in `wattio measure` and `wattio top`: each disk's row, its busy time and bytes,
//! and its energy interval or the reason it has none: a virtual disk (no energy of its own), a
//! SCSI disk that matches no shipped profile (the generic SATA SSD class, whose greatest
//! maximum is the Intel SSD DC S3700's 6 W and whose standby reports no idle power, so its
//! bounds are 0 and 6 W × the window while its state is unknown) and an SD card (no power
//! figures); the interval arithmetic itself is tested in wattio-devices.

use std::path::Path;
use std::process::Command;

mod common;
use common::BIN;

fn write(base: &Path, rel: &str, text: &str) {
    let p = base.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn stat_line(sectors_read: u64, sectors_written: u64, io_ticks_ms: u64) -> String {
    format!("10 0 {sectors_read} 5 20 0 {sectors_written} 9 0 {io_ticks_ms} 14 0 0 0 0 0 0\n")
}

/// A laptop fixture with a virtio disk and a SCSI disk (its stat file written by [`measure`]).
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path();
    wattio_fixture::intel_laptop(b).unwrap();
    write(b, "sys/block/vda/dev", "254:0\n");
    write(b, "sys/block/vda/stat", &stat_line(0, 0, 0));
    write(b, "sys/block/sdb/dev", "8:16\n");
    write(b, "sys/block/sdb/device/vendor", "SEAGATE\n");
    write(b, "sys/block/mmcblk0/dev", "179:0\n");
    write(b, "sys/block/mmcblk0/stat", &stat_line(0, 0, 0));
    dir
}

/// `wattio measure ARGS` of a command that rewrites the SCSI disk's stat file: 250 ms more
/// busy, 64 sectors read and 2048 written.
fn measure(root: &Path, args: &[&str]) -> std::process::Output {
    let stat = root.join("sys/block/sdb/stat");
    std::fs::write(&stat, stat_line(1000, 5000, 700)).unwrap();
    let script = format!(
        "sleep 0.3; printf '{}' > '{}'",
        stat_line(1064, 7048, 950).trim_end(),
        stat.display()
    );
    Command::new(BIN)
        .arg("measure")
        .args(["--source", "model", "--no-sync"])
        .args(args)
        .args(["--", "sh", "-c", &script])
        .env("WATTIO_ROOT", root)
        .env("WATTIO_KERNEL_IO", "off")
        .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .unwrap()
}

#[test]
fn measure_shows_each_disk_with_its_busy_time_and_why_it_has_no_interval() {
    let dir = fixture();
    let o = measure(dir.path(), &["--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let disks = v["disks"].as_array().expect("a disks array");
    assert_eq!(disks.len(), 3, "{v}");
    let (mmc, sdb, vda) = (&disks[0], &disks[1], &disks[2]);
    assert_eq!(sdb["device"], "sdb");
    assert_eq!(sdb["kind"], "SCSI");
    assert_eq!(sdb["busy_s"].as_f64(), Some(0.25));
    assert_eq!(sdb["read_bytes"].as_u64(), Some(64 * 512));
    assert_eq!(sdb["written_bytes"].as_u64(), Some(2048 * 512));
    let window = sdb["window_s"].as_f64().unwrap();
    assert_eq!(sdb["interval"]["lower_j"].as_f64(), Some(0.0), "{sdb}");
    let upper = sdb["interval"]["upper_j"].as_f64().unwrap();
    assert!((upper - 6.0 * window).abs() < 1e-9, "{sdb}");
    assert!(sdb["interval"]["central_j"].is_null(), "{sdb}");
    assert!(
        sdb["label"]
            .as_str()
            .unwrap()
            .starts_with("estimated (device-reported interval: generic class SATA SSD"),
        "{sdb}"
    );
    assert!(mmc.get("interval").is_none(), "{mmc}");
    assert!(
        mmc["reason"]
            .as_str()
            .unwrap()
            .starts_with("no power figures"),
        "{mmc}"
    );
    assert_eq!(vda["device"], "vda");
    assert_eq!(vda["busy_s"].as_f64(), Some(0.0));
    assert_eq!(vda["reason"], "a virtual disk: its energy is the host's");
    assert!(vda.get("interval").is_none() && vda.get("split").is_none());

    let o = measure(dir.path(), &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("disk vda (virtual (virtio disk)) busy 0.00 s of")
            && text.contains("no interval: a virtual disk: its energy is the host's"),
        "{text}"
    );
    assert!(
        text.contains("disk sdb (SCSI) busy 0.25 s of")
            && text.contains("read 32.0 KiB written 1.0 MiB   [0.000, ")
            && text.contains("no interval: no power figures"),
        "{text}"
    );
}

#[test]
fn measure_csv_gives_the_disks_summed_interval_and_leaves_the_central_estimate_empty() {
    let dir = fixture();
    let csv = dir.path().join("out.csv");
    let o = measure(
        dir.path(),
        &["--runs", "2", "--export-csv", csv.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut r = csv::Reader::from_path(&csv).unwrap();
    let head: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        &head[head.len() - 4..],
        [
            "disks_lower_mean_j",
            "disks_central_mean_j",
            "disks_upper_mean_j",
            "disks_label"
        ]
    );
    let row = r.records().next().unwrap().unwrap();
    let n = row.len();
    let (lower, central, upper, label) = (&row[n - 4], &row[n - 3], &row[n - 2], &row[n - 1]);
    assert_eq!((lower, central), ("0", ""), "{row:?}");
    assert!(upper.parse::<f64>().unwrap() > 0.0, "{row:?}");
    assert!(label.starts_with("sdb: estimated"), "{row:?}");
}

#[test]
fn top_shows_this_machines_disks_each_with_an_interval_or_a_reason() {
    let o = Command::new(BIN)
        .args([
            "top",
            "--once",
            "--json",
            "--interval",
            "300ms",
            "--source",
            "model",
        ])
        .env_remove("WATTIO_ROOT")
        .env("WATTIO_KERNEL_IO", "off")
        .env("WATTIO_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Every disk of the common kinds this machine has is listed, and only its block devices.
    let names: Vec<String> = std::fs::read_dir("/sys/block")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let common_kind = |n: &&String| ["sd", "nvme", "vd", "xvd"].iter().any(|p| n.starts_with(p));
    let disks = v["disks"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let shown: Vec<&str> = disks
        .iter()
        .map(|d| d["device"].as_str().unwrap())
        .collect();
    for n in names.iter().filter(common_kind) {
        assert!(shown.contains(&n.as_str()), "{n} missing: {v}");
    }
    for d in disks {
        assert!(names.iter().any(|n| d["device"] == n.as_str()), "{d}");
        let w = d["window_s"].as_f64().unwrap();
        assert!(w > 0.2 && w < 5.0, "{d}");
        match d.get("interval") {
            Some(i) => {
                assert!(
                    d["label"].as_str().unwrap().starts_with("estimated ("),
                    "{d}"
                );
                assert!(i["lower_j"].as_f64() <= i["upper_j"].as_f64(), "{d}");
            }
            None => assert!(d["reason"].is_string(), "{d}"),
        }
    }
}
