//! wattio-cache: the energy-aware cache manager of "Ghosts in the Machine" (Figure 6).
//!
//! - [`CacheManager`] (configured by [`CacheConfig`] and [`WriteOptions`]; answers
//!   [`CacheStatus`]), tying a store to a [`wattio_power::PowerManager`]; writes wait in a
//!   capped deferred queue while the disk sleeps ([`FlushReport`], [`LostWrite`]), and ghost
//!   hints go to a `Sink<`[`GhostNotice`]`>`.
//! - [`choose_read`]: expected time and energy ([`AccessCost`], [`access_cost`]) of disk and
//!   network reads in the devices' current state ([`SourceState`]: mode, transition under way,
//!   queued I/O), weighted by eq. (4); the [`Choice`] names the [`ReadSource`] and a ghost hint
//!   when the chosen source is not the ideal one.
//! - [`Store`]: the store interface, the atomic on-disk [`FsStore`] with its index rebuild
//!   ([`RebuildReport`]), and [`MemStore`].
//!
//! Wiring it together (the controllers drive the devices and report their modes; the cache reads
//! them and sends ghost hints back). The simulator (`wattio-sim`) builds this same stack on a
//! `VirtualClock` for every replay.
//!
//! ```
//! use std::sync::Arc;
//! use wattio_cache::{CacheConfig, CacheManager, CacheStatus, GhostNotice, ReadSource};
//! use wattio_power::{
//!     DiskController, DiskPolicy, GhostPolicy, IoOp, NetController, NetPolicy, PowerManager,
//!     Profile, RealClock, Transfer,
//! };
//! use wattio_progress::Sink;
//!
//! let profile = Profile::builtin("paper-2004")?;
//! let pm = Arc::new(PowerManager::new(Arc::new(RealClock::new()), profile.base_power_w, 50)?);
//! let disk = pm.register_device(profile.storage.clone(), profile.storage.high_mode())?;
//! let net_policy = NetPolicy::Stpm;
//! let net = pm.register_device(profile.network.clone(), net_policy.initial_mode(&profile.network))?;
//! let stpm = Arc::new(DiskController::new(
//!     pm.clone(),
//!     disk,
//!     DiskPolicy::Stpm { knob: 50.0, base_power_w: profile.base_power_w },
//!     Some(GhostPolicy::Predictive),
//! )?);
//! let radio = Arc::new(NetController::new(pm.clone(), net, net_policy)?);
//! let dir = tempfile::tempdir()?;
//! let cache = CacheManager::open(&CacheConfig::new(dir.path()), pm.clone(), disk, net)?;
//! let (s, r) = (stpm.clone(), radio.clone());
//! cache.set_ghost_sink(Sink::new(move |g: &GhostNotice| {
//!     let _ = match g.to {
//!         ReadSource::Disk => s.on_ghost(g.hint),
//!         ReadSource::Network => r.on_ghost(g.hint),
//!     };
//! }));
//! cache.put_data("index.html", b"<html>".to_vec())?;
//! match cache.cache_status("index.html")? {
//!     CacheStatus::Present { .. } => {
//!         stpm.on_access()?; // wakes the disk if needed
//!         let data = cache.get_data("index.html")?;
//!         stpm.on_io_done();
//!         assert_eq!(data, b"<html>");
//!     }
//!     CacheStatus::NetworkPreferred { size } => {
//!         // Fetch from the server instead, telling the network controller.
//!         radio.on_transfer(Transfer { op: IoOp::Read, bytes: size, foreground: true })?;
//!         /* ... the fetch ... */
//!         radio.on_transfer_done();
//!     }
//!     CacheStatus::NotPresent => { /* fetch (as above), then put_data */ }
//! }
//! // From a timer: ladder steps, completed transitions (and queue flushes).
//! stpm.poll()?;
//! radio.poll()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod decide;
mod manager;
mod queue;
mod store;

pub use decide::{access_cost, choose_read, AccessCost, Choice, ReadSource, SourceState};
pub use manager::{
    CacheConfig, CacheError, CacheManager, CacheStatus, FlushReport, GhostNotice, LostWrite,
    WriteOp, WriteOptions,
};
pub use store::{FsStore, MemStore, RebuildReport, Store, StoreError, StoredEntry};
