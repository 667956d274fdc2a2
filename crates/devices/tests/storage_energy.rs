//! The storage meter, its interval arithmetic and the byte split, on fixture trees and a test
//! reader whose state the test moves. Every expected figure is worked out by hand here.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wattio_devices::{
    fold_suspended, interval_of, split_by_io_bytes, storage_devices, storage_energy_between,
    DeviceError, DiskWindow, FiguresSource, IoBytesSample, PowerFigures, PowerState,
    PowerStateReader, StorageEnergy, StorageMeter, CGROUP_SHARE_LABEL, PROCESS_SHARE_LABEL,
};
use wattio_energy::SysRoot;

fn write(base: &Path, rel: &str, text: &str) {
    let p = base.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn state(id: u8, max_w: f64, idle_w: f64, active_w: Option<f64>, non_op: bool) -> PowerState {
    PowerState {
        id,
        name: format!("ps{id}"),
        max_w,
        idle_w: Some(idle_w),
        active_w,
        non_operational: non_op,
        entry_latency_us: 0,
        exit_latency_us: 0,
    }
}

/// Five states as an NVMe drive under APST has them: three operational, two non-operational
/// (test figures, not a real drive's).
fn five_states() -> PowerFigures {
    PowerFigures {
        states: vec![
            state(0, 8.0, 1.5, Some(6.0), false),
            state(1, 6.0, 1.2, Some(4.5), false),
            state(2, 4.0, 1.0, Some(3.0), false),
            state(3, 0.05, 0.04, None, true),
            state(4, 0.005, 0.003, None, true),
        ],
        source: FiguresSource::NvmeDescriptors,
    }
}

const NO_STATE: usize = usize::MAX;

/// A reader whose state the test sets (`NO_STATE`: it cannot say).
struct TestReader {
    figures: PowerFigures,
    state: Arc<AtomicUsize>,
}

impl PowerStateReader for TestReader {
    fn figures(&self) -> &PowerFigures {
        &self.figures
    }
    fn current_state(&mut self) -> Result<Option<usize>, DeviceError> {
        Ok(Some(self.state.load(Ordering::SeqCst)).filter(|s| *s != NO_STATE))
    }
    fn min_interval(&self) -> Duration {
        Duration::from_millis(10)
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn the_interval_of_a_known_residency_is_the_hand_computed_one() {
    let f = five_states();
    // 10 s: 2 s in ps0, 1 s in ps1, 1 s in ps2, 4 s in ps3, 2 s in ps4; busy 1.5 s.
    let w = DiskWindow {
        window_s: 10.0,
        residency_s: vec![2.0, 1.0, 1.0, 4.0, 2.0],
        unknown_s: 0.0,
        suspended_s: None,
        busy_s: Some(1.5),
    };
    let i = interval_of(&f, &w);
    // lower: 1.5·2 + 1.2·1 + 1.0·1 + 0.04·4 + 0.003·2 = 5.366
    // upper: 8·2 + 6·1 + 4·1 + 0.05·4 + 0.005·2 = 26.21
    assert!(close(i.lower_j, 5.366, 1e-9), "{i:?}");
    assert!(close(i.upper_j, 26.21, 1e-9), "{i:?}");
    // The busy 1.5 s over the 4 operational seconds: 0.75 s in ps0, 0.375 in ps1 and ps2.
    // ps0 0.75·6 + 1.25·1.5 = 6.375; ps1 0.375·4.5 + 0.625·1.2 = 2.4375;
    // ps2 0.375·3 + 0.625·1 = 1.75; ps3 0.16; ps4 0.006: 10.7285.
    assert!(close(i.central_j.unwrap(), 10.7285, 1e-9), "{i:?}");

    // One more second of unknown state: bounded by the least idle and the greatest max power,
    // and no central estimate.
    let mut u = w.clone();
    u.window_s = 11.0;
    u.unknown_s = 1.0;
    let j = interval_of(&f, &u);
    assert!(close(j.lower_j, 5.366 + 0.003, 1e-9) && close(j.upper_j, 26.21 + 8.0, 1e-9));
    assert_eq!(j.central_j, None);

    // 3 s runtime-suspended: 1 s from the unknown time, 2 s from the other states in
    // proportion (2/8 of each), all into ps4, the lowest-power state.
    u.suspended_s = Some(3.0);
    fold_suspended(&f, &mut u);
    let expect = [1.5, 0.75, 0.75, 3.0, 5.0];
    for (got, want) in u.residency_s.iter().zip(expect) {
        assert!(close(*got, want, 1e-9), "{:?}", u.residency_s);
    }
    assert!(close(u.unknown_s, 0.0, 1e-12));

    // A state without an active power leaves no central estimate once busy time falls in it.
    let mut g = f.clone();
    g.states[1].active_w = None;
    assert_eq!(interval_of(&g, &w).central_j, None);
    assert!(close(interval_of(&g, &w).lower_j, 5.366, 1e-9));
}

fn stat_line(sectors_read: u64, sectors_written: u64, io_ticks_ms: u64) -> String {
    format!("10 0 {sectors_read} 5 20 0 {sectors_written} 9 0 {io_ticks_ms} 14 0 0 0 0 0 0\n")
}

#[test]
fn the_meter_follows_a_drive_through_five_states() {
    let t = tempfile::tempdir().unwrap();
    let b = t.path();
    write(b, "sys/block/nvme0n1/dev", "259:0\n");
    write(b, "sys/block/nvme0n1/stat", &stat_line(100, 4000, 1000));
    write(b, "sys/block/vda/dev", "254:0\n");
    write(b, "sys/block/vda/stat", &stat_line(0, 0, 0));
    let root = SysRoot::new(b);
    let mut devices = storage_devices(&root).unwrap().into_iter();
    let (nvme, vda) = (devices.next().unwrap(), devices.next().unwrap());
    let moved = Arc::new(AtomicUsize::new(0));
    let reader = |s: &Arc<AtomicUsize>| -> Box<dyn PowerStateReader> {
        Box::new(TestReader {
            figures: five_states(),
            state: s.clone(),
        })
    };
    let vda_state = Arc::new(AtomicUsize::new(0));
    let meter = StorageMeter::new(vec![
        (nvme, Some(reader(&moved))),
        (vda, Some(reader(&vda_state))),
    ]);
    let a = meter.snapshot();
    // The test's own clock for each state: from its switch to the next.
    let mut spent = [0.0f64; 5];
    let mut since = a.at;
    for (i, s) in [0usize, 2, 3, 4, 1].into_iter().enumerate() {
        if i > 0 {
            moved.store(s, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(250));
        let now = Instant::now();
        spent[s] += now.duration_since(since).as_secs_f64();
        since = now;
    }
    write(b, "sys/block/nvme0n1/stat", &stat_line(300, 6048, 1450));
    let snap = meter.snapshot();
    spent[1] += snap.at.duration_since(since).as_secs_f64();
    let e: Vec<StorageEnergy> = storage_energy_between(&a, &snap);
    let d = &e[0];
    // Each state within two polling intervals and some scheduling slack of the test's clock.
    for (r, want) in d.residency.iter().zip(spent) {
        assert!(
            close(r.seconds, want, 0.06),
            "{} {} vs {want}",
            r.state,
            r.seconds
        );
    }
    assert!(d.unknown_s < 1e-3, "{}", d.unknown_s);
    assert_eq!(d.busy_s, Some(0.45));
    assert_eq!((d.read_bytes, d.written_bytes), (200 * 512, 2048 * 512));
    let i = d.interval.unwrap();
    let idle = [1.5, 1.2, 1.0, 0.04, 0.003];
    let max = [8.0, 6.0, 4.0, 0.05, 0.005];
    let lower: f64 = spent.iter().zip(idle).map(|(t, p)| t * p).sum();
    let upper: f64 = spent.iter().zip(max).map(|(t, p)| t * p).sum();
    assert!(
        close(i.lower_j, lower, 0.06 * 1.5 * 2.0),
        "{i:?} vs {lower}"
    );
    assert!(
        close(i.upper_j, upper, 0.06 * 8.0 * 2.0),
        "{i:?} vs {upper}"
    );
    let c = i.central_j.unwrap();
    assert!(i.lower_j <= c && c <= i.upper_j, "{i:?}");
    let label = d.label.as_deref().unwrap();
    assert!(label.starts_with("estimated (device-reported interval: the drive's NVMe power-state descriptors, state polled every 10 ms"), "{label}");
    // The virtual disk has its reader's figures but no energy of its own.
    assert_eq!(e[1].interval, None);
    assert_eq!(
        e[1].reason.as_deref(),
        Some("a virtual disk: its energy is the host's")
    );
}

#[test]
fn runtime_suspended_time_counts_in_the_lowest_power_state_between_polls() {
    let t = tempfile::tempdir().unwrap();
    let b = t.path();
    write(b, "sys/block/sda/dev", "8:0\n");
    write(b, "sys/block/sda/device/vendor", "ATA\n");
    write(b, "sys/block/sda/stat", &stat_line(0, 0, 0));
    write(
        b,
        "sys/block/sda/device/power/runtime_suspended_time",
        "5000\n",
    );
    write(b, "sys/block/sdb/dev", "8:16\n");
    write(b, "sys/block/sdb/stat", &stat_line(0, 0, 0));
    let devices = storage_devices(&SysRoot::new(b)).unwrap();
    // A reader that cannot say (as a profile-only one): every polled second is unknown.
    let cannot_say: Box<dyn PowerStateReader> = Box::new(TestReader {
        figures: five_states(),
        state: Arc::new(AtomicUsize::new(NO_STATE)),
    });
    let mut it = devices.into_iter();
    let meter = StorageMeter::new(vec![
        (it.next().unwrap(), Some(cannot_say)),
        (it.next().unwrap(), None),
    ]);
    let a = meter.snapshot();
    std::thread::sleep(Duration::from_millis(1000));
    write(
        b,
        "sys/block/sda/device/power/runtime_suspended_time",
        "5800\n",
    );
    write(b, "sys/block/sdb/stat", &stat_line(8, 0, 120));
    let z = meter.snapshot();
    let e = storage_energy_between(&a, &z);
    let (d, w) = (&e[0], e[0].window_s);
    assert_eq!(d.suspended_s, Some(0.8));
    assert!(
        close(d.residency[4].seconds, 0.8, 1e-9),
        "{:?}",
        d.residency
    );
    assert!(close(d.unknown_s, w - 0.8, 1e-9));
    let i = d.interval.unwrap();
    // ps4 for 0.8 s (0.003 to 0.005 W), the rest unknown (0.003 to 8 W).
    assert!(close(i.lower_j, 0.003 * w, 1e-9), "{i:?}");
    assert!(
        close(i.upper_j, 0.005 * 0.8 + 8.0 * (w - 0.8), 1e-9),
        "{i:?}"
    );
    assert_eq!(i.central_j, None);
    assert!(d
        .label
        .as_deref()
        .unwrap()
        .contains("runtime-PM suspended time"));
    // No reader: busy time and bytes, no interval, the reason.
    assert_eq!(e[1].busy_s, Some(0.12));
    assert_eq!(e[1].read_bytes, 8 * 512);
    assert!(e[1].interval.is_none());
    assert!(e[1]
        .reason
        .as_deref()
        .unwrap()
        .starts_with("no power figures:"));
}

/// A device's energy as the meter would give it: 2 J idle floor, 10 J central, 18 J upper.
fn disk_energy(dev: &str) -> StorageEnergy {
    StorageEnergy {
        device: "sda".into(),
        dev: dev.into(),
        kind: "ATA".into(),
        model: None,
        window_s: 4.0,
        busy_s: Some(1.0),
        read_bytes: 0,
        written_bytes: 0,
        residency: Vec::new(),
        unknown_s: 0.0,
        suspended_s: None,
        interval: Some(wattio_devices::EnergyInterval {
            lower_j: 2.0,
            central_j: Some(10.0),
            upper_j: 18.0,
        }),
        label: Some("estimated (test)".into()),
        reason: None,
        errors: Vec::new(),
    }
}

fn io_stat(sda: u64, sdb: u64) -> String {
    // Reads and writes together make the bytes; discards do not.
    format!(
        "8:0 rbytes={} wbytes={} rios=1 wios=1 dbytes=999999 dios=1\n8:16 rbytes=0 wbytes={sdb} rios=0 wios=1 dbytes=0 dios=0\n",
        sda / 4,
        sda - sda / 4
    )
}

#[test]
fn two_cgroups_writing_three_to_one_get_the_busy_part_three_to_one() {
    let t = tempfile::tempdir().unwrap();
    let b = t.path();
    let cg = "sys/fs/cgroup";
    write(
        b,
        &format!("{cg}/cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    );
    let set = |root_sda: u64, a: u64, bb: u64, nested: u64| {
        write(b, &format!("{cg}/io.stat"), &io_stat(root_sda, 0));
        write(b, &format!("{cg}/a.slice/io.stat"), &io_stat(a, 50 << 20));
        write(b, &format!("{cg}/a.slice/job/io.stat"), &io_stat(nested, 0));
        write(b, &format!("{cg}/b.slice/io.stat"), &io_stat(bb, 0));
    };
    set(10 << 20, 6 << 20, 2 << 20, 1 << 20);
    let root = SysRoot::new(b);
    let before = IoBytesSample::read(&root);
    // a.slice (with its child job) writes 30 MiB, b.slice 10 MiB on sda; a.slice also writes on
    // sdb, which is not this device. The root grows by both.
    set(50 << 20, 36 << 20, 12 << 20, 5 << 20);
    let after = IoBytesSample::read(&root);
    let s = split_by_io_bytes(&disk_energy("8:0"), &before, &after).unwrap();
    assert_eq!(s.label, format!("estimated (test), {CGROUP_SHARE_LABEL}"));
    // Idle floor apart: 2 J; the busy part is 0 to 16 J, central 8 J.
    assert_eq!((s.idle.lower_j, s.idle.upper_j), (2.0, 2.0));
    let of = |who: &str| s.shares.iter().find(|x| x.who == who).unwrap();
    let a_share =
        of("/a.slice").energy.central_j.unwrap() + of("/a.slice/job").energy.central_j.unwrap();
    let b_share = of("/b.slice").energy.central_j.unwrap();
    assert!(
        (a_share / b_share - 3.0).abs() <= 0.05 * 3.0,
        "{a_share} : {b_share}"
    );
    // The 30 MiB of a.slice and its job against the 10 of b.slice: 6 J and 2 J of 8.
    assert!(close(a_share, 6.0, 1e-9) && close(b_share, 2.0, 1e-9));
    let upper: f64 = s.shares.iter().map(|x| x.energy.upper_j).sum();
    assert!(close(upper, 16.0, 1e-9));
    // The root's own growth (40 MiB on sda by its children, none of its own) is nothing.
    assert!(s.shares.iter().all(|x| x.who != "/"));
}

#[test]
fn without_the_io_controller_processes_share_by_proc_pid_io() {
    let t = tempfile::tempdir().unwrap();
    let b = t.path();
    // Hybrid cgroups: v2 at unified, its io controller on v1.
    write(b, "sys/fs/cgroup/unified/cgroup.controllers", "\n");
    let proc_io = |pid: u32, comm: &str, read: u64, written: u64| {
        write(b, &format!("proc/{pid}/comm"), &format!("{comm}\n"));
        write(
            b,
            &format!("proc/{pid}/io"),
            &format!("rchar: 1\nwchar: 1\nsyscr: 1\nsyscw: 1\nread_bytes: {read}\nwrite_bytes: {written}\ncancelled_write_bytes: 0\n"),
        );
    };
    proc_io(100, "dd", 1000, 0);
    proc_io(200, "rsync", 0, 500);
    let root = SysRoot::new(b);
    let before = IoBytesSample::read(&root);
    proc_io(100, "dd", 1000, 9000); // +9000
    proc_io(200, "rsync", 1000, 500); // +1000
    proc_io(300, "new", 0, 0); // nothing
    let after = IoBytesSample::read(&root);
    let s = split_by_io_bytes(&disk_energy("8:0"), &before, &after).unwrap();
    assert_eq!(s.label, format!("estimated (test), {PROCESS_SHARE_LABEL}"));
    assert_eq!(s.shares.len(), 2);
    assert_eq!(
        (s.shares[0].pid, s.shares[0].who.as_str()),
        (Some(100), "dd")
    );
    assert!(close(s.shares[0].fraction, 0.9, 1e-12));
    assert!(close(s.shares[0].energy.central_j.unwrap(), 7.2, 1e-9));
    assert!(close(s.shares[1].energy.upper_j, 1.6, 1e-9));
}
