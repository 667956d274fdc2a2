//! A device's energy split between the cgroups (or processes) that moved its bytes.
//!
//! Only the active part is split: the idle floor (the interval's lower bound, what the device
//! draws idle in the states it was in over the window) is kept apart as *idle (not
//! attributed)*; the rest of the interval is split by each one's share of the bytes read and
//! written. With cgroup v2's `io` controller the bytes are each cgroup's own on that device
//! (`io.stat`, kernel Documentation/admin-guide/cgroup-v2.rst, "IO Interface Files"); without
//! it, each process's `read_bytes` + `write_bytes` of `/proc/PID/io` (kernel
//! Documentation/filesystems/proc.rst), which are not per device: the coarser rule, labelled as
//! such. A process's `/proc/PID/io` includes the children it reaped, so a command's exited
//! processes are counted in the process that waited for them.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use wattio_energy::attribution::cgroup::{self, CgroupUsage};
use wattio_energy::SysRoot;

use crate::figures::EnergyInterval;
use crate::meter::StorageEnergy;

/// The label of a split by each cgroup's bytes on the device.
pub const CGROUP_SHARE_LABEL: &str = "attributed (io-bytes share)";
/// The label of a split by each process's bytes on all devices.
pub const PROCESS_SHARE_LABEL: &str =
    "attributed (io-bytes share, coarser rule: per-process /proc/PID/io, not per device)";
/// The label of the idle floor, kept apart.
pub const IDLE_LABEL: &str = "idle (not attributed)";

/// How the bytes of a window are told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShareRule {
    /// Each cgroup's own bytes on the device, from cgroup v2 `io.stat`.
    CgroupIoStat,
    /// Each process's bytes on all devices, from `/proc/PID/io`.
    ProcessIo,
}

impl ShareRule {
    /// The label of a split by this rule.
    pub fn label(self) -> &'static str {
        match self {
            ShareRule::CgroupIoStat => CGROUP_SHARE_LABEL,
            ShareRule::ProcessIo => PROCESS_SHARE_LABEL,
        }
    }
}

/// One cgroup's hierarchical bytes per device (`MAJ:MIN`).
#[derive(Debug, Clone, PartialEq)]
struct CgroupBytes {
    path: String,
    ino: u64,
    by_dev: BTreeMap<String, u64>,
}

/// Every cgroup's (or process's) bytes at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct IoBytesSample {
    rule: ShareRule,
    cgroups: Vec<CgroupBytes>,
    /// Process id → (command name, bytes read and written).
    processes: BTreeMap<u32, (String, u64)>,
    /// Processes whose `/proc/PID/io` could not be read (another user's, without privilege).
    unreadable: usize,
}

/// Each device's bytes read and written in one `io.stat` file: its lines are
/// `MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N`.
fn io_stat_by_device(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let dev = line.split_ascii_whitespace().next()?;
            Some((dev.to_string(), cgroup::parse_io_stat_bytes(line)?))
        })
        .collect()
}

/// `read_bytes` + `write_bytes` of a `/proc/PID/io` file.
fn proc_io_bytes(text: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    field("read_bytes:")?.checked_add(field("write_bytes:")?)
}

/// The cgroup v2 mount, where its `io` controller is on (not so where `io` is a v1 controller,
/// as in hybrid mode).
fn io_controller_mount(root: &SysRoot) -> Option<PathBuf> {
    let mount = cgroup::v2_mount(root)?;
    let controllers = std::fs::read_to_string(mount.join("cgroup.controllers")).ok()?;
    controllers
        .split_ascii_whitespace()
        .any(|c| c == "io")
        .then_some(mount)
}

impl IoBytesSample {
    /// A sample of nothing: where no disk can have an interval there is nothing to split, and
    /// reading every process's `/proc/PID/io` each step would cost in proportion to processes
    /// for no figure.
    pub fn nothing() -> IoBytesSample {
        IoBytesSample {
            rule: ShareRule::ProcessIo,
            cgroups: Vec::new(),
            processes: BTreeMap::new(),
            unreadable: 0,
        }
    }

    /// Reads every cgroup's `io.stat` where the cgroup v2 `io` controller is on, else every
    /// process's `/proc/PID/io`.
    pub fn read(root: &SysRoot) -> IoBytesSample {
        let mut sample = IoBytesSample::nothing();
        if let Some(mount) = io_controller_mount(root) {
            if let Ok(ids) = cgroup::ids(&mount) {
                sample.rule = ShareRule::CgroupIoStat;
                for (ino, path) in ids {
                    let file = mount.join(path.trim_start_matches('/')).join("io.stat");
                    // A cgroup without io.stat (io not enabled for it) has its bytes in its
                    // parent's.
                    if let Ok(text) = std::fs::read_to_string(file) {
                        let by_dev = io_stat_by_device(&text);
                        sample.cgroups.push(CgroupBytes { path, ino, by_dev });
                    }
                }
                return sample;
            }
        }
        let Ok(entries) = std::fs::read_dir(root.path("/proc")) else {
            return sample;
        };
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            match std::fs::read_to_string(e.path().join("io")) {
                Ok(text) => {
                    let Some(bytes) = proc_io_bytes(&text) else {
                        continue;
                    };
                    let mut comm = std::fs::read_to_string(e.path().join("comm"))
                        .map(|c| c.trim().to_string())
                        .unwrap_or_default();
                    if root.is_real() && pid == std::process::id() {
                        // `measure`'s command is reaped by wattio, so its bytes are counted here.
                        comm.push_str(" (with the processes it ran and reaped)");
                    }
                    sample.processes.insert(pid, (comm, bytes));
                }
                Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {
                    sample.unreadable += 1
                }
                Err(_) => {} // ended while read
            }
        }
        sample
    }

    /// Which rule the sample reads.
    pub fn rule(&self) -> ShareRule {
        self.rule
    }
}

/// One cgroup's or process's share of a device's active energy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoByteShare {
    /// The cgroup path (`/system.slice/nginx.service`) or the process's command name.
    pub who: String,
    /// The process id, by the process rule.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pid: Option<u32>,
    /// Its bytes read and written in the window.
    pub bytes: u64,
    /// Its share of all bytes.
    pub fraction: f64,
    /// Its part of the device's active energy.
    pub energy: EnergyInterval,
}

/// A device's interval split: the idle floor kept apart and the active part shared by bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskEnergyShares {
    /// The idle floor (the interval's lower bound), not attributed.
    pub idle: EnergyInterval,
    /// [`IDLE_LABEL`].
    pub idle_label: String,
    /// The shares, most bytes first.
    pub shares: Vec<IoByteShare>,
    /// [`CGROUP_SHARE_LABEL`] or [`PROCESS_SHARE_LABEL`], after the interval's own label.
    pub label: String,
    /// What the split could not see (no bytes moved; unreadable processes).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
}

/// Each cgroup's own bytes on `dev` between `a` and `b`, nested cgroups counted once
/// (`cgroup::own_deltas`).
fn cgroup_bytes(
    a: &IoBytesSample,
    b: &IoBytesSample,
    dev: &str,
) -> Vec<(String, Option<u32>, u64)> {
    let on_dev = |s: &IoBytesSample| -> Vec<CgroupUsage> {
        s.cgroups
            .iter()
            .map(|c| CgroupUsage {
                path: c.path.clone(),
                value: c.by_dev.get(dev).copied().unwrap_or(0),
                ino: c.ino,
            })
            .collect()
    };
    let prev = cgroup::previous(&on_dev(a), None);
    cgroup::own_deltas(&on_dev(b), &prev, None)
        .into_iter()
        .map(|(path, bytes)| (path, None, bytes))
        .collect()
}

/// Each process's bytes between `a` and `b`: a process new since `a` (or a reused id whose
/// counter went back) moved all its bytes within the window.
fn process_bytes(a: &IoBytesSample, b: &IoBytesSample) -> Vec<(String, Option<u32>, u64)> {
    let before: HashMap<u32, u64> = a.processes.iter().map(|(p, (_, v))| (*p, *v)).collect();
    b.processes
        .iter()
        .map(|(pid, (comm, v))| {
            let grown = match before.get(pid) {
                Some(x) if x <= v => v - x,
                _ => *v,
            };
            (comm.clone(), Some(*pid), grown)
        })
        .collect()
}

/// Splits `e`'s interval between the cgroups or processes of samples `a` and `b` (taken at
/// the window's ends); `None` where the device has no interval.
pub fn split_by_io_bytes(
    e: &StorageEnergy,
    a: &IoBytesSample,
    b: &IoBytesSample,
) -> Option<DiskEnergyShares> {
    let interval = e.interval?;
    let idle = EnergyInterval {
        lower_j: interval.lower_j,
        central_j: Some(interval.lower_j),
        upper_j: interval.lower_j,
    };
    let active = EnergyInterval {
        lower_j: 0.0,
        central_j: interval.central_j.map(|c| (c - interval.lower_j).max(0.0)),
        upper_j: interval.upper_j - interval.lower_j,
    };
    let rule = if a.rule == b.rule {
        b.rule
    } else {
        ShareRule::ProcessIo
    };
    let bytes = match rule {
        ShareRule::CgroupIoStat => cgroup_bytes(a, b, &e.dev),
        ShareRule::ProcessIo => process_bytes(a, b),
    };
    let total: u64 = bytes.iter().map(|(_, _, v)| *v).sum();
    let mut shares: Vec<IoByteShare> = bytes
        .into_iter()
        .filter(|(_, _, v)| *v > 0)
        .map(|(who, pid, v)| {
            let fraction = v as f64 / total as f64;
            IoByteShare {
                who,
                pid,
                bytes: v,
                fraction,
                energy: active.scaled(fraction),
            }
        })
        .collect();
    shares.sort_by(|x, y| y.bytes.cmp(&x.bytes).then(x.who.cmp(&y.who)));
    let mut notes = Vec::new();
    if total == 0 {
        notes.push("no bytes moved: its active part is not attributed".to_string());
    }
    if rule == ShareRule::ProcessIo && b.unreadable > 0 {
        notes.push(format!(
            "{} processes' /proc/PID/io unreadable without privilege, left out",
            b.unreadable
        ));
    }
    Some(DiskEnergyShares {
        idle,
        idle_label: IDLE_LABEL.into(),
        shares,
        label: format!(
            "{}, {}",
            e.label.as_deref().unwrap_or("estimated"),
            rule.label()
        ),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_io_stat_per_device_and_proc_io() {
        let by_dev = io_stat_by_device(
            "8:0 rbytes=1000 wbytes=3000 rios=1 wios=2 dbytes=50 dios=1\n259:0 rbytes=7 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
        );
        assert_eq!(by_dev.get("8:0"), Some(&4000));
        assert_eq!(by_dev.get("259:0"), Some(&7));
        let io = "rchar: 900\nwchar: 800\nsyscr: 3\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(proc_io_bytes(io), Some(12288));
        assert_eq!(proc_io_bytes("rchar: 1\n"), None);
    }
}
