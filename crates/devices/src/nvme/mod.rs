//! NVMe drives: what the controller says of its own power, read-only, through the kernel's
//! admin pass-through on `/dev/nvmeN` ([`NvmeController`]), and a [`PowerStateReader`] of it.
//!
//! # Stand-in controllers
//!
//! Where `/dev/nvmeN` under the [`SysRoot`] is a regular file instead of a character device,
//! it is a recorded controller (tests, `wattio fixture`), read with `pread` at these offsets
//! on every read, so that rewriting 4 bytes moves the drive to another state:
//!
//! | bytes        | content                                                    |
//! |--------------|------------------------------------------------------------|
//! | 0..4096      | the Identify Controller data structure (CNS 01h)           |
//! | 4096..4100   | the Power Management feature's dword 0 (u32 LE; bits 4:0 PS) |
//! | 4100..4104   | the APST feature's dword 0 (u32 LE; bit 0 APSTE)           |
//! | 4104..4360   | the APST data structure (32 entries of 8 bytes)            |
//!
//! [`StandInController`] writes one.

mod decode;
mod passthru;

use std::fs::File;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wattio_energy::SysRoot;

pub use decode::{
    decode_apst, decode_descriptor, decode_identify, ApstEntry, ApstTable, NvmeIdentify,
};

use crate::error::DeviceError;
use crate::figures::{PowerFigures, PowerState};
use crate::state::PowerStateReader;

/// Offset of the current-state dword in a stand-in controller file.
pub const STAND_IN_STATE_AT: u64 = decode::IDENTIFY_LEN as u64;
/// Offset of the APST dword 0 in a stand-in controller file.
pub const STAND_IN_APST_AT: u64 = STAND_IN_STATE_AT + 4;
/// Offset of the APST table in a stand-in controller file.
pub const STAND_IN_TABLE_AT: u64 = STAND_IN_APST_AT + 4;
/// Size of a stand-in controller file.
pub const STAND_IN_LEN: u64 = STAND_IN_TABLE_AT + decode::APST_LEN as u64;

/// Feature identifier Power Management.
const FID_POWER_MANAGEMENT: u32 = 0x02;
/// Feature identifier Autonomous Power State Transition.
const FID_APST: u32 = 0x0c;
/// Identify CNS 01h: the Identify Controller data structure.
const CNS_CONTROLLER: u32 = 0x01;

/// One NVMe controller's character device (or its stand-in), open read-only.
#[derive(Debug)]
pub struct NvmeController {
    name: String,
    path: PathBuf,
    file: File,
    stand_in: bool,
}

/// A refused or failed pass-through as one line naming the controller and the fix.
fn passthru_error(name: &str, what: &str, e: std::io::Error) -> DeviceError {
    let fix = match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "; the admin pass-through needs root (CAP_SYS_ADMIN): run as root"
        }
        Some(libc::ENOTTY) => {
            "; the device does not answer NVMe admin commands (not an NVMe controller)"
        }
        Some(libc::EINVAL) => "; the kernel refused the command's fields (a kernel older than the NVMe pass-through wattio uses?)",
        Some(libc::EAGAIN) => "; the controller is not live (resetting or being removed): try again",
        _ => "",
    };
    DeviceError::Refused {
        device: name.to_string(),
        what: format!("{what}: {e}{fix}"),
    }
}

impl NvmeController {
    /// Opens `/dev/{controller}` under `root`.
    pub fn open(root: &SysRoot, controller: &str) -> Result<NvmeController, DeviceError> {
        let path = root.path("/dev").join(controller);
        let file = File::open(&path)
            .map_err(|e| passthru_error(controller, &format!("open {}", path.display()), e))?;
        let meta = file.metadata().map_err(|e| DeviceError::io(&path, e))?;
        let stand_in = meta.file_type().is_file();
        if !stand_in && !meta.file_type().is_char_device() {
            return Err(DeviceError::Malformed {
                device: controller.to_string(),
                what: format!(
                    "{} is neither a character device nor a stand-in file",
                    path.display()
                ),
            });
        }
        Ok(NvmeController {
            name: controller.to_string(),
            path,
            file,
            stand_in,
        })
    }

    /// Its name (`nvme0`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is a recorded stand-in controller, not a real one.
    pub fn is_stand_in(&self) -> bool {
        self.stand_in
    }

    /// Reads exactly `buf.len()` bytes of the stand-in at `at`.
    fn read_stand_in(&self, at: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.file
            .read_exact_at(buf, at)
            .map_err(|e| DeviceError::Malformed {
                device: self.name.clone(),
                what: format!(
                "stand-in {} has no {} bytes at offset {at} ({e}): write it with StandInController",
                self.path.display(),
                buf.len()
            ),
            })
    }

    /// A stand-in dword at `at`, or the completion dword 0 of Get Features `fid` into `data`.
    fn feature(&self, fid: u32, at: u64, data: &mut [u8]) -> Result<u32, DeviceError> {
        if self.stand_in {
            let mut dword = [0u8; 4];
            self.read_stand_in(at, &mut dword)?;
            if !data.is_empty() {
                self.read_stand_in(STAND_IN_TABLE_AT, data)?;
            }
            return Ok(u32::from_le_bytes(dword));
        }
        // CDW10: FID in bits 7:0, SEL (bits 10:8) 000b = the current value.
        passthru::admin(&self.file, passthru::OPCODE_GET_FEATURES, fid, data)
            .map_err(|e| passthru_error(&self.name, &format!("Get Features {fid:#04x}"), e))
    }

    /// Identify Controller: the model and the power-state descriptors.
    pub fn identify(&self) -> Result<NvmeIdentify, DeviceError> {
        let mut data = vec![0u8; decode::IDENTIFY_LEN];
        if self.stand_in {
            self.read_stand_in(0, &mut data)?;
        } else {
            passthru::admin(
                &self.file,
                passthru::OPCODE_IDENTIFY,
                CNS_CONTROLLER,
                &mut data,
            )
            .map_err(|e| passthru_error(&self.name, "Identify Controller", e))?;
        }
        decode_identify(&data).map_err(|what| DeviceError::Malformed {
            device: self.name.clone(),
            what,
        })
    }

    /// The power state the controller is in now (Get Features, Power Management).
    pub fn current_power_state(&self) -> Result<u8, DeviceError> {
        let dword = self.feature(FID_POWER_MANAGEMENT, STAND_IN_STATE_AT, &mut [])?;
        Ok(decode::decode_power_state(dword))
    }

    /// The APST setting (Get Features, Autonomous Power State Transition).
    pub fn apst(&self) -> Result<ApstTable, DeviceError> {
        let mut table = vec![0u8; decode::APST_LEN];
        let dword = self.feature(FID_APST, STAND_IN_APST_AT, &mut table)?;
        Ok(decode_apst(dword, &table))
    }
}

/// The [`PowerStateReader`] of an NVMe drive: figures from Identify (read once), the current
/// state from Get Features at most once per [`NvmeStateReader::MIN_INTERVAL`].
#[derive(Debug)]
pub struct NvmeStateReader {
    controller: NvmeController,
    figures: PowerFigures,
    model: String,
    apst_supported: bool,
    last: Option<(Instant, Option<usize>)>,
}

impl NvmeStateReader {
    /// The least time between two Get Features commands sent to the drive.
    pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

    /// Opens controller `controller` under `root` and reads its descriptors.
    pub fn open(root: &SysRoot, controller: &str) -> Result<NvmeStateReader, DeviceError> {
        let controller = NvmeController::open(root, controller)?;
        let id = controller.identify()?;
        Ok(NvmeStateReader {
            controller,
            figures: id.figures,
            model: id.model,
            apst_supported: id.apst_supported,
            last: None,
        })
    }

    /// The model number the drive reports.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The controller, for its APST setting.
    pub fn controller(&self) -> &NvmeController {
        &self.controller
    }

    /// Whether the controller supports APST (Identify APSTA).
    pub fn apst_supported(&self) -> bool {
        self.apst_supported
    }
}

impl PowerStateReader for NvmeStateReader {
    fn figures(&self) -> &PowerFigures {
        &self.figures
    }

    fn current_state(&mut self) -> Result<Option<usize>, DeviceError> {
        if let Some((at, state)) = self.last {
            if at.elapsed() < Self::MIN_INTERVAL {
                return Ok(state);
            }
        }
        let ps = usize::from(self.controller.current_power_state()?);
        if ps >= self.figures.states.len() {
            return Err(DeviceError::Malformed {
                device: self.controller.name.clone(),
                what: format!(
                    "reports power state {ps}, but describes only {} (NPSS)",
                    self.figures.states.len()
                ),
            });
        }
        self.last = Some((Instant::now(), Some(ps)));
        Ok(Some(ps))
    }

    fn min_interval(&self) -> Duration {
        Self::MIN_INTERVAL
    }
}

/// A recorded controller for tests and fixtures: its bytes are a stand-in `/dev/nvmeN` (the
/// format is in the [module documentation](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct StandInController {
    /// The model number (at most 40 ASCII bytes are kept).
    pub model: String,
    /// The power states, PS0 first (1 to 32; `id`s are ignored, the position is the number).
    pub states: Vec<PowerState>,
    /// The state it is in.
    pub current: u8,
    /// Its APST setting.
    pub apst: ApstTable,
}

impl StandInController {
    /// The stand-in file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = decode::encode_identify(&self.model, &self.states);
        out.extend_from_slice(&u32::from(self.current).to_le_bytes());
        out.extend_from_slice(&u32::from(self.apst.enabled).to_le_bytes());
        out.extend_from_slice(&decode::encode_apst(&self.apst.entries));
        out
    }

    /// Writes the stand-in to `path`.
    pub fn write(&self, path: &Path) -> Result<(), DeviceError> {
        std::fs::write(path, self.to_bytes()).map_err(|e| DeviceError::io(path, e))
    }

    /// Moves the stand-in at `path` to power state `state` (rewrites its 4 state bytes).
    pub fn set_state(path: &Path, state: u8) -> Result<(), DeviceError> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| DeviceError::io(path, e))?;
        file.write_all_at(&u32::from(state).to_le_bytes(), STAND_IN_STATE_AT)
            .map_err(|e| DeviceError::io(path, e))
    }
}
