//! Cache manager against a real store in a temp dir and a power manager on virtual time.

use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wattio_cache::{
    CacheConfig, CacheManager, CacheStatus, GhostNotice, MemStore, ReadSource, Store, StoreError,
    WriteOptions,
};
use wattio_power::{DeviceHandle, GhostHint, ModeId, PowerManager, Profile, VirtualClock};
use wattio_progress::Sink;

struct Rig {
    pm: Arc<PowerManager>,
    disk: DeviceHandle,
    net: DeviceHandle,
    standby: ModeId,
    active: ModeId,
    cam: ModeId,
}

fn rig(knob: u8) -> Rig {
    let p = Profile::builtin("paper-2004").unwrap();
    let pm =
        Arc::new(PowerManager::new(Arc::new(VirtualClock::new()), p.base_power_w, knob).unwrap());
    let standby = p.storage.mode_by_name("standby").unwrap();
    let active = p.storage.high_mode();
    let cam = p.network.high_mode();
    let disk = pm.register_device(p.storage.clone(), active).unwrap();
    let net = pm.register_device(p.network.clone(), cam).unwrap();
    Rig {
        pm,
        disk,
        net,
        standby,
        active,
        cam,
    }
}

/// A power manager on a virtual clock with the paper's disk (in `disk_mode`) and network (CAM).
fn on_clock(
    disk_mode: &str,
) -> (
    Arc<VirtualClock>,
    Arc<PowerManager>,
    Profile,
    DeviceHandle,
    DeviceHandle,
) {
    let clock = Arc::new(VirtualClock::new());
    let p = Profile::builtin("paper-2004").unwrap();
    let pm = Arc::new(PowerManager::new(clock.clone(), p.base_power_w, 50).unwrap());
    let mode = p.storage.mode_by_name(disk_mode).unwrap();
    let disk = pm.register_device(p.storage.clone(), mode).unwrap();
    let net = pm
        .register_device(p.network.clone(), p.network.high_mode())
        .unwrap();
    (clock, pm, p, disk, net)
}

#[test]
fn writes_are_queued_in_standby_and_flushed_on_spin_up() {
    let r = rig(50);
    let dir = tempfile::tempdir().unwrap();
    let c = CacheManager::open(&CacheConfig::new(dir.path()), r.pm.clone(), r.disk, r.net).unwrap();
    r.pm.notify(r.disk, r.standby).unwrap();
    c.put_data("a", vec![1u8; 1000]).unwrap();
    c.put_metadata("a", b"etag: 1".to_vec()).unwrap();
    c.put_data("b", vec![2u8; 10]).unwrap();
    c.rename("c", "b").unwrap();
    assert_eq!(c.queued_bytes(), 1 + 1000 + 1 + 7 + 1 + 10 + 2);
    // Nothing on disk yet: a second manager opening the same dir sees no objects.
    let files = std::fs::read_dir(dir.path().join("objects"))
        .unwrap()
        .count();
    assert_eq!(files, 0);
    // Served from memory meanwhile; status without touching the disk.
    assert_eq!(c.get_data("a").unwrap(), vec![1u8; 1000]);
    assert_eq!(
        c.cache_status("c").unwrap(),
        CacheStatus::Present { size: 10 }
    );
    assert_eq!(c.cache_status("b").unwrap(), CacheStatus::NotPresent);
    assert_eq!(c.get_metadata("a").unwrap(), b"etag: 1");
    // Disk spins up: the callback flushes.
    r.pm.notify(r.disk, r.active).unwrap();
    assert_eq!(c.queued_bytes(), 0);
    assert_eq!(c.flushes(), 1);
    drop(c);
    let c2 =
        CacheManager::open(&CacheConfig::new(dir.path()), r.pm.clone(), r.disk, r.net).unwrap();
    assert_eq!(c2.names(), vec!["a".to_string(), "c".to_string()]);
    assert_eq!(c2.get_data("c").unwrap(), vec![2u8; 10]);
    assert_eq!(c2.get_metadata("a").unwrap(), b"etag: 1");
}

#[test]
fn full_queue_is_flushed_and_never_passes_cap() {
    let r = rig(50);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = CacheConfig::new(dir.path());
    cfg.writes.queue_cap_bytes = 3000;
    let c = CacheManager::open(&cfg, r.pm.clone(), r.disk, r.net).unwrap();
    r.pm.notify(r.disk, r.standby).unwrap();
    for i in 0..10 {
        c.put_data(&format!("o{i}"), vec![i as u8; 999]).unwrap();
        assert!(c.queued_bytes() <= 3000);
    }
    assert!(c.flushes() >= 3);
    // An object larger than the cap is written through.
    c.put_data("big", vec![7u8; 5000]).unwrap();
    assert!(c.queued_bytes() <= 3000);
    assert_eq!(c.get_data("big").unwrap().len(), 5000);
}

#[test]
fn standby_disk_prefers_network_for_small_objects_and_hints() {
    let r = rig(50);
    let dir = tempfile::tempdir().unwrap();
    let c = CacheManager::open(&CacheConfig::new(dir.path()), r.pm.clone(), r.disk, r.net).unwrap();
    c.put_data("small", vec![0u8; 32 * 1024]).unwrap();
    c.put_data("large", vec![0u8; 512 * 1024]).unwrap();
    let hints: Arc<Mutex<Vec<(ReadSource, GhostHint)>>> = Arc::default();
    let h2 = hints.clone();
    c.set_ghost_sink(Sink::new(move |g: &GhostNotice| {
        h2.lock().unwrap().push((g.to, g.hint))
    }));
    assert_eq!(
        c.cache_status("small").unwrap(),
        CacheStatus::Present { size: 32768 }
    );
    assert!(hints.lock().unwrap().is_empty());
    r.pm.notify(r.disk, r.standby).unwrap();
    assert_eq!(r.pm.current_mode(r.net).unwrap(), r.cam);
    assert_eq!(
        c.cache_status("small").unwrap(),
        CacheStatus::NetworkPreferred { size: 32768 }
    );
    assert_eq!(
        c.cache_status("large").unwrap(),
        CacheStatus::Present { size: 512 * 1024 }
    );
    let h = hints.lock().unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].0, ReadSource::Disk);
    assert!(h[0].1.delta_t_s > 0.0 && h[0].1.delta_e_j > 0.0);
}

#[test]
fn errors_are_clear() {
    let r = rig(50);
    let dir = tempfile::tempdir().unwrap();
    let c = CacheManager::open(&CacheConfig::new(dir.path()), r.pm.clone(), r.disk, r.net).unwrap();
    assert!(c
        .get_data("nope")
        .unwrap_err()
        .to_string()
        .contains("no object \"nope\""));
    assert!(c
        .put_data("", vec![])
        .unwrap_err()
        .to_string()
        .contains("bad object name"));
    assert!(c.delete("nope").is_err());
    // Unwritable root.
    let f = dir.path().join("file");
    std::fs::write(&f, b"x").unwrap();
    let e = CacheManager::open(&CacheConfig::new(&f), r.pm.clone(), r.disk, r.net)
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("cannot create cache directory"),
        "{e}"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Put(u8, u16),
    Meta(u8),
    Rename(u8, u8),
    Delete(u8),
    Spin(bool),
    Get(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12, 0u16..1500).prop_map(|(n, s)| Op::Put(n, s)),
        1 => (0u8..12).prop_map(Op::Meta),
        1 => (0u8..12, 0u8..12).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (0u8..12).prop_map(Op::Delete),
        2 => any::<bool>().prop_map(Op::Spin),
        1 => (0u8..12).prop_map(Op::Get),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
    /// Against a model: the queue never passes its cap, reads see the latest write, and after a
    /// reopen every write is on disk (no lost-write reports on a healthy disk).
    #[test]
    fn model_check(ops in proptest::collection::vec(op(), 1..60), cap in 500u64..5000) {
        let r = rig(50);
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = CacheConfig::new(dir.path());
        cfg.writes.queue_cap_bytes = cap;
        let mut model: HashMap<String, Vec<u8>> = HashMap::new();
        {
            let c = CacheManager::open(&cfg, r.pm.clone(), r.disk, r.net).unwrap();
            for (i, o) in ops.iter().enumerate() {
                match o {
                    Op::Put(n, s) => {
                        let d = vec![(i % 251) as u8; *s as usize];
                        c.put_data(&format!("n{n}"), d.clone()).unwrap();
                        model.insert(format!("n{n}"), d);
                    }
                    Op::Meta(n) => { let _ = c.put_metadata(&format!("n{n}"), vec![1, 2, 3]); }
                    Op::Rename(a, b) => {
                        let (a, b) = (format!("n{a}"), format!("n{b}"));
                        if c.rename(&b, &a).is_ok() && a != b {
                            if let Some(d) = model.remove(&a) { model.insert(b, d); } else { model.remove(&b); }
                        }
                    }
                    Op::Delete(n) => { if c.delete(&format!("n{n}")).is_ok() { model.remove(&format!("n{n}")); } }
                    Op::Spin(up) => { r.pm.notify(r.disk, if *up { r.active } else { r.standby }).unwrap(); }
                    Op::Get(n) => {
                        let name = format!("n{n}");
                        match model.get(&name) {
                            Some(d) => prop_assert_eq!(&c.get_data(&name).unwrap(), d),
                            None => prop_assert!(c.get_data(&name).is_err()),
                        }
                    }
                }
                prop_assert!(c.queued_bytes() <= cap);
            }
            prop_assert!(c.lost_writes().is_empty());
        } // drop flushes
        let c = CacheManager::open(&cfg, r.pm.clone(), r.disk, r.net).unwrap();
        for (n, d) in &model {
            prop_assert_eq!(&c.get_data(n).unwrap(), d);
        }
        let with_data: Vec<String> = c.names().into_iter().filter(|n| c.get_data(n).is_ok()).collect();
        prop_assert_eq!(with_data.len(), model.len());
    }
}

#[test]
fn failed_flush_reports_every_lost_write() {
    let r = rig(50);
    let dir = tempfile::tempdir().unwrap();
    let c = CacheManager::open(&CacheConfig::new(dir.path()), r.pm.clone(), r.disk, r.net).unwrap();
    r.pm.notify(r.disk, r.standby).unwrap();
    c.put_data("a", vec![1; 10]).unwrap();
    c.put_metadata("a", b"m".to_vec()).unwrap();
    c.put_data("b", vec![2; 10]).unwrap();
    // Break the store under the manager: the objects directory becomes a plain file (fails even
    // for root, unlike a permission change).
    let objects = dir.path().join("objects");
    std::fs::remove_dir_all(&objects).unwrap();
    std::fs::write(&objects, b"not a directory").unwrap();
    // The disk spins up: the callback flushes, every operation fails and is reported.
    r.pm.notify(r.disk, r.active).unwrap();
    let lost = c.lost_writes();
    assert_eq!(lost.len(), 3, "{lost:?}");
    assert!(lost[0].op.contains("PutData \"a\""), "{lost:?}");
    assert!(lost[1].op.contains("PutMetadata \"a\""), "{lost:?}");
    assert!(lost[2].op.contains("PutData \"b\""), "{lost:?}");
    assert!(
        lost.iter().all(|l| l.error.contains("cannot create")),
        "{lost:?}"
    );
    assert_eq!(c.queued_bytes(), 0);
}

#[test]
fn controller_ghost_hints_spin_up_the_disk_and_flush_the_queue() {
    use wattio_power::{DiskController, DiskPolicy, GhostPolicy};
    let (clock, pm, p, disk, net) = on_clock("performance-idle");
    let ctl = Arc::new(
        DiskController::new(
            pm.clone(),
            disk,
            DiskPolicy::Stpm {
                knob: 50.0,
                base_power_w: p.base_power_w,
            },
            Some(GhostPolicy::Paper),
        )
        .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let c = CacheManager::open(&CacheConfig::new(dir.path()), pm.clone(), disk, net).unwrap();
    let ctl2 = ctl.clone();
    c.set_ghost_sink(Sink::new(move |g: &GhostNotice| {
        if g.to == ReadSource::Disk {
            ctl2.on_ghost(g.hint).unwrap();
        }
    }));
    for i in 0..5 {
        c.put_data(&format!("small{i}"), vec![i; 32 * 1024])
            .unwrap();
    }
    // Idle: STPM takes the disk to standby (eq. 3 ladder at K = 50).
    clock.advance_to(100.0);
    ctl.poll().unwrap();
    assert_eq!(
        pm.current_mode(disk).unwrap(),
        p.storage.mode_by_name("standby").unwrap()
    );
    c.put_data("fetched", vec![9; 1000]).unwrap();
    assert!(c.queued_bytes() > 0, "deferred while in standby");
    // A burst of small reads: each is cheaper from the network, each sends a ghost hint.
    for i in 0..5 {
        clock.advance_to(100.0 + 0.2 * i as f64);
        assert_eq!(
            c.cache_status(&format!("small{i}")).unwrap(),
            CacheStatus::NetworkPreferred { size: 32768 }
        );
    }
    // The fifth hint passed the threshold: the disk is spinning up; when it arrives, the
    // power manager's callback flushes the queue.
    clock.advance_to(100.8 + 0.82);
    assert_eq!(ctl.poll().unwrap(), Some(p.storage.high_mode()));
    assert_eq!(c.queued_bytes(), 0);
    assert_eq!(
        c.cache_status("small0").unwrap(),
        CacheStatus::Present { size: 32768 }
    );
    drop(c);
    let files = std::fs::read_dir(dir.path().join("objects"))
        .unwrap()
        .count();
    assert_eq!(files, 6);
}

#[test]
fn max_lost_work_bounds_the_age_of_queued_writes() {
    let (clock, pm, _, disk, net) = on_clock("standby");
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = CacheConfig::new(dir.path());
    cfg.writes.max_lost_work_s = Some(60.0);
    let c = CacheManager::open(&cfg, pm.clone(), disk, net).unwrap();
    c.put_data("a", vec![1; 100]).unwrap();
    clock.advance_to(30.0);
    c.put_data("b", vec![2; 100]).unwrap();
    assert!(!c.flush_if_too_old());
    assert_eq!(c.flushes(), 0);
    // 61 s after the first queued write: the next write flushes the old ones first.
    clock.advance_to(61.0);
    c.put_data("c", vec![3; 100]).unwrap();
    assert_eq!(c.flushes(), 1);
    assert_eq!(c.queued_bytes(), 1 + 100);
    // A timer catches an idle application too.
    clock.advance_to(200.0);
    assert!(c.flush_if_too_old());
    assert_eq!(c.queued_bytes(), 0);
    assert!(!c.flush_if_too_old());
}

/// A store that records the order of operations (over a `MemStore`).
#[derive(Default)]
struct Recording {
    inner: MemStore,
    ops: Arc<Mutex<Vec<String>>>,
}

impl Recording {
    fn note(&self, what: String) {
        self.ops.lock().unwrap().push(what);
    }
}

impl Store for Recording {
    fn put_data(&self, name: &str, data: &[u8]) -> Result<(), StoreError> {
        self.note(format!("put {name}"));
        self.inner.put_data(name, data)
    }
    fn put_meta(&self, name: &str, meta: &[u8]) -> Result<(), StoreError> {
        self.note(format!("meta {name}"));
        self.inner.put_meta(name, meta)
    }
    fn get_data(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        self.note(format!("get {name}"));
        self.inner.get_data(name)
    }
    fn get_meta(&self, name: &str) -> Result<Vec<u8>, StoreError> {
        self.inner.get_meta(name)
    }
    fn rename(&self, old: &str, new: &str) -> Result<(), StoreError> {
        self.note(format!("rename {old} {new}"));
        self.inner.rename(old, new)
    }
    fn delete(&self, name: &str) -> Result<(), StoreError> {
        self.note(format!("delete {name}"));
        self.inner.delete(name)
    }
}

fn recording(r: &Rig, writes: &WriteOptions) -> (CacheManager, Arc<Mutex<Vec<String>>>) {
    let store = Recording::default();
    let ops = store.ops.clone();
    let c = CacheManager::with_store(
        Box::new(store),
        Default::default(),
        writes,
        r.pm.clone(),
        r.disk,
        r.net,
    )
    .unwrap();
    (c, ops)
}

#[test]
fn a_read_goes_before_the_flush_it_triggers_unless_a_rename_is_queued() {
    let r = rig(50);
    let (c, ops) = recording(&r, &WriteOptions::default());
    c.put_data("a", vec![1; 10]).unwrap();
    c.put_data("z", vec![3; 10]).unwrap();
    r.pm.notify(r.disk, r.standby).unwrap();
    c.put_data("b", vec![2; 10]).unwrap();
    assert_eq!(c.get_data("a").unwrap(), vec![1; 10]);
    assert_eq!(*ops.lock().unwrap(), ["put a", "put z", "get a", "put b"]);
    // A queued rename could change what the read finds: it is applied first.
    ops.lock().unwrap().clear();
    c.rename("y", "z").unwrap();
    c.put_data("c", vec![4; 10]).unwrap();
    assert_eq!(c.get_data("a").unwrap(), vec![1; 10]);
    assert_eq!(*ops.lock().unwrap(), ["rename z y", "put c", "get a"]);
}

#[test]
fn without_deferral_writes_go_through_in_standby() {
    let r = rig(50);
    let writes = WriteOptions {
        defer: false,
        ..WriteOptions::default()
    };
    let (c, ops) = recording(&r, &writes);
    r.pm.notify(r.disk, r.standby).unwrap();
    c.put_data("a", vec![1; 10]).unwrap();
    assert_eq!(c.queued_bytes(), 0);
    assert_eq!(*ops.lock().unwrap(), ["put a"]);
}

#[test]
fn writes_wait_in_the_queue_while_the_disk_spins_up() {
    use wattio_power::{DiskController, DiskPolicy};
    let (clock, pm, _, disk, net) = on_clock("standby");
    let ctl = DiskController::new(pm.clone(), disk, DiskPolicy::Never, None).unwrap();
    let c = CacheManager::with_store(
        Box::new(MemStore::new()),
        Default::default(),
        &WriteOptions::default(),
        pm.clone(),
        disk,
        net,
    )
    .unwrap();
    // Spin-up under way (0.82 s): the disk cannot write yet.
    assert!((ctl.on_access().unwrap() - 0.82).abs() < 1e-12);
    c.put_data("a", vec![1; 100]).unwrap();
    assert_eq!(c.queued_bytes(), 1 + 100);
    // Up: the power manager's callback writes the queue.
    clock.advance_to(0.82);
    ctl.poll().unwrap();
    assert_eq!(c.queued_bytes(), 0);
    assert_eq!(c.flushes(), 1);
}

#[test]
fn mem_store_keeps_data_and_metadata_by_name() {
    let s = MemStore::new();
    s.put_data("a", b"data").unwrap();
    s.put_meta("a", b"meta").unwrap();
    s.put_meta("m", b"only meta").unwrap();
    s.rename("a", "b").unwrap();
    assert!(matches!(s.get_data("a"), Err(StoreError::NotFound(_))));
    assert_eq!(s.get_data("b").unwrap(), b"data");
    assert_eq!(s.get_meta("b").unwrap(), b"meta");
    let e = s.entries();
    assert_eq!(e["b"].size, Some(4));
    assert!(e["m"].size.is_none() && e["m"].has_meta);
    s.delete("b").unwrap();
    s.delete("never").unwrap();
    assert_eq!(s.entries().len(), 1);
    assert!(matches!(s.put_data("", b""), Err(StoreError::BadName(_))));
}
