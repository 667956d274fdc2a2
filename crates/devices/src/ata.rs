//! SATA disks: the power mode the drive reports (ATA CHECK POWER MODE, command E5h, ACS-3
//! "CHECK POWER MODE") sent through SG_IO as an ATA PASS-THROUGH(16) command (SCSI opcode
//! 85h, SAT-4 "ATA PASS-THROUGH (16) command") with CK_COND set so that the ATA registers
//! come back in the sense data's ATA Status Return descriptor (code 09h, SAT-4 "ATA Status
//! Return sense data descriptor"), as `hdparm -C` does; the
//! SCSI host's link power management policy; and a [`PowerStateReader`] giving the drive's
//! profile figures and the state it is in.
//!
//! Stand-in: where `/dev/sdX` under the root is a regular file, its first byte is the count
//! register CHECK POWER MODE would return.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

use serde::{Deserialize, Serialize};
use wattio_energy::SysRoot;

use crate::error::DeviceError;
use crate::figures::PowerFigures;
use crate::state::PowerStateReader;

/// The power mode of an ATA drive, from CHECK POWER MODE's count output (ACS-3, CHECK POWER
/// MODE normal outputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AtaPowerMode {
    /// 00h/01h: Standby (spindle stopped); 40h: NV Cache power mode with the spindle spun down
    /// or spinning down.
    Standby,
    /// 80h–83h: Idle (Idle_a/b/c); 41h: NV Cache power mode with the spindle spun up.
    Idle,
    /// FFh: Active or Idle.
    ActiveOrIdle,
    /// A value ACS-3 does not define.
    Unknown(u8),
}

impl AtaPowerMode {
    /// The mode of count register value `count`.
    pub fn from_count(count: u8) -> AtaPowerMode {
        match count {
            0x00 | 0x01 | 0x40 => AtaPowerMode::Standby,
            0x41 | 0x80..=0x83 => AtaPowerMode::Idle,
            0xff => AtaPowerMode::ActiveOrIdle,
            other => AtaPowerMode::Unknown(other),
        }
    }

    /// The index into a profile's states (active, idle, standby) this mode is: active/idle
    /// counts as the active state, whose bounds hold both.
    pub fn state_index(self) -> Option<usize> {
        match self {
            AtaPowerMode::ActiveOrIdle => Some(0),
            AtaPowerMode::Idle => Some(1),
            AtaPowerMode::Standby => Some(2),
            AtaPowerMode::Unknown(_) => None,
        }
    }

    /// `active/idle`, `idle`, `standby`, `unknown (0x42)`.
    pub fn describe(self) -> String {
        match self {
            AtaPowerMode::Standby => "standby".into(),
            AtaPowerMode::Idle => "idle".into(),
            AtaPowerMode::ActiveOrIdle => "active/idle".into(),
            AtaPowerMode::Unknown(c) => format!("unknown (count {c:#04x})"),
        }
    }
}

/// `struct sg_io_hdr` of include/scsi/sg.h (the SCSI generic v3 interface).
#[repr(C)]
struct SgIoHdr {
    interface_id: libc::c_int,
    dxfer_direction: libc::c_int,
    cmd_len: u8,
    mx_sb_len: u8,
    iovec_count: u16,
    dxfer_len: libc::c_uint,
    dxferp: *mut libc::c_void,
    cmdp: *const u8,
    sbp: *mut u8,
    timeout: libc::c_uint,
    flags: libc::c_uint,
    pack_id: libc::c_int,
    usr_ptr: *mut libc::c_void,
    status: u8,
    masked_status: u8,
    msg_status: u8,
    sb_len_wr: u8,
    host_status: u16,
    driver_status: u16,
    resid: libc::c_int,
    duration: libc::c_uint,
    info: libc::c_uint,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<SgIoHdr>() == 88);

/// The SG_IO ioctl (include/scsi/sg.h).
const SG_IO: u64 = 0x2285;
/// No data transfer.
const SG_DXFER_NONE: libc::c_int = -1;
/// The deadline of the command, ms: a drive spinning up from standby answers within seconds.
const SG_TIMEOUT_MS: u32 = 15_000;

/// The ATA PASS-THROUGH(16) CDB of CHECK POWER MODE: protocol 3 (non-data), CK_COND set.
fn check_power_mode_cdb() -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x85; // ATA PASS-THROUGH(16)
    cdb[1] = 3 << 1; // PROTOCOL (bits 4:1) = non-data, EXTEND = 0
    cdb[2] = 0x20; // CK_COND: return the ATA registers in the sense data
    cdb[14] = 0xe5; // COMMAND: CHECK POWER MODE
    cdb
}

/// The count register from the sense data of an ATA pass-through with CK_COND, once the
/// sense says the command completed: sense key RECOVERED ERROR with ASC/ASCQ 00h/1Dh (ATA
/// PASS THROUGH INFORMATION AVAILABLE) and an ATA status with none of BSY, DF, DRQ or ERR
/// (SAT-4, "ATA PASS-THROUGH" sense data; ACS-3 status bits). The registers are in the ATA
/// Status Return descriptor (09h, at least 0Ch long) of descriptor-format sense (72h/73h), or
/// the INFORMATION field of fixed-format sense (70h/71h: status at byte 4, count at byte 6).
/// Anything else (ILLEGAL REQUEST from a translation layer, an aborted command) is an error
/// naming what came back, never a power mode.
pub fn count_from_sense(sense: &[u8]) -> Result<u8, String> {
    let (key, asc, ascq, status, count) = match sense.first().map(|b| b & 0x7f) {
        Some(0x72 | 0x73) => {
            let g = |i: usize| sense.get(i).copied().unwrap_or(0);
            let len = usize::from(g(7));
            let end = (8 + len).min(sense.len());
            let mut at = 8;
            let mut regs = None;
            while at + 1 < end {
                let (code, add) = (sense[at], usize::from(sense[at + 1]));
                if code == 0x09 && add >= 0x0c && at + 13 < sense.len() {
                    regs = Some((sense[at + 13], sense[at + 5]));
                    break;
                }
                at += 2 + add;
            }
            let (status, count) =
                regs.ok_or("descriptor sense without an ATA Status Return descriptor")?;
            (g(1) & 0x0f, g(2), g(3), status, count)
        }
        Some(0x70 | 0x71) if sense.len() >= 14 => {
            (sense[2] & 0x0f, sense[12], sense[13], sense[4], sense[6])
        }
        _ => return Err("no sense data in the ATA pass-through's format".into()),
    };
    if (key, asc, ascq) != (0x01, 0x00, 0x1d) {
        return Err(format!(
            "sense key {key:#x}, ASC/ASCQ {asc:#04x}/{ascq:#04x} (not ATA PASS THROUGH INFORMATION AVAILABLE): the command did not complete"
        ));
    }
    // BSY, DF, DRQ, ERR.
    if status & (0x80 | 0x20 | 0x08 | 0x01) != 0 {
        return Err(format!(
            "ATA status {status:#04x} (busy, device fault, data request or error set)"
        ));
    }
    Ok(count)
}

/// Sends CHECK POWER MODE to the open disk through SG_IO and returns the count register.
fn check_power_mode_sgio(dev: &File, name: &str) -> Result<u8, DeviceError> {
    let cdb = check_power_mode_cdb();
    let mut sense = [0u8; 32];
    let mut hdr = SgIoHdr {
        interface_id: libc::c_int::from(b'S'),
        dxfer_direction: SG_DXFER_NONE,
        cmd_len: cdb.len() as u8,
        mx_sb_len: sense.len() as u8,
        iovec_count: 0,
        dxfer_len: 0,
        dxferp: std::ptr::null_mut(),
        cmdp: cdb.as_ptr(),
        sbp: sense.as_mut_ptr(),
        timeout: SG_TIMEOUT_MS,
        flags: 0,
        pack_id: 0,
        usr_ptr: std::ptr::null_mut(),
        status: 0,
        masked_status: 0,
        msg_status: 0,
        sb_len_wr: 0,
        host_status: 0,
        driver_status: 0,
        resid: 0,
        duration: 0,
        info: 0,
    };
    // SAFETY: `hdr` is a live `struct sg_io_hdr` with no data transfer (dxferp null,
    // dxfer_len 0); `cmdp` points at the 16-byte `cdb` and `sbp` at the 32-byte `sense`
    // (mx_sb_len), both on this stack frame and outliving the synchronous call; the fd is
    // open for its duration. CHECK POWER MODE changes nothing on the drive.
    let rc = unsafe { libc::ioctl(dev.as_raw_fd(), SG_IO as _, &mut hdr as *mut SgIoHdr) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        let fix = match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => "; SG_IO on a disk needs root: run as root",
            Some(libc::ENOTTY) | Some(libc::EINVAL) => "; the device does not take SCSI commands",
            _ => "",
        };
        return Err(DeviceError::Refused {
            device: name.to_string(),
            what: format!("CHECK POWER MODE through SG_IO: {e}{fix}"),
        });
    }
    let written = usize::from(hdr.sb_len_wr).min(sense.len());
    // GOOD or CHECK CONDITION (CK_COND asks for the latter) from a host that delivered it.
    let delivered = hdr.host_status == 0 && (hdr.status == 0 || hdr.status == 0x02);
    let count = if delivered {
        count_from_sense(&sense[..written])
    } else {
        Err("not delivered".to_string())
    };
    count.map_err(|why| DeviceError::Refused {
        device: name.to_string(),
        what: format!(
            "CHECK POWER MODE gave no power mode ({why}; SCSI status {:#x}, host {:#x}, driver {:#x}): the host adapter may not implement ATA PASS-THROUGH",
            hdr.status, hdr.host_status, hdr.driver_status
        ),
    })
}

/// The power mode of disk `name` (`sda`), read from `/dev/NAME` under `root` (or its stand-in).
pub fn check_power_mode(root: &SysRoot, name: &str) -> Result<AtaPowerMode, DeviceError> {
    let path = root.path("/dev").join(name);
    // O_NONBLOCK, as hdparm opens a disk: a removable drive without a medium still opens.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| DeviceError::Refused {
            device: name.to_string(),
            what: format!(
                "open {}: {e}{}",
                path.display(),
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    "; run as root"
                } else {
                    ""
                }
            ),
        })?;
    let kind = file
        .metadata()
        .map_err(|e| DeviceError::io(&path, e))?
        .file_type();
    if kind.is_file() {
        let mut count = [0u8; 1];
        file.read_exact_at(&mut count, 0)
            .map_err(|e| DeviceError::Malformed {
                device: name.to_string(),
                what: format!("stand-in {} has no count byte ({e})", path.display()),
            })?;
        return Ok(AtaPowerMode::from_count(count[0]));
    }
    if !kind.is_block_device() && !kind.is_char_device() {
        return Err(DeviceError::Malformed {
            device: name.to_string(),
            what: format!("{} is not a device node", path.display()),
        });
    }
    check_power_mode_sgio(&file, name).map(AtaPowerMode::from_count)
}

/// The link power management policy of SCSI host `host` (`host0`):
/// `/sys/class/scsi_host/HOST/link_power_management_policy` (`max_performance`,
/// `med_power_with_dipm`, `min_power`, …), where the host has one.
pub fn link_power_policy(root: &SysRoot, host: &str) -> Option<String> {
    let path = root
        .path("/sys/class/scsi_host")
        .join(host)
        .join("link_power_management_policy");
    let s = std::fs::read_to_string(path).ok()?;
    Some(s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The [`PowerStateReader`] of a SATA disk: profile figures (states active, idle, standby) and
/// the mode CHECK POWER MODE reports.
#[derive(Debug)]
pub struct AtaStateReader {
    root: SysRoot,
    name: String,
    figures: PowerFigures,
}

impl AtaStateReader {
    /// The reader of disk `name` with `figures` (three states: active, idle, standby).
    pub fn new(root: &SysRoot, name: &str, figures: PowerFigures) -> AtaStateReader {
        AtaStateReader {
            root: root.clone(),
            name: name.to_string(),
            figures,
        }
    }

    /// The disk's power mode now.
    pub fn mode(&self) -> Result<AtaPowerMode, DeviceError> {
        check_power_mode(&self.root, &self.name)
    }
}

impl PowerStateReader for AtaStateReader {
    fn figures(&self) -> &PowerFigures {
        &self.figures
    }

    fn current_state(&mut self) -> Result<Option<usize>, DeviceError> {
        // A command would resume a runtime-suspended disk (and may spin it up): the kernel's
        // word that it is suspended is taken for its lowest state instead.
        let status = self
            .root
            .path("/sys/block")
            .join(&self.name)
            .join("device/power/runtime_status");
        if std::fs::read_to_string(status).is_ok_and(|s| s.trim() == "suspended") {
            return Ok(self.figures.states.len().checked_sub(1));
        }
        let index = self.mode()?.state_index();
        Ok(index.filter(|i| *i < self.figures.states.len()))
    }
}

/// The profile-only reader of a disk that cannot say its state (SAS, USB bridges): figures,
/// and `None` for the state.
#[derive(Debug)]
pub struct ProfileOnlyReader {
    figures: PowerFigures,
}

impl ProfileOnlyReader {
    /// A reader of `figures` alone.
    pub fn new(figures: PowerFigures) -> ProfileOnlyReader {
        ProfileOnlyReader { figures }
    }
}

impl PowerStateReader for ProfileOnlyReader {
    fn figures(&self) -> &PowerFigures {
        &self.figures
    }

    fn current_state(&mut self) -> Result<Option<usize>, DeviceError> {
        Ok(None)
    }
}

/// Writes an ATA stand-in `/dev/sdX` at `path` reporting count `count` (00h standby, 80h idle,
/// FFh active/idle).
pub fn write_stand_in(path: &Path, count: u8) -> Result<(), DeviceError> {
    std::fs::write(path, [count]).map_err(|e| DeviceError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_map_to_the_acs3_modes() {
        assert_eq!(AtaPowerMode::from_count(0x00), AtaPowerMode::Standby);
        assert_eq!(AtaPowerMode::from_count(0x80), AtaPowerMode::Idle);
        assert_eq!(AtaPowerMode::from_count(0x82), AtaPowerMode::Idle);
        assert_eq!(AtaPowerMode::from_count(0xff), AtaPowerMode::ActiveOrIdle);
        assert_eq!(AtaPowerMode::from_count(0x40), AtaPowerMode::Standby);
        assert_eq!(AtaPowerMode::from_count(0x41), AtaPowerMode::Idle);
        assert_eq!(AtaPowerMode::from_count(0x42), AtaPowerMode::Unknown(0x42));
        assert_eq!(AtaPowerMode::Unknown(0x42).state_index(), None);
        assert_eq!(AtaPowerMode::Standby.state_index(), Some(2));
    }

    #[test]
    fn the_count_comes_from_either_sense_format_once_the_command_completed() {
        // Descriptor format: response 72h, sense key 1 (recovered), ASC/ASCQ 00h/1Dh, one
        // ATA Status Return descriptor (09h, length 0Ch) whose byte 5 is the count (80h) and
        // byte 13 the status (50h: DRDY, DSC).
        let mut d = [0u8; 22];
        d[0] = 0x72;
        d[1] = 0x01;
        d[3] = 0x1d;
        d[7] = 14;
        d[8] = 0x09;
        d[9] = 0x0c;
        d[13] = 0x80;
        d[21] = 0x50;
        assert_eq!(count_from_sense(&d), Ok(0x80));
        // The same with ERR in the status: an error, not a mode.
        let mut e = d;
        e[21] = 0x51;
        assert!(count_from_sense(&e).unwrap_err().contains("0x51"));
        // A descriptor shorter than 0Ch is not read.
        let mut short = d;
        short[9] = 0x04;
        assert!(count_from_sense(&short).is_err());
        // Fixed format: key 1 at byte 2, ASC/ASCQ at 12/13, status at 4, count at 6.
        let mut f = [0u8; 18];
        f[0] = 0x70;
        f[2] = 0x01;
        f[4] = 0x50;
        f[6] = 0xff;
        f[13] = 0x1d;
        assert_eq!(count_from_sense(&f), Ok(0xff));
        // ILLEGAL REQUEST (key 5, ASC 20h) in fixed format, whose byte 6 is 0: never "standby".
        let mut bad = [0u8; 18];
        bad[0] = 0x70;
        bad[2] = 0x05;
        bad[12] = 0x20;
        let why = count_from_sense(&bad).unwrap_err();
        assert!(why.contains("sense key 0x5"), "{why}");
        assert!(count_from_sense(&[]).is_err());
        // A descriptor list without 09h.
        let mut n = [0u8; 12];
        n[0] = 0x72;
        n[1] = 0x01;
        n[3] = 0x1d;
        n[7] = 4;
        n[8] = 0x02;
        n[9] = 0x02;
        assert!(count_from_sense(&n).is_err());
    }

    #[test]
    fn a_runtime_suspended_disk_is_in_its_lowest_state_without_a_command() {
        let t = tempfile::tempdir().unwrap();
        let b = t.path();
        std::fs::create_dir_all(b.join("dev")).unwrap();
        // The stand-in would answer active/idle (FFh) if it were asked.
        std::fs::write(b.join("dev/sda"), [0xffu8]).unwrap();
        let power = b.join("sys/block/sda/device/power");
        std::fs::create_dir_all(&power).unwrap();
        std::fs::write(power.join("runtime_status"), "suspended\n").unwrap();
        let state = |name: &str, w: f64| crate::PowerState {
            id: 0,
            name: name.into(),
            max_w: w,
            idle_w: Some(w),
            active_w: None,
            non_operational: name == "standby",
            entry_latency_us: 0,
            exit_latency_us: 0,
        };
        let figures = PowerFigures {
            states: vec![
                state("active", 8.0),
                state("idle", 5.0),
                state("standby", 1.0),
            ],
            source: crate::FiguresSource::GenericClass {
                class: "test".into(),
                source: "this test".into(),
            },
        };
        let lowest = figures.states.len() - 1;
        let mut r = AtaStateReader::new(&SysRoot::new(b), "sda", figures);
        assert_eq!(r.current_state().unwrap(), Some(lowest));
        std::fs::write(power.join("runtime_status"), "active\n").unwrap();
        assert_eq!(r.current_state().unwrap(), Some(0));
    }

    #[test]
    fn the_cdb_is_a_non_data_pass_through_of_e5_with_ck_cond() {
        let c = check_power_mode_cdb();
        assert_eq!((c[0], c[1], c[2], c[14]), (0x85, 0x06, 0x20, 0xe5));
    }
}
