//! What a block device's sysfs says of its work and its runtime power management.

use std::path::{Path, PathBuf};

use crate::inventory::{StorageDevice, StorageKind};

/// The counters of `/sys/block/NAME/stat` a meter needs (kernel Documentation/block/stat.rst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlockCounters {
    /// Sectors read (field 3), of 512 bytes whatever the device's sector size.
    pub sectors_read: u64,
    /// Sectors written (field 7).
    pub sectors_written: u64,
    /// Milliseconds the device had I/O in flight (`io_ticks`, field 10).
    pub io_ticks_ms: u64,
    /// The counters an access moves: reads, writes, discards and flushes completed (fields 1,
    /// 5, 12 and 16, 0 where an older kernel has no such field) and the I/O in flight (field 9).
    pub accesses: [u64; 5],
}

/// Parses a `stat` file: at least 11 fields of decimal counters.
pub(crate) fn parse_block_stat(text: &str) -> Option<BlockCounters> {
    let fields: Vec<u64> = text
        .split_ascii_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    (fields.len() >= 11).then(|| BlockCounters {
        sectors_read: fields[2],
        sectors_written: fields[6],
        io_ticks_ms: fields[9],
        accesses: [0usize, 4, 8, 11, 15].map(|i| fields.get(i).copied().unwrap_or(0)),
    })
}

/// Reads `stat` in a device's sysfs directory.
pub(crate) fn read_block_stat(sysfs: &Path) -> Result<BlockCounters, String> {
    let path = sysfs.join("stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_block_stat(&text).ok_or_else(|| {
        format!(
            "{}: not a block stat line (kernel Documentation/block/stat.rst)",
            path.display()
        )
    })
}

/// The `power/` directory whose runtime-PM residency stands for the device's (kernel
/// Documentation/ABI/testing/sysfs-devices-power): for NVMe the PCI function (the
/// controller's parent), for a SCSI or ATA disk its SCSI device; the first of these that has
/// `runtime_suspended_time`.
pub(crate) fn runtime_pm_dir(dev: &StorageDevice) -> Option<PathBuf> {
    let candidates: &[&str] = match dev.kind {
        StorageKind::Nvme { .. } => &["device/device/power", "device/power"],
        _ => &["device/power", "device/device/power"],
    };
    candidates
        .iter()
        .map(|c| dev.sysfs.join(c))
        .find(|p| p.join("runtime_suspended_time").is_file())
}

/// The cumulative milliseconds the device spent runtime-suspended, where it can be read.
pub(crate) fn read_suspended_ms(power_dir: &Path) -> Option<u64> {
    std::fs::read_to_string(power_dir.join("runtime_suspended_time"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_stat_rst_names() {
        let line = "    4863     1234   398392     2113    12000      300   800000    40000        0     9876    42113        0        0        0        0      100       17\n";
        let c = parse_block_stat(line).unwrap();
        assert_eq!(
            (c.sectors_read, c.sectors_written, c.io_ticks_ms),
            (398392, 800000, 9876)
        );
        assert_eq!(parse_block_stat("1 2 3"), None);
        assert_eq!(parse_block_stat("1 2 x 4 5 6 7 8 9 10 11"), None);
    }
}
