//! The I/O devices in a real guest (QEMU under TCG, Debian's kernel, `scripts/vm-guest-
//! initramfs.sh … devices`): an emulated NVMe drive and an AHCI disk, driven by the guest's own
//! nvme and ahci drivers, so wattio's NVMe admin pass-through (Identify, Get Features) and ATA
//! CHECK POWER MODE through SG_IO are answered by a kernel, not a stand-in.
//!
//! - `probe --json` lists both with their power data: the NVMe drive's power-state descriptors
//!   (QEMU's controller reports one state, PS0 at 25 W, and no APST) and the AHCI disk's power
//!   mode (QEMU's disks always report active/idle) with the labelled generic HDD class.
//! - `measure` of a direct write to the NVMe drive gives it busy time, the bytes and an energy
//!   interval labelled estimated, with the upper bound at most 25 W × the window.
//! - A dry-run `power run` proposes decisions and writes nothing.
//! - `power run --apply` on the NVMe drive writes its PCIe function's runtime-PM control and
//!   restores it; on the AHCI disk the guest kernel refuses the link-policy write (the guest
//!   loads libata with `force=nolpm`, so it answers EOPNOTSUPP): a one-line error naming
//!   the knob, a non-zero exit, and every knob as it was.
//!
//! State changes (APST moving a drive between states, a disk spinning down) cannot happen in
//! QEMU: the fixture tests (crates/devices/tests/) cover them.
//!
//! Needs what `vm_e2e.rs` needs (root, `qemu-system-x86`, `linux-image-amd64`,
//! `busybox-static`, `cpio`); without them it says what is missing and passes, unless
//! `WATTIO_REQUIRE_VM` is set (as `make test` does), where it fails.

use std::time::Duration;

mod common;
use common::vm::{between, can_run, console_of, guest_initramfs, guest_kernel, qemu};

/// The two `WATTIO-KNOBS before|after …` lines of a block.
fn knobs<'a>(block: &'a str, when: &str) -> &'a str {
    let tag = format!("WATTIO-KNOBS {when} ");
    block
        .lines()
        .find_map(|l| l.strip_prefix(&tag))
        .unwrap_or_else(|| panic!("no {tag}: {block}"))
}

/// The restore record's file name, as `ls /var/lib/wattio` would show it.
const RECORD: &str = "power-restore.json";

fn rc(console: &str, name: &str) -> i32 {
    let tag = format!("WATTIO-RC {name} ");
    console
        .lines()
        .find_map(|l| l.strip_prefix(&tag))
        .unwrap_or_else(|| panic!("no {tag}: {console}"))
        .trim()
        .parse()
        .unwrap()
}

fn storage<'a>(probe: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    probe["storage"]
        .as_array()
        .and_then(|a| a.iter().find(|d| d["device"]["name"] == name))
        .unwrap_or_else(|| panic!("{name} not in probe: {probe:#}"))
}

#[test]
fn nvme_and_ahci_in_a_guest_are_probed_metered_and_managed_through_the_kernel() {
    if !can_run() {
        return;
    }
    let (kernel, kver) = guest_kernel().unwrap();
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let initrd = dir.path().join("devices.gz");
    guest_initramfs(&initrd, &kver, &["3", "devices"]);
    let mut images = Vec::new();
    for name in ["nvme.img", "sata.img"] {
        let p = dir.path().join(name);
        std::fs::File::create(&p)
            .unwrap()
            .set_len(256 << 20)
            .unwrap();
        images.push(p);
    }
    let mut vm = qemu(&kernel, &initrd, 1024, 1);
    vm.arg("-drive")
        .arg(format!(
            "file={},if=none,id=nv,format=raw",
            images[0].display()
        ))
        .args(["-device", "nvme,serial=wattio1,drive=nv"])
        .arg("-drive")
        .arg(format!(
            "file={},if=none,id=sd,format=raw",
            images[1].display()
        ))
        .args([
            "-device",
            "ahci,id=ahci",
            "-device",
            "ide-hd,drive=sd,bus=ahci.0",
        ]);
    let console = console_of(vm, Duration::from_secs(300));
    assert!(!console.contains("WATTIO-ERROR"), "{console}");

    // probe: both devices with their power data.
    let probe: serde_json::Value = serde_json::from_str(between(&console, "PROBE").trim())
        .unwrap_or_else(|e| panic!("{e}: {console}"));
    let nvme = storage(&probe, "nvme0n1");
    assert_eq!(nvme["figures"]["source"], "NvmeDescriptors", "{nvme:#}");
    let ps = nvme["figures"]["states"].as_array().unwrap();
    assert!(!ps.is_empty(), "{nvme:#}");
    let max_w = ps
        .iter()
        .map(|s| s["max_w"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(max_w > 0.0, "{nvme:#}");
    assert_eq!(nvme["current_state"], "ps0", "{nvme:#}");
    let sata = storage(&probe, "sda");
    assert_eq!(sata["device"]["kind"]["Ata"]["host"], "host0", "{sata:#}");
    // CHECK POWER MODE answered by the guest's libata: QEMU's disk is always active or idle.
    assert_eq!(sata["current_state"], "active/idle", "{sata:#}");
    assert!(
        sata["figures"]["source"]["GenericClass"].is_object(),
        "{sata:#}"
    );

    // measure: the direct write gives the NVMe drive busy time, bytes and an interval.
    assert_eq!(rc(&console, "measure"), 0, "{console}");
    let measure: serde_json::Value = serde_json::from_str(
        between(&console, "MEASURE")
            .split("WATTIO-RC")
            .next()
            .unwrap()
            .trim(),
    )
    .unwrap_or_else(|e| panic!("{e}: {console}"));
    let disk = measure["disks"]
        .as_array()
        .and_then(|a| a.iter().find(|d| d["device"] == "nvme0n1"))
        .unwrap_or_else(|| panic!("no nvme0n1 row: {measure:#}"));
    assert_eq!(disk["written_bytes"].as_u64(), Some(24 << 20), "{disk:#}");
    let window = disk["window_s"].as_f64().unwrap();
    let busy = disk["busy_s"].as_f64().unwrap();
    assert!(busy > 0.0 && busy <= window, "{disk:#}");
    let upper = disk["interval"]["upper_j"].as_f64().unwrap();
    let lower = disk["interval"]["lower_j"].as_f64().unwrap();
    assert!(
        lower <= upper && upper <= max_w * window * 1.0001,
        "{disk:#}"
    );
    assert!(upper > 0.0, "{disk:#}");
    assert!(
        disk["label"].as_str().unwrap().starts_with("estimated"),
        "{disk:#}"
    );

    // A dry run proposes and writes nothing.
    let dry = between(&console, "POWER");
    assert_eq!(rc(&console, "power"), 0, "{dry}");
    assert!(dry.contains("would write"), "no decision proposed: {dry}");
    assert_eq!(knobs(dry, "before"), knobs(dry, "after"), "{dry}");

    // --apply on the NVMe drive: written, then restored, no record left.
    let nv = between(&console, "APPLY-nvme0n1");
    assert_eq!(rc(&console, "apply-nvme0n1"), 0, "{nv}");
    assert!(
        nv.contains("wrote /sys/devices/") && nv.contains("power/control = auto"),
        "{nv}"
    );
    assert_eq!(knobs(nv, "before"), knobs(nv, "after"), "{nv}");
    assert!(!nv.contains(RECORD), "the restore record was left: {nv}");

    // --apply on the AHCI disk: the guest refuses the link policy; nothing changed.
    let sd = between(&console, "APPLY-sda");
    assert_ne!(rc(&console, "apply-sda"), 0, "{sd}");
    assert!(
        sd.lines()
            .any(|l| l.contains("link_power_management_policy") && l.contains("refused")),
        "no one-line error naming the knob: {sd}"
    );
    assert_eq!(knobs(sd, "before"), knobs(sd, "after"), "{sd}");
    eprintln!("{nv}\n{sd}");
}
