//! The wattio meter: sampling energy counters, writing them out, and measuring commands.
//!
//! * [`Meter`] — an open energy source ([`MeterConfig`]) with a background poller that keeps
//!   counters wrap-safe; take [`Snapshot`]s and get an [`EnergyReport`] (per [`DomainEnergy`])
//!   between any two. This is the in-process API the other parts of wattio (iobench, transfer
//!   tuners, overhead study) take their energy from.
//! * [`run_sampler`] — the high-rate loop ([`SamplerConfig`], [`Pacing`], [`Sample`]s into a
//!   [`SampleSink`], [`SamplerStats`]): `timerfd` with absolute deadlines on one thread,
//!   formatting and writing on another, a bounded queue whose overflow is counted, flushed once a
//!   second.
//! * [`record_rows`] — `wattio record`: the sampler writing [`RecordRow`]s as CSV or JSON lines
//!   ([`RecordFormat`], [`RowSink`]; the header is [`RECORD_CSV_HEADER`]), the layout `wattio
//!   report` reads back.
//! * [`measure`] — run a command between two readings (and polls in between), once or as a
//!   repeated benchmark. A public namespace rather than items at the crate root: the `wattio
//!   measure` subsystem is a family of its own (one run, [`measure::bench`]'s repeated benchmark,
//!   [`measure::render`]'s outputs) whose names (`bench::Report`, `render::csv`, `render::text`)
//!   only read well under it.
//! * [`Exporter`] and [`serve_metrics`] — the metrics endpoint: Prometheus text 0.0.4, or
//!   OpenMetrics 1.0 when asked ([`ExpositionFormat`]).
//! * [`calibrate()`](calibrate()) — `wattio calibrate`: a model's curve measured against RAPL at
//!   load levels ([`CalibrateConfig`], a [`LoadDriver`] such as [`SpinDriver`] or
//!   [`StressNgDriver`]).
//! * [`LiveAttribution`] and [`RecordAttribution`] — live per-process / per-cgroup attribution
//!   over a meter (`top`, `record --by`, `export`), on [`wattio_energy::attribution`].
//! * [`file_io_workload`] and [`spin_cpu`] — the built-in workloads of `wattio workload`, the
//!   overhead study and calibration; [`gpu_load`] — `wattio workload gpu`, a spin kernel handed
//!   to the CUDA driver as PTX.
//! * [`VmPublisher`] — `wattio vm publish`: each VM's attributed energy as a counter its guest
//!   reads with `--source host`.

mod attribute;
mod attributed;
mod calibrate;
mod disks;
mod export;
mod exposition;
mod gpu_load;
mod machine_view;
pub mod measure;
mod meter;
mod platform_timing;
mod rows;
mod sampler;
mod sink;
mod top;
mod vm_publish;
mod workload;
pub mod workloads;

pub use attribute::{
    EntityRow, EntitySeries, LiveAttribution, RecordAttribution, SeriesGuard, SeriesUpdate,
};
pub use attributed::AttributedInterval;
pub use calibrate::{
    calibrate, open_rapl, CalibrateConfig, CalibrateError, DriverChoice, LoadDriver, SpinDriver,
    StressNgDriver,
};
pub use disks::{
    disk_lines, disks_total, nic_text, open_storage_watch, DeviceIntervals, DISK_SHARES_SHOWN,
};
pub use export::web_config::{BearerToken, WebConfig, WebConfigError};
pub use export::{serve_metrics, Exporter, ServeOptions};
pub use exposition::ExpositionFormat;
pub use gpu_load::{
    cuda_lib_from_env, gpu_load, GpuLoadConfig, GpuLoadError, GpuLoadReport, CUDA_LIB_ENV, SPIN_PTX,
};
pub use machine_view::{MachineView, PlatformFigure, PlatformTiming, RecordedCounters};
pub use meter::{
    unix_now, AlignedReport, DomainEnergy, EnergyReport, Meter, MeterConfig, Snapshot,
};
pub use rows::{
    Columns, RecordFormat, RecordRow, RECORD_CSV_ENTITY_COLUMNS, RECORD_CSV_HEADER,
    RECORD_CSV_WORKLOAD_COLUMNS,
};
pub use sampler::{
    check_freq, record_rows, run_sampler, Pacing, RecordProgress, RowSink, Sample, SampleSink,
    SamplerConfig, SamplerError, SamplerStats,
};
pub use top::render_top;
pub use vm_publish::{VmPublisher, DEFAULT_MAX_ENERGY_RANGE_UJ};
pub use workload::{file_io_workload, spin_cpu, FileIoReport};
