//! A long study's plan on disk (`study.json`): what a fresh start and a resume compare, and what
//! the report recognises as not a result.

use serde::{Deserialize, Serialize};

/// The file, in a study's output directory, that records its plan.
pub const MANIFEST_FILE: &str = "study.json";

/// What `study.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyManifest {
    /// Which study: `wattio overhead`, `wattio iobench`.
    pub study: String,
    /// The command line that started it, shown when a resume is refused.
    pub command: String,
    /// Everything that decides which runs are made; a resume must bring the same.
    pub plan: serde_json::Value,
    /// Runs in the plan.
    pub total_runs: usize,
    /// Whether every run was done.
    pub complete: bool,
}
