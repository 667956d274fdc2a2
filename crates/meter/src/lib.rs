//! The wattio meter: sampling energy counters, writing them out, and measuring commands.
//!
//! * [`Meter`] — an open energy source with a background poller that keeps counters wrap-safe;
//!   take [`Snapshot`]s and get an [`EnergyReport`] between any two. This is the in-process API
//!   the other parts of wattio (iobench, transfer tuners, overhead study) take their energy from.
//! * [`sampler`] — the high-rate loop: `timerfd` with absolute deadlines on one thread, formatting
//!   and writing on another, a bounded queue whose overflow is counted, flushed once a second.
//! * [`sink`] — CSV and JSON-lines row writers of [`RecordRow`]s ([`rows`]: the layout of a
//!   `wattio record` file, which `wattio report` reads back).
//! * [`measure`] — run a command between two readings (and polls in between).
//! * [`export`] — an OpenMetrics endpoint.
//! * [`calibrate`] — `wattio calibrate`: a model's curve measured against RAPL at load levels.
//! * [`attribute`] — live per-process / per-cgroup attribution over a meter (`top`, `record --by`,
//!   `export`), on [`wattio_energy::attribution`].

pub mod attribute;
pub mod calibrate;
pub mod export;
pub mod measure;
pub mod meter;
pub mod rows;
pub mod sampler;
pub mod sink;
pub mod workload;

pub use meter::{DomainEnergy, EnergyReport, Meter, MeterConfig, Snapshot};
pub use rows::RecordRow;
