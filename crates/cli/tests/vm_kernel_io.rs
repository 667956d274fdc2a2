//! The kernel's I/O work charged by cgroup, in a real guest: the host's cgroup controllers are
//! bound to cgroup v1, so `io.stat` is empty here, and the guest (QEMU under TCG, Debian's
//! kernel, `scripts/vm-guest-initramfs.sh … kernel-io`) mounts a pure cgroup v2 hierarchy with
//! the io and memory controllers on, so the kernel's cgroup writeback charges each cgroup the
//! bytes it dirtied. In it a cgroup `writer` writes 128 MiB to an ext2 file system on a virtio
//! disk and syncs, while a cgroup `neighbour` spins and writes nothing, under
//! `wattio record --by cgroup` twice: with the BPF program (`WATTIO_KERNEL_IO=bpf`) and with the
//! coarser io.stat rule (`bytes`). Both must give the writer the kernel's I/O work and the
//! neighbour none, and the writer's share of the owned work must agree within 10 points.
//!
//! Needs what `vm_e2e.rs` needs (root, `qemu-system-x86`, `linux-image-amd64`,
//! `busybox-static`, `cpio`); without them it says what is missing and passes, unless
//! `WATTIO_REQUIRE_VM` is set (as `make test` does), where it fails.

use std::collections::BTreeMap;
use std::time::Duration;

mod common;
use common::vm::{between, can_run, console_of, guest_initramfs, guest_kernel, qemu};

/// What one recording charged: kernel I/O CPU-seconds by entity (`cgroup /writer`,
/// `unowned`), and the labels of its kernel I/O rows.
#[derive(Debug, Default)]
struct Charged {
    cpu_s: BTreeMap<String, f64>,
    labels: Vec<String>,
}

impl Charged {
    /// The `kernel_io` rows of the CSV between `WATTIO-NAME-BEGIN` and `WATTIO-NAME-END`.
    fn from_console(console: &str, name: &str) -> Charged {
        let block = between(console, name);
        let mut r = csv::Reader::from_reader(block.trim().as_bytes());
        let mut c = Charged::default();
        for row in r.deserialize::<BTreeMap<String, String>>() {
            let row = row.unwrap_or_else(|e| panic!("{e}: {block}"));
            if row["domain"] != "kernel_io" {
                continue;
            }
            let who = format!("{} {}", row["entity"], row["cgroup"]);
            *c.cpu_s.entry(who.trim().to_string()).or_insert(0.0) +=
                row["cpu_s"].parse::<f64>().unwrap();
            if !c.labels.contains(&row["model"]) {
                c.labels.push(row["model"].clone());
            }
        }
        c
    }

    fn of(&self, who: &str) -> f64 {
        self.cpu_s.get(who).copied().unwrap_or(0.0)
    }

    /// The writer's part of the work charged to cgroups.
    fn writer_share(&self) -> f64 {
        let owned: f64 = self
            .cpu_s
            .iter()
            .filter(|(k, _)| k.starts_with("cgroup "))
            .map(|(_, v)| v)
            .sum();
        self.of("cgroup /writer") / owned.max(1e-12)
    }
}

#[test]
fn a_writers_cgroup_gets_the_kernels_io_work_by_the_program_and_by_io_stat() {
    if !can_run() {
        return;
    }
    let (kernel, kver) = guest_kernel().unwrap();
    // The disk image on a disk-backed directory (a sparse 1 GiB file).
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let initrd = dir.path().join("kio.gz");
    guest_initramfs(&initrd, &kver, &["8", "kernel-io"]);
    let disk = dir.path().join("disk.img");
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let mut qemu = qemu(&kernel, &initrd, 1024, 2);
    qemu.arg("-drive").arg(format!(
        "file={},if=virtio,format=raw,cache=unsafe",
        disk.display()
    ));
    let console = console_of(qemu, Duration::from_secs(300));
    assert!(!console.contains("WATTIO-ERROR"), "{console}");
    for mode in ["bpf", "bytes"] {
        assert!(
            console.contains(&format!("WATTIO-RC {mode} 0")),
            "record with {mode} failed: {console}"
        );
    }
    let bpf = Charged::from_console(&console, "BPF");
    let bytes = Charged::from_console(&console, "BYTES");
    eprintln!("kernel I/O CPU-s by the program: {:?}", bpf.cpu_s);
    eprintln!("kernel I/O CPU-s by io.stat: {:?}", bytes.cpu_s);
    // Writing back 128 MiB takes the guest's kernel tens of milliseconds at least: the program
    // sees all of it. The io.stat rule sees a kworker's time only where the kworker's name shows
    // a block I/O queue at one end of an interval (by_bytes.rs: the work a kworker ran between
    // two other work items is invisible to it), so of the same writeback it may see little:
    // it must give the writer some, and the writer nearly all of what it charges.
    for (rule, c, says, least_s) in [
        (
            "the program",
            &bpf,
            "writeback to the process that dirtied the pages",
            0.01,
        ),
        ("io.stat", &bytes, "coarser rule", 0.0),
    ] {
        assert!(c.of("cgroup /writer") > least_s, "{rule}: {c:?}");
        assert!(
            c.of("cgroup /neighbour") < 0.05 * c.of("cgroup /writer"),
            "{rule}: the neighbour wrote nothing: {c:?}"
        );
        assert!(c.writer_share() > 0.9, "{rule}: {c:?}");
        assert!(
            c.labels.iter().all(|l| l.contains(says)),
            "{rule}: {:?}",
            c.labels
        );
    }
    let (a, b) = (bpf.writer_share(), bytes.writer_share());
    assert!(
        (a - b).abs() <= 0.10,
        "the two rules split differently: {a:.3} vs {b:.3}"
    );
}
