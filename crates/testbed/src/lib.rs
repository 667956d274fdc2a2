//! wattio-testbed: an emulated wide-area path on one Linux host, and the paper's datasets.
//!
//! * [`LinkConfig`]: link settings (rate, RTT, MTU, congestion control), and [`LINK_PROFILES`]
//!   ([`LinkProfile`], looked up by [`link_profile`]) that scale the paper's CloudLab and DIDCLab
//!   testbeds (Di Tacchio et al., Table I) to a 2-vCPU VM.
//! * [`run_delay_line`]: the user-space delay line: every packet read from one TUN device is
//!   written to the other after a fixed one-way delay, in both directions, so kernel TCP at both
//!   ends sees the real RTT and per-stream windows bind as on a WAN (`sch_netem` is absent on
//!   these hosts).
//! * [`Bed`]: `up` / `down` / `exec` / `status` ([`BedState`], [`UpOutcome`], [`Side`]): two
//!   namespaces (`<name>-client`, `<name>-server`), a TUN device in each, TBF on each TUN egress
//!   for the rate, and the delay-line daemon between them. Up and down are idempotent; a failed
//!   `up` removes what it made.
//! * [`check_bed`]: validation of a running testbed (RTT, a window-limited stream, parallel
//!   streams; [`CheckConfig`], [`CheckReport`] of [`ThroughputRun`]s).
//! * [`generate_dataset`]: generator of the small / medium / large / mixed datasets of Table II,
//!   scaled ([`DatasetFile`], [`DatasetProgress`], [`DatasetSummary`]).
//! * [`run_with_stats`]: wall time, CPU time and the labelled model energy of a child command
//!   ([`RunStats`], [`HOST_ESTIMATE_SCOPE`]).

mod bed;
mod check;
mod dataset;
mod delay;
mod error;
mod link;
mod runstats;
mod tun;

pub use bed::{run_delay_line, Bed, BedState, Side, UpOutcome};
pub use check::{check_bed, CheckConfig, CheckReport, ThroughputRun};
pub use dataset::{generate_dataset, DatasetFile, DatasetProgress, DatasetSummary, DATASET_NAMES};
pub use error::TestbedError;
pub use link::{link_profile, LinkConfig, LinkProfile, LINK_PROFILES};
pub use runstats::{run_with_stats, RunStats, HOST_ESTIMATE_SCOPE};
