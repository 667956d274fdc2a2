//! The readers end to end on a fixture tree: an NVMe stand-in with five power states moved
//! under APST, a SATA disk spinning down to standby and back up, runtime-PM residency, and
//! malformed Identify data, drives no profile describes getting their labelled generic class —
//! all read through `open_reader` as a meter would.

use std::fs;
use std::path::Path;
use std::time::Duration;

use wattio_devices::nvme::{ApstEntry, ApstTable, StandInController};
use wattio_devices::{open_reader, storage_devices, PowerState, StorageKind};
use wattio_energy::SysRoot;

fn write(base: &Path, rel: &str, text: &str) {
    let p = base.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn state(
    max_w: f64,
    idle_w: Option<f64>,
    active_w: Option<f64>,
    nops: bool,
    enlat: u64,
    exlat: u64,
) -> PowerState {
    PowerState {
        id: 0,
        name: String::new(),
        max_w,
        idle_w,
        active_w,
        non_operational: nops,
        entry_latency_us: enlat,
        exit_latency_us: exlat,
    }
}

/// A drive with five states: three operational, two non-operational idle states with
/// millisecond latencies; APST takes it to PS3 after 100 ms idle and to PS4 after 2 s.
fn five_state_drive() -> StandInController {
    StandInController {
        model: "WATTIO FIVE-STATE NVME".into(),
        states: vec![
            state(8.0, None, Some(7.5), false, 0, 0),
            state(6.0, None, None, false, 0, 0),
            state(3.5, None, None, false, 0, 0),
            state(0.05, Some(0.05), None, true, 1_000, 5_000),
            state(0.005, Some(0.005), None, true, 5_000, 40_000),
        ],
        current: 0,
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
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// sysfs and /dev for nvme0n1 (controller nvme0) and sda (SATA, ST3160827AS on host2).
fn fixture(base: &Path) {
    write(base, "sys/block/nvme0n1/dev", "259:0\n");
    write(base, "sys/block/nvme0n1/queue/rotational", "0\n");
    fs::create_dir_all(base.join("sys/class/nvme/nvme0/nvme0n1")).unwrap();
    let pci = base.join("sys/devices/pci0000:00/0000:00:1d.0");
    write(&pci, "power/runtime_status", "active\n");
    write(&pci, "power/runtime_active_time", "120000\n");
    write(&pci, "power/runtime_suspended_time", "30000\n");
    std::os::unix::fs::symlink(&pci, base.join("sys/class/nvme/nvme0/device")).unwrap();
    write(base, "sys/block/sda/dev", "8:0\n");
    write(base, "sys/block/sda/device/vendor", "ATA     \n");
    write(base, "sys/block/sda/device/model", "ST3160827AS\n");
    write(base, "sys/block/sda/queue/rotational", "1\n");
    write(
        base,
        "sys/class/scsi_host/host2/link_power_management_policy",
        "med_power_with_dipm\n",
    );
    fs::create_dir_all(base.join("dev")).unwrap();
    five_state_drive().write(&base.join("dev/nvme0")).unwrap();
    wattio_devices::ata::write_stand_in(&base.join("dev/sda"), 0xff).unwrap();
}

#[test]
fn an_nvme_drive_moves_through_its_five_states_under_apst() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let root = SysRoot::new(t.path());
    let devices = storage_devices(&root).unwrap();
    let nvme = devices.iter().find(|d| d.name == "nvme0n1").unwrap();
    assert_eq!(
        nvme.kind,
        StorageKind::Nvme {
            controller: "nvme0".into()
        }
    );
    let mut reader = open_reader(&root, nvme).unwrap().unwrap();
    let f = reader.figures().clone();
    assert_eq!(f.states.len(), 5);
    assert!(close(f.states[0].max_w, 8.0) && close(f.states[0].active_w.unwrap(), 7.5));
    assert_eq!(f.states[0].idle_w, None);
    assert!(close(f.states[2].max_w, 3.5) && !f.states[2].non_operational);
    assert!(f.states[3].non_operational && close(f.states[3].idle_w.unwrap(), 0.05));
    assert_eq!(
        (f.states[4].entry_latency_us, f.states[4].exit_latency_us),
        (5_000, 40_000)
    );
    assert!(close(f.states[4].max_w, 0.005));
    assert_eq!(reader.min_interval(), Duration::from_secs(1));

    let dev = t.path().join("dev/nvme0");
    assert_eq!(reader.current_state().unwrap(), Some(0));
    // APST moves the drive to PS3: within the second the reader does not ask again.
    StandInController::set_state(&dev, 3).unwrap();
    assert_eq!(reader.current_state().unwrap(), Some(0));
    std::thread::sleep(Duration::from_millis(1050));
    assert_eq!(reader.current_state().unwrap(), Some(3));
    StandInController::set_state(&dev, 4).unwrap();
    std::thread::sleep(Duration::from_millis(1050));
    assert_eq!(reader.current_state().unwrap(), Some(4));

    // The APST table as the drive reports it, and a state past NPSS is refused.
    let c = wattio_devices::nvme::NvmeController::open(&root, "nvme0").unwrap();
    assert!(c.is_stand_in());
    let apst = c.apst().unwrap();
    assert!(apst.enabled);
    assert_eq!(
        apst.summary(),
        "ps0→ps3 after 100 ms, ps3→ps4 after 2000 ms"
    );
    StandInController::set_state(&dev, 7).unwrap();
    std::thread::sleep(Duration::from_millis(1050));
    let e = reader.current_state().unwrap_err().to_string();
    assert!(e.contains("power state 7") && !e.contains('\n'), "{e}");

    let pm = wattio_devices::runtime_pm::storage_runtime_pm(&root, nvme);
    assert_eq!(pm.len(), 1);
    assert_eq!(
        (pm[0].active_ms, pm[0].suspended_ms),
        (Some(120_000), Some(30_000))
    );
}

#[test]
fn a_sata_disk_spins_down_to_standby_and_back_up() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let root = SysRoot::new(t.path());
    let devices = storage_devices(&root).unwrap();
    let sda = devices.iter().find(|d| d.name == "sda").unwrap();
    let mut reader = open_reader(&root, sda).unwrap().unwrap();
    let f = reader.figures();
    // Seagate's Table 4 figures, as the profile gives them.
    assert_eq!(
        f.states.iter().map(|s| s.max_w).collect::<Vec<_>>(),
        [12.5, 7.5, 1.0]
    );
    assert!(f.source.label().contains("Barracuda 7200.7"));
    let dev = t.path().join("dev/sda");
    assert_eq!(reader.current_state().unwrap(), Some(0));
    wattio_devices::ata::write_stand_in(&dev, 0x00).unwrap();
    assert_eq!(reader.current_state().unwrap(), Some(2));
    wattio_devices::ata::write_stand_in(&dev, 0x80).unwrap();
    assert_eq!(reader.current_state().unwrap(), Some(1));
    wattio_devices::ata::write_stand_in(&dev, 0xff).unwrap();
    assert_eq!(reader.current_state().unwrap(), Some(0));
    assert_eq!(
        wattio_devices::ata::link_power_policy(&root, "host2").as_deref(),
        Some("med_power_with_dipm")
    );
}

/// A SATA disk `name` with `model` and `rotational` beside the fixture's.
fn add_sata_disk(base: &Path, name: &str, dev: &str, model: &str, rotational: bool) {
    write(base, &format!("sys/block/{name}/dev"), &format!("{dev}\n"));
    write(
        base,
        &format!("sys/block/{name}/device/vendor"),
        "ATA     \n",
    );
    write(
        base,
        &format!("sys/block/{name}/device/model"),
        &format!("{model}\n"),
    );
    let r = if rotational { "1\n" } else { "0\n" };
    write(base, &format!("sys/block/{name}/queue/rotational"), r);
    wattio_devices::ata::write_stand_in(&base.join(format!("dev/{name}")), 0xff).unwrap();
}

#[test]
fn drives_no_profile_describes_get_their_generic_class_envelope() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    // QEMU's emulated AHCI disk says it spins; a SATA SSD no profile names does not.
    add_sata_disk(t.path(), "sdb", "8:16", "QEMU HARDDISK", true);
    add_sata_disk(t.path(), "sdc", "8:32", "Samsung SSD 870 EVO 1TB", false);
    let root = SysRoot::new(t.path());
    let devices = storage_devices(&root).unwrap();
    let figures = |name: &str| {
        let dev = devices.iter().find(|d| d.name == name).unwrap();
        open_reader(&root, dev).unwrap().unwrap().figures().clone()
    };
    let bounds = |f: &wattio_devices::PowerFigures| -> Vec<(f64, Option<f64>)> {
        f.states.iter().map(|s| (s.max_w, s.idle_w)).collect()
    };
    // By hand from the shipped TOML files, per state (active, idle, standby) the greatest max and
    // the least idle. HDDs: Barracuda 7200.7 Table 4 (12.5, 7.5, 1.0; idle 7.5, 7.5, 1.0),
    // DB35.4 Table 2 (7.97, 5.33, 1.06; idle 5.33, 5.33, 1.06), Laptop Ultrathin Table 3 (1.70,
    // 1.10, 0.18; idle 0.47, 0.47, 0.18), Travelstar 5K320 Table 14 (2.2, 1.7, 0.2; idle 0.55,
    // 0.55, 0.1).
    let qemu = figures("sdb");
    assert_eq!(
        bounds(&qemu),
        [(12.5, Some(0.47)), (7.5, Some(0.47)), (1.06, Some(0.1))]
    );
    let label = qemu.source.label();
    assert!(
        label.starts_with("generic class HDD, 2.5- or 3.5-inch (size not known) (envelope of"),
        "{label}"
    );
    // SSDs: DC S4500 (5.6, 1.1; idle 1.1), DC S3700 (6 W, 650 mW), E 5410s (2.2 W, 600 mW);
    // standby has no figure in any: at most the idle figure, at least 0.
    let ssd = figures("sdc");
    assert_eq!(
        bounds(&ssd),
        [(6.0, Some(0.6)), (1.1, Some(0.6)), (1.1, None)]
    );
    assert!(ssd
        .source
        .label()
        .starts_with("generic class SATA SSD (envelope of"));
    // The profiled disk keeps its own datasheet's figures, not the class's.
    assert!(figures("sda")
        .source
        .label()
        .starts_with("profile seagate-barracuda-7200.7"));
}

#[test]
fn malformed_identify_data_is_a_one_line_error() {
    let t = tempfile::tempdir().unwrap();
    fixture(t.path());
    let root = SysRoot::new(t.path());
    let nvme = storage_devices(&root)
        .unwrap()
        .into_iter()
        .find(|d| d.name == "nvme0n1")
        .unwrap();
    let dev = t.path().join("dev/nvme0");
    fs::write(&dev, b"").unwrap();
    let e = open_reader(&root, &nvme).err().unwrap().to_string();
    assert!(e.starts_with("nvme0:") && !e.contains('\n'), "{e}");
    let mut bytes = five_state_drive().to_bytes();
    bytes[263] = 32; // NPSS 32: 33 states, one more than exist
    fs::write(&dev, &bytes).unwrap();
    let e = open_reader(&root, &nvme).err().unwrap().to_string();
    assert!(e.contains("33 power states") && !e.contains('\n'), "{e}");
    // A virtual disk has no reader: its energy is the host's.
    write(t.path(), "sys/block/vda/dev", "254:0\n");
    let vda = storage_devices(&root)
        .unwrap()
        .into_iter()
        .find(|d| d.name == "vda")
        .unwrap();
    assert!(open_reader(&root, &vda).unwrap().is_none());
}
