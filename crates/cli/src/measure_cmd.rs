//! `wattio measure`: flags, files and printing over `wattio_meter::measure` (the run loop,
//! statistics and renderings live there).

use crate::meter_cmd::SourceArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use wattio_meter::measure::bench::{run_benchmark, BenchProgress, MeasurePlan, Report};
use wattio_meter::measure::{
    online_cpus, render, CommandSpec, MeasureError, MeterExecutor, SingleRun,
};
use wattio_progress::Sink;

#[derive(Args)]
pub struct MeasureArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    carbon: crate::meter_cmd::CarbonArgs,
    /// Measured runs per command [default: 1 for a command after `--`, 10 for shell commands].
    /// `--repeat` is its old name.
    #[arg(long, alias = "repeat", value_name = "N")]
    runs: Option<u64>,
    /// Unmeasured runs of each command before the measured ones.
    #[arg(long, default_value_t = 0, value_name = "N")]
    warmup: usize,
    /// Shell command run before every run, warmups included; never measured.
    #[arg(long, value_name = "CMD")]
    prepare: Option<String>,
    /// Go on when a run exits non-zero: such runs are reported and left out of the statistics.
    #[arg(short = 'i', long)]
    ignore_failure: bool,
    /// Let the commands write to the terminal (always so for a single run of one command;
    /// otherwise their input and output are /dev/null).
    #[arg(long)]
    show_output: bool,
    /// Do not sync after each run. By default a run whose command dirtied data is followed by
    /// sync(2), measured apart as its sync phase: the writeback the command caused.
    #[arg(long)]
    no_sync: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Write every run, the statistics and the comparison as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    export_json: Option<PathBuf>,
    /// Write one CSV row per command (statistics, comparison, labels) to FILE.
    #[arg(long, value_name = "FILE")]
    export_csv: Option<PathBuf>,
    /// Write a Markdown table of the commands to FILE.
    #[arg(long, value_name = "FILE")]
    export_markdown: Option<PathBuf>,
    /// Shell commands to compare, each run with `sh -c`: `wattio measure 'cmd A' 'cmd B'`.
    #[arg(value_name = "COMMAND")]
    commands: Vec<String>,
    /// Or one command after `--`, run directly: `wattio measure -- prog args…`.
    #[arg(last = true, value_name = "ARGV")]
    argv: Vec<OsString>,
    #[command(flatten)]
    gate: GateArgs,
}

/// The energy gate for CI (docs/ci.md): compare against a baseline, exit 1 on a significant
/// increase beyond a limit.
#[derive(Args)]
struct GateArgs {
    /// Fail (exit 1) when the command's energy exceeds its baseline's by more than this,
    /// significantly (one-sided Wilcoxon rank-sum test at --alpha), e.g. 5% (a plain number is
    /// percent). The baseline is --baseline FILE, or else the first of two commands, run
    /// interleaved with the second.
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    max_increase: Option<f64>,
    /// A previous `wattio measure --export-json FILE` (or --json) of the same command, whose
    /// kept runs are the baseline.
    #[arg(long, value_name = "FILE", requires = "max_increase")]
    baseline: Option<PathBuf>,
    /// The gate's significance level: the chance it fails a change that does not exceed the
    /// limit is at most this.
    #[arg(long, default_value_t = 0.05, requires = "max_increase")]
    alpha: f64,
    /// Write the gate's verdict as Markdown to FILE (e.g. $GITHUB_STEP_SUMMARY).
    #[arg(long, value_name = "FILE", requires = "max_increase")]
    gate_summary: Option<PathBuf>,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage: give e.g. 5%"))?;
    if !(0.0..=1000.0).contains(&v) {
        return Err(format!("{s} is outside 0% to 1000%"));
    }
    Ok(v / 100.0)
}

/// The baseline's joules per kept run, their label and the command, from a `measure` JSON
/// document.
fn load_baseline(path: &std::path::Path) -> Result<(Vec<f64>, String, String)> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "--baseline {}: cannot read it; give the file `wattio measure --export-json` wrote",
            path.display()
        )
    })?;
    let report: Report = serde_json::from_str(&text).with_context(|| {
        format!(
            "--baseline {}: not a `wattio measure --export-json` document of several runs",
            path.display()
        )
    })?;
    let Some(first) = report.benchmark.results.first() else {
        bail!("--baseline {}: it holds no command", path.display());
    };
    let joules = first.kept_runs().map(|r| r.attributed_j).collect();
    Ok((joules, report.attributed_label, first.command.clone()))
}

/// Creates an export file before anything runs, so a bad path costs no benchmark.
fn create(flag: &str, path: &Option<PathBuf>) -> Result<Option<(File, PathBuf)>> {
    path.as_ref()
        .map(|p| {
            File::create(p).map(|f| (f, p.clone())).with_context(|| {
                format!(
                    "cannot write {flag} {}: check that the directory exists and is writable",
                    p.display()
                )
            })
        })
        .transpose()
}

fn write_export(file: Option<(File, PathBuf)>, text: &str) -> Result<()> {
    if let Some((mut f, p)) = file {
        f.write_all(text.as_bytes())
            .and_then(|_| f.flush())
            .with_context(|| format!("writing {}: check the disk has room", p.display()))?;
    }
    Ok(())
}

fn progress_bar(total: usize) -> (indicatif::ProgressBar, Sink<BenchProgress>) {
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg} [{bar:25}] {pos}/{len} runs {elapsed}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    // The spinner and the elapsed time move during a long run too (hidden off a terminal).
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let b = bar.clone();
    let update = Sink::new(move |p: &BenchProgress| {
        b.set_position(p.runs.done as u64);
        let cmd = &p.runs.label;
        let cmd: String = if cmd.chars().count() > 30 {
            cmd.chars().take(29).chain(['…']).collect()
        } else {
            cmd.clone()
        };
        b.set_message(format!(
            "{}{} {}/{}: {cmd}",
            if p.warmup { "warmup " } else { "" },
            "run",
            p.run,
            p.of
        ));
    });
    (bar, update)
}

/// Warnings on stderr: the runs' read errors, and counters a run was too short to see update
/// three times.
fn warn_about_runs(report: &Report, meter: &wattio_meter::Meter) {
    for c in &report.benchmark.results {
        for r in &c.runs {
            for e in &r.report.energy.read_errors {
                crate::say::warn(e);
            }
        }
    }
    // A window a few counter updates long is mostly quantisation. Only short runs pay for
    // learning the counters' periods (up to 300 ms), and only once.
    let shortest_s = report
        .benchmark
        .results
        .iter()
        .flat_map(|c| &c.runs)
        .map(|r| r.report.energy.duration_s)
        .fold(f64::INFINITY, f64::min);
    if shortest_s < SHORT_RUN_S {
        for w in meter.short_window_warnings(shortest_s) {
            crate::say::warn(w);
        }
    }
}

/// Runs shorter than this are checked against the counters' update periods (the slowest, a
/// GPU's at about 100 ms, needs 300 ms for three updates).
const SHORT_RUN_S: f64 = 1.0;

/// The commands to measure, and whether the gate is on, after checking the arguments that
/// combine them.
fn checked_commands(a: &MeasureArgs) -> Result<(Vec<CommandSpec>, bool)> {
    let argv_form = !a.argv.is_empty();
    if argv_form && !a.commands.is_empty() {
        bail!(
            "give either shell commands ('cmd A' 'cmd B') or one command after `--`, not both: \
             quote the command after `--` as one more shell command"
        );
    }
    let commands: Vec<CommandSpec> = if argv_form {
        vec![CommandSpec::Argv(a.argv.clone())]
    } else {
        a.commands.iter().cloned().map(CommandSpec::Shell).collect()
    };
    if commands.is_empty() {
        return Err(MeasureError::NoCommand.into());
    }
    let gate = a.gate.max_increase.is_some();
    if gate {
        let wanted = if a.gate.baseline.is_some() { 1 } else { 2 };
        if commands.len() != wanted {
            bail!(
                "--max-increase compares one command with --baseline FILE, or two commands (the baseline first, run interleaved with the second); got {} command(s)",
                commands.len()
            );
        }
        if !(a.gate.alpha > 0.0 && a.gate.alpha <= 0.5) {
            bail!(
                "--alpha must be above 0 and at most 0.5, e.g. 0.05 (got {})",
                a.gate.alpha
            );
        }
    }
    Ok((commands, gate))
}

/// The one run of a wrapper-style `measure` (one command, one run): its report, and its exit
/// status passed through.
fn print_single(json: bool, plan: &MeasurePlan, report: &Report) -> Result<ExitCode> {
    let b = &report.benchmark;
    let Some(run) = b.results[0].runs.first() else {
        return Ok(ExitCode::from(130)); // stopped before it started
    };
    if json {
        let single = SingleRun {
            report: run.report.clone(),
            command: match &plan.commands[0] {
                CommandSpec::Argv(argv) => argv
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect(),
                CommandSpec::Shell(s) => vec!["sh".into(), "-c".into(), s.clone()],
            },
        };
        // Through a `Value`, whose keys are sorted, as every version wrote them.
        let v = serde_json::to_value(&single)?;
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render::single_run(&b.results[0].command, &run.report));
    }
    std::io::stdout().flush().ok();
    Ok(ExitCode::from(run.report.exit_code.clamp(0, 255) as u8))
}

pub fn measure(a: MeasureArgs) -> Result<ExitCode> {
    let argv_form = !a.argv.is_empty();
    let (commands, gate) = checked_commands(&a)?;
    let baseline = a.gate.baseline.as_deref().map(load_baseline).transpose()?;
    let runs = a.runs.unwrap_or(if argv_form && !gate { 1 } else { 10 });
    if runs == 0 {
        return Err(MeasureError::NoRuns.into());
    }
    let runs = usize::try_from(runs).context("--runs is too large")?;
    // One run of one command: a wrapper, like `time` and `perf stat`. Its exit status passes
    // through and its output goes to the terminal.
    let single = commands.len() == 1 && runs == 1 && !gate;
    let exports = (
        create("--export-json", &a.export_json)?,
        create("--export-csv", &a.export_csv)?,
        create("--export-markdown", &a.export_markdown)?,
    );
    let gate_summary = create("--gate-summary", &a.gate.gate_summary)?;
    let plan = MeasurePlan {
        commands,
        runs,
        warmup: a.warmup,
        prepare: a.prepare.clone().map(CommandSpec::Shell),
        ignore_failure: a.ignore_failure || single,
    };

    let co2e = a.carbon.co2e()?;
    let cfg = a.source.config()?;
    let meter = a.source.open_meter()?;
    let n_cpus = online_cpus(&cfg.root)?;
    // Ctrl-C goes to the whole process group: the running command gets it and ends; we stop
    // after it and report the runs done.
    let cancel = crate::study_ui::cancel_on_signals()?;
    let mut exec = MeterExecutor::new(&meter, n_cpus, single || a.show_output);
    if !a.no_sync {
        exec = exec.syncing(cfg.root.clone());
    }
    let kio_mode =
        std::env::var(wattio_energy::attribution::kernel_io::KERNEL_IO_ENV).unwrap_or_default();
    exec = exec
        .with_kernel_io(&cfg.root, &kio_mode)?
        .with_regions(cfg.root.clone())
        .with_disks(&cfg.root)?;
    let bench = if single || a.show_output {
        run_benchmark(&plan, &mut exec, &cancel, &Sink::none())?
    } else {
        let (bar, update) = progress_bar((plan.warmup + plan.runs) * plan.commands.len());
        let r = run_benchmark(&plan, &mut exec, &cancel, &update);
        bar.finish_and_clear();
        r?
    };
    let mut report = Report::new(meter.provenance(), n_cpus, &plan, bench);
    if let Some(co2e) = &co2e {
        co2e.apply(&mut report);
    }

    if exports.0.is_some() {
        write_export(exports.0, &serde_json::to_string_pretty(&report)?)?;
    }
    write_export(exports.1, &render::csv(&report))?;
    write_export(exports.2, &render::markdown(&report))?;
    warn_about_runs(&report, &meter);

    if single {
        return print_single(a.json, &plan, &report);
    }
    let b = &report.benchmark;
    let verdict = match a.gate.max_increase {
        Some(limit) => Some(judge_gate(&report, baseline, limit, a.gate.alpha)?),
        None => None,
    };
    if a.json {
        let mut v = serde_json::to_value(&report)?;
        if let (Some(g), Some(map)) = (&verdict, v.as_object_mut()) {
            map.insert("gate".into(), serde_json::to_value(g)?);
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render::text(&report));
        if let Some(g) = &verdict {
            print!("{}", g.text());
        }
    }
    std::io::stdout().flush().ok();
    if let Some(g) = &verdict {
        let command = &b.results[b.results.len() - 1].command;
        write_export(gate_summary, &g.markdown(command))?;
        if g.failed {
            return Ok(ExitCode::from(1));
        }
    }
    if let Some(c) = b.without_kept_runs().first() {
        bail!(
            "no run of '{}' was kept ({} failed, {} interrupted): fix the command (--show-output shows its output); its figures are missing",
            c.command,
            c.failed,
            c.interrupted
        );
    }
    if b.stopped_early {
        return Ok(ExitCode::from(130));
    }
    Ok(ExitCode::SUCCESS)
}

/// The gate's verdict on the last command's runs against the baseline: the file's runs, or else
/// the first command's.
fn judge_gate(
    report: &Report,
    baseline: Option<(Vec<f64>, String, String)>,
    limit: f64,
    alpha: f64,
) -> Result<wattio_meter::measure::gate::GateVerdict> {
    let results = &report.benchmark.results;
    let joules =
        |i: usize| -> Vec<f64> { results[i].kept_runs().map(|r| r.attributed_j).collect() };
    let (base, base_label) = match baseline {
        Some((j, label, command)) => {
            // The same program may sit at another path in another checkout: said, not refused.
            if command != results[0].command {
                crate::say::warn(format_args!(
                    "the baseline ran '{command}', these runs '{}': check they measure the same work",
                    results[0].command
                ));
            }
            (j, label)
        }
        None => (joules(0), report.attributed_label.clone()),
    };
    let new = joules(results.len() - 1);
    Ok(wattio_meter::measure::gate::judge(
        &base,
        &new,
        (&base_label, &report.attributed_label),
        limit,
        alpha,
    )?)
}
