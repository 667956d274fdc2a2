//! `ipmi_device`: one request to the BMC and its answer through the kernel's IPMI device
//! interface (`/dev/ipmi0`, driver `ipmi_devintf`; kernel `Documentation/driver-api/ipmi.rst`,
//! `include/uapi/linux/ipmi.h`).
//!
//! A request is an `IPMICTL_SEND_COMMAND` ioctl with a `struct ipmi_req` addressed to the BMC
//! itself (`IPMI_SYSTEM_INTERFACE_ADDR_TYPE`, channel `IPMI_BMC_CHANNEL`) and tagged with a
//! message id of ours; its answer is queued on the descriptor, which `poll` reports readable,
//! and is taken off with `IPMICTL_RECEIVE_MSG_TRUNC` into a `struct ipmi_recv`. Answers of other
//! ids (a request given up earlier whose answer came late) and events are passed over. Every wait
//! has a deadline; the kernel's message handler also ends an unanswered request itself, with
//! completion code 0xC3 (timeout).
//!
//! This is the only unsafe code of the `ipmi` mechanism: two ioctls whose structs point at
//! buffers that live on this module's stack for the duration of the call, and one `poll`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// `IPMI_SYSTEM_INTERFACE_ADDR_TYPE`: the BMC through the local system interface.
const SYSTEM_INTERFACE_ADDR_TYPE: libc::c_int = 0x0c;
/// `IPMI_BMC_CHANNEL`.
const BMC_CHANNEL: libc::c_short = 0xf;
/// `IPMI_RESPONSE_RECV_TYPE`: the answer to one of our requests.
const RESPONSE_RECV_TYPE: libc::c_int = 1;
/// `IPMI_MAX_MSG_LENGTH`: no answer is longer.
const MAX_MSG_LENGTH: usize = 272;
/// `IPMI_MAX_ADDR_SIZE`.
const MAX_ADDR_SIZE: usize = 32;

/// `struct ipmi_system_interface_addr`.
#[repr(C)]
struct SystemInterfaceAddr {
    addr_type: libc::c_int,
    channel: libc::c_short,
    lun: libc::c_uchar,
}

/// `struct ipmi_addr`: room for any address an answer comes from.
#[repr(C)]
struct AnyAddr {
    addr_type: libc::c_int,
    channel: libc::c_short,
    data: [libc::c_uchar; MAX_ADDR_SIZE],
}

/// `struct ipmi_msg`.
#[repr(C)]
struct Msg {
    netfn: libc::c_uchar,
    cmd: libc::c_uchar,
    data_len: libc::c_ushort,
    data: *mut libc::c_uchar,
}

/// `struct ipmi_req`.
#[repr(C)]
struct Req {
    addr: *mut libc::c_uchar,
    addr_len: libc::c_uint,
    msgid: libc::c_long,
    msg: Msg,
}

/// `struct ipmi_recv`.
#[repr(C)]
struct Recv {
    recv_type: libc::c_int,
    addr: *mut libc::c_uchar,
    addr_len: libc::c_uint,
    msgid: libc::c_long,
    msg: Msg,
}

/// The architectures whose `_IOC` layout is not `asm-generic/ioctl.h`'s
/// (`arch/{powerpc,mips,sparc}/include/uapi/asm/ioctl.h`: 13 size bits, write is 4).
const OTHER_IOC_LAYOUT: bool = cfg!(any(
    target_arch = "powerpc",
    target_arch = "powerpc64",
    target_arch = "mips",
    target_arch = "mips64",
    target_arch = "sparc",
    target_arch = "sparc64"
));
const IOC_SIZE_BITS: u64 = if OTHER_IOC_LAYOUT { 13 } else { 14 };
const IOC_READ: u64 = 2;
const IOC_WRITE: u64 = if OTHER_IOC_LAYOUT { 4 } else { 1 };

/// `_IOC(dir, 'i', nr, size)`.
const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    (dir << (16 + IOC_SIZE_BITS)) | ((size as u64) << 16) | ((b'i' as u64) << 8) | nr
}

/// `IPMICTL_SEND_COMMAND`: `_IOR('i', 13, struct ipmi_req)`.
const SEND_COMMAND: u64 = ioc(IOC_READ, 13, std::mem::size_of::<Req>());
/// `IPMICTL_RECEIVE_MSG_TRUNC`: `_IOWR('i', 11, struct ipmi_recv)`.
const RECEIVE_MSG_TRUNC: u64 = ioc(IOC_READ | IOC_WRITE, 11, std::mem::size_of::<Recv>());

/// An answer: its NetFn and command, and its data, completion code first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BmcAnswer {
    pub netfn: u8,
    pub cmd: u8,
    pub data: Vec<u8>,
}

/// An open IPMI device.
pub(crate) struct BmcLink {
    file: File,
    next_msgid: libc::c_long,
}

impl BmcLink {
    /// Opens the device for requests (read and write, close-on-exec as std opens every file).
    pub(crate) fn open(path: &Path) -> io::Result<BmcLink> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(BmcLink {
            file,
            next_msgid: 1,
        })
    }

    /// Sends `netfn`/`cmd` with `data` to the BMC and waits up to `deadline` for its answer.
    /// An ioctl error is returned with the ioctl's name; the deadline passing is `TimedOut`.
    pub(crate) fn request(
        &mut self,
        netfn: u8,
        cmd: u8,
        data: &[u8],
        deadline: Duration,
    ) -> io::Result<BmcAnswer> {
        let started = Instant::now();
        let msgid = self.next_msgid;
        self.next_msgid = self.next_msgid.wrapping_add(1).max(1);
        self.send(msgid, netfn, cmd, data)?;
        loop {
            let left = deadline.saturating_sub(started.elapsed());
            if left.is_zero() || !self.wait_readable(left)? {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no answer within {:.1} s", deadline.as_secs_f64()),
                ));
            }
            match self.receive()? {
                Some((id, answer)) if id == msgid => return Ok(answer),
                // Another request's late answer, an event, or nothing after all: wait on.
                _ => continue,
            }
        }
    }

    fn send(&self, msgid: libc::c_long, netfn: u8, cmd: u8, data: &[u8]) -> io::Result<()> {
        let mut addr = SystemInterfaceAddr {
            addr_type: SYSTEM_INTERFACE_ADDR_TYPE,
            channel: BMC_CHANNEL,
            lun: 0,
        };
        // The kernel only reads the data; the struct wants a mutable pointer.
        let mut data = data.to_vec();
        let mut req = Req {
            addr: (&mut addr as *mut SystemInterfaceAddr).cast(),
            addr_len: std::mem::size_of::<SystemInterfaceAddr>() as libc::c_uint,
            msgid,
            msg: Msg {
                netfn,
                cmd,
                data_len: data.len() as libc::c_ushort,
                data: data.as_mut_ptr(),
            },
        };
        loop {
            // SAFETY: req is a valid `struct ipmi_req` whose address and data pointers point at
            // `addr` and `data`, both alive until this call returns, with their true lengths;
            // the kernel copies them in during the call and keeps no pointer.
            let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), SEND_COMMAND as _, &mut req) };
            if rc >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(named("IPMICTL_SEND_COMMAND", e));
            }
        }
    }

    /// Waits until an answer is queued, at most `left`: false when the time ran out.
    fn wait_readable(&self, left: Duration) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Rounded up, so a wait never ends just before the deadline.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: pfd is one valid pollfd, alive for the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        match rc {
            0 => Ok(false),
            r if r > 0 => Ok(true),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(true)
                } else {
                    Err(named("poll", e))
                }
            }
        }
    }

    /// Takes one message off the queue: its id and contents if it answers a request, `None`
    /// for an event or an empty queue.
    fn receive(&self) -> io::Result<Option<(libc::c_long, BmcAnswer)>> {
        let mut addr = AnyAddr {
            addr_type: 0,
            channel: 0,
            data: [0; MAX_ADDR_SIZE],
        };
        let mut data = [0u8; MAX_MSG_LENGTH];
        let mut recv = Recv {
            recv_type: 0,
            addr: (&mut addr as *mut AnyAddr).cast(),
            addr_len: std::mem::size_of::<AnyAddr>() as libc::c_uint,
            msgid: 0,
            msg: Msg {
                netfn: 0,
                cmd: 0,
                data_len: MAX_MSG_LENGTH as libc::c_ushort,
                data: data.as_mut_ptr(),
            },
        };
        // SAFETY: recv is a valid `struct ipmi_recv` whose address and data pointers point at
        // `addr` and `data` with their true sizes, alive until this call returns; the kernel
        // writes at most those sizes (truncating the data, as _TRUNC asks) and keeps no pointer.
        let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), RECEIVE_MSG_TRUNC as _, &mut recv) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                // Truncated to the buffer (cannot happen at the largest message size): the
                // kernel delivered what fits, which the decoders bound-check.
                Some(libc::EMSGSIZE) => Ok(Some((recv.msgid, answer_of(&recv, &data)))),
                _ => Err(named("IPMICTL_RECEIVE_MSG_TRUNC", e)),
            };
        }
        if recv.recv_type != RESPONSE_RECV_TYPE {
            return Ok(None);
        }
        Ok(Some((recv.msgid, answer_of(&recv, &data))))
    }
}

/// The answer `recv` describes, its length bounded by the buffer.
fn answer_of(recv: &Recv, data: &[u8; MAX_MSG_LENGTH]) -> BmcAnswer {
    let len = usize::from(recv.msg.data_len).min(MAX_MSG_LENGTH);
    BmcAnswer {
        netfn: recv.msg.netfn,
        cmd: recv.msg.cmd,
        data: data[..len].to_vec(),
    }
}

/// `e`, its message prefixed with the call that failed, its kind kept.
fn named(call: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{call}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn structs_and_ioctl_numbers_match_the_kernel_header() {
        // As gcc computes them from linux/ipmi.h on x86_64.
        assert_eq!(std::mem::size_of::<Req>(), 40);
        assert_eq!(std::mem::size_of::<Recv>(), 48);
        assert_eq!(std::mem::size_of::<SystemInterfaceAddr>(), 8);
        assert_eq!(std::mem::size_of::<AnyAddr>(), 40);
        assert_eq!(SEND_COMMAND, 0x8028_690d);
        assert_eq!(RECEIVE_MSG_TRUNC, 0xc030_690b);
    }

    #[test]
    fn a_device_that_is_not_an_ipmi_device_fails_with_the_ioctls_name() {
        // /dev/null opens like /dev/ipmi0 but knows no IPMI ioctl.
        let mut link = BmcLink::open(Path::new("/dev/null")).unwrap();
        let e = link
            .request(0x06, 0x01, &[], Duration::from_millis(100))
            .unwrap_err();
        assert_eq!(e.raw_os_error(), None);
        assert!(e.to_string().starts_with("IPMICTL_SEND_COMMAND: "), "{e}");
    }
}
