//! The report's sections: what `wattio-results` reads of each result file, drawn as parts of a
//! page (the producers whose section the report does not draw yet draw theirs through
//! `wattio-plot`'s `ReportSection`).

mod cache;
mod measure;
mod record;
mod stack;
mod transfer;

pub use cache::CacheSweep;
pub use measure::{MeasuredCommand, RunFigures};
pub use record::{AttributedTotal, RecordedCounter, Recording};
pub use stack::{RunEnergyStack, STACK_PARTS};
pub use transfer::TransferSection;
