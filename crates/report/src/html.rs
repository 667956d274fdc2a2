//! The HTML page: one file, inline CSS and SVG, and a small inline self-check script that
//! reports to the browser console (used by the headless-Chromium test).

use crate::data::{
    label_all, transfer_energy_provenance, transfer_parameters, Dataset, Loaded, Scan,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use wattio_energy::ModelParams;
use wattio_energy::Provenance;
use wattio_iobench::RunRecord;
use wattio_overhead::{analyze_idle, analyze_load, fmt_p, IdleRun, LoadRun, OFF};
use wattio_plot::{
    bar_chart, box_plot, energy_axis, esc, fmt_num, line_chart, BoxGroup, Chart, LineOpts,
    Reference, Series, XScale,
};
use wattio_sim::SweepRow;
use wattio_stats::median;

/// The "Files not included" list stops after this many entries.
const MAX_SKIPPED_LISTED: usize = 40;

const CSS: &str = "body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}\
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
figure{margin:1em 0}figcaption{font-size:.9em;color:#444}.prov{font-weight:600}\
.est{color:#a04000}table{border-collapse:collapse;font-size:.85em;margin:.5em 0}\
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f3f3f3}\
td:first-child,th:first-child{text-align:left}.note{color:#555;font-size:.9em}code{font-size:.9em}\
svg.chart{max-width:100%;height:auto}";

/// Checks the page rendered: every chart has a size and a provenance, then logs a line
/// the browser test looks for. Errors go to console.error so the test fails on them.
const CHECK_JS: &str = r#"(function(){var c=document.querySelectorAll('svg.chart');var bad=0;
for(var i=0;i<c.length;i++){var b=c[i].getBBox();var p=c[i].getAttribute('data-provenance');
if(!(b.width>0&&b.height>0)){bad++;console.error('wattio-report-check: chart '+i+' has no size');}
if(!p){bad++;console.error('wattio-report-check: chart '+i+' has no provenance');}}
if(bad===0){console.log('wattio-report-check: ok '+c.length+' charts');}})();"#;

fn prov_html(label: &str) -> String {
    let class = if label.contains("estimated") || label.contains("simulat") {
        "prov est"
    } else {
        "prov"
    };
    format!(r#"<span class="{class}">{}</span>"#, esc(label))
}

/// A figure whose numbers are energy: the caption names the energy provenance.
fn figure(out: &mut String, svg: &str, caption: &str, provenance: &str) {
    figure_as(out, svg, caption, "energy", provenance);
}

/// A figure whose caption names `what` the provenance is about (timing, CPU time, …).
fn figure_as(out: &mut String, svg: &str, caption: &str, what: &str, provenance: &str) {
    let _ = writeln!(
        out,
        "<figure>{svg}<figcaption>{} — {}: {}</figcaption></figure>",
        esc(caption),
        esc(what),
        prov_html(provenance)
    );
}

fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    out.push_str("<table><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>\n");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{}</td>", esc(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

/// Renders the whole page for a scan of `base`.
pub fn render(scan: &Scan, base: &Path, title: &str) -> String {
    let mut body = String::new();
    let mut toc = String::new();
    for (i, l) in scan.loaded.iter().enumerate() {
        let rel = l
            .path
            .strip_prefix(base)
            .unwrap_or(&l.path)
            .display()
            .to_string();
        let id = format!("d{i}");
        let _ = write!(
            toc,
            r##"<li><a href="#{id}">{} — {}</a></li>"##,
            esc(l.data.kind()),
            esc(&rel)
        );
        let _ = write!(
            body,
            r#"<h2 id="{id}">{} <small><code>{}</code></small></h2>"#,
            esc(l.data.kind()),
            esc(&rel)
        );
        section(&mut body, l);
    }
    let mut skipped = String::new();
    if scan.ignored > 0 {
        let _ = write!(
            skipped,
            "<p class=\"note\">{} other file(s) were not read (not .csv, .json, .jsonl or .ndjson).</p>",
            scan.ignored
        );
    }
    if !scan.skipped.is_empty() {
        skipped.push_str("<h2>Files not included</h2><ul class=\"note\">");
        for s in scan.skipped.iter().take(MAX_SKIPPED_LISTED) {
            let rel = s
                .path
                .strip_prefix(base)
                .unwrap_or(&s.path)
                .display()
                .to_string();
            let _ = write!(
                skipped,
                "<li><code>{}</code>: {}</li>",
                esc(&rel),
                esc(&s.reason)
            );
        }
        if scan.skipped.len() > MAX_SKIPPED_LISTED {
            let _ = write!(
                skipped,
                "<li>… and {} more</li>",
                scan.skipped.len() - MAX_SKIPPED_LISTED
            );
        }
        skipped.push_str("</ul>");
    }
    let empty = if scan.loaded.is_empty() {
        "<p><strong>No wattio result files found.</strong> Expected <code>wattio record</code> CSV/JSONL, <code>wattio measure --json</code> output, iobench/cache/transfer results or <code>wattio overhead</code> runs.</p>"
    } else {
        ""
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{CSS}</style></head><body>\n<h1>{t}</h1>\n<p class=\"note\">Generated by <code>wattio report</code> from <code>{dir}</code>. Every figure names where its energy figures come from: <em>measured (mechanism)</em> or <em>estimated (model)</em>; estimates are not measurements.</p>\n{empty}<ul>{toc}</ul>\n{body}{skipped}\n<script>{CHECK_JS}</script>\n</body></html>\n",
        t = esc(title),
        dir = esc(&base.display().to_string()),
    )
}

/// The heading, provenance and axis names of one chart.
fn chart(title: &str, provenance: &str, x_label: &str, y_label: &str) -> Chart {
    Chart {
        title: title.into(),
        provenance: provenance.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        ..Default::default()
    }
}

fn section(out: &mut String, l: &Loaded) {
    match &l.data {
        Dataset::Record { counters } => {
            let prov = label_all(counters.iter().map(|c| &c.provenance));
            let series: Vec<Series> = counters
                .iter()
                .map(|c| Series {
                    name: format!("socket {} {}", c.socket, c.domain),
                    points: c.power_series(1500),
                })
                .collect();
            let svg = line_chart(
                &chart(
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
            figure(
                out,
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
            table(
                out,
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
        }
        Dataset::Measure {
            command,
            provenance,
            runs,
        } => {
            let prov = provenance.label();
            let _ = write!(
                out,
                "<p>Command: <code>{}</code> — {} run(s), energy {}</p>",
                esc(command),
                runs.len(),
                prov_html(&prov)
            );
            let rows: Vec<Vec<String>> = runs
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    vec![
                        (i + 1).to_string(),
                        format!("{:.4}", r.duration_s),
                        format!("{:.4}", r.total_j),
                        format!("{:.3}", r.mean_power_w),
                        r.exit_code.to_string(),
                    ]
                })
                .collect();
            table(
                out,
                &[
                    "run",
                    "duration (s)",
                    "energy (J)",
                    "mean power (W)",
                    "exit",
                ],
                &rows,
            );
            if runs.len() >= 2 {
                let g = |v: Vec<f64>| BoxGroup {
                    label: format!("{} runs", v.len()),
                    values: v,
                    baseline: false,
                };
                let svg = box_plot(
                    &chart(
                        "Energy per run",
                        &prov,
                        "",
                        &energy_axis("Energy (J)", &prov),
                    ),
                    &[g(runs.iter().map(|r| r.total_j).collect())],
                );
                figure(out, &svg, "Energy per run", &prov);
                let svg = box_plot(
                    &chart("Duration per run", &prov, "", "Duration (s), wall clock"),
                    &[g(runs.iter().map(|r| r.duration_s).collect())],
                );
                figure(out, &svg, "Duration per run (wall clock)", &prov);
            }
        }
        Dataset::IoBench { rows } => iobench(out, rows),
        Dataset::Cache { rows } => {
            let mut workloads: Vec<&str> = Vec::new();
            for r in rows {
                if !workloads.contains(&r.workload.as_str()) {
                    workloads.push(&r.workload);
                }
            }
            for w in workloads {
                let rs: Vec<&SweepRow> = rows.iter().filter(|r| r.workload == w).collect();
                // The simulator labels its own energy ("simulated (estimated from device profile …)").
                let prov = rs
                    .iter()
                    .map(|r| r.energy_kind.clone())
                    .find(|k| !k.is_empty())
                    .unwrap_or_else(|| {
                        Provenance::estimated("device power profiles of the cache simulator")
                            .label()
                    });
                let mut by: BTreeMap<String, Vec<(f64, f64, f64)>> = BTreeMap::new();
                for r in &rs {
                    let name = if r.ghost_hints.is_empty() || r.ghost_hints == "-" {
                        r.strategy.clone()
                    } else {
                        format!("{} (hints {})", r.strategy, r.ghost_hints)
                    };
                    by.entry(name).or_default().push((
                        f64::from(r.knob),
                        r.energy_j,
                        r.mean_response_s,
                    ));
                }
                // Strategies swept over the knob are lines on a categorical knob axis (the
                // sweep's 0, 50, …, 99, 100 evenly spaced); a strategy run at one knob only
                // (static caches, the lower bound) does not depend on it: a reference line.
                let swept = |v: &Vec<(f64, f64, f64)>| v.iter().any(|t| t.0 != v[0].0);
                let any_swept = by.values().any(swept);
                let mk = |k: usize| -> (Vec<Series>, Vec<Reference>) {
                    let pick = |t: &(f64, f64, f64)| if k == 1 { t.1 } else { t.2 };
                    let mut lines = Vec::new();
                    let mut refs = Vec::new();
                    for (n, v) in &by {
                        if any_swept && !swept(v) {
                            let ys: Vec<f64> = v.iter().map(pick).collect();
                            refs.push(Reference {
                                name: n.clone(),
                                y: ys.iter().sum::<f64>() / ys.len() as f64,
                            });
                            continue;
                        }
                        let mut p: Vec<(f64, f64)> = v.iter().map(|t| (t.0, pick(t))).collect();
                        p.sort_by(|a, b| a.0.total_cmp(&b.0));
                        lines.push(Series {
                            name: n.clone(),
                            points: p,
                        });
                    }
                    (lines, refs)
                };
                let o = |zero: bool| LineOpts {
                    x_scale: XScale::Categorical,
                    markers: true,
                    y_zero: zero,
                    ..Default::default()
                };
                let (energy, energy_refs) = mk(1);
                let (response, response_refs) = mk(2);
                let knob = "knob (0 = save energy … 100 = performance)";
                let what = if w.is_empty() {
                    String::new()
                } else {
                    format!(" ({w})")
                };
                figure(
                    out,
                    &line_chart(
                        &chart(
                            &format!("Energy against knob{what}"),
                            &prov,
                            knob,
                            &energy_axis("Energy (J)", &prov),
                        ),
                        &energy,
                        &energy_refs,
                        &o(false),
                    ),
                    &format!("Energy against the performance/energy knob{what}"),
                    &prov,
                );
                figure(
                    out,
                    &line_chart(
                        &chart(
                            &format!("Response time against knob{what}"),
                            &prov,
                            knob,
                            "Mean response time (s)",
                        ),
                        &response,
                        &response_refs,
                        &o(true),
                    ),
                    &format!("Mean response time against the knob{what}"),
                    &prov,
                );
            }
        }
        Dataset::Transfer { summary } => {
            let provenance = transfer_energy_provenance(summary);
            let intervals = &summary.intervals;
            let prov = provenance
                .as_ref()
                .map(|p| p.label())
                .unwrap_or_else(|| "no energy recorded".into());
            let mut rows: Vec<Vec<String>> = vec![
                vec!["source".into(), summary.source.clone()],
                vec!["bytes".into(), summary.bytes.to_string()],
                vec!["files".into(), summary.files.to_string()],
                vec!["seconds".into(), format!("{:.3}", summary.seconds)],
                vec![
                    "throughput (Mbit/s)".into(),
                    format!("{:.1}", summary.throughput_mbps),
                ],
                vec!["SLA".into(), summary.sla.clone()],
                vec!["tuner".into(), summary.tuner.clone()],
            ];
            if let Some(e) = &summary.energy {
                rows.push(vec![
                    "energy (J)".into(),
                    format!("{:.3} — {prov}", e.total_j),
                ]);
            }
            let process = &summary.energy_process;
            rows.push(vec![
                "energy of a host running only this transfer (J)".into(),
                format!("{:.3} — {}", process.total_j, process.provenance),
            ]);
            table(out, &["field", "value"], &rows);
            if !intervals.is_empty() {
                let tp = Series {
                    name: "throughput".into(),
                    points: intervals
                        .iter()
                        .map(|i| (i.t_s, i.throughput_mbps))
                        .collect(),
                };
                let o = LineOpts {
                    y_zero: true,
                    ..Default::default()
                };
                let c = |title: &str, y: &str| chart(title, &prov, "time (s)", y);
                figure(
                    out,
                    &line_chart(
                        &c("Throughput over time", "Throughput (Mbit/s)"),
                        &[tp],
                        &[],
                        &o,
                    ),
                    "Throughput over time",
                    &prov,
                );
                let pw: Vec<(f64, f64)> = intervals
                    .iter()
                    .filter_map(|i| i.power_w.map(|p| (i.t_s, p)))
                    .collect();
                if !pw.is_empty() {
                    figure(
                        out,
                        &line_chart(
                            &c("Power over time", &energy_axis("Power (W)", &prov)),
                            &[Series {
                                name: "power".into(),
                                points: pw,
                            }],
                            &[],
                            &o,
                        ),
                        "Power over time",
                        &prov,
                    );
                }
                let mut params: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
                for i in intervals {
                    for (k, v) in transfer_parameters(i) {
                        params.entry(k).or_default().push((i.t_s, v));
                    }
                }
                let series: Vec<Series> = params
                    .into_iter()
                    .map(|(name, points)| Series { name, points })
                    .collect();
                if !series.is_empty() {
                    figure(
                        out,
                        &line_chart(&c("Parameters over time", "value"), &series, &[], &o),
                        "Tuning parameters over time",
                        &prov,
                    );
                }
            }
        }
        Dataset::OverheadLoad { runs } => overhead_load(out, runs),
        Dataset::OverheadIdle { runs } => overhead_idle(out, runs),
    }
}

fn iobench(out: &mut String, rows: &[RunRecord]) {
    let prov = wattio_iobench::provenance_of(rows);
    let mut ops: BTreeMap<(String, String), BTreeMap<String, Vec<&RunRecord>>> = BTreeMap::new();
    for r in rows {
        ops.entry((r.op.to_string(), r.size.to_string()))
            .or_default()
            .entry(r.method.clone())
            .or_default()
            .push(r);
    }
    for ((op, size), methods) in &ops {
        let what = if size.is_empty() {
            op.clone()
        } else {
            format!("{op}, size {size}")
        };
        let groups: Vec<BoxGroup> = methods
            .iter()
            .map(|(m, rs)| BoxGroup {
                label: m.clone(),
                values: rs.iter().map(|r| r.energy_j).collect(),
                baseline: false,
            })
            .collect();
        figure(
            out,
            &box_plot(
                &chart(
                    &format!("Energy per run: {what}"),
                    &prov,
                    "method",
                    &energy_axis("Energy (J)", &prov),
                ),
                &groups,
            ),
            &format!("Energy per run by method ({what})"),
            &prov,
        );
        let bars: Vec<(String, f64)> = methods
            .iter()
            .filter_map(|(m, rs)| {
                let v: Vec<f64> = rs
                    .iter()
                    .filter(|r| r.energy_j > 0.0)
                    .map(|r| r.bytes as f64 / 1e6 / r.energy_j)
                    .collect();
                median(&v).ok().map(|x| (m.clone(), x))
            })
            .collect();
        if !bars.is_empty() {
            figure(
                out,
                &bar_chart(
                    &chart(
                        &format!("MB per joule: {what}"),
                        &prov,
                        &energy_axis("MB per joule (median)", &prov),
                        "method",
                    ),
                    &bars,
                ),
                &format!("MB per joule by method ({what}), higher is better"),
                &prov,
            );
        }
    }
}

fn freq_label(mech: &str, f: f64) -> String {
    if mech == OFF {
        "off".into()
    } else {
        format!("{mech} {} Hz", fmt_num(f))
    }
}

fn overhead_load(out: &mut String, runs: &[LoadRun]) {
    let mechs: Vec<&str> = {
        let mut m: Vec<&str> = runs
            .iter()
            .map(|r| r.mechanism.as_str())
            .filter(|m| *m != OFF)
            .collect();
        m.sort();
        m.dedup();
        m
    };
    let prov = format!(
        "wall-clock running time; recorder sampled with {}",
        mechs.join(", ")
    );
    let mut workloads: Vec<&str> = Vec::new();
    for r in runs {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    for w in workloads {
        let mut groups: Vec<((u8, String, u64), Vec<f64>)> = Vec::new();
        for r in runs.iter().filter(|r| r.workload == w) {
            let key = (
                u8::from(r.mechanism != OFF),
                r.mechanism.clone(),
                (r.freq_hz * 1000.0).round() as u64,
            );
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) => g.1.push(r.elapsed_s),
                None => groups.push((key, vec![r.elapsed_s])),
            }
        }
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        let bg: Vec<BoxGroup> = groups
            .into_iter()
            .map(|((_, m, f), v)| BoxGroup {
                label: freq_label(&m, f as f64 / 1000.0),
                baseline: m == OFF,
                values: v,
            })
            .collect();
        figure_as(
            out,
            &box_plot(
                &chart(
                    &format!("Running time: {w}"),
                    &prov,
                    "sampling (baseline in red)",
                    "Running time (s)",
                ),
                &bg,
            ),
            &format!("Running time of {w} without measurement (red) and with `wattio record` at each frequency; every run is a dot"),
            "timing",
            &prov,
        );
    }
    let tests = analyze_load(runs);
    if !tests.is_empty() {
        let mut series: Vec<Series> = Vec::new();
        for t in &tests {
            let name = format!("{} ({})", t.workload, t.mechanism);
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push((t.freq_hz, t.shift_pct)),
                None => series.push(Series {
                    name,
                    points: vec![(t.freq_hz, t.shift_pct)],
                }),
            }
        }
        let o = LineOpts {
            x_scale: XScale::Log,
            markers: true,
            y_zero: true,
            ..Default::default()
        };
        figure_as(
            out,
            &line_chart(
                &chart(
                    "Running-time shift against sampling frequency",
                    &prov,
                    "Sampling frequency (Hz, log scale)",
                    "Running-time shift (%)",
                ),
                &series,
                &[],
                &o,
            ),
            "Hodges–Lehmann shift of the running time (with − without measurement) in % of the median without; 0 = no overhead",
            "timing",
            &prov,
        );
    }
    let rows: Vec<Vec<String>> = tests
        .iter()
        .map(|t| {
            vec![
                t.workload.clone(),
                t.mechanism.clone(),
                fmt_num(t.freq_hz),
                format!("{}/{}", t.n_base, t.n),
                fmt_p(t.p_value),
                fmt_p(t.p_adj),
                fmt_p(t.p_two_sided),
                format!("{:+.4}", t.shift_s),
                format!("{:+.2}", t.shift_pct),
                format!("[{:+.4}, {:+.4}]", t.ci_low_s, t.ci_high_s),
                format!("{:.1}", t.sample_rate),
            ]
        })
        .collect();
    out.push_str("<p>One-sided Wilcoxon rank-sum test (H1: slower with measurement) of each frequency against the runs without measurement, after removing outliers outside [q1 − 3·IQR, q3 + 3·IQR]; Holm–Bonferroni over the table; shift = Hodges–Lehmann estimate (on − off) with its 95% interval. Shaped like the RAPL paper's Appendix A; the unadjusted two-sided p-value is a diagnostic for differences in the other direction (faster with measurement), which the one-sided test cannot flag.</p>");
    table(
        out,
        &[
            "workload",
            "mechanism",
            "freq (Hz)",
            "n off/on",
            "pvalue",
            "adj.pvalue",
            "p two-sided",
            "shift (s)",
            "shift %",
            "95% CI (s)",
            "rows/s",
        ],
        &rows,
    );
}

fn overhead_idle(out: &mut String, runs: &[IdleRun]) {
    let model_name = runs.first().map(|r| r.model.clone()).unwrap_or_default();
    let prov = Provenance::estimated(model_name.clone()).label();
    let mut keys: Vec<(u8, String, u64)> = runs
        .iter()
        .map(|r| {
            (
                u8::from(r.mechanism != OFF),
                r.mechanism.clone(),
                (r.freq_hz * 1000.0).round() as u64,
            )
        })
        .collect();
    keys.sort();
    keys.dedup();
    let groups = |f: &dyn Fn(&IdleRun) -> f64| -> Vec<BoxGroup> {
        keys.iter()
            .map(|(_, m, k)| BoxGroup {
                label: freq_label(m, *k as f64 / 1000.0),
                baseline: m == OFF,
                values: runs
                    .iter()
                    .filter(|r| &r.mechanism == m && (r.freq_hz * 1000.0).round() as u64 == *k)
                    .map(f)
                    .collect(),
            })
            .collect()
    };
    let sampling = "sampling (baseline in red)";
    figure(
        out,
        &box_plot(
            &chart(
                "Idle machine: estimated power",
                &prov,
                sampling,
                &energy_axis("Power (W)", &prov),
            ),
            &groups(&|r| r.est_power_w),
        ),
        "Whole-machine power during an idle sleep, ESTIMATED by the model from /proc/stat busy time",
        &prov,
    );
    figure_as(
        out,
        &box_plot(
            &chart(
                "Recorder CPU time per second",
                &prov,
                sampling,
                "Recorder CPU time (s per s)",
            ),
            &groups(&|r| {
                if r.recorder_s > 0.0 {
                    r.recorder_cpu_s / r.recorder_s
                } else {
                    0.0
                }
            }),
        ),
        "CPU time of the wattio record process per second of idle time (wait4 rusage)",
        "CPU time",
        "measured by wait4 rusage",
    );
    // The coefficients only feed the recorder-share column (they solve the vCPU count of files
    // written before idle.csv had one), which this table leaves out.
    let model = ModelParams::default();
    let tests = analyze_idle(runs, &model);
    if !tests.is_empty() {
        let mut series: Vec<Series> = Vec::new();
        for t in &tests {
            match series.iter_mut().find(|s| s.name == t.mechanism) {
                Some(s) => s.points.push((t.freq_hz, t.recorder_cpu_per_s)),
                None => series.push(Series {
                    name: t.mechanism.clone(),
                    points: vec![(t.freq_hz, t.recorder_cpu_per_s)],
                }),
            }
        }
        let o = LineOpts {
            x_scale: XScale::Log,
            markers: true,
            y_zero: true,
            ..Default::default()
        };
        figure_as(
            out,
            &line_chart(
                &chart(
                    "Recorder CPU time against sampling frequency",
                    &prov,
                    "Sampling frequency (Hz, log scale)",
                    "Recorder CPU time (s per s)",
                ),
                &series,
                &[],
                &o,
            ),
            "Median CPU time of the recorder per second of idle time, by sampling frequency",
            "CPU time",
            "measured by wait4 rusage",
        );
    }
    let rows: Vec<Vec<String>> = tests
        .iter()
        .map(|t| {
            vec![
                t.mechanism.clone(),
                fmt_num(t.freq_hz),
                format!("{}/{}", t.n_base, t.n),
                fmt_p(t.p_value),
                fmt_p(t.p_adj),
                format!("{:+.3}", t.shift_w),
                format!("{:.5}", t.recorder_cpu_per_s),
                t.cstates_cell(),
            ]
        })
        .collect();
    let _ = write!(out, "<p>Shaped like the RAPL paper's Appendix B, but the power is {} — it can only show the CPU time sampling costs, not C-state or uncore effects.</p>", prov_html(&prov));
    table(
        out,
        &[
            "mechanism",
            "freq (Hz)",
            "n off/on",
            "pvalue",
            "adj.pvalue",
            "shift (W, estimated)",
            "recorder CPU (s/s)",
            "C-states",
        ],
        &rows,
    );
    if let Some(why) = runs.iter().find(|r| r.cstates.starts_with("unavailable")) {
        let _ = write!(
            out,
            "<p class=\"note\">C-state residency {}</p>",
            esc(&why.cstates)
        );
    }
}
