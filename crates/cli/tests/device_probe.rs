//! `wattio probe` lists the I/O devices with what each says of its own power, on a fixture
//! tree under WATTIO_ROOT: an NVMe stand-in with five states and APST, a SATA disk in standby
//! with a shipped profile, one without a profile, a virtual disk, an NVMe controller that
//! cannot be read, and three network interfaces.

mod common;

use std::fs;
use std::path::Path;

use wattio_devices::nvme::{ApstEntry, ApstTable, StandInController};
use wattio_devices::PowerState;

fn write(base: &Path, rel: &str, text: &str) {
    let p = base.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn state(max_w: f64, idle_w: Option<f64>, nops: bool, enlat: u64, exlat: u64) -> PowerState {
    PowerState {
        id: 0,
        name: String::new(),
        max_w,
        idle_w,
        active_w: None,
        non_operational: nops,
        entry_latency_us: enlat,
        exit_latency_us: exlat,
    }
}

fn fixture(base: &Path) {
    for (name, dev) in [("nvme0n1", "259:0"), ("nvme1n1", "259:1")] {
        write(base, &format!("sys/block/{name}/dev"), &format!("{dev}\n"));
        fs::create_dir_all(base.join(format!("sys/class/nvme/{}/{name}", &name[..5]))).unwrap();
    }
    for (name, model, dev) in [
        ("sda", "ST3160827AS", "8:0"),
        ("sdb", "WDC WD40EFRX-68N32N0", "8:16"),
    ] {
        write(base, &format!("sys/block/{name}/dev"), &format!("{dev}\n"));
        write(base, &format!("sys/block/{name}/device/vendor"), "ATA\n");
        write(
            base,
            &format!("sys/block/{name}/device/model"),
            &format!("{model}\n"),
        );
        write(base, &format!("sys/block/{name}/queue/rotational"), "1\n");
    }
    write(base, "sys/block/vda/dev", "254:0\n");
    fs::create_dir_all(base.join("dev")).unwrap();
    StandInController {
        model: "WATTIO FIVE-STATE NVME".into(),
        states: vec![
            state(8.0, None, false, 0, 0),
            state(6.0, None, false, 0, 0),
            state(3.5, None, false, 0, 0),
            state(0.05, Some(0.05), true, 1_000, 5_000),
            state(0.005, Some(0.005), true, 5_000, 40_000),
        ],
        current: 3,
        apst: ApstTable {
            enabled: true,
            entries: vec![
                ApstEntry {
                    from: 0,
                    to: 3,
                    idle_ms: 100,
                },
                ApstEntry {
                    from: 3,
                    to: 4,
                    idle_ms: 2_000,
                },
            ],
        },
    }
    .write(&base.join("dev/nvme0"))
    .unwrap();
    // nvme1's stand-in is empty: it cannot be read, and says so in its row.
    fs::write(base.join("dev/nvme1"), b"").unwrap();
    wattio_devices::ata::write_stand_in(&base.join("dev/sda"), 0x00).unwrap();
    wattio_devices::ata::write_stand_in(&base.join("dev/sdb"), 0xff).unwrap();
    // Network: loopback (no device), a physical e100 NIC at 100 Mb/s, a virtio NIC.
    write(base, "sys/class/net/lo/operstate", "unknown\n");
    for (name, driver, speed) in [("eth0", "e100", "100"), ("eth1", "virtio_net", "-1")] {
        let dir = base.join(format!("sys/class/net/{name}"));
        write(&dir, "operstate", "up\n");
        write(&dir, "speed", &format!("{speed}\n"));
        write(&dir, "statistics/rx_bytes", "1000\n");
        write(&dir, "statistics/tx_bytes", "2000\n");
        let drv = base.join(format!("sys/bus/drivers/{driver}"));
        fs::create_dir_all(&drv).unwrap();
        fs::create_dir_all(dir.join("device")).unwrap();
        std::os::unix::fs::symlink(&drv, dir.join("device/driver")).unwrap();
    }
}

#[test]
fn probe_lists_each_device_with_its_power_data_and_reasons() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let out = common::wattio(Some(t.path()), &["probe"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let section = text
        .split("storage (what each device says")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    for expected in [
        "nvme0n1 NVMe (controller nvme0)  WATTIO FIVE-STATE NVME",
        "figures: the drive's NVMe power-state descriptors",
        "ps0                        max 8.0000 W  idle not reported",
        "ps4                        max 0.0050 W  idle 0.0050 W  active not reported  entry 5000 µs  exit 40000 µs  non-operational",
        "current state: ps3",
        "APST: on; ps0→ps3 after 100 ms, ps3→ps4 after 2000 ms",
        "sda SATA  ST3160827AS",
        "figures: profile seagate-barracuda-7200.7-ncq-160gb",
        "standby                    max 1.0000 W",
        "current state: standby",
        "figures: generic class HDD, 2.5- or 3.5-inch (size not known) (envelope of the shipped profiles:",
        "current state: active/idle",
        "vda virtual: virtio disk",
        "its energy is the host's",
        "eth0 up, 100 Mb/s, e100",
        "power [0.0000 W, 0.58 W]",
        "eth1 up, no link speed, virtio_net",
        "a virtual NIC (driver virtio_net): its energy belongs to the host",
        "lo unknown, no link speed, no driver",
    ] {
        assert!(section.contains(expected), "missing `{expected}` in:\n{section}");
    }
    let unreadable: Vec<&str> = section
        .lines()
        .filter(|l| l.contains("cannot read: nvme1:"))
        .collect();
    assert_eq!(unreadable.len(), 1, "{section}");
    assert!(unreadable[0].contains("has no 4096 bytes"), "{section}");
}

#[test]
fn probe_json_carries_the_devices_beside_the_energy_report() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let out = common::wattio(Some(t.path()), &["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v.get("mechanisms").is_some(),
        "the energy report is still there"
    );
    let storage = v["storage"].as_array().unwrap();
    let nvme = storage
        .iter()
        .find(|d| d["device"]["name"] == "nvme0n1")
        .unwrap();
    assert_eq!(nvme["figures"]["states"].as_array().unwrap().len(), 5);
    assert_eq!(nvme["figures"]["states"][0]["max_w"], 8.0);
    assert_eq!(nvme["current_state"], "ps3");
    assert_eq!(nvme["apst"]["enabled"], true);
    let sda = storage
        .iter()
        .find(|d| d["device"]["name"] == "sda")
        .unwrap();
    assert_eq!(sda["figures"]["states"][1]["idle_w"], 7.5);
    let eth0 = v["network_interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "eth0")
        .unwrap();
    assert_eq!(eth0["speed_mbps"], 100);
    assert_eq!(eth0["figures"]["max_w"], 0.58);
}
