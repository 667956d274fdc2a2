//! A `wattio record` file as a section of a `wattio report` page: power over time per counter,
//! and what `record --by` gave each entry. The rows are read as `wattio_results::ReportedRecordRow`.

use std::collections::BTreeMap;
use wattio_plot::{energy_axis, line_chart, Chart, HtmlSection, LineOpts, ReportSection, Series};
use wattio_results::{join_provenance_labels, ReportedProvenance, ReportedRecordRow as RecordRow};

/// Power charts keep at most this many points per counter, so long recordings stay small.
const MAX_POWER_POINTS: usize = 1500;

/// One counter's rows from `wattio record`: (unix seconds, joules since previous row).
#[derive(Debug, Clone)]
pub struct RecordedCounter {
    pub socket: u32,
    pub domain: String,
    pub provenance: ReportedProvenance,
    pub rows: Vec<(f64, f64)>,
}

impl RecordedCounter {
    /// Mean power between consecutive rows, as (seconds since the first row, watts),
    /// averaged into at most `max_points` time buckets so long recordings stay small.
    pub fn power_series(&self, max_points: usize) -> Vec<(f64, f64)> {
        let Some(&(t0, _)) = self.rows.first() else {
            return vec![];
        };
        let t_end = self.rows.last().map(|r| r.0).unwrap_or(t0);
        let span = (t_end - t0).max(1e-9);
        let nb = max_points.max(1);
        let mut e = vec![0.0; nb];
        let mut dt = vec![0.0; nb];
        for w in self.rows.windows(2) {
            let d = w[1].0 - w[0].0;
            if d <= 0.0 {
                continue;
            }
            // Bucket by the interval's midpoint so each interval lands where it happened.
            let mid = 0.5 * (w[0].0 + w[1].0) - t0;
            let b = ((mid / span) * nb as f64).min(nb as f64 - 1.0) as usize;
            e[b] += w[1].1;
            dt[b] += d;
        }
        (0..nb)
            .filter(|&b| dt[b] > 0.0)
            .map(|b| ((b as f64 + 0.5) / nb as f64 * span, e[b] / dt[b]))
            .collect()
    }
}

/// A `wattio record` file: its counters, each with its rows in time order, and (`record --by`)
/// what its attribution rows give each entry over the whole recording.
#[derive(Debug, Clone)]
pub struct Recording {
    pub counters: Vec<RecordedCounter>,
    /// The machine's energy split by `record --by`, summed per entry, most first.
    pub attributed: Vec<AttributedTotal>,
}

/// One entry's share of a recording's energy (`record --by` rows of domain `total`, summed).
#[derive(Debug, Clone, PartialEq)]
pub struct AttributedTotal {
    /// `process`, `cgroup`, `vm`, `container`, `pod`, `other` or `idle`.
    pub entity: String,
    /// The name it goes by: its container's or pod's name, its command, VM or cgroup.
    pub name: String,
    pub energy_j: f64,
    pub cpu_s: f64,
    /// The split's label (`…, attributed (cpu-time share)`).
    pub label: String,
}

/// The name an attribution row's entry goes by on the page.
fn entry_name(row: &RecordRow) -> String {
    let pod = match (&row.container_namespace, &row.pod_name) {
        (Some(ns), Some(p)) => Some(format!("{ns}/{p}")),
        _ => None,
    };
    let text = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    match row.entity.as_deref() {
        Some("container") => text(&row.container_name)
            .map(|n| match &pod {
                Some(p) => format!("{n} ({p})"),
                None => n,
            })
            .or_else(|| text(&row.container_id).map(|id| id.chars().take(12).collect())),
        Some("pod") => pod.or_else(|| text(&row.pod_uid).map(|u| format!("pod {u}"))),
        Some("process") => text(&row.comm).map(|c| match row.pid {
            Some(pid) => format!("{c} ({pid})"),
            None => c,
        }),
        _ => None,
    }
    .or_else(|| text(&row.comm))
    .or_else(|| text(&row.cgroup))
    .unwrap_or_default()
}

impl Recording {
    /// Groups `wattio record` rows (with their line numbers) by counter. `record --by`
    /// attribution rows split the counters' energy: the counter rows alone are the machine's
    /// energy. `Err` names the line of a counter row without a socket, or a file without
    /// counter rows.
    pub fn from_rows(rows: Vec<(usize, RecordRow)>) -> Result<Recording, String> {
        let mut counters: BTreeMap<(u32, String, ReportedProvenance), Vec<(f64, f64)>> =
            BTreeMap::new();
        let mut attributed: BTreeMap<(String, String), AttributedTotal> = BTreeMap::new();
        for (line, row) in rows {
            if row.is_attribution() {
                if row.domain == "total" {
                    let entity = row.entity.clone().unwrap_or_default();
                    let name = entry_name(&row);
                    let t = attributed
                        .entry((entity.clone(), name.clone()))
                        .or_insert_with(|| AttributedTotal {
                            entity,
                            name,
                            energy_j: 0.0,
                            cpu_s: 0.0,
                            label: row.model.clone().unwrap_or_default(),
                        });
                    t.energy_j += row.energy_j;
                    t.cpu_s += row.cpu_s.unwrap_or(0.0);
                }
                continue;
            }
            let socket = row
                .socket
                .ok_or(format!("line {line}: a counter row without a socket"))?;
            counters
                .entry((socket, row.domain.clone(), row.provenance()))
                .or_default()
                .push((row.timestamp, row.energy_j));
        }
        if counters.is_empty() {
            return Err("`wattio record` file without counter rows".into());
        }
        let mut attributed: Vec<AttributedTotal> = attributed.into_values().collect();
        attributed.sort_by(|a, b| b.energy_j.total_cmp(&a.energy_j));
        Ok(Recording {
            attributed,
            counters: counters
                .into_iter()
                .map(|((socket, domain, provenance), mut rows)| {
                    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
                    RecordedCounter {
                        socket,
                        domain,
                        provenance,
                        rows,
                    }
                })
                .collect(),
        })
    }
}

impl ReportSection for Recording {
    fn kind(&self) -> &'static str {
        "record"
    }

    fn render(&self, out: &mut HtmlSection) {
        let counters = &self.counters;
        let prov = join_provenance_labels(counters.iter().map(|c| c.provenance.label()));
        let series: Vec<Series> = counters
            .iter()
            .map(|c| Series {
                name: format!("socket {} {}", c.socket, c.domain),
                points: c.power_series(MAX_POWER_POINTS),
            })
            .collect();
        let svg = line_chart(
            &Chart::titled(
                "Power over time",
                &prov,
                "time since start (s)",
                &energy_axis("Power (W)", &prov),
            ),
            &series,
            &[],
            &LineOpts {
                y_zero: true,
                ..Default::default()
            },
        );
        out.figure(
            &svg,
            "Power over time (energy between consecutive samples ÷ interval)",
            &prov,
        );
        let rows: Vec<Vec<String>> = counters
            .iter()
            .map(|c| {
                let dur = c.rows.last().map(|r| r.0).unwrap_or(0.0)
                    - c.rows.first().map(|r| r.0).unwrap_or(0.0);
                let e: f64 = c.rows.iter().skip(1).map(|r| r.1).sum();
                vec![
                    c.socket.to_string(),
                    c.domain.clone(),
                    c.rows.len().to_string(),
                    format!("{dur:.3}"),
                    format!("{e:.3}"),
                    if dur > 0.0 {
                        format!("{:.3}", e / dur)
                    } else {
                        "n/a".into()
                    },
                    c.provenance.label(),
                ]
            })
            .collect();
        out.table(
            &[
                "socket",
                "domain",
                "rows",
                "duration (s)",
                "energy (J)",
                "mean power (W)",
                "provenance",
            ],
            &rows,
        );
        self.render_attributed(out);
    }
}

/// The page lists this many entries of a `record --by` file; the rest are summed.
const MAX_ATTRIBUTED_ROWS: usize = 20;

impl Recording {
    /// The energy `record --by` gave each entry over the recording, most first.
    fn render_attributed(&self, out: &mut HtmlSection) {
        if self.attributed.is_empty() {
            return;
        }
        let all_j: f64 = self.attributed.iter().map(|a| a.energy_j).sum();
        let row = |entity: &str, name: &str, j: f64, cpu_s: f64, label: &str| {
            vec![
                entity.to_string(),
                name.to_string(),
                format!("{j:.3}"),
                format!("{:.1}", if all_j > 0.0 { 100.0 * j / all_j } else { 0.0 }),
                format!("{cpu_s:.3}"),
                label.to_string(),
            ]
        };
        let mut rows: Vec<Vec<String>> = self
            .attributed
            .iter()
            .take(MAX_ATTRIBUTED_ROWS)
            .map(|a| row(&a.entity, &a.name, a.energy_j, a.cpu_s, &a.label))
            .collect();
        let rest = self.attributed.get(MAX_ATTRIBUTED_ROWS..).unwrap_or(&[]);
        if !rest.is_empty() {
            let j = rest.iter().map(|a| a.energy_j).sum();
            let cpu = rest.iter().map(|a| a.cpu_s).sum();
            let label = rest[0].label.clone();
            rows.push(row("", &format!("{} more", rest.len()), j, cpu, &label));
        }
        out.table(
            &[
                "entity",
                "name",
                "energy (J)",
                "share (%)",
                "CPU (s)",
                "provenance",
            ],
            &rows,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_series_averages_each_interval_where_it_happened() {
        // 10 W for 2 s, then 30 W for 2 s, in 1 s rows; two buckets.
        let c = RecordedCounter {
            socket: 0,
            domain: "package".into(),
            provenance: ReportedProvenance {
                mechanism: "perf".into(),
                estimated: false,
                model: None,
            },
            rows: vec![
                (0.0, 0.0),
                (1.0, 10.0),
                (2.0, 10.0),
                (3.0, 30.0),
                (4.0, 30.0),
            ],
        };
        assert_eq!(c.power_series(2), vec![(1.0, 10.0), (3.0, 30.0)]);
        assert!(RecordedCounter { rows: vec![], ..c }
            .power_series(2)
            .is_empty());
    }

    #[test]
    fn attribution_rows_sum_per_named_entry() {
        let counter = RecordRow {
            timestamp: 1.0,
            mechanism: "model".into(),
            socket: Some(0),
            domain: "package".into(),
            energy_j: 0.0,
            estimated: true,
            model: Some("m".into()),
            entity: None,
            pid: None,
            comm: None,
            cgroup: None,
            cpu_s: None,
            container_id: None,
            container_name: None,
            pod_uid: None,
            pod_name: None,
            container_namespace: None,
        };
        let by = |entity: &str, j: f64, f: &dyn Fn(&mut RecordRow)| {
            let mut r = RecordRow {
                socket: None,
                entity: Some(entity.into()),
                energy_j: j,
                cpu_s: Some(j / 2.0),
                model: Some("estimated (model: m), attributed (cpu-time share)".into()),
                timestamp: 0.0,
                domain: "total".into(),
                ..counter.clone()
            };
            f(&mut r);
            r
        };
        let web = |r: &mut RecordRow| {
            r.container_id = Some("ab".repeat(32));
            r.container_name = Some("web".into());
            r.pod_name = Some("shop-1".into());
            r.container_namespace = Some("prod".into());
        };
        let unnamed = |r: &mut RecordRow| r.container_id = Some("cd".repeat(32));
        let rows = vec![
            counter.clone(),
            by("container", 2.0, &web),
            by("container", 1.0, &unnamed),
            by("container", 3.0, &web),
            by("idle", 4.0, &|_| {}),
            by("container", 9.0, &|r| r.domain = "kernel_io".into()),
        ];
        let r = Recording::from_rows(rows.into_iter().enumerate().collect()).unwrap();
        let got: Vec<(&str, &str, f64)> = r
            .attributed
            .iter()
            .map(|a| (a.entity.as_str(), a.name.as_str(), a.energy_j))
            .collect();
        // The kernel I/O row is part of its total row, not added again.
        assert_eq!(
            got,
            vec![
                ("container", "web (prod/shop-1)", 5.0),
                ("idle", "", 4.0),
                ("container", "cdcdcdcdcdcd", 1.0)
            ]
        );
        let mut page = HtmlSection::new();
        r.render(&mut page);
        assert!(
            page.as_str().contains("web (prod/shop-1)"),
            "{}",
            page.as_str()
        );
    }
}
