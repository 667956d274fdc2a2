//! Whose energy is it: CPU-time readers and the split of a window's energy between processes
//! and cgroups. Every wattio figure that names a process's or a cgroup's energy comes from here.
//!
//! * [`cputime`] — how long a process, this process, a child that ended, or the machine ran;
//! * [`cgroup`] — cgroup v2 `cpu.stat` usage, own usage of nested cgroups, workload kinds;
//! * [`split`] — the formula (CPU-time share, idle apart or shared) and its label;
//! * [`tracker`] — interval attribution of a whole machine (`wattio top`, `record --by`,
//!   `export`).
//!
//! With a RAPL mechanism the total is measured and the split is a model: figures are labelled
//! `attributed (cpu-time share)` next to the mechanism ([`split::attributed_label`]). With the
//! model mechanism the total is itself estimated, and the label says so.

pub mod cgroup;
pub mod cputime;
pub mod split;
pub mod tracker;

pub use split::{attributed_label, share_j, split, IdlePolicy, Split};
pub use tracker::{Attributor, By, Entry, Interval};
