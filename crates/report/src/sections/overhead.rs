//! The overhead study's rows (`wattio-results`' [`LoadRun`], [`IdleRun`]) as sections of a
//! `wattio report` page, drawn by the report with the study's statistics (`wattio-results`' too),
//! shaped like the RAPL paper's appendices: running time with and without measurement
//! ([`LoadRuns`], Appendix A) and the idle machine's power and the recorder's CPU time
//! ([`IdleRuns`], Appendix B).

use wattio_plot::{
    box_plot, energy_axis, fmt_num, line_chart, provenance_html, BoxGroup, Chart, HtmlSection,
    LineOpts, ReportSection, Series, XScale,
};
use wattio_results::{
    analyze_idle_with, analyze_load, fmt_p, provenance_label, IdleRun, IdleTest, LoadRun, TimeTest,
    OFF,
};

/// Axis name of the box plots: one box per sampling setting, the runs without measurement red.
const SAMPLING_AXIS: &str = "sampling (baseline in red)";
/// How the recorder's CPU time is measured.
const RUSAGE: &str = "measured by wait4 rusage";

/// The load runs of the study (`runs.csv`).
#[derive(Debug, Clone)]
pub struct LoadRuns {
    pub runs: Vec<LoadRun>,
}

/// The idle runs of the study (`idle.csv`).
#[derive(Debug, Clone)]
pub struct IdleRuns {
    pub runs: Vec<IdleRun>,
}

/// A box's label: "off", or the mechanism and its frequency.
fn freq_label(mech: &str, f: f64) -> String {
    if mech == OFF {
        "off".into()
    } else {
        format!("{mech} {} Hz", fmt_num(f))
    }
}

/// The key a sampling setting sorts by: runs without measurement first, then by mechanism and
/// frequency (in mHz, so it can be compared exactly).
fn setting_key(mechanism: &str, freq_hz: f64) -> (u8, String, u64) {
    (
        u8::from(mechanism != OFF),
        mechanism.to_string(),
        (freq_hz * 1000.0).round() as u64,
    )
}

/// Points of one line per `name`, in the order the names first appear.
fn lines_by_name(points: impl IntoIterator<Item = (String, f64, f64)>) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for (name, x, y) in points {
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x, y)),
            None => series.push(Series {
                name,
                points: vec![(x, y)],
            }),
        }
    }
    series
}

fn log_frequency_opts() -> LineOpts {
    LineOpts {
        x_scale: XScale::Log,
        markers: true,
        y_zero: true,
        ..Default::default()
    }
}

impl ReportSection for LoadRuns {
    fn kind(&self) -> &'static str {
        "overhead (running time)"
    }

    fn render(&self, out: &mut HtmlSection) {
        let runs = &self.runs;
        let mut mechanisms: Vec<&str> = runs
            .iter()
            .map(|r| r.mechanism.as_str())
            .filter(|m| *m != OFF)
            .collect();
        mechanisms.sort();
        mechanisms.dedup();
        let prov = format!(
            "wall-clock running time; recorder sampled with {}",
            mechanisms.join(", ")
        );
        let mut workloads: Vec<&str> = Vec::new();
        for r in runs {
            if !workloads.contains(&r.workload.as_str()) {
                workloads.push(&r.workload);
            }
        }
        for w in workloads {
            running_time_boxes(out, runs, w, &prov);
        }
        let tests = analyze_load(runs);
        if !tests.is_empty() {
            shift_chart(out, &tests, &prov);
        }
        time_tests_table(out, &tests);
    }
}

/// One box per sampling setting of workload `w`'s running times.
fn running_time_boxes(out: &mut HtmlSection, runs: &[LoadRun], w: &str, prov: &str) {
    let mut groups: Vec<((u8, String, u64), Vec<f64>)> = Vec::new();
    for r in runs.iter().filter(|r| r.workload == w) {
        let key = setting_key(&r.mechanism, r.freq_hz);
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.1.push(r.elapsed_s),
            None => groups.push((key, vec![r.elapsed_s])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let boxes: Vec<BoxGroup> = groups
        .into_iter()
        .map(|((_, m, f), v)| BoxGroup {
            label: freq_label(&m, f as f64 / 1000.0),
            baseline: m == OFF,
            values: v,
        })
        .collect();
    out.figure_as(
        &box_plot(
            &Chart::titled(
                &format!("Running time: {w}"),
                prov,
                SAMPLING_AXIS,
                "Running time (s)",
            ),
            &boxes,
        ),
        &format!("Running time of {w} without measurement (red) and with `wattio record` at each frequency; every run is a dot"),
        "timing",
        prov,
    );
}

fn shift_chart(out: &mut HtmlSection, tests: &[TimeTest], prov: &str) {
    let series = lines_by_name(tests.iter().map(|t| {
        (
            format!("{} ({})", t.workload, t.mechanism),
            t.freq_hz,
            t.shift_pct,
        )
    }));
    out.figure_as(
        &line_chart(
            &Chart::titled(
                "Running-time shift against sampling frequency",
                prov,
                "Sampling frequency (Hz, log scale)",
                "Running-time shift (%)",
            ),
            &series,
            &[],
            &log_frequency_opts(),
        ),
        "Hodges–Lehmann shift of the running time (with − without measurement) in % of the median without; 0 = no overhead",
        "timing",
        prov,
    );
}

fn time_tests_table(out: &mut HtmlSection, tests: &[TimeTest]) {
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
    out.paragraph_html("One-sided Wilcoxon rank-sum test (H1: slower with measurement) of each frequency against the runs without measurement, after removing outliers outside [q1 − 3·IQR, q3 + 3·IQR]; Holm–Bonferroni over the table; shift = Hodges–Lehmann estimate (on − off) with its 95% interval. Shaped like the RAPL paper's Appendix A; the unadjusted two-sided p-value is a diagnostic for differences in the other direction (faster with measurement), which the one-sided test cannot flag.");
    out.table(
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

impl ReportSection for IdleRuns {
    fn kind(&self) -> &'static str {
        "overhead (idle)"
    }

    fn render(&self, out: &mut HtmlSection) {
        let runs = &self.runs;
        let model_name = runs.first().map(|r| r.model.clone()).unwrap_or_default();
        // The idle runs' power is the utilisation model's estimate (mechanism `model`).
        let prov = provenance_label("model", true, Some(&model_name));
        idle_boxes(out, runs, &prov);
        // No recorder share of the power (the meter's attribution): this table leaves it out.
        let tests = analyze_idle_with(runs, |_, _, _| None);
        if !tests.is_empty() {
            let series = lines_by_name(
                tests
                    .iter()
                    .map(|t| (t.mechanism.clone(), t.freq_hz, t.recorder_cpu_per_s)),
            );
            out.figure_as(
                &line_chart(
                    &Chart::titled(
                        "Recorder CPU time against sampling frequency",
                        &prov,
                        "Sampling frequency (Hz, log scale)",
                        "Recorder CPU time (s per s)",
                    ),
                    &series,
                    &[],
                    &log_frequency_opts(),
                ),
                "Median CPU time of the recorder per second of idle time, by sampling frequency",
                "CPU time",
                RUSAGE,
            );
        }
        idle_tests_table(out, &tests, &prov);
        if let Some(why) = runs.iter().find(|r| r.cstates.starts_with("unavailable")) {
            out.note(&format!("C-state residency {}", why.cstates));
        }
    }
}

/// The estimated power and the recorder's CPU time per second, one box per sampling setting.
fn idle_boxes(out: &mut HtmlSection, runs: &[IdleRun], prov: &str) {
    let mut keys: Vec<(u8, String, u64)> = runs
        .iter()
        .map(|r| setting_key(&r.mechanism, r.freq_hz))
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
    out.figure(
        &box_plot(
            &Chart::titled(
                "Idle machine: estimated power",
                prov,
                SAMPLING_AXIS,
                &energy_axis("Power (W)", prov),
            ),
            &groups(&|r| r.est_power_w),
        ),
        "Whole-machine power during an idle sleep, ESTIMATED by the model from /proc/stat busy time",
        prov,
    );
    out.figure_as(
        &box_plot(
            &Chart::titled(
                "Recorder CPU time per second",
                prov,
                SAMPLING_AXIS,
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
        RUSAGE,
    );
}

fn idle_tests_table(out: &mut HtmlSection, tests: &[IdleTest], prov: &str) {
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
    out.paragraph_html(&format!("Shaped like the RAPL paper's Appendix B, but the power is {} — it can only show the CPU time sampling costs, not C-state or uncore effects.", provenance_html(prov)));
    out.table(
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
}
