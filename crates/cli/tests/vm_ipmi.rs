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
//! A second guest has a BMC that does answer DCMI: QEMU's `ipmi-bmc-extern` behind the same KCS
//! interface, its chardev a Unix socket on which this test plays the BMC ([`StandInBmc`]: the
//! OpenIPMI "VM" serial protocol that QEMU speaks, answering Get Device ID and DCMI Get Power
//! Reading at [`STAND_IN_W`] watts, and 0xC1 to anything else). There the guest's wattio must
//! read the BMC's power in-band, labelled `measured (ipmi dcmi in-band, 1 s average)`. The answer
//! is written by this test, from the DCMI specification, not by a real BMC.
//!
//! Needs what `vm_e2e.rs` needs (root, `qemu-system-x86`, `linux-image-amd64`,
//! `busybox-static`, `cpio`); without them it says what is missing and passes, unless
//! `WATTIO_REQUIRE_VM` is set (as `make test` does), where it fails. The guest is killed when
//! the test ends, failed or not. About ten seconds each under TCG.

use std::time::Duration;

mod common;
use common::vm::{between, can_run, console_of, guest_initramfs, guest_kernel, qemu};

/// The identity the simulated BMC is given (IANA number, product, firmware 3.14 as BCD 0x14).
const BMC: &str = "ipmi-bmc-sim,id=bmc0,mfg_id=47488,product_id=22337,fwrev1=3,fwrev2=20";

/// Boots the `ipmi` guest with `bmc` (QEMU's arguments for a BMC device with id `bmc0`) behind
/// an ISA KCS interface, and returns its console once it has powered off.
fn boot_with(bmc: &[&str]) -> String {
    let (kernel, kver) = guest_kernel().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let initrd = dir.path().join("ipmi.gz");
    guest_initramfs(&initrd, &kver, &["1", "ipmi"]);
    let mut qemu = qemu(&kernel, &initrd, 512, 1);
    qemu.args(bmc).args(["-device", "isa-ipmi-kcs,bmc=bmc0"]);
    let console = console_of(qemu, Duration::from_secs(180));
    assert!(!console.contains("WATTIO-ERROR"), "{console}");
    console
}

/// `probe`'s lines about the ipmi mechanism, each also shown on the test's output.
fn ipmi_lines(probe: &str) -> String {
    let lines: Vec<&str> = probe
        .lines()
        .skip_while(|l| !l.starts_with("ipmi "))
        .take_while(|l| !l.trim().is_empty())
        .collect();
    for line in &lines {
        eprintln!("guest probe: {line}");
    }
    lines.join("\n")
}

#[test]
fn the_guests_wattio_asks_the_bmc_in_band_and_says_it_has_no_dcmi() {
    if !can_run() {
        return;
    }
    let console = boot_with(&["-device", BMC]);
    let probe = between(&console, "PROBE");
    let ipmi = ipmi_lines(probe);
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

/// The stand-in BMC's power, in whole watts.
const STAND_IN_W: u16 = 250;

/// A BMC on the other end of QEMU's `ipmi-bmc-extern` chardev (OpenIPMI's "VM" serial protocol,
/// as QEMU's `hw/ipmi/ipmi_bmc_extern.c` speaks it): a request is `msgid, netfn << 2 | lun, cmd,
/// data…, checksum`, its answer `msgid, netfn + 1 << 2 | lun, cmd, completion code, data…,
/// checksum`, the checksum making the bytes sum to 0 mod 256, each message ended by 0xA0;
/// 0xA0, 0xA1 and 0xAA inside one are sent as 0xAA and the byte with bit 4 set. What QEMU ends
/// with 0xA1 (its protocol version and capabilities) is a command to the BMC, ignored here.
struct StandInBmc;

impl StandInBmc {
    /// The answer to one request (without msgid and checksum): Get Device ID, DCMI Get Power
    /// Reading, or 0xC1 (invalid command).
    fn answer(netfn: u8, cmd: u8, data: &[u8]) -> Vec<u8> {
        match (netfn, cmd) {
            // Get Device ID: device 0x20, firmware 1.00, IPMI 2.0, manufacturer 47488,
            // product 0xDC15.
            (0x06, 0x01) => vec![
                0x00, 0x20, 0x01, 0x01, 0x00, 0x02, 0x07, 0x80, 0xB9, 0x00, 0x15, 0xDC,
            ],
            // DCMI Get Power Reading (DCMI 1.5 table 6-16): current, minimum, maximum and
            // average STAND_IN_W, over 1000 ms, active.
            (0x2C, 0x02) if data.first() == Some(&0xDC) => {
                let w = STAND_IN_W.to_le_bytes();
                let mut a = vec![0x00, 0xDC];
                for _ in 0..4 {
                    a.extend(w);
                }
                a.extend(0x6000_0000u32.to_le_bytes());
                a.extend(1000u32.to_le_bytes());
                a.push(0x40);
                a
            }
            _ => vec![0xC1],
        }
    }

    /// Answers every request on `stream` until QEMU closes it.
    fn serve(mut stream: std::os::unix::net::UnixStream) {
        use std::io::{Read, Write};
        let (mut frame, mut escaped, mut buf) = (Vec::new(), false, [0u8; 512]);
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                return;
            }
            for &b in &buf[..n] {
                match b {
                    0xA1 => frame.clear(),
                    0xAA => escaped = true,
                    0xA0 => {
                        let msg = std::mem::take(&mut frame);
                        let ok =
                            msg.len() >= 4 && msg.iter().fold(0u8, |s, &b| s.wrapping_add(b)) == 0;
                        if !ok {
                            continue;
                        }
                        let (netfn, cmd) = (msg[1] >> 2, msg[2]);
                        let mut rsp = vec![msg[0], ((netfn | 1) << 2) | (msg[1] & 3), cmd];
                        rsp.extend(Self::answer(netfn, cmd, &msg[3..msg.len() - 1]));
                        let sum = rsp.iter().fold(0u8, |s, &b| s.wrapping_add(b));
                        rsp.push(sum.wrapping_neg());
                        let mut wire = Vec::new();
                        for b in rsp {
                            if matches!(b, 0xA0 | 0xA1 | 0xAA) {
                                wire.extend([0xAA, b | 0x10]);
                            } else {
                                wire.push(b);
                            }
                        }
                        wire.push(0xA0);
                        if stream.write_all(&wire).is_err() {
                            return;
                        }
                    }
                    b if escaped => {
                        escaped = false;
                        frame.push(b & !0x10);
                    }
                    b => frame.push(b),
                }
            }
        }
    }
}

#[test]
fn the_guests_wattio_reads_a_dcmi_bmcs_power_in_band() {
    if !can_run() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("bmc.sock");
    // QEMU listens (its client mode crashes QEMU 7.2 when the chardev opens before the KCS
    // interface is attached); the BMC connects as soon as the socket is there, before the
    // guest's kernel looks for a BMC. It ends when QEMU closes the socket.
    let path = socket.clone();
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            match std::os::unix::net::UnixStream::connect(&path) {
                Ok(stream) => return StandInBmc::serve(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    let chardev = format!(
        "socket,id=bmcsock,path={},server=on,wait=off",
        socket.display()
    );
    let console = boot_with(&[
        "-chardev",
        &chardev,
        "-device",
        "ipmi-bmc-extern,id=bmc0,chardev=bmcsock",
    ]);

    let probe = between(&console, "PROBE");
    let ipmi = ipmi_lines(probe);
    assert!(
        ipmi.contains("ipmi      usable (beside the CPU total")
            && ipmi.contains("platform 0  measured (ipmi dcmi in-band, 1 s average)")
            && ipmi.contains("from /dev/ipmi0 (dcmi power reading)")
            && ipmi.contains("manufacturer id 47488 (IANA enterprise number), product id 0xDC15")
            && ipmi.contains("polled every 1 s"),
        "{probe}"
    );

    let measure = between(&console, "MEASURE");
    for line in measure.lines().filter(|l| !l.trim().is_empty()) {
        eprintln!("guest measure: {line}");
    }
    assert!(measure.contains("WATTIO-RC 0"), "{measure}");
    // `machine      platform 0 5.866 J (249.9 W), measured (ipmi dcmi in-band, …`
    let watts: f64 = measure
        .lines()
        .find_map(|l| l.strip_prefix("machine      platform 0 "))
        .and_then(|l| l.split('(').nth(1))
        .and_then(|w| w.split(" W)").next())
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no machine line: {measure}"));
    assert!(
        (watts - f64::from(STAND_IN_W)).abs() <= 0.02 * f64::from(STAND_IN_W),
        "{watts} W, the BMC said {STAND_IN_W} W: {measure}"
    );
    assert!(
        measure.contains("measured (ipmi dcmi in-band, 1 s average), 1.0 s averaging"),
        "{measure}"
    );
}
