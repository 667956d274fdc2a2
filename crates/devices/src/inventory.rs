//! The machine's block devices, by protocol, read from sysfs (kernel
//! Documentation/ABI/stable/sysfs-block).
//!
//! Stacked and memory-backed devices (loop, zram, device-mapper, md, optical drives) are left
//! out: their I/O lands on a device listed here. A virtual disk (virtio, Xen, a cloud volume)
//! is listed as such: it has no power of its own, its energy belongs to the host.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wattio_energy::SysRoot;

use crate::error::DeviceError;

/// How a block device is reached, which decides what it can say of its power.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StorageKind {
    /// An NVMe namespace of controller `controller` (`nvme0`, its character device
    /// `/dev/nvme0`).
    Nvme {
        /// The controller's name.
        controller: String,
    },
    /// A SATA disk behind libata (vendor `ATA`), on SCSI host `host` (`host0`), whose
    /// `link_power_management_policy` is that host's.
    Ata {
        /// The SCSI host, where sysfs shows it.
        host: Option<String>,
    },
    /// Any other SCSI disk (SAS, a USB bridge).
    Scsi {
        /// The SCSI host, where sysfs shows it.
        host: Option<String>,
    },
    /// A virtual disk: its energy is the host's.
    Virtual {
        /// What it is (`virtio disk`, `Xen disk`, `cloud volume (Amazon Elastic Block Store)`).
        what: String,
    },
    /// A block device of another kind (`mmcblk0`): listed, without power figures.
    Other,
}

impl std::fmt::Display for StorageKind {
    /// `NVMe (controller nvme0)`, `SATA (host0)`, `virtual: virtio disk`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = |h: &Option<String>| h.as_ref().map(|h| format!(" ({h})")).unwrap_or_default();
        match self {
            StorageKind::Nvme { controller } => write!(f, "NVMe (controller {controller})"),
            StorageKind::Ata { host: h } => write!(f, "SATA{}", host(h)),
            StorageKind::Scsi { host: h } => write!(f, "SCSI{}", host(h)),
            StorageKind::Virtual { what } => write!(f, "virtual: {what}"),
            StorageKind::Other => write!(f, "other"),
        }
    }
}

/// One block device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageDevice {
    /// Its kernel name (`nvme0n1`, `sda`, `vda`).
    pub name: String,
    /// Its `major:minor`, as `io.stat` names it.
    pub dev: String,
    /// How it is reached.
    pub kind: StorageKind,
    /// Its model as sysfs gives it (trimmed), where it does.
    pub model: Option<String>,
    /// Whether the kernel takes it for a spinning disk (`queue/rotational`).
    pub rotational: bool,
    /// Whether it holds the root file system (directly, through a partition, or below
    /// device-mapper or md).
    pub holds_root: bool,
    /// Its directory, `/sys/block/NAME` under the root.
    pub sysfs: PathBuf,
}

impl StorageDevice {
    /// Whether its energy is the host's (a virtual disk).
    pub fn is_virtual(&self) -> bool {
        matches!(self.kind, StorageKind::Virtual { .. })
    }
}

/// Names of block devices that are not devices of their own.
fn is_stacked_or_memory(name: &str) -> bool {
    ["loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd", "zd"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Cloud volumes recognised by their model string (what each provider's documentation shows
/// as the disk's model).
const CLOUD_MODELS: &[&str] = &[
    "Amazon Elastic Block Store",
    "PersistentDisk",
    "Google EphemeralDisk",
    "Virtual Disk",
    "VMware Virtual",
    "Virtual disk",
];

/// A sysfs file's text, trimmed; `None` where it is absent, unreadable or empty.
pub(crate) fn read_trimmed(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

/// The SCSI host (`host3`) on a device's sysfs path, where there is one.
fn scsi_host(resolved: &Path) -> Option<String> {
    resolved
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .find(|c| c.starts_with("host") && c[4..].chars().all(|d| d.is_ascii_digit()))
        .map(str::to_string)
}

/// The NVMe controller of namespace `name`: the `/sys/class/nvme/nvmeC` that lists it (or, with
/// native multipath, a path `nvmeCcXnN` of it), else the `C` of its name.
fn nvme_controller(root: &SysRoot, name: &str) -> String {
    let ns = name.rsplit_once('n').map(|(_, n)| n).unwrap_or("");
    if let Ok(entries) = std::fs::read_dir(root.path("/sys/class/nvme")) {
        let mut controllers: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        controllers.sort();
        for c in controllers {
            let dir = root.path("/sys/class/nvme").join(&c);
            let Ok(children) = std::fs::read_dir(&dir) else {
                continue;
            };
            let lists_it = children.flatten().any(|e| {
                let child = e.file_name().to_string_lossy().into_owned();
                child == name
                    || (child.starts_with(&format!("{c}c"))
                        && child.rsplit_once('n').map(|(_, n)| n) == Some(ns))
            });
            if lists_it {
                return c;
            }
        }
    }
    let head = name.split_once('n').map(|(_, rest)| rest).unwrap_or("");
    let number: String = head.chars().take_while(char::is_ascii_digit).collect();
    format!("nvme{number}")
}

fn kind_of(root: &SysRoot, name: &str, dir: &Path, model: Option<&str>) -> StorageKind {
    let resolved = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let on_path = |part: &str| resolved.to_string_lossy().contains(part);
    if name.starts_with("vd") || on_path("/virtio") {
        return StorageKind::Virtual {
            what: "virtio disk".into(),
        };
    }
    if name.starts_with("xvd") || on_path("/vbd-") {
        return StorageKind::Virtual {
            what: "Xen disk".into(),
        };
    }
    if let Some(m) = model.and_then(|m| CLOUD_MODELS.iter().find(|c| m.contains(**c))) {
        return StorageKind::Virtual {
            what: format!("cloud volume ({m})"),
        };
    }
    if name.starts_with("nvme") {
        return StorageKind::Nvme {
            controller: nvme_controller(root, name),
        };
    }
    if name.starts_with("sd") {
        let host = scsi_host(&resolved);
        let vendor = read_trimmed(&dir.join("device/vendor"));
        return if vendor.as_deref() == Some("ATA") {
            StorageKind::Ata { host }
        } else {
            StorageKind::Scsi { host }
        };
    }
    StorageKind::Other
}

/// The `major:minor` of the file system mounted at `/`, from `/proc/self/mountinfo` (kernel
/// Documentation/filesystems/proc.rst, "/proc/<pid>/mountinfo"), and its source device.
fn root_mount(root: &SysRoot) -> Option<(String, String)> {
    let text = std::fs::read_to_string(root.path("/proc/self/mountinfo")).ok()?;
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split(' ').collect();
        if f.get(4) != Some(&"/") {
            return None;
        }
        let dash = f.iter().position(|x| *x == "-")?;
        Some((f.get(2)?.to_string(), f.get(dash + 2)?.to_string()))
    })
}

/// The whole disks below block device `name` (itself, the disk of a partition, the disks under
/// device-mapper or md), by kernel name.
fn disks_below(root: &SysRoot, name: &str, out: &mut BTreeSet<String>, depth: u32) {
    let class = root.path("/sys/class/block").join(name);
    if depth > 8 || !class.exists() {
        return;
    }
    if class.join("partition").exists() {
        let resolved = std::fs::canonicalize(&class).unwrap_or(class.clone());
        if let Some(parent) = resolved.parent().and_then(|p| p.file_name()) {
            out.insert(parent.to_string_lossy().into_owned());
        }
        return;
    }
    let slaves: Vec<String> = std::fs::read_dir(class.join("slaves"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if slaves.is_empty() {
        out.insert(name.to_string());
    }
    for s in slaves {
        disks_below(root, &s, out, depth + 1);
    }
}

/// The disks holding `/`.
fn root_disks(root: &SysRoot) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some((dev, source)) = root_mount(root) else {
        return out;
    };
    let name =
        name_of_number(root, &dev).or_else(|| source.strip_prefix("/dev/").map(str::to_string));
    if let Some(name) = name {
        disks_below(root, &name, &mut out, 0);
    }
    out
}

/// The whole disks holding the file at `path` (of the live file system: `stat`'s device number,
/// then `/sys/dev/block/MAJ:MIN` under the root), by kernel name; empty where the file system
/// has no block device (tmpfs, overlay, NFS, btrfs' anonymous device numbers).
pub fn disks_holding(root: &SysRoot, path: &std::path::Path) -> Result<Vec<String>, DeviceError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| DeviceError::io(path, e))?;
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let mut out = BTreeSet::new();
    if major != 0 {
        if let Some(name) = name_of_number(root, &format!("{major}:{minor}")) {
            disks_below(root, &name, &mut out, 0);
        }
    }
    Ok(out.into_iter().collect())
}

/// The kernel name of block device `major:minor`, through `/sys/dev/block`.
fn name_of_number(root: &SysRoot, dev: &str) -> Option<String> {
    let by_number = root.path("/sys/dev/block").join(dev);
    std::fs::canonicalize(by_number)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
}

/// The machine's block devices, sorted by name.
pub fn storage_devices(root: &SysRoot) -> Result<Vec<StorageDevice>, DeviceError> {
    let block = root.path("/sys/block");
    let entries = std::fs::read_dir(&block).map_err(|e| DeviceError::io(&block, e))?;
    let on_root = root_disks(root);
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_stacked_or_memory(&name) {
            continue;
        }
        let dir = block.join(&name);
        let model = read_trimmed(&dir.join("device/model"));
        out.push(StorageDevice {
            kind: kind_of(root, &name, &dir, model.as_deref()),
            dev: read_trimmed(&dir.join("dev")).unwrap_or_default(),
            rotational: read_trimmed(&dir.join("queue/rotational")).as_deref() == Some("1"),
            holds_root: on_root.contains(&name),
            model,
            sysfs: dir,
            name,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(base: &Path, rel: &str, text: &str) {
        let p = base.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn lists_disks_by_protocol_and_marks_the_one_under_root() {
        let t = tempfile::tempdir().unwrap();
        let b = t.path();
        write(b, "sys/block/nvme0n1/dev", "259:0\n");
        write(
            b,
            "sys/block/nvme0n1/device/model",
            "Samsung SSD 980 PRO 1TB   \n",
        );
        write(b, "sys/block/nvme0n1/queue/rotational", "0\n");
        fs::create_dir_all(b.join("sys/class/nvme/nvme1/nvme0n1")).unwrap();
        write(b, "sys/block/sda/dev", "8:0\n");
        write(b, "sys/block/sda/device/vendor", "ATA     \n");
        write(b, "sys/block/sda/device/model", "WDC WD40EFRX-68N\n");
        write(b, "sys/block/sda/queue/rotational", "1\n");
        write(b, "sys/block/sdb/dev", "8:16\n");
        write(b, "sys/block/sdb/device/vendor", "SEAGATE\n");
        write(b, "sys/block/vda/dev", "254:0\n");
        write(b, "sys/block/loop0/dev", "7:0\n");
        // `/` is on sda2, a partition of sda.
        fs::create_dir_all(b.join("sys/block/sda/sda2")).unwrap();
        write(b, "sys/block/sda/sda2/partition", "2\n");
        fs::create_dir_all(b.join("sys/class/block")).unwrap();
        std::os::unix::fs::symlink(b.join("sys/block/sda/sda2"), b.join("sys/class/block/sda2"))
            .unwrap();
        fs::create_dir_all(b.join("sys/dev/block")).unwrap();
        std::os::unix::fs::symlink(b.join("sys/block/sda/sda2"), b.join("sys/dev/block/8:2"))
            .unwrap();
        write(
            b,
            "proc/self/mountinfo",
            "22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw\n",
        );
        let devices = storage_devices(&SysRoot::new(b)).unwrap();
        let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["nvme0n1", "sda", "sdb", "vda"]);
        assert_eq!(
            devices[0].kind,
            StorageKind::Nvme {
                controller: "nvme1".into()
            }
        );
        assert_eq!(devices[0].model.as_deref(), Some("Samsung SSD 980 PRO 1TB"));
        assert_eq!(devices[1].kind, StorageKind::Ata { host: None });
        assert!(devices[1].rotational && devices[1].holds_root);
        assert_eq!(devices[2].kind, StorageKind::Scsi { host: None });
        assert!(!devices[0].holds_root && !devices[2].holds_root);
        assert!(devices[3].is_virtual());
        assert_eq!(devices[3].dev, "254:0");
    }

    #[test]
    fn this_machines_disks_are_listed_without_error() {
        // Whatever this machine has; the point is that real sysfs parses.
        let devices = storage_devices(&SysRoot::new("/")).unwrap();
        assert!(devices.iter().all(|d| !d.name.starts_with("loop")));
    }

    #[test]
    fn the_disk_holding_a_file_is_the_one_holding_root_for_a_file_on_root() {
        let root = SysRoot::new("/");
        let devices = storage_devices(&root).unwrap();
        let on_root: Vec<String> = devices
            .iter()
            .filter(|d| d.holds_root)
            .map(|d| d.name.clone())
            .collect();
        // /etc is on the root file system on any Debian machine; a root on tmpfs or overlay
        // (a container) has no disk, and both sides agree on that too.
        let holding = disks_holding(&root, Path::new("/etc/hostname")).unwrap();
        assert_eq!(holding, on_root);
        // /proc has no block device.
        assert!(disks_holding(&root, Path::new("/proc/self/stat"))
            .unwrap()
            .is_empty());
        assert!(disks_holding(&root, Path::new("/no/such/file")).is_err());
    }
}
