//! The report's sections: what `wattio-results` reads of each result file, drawn as parts of a
//! page through `wattio-plot`'s `ReportSection`.

mod cache;
mod iobench;
mod measure;
mod overhead;
mod record;
mod stack;
mod transfer;

pub use cache::CacheSweep;
pub use iobench::IoBenchRuns;
pub use measure::{MeasuredCommand, RunFigures};
pub use overhead::{IdleRuns, LoadRuns};
pub use record::{AttributedTotal, RecordedCounter, Recording};
pub use stack::{RunEnergyStack, STACK_PARTS};
pub use transfer::TransferSection;
