//! Errors of the device readers: one line each, naming the device and the fix.

use std::path::PathBuf;

/// What went wrong reading a device.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A sysfs or device file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A device answered, but with something that cannot be right.
    #[error("{device}: {what}")]
    Malformed {
        /// The device (`nvme0`, `sda`).
        device: String,
        /// What was wrong, and the fix where there is one.
        what: String,
    },
    /// The device refused a command (no permission, not the kind of device expected).
    #[error("{device}: {what}")]
    Refused {
        /// The device (`nvme0`, `sda`).
        device: String,
        /// What was refused, why, and the fix.
        what: String,
    },
    /// A drive or NIC profile file is malformed.
    #[error("{file}:{line}: {what}")]
    Profile {
        /// The profile file.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        what: String,
    },
}

impl DeviceError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> DeviceError {
        DeviceError::Io {
            path: path.into(),
            source,
        }
    }
}
