//! Cache sweep and replay results as a section of a `wattio report` page: the rows the simulator
//! writes (`wattio-results`' [`SweepRow`]), drawn by the report.

use std::collections::BTreeMap;
use wattio_plot::{
    energy_axis, line_chart, Chart, HtmlSection, LineOpts, Reference, ReportSection, Series, XScale,
};
use wattio_results::SweepRow;

/// `wattio cache sweep` rows (`sweep.csv`), or `cache replay --json` replays as rows of one
/// seed: per workload, energy and mean response time against the knob.
#[derive(Debug, Clone)]
pub struct CacheSweep {
    pub rows: Vec<SweepRow>,
}

/// One strategy's runs as (knob, energy J, mean response s).
type KnobPoints = Vec<(f64, f64, f64)>;

impl ReportSection for CacheSweep {
    fn kind(&self) -> &'static str {
        "cache"
    }

    fn render(&self, out: &mut HtmlSection) {
        let mut workloads: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !workloads.contains(&r.workload.as_str()) {
                workloads.push(&r.workload);
            }
        }
        for w in workloads {
            let rows: Vec<&SweepRow> = self.rows.iter().filter(|r| r.workload == w).collect();
            render_workload(out, w, &rows);
        }
    }
}

fn render_workload(out: &mut HtmlSection, workload: &str, rows: &[&SweepRow]) {
    // The simulator labels its own energy ("simulated (estimated from device profile …)");
    // rows that lost the label are still simulated.
    let prov = rows
        .iter()
        .map(|r| r.energy_kind.clone())
        .find(|k| !k.is_empty())
        .unwrap_or_else(|| "simulated (estimated from a device profile not recorded)".into());
    let mut by: BTreeMap<String, KnobPoints> = BTreeMap::new();
    for r in rows {
        let name = if r.ghost_hints.is_empty() || r.ghost_hints == "-" {
            r.strategy.clone()
        } else {
            format!("{} (hints {})", r.strategy, r.ghost_hints)
        };
        by.entry(name)
            .or_default()
            .push((f64::from(r.knob), r.energy_j, r.mean_response_s));
    }
    let (energy, energy_refs) = lines_and_references(&by, |t| t.1);
    let (response, response_refs) = lines_and_references(&by, |t| t.2);
    let opts = |y_zero: bool| LineOpts {
        x_scale: XScale::Categorical,
        markers: true,
        y_zero,
        ..Default::default()
    };
    let knob = "knob (0 = save energy … 100 = performance)";
    let what = if workload.is_empty() {
        String::new()
    } else {
        format!(" ({workload})")
    };
    out.figure(
        &line_chart(
            &Chart::titled(
                &format!("Energy against knob{what}"),
                &prov,
                knob,
                &energy_axis("Energy (J)", &prov),
            ),
            &energy,
            &energy_refs,
            &opts(false),
        ),
        &format!("Energy against the performance/energy knob{what}"),
        &prov,
    );
    out.figure(
        &line_chart(
            &Chart::titled(
                &format!("Response time against knob{what}"),
                &prov,
                knob,
                "Mean response time (s)",
            ),
            &response,
            &response_refs,
            &opts(true),
        ),
        &format!("Mean response time against the knob{what}"),
        &prov,
    );
}

/// Strategies swept over the knob are lines on a categorical knob axis (the sweep's 0, 50, …,
/// 99, 100 evenly spaced); a strategy run at one knob only (static caches, the lower bound)
/// does not depend on it: a reference line at its mean.
fn lines_and_references(
    by: &BTreeMap<String, KnobPoints>,
    pick: impl Fn(&(f64, f64, f64)) -> f64,
) -> (Vec<Series>, Vec<Reference>) {
    let swept = |v: &KnobPoints| v.iter().any(|t| t.0 != v[0].0);
    let any_swept = by.values().any(swept);
    let mut lines = Vec::new();
    let mut refs = Vec::new();
    for (name, v) in by {
        if any_swept && !swept(v) {
            let ys: Vec<f64> = v.iter().map(&pick).collect();
            refs.push(Reference {
                name: name.clone(),
                y: ys.iter().sum::<f64>() / ys.len() as f64,
            });
            continue;
        }
        let mut points: Vec<(f64, f64)> = v.iter().map(|t| (t.0, pick(t))).collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        lines.push(Series {
            name: name.clone(),
            points,
        });
    }
    (lines, refs)
}
