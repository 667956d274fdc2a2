//! The report's own sections: result rows of `wattio-results` drawn as parts of a page, for the
//! producers whose section the report draws itself (the others still draw theirs through
//! `wattio-plot`'s `ReportSection`).

mod cache;
mod iobench;
mod overhead;

pub use cache::CacheSweep;
pub use iobench::IoBenchRuns;
pub use overhead::{IdleRuns, LoadRuns};
