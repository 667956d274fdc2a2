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
                eprintln!("wattio: warning: {e}");
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
            eprintln!("wattio: warning: {w}");
        }
    }
}

/// Runs shorter than this are checked against the counters' update periods (the slowest, a
/// GPU's at about 100 ms, needs 300 ms for three updates).
const SHORT_RUN_S: f64 = 1.0;

pub fn measure(a: MeasureArgs) -> Result<ExitCode> {
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
    let runs = a.runs.unwrap_or(if argv_form { 1 } else { 10 });
    if runs == 0 {
        return Err(MeasureError::NoRuns.into());
    }
    let runs = usize::try_from(runs).context("--runs is too large")?;
    // One run of one command: a wrapper, like `time` and `perf stat`. Its exit status passes
    // through and its output goes to the terminal.
    let single = commands.len() == 1 && runs == 1;
    let exports = (
        create("--export-json", &a.export_json)?,
        create("--export-csv", &a.export_csv)?,
        create("--export-markdown", &a.export_markdown)?,
    );
    let plan = MeasurePlan {
        commands,
        runs,
        warmup: a.warmup,
        prepare: a.prepare.clone().map(CommandSpec::Shell),
        ignore_failure: a.ignore_failure || single,
    };

    let carbon = a.carbon.intensity()?;
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
        .with_regions(cfg.root.clone());
    let bench = if single || a.show_output {
        run_benchmark(&plan, &mut exec, &cancel, &Sink::none())?
    } else {
        let (bar, update) = progress_bar((plan.warmup + plan.runs) * plan.commands.len());
        let r = run_benchmark(&plan, &mut exec, &cancel, &update);
        bar.finish_and_clear();
        r?
    };
    let mut report = Report::new(meter.provenance(), n_cpus, &plan, bench);
    if let Some(intensity) = &carbon {
        report = report.with_carbon(intensity);
    }

    if exports.0.is_some() {
        write_export(exports.0, &serde_json::to_string_pretty(&report)?)?;
    }
    write_export(exports.1, &render::csv(&report))?;
    write_export(exports.2, &render::markdown(&report))?;
    warn_about_runs(&report, &meter);

    let b = &report.benchmark;
    if single {
        let Some(run) = b.results[0].runs.first() else {
            return Ok(ExitCode::from(130)); // stopped before it started
        };
        if a.json {
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
        return Ok(ExitCode::from(run.report.exit_code.clamp(0, 255) as u8));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render::text(&report));
    }
    std::io::stdout().flush().ok();
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
