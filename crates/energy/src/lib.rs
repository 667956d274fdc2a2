//! Energy counters for wattio.
//!
//! Four mechanisms read RAPL: the perf-events `power` PMU ([`perf`]), the same perf events read
//! in the kernel by a BPF program on a timer ([`ebpf`], Cargo feature `ebpf`, only on request),
//! the powercap sysfs tree ([`powercap`]) and raw RAPL model-specific registers ([`msr`]); where
//! no counter can be read, a utilisation [`model`] estimates, and every such figure is labelled
//! *estimated*.
//!
//! Each mechanism is a [`Source`]: it lists its counters ([`CounterSpec`]: socket, domain, unit,
//! wrap limit) and reads their raw values. The [`Accumulator`] turns successive raw readings into
//! joules, correcting counter wrap with each mechanism's own limit ([`wrap`]). [`discover`] probes
//! every mechanism, says why each can or cannot be used and how to fix it, and opens the best one.
//!
//! GPUs are read through NVML ([`nvml`], the NVIDIA management library loaded at run time) and
//! can be read together with any CPU mechanism ([`combined`]); each counter then says its own
//! provenance ([`Source::counter_provenance`]).
//!
//! Every path under `/sys`, `/dev` and `/proc` is resolved through [`SysRoot`], which honours the
//! `WATTIO_ROOT` environment variable so fixture trees can stand in for hardware.

pub mod accumulate;
pub mod arch;
pub mod attribution;
pub mod combined;
pub mod cpu;
pub mod discover;
pub mod ebpf;
pub mod error;
pub mod fixture;
pub mod machine;
pub mod model;
pub mod model_file;
pub mod msr;
pub mod nvml;
pub mod perf;
pub mod powercap;
pub mod root;
pub mod tdp;
pub mod types;
pub mod wrap;

pub use accumulate::{Accumulator, CounterDelta};
pub use discover::{discover, open_source, MechanismStatus, ProbeReport, SourceChoice};
pub use error::EnergyError;
pub use machine::Machine;
pub use model::{ModelChoice, ModelParams, ModelSource, HOST_ESTIMATE_SCOPE};
pub use root::SysRoot;
pub use types::{provenance_label, CounterSpec, Domain, Mechanism, Provenance, Wrap};

/// A set of energy counters read together.
///
/// `read_raw` fills `out` with one raw value per counter, in the order of [`Source::counters`].
/// Raw values are in each counter's own unit ([`CounterSpec::unit_j`] joules per raw step) and
/// wrap at [`CounterSpec::wrap`]; the [`Accumulator`] turns them into joules.
pub trait Source: Send {
    /// Which mechanism reads these counters, and whether its figures are estimates.
    fn provenance(&self) -> &Provenance;
    /// The counters, in the order `read_raw` fills them.
    fn counters(&self) -> &[CounterSpec];
    /// Reads every counter once. Must be cheap: it runs in the sampling loop.
    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError>;
    /// Where counter `i`'s figures come from. A source of one mechanism says
    /// [`Source::provenance`] for every counter (the default); a [`combined::Combined`] source
    /// (CPU counters and GPU counters read together) says each counter's own, and NVML says
    /// which GPUs are read from an energy counter and which from integrated power.
    fn counter_provenance(&self, i: usize) -> &Provenance {
        let _ = i;
        self.provenance()
    }
    /// The rate the caller will read at, in reads per second. A source that samples on its own
    /// clock (the [`ebpf`] mechanism's kernel timer) ticks at this rate; others ignore it.
    fn set_rate_hz(&mut self, hz: f64) -> Result<(), EnergyError> {
        let _ = hz;
        Ok(())
    }
}
