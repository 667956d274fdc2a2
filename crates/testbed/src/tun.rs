//! Opening (attaching to) a TUN device that lives in a named network namespace.

use anyhow::{bail, Context, Result};
use std::fs::File;
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

/// Attaches to TUN device `dev` (plain IP packets, no packet-info header) inside the network
/// namespace at `netns_path` (e.g. `/run/netns/wattio-client`) and returns its non-blocking fd.
///
/// The namespace switch happens on a short-lived thread, so the caller's namespace never changes;
/// the fd stays bound to the device wherever it is used afterwards.
pub(crate) fn open_in_netns(netns_path: &str, dev: &str) -> Result<OwnedFd> {
    let (netns_path, dev) = (netns_path.to_owned(), dev.to_owned());
    std::thread::spawn(move || -> Result<OwnedFd> {
        let ns = File::open(&netns_path).with_context(|| {
            format!("cannot open network namespace {netns_path}: is the testbed up?")
        })?;
        // SAFETY: setns on a valid namespace fd only affects this thread.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            bail!(
                "cannot enter network namespace {netns_path}: {} (needs root / CAP_SYS_ADMIN)",
                std::io::Error::last_os_error()
            );
        }
        open(&dev)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("TUN opener thread panicked"))?
}

/// Attaches to TUN device `dev` in the current thread's network namespace.
pub(crate) fn open(dev: &str) -> Result<OwnedFd> {
    if dev.is_empty() || dev.len() >= libc::IFNAMSIZ {
        bail!(
            "TUN device name {dev:?} must have 1 to {} bytes",
            libc::IFNAMSIZ - 1
        );
    }
    let path = c"/dev/net/tun";
    // SAFETY: plain open(2) of a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        bail!(
            "cannot open /dev/net/tun: {} (load the tun module and run as root)",
            std::io::Error::last_os_error()
        );
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
        bail!(
            "cannot attach to TUN device {dev}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(fd)
}
