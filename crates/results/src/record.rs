//! What `wattio report` reads of a `wattio record` file (CSV or JSON lines): each row's counter
//! or attribution entry and its energy. The writer's row (`wattio_meter::RecordRow`) names its
//! mechanism from the meter's source registry; the report reads the same columns as text, so it
//! needs no meter. `tests/report_reads_producers.rs` of the binary reads real `record` output
//! through [`ReportedRecordRow`].

use crate::ReportedProvenance;
use serde::Deserialize;

/// The CSV header line (without newline): the counter columns every `record` file starts with.
pub const RECORD_CSV_HEADER: &str = "timestamp,mechanism,socket,domain,energy_j,estimated,model";

/// One row of a `wattio record` file: a counter's energy since its previous row, or (`record
/// --by`) an entry's attributed share.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReportedRecordRow {
    /// Seconds since the Unix epoch.
    pub timestamp: f64,
    pub mechanism: String,
    /// Package, or GPU index; `None` on attribution rows.
    #[serde(default)]
    pub socket: Option<u32>,
    /// The counter's domain; `total` on attribution rows.
    pub domain: String,
    pub energy_j: f64,
    pub estimated: bool,
    /// The model, how a measurement was made, or the attribution label.
    #[serde(default)]
    pub model: Option<String>,
    /// `process`, `cgroup`, `vm`, `container`, `pod`, `other` or `idle`; `None` on counter rows.
    #[serde(default)]
    pub entity: Option<String>,
    #[serde(default)]
    pub pid: Option<u32>,
    #[serde(default)]
    pub comm: Option<String>,
    #[serde(default)]
    pub cgroup: Option<String>,
    #[serde(default)]
    pub cpu_s: Option<f64>,
    #[serde(default)]
    pub container_id: Option<String>,
    #[serde(default)]
    pub container_name: Option<String>,
    #[serde(default)]
    pub pod_uid: Option<String>,
    #[serde(default)]
    pub pod_name: Option<String>,
    #[serde(default)]
    pub container_namespace: Option<String>,
}

impl ReportedRecordRow {
    /// The row's provenance (an empty model is none).
    pub fn provenance(&self) -> ReportedProvenance {
        ReportedProvenance {
            mechanism: self.mechanism.clone(),
            estimated: self.estimated,
            model: self.model.clone().filter(|m| !m.is_empty()),
        }
    }

    /// Whether this is a `record --by` attribution row rather than a counter's reading.
    pub fn is_attribution(&self) -> bool {
        self.entity.as_deref().is_some_and(|e| !e.is_empty())
    }
}
