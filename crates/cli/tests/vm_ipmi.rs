//! The `ipmi` mechanism in-band, in a real guest: QEMU's simulated BMC (`ipmi-bmc-sim`) behind
//! an ISA KCS interface, Debian's kernel with its IPMI drivers (`ipmi_msghandler`, `ipmi_si`,
//! `ipmi_devintf`) making `/dev/ipmi0`, and the guest's `wattio probe` and `wattio measure
//! --domains platform -- true` (`scripts/vm-guest-initramfs.sh … ipmi`). No `ipmitool` is in
//! the guest, so every answer came through wattio's own ioctls.
//!
//! The simulated BMC answers Get Device ID with the identity given on QEMU's command line, which
//! `probe` must print; it implements no DCMI (its NetFn 0x2C has no commands), so Get Power
//! Reading comes back with completion code 0xC1 and wattio must say there is no DCMI power
//! reading, with that code, and give no figure.
//!
//! Needs what `vm_e2e.rs` needs (root, `qemu-system-x86`, `linux-image-amd64`,
//! `busybox-static`, `cpio`); without them it says what is missing and passes, unless
//! `WATTIO_REQUIRE_VM` is set (as `make test` does), where it fails. The guest is killed when
//! the test ends, failed or not. About ten seconds under TCG.

use std::time::Duration;

mod common;
use common::vm::{between, can_run, console_of, guest_initramfs, guest_kernel, qemu};

/// The identity the simulated BMC is given (IANA number, product, firmware 3.14 as BCD 0x14).
const BMC: &str = "ipmi-bmc-sim,id=bmc0,mfg_id=47488,product_id=22337,fwrev1=3,fwrev2=20";

#[test]
fn the_guests_wattio_asks_the_bmc_in_band_and_says_it_has_no_dcmi() {
    if !can_run() {
        return;
    }
    let (kernel, kver) = guest_kernel().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let initrd = dir.path().join("ipmi.gz");
    guest_initramfs(&initrd, &kver, &["1", "ipmi"]);
    let mut qemu = qemu(&kernel, &initrd, 512, 1);
    qemu.args(["-device", BMC, "-device", "isa-ipmi-kcs,bmc=bmc0"]);
    let console = console_of(qemu, Duration::from_secs(180));
    assert!(!console.contains("WATTIO-ERROR"), "{console}");

    let probe = between(&console, "PROBE");
    let ipmi: Vec<&str> = probe
        .lines()
        .skip_while(|l| !l.starts_with("ipmi "))
        .take_while(|l| !l.trim().is_empty())
        .collect();
    for line in &ipmi {
        eprintln!("guest probe: {line}");
    }
    let ipmi = ipmi.join("\n");
    // Get Device ID reached the BMC: the identity is QEMU's command line's, nothing else's.
    assert!(
        ipmi.contains(
            "note: the BMC behind /dev/ipmi0 answers in-band: IPMI 2.0, manufacturer id 47488 (IANA enterprise number), product id 0x5741, device id 0x20 revision 0, firmware 3.14"
        ),
        "{probe}"
    );
    // Get Power Reading reached it too, and was refused by it.
    assert!(
        ipmi.contains(
            "ipmi      not usable: no DCMI power reading on this BMC (completion code 0xC1: invalid command)"
        ),
        "{probe}"
    );
    assert!(!probe.contains("platform 0"), "no figure: {probe}");

    let measure = between(&console, "MEASURE");
    for line in measure.lines().filter(|l| !l.trim().is_empty()) {
        eprintln!("guest measure: {line}");
    }
    assert!(measure.contains("WATTIO-RC 2"), "{measure}");
    assert!(
        measure.contains("--domains asks for platform but no meter of it can be read here")
            && measure.contains(
                "ipmi: no DCMI power reading on this BMC (completion code 0xC1: invalid command)"
            ),
        "{measure}"
    );
    assert!(
        !measure
            .lines()
            .any(|l| l.trim_start().starts_with("platform ")),
        "no figure: {measure}"
    );
}
