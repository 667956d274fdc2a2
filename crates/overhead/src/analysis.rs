//! The overhead study's outputs from its rows: the appendix-shaped tables (Markdown for
//! `summary.md`, CSV for `tests.csv` and `idle_tests.csv`) of the statistics `wattio-results`
//! computes ([`analyze_load`], [`analyze_idle_with`]), and [`analyze_idle`], which gives those the
//! recorder's attributed share of the estimated power by the meter's attribution and the model.

use wattio_energy::attribution;
use wattio_energy::ModelParams;
use wattio_results::{analyze_idle_with, fmt_p, Align, IdleRun, IdleTest, Table, TimeTest};
#[cfg(test)]
use wattio_results::{analyze_load, LoadRun, OFF};

/// [`analyze_idle_with`] with the recorder's share of the estimated power as the meter
/// attributes it (`attribution::share_j` by the recorder's CPU time), on the vCPUs each run
/// charged idle power for (its `n_cpus`, or for files written before that column, solved from
/// its estimate with `model`).
pub fn analyze_idle(runs: &[IdleRun], model: &ModelParams) -> Vec<IdleTest> {
    analyze_idle_with(runs, |r, power_w, cpu_per_s| {
        idle_run_cpus(r, model).map(|n| attribution::share_j(power_w * 1.0, n, 1.0, cpu_per_s))
    })
}

/// The vCPUs an idle run's estimate charged idle power for: its `n_cpus` column, or for files
/// written before that column, solved from its own estimate
/// (`est_power_w = min·n + (max − min)·busy_cpu_s / wall_s`) when it was made with `model`.
fn idle_run_cpus(r: &IdleRun, model: &ModelParams) -> Option<usize> {
    if let Some(n) = r.n_cpus.filter(|&n| n > 0) {
        return Some(n);
    }
    // The solve holds for a straight line only (ccf-linear, two points).
    if r.model != model.name()
        || model.points.len() != 2
        || r.wall_s <= 0.0
        || model.min_w_per_cpu() <= 0.0
    {
        return None;
    }
    let dynamic_w = (model.max_w_per_cpu() - model.min_w_per_cpu()) * r.busy_cpu_s / r.wall_s;
    let n = ((r.est_power_w - dynamic_w) / model.min_w_per_cpu()).round();
    (n >= 1.0).then_some(n as usize)
}

/// Markdown table shaped like the paper's Appendix A.
pub fn time_table_markdown(tests: &[TimeTest]) -> String {
    use Align::{Plain as P, Right as R};
    let mut t = Table::new(&[
        ("workload", P),
        ("mechanism", P),
        ("freq (Hz)", R),
        ("n (off/on)", R),
        ("median off (s)", R),
        ("median on (s)", R),
        ("pvalue", R),
        ("adj.pvalue", R),
        ("p two-sided", R),
        ("shift (s)", R),
        ("shift %", R),
        ("95% CI (s)", P),
        ("rows/s", R),
        ("recorder CPU (s)", R),
    ]);
    for x in tests {
        t.push(vec![
            x.workload.clone(),
            x.mechanism.clone(),
            x.freq_hz.to_string(),
            format!("{}/{}", x.n_base, x.n),
            format!("{:.4}", x.median_base_s),
            format!("{:.4}", x.median_s),
            fmt_p(x.p_value),
            fmt_p(x.p_adj),
            fmt_p(x.p_two_sided),
            format!("{:+.4}", x.shift_s),
            format!("{:+.2}", x.shift_pct),
            format!("[{:+.4}, {:+.4}]", x.ci_low_s, x.ci_high_s),
            format!("{:.1}", x.sample_rate),
            format!("{:.3}", x.recorder_cpu_s),
        ]);
    }
    t.markdown()
}

/// Markdown table shaped like the paper's Appendix B (idle impact).
pub fn idle_table_markdown(tests: &[IdleTest]) -> String {
    use Align::{Plain as P, Right as R};
    let mut t = Table::new(&[
        ("mechanism", P),
        ("freq (Hz)", R),
        ("n (off/on)", R),
        ("est. power off (W)", R),
        ("est. power on (W)", R),
        ("pvalue", R),
        ("adj.pvalue", R),
        ("shift (W, estimated)", R),
        ("recorder CPU (s/s)", R),
        ("recorder share of est. power (W)", R),
        ("rows/s", R),
        ("C-state residency (off → on)", P),
    ]);
    for x in tests {
        t.push(vec![
            x.mechanism.clone(),
            x.freq_hz.to_string(),
            format!("{}/{}", x.n_base, x.n),
            format!("{:.3}", x.median_power_base_w),
            format!("{:.3}", x.median_power_w),
            fmt_p(x.p_value),
            fmt_p(x.p_adj),
            format!("{:+.3}", x.shift_w),
            format!("{:.5}", x.recorder_cpu_per_s),
            format!("{:.4}", x.recorder_power_w),
            format!("{:.1}", x.sample_rate),
            x.cstates_cell(),
        ]);
    }
    t.markdown()
}

/// CSV of the time tests (machine-readable Appendix A).
pub fn time_tests_csv(tests: &[TimeTest]) -> String {
    csv_text(
        &[
            "workload",
            "mechanism",
            "freq_hz",
            "n_base",
            "n",
            "removed_base",
            "removed",
            "median_base_s",
            "median_s",
            "pvalue",
            "adj_pvalue",
            "pvalue_two_sided",
            "exact",
            "shift_s",
            "shift_pct",
            "ci95_low_s",
            "ci95_high_s",
            "rows_per_s",
            "recorder_cpu_s",
        ],
        tests.iter().map(|t| {
            vec![
                t.workload.clone(),
                t.mechanism.clone(),
                t.freq_hz.to_string(),
                t.n_base.to_string(),
                t.n.to_string(),
                t.removed_base.to_string(),
                t.removed.to_string(),
                t.median_base_s.to_string(),
                t.median_s.to_string(),
                t.p_value.to_string(),
                t.p_adj.to_string(),
                t.p_two_sided.to_string(),
                t.exact.to_string(),
                t.shift_s.to_string(),
                t.shift_pct.to_string(),
                t.ci_low_s.to_string(),
                t.ci_high_s.to_string(),
                t.sample_rate.to_string(),
                t.recorder_cpu_s.to_string(),
            ]
        }),
    )
}

/// CSV of the idle tests (machine-readable Appendix B; power figures are ESTIMATED).
pub fn idle_tests_csv(tests: &[IdleTest], model: &ModelParams) -> String {
    csv_text(
        &[
            "mechanism",
            "freq_hz",
            "n_base",
            "n",
            "est_power_base_w",
            "est_power_w",
            "pvalue",
            "adj_pvalue",
            "shift_w",
            "recorder_cpu_per_s",
            "recorder_power_w",
            "rows_per_s",
            "cstates_base",
            "cstates",
            "estimated",
            "model",
        ],
        tests.iter().map(|t| {
            vec![
                t.mechanism.clone(),
                t.freq_hz.to_string(),
                t.n_base.to_string(),
                t.n.to_string(),
                t.median_power_base_w.to_string(),
                t.median_power_w.to_string(),
                t.p_value.to_string(),
                t.p_adj.to_string(),
                t.shift_w.to_string(),
                t.recorder_cpu_per_s.to_string(),
                t.recorder_power_w.to_string(),
                t.sample_rate.to_string(),
                t.cstates_base.clone(),
                t.cstates.clone(),
                "true".into(),
                model.name(),
            ]
        }),
    )
}

/// A header and rows as CSV text, through the one table writer.
fn csv_text(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut t = Table::plain(header);
    for r in rows {
        t.push(r);
    }
    t.csv()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tests_csv_quotes_what_needs_it_and_reads_back() {
        let runs: Vec<LoadRun> = [(OFF, 0.0, 10.0), ("model", 10.0, 10.5)]
            .iter()
            .flat_map(|&(mech, f, e)| {
                (0..4).map(move |i| LoadRun {
                    round: 0,
                    seq: i,
                    workload: "stress-ng --cpu 1, \"matrix\"".into(),
                    mechanism: mech.into(),
                    freq_hz: f,
                    rep: i,
                    elapsed_s: e + i as f64 * 0.01,
                    samples: 0,
                    recorder_s: e,
                    recorder_cpu_s: 0.0,
                    start_unix: 0.0,
                })
            })
            .collect();
        let text = time_tests_csv(&analyze_load(&runs));
        let mut lines = text.lines();
        assert!(lines
            .next()
            .unwrap()
            .starts_with("workload,mechanism,freq_hz,"));
        assert!(
            lines
                .next()
                .unwrap()
                .starts_with("\"stress-ng --cpu 1, \"\"matrix\"\"\",model,10,"),
            "{text}"
        );
        assert!(text.ends_with('\n') && !text.contains('\r'));
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].len(), 19);
        assert_eq!(&rows[0][0], "stress-ng --cpu 1, \"matrix\"");
    }

    fn idle_run(
        mech: &str,
        f: f64,
        rep: usize,
        busy: f64,
        rec_cpu: f64,
        n: Option<usize>,
    ) -> IdleRun {
        let model = ModelParams::default();
        IdleRun {
            round: 0,
            seq: rep,
            mechanism: mech.into(),
            freq_hz: f,
            rep,
            wall_s: 2.0,
            busy_cpu_s: busy,
            recorder_s: if mech == OFF { 0.0 } else { 2.0 },
            recorder_cpu_s: rec_cpu,
            samples: 0,
            est_power_w: model.energy_j(2, 2.0, busy) / 2.0,
            model: model.name(),
            cstates: "unavailable".into(),
            n_cpus: n,
        }
    }

    #[test]
    fn recorder_power_is_its_attributed_share_of_the_estimated_power() {
        let model = ModelParams::default();
        let mut runs = Vec::new();
        for i in 0..5 {
            runs.push(idle_run(OFF, 0.0, i, 1.0 + 0.01 * i as f64, 0.0, Some(2)));
            runs.push(idle_run(
                "model",
                1000.0,
                i,
                1.1 + 0.01 * i as f64,
                0.08,
                Some(2),
            ));
        }
        let t = analyze_idle(&runs, &model);
        assert_eq!(t.len(), 1);
        let t = &t[0];
        assert!((t.recorder_cpu_per_s - 0.04).abs() < 1e-12);
        let want = attribution::share_j(t.median_power_w * 1.0, 2, 1.0, t.recorder_cpu_per_s);
        assert_eq!(t.recorder_power_w, want);
        // = est. power on × recorder CPU s/s ÷ vCPUs, within the power it is a share of.
        assert!((t.recorder_power_w - t.median_power_w * 0.04 / 2.0).abs() < 1e-12);
        assert!(t.recorder_power_w > 0.0 && t.recorder_power_w <= t.median_power_w);
        // A file written before the n_cpus column: the count is solved from the estimate.
        let old: Vec<IdleRun> = runs
            .iter()
            .cloned()
            .map(|mut r| {
                r.n_cpus = None;
                r
            })
            .collect();
        assert_eq!(analyze_idle(&old, &model)[0].recorder_power_w, want);
        // ... but not from another model's estimate.
        let other = ModelParams::ccf_linear(1.0, 2.0);
        assert!(analyze_idle(&old, &other)[0].recorder_power_w.is_nan());
    }
}
