//! The kernel's NVMe admin pass-through, `NVME_IOCTL_ADMIN_CMD` on `/dev/nvmeN`
//! (include/uapi/linux/nvme_ioctl.h), for the read-only admin commands wattio sends:
//! Identify (06h) and Get Features (0Ah).

use std::fs::File;
use std::os::fd::AsRawFd;

/// `struct nvme_admin_cmd` (= `struct nvme_passthru_cmd`) of include/uapi/linux/nvme_ioctl.h:
/// 72 bytes.
#[repr(C)]
#[derive(Default)]
struct NvmePassthruCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

const _: () = assert!(std::mem::size_of::<NvmePassthruCmd>() == 72);

/// `_IOWR('N', 0x41, struct nvme_admin_cmd)` in the generic `_IOC` encoding
/// (include/uapi/asm-generic/ioctl.h: direction read|write (3) << 30, size 72 << 16, type 'N'
/// << 8, number 0x41), which x86, ARM, RISC-V, LoongArch and s390 use; powerpc, MIPS, SPARC and
/// Alpha encode directions in three bits and are not supported.
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64",
    target_arch = "loongarch64",
    target_arch = "s390x"
))]
const NVME_IOCTL_ADMIN_CMD: u64 = (3 << 30) | (72 << 16) | ((b'N' as u64) << 8) | 0x41;

/// Admin opcode Identify.
pub const OPCODE_IDENTIFY: u8 = 0x06;
/// Admin opcode Get Features.
pub const OPCODE_GET_FEATURES: u8 = 0x0a;
/// The deadline of each command: 0, the kernel's own admin timeout (`nvme_core.admin_timeout`,
/// 60 s by default), as nvme-cli leaves it. A shorter one is not a safe deadline: an admin
/// command that times out makes the PCIe driver reset the whole controller
/// (drivers/nvme/host/pci.c, `nvme_timeout`), the disk holding `/` perhaps.
const TIMEOUT_MS: u32 = 0;

/// Sends admin command `opcode` with `cdw10` and a data buffer of `data.len()` bytes (read
/// from the controller); returns the completion's dword 0.
pub fn admin(dev: &File, opcode: u8, cdw10: u32, data: &mut [u8]) -> std::io::Result<u32> {
    let len = u32::try_from(data.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    let mut cmd = NvmePassthruCmd {
        opcode,
        cdw10,
        addr: if data.is_empty() {
            0
        } else {
            data.as_mut_ptr() as u64
        },
        data_len: len,
        timeout_ms: TIMEOUT_MS,
        ..Default::default()
    };
    // SAFETY: `cmd` is a live, properly laid out `struct nvme_admin_cmd` (72 bytes, checked
    // above); `addr`/`data_len` describe `data`, which is borrowed mutably for the whole call
    // and outlives it, so the kernel writes at most `data.len()` bytes into memory we own. The
    // fd is open for the duration of the call. The commands sent are read-only (Identify, Get
    // Features) and carry no metadata buffer.
    let rc = unsafe {
        libc::ioctl(
            dev.as_raw_fd(),
            NVME_IOCTL_ADMIN_CMD as _,
            &mut cmd as *mut NvmePassthruCmd,
        )
    };
    match rc {
        0 => Ok(cmd.result),
        r if r < 0 => Err(std::io::Error::last_os_error()),
        // A positive return is the NVMe status field of a command the controller failed.
        status => Err(std::io::Error::other(format!(
            "the controller failed the command (NVMe status {status:#x}: {})",
            status_text(status as u32)
        ))),
    }
}

/// The status field's parts (NVM Express Base Specification 2.0, "Status Field Definition":
/// bit 14 Do Not Retry, bits 10:8 Status Code Type, bits 7:0 Status Code), with the generic
/// codes a read-only admin command meets named.
fn status_text(status: u32) -> String {
    let (dnr, sct, sc) = ((status >> 14) & 1, (status >> 8) & 7, status & 0xff);
    let name = match (sct, sc) {
        (0, 0x01) => "Invalid Command Opcode",
        (0, 0x02) => "Invalid Field in Command",
        (0, 0x06) => "Internal Error",
        (1, 0x0d) => "Feature Identifier Not Saveable",
        (1, 0x0e) => "Feature Not Changeable",
        _ => "see the specification's status codes",
    };
    format!(
        "status code type {sct}, code {sc:#04x}, {name}{}",
        if dnr == 1 { ", do not retry" } else { "" }
    )
}

#[cfg(test)]
mod status_tests {
    #[test]
    fn qemus_answer_to_an_apst_query_reads_as_invalid_field() {
        assert_eq!(
            super::status_text(0x4002),
            "status code type 0, code 0x02, Invalid Field in Command, do not retry"
        );
    }
}
