//! wattio-testbed: an emulated wide-area path on one Linux host, and the paper's datasets.
//!
//! * [`link`]: link settings (rate, RTT, MTU, congestion control) and the named profiles that
//!   scale the paper's CloudLab and DIDCLab testbeds (Di Tacchio et al., Table I) to a 2-vCPU VM.
//! * [`delay`]: the user-space delay line: every packet read from one TUN device is written to
//!   the other after a fixed one-way delay, in both directions, so kernel TCP at both ends sees
//!   the real RTT and per-stream windows bind as on a WAN (`sch_netem` is absent on these hosts).
//! * [`tun`]: opening a TUN device inside a named network namespace.
//! * [`bed`]: `up` / `down` / `exec` / `status`: two namespaces (`<name>-client`,
//!   `<name>-server`), a TUN device in each, TBF on each TUN egress for the rate, and the
//!   delay-line daemon between them. Up and down are idempotent; a failed `up` removes what it
//!   made.
//! * [`check`]: validation of a running testbed (RTT, a window-limited stream, parallel streams).
//! * [`dataset`]: generator of the small / medium / large / mixed datasets of Table II, scaled.
//! * [`runstats`]: wall time, CPU time and the labelled model energy of a child command.

pub mod bed;
pub mod check;
pub mod dataset;
pub mod delay;
pub mod link;
pub mod runstats;
pub mod tun;
