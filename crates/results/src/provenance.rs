//! The one wording of where an energy figure comes from, shared by the meter (which attaches a
//! provenance to every counter) and every reader of result files.

/// Several provenance labels as one, for a figure drawn from rows of mixed origin: each label
/// once, sorted, joined by `; ` (`estimated (model: …); measured (perf)`), or `energy provenance
/// not recorded` when there is none.
pub fn join_provenance_labels(labels: impl IntoIterator<Item = String>) -> String {
    let mut labels: Vec<String> = labels.into_iter().collect();
    labels.sort();
    labels.dedup();
    if labels.is_empty() {
        return "energy provenance not recorded".into();
    }
    labels.join("; ")
}

/// The one wording of where an energy figure comes from, used by every output (CLI, CSV, JSON,
/// reports): `measured (perf)`, `measured (nvml power, integrated)`, `estimated (model:
/// ccf-linear(...))`, or `estimated (model, model not recorded)` for an estimate whose file
/// lost its model. Takes the mechanism as text so rows that store it as a string (iobench's
/// CSV) label themselves the same way as a [`Provenance`]; an empty `model` counts as none.
pub fn provenance_label(mechanism: &str, estimated: bool, model: Option<&str>) -> String {
    match (model.filter(|m| !m.is_empty()), estimated) {
        (Some(m), true) => format!("estimated ({mechanism}: {m})"),
        (None, true) => format!("estimated ({mechanism}, model not recorded)"),
        (Some(how), false) => format!("measured ({mechanism} {how})"),
        (None, false) => format!("measured ({mechanism})"),
    }
}
