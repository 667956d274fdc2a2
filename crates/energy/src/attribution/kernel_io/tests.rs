use super::*;

fn owner(tgid: u32, ns: [u64; 5]) -> OwnerRecord {
    OwnerRecord {
        tgid,
        ns,
        cgroup_id: 7,
        start_ns: 2_000_000_000,
        comm: format!("p{tgid}"),
    }
}

fn doer(tgid: u32, task_ns: u64, irq_ns: u64, comm: &str) -> DoerRecord {
    DoerRecord {
        tgid,
        task_ns,
        irq_ns,
        cgroup_id: 1,
        start_ns: 1_000_000_000,
        comm: comm.into(),
    }
}

fn proc_entry(pid: u32, start_ticks: u64, cpu_s: f64) -> Entry {
    Entry {
        pid: Some(pid),
        cpu_s,
        ..Entry::new(Key::Process(ProcKey { pid, start_ticks }))
    }
}

fn no_paths(_: u64) -> Option<String> {
    None
}

fn cx(irq_time_apart: bool) -> Context<'static> {
    Context {
        by: By::Process,
        ns_per_tick: 10_000_000,
        irq_time_apart,
        cgroup_path: &no_paths,
        label: LABEL,
    }
}

#[test]
fn growth_between_snapshots_counts_reused_tgids_whole() {
    let mut prev = Counters::default();
    prev.owners.insert(5, owner(5, [100, 0, 0, 0, 0]));
    let mut reused = owner(6, [0, 0, 40, 0, 0]);
    reused.start_ns = 9;
    prev.owners.insert(6, reused);
    prev.unowned_ns = [1, 2, 3, 4, 5];
    let mut now = Counters::default();
    now.owners.insert(5, owner(5, [250, 0, 0, 0, 0]));
    now.owners.insert(6, owner(6, [0, 0, 30, 0, 0]));
    now.owners.insert(8, owner(8, [0, 0, 0, 0, 0]));
    now.doers.insert(9, doer(9, 300, 50, "kworker/u8:1"));
    now.unowned_ns = [1, 12, 3, 4, 5];
    let mut w = Work::between(&prev, &now);
    w.owners.sort_by_key(|o| o.tgid);
    assert_eq!(w.owners.len(), 2, "{w:?}");
    assert_eq!(w.owners[0].ns, [150, 0, 0, 0, 0]);
    assert_eq!(
        w.owners[1].ns,
        [0, 0, 30, 0, 0],
        "another process under tgid 6"
    );
    assert_eq!((w.doers[0].task_ns, w.doers[0].irq_ns), (300, 50));
    assert_eq!(w.unowned_ns, [0, 10, 0, 0, 0]);
}

/// The kworker loses its writeback time, the bystander the softirq time an interrupt took from
/// it; the writer and the receiver gain theirs; the idle task's share is nobody's loss.
#[test]
fn work_moves_from_doers_to_owners() {
    let mut entries = vec![
        proc_entry(9, 100, 0.5),  // kworker
        proc_entry(20, 100, 1.0), // bystander hit by the receive softirq
        proc_entry(5, 200, 2.0),  // writer
    ];
    let work = Work {
        owners: vec![
            owner(5, [300_000_000, 100_000_000, 0, 0, 0]),
            owner(6, [0, 0, 250_000_000, 0, 0]), // receiver, no CPU of its own
        ],
        doers: vec![
            doer(9, 300_000_000, 0, "kworker/u8:1"),
            doer(20, 0, 200_000_000, "bystander"),
            doer(0, 0, 150_000_000, "swapper/0"),
        ],
        unowned_ns: [0, 0, 5_000_000, 0, 0],
    };
    let s = reattribute(&mut entries, &work, &cx(false));
    let get = |pid: u32| entries.iter().find(|e| e.pid == Some(pid)).unwrap();
    assert!((get(9).cpu_s - 0.2).abs() < 1e-9);
    assert!((get(20).cpu_s - 0.8).abs() < 1e-9);
    assert!((get(5).cpu_s - 2.4).abs() < 1e-9);
    assert!((get(5).kernel_io_cpu_s - 0.4).abs() < 1e-9);
    assert!((get(6).cpu_s - 0.25).abs() < 1e-9);
    assert_eq!(get(6).comm.as_deref(), Some("p6"));
    assert!((s.taken_cpu_s - 0.5).abs() < 1e-9);
    assert!((s.owned_cpu_s["writeback"] - 0.3).abs() < 1e-9);
    assert!((s.owned_cpu_s["network receive"] - 0.25).abs() < 1e-9);
    assert!((s.unowned_cpu_s["network receive"] - 0.005).abs() < 1e-9);
    assert_eq!(s.label, LABEL);
}

/// With interrupt time accounted apart, an interrupted task never held the frame's time
/// (ksoftirqd still does); a kworker's writeback is always its own.
#[test]
fn irq_time_apart_leaves_interrupted_tasks_whole() {
    let mut entries = vec![
        proc_entry(20, 100, 1.0),
        proc_entry(15, 100, 0.5),
        proc_entry(9, 100, 0.5),
    ];
    let work = Work {
        owners: vec![owner(5, [100_000_000, 0, 300_000_000, 0, 0])],
        doers: vec![
            doer(20, 0, 200_000_000, "bystander"),
            doer(15, 0, 100_000_000, "ksoftirqd/1"),
            doer(9, 100_000_000, 0, "kworker/0:2"),
        ],
        unowned_ns: [0; 5],
    };
    let s = reattribute(&mut entries, &work, &cx(true));
    assert!((entries[0].cpu_s - 1.0).abs() < 1e-9);
    assert!((entries[1].cpu_s - 0.4).abs() < 1e-9);
    assert!((entries[2].cpu_s - 0.4).abs() < 1e-9);
    assert!((s.taken_cpu_s - 0.2).abs() < 1e-9);
}

/// A doer is never taken below zero, and a doer of another start time (a reused pid) is not
/// the entry's process.
#[test]
fn doers_are_matched_by_identity_and_never_go_negative() {
    let mut entries = vec![proc_entry(9, 100, 0.1), proc_entry(20, 555, 1.0)];
    let work = Work {
        owners: vec![owner(5, [400_000_000, 0, 0, 0, 0])],
        doers: vec![
            doer(9, 400_000_000, 0, "kworker/u8:1"),
            doer(20, 0, 100_000_000, "other"),
        ],
        unowned_ns: [0; 5],
    };
    let s = reattribute(&mut entries, &work, &cx(false));
    assert_eq!(entries[0].cpu_s, 0.0);
    assert_eq!(entries[1].cpu_s, 1.0);
    assert!((s.taken_cpu_s - 0.1).abs() < 1e-9);
}

#[test]
fn by_cgroup_owners_and_doers_are_their_cgroups() {
    let mut entries = vec![Entry {
        cpu_s: 1.0,
        cgroup: Some("/".into()),
        ..Entry::new(Key::Cgroup("/".into()))
    }];
    let paths = |id: u64| match id {
        1 => Some("/".to_string()),
        7 => Some("/writers".to_string()),
        _ => None,
    };
    let c = Context {
        by: By::Cgroup,
        ns_per_tick: 10_000_000,
        irq_time_apart: false,
        cgroup_path: &paths,
        label: LABEL,
    };
    let mut stray = owner(3, [0, 50_000_000, 0, 0, 0]);
    stray.cgroup_id = 99;
    let work = Work {
        owners: vec![owner(5, [300_000_000, 0, 0, 0, 0]), stray],
        doers: vec![doer(9, 300_000_000, 0, "kworker/u8:1")],
        unowned_ns: [0; 5],
    };
    reattribute(&mut entries, &work, &c);
    assert!((entries[0].cpu_s - 0.7).abs() < 1e-9);
    assert_eq!(entries[1].key, Key::Cgroup("/writers".into()));
    assert!((entries[1].kernel_io_cpu_s - 0.3).abs() < 1e-9);
    assert_eq!(entries[2].key, Key::Cgroup("cgroup id 99".into()));
}

#[test]
fn the_kernel_configuration_says_whether_interrupt_time_is_apart() {
    assert!(irq_time_apart(Some("# x\nCONFIG_IRQ_TIME_ACCOUNTING=y\n")));
    assert!(!irq_time_apart(Some(
        "# CONFIG_IRQ_TIME_ACCOUNTING is not set\nCONFIG_HAVE_IRQ_TIME_ACCOUNTING=y\n"
    )));
    assert!(irq_time_apart(None));
}

#[test]
fn an_unknown_mode_is_refused_and_off_loads_nothing() {
    let root = crate::root::SysRoot::new("/");
    let e = KernelIo::open("yes", &root, None).err().expect("refused");
    assert!(e.to_string().contains("auto, bpf, bytes or off"), "{e}");
    // The io.stat rule splits by cgroup only.
    let e = KernelIo::open("bytes", &root, Some(By::Process))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("by cgroup (io.stat) only"), "{e}");
    assert!(KernelIo::open("off", &root, None).unwrap().is_none());
    let fixture = crate::root::SysRoot::new("/nonexistent-fixture");
    assert!(KernelIo::open("auto", &fixture, None).unwrap().is_none());
    assert!(KernelIo::open("bpf", &fixture, None).is_err());
}

#[test]
fn cgroup_ids_name_directories_from_the_mount() {
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir().join(format!("wattio-cgids-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a/b")).unwrap();
    let ids = cgroup_ids(&dir);
    let ino = |p: &str| std::fs::metadata(dir.join(p)).unwrap().ino();
    assert_eq!(ids[&std::fs::metadata(&dir).unwrap().ino()], "/");
    assert_eq!(ids[&ino("a/b")], "/a/b");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// By cgroup with interrupt time accounted apart, the interrupted task's cgroup never held the
/// frame's time: the root's own usage (the machine's busy time less its children's) did.
#[test]
fn by_cgroup_interrupt_time_apart_is_taken_from_the_root() {
    let mut entries = vec![
        Entry {
            cpu_s: 1.0,
            ..Entry::new(Key::Cgroup("/".into()))
        },
        Entry {
            cpu_s: 1.0,
            ..Entry::new(Key::Cgroup("/bystander".into()))
        },
    ];
    let paths = |id: u64| match id {
        1 => Some("/bystander".to_string()),
        7 => Some("/receiver".to_string()),
        _ => None,
    };
    let c = Context {
        by: By::Cgroup,
        ns_per_tick: 10_000_000,
        irq_time_apart: true,
        cgroup_path: &paths,
        label: LABEL,
    };
    let work = Work {
        owners: vec![owner(5, [0, 0, 200_000_000, 0, 0])],
        doers: vec![doer(20, 0, 200_000_000, "bystander")],
        unowned_ns: [0; 5],
    };
    let s = reattribute(&mut entries, &work, &c);
    assert!((entries[0].cpu_s - 0.8).abs() < 1e-9, "{entries:?}");
    assert_eq!(entries[1].cpu_s, 1.0);
    assert!((entries[2].cpu_s - 0.2).abs() < 1e-9);
    assert!((s.taken_cpu_s - 0.2).abs() < 1e-9);
}
