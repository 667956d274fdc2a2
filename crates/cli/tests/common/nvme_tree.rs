//! A stand-in NVMe drive in a fixture tree: namespace nvme0n1 of controller nvme0 behind PCIe
//! function 0000:00:1d.0 in sysfs, and `/dev/nvme0` a regular file in the format of
//! wattio-devices' `nvme` module answering with the given power states.

use std::fs;
use std::path::Path;

use wattio_devices::nvme::{ApstTable, StandInController};
use wattio_devices::PowerState;

/// The PCIe function, controller and namespace directories, relative to the root.
pub const PCI: &str = "sys/devices/pci0000:00/0000:00:1d.0";
pub const CTRL: &str = "sys/devices/pci0000:00/0000:00:1d.0/nvme/nvme0";
pub const NS: &str = "sys/devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1";

/// Writes `text` at `rel` under `base`, making its directories.
pub fn write(base: &Path, rel: &str, text: &str) {
    let p = base.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// Links `link` to `target`, both relative to `base`.
pub fn symlink(base: &Path, target: &str, link: &str) {
    let l = base.join(link);
    fs::create_dir_all(l.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(base.join(target), l).unwrap();
}

/// The drive under `base`, in state 0 of `states`, APST enabled as `apst`, no I/O since boot
/// but one read.
pub fn stand_in_nvme(base: &Path, states: Vec<PowerState>, apst: bool) {
    let b = base;
    write(b, &format!("{NS}/dev"), "259:0\n");
    write(
        b,
        &format!("{NS}/stat"),
        "10 0 80 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n",
    );
    write(b, &format!("{NS}/queue/rotational"), "0\n");
    write(b, &format!("{CTRL}/model"), "WATTIO STAND-IN NVME\n");
    symlink(b, NS, "sys/block/nvme0n1");
    symlink(b, NS, "sys/class/block/nvme0n1");
    symlink(b, CTRL, "sys/class/nvme/nvme0");
    symlink(b, PCI, &format!("{CTRL}/device"));
    fs::create_dir_all(b.join("dev")).unwrap();
    StandInController {
        model: "WATTIO STAND-IN NVME".into(),
        states,
        current: 0,
        apst: ApstTable {
            enabled: apst,
            entries: Vec::new(),
        },
    }
    .write(&b.join("dev/nvme0"))
    .unwrap();
}
