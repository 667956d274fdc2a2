//! Attaching to a TUN device of the calling thread's network namespace (`bed::in_netns` runs it in a
//! testbed's).

use crate::TestbedError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `_IOW('T', 202, int)` from `<linux/if_tun.h>`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Attaches to TUN device `dev` (plain IP packets, no packet-info header) in the current
/// thread's network namespace and returns its non-blocking fd. The fd stays bound to the device
/// wherever it is used afterwards, so a thread that entered a testbed namespace
/// (`bed::in_netns`) can open it for the whole process.
pub(crate) fn open(dev: &'static str) -> Result<OwnedFd, TestbedError> {
    // IFNAMSIZ counts the NUL.
    assert!(
        !dev.is_empty() && dev.len() < libc::IFNAMSIZ,
        "TUN device name {dev:?}"
    );
    let path = c"/dev/net/tun";
    // SAFETY: plain open(2) of a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(TestbedError::io(
            "cannot open /dev/net/tun (load the tun module and run as root)",
        )(std::io::Error::last_os_error()));
    }
    // SAFETY: fd was just returned by open and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        flags: IFF_TUN | IFF_NO_PI,
        _pad: [0; 22],
    };
    for (d, s) in req.name.iter_mut().zip(dev.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: TUNSETIFF reads/writes a struct ifreq, which IfReq lays out (40 bytes).
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq) } != 0 {
        return Err(TestbedError::io(format!(
            "cannot attach to TUN device {dev}"
        ))(std::io::Error::last_os_error()));
    }
    Ok(fd)
}
