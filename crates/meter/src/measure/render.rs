//! What `wattio measure` prints and exports: the single-run report, the hyperfine-like summary,
//! and the CSV and Markdown tables. JSON is the serde form of [`Report`] and [`RunReport`].

use super::bench::{CommandResult, Report, Stat};
use super::{RunReport, RunStatus};
use crate::rows::csv_field;
use std::fmt::Write as _;
use wattio_energy::{format_co2e, Domain};
use wattio_results::{Align, Table};

/// The report of one run of one command (`wattio measure -- cmd`).
pub fn single_run(command: &str, r: &RunReport) -> String {
    let mut s = String::new();
    let e = &r.energy;
    let _ = writeln!(s, "command      {command}");
    let _ = writeln!(s, "duration     {:.3} s", e.duration_s);
    let _ = writeln!(s, "energy       {}", r.total_label);
    for d in &e.domains {
        let own = d
            .label
            .as_deref()
            .map(|l| format!("  {l}"))
            .unwrap_or_default();
        let name = match d.domain {
            // Meters beside the CPU are numbered, not sockets; never in the total.
            Domain::Platform | Domain::Device => format!("{} {:<10}", d.domain, d.socket),
            _ => format!("socket {} {:<8}", d.socket, d.domain.as_str()),
        };
        let _ = writeln!(s, "  {name} {:>12.3} J{own}", d.energy_j);
    }
    if let Some(p) = e.psys_j {
        let _ = writeln!(s, "  psys (whole platform, not in total) {p:.3} J");
    }
    if e.domains
        .iter()
        .all(|d| d.domain == wattio_energy::Domain::Gpu)
        && e.gpu_j.is_some()
    {
        let _ = writeln!(
            s,
            "total        no CPU domain was read (GPUs only: --domains gpu or --source nvml)"
        );
    } else {
        let _ = writeln!(
            s,
            "total        {:.3} J (package + dram, whole machine){}",
            e.total_j,
            if e.provenance.estimated {
                " ESTIMATED"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(s, "mean power   {:.3} W", r.mean_power_w);
    if let (Some(g), Some(w)) = (e.gpu_j, e.gpu_mean_power_w()) {
        let _ = writeln!(
            s,
            "gpu          {g:.3} J, {w:.3} W (all GPUs, beside the total, not in it): {}",
            e.gpu_label.as_deref().unwrap_or("")
        );
    }
    if let Some(m) = &r.machine {
        s.push_str(&machine_lines(m, e.duration_s));
    }
    if let (Some(j), Some(l)) = (r.gpu_attributed_j, &r.gpu_attributed_label) {
        let _ = writeln!(
            s,
            "command GPU  {j:.3} J, its share of the GPUs' energy: {l}"
        );
    }
    let _ = writeln!(
        s,
        "command CPU  {:.3} s (on {} CPUs)",
        r.child_cpu_s, r.n_cpus
    );
    let _ = writeln!(
        s,
        "command share {:.3} J, its CPU-time share of the total: {}",
        r.attributed_j, r.attributed_label
    );
    if let Some(k) = &r.kernel_io {
        s.push_str(&kernel_io_line(k));
    }
    if let Some(y) = &r.sync {
        s.push_str(&sync_lines(y, e.provenance.estimated));
    }
    if let Some(d) = &r.disks {
        s.push_str(&crate::disks::disk_lines(d));
    }
    if let Some(n) = &r.nics {
        s.push_str(&crate::disks::nic_text(n));
    }
    if let Some(g) = &r.regions {
        s.push_str(&region_lines(g));
    }
    if let Some(c) = &r.co2e {
        let gpu = c
            .gpu_co2e_g
            .map(|g| format!(", gpu {}", format_co2e(g)))
            .unwrap_or_default()
            + &c.gpu_attributed_co2e_g
                .map(|g| format!(", the command's gpu share {}", format_co2e(g)))
                .unwrap_or_default();
        let _ = writeln!(
            s,
            "CO2e         {} of the total, {} of the command's share{gpu} ({})",
            format_co2e(c.co2e_g),
            format_co2e(c.attributed_co2e_g),
            co2e_basis(e.provenance.estimated, &c.carbon_intensity)
        );
    }
    let _ = writeln!(s, "exit code    {}", r.exit_code);
    s
}

/// The whole machine: each platform meter's figure, and the rest RAPL and the GPU meters do
/// not see where it is sound, or why not.
fn machine_lines(m: &crate::MachineView, duration_s: f64) -> String {
    let mut s = String::new();
    let watts = |j: f64| j / duration_s.max(1e-9);
    for p in &m.platforms {
        let _ = writeln!(
            s,
            "machine      {} {:.3} J ({:.1} W), {}, {:.1} s averaging, {:.1} s late",
            p.meter,
            p.platform_j,
            watts(p.platform_j),
            p.label,
            p.averaging_s,
            p.delay_s
        );
        match (p.rest_j, p.rest_uncertainty_j) {
            (Some(rest), Some(u)) => {
                let _ = writeln!(
                    s,
                    "  rest       {rest:.3} ± {u:.3} J ({:.1} W): the machine less package, DRAM and GPUs ({:.3} J), what they do not see{}",
                    watts(rest),
                    m.parts_j,
                    p.note.as_deref().map(|n| format!("; {n}")).unwrap_or_default()
                );
            }
            _ => {
                let why = p.note.as_deref().unwrap_or("no rest");
                let _ = writeln!(s, "  rest       {why}");
            }
        }
    }
    s
}

/// The regions the command measured of its own code: one line per name, summed over its
/// regions (nested regions are inside their parents' figures, not beside them).
fn region_lines(g: &super::regions::Regions) -> String {
    let mut s = String::new();
    if let Some(why) = &g.unavailable {
        let _ = writeln!(s, "regions      none: {why}");
        return s;
    }
    let label = g
        .totals
        .first()
        .map(|t| t.attributed_label.as_str())
        .unwrap_or("");
    let _ = writeln!(
        s,
        "regions      {} name(s) measured by the command itself; share: {label}",
        g.totals.len()
    );
    let width = g
        .totals
        .iter()
        .map(|t| t.name.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        s,
        "  {:<width$} {:>7} {:>10} {:>10} {:>12} {:>12}",
        "name", "count", "time s", "CPU s", "machine J", "share J"
    );
    for t in &g.totals {
        let _ = writeln!(
            s,
            "  {:<width$} {:>7} {:>10.3} {:>10.3} {:>12.3} {:>12.3}",
            t.name, t.count, t.window_s, t.cpu_s, t.energy_j, t.attributed_j
        );
    }
    if g.unclosed > 0 {
        let _ = writeln!(
            s,
            "  {} region(s) never closed before the command ended: left out",
            g.unclosed
        );
    }
    if g.not_kept > 0 {
        let _ = writeln!(
            s,
            "  {} region(s) of new names past the bound of regions kept: not summed",
            g.not_kept
        );
    }
    if g.refused > 0 {
        let _ = writeln!(
            s,
            "  {} region request(s) refused (ERR): a client broke the protocol or a bound",
            g.refused
        );
    }
    s
}

/// The summary's `kernel I/O` line: the kernel's I/O work done for the command, by kind.
fn kernel_io_line(k: &super::KernelIoShare) -> String {
    let kinds: Vec<String> = k
        .cpu_s_by_kind
        .iter()
        .map(|(kind, cpu_s)| format!("{kind} {cpu_s:.4}"))
        .collect();
    format!(
        "kernel I/O   {:.3} J for {:.3} CPU-s done for the command ({}): {}\n",
        k.attributed_j,
        k.cpu_s,
        match kinds.is_empty() {
            true => "none".to_string(),
            false => kinds.join(", "),
        },
        k.attributed_label
    )
}

/// The summary's two `sync` lines: the phase, and the command's share of it.
fn sync_lines(y: &super::sync::SyncPhase, estimated: bool) -> String {
    let measured = y
        .kernel_io_cpu_s
        .map(|c| format!(", {c:.3} CPU-s of kernel I/O work done for it in the sync"))
        .unwrap_or_default();
    format!(
        "sync         {:.3} s after the command, {:.3} J (whole machine, not in the total){}, {:.3} busy CPU-s\n\
         sync share   {:.3} J: the command wrote {} of the {} dirty{measured}: {}\n",
        y.duration_s,
        y.total_j,
        if estimated { " ESTIMATED" } else { "" },
        y.busy_cpu_s,
        y.attributed_j,
        format_bytes(y.written_bytes),
        format_bytes(y.dirty_bytes),
        y.attributed_label
    )
}

/// Bytes in MiB (KiB below one MiB).
fn format_bytes(b: u64) -> String {
    if b < 1 << 20 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

/// What a CO₂e figure stands on: the intensity, and the energy's being an estimate.
fn co2e_basis(estimated: bool, intensity: &wattio_energy::CarbonIntensity) -> String {
    let energy = if estimated {
        "ESTIMATED energy at "
    } else {
        "at "
    };
    format!("{energy}{}", intensity.label())
}

/// A unit for times of the size of `x`: scale, name, decimals.
fn time_unit(x: f64) -> (f64, &'static str, usize) {
    if x.abs() < 1.0 {
        (1e3, "ms", 1)
    } else {
        (1.0, "s", 3)
    }
}

/// A unit for energies of the size of `x`: J, mJ or µJ.
fn energy_unit(x: f64) -> (f64, &'static str, usize) {
    let a = x.abs();
    if a >= 1.0 || a == 0.0 {
        (1.0, "J", 3)
    } else if a >= 1e-3 {
        (1e3, "mJ", 1)
    } else {
        (1e6, "µJ", 1)
    }
}

/// `x` in the unit `unit_of` picks for `like`.
fn fmt_in(x: f64, like: f64, unit_of: fn(f64) -> (f64, &'static str, usize)) -> String {
    let (scale, unit, d) = unit_of(like);
    format!("{:.d$} {unit}", x * scale)
}

/// One line of a benchmark: mean ± σ and the range, all in the unit the mean calls for.
fn line(
    name: &str,
    st: &Stat,
    unit_of: fn(f64) -> (f64, &'static str, usize),
    tail: &str,
) -> String {
    let f = |x: f64| fmt_in(x, st.mean, unit_of);
    let (m, sd, lo, hi) = (f(st.mean), f(st.stddev), f(st.min), f(st.max));
    format!(
        "  {name:<8}(mean ± σ): {m:>11} ± {sd:>10}    [min … max]: {lo:>11} … {hi:>11}    {tail}\n"
    )
}

/// A p-value as it is printed.
pub fn fmt_p(p: f64) -> String {
    if p < 1e-4 {
        "p < 0.0001".into()
    } else {
        format!("p = {p:.4}")
    }
}

fn left_out(c: &CommandResult) -> Option<String> {
    let mut parts = Vec::new();
    let codes = |st: RunStatus| {
        c.runs
            .iter()
            .filter(|r| r.status == st)
            .map(|r| match r.report.signal {
                Some(s) => format!("signal {s}"),
                None => r.report.exit_code.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if c.failed > 0 {
        parts.push(format!(
            "{} failed run{} (exit code {})",
            c.failed,
            if c.failed == 1 { "" } else { "s" },
            codes(RunStatus::Failed)
        ));
    }
    if c.interrupted > 0 {
        parts.push(format!(
            "{} interrupted run{} ({})",
            c.interrupted,
            if c.interrupted == 1 { "" } else { "s" },
            codes(RunStatus::Interrupted)
        ));
    }
    (!parts.is_empty()).then(|| format!("  {} left out of the statistics\n", parts.join(" and ")))
}

/// The hyperfine-like summary of a benchmark.
pub fn text(rep: &Report) -> String {
    let mut s = String::new();
    let b = &rep.benchmark;
    for (i, c) in b.results.iter().enumerate() {
        let _ = writeln!(s, "Benchmark {}: {}", i + 1, c.command);
        match &c.summary {
            Some(st) => {
                let runs = format!("{} run{}", c.kept, if c.kept == 1 { "" } else { "s" });
                s += &line("Time", &st.duration_s, time_unit, &runs);
                s += &line("Energy", &st.total_j, energy_unit, &rep.label);
                s += &line(
                    "Command",
                    &st.attributed_j,
                    energy_unit,
                    "its CPU-time share",
                );
                let med = fmt_in(st.total_j.median, st.total_j.median, energy_unit);
                let cmed = fmt_in(st.attributed_j.median, st.attributed_j.median, energy_unit);
                let _ = writeln!(
                    s,
                    "  median energy {med}, command {cmed}; CPU {:.3} s, mean power {:.2} W",
                    st.child_cpu_s.mean, st.mean_power_w.mean
                );
                if let Some(g) = gpu_line(c) {
                    s += &g;
                }
                if let Some((i, label, n)) = disks_mean(c) {
                    let _ = writeln!(
                        s,
                        "  Disks   mean {} over {n} runs (beside the total, not in it): {label}",
                        i.display()
                    );
                }
                if let (Some(t), Some(a), Some(ci)) =
                    (&st.co2e_g, &st.attributed_co2e_g, &rep.carbon_intensity)
                {
                    let _ = writeln!(
                        s,
                        "  CO2e          {} ± {}, command {} ({})",
                        format_co2e(t.mean),
                        format_co2e(t.stddev),
                        format_co2e(a.mean),
                        co2e_basis(rep.provenance.estimated, ci)
                    );
                }
            }
            None => {
                let _ = writeln!(s, "  no run kept: every run failed or was interrupted");
            }
        }
        if let Some(l) = left_out(c) {
            s += &l;
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "Command energy is {}.", rep.attributed_label);
    if b.stopped_early {
        let _ = writeln!(
            s,
            "Stopped by a signal before every run was done: the figures cover the runs above."
        );
    }
    if let Some(best) = b.best {
        let _ = writeln!(s, "\nSummary");
        let _ = writeln!(s, "  '{}' used the least energy", b.results[best].command);
        for (i, c) in b.results.iter().enumerate() {
            if i == best {
                continue;
            }
            let (Some(r), Some(sd)) = (c.energy_ratio, c.energy_ratio_stddev) else {
                continue;
            };
            let p = c
                .p_holm
                .map(|p| format!(" ({}, Holm)", fmt_p(p)))
                .unwrap_or_default();
            let _ = writeln!(s, "    {r:.2} ± {sd:.2} times less than '{}'{p}", c.command);
        }
    }
    s
}

/// The GPUs' mean energy over a command's kept runs, when they were read (NVML).
fn gpu_line(c: &CommandResult) -> Option<String> {
    let kept: Vec<&RunReport> = c
        .runs
        .iter()
        .filter(|r| r.report.status() == RunStatus::Ok)
        .map(|r| &r.report)
        .collect();
    let gpu: Vec<f64> = kept.iter().filter_map(|r| r.energy.gpu_j).collect();
    if gpu.is_empty() {
        return None;
    }
    let mean = gpu.iter().sum::<f64>() / gpu.len() as f64;
    let label = kept
        .iter()
        .find_map(|r| r.energy.gpu_label.clone())
        .unwrap_or_default();
    Some(format!(
        "  GPU     mean {} over {} runs (beside the total, not in it): {label}\n",
        fmt_in(mean, mean, energy_unit),
        gpu.len()
    ))
}

/// The disks' intervals summed over the disks that have one, as the mean over a command's
/// kept runs (a central estimate only where every run has one), their labels, and the runs.
fn disks_mean(c: &CommandResult) -> Option<(wattio_devices::EnergyInterval, String, usize)> {
    let per_run: Vec<_> = c
        .kept_runs()
        .filter_map(|r| crate::disks::disks_total(r.disks.as_deref()?))
        .collect();
    let (first, label) = per_run.first().cloned()?;
    let n = per_run.len();
    let sum = per_run[1..].iter().fold(first, |s, (i, _)| s.plus(*i));
    Some((sum.scaled(1.0 / n as f64), label, n))
}

fn num(x: Option<f64>) -> String {
    x.map(|v| v.to_string()).unwrap_or_default()
}

/// The CSV columns, one row per command.
pub const CSV_COLUMNS: &[&str] = &[
    "command",
    "runs_kept",
    "runs_failed",
    "runs_interrupted",
    "duration_mean_s",
    "duration_stddev_s",
    "duration_median_s",
    "duration_min_s",
    "duration_max_s",
    "total_mean_j",
    "total_stddev_j",
    "total_median_j",
    "total_min_j",
    "total_max_j",
    "attributed_mean_j",
    "attributed_stddev_j",
    "attributed_median_j",
    "attributed_min_j",
    "attributed_max_j",
    "child_cpu_mean_s",
    "mean_power_w",
    "energy_ratio",
    "energy_ratio_stddev",
    "p_value",
    "p_holm",
    "estimated",
    "label",
    "attributed_label",
    "co2e_mean_g",
    "attributed_co2e_mean_g",
    "carbon_intensity_g_per_kwh",
    "carbon_intensity_source",
    "disks_lower_mean_j",
    "disks_central_mean_j",
    "disks_upper_mean_j",
    "disks_label",
];

/// One row per command: counts, statistics over the kept runs, the comparison, the labels.
pub fn csv(rep: &Report) -> String {
    let mut s = CSV_COLUMNS.join(",") + "\n";
    for c in &rep.benchmark.results {
        let mut row = vec![
            csv_field(&c.command),
            c.kept.to_string(),
            c.failed.to_string(),
            c.interrupted.to_string(),
        ];
        let st = c.summary;
        for get in [
            (|s: &super::bench::CommandStats| s.duration_s) as fn(&_) -> Stat,
            |s| s.total_j,
            |s| s.attributed_j,
        ] {
            let x = st.as_ref().map(get);
            for f in [
                (|x: &Stat| x.mean) as fn(&Stat) -> f64,
                |x| x.stddev,
                |x| x.median,
                |x| x.min,
                |x| x.max,
            ] {
                row.push(num(x.as_ref().map(f)));
            }
        }
        row.push(num(st.map(|s| s.child_cpu_s.mean)));
        row.push(num(st.map(|s| s.mean_power_w.mean)));
        for x in [c.energy_ratio, c.energy_ratio_stddev, c.p_value, c.p_holm] {
            row.push(num(x));
        }
        row.push(rep.provenance.estimated.to_string());
        row.push(csv_field(&rep.label));
        row.push(csv_field(&rep.attributed_label));
        // Empty without --carbon-intensity or --region.
        row.push(num(st.and_then(|s| s.co2e_g).map(|x| x.mean)));
        row.push(num(st.and_then(|s| s.attributed_co2e_g).map(|x| x.mean)));
        row.push(num(rep.carbon_intensity.as_ref().map(|c| c.g_per_kwh)));
        row.push(
            rep.carbon_intensity
                .as_ref()
                .map(|c| csv_field(&c.source))
                .unwrap_or_default(),
        );
        // Empty where no disk has power figures.
        let disks = disks_mean(c);
        row.push(num(disks.as_ref().map(|d| d.0.lower_j)));
        row.push(num(disks.as_ref().and_then(|d| d.0.central_j)));
        row.push(num(disks.as_ref().map(|d| d.0.upper_j)));
        row.push(disks.map(|d| csv_field(&d.1)).unwrap_or_default());
        s += &row.join(",");
        s.push('\n');
    }
    s
}

/// About four significant digits, fixed notation.
fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x:.3}");
    }
    let d = (3 - x.abs().log10().floor() as i32).clamp(0, 9) as usize;
    format!("{x:.d$}")
}

/// A command as a Markdown code span inside a table cell.
fn md_code(cmd: &str) -> String {
    // The table's own rule escapes `|` and line breaks (`wattio_results::markdown_cell`).
    if cmd.contains('`') {
        format!("`` {cmd} ``")
    } else {
        format!("`{cmd}`")
    }
}

/// The Markdown table columns.
pub const MARKDOWN_COLUMNS: &[&str] = &[
    "Command",
    "Time [s]",
    "Energy [J]",
    "Command energy [J]",
    "Relative energy",
    "p (Holm)",
    "Runs",
];

/// A hyperfine-like Markdown table, mean ± σ over the kept runs, with the labels under it.
pub fn markdown(rep: &Report) -> String {
    let columns: Vec<(&str, Align)> = MARKDOWN_COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, if i == 0 { Align::Left } else { Align::Right }))
        .collect();
    let mut table = Table::new(&columns);
    let pm = |x: &Stat| format!("{} ± {}", sig(x.mean), sig(x.stddev));
    for c in &rep.benchmark.results {
        let (t, e, ce) = match &c.summary {
            Some(st) => (pm(&st.duration_s), pm(&st.total_j), pm(&st.attributed_j)),
            None => ("—".into(), "—".into(), "—".into()),
        };
        let rel = match (c.energy_ratio, c.energy_ratio_stddev) {
            (Some(r), Some(sd)) if sd > 0.0 => format!("{r:.2} ± {sd:.2}"),
            (Some(r), _) => format!("{r:.2}"),
            _ => "—".into(),
        };
        let p = c.p_holm.map(|p| format!("{p:.4}")).unwrap_or("—".into());
        let mut runs = c.kept.to_string();
        if c.failed + c.interrupted > 0 {
            runs += &format!(" (+{} left out)", c.failed + c.interrupted);
        }
        table.push(vec![md_code(&c.command), t, e, ce, rel, p, runs]);
    }
    let mut s = table.markdown();
    let _ = writeln!(
        s,
        "\nEnergy: the machine's, {}. Command energy: {}. Mean ± σ over the kept runs; p: two-sided Wilcoxon rank-sum test of energy against the best command, Holm-adjusted.",
        rep.label, rep.attributed_label
    );
    if let Some(ci) = &rep.carbon_intensity {
        let _ = writeln!(s, "\nCO2e at {}:\n", ci.label());
        for c in &rep.benchmark.results {
            if let Some((t, a)) = c
                .summary
                .as_ref()
                .and_then(|st| Some((st.co2e_g?, st.attributed_co2e_g?)))
            {
                let _ = writeln!(
                    s,
                    "- {}: {} ± {} (machine), {} (command)",
                    md_code(&c.command),
                    format_co2e(t.mean),
                    format_co2e(t.stddev),
                    format_co2e(a.mean)
                );
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::bench::tests::{plan, Fake};
    use crate::measure::bench::{run_benchmark, Report};
    use crate::measure::Exit;
    use wattio_energy::{Mechanism, Provenance};
    use wattio_progress::{Cancel, Sink};

    fn report() -> Report {
        let ok = |j: f64| (j, 0.5, 0.25, Exit::code(0));
        let mut fake = Fake::with(&[
            (
                "sleep 1, \"x\"",
                vec![ok(4.0), ok(6.0), (9.0, 0.5, 0.1, Exit::code(1))],
            ),
            ("a | b", vec![ok(1.0), ok(1.5), ok(2.0)]),
        ]);
        let mut p = plan(&["sleep 1, \"x\"", "a | b"], 3);
        p.ignore_failure = true;
        let b = run_benchmark(&p, &mut fake, &Cancel::new().unwrap(), &Sink::none()).unwrap();
        let prov = Provenance {
            mechanism: Mechanism::Model,
            estimated: true,
            model: Some("ccf-linear(min=0.74W,max=3.5W per vCPU)".into()),
        };
        Report::new(&prov, 2, &p, b)
    }

    #[test]
    fn the_summary_names_the_least_energy_command_with_ratio_and_p() {
        let t = text(&report());
        assert!(t.contains("Benchmark 1: sleep 1, \"x\""), "{t}");
        assert!(t.contains("Time    (mean ± σ):"), "{t}");
        assert!(
            t.contains("Energy  (mean ± σ):     5.000 J ±    1.414 J"),
            "{t}"
        );
        assert!(t.contains("estimated (model: ccf-linear("), "{t}");
        assert!(
            t.contains("1 failed run (exit code 1) left out of the statistics"),
            "{t}"
        );
        assert!(t.contains("'a | b' used the least energy"), "{t}");
        // 5 J over 1.5 J.
        assert!(t.contains("3.33 ± "), "{t}");
        assert!(
            t.contains("times less than 'sleep 1, \"x\"' (p = 0.2000, Holm)"),
            "{t}"
        );
        assert!(t.contains("1.500 J"), "{t}");
    }

    #[test]
    fn csv_quotes_commands_and_has_one_row_per_command() {
        let c = csv(&report());
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].split(',').count(), CSV_COLUMNS.len());
        assert!(
            lines[1].starts_with("\"sleep 1, \"\"x\"\"\",2,1,0,0.5,0,0.5,"),
            "{c}"
        );
        assert!(lines[2].starts_with("a | b,3,0,0,"), "{c}");
        assert!(
            lines[2].contains(
                ",1,0,,,true,\"estimated (model: ccf-linear(min=0.74W,max=3.5W per vCPU))\","
            ),
            "{c}"
        );
    }

    #[test]
    fn markdown_escapes_pipes() {
        let m = markdown(&report());
        assert!(m.starts_with("| Command | Time [s] | Energy [J] |"), "{m}");
        assert!(
            m.contains("| `a \\| b` | 0.5000 ± 0.000 | 1.500 ± 0.5000 |"),
            "{m}"
        );
        assert!(m.contains("| 2 (+1 left out) |"), "{m}");
        assert!(m.contains("attributed (cpu-time share)"), "{m}");
        assert_eq!(sig(1234.6), "1235");
        assert_eq!(sig(0.012345), "0.01235");
    }

    #[test]
    fn single_run_prints_total_and_command_share_with_labels() {
        let r = RunReport::new(
            crate::measure::tests::energy(10.0, 1.0),
            Exit::code(0),
            0.5,
            2,
        );
        let t = single_run("true", &r);
        assert!(t.contains("total        10.000 J"), "{t}");
        assert!(
            t.contains("command share 2.500 J, its CPU-time share of the total: estimated (model:"),
            "{t}"
        );
    }
}
