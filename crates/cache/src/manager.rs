//! The cache manager: the Ghosts Figure 6 interface over [`FsStore`], a [`PowerManager`] and a
//! deferred write queue.
//!
//! | Figure 6       | here                              |
//! |----------------|-----------------------------------|
//! | `CacheStatus`  | [`CacheManager::cache_status`]    |
//! | `GetData`      | [`CacheManager::get_data`]        |
//! | `GetMetadata`  | [`CacheManager::get_metadata`]    |
//! | `PutData`      | [`CacheManager::put_data`]        |
//! | `PutMetadata`  | [`CacheManager::put_metadata`]    |
//! | `Rename`       | [`CacheManager::rename`]          |
//! | `Delete`       | [`CacheManager::delete`]          |
//!
//! Writes, metadata, renames and deletes go to the queue while the disk is in (or on its way
//! to) a mode that cannot write; the queue is flushed when the disk enters its high-power mode
//! (a power-manager callback), when it is full, after a disk read (before it, when a queued
//! rename or delete could change what the read finds), and on [`CacheManager::flush`] / drop.
//!
//! The store is any [`Store`]: [`CacheManager::open`] uses the durable [`FsStore`];
//! [`CacheManager::with_store`] takes another (the simulator's store times every operation on
//! a simulated disk).

use crate::decide::{choose_read, ReadSource, SourceState};
use crate::queue::{Queued, WriteQueue, DEFAULT_CAP_BYTES};
use crate::store::{check_name, FsStore, RebuildReport, Store, StoreError, StoredEntry};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use wattio_power::{CallbackId, DeviceHandle, GhostHint, IoOp, ModeEntered, PmError, PowerManager};
use wattio_progress::Sink;

/// Answer of `CacheStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum CacheStatus {
    /// Not in the cache.
    NotPresent,
    /// In the cache, and reading it from disk is the better choice.
    Present {
        /// Size in bytes.
        size: u64,
    },
    /// In the cache, but fetching it from the network is expected to be cheaper now (advisory).
    NetworkPreferred {
        /// Size in bytes.
        size: u64,
    },
}

/// Cache manager errors.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The power manager refused a query.
    #[error(transparent)]
    Power(#[from] PmError),
    /// No such object.
    #[error("no object {0:?} in the cache")]
    NotFound(String),
}

/// A deferred operation.
#[derive(Debug, Clone)]
pub enum WriteOp {
    /// `PutData`.
    Put(String, Arc<Vec<u8>>),
    /// `PutMetadata`.
    PutMeta(String, Arc<Vec<u8>>),
    /// `Rename(new, old)`, stored as (old, new).
    Rename(String, String),
    /// `Delete`.
    Delete(String),
}

impl WriteOp {
    fn describe(&self) -> String {
        match self {
            WriteOp::Put(n, d) => format!("PutData {n:?} ({} bytes)", d.len()),
            WriteOp::PutMeta(n, m) => format!("PutMetadata {n:?} ({} bytes)", m.len()),
            WriteOp::Rename(o, n) => format!("Rename {o:?} -> {n:?}"),
            WriteOp::Delete(n) => format!("Delete {n:?}"),
        }
    }
}

impl Queued for WriteOp {
    fn bytes(&self) -> u64 {
        (match self {
            WriteOp::Put(n, d) => n.len() + d.len(),
            WriteOp::PutMeta(n, m) => n.len() + m.len(),
            WriteOp::Rename(o, n) => o.len() + n.len(),
            WriteOp::Delete(n) => n.len(),
        }) as u64
    }
}

/// A queued operation that could not be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostWrite {
    /// The operation.
    pub op: String,
    /// Why it failed.
    pub error: String,
}

/// Result of a flush.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlushReport {
    /// Operations applied to the store.
    pub written: usize,
    /// Operations that failed (reported, never silently dropped).
    pub lost: Vec<LostWrite>,
}

/// How writes reach the store.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteOptions {
    /// Queue writes while the disk cannot write (default, the paper's §4.3); `false` writes
    /// through at once, spinning the disk up (a static cache hierarchy).
    pub defer: bool,
    /// Write-queue cap in bytes (default 4 MB).
    pub queue_cap_bytes: u64,
    /// Flush when the oldest queued operation is older than this many seconds (bounds the work
    /// a crash can lose, like laptop-mode's and TLP's "max lost work"); `None` (default, as in
    /// the paper) waits for the disk to spin up or the queue to fill.
    pub max_lost_work_s: Option<f64>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            defer: true,
            queue_cap_bytes: DEFAULT_CAP_BYTES,
            max_lost_work_s: None,
        }
    }
}

/// Configuration of a cache on a file-system store.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// Directory of the store.
    pub root: PathBuf,
    /// How writes reach the store.
    pub writes: WriteOptions,
}

impl CacheConfig {
    /// Defaults for a store under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            writes: WriteOptions::default(),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Entry {
    size: Option<u64>,
    meta: Option<Arc<Vec<u8>>>,
    /// Data written by `PutData` but still in the queue.
    pending: Option<Arc<Vec<u8>>>,
}

struct State {
    store: Box<dyn Store>,
    index: HashMap<String, Entry>,
    queue: WriteQueue<WriteOp>,
    lost: Vec<LostWrite>,
    flushes: u64,
    /// Clock time of the oldest queued operation.
    oldest: Option<f64>,
    max_lost_work_s: Option<f64>,
    defer: bool,
}

/// A ghost hint as the cache tells it: the device that would have been better, and the hint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GhostNotice {
    pub to: ReadSource,
    pub hint: GhostHint,
}

/// The energy-aware cache manager.
pub struct CacheManager {
    pm: Arc<PowerManager>,
    disk: DeviceHandle,
    net: DeviceHandle,
    state: Arc<Mutex<State>>,
    callback: Option<CallbackId>,
    ghost_sink: Mutex<Sink<GhostNotice>>,
    rebuild: RebuildReport,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn apply(store: &dyn Store, op: &WriteOp) -> Result<(), StoreError> {
    match op {
        WriteOp::Put(n, d) => store.put_data(n, d),
        WriteOp::PutMeta(n, m) => store.put_meta(n, m),
        WriteOp::Rename(o, n) => store.rename(o, n),
        WriteOp::Delete(n) => store.delete(n),
    }
}

fn flush_locked(st: &mut State) -> FlushReport {
    let mut rep = FlushReport::default();
    let ops = st.queue.drain();
    if ops.is_empty() {
        return rep;
    }
    st.flushes += 1;
    st.oldest = None;
    for op in &ops {
        match apply(st.store.as_ref(), op) {
            Ok(()) => rep.written += 1,
            Err(e) => rep.lost.push(LostWrite {
                op: op.describe(),
                error: e.to_string(),
            }),
        }
    }
    for e in st.index.values_mut() {
        e.pending = None;
    }
    st.lost.extend(rep.lost.iter().cloned());
    rep
}

impl CacheManager {
    /// Open the file-system store under `cfg.root` (rebuilding its index) and attach to the
    /// power manager's `disk` and `net` devices. The queue is flushed whenever the disk enters
    /// its high-power mode.
    pub fn open(
        cfg: &CacheConfig,
        pm: Arc<PowerManager>,
        disk: DeviceHandle,
        net: DeviceHandle,
    ) -> Result<Self, CacheError> {
        let (store, stored, rebuild) = FsStore::open(&cfg.root)?;
        let mut c = Self::with_store(Box::new(store), stored, &cfg.writes, pm, disk, net)?;
        c.rebuild = rebuild;
        Ok(c)
    }

    /// A cache over `store`, whose objects are `stored` (e.g. [`crate::MemStore::entries`]),
    /// attached to the power manager's `disk` and `net` devices.
    pub fn with_store(
        store: Box<dyn Store>,
        stored: HashMap<String, StoredEntry>,
        writes: &WriteOptions,
        pm: Arc<PowerManager>,
        disk: DeviceHandle,
        net: DeviceHandle,
    ) -> Result<Self, CacheError> {
        let mut index = HashMap::new();
        for (name, e) in stored {
            let meta = if e.has_meta {
                match store.get_meta(&name) {
                    Ok(m) => Some(Arc::new(m)),
                    Err(StoreError::Corrupt(_)) => None,
                    Err(e) => return Err(e.into()),
                }
            } else {
                None
            };
            index.insert(
                name,
                Entry {
                    size: e.size,
                    meta,
                    pending: None,
                },
            );
        }
        let state = Arc::new(Mutex::new(State {
            store,
            index,
            queue: WriteQueue::new(writes.queue_cap_bytes),
            lost: Vec::new(),
            flushes: 0,
            oldest: None,
            max_lost_work_s: writes.max_lost_work_s,
            defer: writes.defer,
        }));
        let high = pm.spec(disk)?.high_mode();
        let weak: Weak<Mutex<State>> = Arc::downgrade(&state);
        let callback = pm.register_callback(
            disk,
            high,
            Sink::new(move |_: &ModeEntered| {
                if let Some(s) = weak.upgrade() {
                    flush_locked(&mut lock(&s));
                }
            }),
        )?;
        Ok(Self {
            pm,
            disk,
            net,
            state,
            callback: Some(callback),
            ghost_sink: Mutex::new(Sink::none()),
            rebuild: RebuildReport::default(),
        })
    }

    /// What the index rebuild found at open.
    pub fn rebuild_report(&self) -> &RebuildReport {
        &self.rebuild
    }

    /// Send ghost hints to `sink` (e.g. the STPM modules).
    pub fn set_ghost_sink(&self, sink: Sink<GhostNotice>) {
        *self.ghost_sink.lock().unwrap_or_else(|p| p.into_inner()) = sink;
    }

    /// Whether the disk can write now: settled in a mode that can write. During a transition
    /// writes wait in the queue: a step down leads to a mode that cannot write, and after a
    /// spin-up the callback flushes the queue once reads issued meanwhile have gone first.
    fn disk_can_write(&self) -> Result<bool, CacheError> {
        let r = self.pm.readiness(self.disk, IoOp::Write)?;
        Ok(r.io_mode == r.mode && self.pm.mode_info(self.disk, r.mode)?.can(IoOp::Write))
    }

    /// `CacheStatus`: from the in-memory index and the devices' current state (mode, transition
    /// under way, queued I/O: [`PowerManager::readiness`]), without touching the disk. Issues a
    /// ghost hint when the chosen source is not the ideal one.
    pub fn cache_status(&self, name: &str) -> Result<CacheStatus, CacheError> {
        let (size, pending) = {
            let st = lock(&self.state);
            match st
                .index
                .get(name)
                .and_then(|e| e.size.map(|s| (s, e.pending.is_some())))
            {
                None => return Ok(CacheStatus::NotPresent),
                Some(x) => x,
            }
        };
        if pending {
            // Still in memory: nothing beats that.
            return Ok(CacheStatus::Present { size });
        }
        let (ds, ns) = (self.pm.spec(self.disk)?, self.pm.spec(self.net)?);
        let disk = SourceState {
            spec: &ds,
            readiness: self.pm.readiness(self.disk, IoOp::Read)?,
        };
        let network = SourceState {
            spec: &ns,
            readiness: self.pm.readiness(self.net, IoOp::Read)?,
        };
        let now = self.pm.clock().now();
        let Some(c) = choose_read(
            disk,
            network,
            size,
            self.pm.base_power_w(),
            self.pm.knob() as f64,
            now,
            true,
        ) else {
            return Ok(CacheStatus::Present { size });
        };
        if let Some((to, hint)) = c.ghost {
            let sink = self
                .ghost_sink
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            sink.tell(&GhostNotice { to, hint });
        }
        Ok(match c.source {
            ReadSource::Disk => CacheStatus::Present { size },
            ReadSource::Network => CacheStatus::NetworkPreferred { size },
        })
    }

    /// `GetData`: from the queue if the data is not on disk yet, else from the store (verified).
    /// The disk is up for the read anyway, so the queue is flushed: after the read, so the user
    /// does not wait for it, unless a queued rename or delete could change what the read finds.
    pub fn get_data(&self, name: &str) -> Result<Vec<u8>, CacheError> {
        let mut st = lock(&self.state);
        let e = st
            .index
            .get(name)
            .filter(|e| e.size.is_some())
            .ok_or_else(|| CacheError::NotFound(name.to_string()))?;
        if let Some(p) = &e.pending {
            return Ok(p.as_ref().clone());
        }
        let renames = st
            .queue
            .iter()
            .any(|op| matches!(op, WriteOp::Rename(..) | WriteOp::Delete(_)));
        if renames {
            flush_locked(&mut st);
        }
        let read = st.store.get_data(name);
        flush_locked(&mut st);
        match read {
            Ok(d) => Ok(d),
            Err(e @ StoreError::Corrupt(_)) => {
                if let Some(x) = st.index.get_mut(name) {
                    x.size = None;
                }
                Err(e.into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `GetMetadata`: from memory.
    pub fn get_metadata(&self, name: &str) -> Result<Vec<u8>, CacheError> {
        let st = lock(&self.state);
        st.index
            .get(name)
            .and_then(|e| e.meta.clone())
            .map(|m| m.as_ref().clone())
            .ok_or_else(|| CacheError::NotFound(name.to_string()))
    }

    fn submit(&self, st: &mut State, op: WriteOp) -> Result<(), CacheError> {
        if !st.defer || self.disk_can_write()? {
            flush_locked(st);
            apply(st.store.as_ref(), &op)?;
            return Ok(());
        }
        let now = self.pm.clock().now();
        if let (Some(max), Some(oldest)) = (st.max_lost_work_s, st.oldest) {
            if now - oldest > max {
                // Too much work at risk: write the queue now even though the disk is down.
                flush_locked(st);
            }
        }
        let r = match st.queue.push(op) {
            Ok(()) => Ok(()),
            Err(op) => {
                // Full: flush (the disk spins up for it), then queue, or write through if the
                // operation alone is larger than the cap.
                flush_locked(st);
                match st.queue.push(op) {
                    Ok(()) => Ok(()),
                    Err(op) => {
                        apply(st.store.as_ref(), &op)?;
                        Ok(())
                    }
                }
            }
        };
        if !st.queue.is_empty() && st.oldest.is_none() {
            st.oldest = Some(now);
        }
        r
    }

    /// `PutData`: store an object (deferred while the disk is in a low-power mode).
    pub fn put_data(&self, name: &str, data: Vec<u8>) -> Result<(), CacheError> {
        check_name(name)?;
        let data = Arc::new(data);
        let mut st = lock(&self.state);
        let size = data.len() as u64;
        self.submit(&mut st, WriteOp::Put(name.to_string(), data.clone()))?;
        let queued = !st.queue.is_empty();
        let e = st.index.entry(name.to_string()).or_default();
        e.size = Some(size);
        e.pending = queued.then_some(data);
        Ok(())
    }

    /// `PutMetadata`: kept in memory and written (deferred) to disk.
    pub fn put_metadata(&self, name: &str, meta: Vec<u8>) -> Result<(), CacheError> {
        check_name(name)?;
        let meta = Arc::new(meta);
        let mut st = lock(&self.state);
        self.submit(&mut st, WriteOp::PutMeta(name.to_string(), meta.clone()))?;
        st.index.entry(name.to_string()).or_default().meta = Some(meta);
        Ok(())
    }

    /// `Rename(new_name, old_name)`.
    pub fn rename(&self, new_name: &str, old_name: &str) -> Result<(), CacheError> {
        check_name(new_name)?;
        let mut st = lock(&self.state);
        let e = st
            .index
            .get(old_name)
            .cloned()
            .ok_or_else(|| CacheError::NotFound(old_name.to_string()))?;
        self.submit(
            &mut st,
            WriteOp::Rename(old_name.to_string(), new_name.to_string()),
        )?;
        st.index.remove(old_name);
        st.index.insert(new_name.to_string(), e);
        Ok(())
    }

    /// `Delete`.
    pub fn delete(&self, name: &str) -> Result<(), CacheError> {
        let mut st = lock(&self.state);
        if !st.index.contains_key(name) {
            return Err(CacheError::NotFound(name.to_string()));
        }
        self.submit(&mut st, WriteOp::Delete(name.to_string()))?;
        st.index.remove(name);
        Ok(())
    }

    /// Write every queued operation now.
    pub fn flush(&self) -> FlushReport {
        flush_locked(&mut lock(&self.state))
    }

    /// Flush if the oldest queued operation is older than `max_lost_work_s` (call from a timer
    /// when the application may stay idle). Returns whether it flushed.
    pub fn flush_if_too_old(&self) -> bool {
        let now = self.pm.clock().now();
        let mut st = lock(&self.state);
        match (st.max_lost_work_s, st.oldest) {
            (Some(max), Some(oldest)) if now - oldest > max => {
                flush_locked(&mut st);
                true
            }
            _ => false,
        }
    }

    /// Bytes waiting in the queue (data at risk in a crash).
    pub fn queued_bytes(&self) -> u64 {
        lock(&self.state).queue.bytes()
    }

    /// Queue cap in bytes.
    pub fn queue_cap(&self) -> u64 {
        lock(&self.state).queue.cap()
    }

    /// Number of non-empty flushes so far.
    pub fn flushes(&self) -> u64 {
        lock(&self.state).flushes
    }

    /// Every operation that failed during a flush since open.
    pub fn lost_writes(&self) -> Vec<LostWrite> {
        lock(&self.state).lost.clone()
    }

    /// Names in the index (sorted).
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.state).index.keys().cloned().collect();
        v.sort();
        v
    }
}

impl Drop for CacheManager {
    fn drop(&mut self) {
        if let Some(id) = self.callback.take() {
            self.pm.remove_callback(id);
        }
        flush_locked(&mut lock(&self.state));
    }
}
