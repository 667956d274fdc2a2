//! wattio-cache: the energy-aware cache manager of "Ghosts in the Machine" (Figure 6).
//!
//! - [`decide`]: expected time and energy of disk and network reads in the current modes,
//!   weighted by eq. (4); ghost hints when the chosen source is not the ideal one.
//! - [`queue`]: the capped deferred write queue.
//! - [`store`]: the atomic on-disk store and its index rebuild.
//! - [`manager`]: [`CacheManager`], tying them to a [`wattio_power::PowerManager`].

pub mod decide;
pub mod manager;
pub mod queue;
pub mod store;

pub use decide::{access_cost, choose_read, AccessCost, Choice, Source};
pub use manager::{
    CacheConfig, CacheError, CacheManager, CacheStatus, FlushReport, LostWrite, WriteOp,
};
pub use queue::{Queued, WriteQueue, DEFAULT_CAP_BYTES};
pub use store::{FsStore, RebuildReport, StoreError};
