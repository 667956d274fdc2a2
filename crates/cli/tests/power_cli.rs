//! `wattio power` on fixture trees (WATTIO_ROOT), the real binary run as a child: a dry run
//! proposes decisions and writes nothing; `--apply` writes the knobs and puts every one back
//! after SIGTERM; after SIGKILL the restore record stays and the next `power restore` or
//! `power run` applies it; the disk holding / is refused without --allow-root-device; a knob
//! the kernel refuses gives a one-line error and leaves the device as it was.
//!
//! The fixture: two SATA disks, `sda` on SCSI host0 behind the PCIe function 0000:00:17.0 (with
//! runtime PM), `sdb` on host1 behind 0000:00:18.0 and holding /. No power figures (the
//! readers are not this test's): both are on the generic ladder.

mod common;

use common::{wait_until, Reaper, BIN};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const SDA_POLICY: &str = "sys/class/scsi_host/host0/link_power_management_policy";
const SDA_CONTROL: &str = "sys/devices/pci0000:00/0000:00:17.0/power/control";
const SDB_POLICY: &str = "sys/class/scsi_host/host1/link_power_management_policy";
const RECORD: &str = "var/lib/wattio/power-restore.json";

fn write(base: &Path, rel: &str, text: &str) {
    let p = base.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn symlink(base: &Path, target: &str, link: &str) {
    let l = base.join(link);
    fs::create_dir_all(l.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(base.join(target), l).unwrap();
}

/// One SATA disk `name` on `host` behind PCIe function `pci`, its knobs at their originals.
fn sata_disk(b: &Path, name: &str, host: &str, pci: &str, dev: &str) {
    let n: u32 = host[4..].parse().unwrap();
    let dir = format!(
        "sys/devices/pci0000:00/{pci}/ata{}/{host}/target{n}:0:0/{n}:0:0:0/block/{name}",
        n + 1
    );
    write(b, &format!("{dir}/dev"), &format!("{dev}\n"));
    write(b, &format!("{dir}/stat"), "     565        0    19802      114   761101  1917307 21398416   341845        0   180344   494786        0        0        0        0   494787   152827\n");
    write(b, &format!("{dir}/queue/rotational"), "1\n");
    write(b, &format!("{dir}/device/vendor"), "ATA     \n");
    write(b, &format!("{dir}/device/model"), "WDC WD40EFRX-68N\n");
    symlink(b, &dir, &format!("sys/block/{name}"));
    symlink(b, &dir, &format!("sys/class/block/{name}"));
    symlink(b, &dir, &format!("sys/dev/block/{dev}"));
    // The originals differ from both levels the manager uses, so a restore is visible.
    write(
        b,
        &format!("sys/class/scsi_host/{host}/link_power_management_policy"),
        "medium_power\n",
    );
    let pdir = format!("sys/devices/pci0000:00/{pci}");
    write(b, &format!("{pdir}/power/control"), "on\n");
    write(b, &format!("{pdir}/power/runtime_status"), "active\n");
    write(b, &format!("{pdir}/power/runtime_active_time"), "123456\n");
    write(b, &format!("{pdir}/power/runtime_suspended_time"), "789\n");
    symlink(b, &pdir, &format!("sys/bus/pci/devices/{pci}"));
}

fn fixture() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let b = t.path();
    sata_disk(b, "sda", "host0", "0000:00:17.0", "8:0");
    sata_disk(b, "sdb", "host1", "0000:00:18.0", "8:16");
    write(
        b,
        "proc/self/mountinfo",
        "22 1 8:16 / / rw,relatime shared:1 - ext4 /dev/sdb rw\n",
    );
    t
}

/// Every regular file of the tree and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                out.insert(e.path(), fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

fn read(b: &Path, rel: &str) -> String {
    fs::read_to_string(b.join(rel)).unwrap_or_default()
}

fn power(root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.env("WATTIO_ROOT", root).arg("power").args(args);
    c
}

fn run(mut c: Command) -> Output {
    c.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// The fast timings that make the generic ladder step down within a test.
const FAST: [&str; 4] = ["--idle-timeout", "0.3", "--interval", "0.05"];

#[test]
fn a_dry_run_proposes_decisions_and_writes_nothing() {
    let t = fixture();
    let before = snapshot(t.path());
    let mut c = power(t.path(), &["run", "--duration", "1.5"]);
    c.args(FAST);
    let o = run(c);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    // The originals (medium_power) are first set to the performance level, then after the
    // idle timeout the generic low level is proposed, with the exact writes.
    assert!(
        out.contains("sda (as found) → performance: would write /sys/class/scsi_host/host0/link_power_management_policy = max_performance;"),
        "{out}"
    );
    assert!(
        out.contains("sda performance → low-power (generic): would write /sys/class/scsi_host/host0/link_power_management_policy = med_power_with_dipm, /sys/devices/pci0000:00/0000:00:17.0/power/control = auto; trade unknown (no figures for these knobs)"),
        "{out}"
    );
    assert!(err.contains("sdb: skipped: holds /"), "{err}");
    assert!(!out.contains("sdb"), "{out}");
    assert_eq!(snapshot(t.path()), before, "a dry run changed a file");
}

#[test]
fn apply_writes_the_knobs_follows_accesses_and_restores_every_knob_on_sigterm() {
    let t = fixture();
    let b = t.path();
    let before = snapshot(b);
    let mut c = power(b, &["run", "--apply"]);
    c.args(FAST);
    if !is_root() {
        let o = run(c);
        assert!(
            text(&o.stderr).contains("needs root"),
            "{}",
            text(&o.stderr)
        );
        return;
    }
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reaper = Reaper(vec![child]);
    wait_until(10, "the low level written", || {
        read(b, SDA_POLICY) == "med_power_with_dipm\n" && read(b, SDA_CONTROL) == "auto\n"
    });
    // Written before the first knob: every knob with its original.
    let record = read(b, RECORD);
    assert!(
        record.contains("\"original\": \"medium_power\""),
        "{record}"
    );
    assert!(
        record.contains("/sys/devices/pci0000:00/0000:00:17.0/power/control"),
        "{record}"
    );
    // An access (the read counter moves): back to performance.
    let stat = b.join("sys/block/sda/stat");
    fs::write(
        &stat,
        fs::read_to_string(&stat).unwrap().replacen("565", "566", 1),
    )
    .unwrap();
    wait_until(10, "the performance level after an access", || {
        read(b, SDA_POLICY) == "max_performance\n" && read(b, SDA_CONTROL) == "on\n"
    });
    wait_until(10, "the low level again", || {
        read(b, SDA_POLICY) == "med_power_with_dipm\n"
    });
    // The root disk was never touched.
    assert_eq!(read(b, SDB_POLICY), "medium_power\n");
    let o = common::terminate(reaper.0.pop().unwrap());
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(
        out.contains("low-power (generic) → performance: wrote"),
        "{out}"
    );
    assert!(err.contains("knobs restored: 2 knob(s) restored"), "{err}");
    assert!(
        !b.join(RECORD).exists(),
        "the record is left after a clean end"
    );
    let mut after = snapshot(b);
    // The access the test made is the one change that stays.
    after.insert(
        b.join("sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda/stat"),
        before[&b.join(
            "sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda/stat",
        )]
            .clone(),
    );
    assert_eq!(after, before, "a knob was not restored byte for byte");
}

/// Starts `power run --apply` on sda, waits for its low-level writes, and SIGKILLs it.
fn killed_run(b: &Path) {
    let mut c = power(b, &["run", "--apply", "--device", "sda"]);
    c.args(FAST).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    wait_until(10, "the low level written", || {
        read(b, SDA_CONTROL) == "auto\n"
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(b.join(RECORD).exists(), "no record after SIGKILL");
    assert_eq!(read(b, SDA_POLICY), "med_power_with_dipm\n");
}

#[test]
fn after_sigkill_the_record_remains_and_the_next_start_restores_every_knob() {
    if !is_root() {
        return;
    }
    let t = fixture();
    let b = t.path();
    let before = snapshot(b);
    killed_run(b);
    let status = run(power(b, &["status"]));
    assert!(
        text(&status.stdout).contains("restore record pending"),
        "{}",
        text(&status.stdout)
    );
    let o = run(power(b, &["restore"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("restore record applied: 2 knob(s) restored"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(snapshot(b), before);

    // Killed again: this time the next `power run` applies the record first and says so.
    killed_run(b);
    let o = run(power(b, &["run", "--device", "sda", "--duration", "0.2"]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr)
            .contains("a restore record left by a killed run was applied: 2 knob(s) restored"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(
        snapshot(b),
        before,
        "the dry run after the restore wrote something"
    );
}

#[test]
fn the_disk_holding_root_is_refused_without_the_flag() {
    let t = fixture();
    let before = snapshot(t.path());
    let o = run(power(
        t.path(),
        &["run", "--device", "sdb", "--duration", "0.2"],
    ));
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("sdb: it holds / (the root file system); add --allow-root-device"),
        "{err}"
    );
    assert_eq!(
        err.lines().filter(|l| l.contains("error")).count(),
        1,
        "{err}"
    );
    let o = run(power(
        t.path(),
        &[
            "run",
            "--device",
            "sdb",
            "--allow-root-device",
            "--duration",
            "0.5",
        ],
    ));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("sdb (as found) → performance: would write"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(snapshot(t.path()), before);
}

#[test]
fn a_knob_that_refuses_the_write_gives_one_line_and_leaves_the_device_unchanged() {
    if !is_root() {
        return;
    }
    let t = fixture();
    let b = t.path();
    // The kernel refuses writes to /proc/version (EIO, even for root): it stands in for a
    // link policy this kernel does not support.
    fs::remove_file(b.join(SDA_POLICY)).unwrap();
    std::os::unix::fs::symlink("/proc/version", b.join(SDA_POLICY)).unwrap();
    let before = snapshot(b);
    let o = run({
        let mut c = power(
            b,
            &["run", "--apply", "--device", "sda", "--duration", "0.5"],
        );
        c.args(FAST);
        c
    });
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let line = err.lines().find(|l| l.contains("refused")).expect(&err);
    assert!(
        line.contains("knob /sys/class/scsi_host/host0/link_power_management_policy refused `max_performance`"),
        "{line}"
    );
    assert_eq!(read(b, SDA_CONTROL), "on\n");
    assert!(!b.join(RECORD).exists(), "{err}");
    assert_eq!(snapshot(b), before);

    // A directory where the knob should be: it cannot even be read; the device is left alone.
    fs::remove_file(b.join(SDA_POLICY)).unwrap();
    fs::create_dir(b.join(SDA_POLICY)).unwrap();
    let o = run(power(
        b,
        &["run", "--apply", "--device", "sda", "--duration", "0.3"],
    ));
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "sda: cannot read knob /sys/class/scsi_host/host0/link_power_management_policy"
        ),
        "{err}"
    );
    assert_eq!(read(b, SDA_CONTROL), "on\n");
}

#[test]
fn status_shows_knobs_runtime_pm_and_no_pending_record() {
    let t = fixture();
    let o = run(power(t.path(), &["status"]));
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        out.contains("/sys/class/scsi_host/host0/link_power_management_policy = medium_power"),
        "{out}"
    );
    assert!(out.contains("/sys/bus/pci/devices/0000:00:17.0: control on, active, active 123456 ms, suspended 789 ms"), "{out}");
    assert!(out.contains("no restore record pending"), "{out}");
}

#[test]
fn a_ghost_hint_on_the_socket_wakes_a_device_in_its_low_level() {
    let t = fixture();
    let sock = t.path().join("hints");
    let mut c = power(
        t.path(),
        &["run", "--device", "sda", "--duration", "2", "--hints"],
    );
    c.arg(&sock)
        .args(["--idle-timeout", "0.3", "--interval", "0.05"]);
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reaper = Reaper(vec![child]);
    wait_until(10, "the hint socket", || sock.exists());
    // After the step down (0.3 s idle), a hint: no access, yet the device goes back up.
    std::thread::sleep(std::time::Duration::from_millis(900));
    let tx = std::os::unix::net::UnixDatagram::unbound().unwrap();
    tx.send_to(b"sda 2 5 fg 32768\nnot-a-hint\n", &sock)
        .unwrap();
    let mut reaper = reaper;
    let o = reaper.0.pop().unwrap().wait_with_output().unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    let down = out.find("performance → low-power (generic)").expect(&out);
    let up = out.find("low-power (generic) → performance").expect(&out);
    assert!(down < up, "{out}");
    assert!(err.contains("ghost hint ignored: `not-a-hint`"), "{err}");
    assert!(!sock.exists(), "the socket file is left behind");
}
