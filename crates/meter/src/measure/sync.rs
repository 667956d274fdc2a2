//! The sync phase of `wattio measure`: the writeback a command left behind, measured after it.
//!
//! A command that writes through the page cache returns before its data reaches the disk; the
//! kernel writes it back later, in kworker threads charged to no one, and `measure` would close
//! its window first. So, unless `--no-sync`, a run whose command dirtied pages (its `wait4`
//! rusage `ru_oublock`: the bytes it and its waited-for descendants handed to the block layer or
//! dirtied in the page cache, kernel `Documentation/accounting/taskstats-struct.rst`
//! `write_bytes`) is followed by `sync(2)`, measured as a phase of its own: its duration, the
//! machine's energy over it and the machine's busy CPU time in it (the flusher threads, the
//! block layer and the sync call).
//!
//! `sync(2)` writes every file system's dirty data, not only the command's, so the command is
//! charged the sync's CPU-time share of that energy times its share of the dirty data when the
//! sync began (`Dirty` + `Writeback` of `/proc/meminfo`), at most all of it. A command that
//! dirtied nothing has no sync phase.

use serde::{Deserialize, Serialize};
use std::io;
use wattio_energy::attribution::{self, cputime};
use wattio_energy::{meminfo_bytes, SysRoot};

use crate::meter::EnergyReport;

/// A run's sync phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncPhase {
    pub duration_s: f64,
    /// The machine's energy over the sync (as the run's `total_j`: packages + DRAM).
    pub total_j: f64,
    /// Where `total_j` comes from: `measured (perf)` or `estimated (model: …)`.
    pub total_label: String,
    /// The machine's busy CPU-seconds in the sync (`/proc/stat`).
    pub busy_cpu_s: f64,
    /// Bytes the command dirtied or wrote (`ru_oublock` × 512).
    pub written_bytes: u64,
    /// Dirty and under-writeback bytes of the whole machine when the sync began.
    pub dirty_bytes: u64,
    /// The command's share of the dirty data: `written_bytes / dirty_bytes`, at most 1.
    pub dirty_share: f64,
    /// The command's part: `total_j`'s CPU-time share for `busy_cpu_s × dirty_share`.
    pub attributed_j: f64,
    /// E.g. `measured (perf), attributed (sync's cpu-time share × dirty-data share)`.
    pub attributed_label: String,
    /// The kernel I/O work done for the command during the sync, in CPU-seconds, where the
    /// kernel I/O program measured it (then `attributed_j` is its share, not the estimate).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kernel_io_cpu_s: Option<f64>,
}

impl SyncPhase {
    /// Charges the command what the kernel I/O program measured was done for it during the
    /// sync, instead of the sync's CPU-time share × dirty-data share.
    pub fn charge_measured(&mut self, k: &crate::measure::KernelIoShare) {
        self.attributed_j = k.attributed_j.min(self.total_j);
        self.attributed_label = format!(
            "{}, {}",
            self.total_label,
            wattio_energy::attribution::kernel_io::LABEL
        );
        self.kernel_io_cpu_s = Some(k.cpu_s);
    }

    /// The phase from its energy, the machine's busy time in it and the two byte counts.
    pub fn new(
        energy: &EnergyReport,
        busy_cpu_s: f64,
        n_cpus: usize,
        written_bytes: u64,
        dirty_bytes: u64,
    ) -> SyncPhase {
        let dirty_share = if dirty_bytes == 0 {
            1.0
        } else {
            (written_bytes as f64 / dirty_bytes as f64).min(1.0)
        };
        let total_label = energy.provenance_label();
        SyncPhase {
            duration_s: energy.duration_s,
            total_j: energy.total_j,
            busy_cpu_s,
            written_bytes,
            dirty_bytes,
            dirty_share,
            attributed_j: attribution::share_j(
                energy.total_j,
                n_cpus,
                energy.duration_s,
                busy_cpu_s * dirty_share,
            ),
            attributed_label: format!(
                "{total_label}, attributed (sync's cpu-time share × dirty-data share)"
            ),
            total_label,
            kernel_io_cpu_s: None,
        }
    }
}

/// `Dirty` + `Writeback` of a `/proc/meminfo` text, in bytes.
pub fn parse_dirty_bytes(meminfo: &str) -> Option<u64> {
    meminfo_bytes(meminfo, "Dirty")?.checked_add(meminfo_bytes(meminfo, "Writeback")?)
}

/// The machine's dirty and under-writeback bytes now, from the running kernel's
/// `/proc/meminfo` (never a fixture's: `sync(2)` writes the real machine's dirty data).
pub fn dirty_bytes() -> io::Result<u64> {
    let path = std::path::Path::new("/proc/meminfo");
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    parse_dirty_bytes(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: no Dirty or Writeback line", path.display()),
        )
    })
}

/// What the sync phase needs to know before it starts: the dirty bytes, and the busy time under
/// `root`, which the meter's figures are read under too.
pub(crate) struct SyncStart {
    pub dirty_bytes: u64,
    pub busy_cpu_s: f64,
}

impl SyncStart {
    pub(crate) fn read(root: &SysRoot) -> io::Result<SyncStart> {
        Ok(SyncStart {
            dirty_bytes: dirty_bytes()?,
            busy_cpu_s: cputime::machine_busy_cpu_s(root)?,
        })
    }
}

/// Writes every file system's dirty data back (`sync(2)`: returns once it is on the devices).
pub(crate) fn sync_all() {
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_and_writeback_add_up() {
        let m = "MemTotal:       24000000 kB\nDirty:             1024 kB\nWriteback:           16 kB\nWritebackTmp:        99 kB\n";
        assert_eq!(parse_dirty_bytes(m), Some(1040 * 1024));
        assert_eq!(parse_dirty_bytes("Dirty: 1 kB\n"), None);
    }

    /// A command that dirtied a quarter of what was dirty is charged a quarter of the sync's
    /// CPU-time share; one that dirtied more than was left (the rest written back during its
    /// run) is charged all of it.
    #[test]
    fn the_command_gets_its_share_of_the_dirty_data() {
        let e = crate::measure::tests::energy(10.0, 2.0);
        let p = SyncPhase::new(&e, 1.0, 2, 25 << 20, 100 << 20);
        assert_eq!(p.dirty_share, 0.25);
        // 10 J over 2 s on 2 CPUs: 2.5 J per CPU-second; 0.25 CPU-s.
        assert!((p.attributed_j - 0.625).abs() < 1e-9, "{p:?}");
        assert!(p
            .attributed_label
            .ends_with("attributed (sync's cpu-time share × dirty-data share)"));
        let all = SyncPhase::new(&e, 1.0, 2, 300 << 20, 100 << 20);
        assert_eq!(all.dirty_share, 1.0);
        assert_eq!(SyncPhase::new(&e, 1.0, 2, 1, 0).dirty_share, 1.0);
    }
}
