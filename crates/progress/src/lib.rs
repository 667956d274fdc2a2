//! # wattio-progress
//!
//! How a long-running wattio library talks to its caller. Libraries never print, draw
//! progress bars or install signal handlers: they take callbacks and a cancel flag, and the
//! binary owns the terminal and the signals. Every library takes them in the same shape:
//!
//! * [`Sink`] — the one callback holder: progress updates, notes and warnings are told to a
//!   `Sink<T>` the binary sets (unset by default: nothing is told).
//! * [`Cancel`] — the one cancel flag, with waits ([`Cancel::sleep`], [`Cancel::wait_exit`],
//!   [`Cancel::wait_readable`]) that block on it instead of polling.
//! * [`StudyProgress`] — how far a plan of runs is, with an [`Eta`] from measured run times
//!   (`wattio_units::format_duration_rounded` writes it for a person); the experiment runners,
//!   `measure`'s benchmark loop and the cache sweep report it.
//!
//! A crate of its own because every library that runs for long depends on it (runners,
//! iobench, meter, transfer, testbed, sim; energy for its live test fixture) and none of the
//! crates they share (`wattio-energy`: counters, which sim does not use; `wattio-stats`: pure
//! statistics, which transfer does not use) is about talking to a caller.

mod cancel;
mod progress;
mod sink;

pub use cancel::{Cancel, Waited};
pub use progress::{Eta, StudyProgress};
pub use sink::Sink;
